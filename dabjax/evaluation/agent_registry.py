"""Agents by name, as used on the command line: ``make_agent(spec, geometry) -> Agent``.

Specs (kind: ``jax`` agents run batched under jit, ``host`` agents in NumPy/numba/Python game by game):

* ``random``, ``level1``, ``level2``, ``greedy`` (jax): handcrafted (``dabjax.game.policies``;
  ``greedy`` is BoxesZero's opening policy);
* ``mcts:SIMS`` (jax): pure MCTS, UCB1, one random rollout per leaf, most visited move;
* ``alphabeta:DEPTH`` (host): depth-limited alpha-beta with chain rules and a score heuristic
  (``dabjax.baselines.alphabeta``);
* ``solver`` (host): exact best-margin play (random among best moves): the whole-board table on boards of at
  most 24 lines, else the position solver within ``SOLVER_TIME_LIMIT`` seconds a move, falling back to
  ``alphabeta:4`` when it does not finish. It is ``ExactAgent`` over ``alphabeta:4`` with ``max_undrawn=None``:
  it tries every position, where ``alphabeta:4+exact:10`` skips those over its self-adjusting limit on undrawn
  lines;
* ``SPEC+exact[:SECONDS]`` (host), for any other spec: exact play where it is cheap: the solver's best-margin
  move when it proves the position within SECONDS (default 2) of wall time, SPEC's move otherwise
  (``dabjax.evaluation.exact_play``; e.g. ``pretrained:5x5+exact``, ``ckpt:RUN:64+exact:0.5``);
* ``ckpt:PATH[:SIMS]`` (jax): a checkpoint (run directory = latest, or ``RUN/checkpoints/<iteration>``, or an
  agent folder in the pretrained format) with its search at SIMS simulations (default: its config's), no
  Gumbel noise; SIMS 0 = the raw policy (argmax of masked logits); a graph network plays any board;
* ``pretrained:RxC[:SIMS]`` (jax): the agent shipped for board RxC (``dabjax.evaluation.pretrained``; e.g.
  ``pretrained:4x4``), with its search at SIMS simulations (default: the shipped setting), as ``ckpt:``;
* ``td:PATH`` (jax): a TD(lambda) value network (``dabjax.baselines.td``; Kabir 2004): the move whose successor
  it values best;
* ``mcts-net:PATH:SIMS:THRESHOLD`` (jax): UCT with random rollouts cut off once the value network of PATH (a
  TD or a BoxesZero run) has ``|v| >= THRESHOLD`` (``dabjax.baselines.mcts_net``; Cotarelo et al. 2021);
* ``openspiel-mcts:SIMS`` (host): OpenSpiel's ``MCTSBot`` with random rollouts (optional dependency).

A clock, ``SPEC@Ns`` (host), plays every move within N seconds of wall time, and uses them
(``dabjax.evaluation.clock``): ``ckpt:`` and ``pretrained:`` agents prove the result class with the solver where
it can finish, then search at the most simulations the time left affords (SIMS, when given, is the least; e.g.
``pretrained:5x5@2s``, ``pretrained:4x4:256@0.5s``); ``alphabeta:DEPTH@Ns`` deepens until the time is spent. A
clock agent solves by itself, so ``+exact`` and ``@Ns`` do not go together.

Every command that takes an agent (``dabjax arena``, ``play``, ``serve``, ...) makes it here, so a spec means the
same everywhere; ``parse_agent_spec`` is the one reading of the grammar (kind, argument, ``+exact`` suffix). The
``ckpt:``, ``td:`` and ``mcts-net:`` agents read their checkpoint when made (``dabjax.training.checkpoint``);
``load_network`` is the one reading of the network behind ``ckpt:`` and ``pretrained:`` specs (the web page shows
that network's search).
Errors are ``ValueError`` (``FileNotFoundError`` for a missing checkpoint) naming the bad spec; ``solver`` and
``SPEC+exact`` on a board of more lines than the position solver takes (``MAX_SOLVER_LINES``,
``dabjax.solvers.position_solver``) are one, naming the board and the limit.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp

from dabjax.baselines.alphabeta import AlphaBetaAgent
from dabjax.evaluation import clock, exact_play, pretrained
from dabjax.game import env as env_lib
from dabjax.game import policies
from dabjax.game.env import Agent
from dabjax.game.geometry import BoardGeometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.solvers.position_solver import solver_refusal

SOLVER_TIME_LIMIT = 10.0  # seconds per move for the position solver (boards above 24 lines)
EXACT_SUFFIX = "+exact"
CLOCK_MARK = "@"
CLOCK_KINDS = ("ckpt", "pretrained", "alphabeta")  # the kinds a clock (@Ns) applies to
HANDCRAFTED_SPECS = ("random", "level1", "level2", "greedy")  # level0 (the same agent as random) is no spec
SPEC_HELP = (
    "random | level1 | level2 | greedy | mcts:SIMS | alphabeta:DEPTH | solver | ckpt:PATH[:SIMS] | "
    "pretrained:RxC[:SIMS] | "
    "td:PATH | mcts-net:PATH:SIMS:THRESHOLD | openspiel-mcts:SIMS, each optionally followed by +exact[:SECONDS]; "
    "ckpt:, pretrained: and alphabeta: optionally followed by a clock, @Ns (seconds a move)"
)


def _positive_int(spec: str, text: str, what: str, minimum: int = 1) -> int:
    if not text.strip().isdigit() or int(text) < minimum:
        raise ValueError(f"agent {spec!r}: {what} must be an integer >= {minimum}, got {text!r}")
    return int(text)


# --- reading a spec -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """A spec read once (``parse_agent_spec``): ``kind`` and ``argument`` are what precedes and follows the first
    ``:`` of ``without_exact``, ``kind`` lower-cased; ``argument`` is "" when there is no ``:``."""

    text: str  # the spec as written, stripped: the name of the agent made from it
    kind: str  # "greedy", "mcts", "ckpt", "pretrained", ... (an unknown kind is make_agent's error)
    argument: str  # SIMS, DEPTH, PATH[:SIMS], RxC[:SIMS], ... as written
    exact_seconds: float | None  # the budget of a +exact[:SECONDS] suffix; None without one
    without_exact: str  # ``text`` less its +exact or @Ns suffix: the spec that errors about kind and argument name
    clock_seconds: float | None = None  # the seconds a move of an @Ns suffix; None without one

    def whole_number(self, what: str, minimum: int = 1) -> int:
        """The argument as an integer >= ``minimum``; a ValueError naming the spec and ``what`` otherwise."""
        return _positive_int(self.without_exact, self.argument, what, minimum)


def parse_exact_spec(spec: str) -> tuple[str, float] | None:
    """``SPEC+exact[:SECONDS]`` -> ``(SPEC, SECONDS)`` (default ``exact_play.DEFAULT_SECONDS``); None without
    the suffix."""
    head, found, tail = spec.rpartition(EXACT_SUFFIX)
    if not found:
        return None
    if not head.strip():
        raise ValueError(f"agent {spec!r}: write AGENT+exact[:SECONDS], e.g. pretrained:5x5+exact:2")
    if not tail:
        return head.strip(), exact_play.DEFAULT_SECONDS
    try:
        seconds = float(tail[1:]) if tail.startswith(":") else float("nan")
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise ValueError(f"agent {spec!r}: +exact takes a time budget in seconds > 0 (+exact:2), got {tail!r}")
    return head.strip(), seconds


def parse_clock_spec(spec: str) -> tuple[str, float] | None:
    """``SPEC@Ns`` (or ``SPEC@N``) -> ``(SPEC, N)``; None without the suffix. The ``@`` is the last one, so that a
    path in SPEC may hold one."""
    head, found, tail = spec.rpartition(CLOCK_MARK)
    if not found:
        return None
    number = tail.strip()[:-1] if tail.strip().endswith("s") else tail.strip()
    try:
        seconds = float(number)
    except ValueError:
        seconds = float("nan")
    if not head.strip() or not 0 < seconds < float("inf"):
        raise ValueError(f"agent {spec!r}: a clock is AGENT@SECONDSs with seconds a move > 0, e.g. "
                         f"pretrained:5x5@2s, got {tail!r}")
    return head.strip(), seconds


def parse_agent_spec(spec: str) -> AgentSpec:
    """The one reading of the spec grammar (module docstring) that ``make_agent``, ``load_network`` and
    ``search_policy`` share. Only a malformed ``+exact`` or ``@Ns`` suffix, or both at once, is an error here;
    each kind checks its argument where it is made."""
    text = str(spec).strip()
    clock = parse_clock_spec(text)
    without_clock, clock_seconds = (text, None) if clock is None else clock
    exact = parse_exact_spec(without_clock)
    without_exact, exact_seconds = (without_clock, None) if exact is None else exact
    if clock is not None and exact is not None:
        raise ValueError(f"agent {text!r}: an agent on a clock (@Ns) solves by itself within its time; drop "
                         f"+exact, e.g. {without_exact}@{clock_seconds:g}s")
    kind, _, argument = without_exact.partition(":")
    return AgentSpec(text, kind.lower(), argument, exact_seconds, without_exact, clock_seconds)


# --- checkpoints ----------------------------------------------------------------------------------------


def network_policy_agent(network_config: network.NetworkConfig, params) -> Agent:
    """The network's raw policy: the legal move of highest logit (no search). Jit-able."""
    model = network.PolicyValueNet(network_config)

    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        del key
        observations = jax.vmap(lambda s: env_lib.observe(geometry, s))(states)
        logits, _ = model.apply(params, observations)
        return jnp.argmax(network.mask_logits(logits, ~states.lines), axis=-1).astype(jnp.int32)

    return agent


@functools.lru_cache(maxsize=None)
def _compiled_checkpoint_policy(
    network_config: network.NetworkConfig, search_config: mcts.SearchConfig | None, env: env_lib.Env
):
    """jit ``(params, key, states) -> actions``: one compile per configuration and environment, shared by every
    checkpoint of a run (their parameters are arguments). ``search_config`` None: the raw policy."""
    geometry = env.geometry
    if search_config is None:
        return jax.jit(lambda params, key, states: network_policy_agent(network_config, params)(geometry, key, states))
    evaluator = mcts.network_evaluator(network_config, geometry)
    return jax.jit(
        lambda params, key, states: search_agents.search_agent(search_config, env, evaluator, params)(
            geometry, key, states)
    )


def checkpoint_agent(checkpoint, geometry: BoardGeometry, num_simulations: int | None = None) -> Agent:
    """The agent of a loaded checkpoint (``dabjax.training.checkpoint.PlayableCheckpoint``) on ``geometry``.

    ``num_simulations``: None for the checkpoint's own setting, 0 for the raw policy (argmax of the masked
    logits). Search runs without Gumbel noise. Raises ValueError if the checkpoint was trained on another
    board size, unless its network plays any board (``network.plays_any_board``: the graph network). The agent
    compiles itself (``is_jitted``) for ``geometry`` only.
    """
    other_board = (checkpoint.rows, checkpoint.cols) != (geometry.rows, geometry.cols)
    if other_board and not network.plays_any_board(checkpoint.network_config):
        raise ValueError(
            f"checkpoint is for a {checkpoint.rows}x{checkpoint.cols} board but the board is {geometry.name}"
        )
    config = None
    if num_simulations != 0:
        sims = checkpoint.search_config.num_simulations if num_simulations is None else num_simulations
        config = dataclasses.replace(checkpoint.search_config, num_simulations=int(sims), gumbel_scale=0.0)
    # The rule it was trained with, on this board.
    env = env_lib.Env.of(geometry, checkpoint.early_termination)
    compiled = _compiled_checkpoint_policy(checkpoint.network_config, config, env)
    return bound_agent(compiled, checkpoint.params, geometry, "checkpoint")


def bound_agent(compiled, params, geometry: BoardGeometry, what: str) -> Agent:
    """The agent ``compiled(params, key, states)`` with its parameters bound; it compiles itself
    (``is_jitted``) for ``geometry`` only (``what`` names it in the error for another board)."""

    def agent(agent_geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        if agent_geometry != geometry:
            raise ValueError(f"{what} agent built for {geometry.name} used on {agent_geometry.name}")
        return compiled(params, key, states)

    agent.is_jitted = True
    return agent


def parse_checkpoint_spec(spec: AgentSpec) -> tuple[str, int | None]:
    """``ckpt:PATH[:SIMS]`` -> ``(PATH, SIMS or None)``; the last ``:`` part is SIMS when it is a number."""
    head, _, tail = spec.argument.rpartition(":")
    if head and tail.strip().isdigit():
        return head, int(tail)
    if not spec.argument:
        raise ValueError(f"agent {spec.without_exact!r}: write ckpt:PATH or ckpt:PATH:SIMS")
    return spec.argument, None


def _load_checkpoint(spec: AgentSpec):
    """``ckpt:PATH[:SIMS]`` -> ``(PlayableCheckpoint, SIMS or None)``: PATH is an agent folder (an export, a
    warm start), a run directory (its newest checkpoint) or ``RUN/checkpoints/<iteration>``. Errors name the
    spec."""
    path, sims = parse_checkpoint_spec(spec)
    from dabjax.training import checkpoint as checkpoint_lib
    try:
        return pretrained.load_playable(path), sims  # FileNotFoundError / ValueError name the path
    except checkpoint_lib.DamagedCheckpointError as error:  # names the damaged checkpoint and what is wrong
        raise ValueError(f"agent {spec.without_exact!r}: {error}") from None
    except (TypeError, KeyError):  # meta without a policy-value network's settings
        if _is_td_run(path):
            raise ValueError(f"agent {spec.without_exact!r}: {path!r} is a TD run; use td:{path}") from None
        raise


def _load_pretrained(spec: AgentSpec, geometry: BoardGeometry):
    """``pretrained:RxC[:SIMS]`` -> ``(PlayableCheckpoint, SIMS or None)``; ``geometry`` names the board in the
    advice when RxC is missing. Errors name the spec."""
    board, _, sims = spec.argument.partition(":")
    if not board.strip():
        raise ValueError(f"agent {spec.without_exact!r}: write pretrained:RxC (e.g. pretrained:{geometry.name}), "
                         f"available: {', '.join(pretrained.available()) or 'none'}")
    simulations = _positive_int(spec.without_exact, sims, "SIMS (simulations)", minimum=0) if sims else None
    try:
        return pretrained.load_pretrained(board), simulations
    except ValueError as error:
        raise ValueError(f"agent {spec.without_exact!r}: {error}") from None


def load_network(spec: str, geometry: BoardGeometry):
    """The network behind a spec that plays one: ``(PlayableCheckpoint, SIMS or None)`` for ``ckpt:PATH[:SIMS]``
    and ``pretrained:RxC[:SIMS]`` (``SPEC+exact`` gives SPEC's), None for every other spec. SIMS None: the
    network's own search setting; 0: its raw policy.

    The one way a spec becomes a network: ``make_agent`` plays with it and the web page (``dabjax serve``) shows
    its search with it, so every folder ``ckpt:`` takes (an export included) works in both. Errors (ValueError,
    FileNotFoundError) name the spec; a network for another board is ``make_agent``'s error.
    """
    return _network_of(parse_agent_spec(spec), geometry)


def _network_of(spec: AgentSpec, geometry: BoardGeometry):
    """``load_network`` of a spec already read."""
    if spec.kind == "ckpt":
        return _load_checkpoint(spec)
    if spec.kind == "pretrained":
        return _load_pretrained(spec, geometry)
    return None


# --- TD learning (Kabir 2004) and MCTS with a network cut-off (Cotarelo et al. 2021) ----------------------------------


def _is_td_run(path) -> bool:
    from dabjax.baselines import td
    from dabjax.training import checkpoint as checkpoint_lib
    try:
        return checkpoint_lib.read_checkpoint(path)[1].get("method") == td.METHOD
    except (FileNotFoundError, ValueError):
        return False  # the regular loader reports it


def _check_board(spec: str, rows: int, cols: int, geometry: BoardGeometry) -> None:
    if (rows, cols) != (geometry.rows, geometry.cols):
        raise ValueError(f"agent {spec!r}: checkpoint is for a {rows}x{cols} board but the board is {geometry.name}")


@functools.lru_cache(maxsize=None)
def _compiled_td_policy(net, env: env_lib.Env):
    from dabjax.baselines import td
    value_fn = td.mlp_value_fn(net, env.geometry)
    return jax.jit(lambda params, key, states: td.td_agent(value_fn, env, params)(env.geometry, key, states))


def load_td_agent(spec: AgentSpec, geometry: BoardGeometry) -> Agent:
    """``td:PATH``: the greedy one-move-lookahead player of a TD run (``dabjax.baselines.td``)."""
    from dabjax.baselines import td
    name, path = spec.without_exact, spec.argument
    if not path:
        raise ValueError(f"agent {name!r}: write td:PATH (a TD run directory or RUN/checkpoints/N)")
    try:
        loaded = td.load_td_checkpoint(path)  # FileNotFoundError names the path
    except ValueError as error:
        raise ValueError(f"agent {name!r}: {error}") from None
    _check_board(name, loaded.rows, loaded.cols, geometry)
    compiled = _compiled_td_policy(loaded.net, loaded.env)
    return bound_agent(compiled, loaded.params, geometry, "td")


def parse_mcts_net_spec(spec: AgentSpec) -> tuple[str, int, float]:
    """``mcts-net:PATH:SIMS:THRESHOLD`` -> ``(PATH, SIMS, THRESHOLD)`` (PATH may contain ``:``)."""
    name = spec.without_exact
    parts = spec.argument.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"agent {name!r}: write mcts-net:PATH:SIMS:THRESHOLD, e.g. mcts-net:runs/td:200:0.9")
    path, sims, threshold = parts
    sims = _positive_int(name, sims, "SIMS (simulations)")
    try:
        value = float(threshold)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise ValueError(f"agent {name!r}: THRESHOLD must be a number > 0 (|v| to stop a rollout), got {threshold!r}")
    return path, sims, value


def load_mcts_net_agent(spec: AgentSpec, geometry: BoardGeometry) -> Agent:
    """``mcts-net:PATH:SIMS:THRESHOLD``: UCT with rollouts cut off by the value network of a TD or a
    BoxesZero/AlphaZero run (``dabjax.baselines.mcts_net``)."""
    from dabjax.baselines import mcts_net
    path, sims, threshold = parse_mcts_net_spec(spec)
    try:
        value_key, params, rows, cols = mcts_net.load_value_network(path)
    except ValueError as error:
        raise ValueError(f"agent {spec.without_exact!r}: {error}") from None
    _check_board(spec.without_exact, rows, cols, geometry)
    compiled = mcts_net.compiled_mcts_net_policy(value_key, env_lib.Env.of(geometry), sims, threshold)
    return bound_agent(compiled, params, geometry, "mcts-net")


# --- the registry ---------------------------------------------------------------------------------------


def network_agent(spec: AgentSpec, geometry: BoardGeometry) -> Agent:
    """``ckpt:PATH[:SIMS]`` or ``pretrained:RxC[:SIMS]`` on ``geometry`` (``load_network``); a pretrained agent
    plays its own board only (another one is an error naming the boards that have one)."""
    loaded, simulations = _network_of(spec, geometry)
    name = spec.without_exact
    if spec.kind == "pretrained" and (loaded.rows, loaded.cols) != (geometry.rows, geometry.cols):
        raise ValueError(
            f"agent {name!r} plays the {loaded.rows}x{loaded.cols} board, not {geometry.name}; pretrained agents "
            f"exist for: {', '.join(pretrained.available())}"
        )
    try:
        return checkpoint_agent(loaded, geometry, simulations)
    except ValueError as error:
        raise ValueError(f"agent {name!r}: {error}") from None


def clock_agent(spec: AgentSpec, geometry: BoardGeometry) -> Agent:
    """``SPEC@Ns``: a ``ClockAgent`` over the network of a ``ckpt:`` or ``pretrained:`` spec (SIMS, when given, the
    least simulations), or alpha-beta deepening until the time is spent."""
    if spec.kind == "alphabeta":
        return AlphaBetaAgent(spec.whole_number("DEPTH"), seconds=spec.clock_seconds)
    if spec.kind not in CLOCK_KINDS:
        raise ValueError(f"agent {spec.text!r}: {spec.without_exact!r} does not play on a clock; clocks (@Ns) are "
                         f"for {', '.join(k + ':' for k in CLOCK_KINDS)} agents")
    network_agent(dataclasses.replace(spec, clock_seconds=None), geometry)  # its errors: board, file, SIMS
    loaded, simulations = _network_of(spec, geometry)
    return clock.ClockAgent(loaded, geometry, spec.clock_seconds, name=spec.text,
                            least_simulations=simulations or None)


def _check_solver_takes(spec: str, geometry: BoardGeometry) -> None:
    """ValueError naming ``spec``, the board and the limit when the position solver cannot take ``geometry``."""
    refusal = solver_refusal(geometry)
    if refusal is not None:
        raise ValueError(f"agent {spec!r}: {refusal}")


def make_agent(spec: str, geometry: BoardGeometry) -> Agent:
    """The agent named by ``spec`` (see the module docstring) for boards of ``geometry``'s size."""
    spec = parse_agent_spec(spec)
    if spec.clock_seconds is not None:
        return clock_agent(spec, geometry)
    if spec.exact_seconds is not None:
        _check_solver_takes(spec.text, geometry)
        # SPEC is made as a spec of its own, so its errors name SPEC.
        return exact_play.ExactAgent(make_agent(spec.without_exact, geometry), spec.exact_seconds, name=spec.text)
    kind, argument = spec.kind, spec.argument
    if kind in HANDCRAFTED_SPECS and not argument:
        return policies.HANDCRAFTED_AGENTS[kind]
    if kind == "mcts":
        return search_agents.mcts_agent(geometry, spec.whole_number("SIMS (simulations)"))
    if kind == "alphabeta":
        return AlphaBetaAgent(spec.whole_number("DEPTH"))
    if kind == "solver" and not argument:
        _check_solver_takes(spec.text, geometry)
        return exact_play.ExactAgent(AlphaBetaAgent(4), SOLVER_TIME_LIMIT, name="solver", max_undrawn=None)
    if kind in ("ckpt", "pretrained"):
        return network_agent(spec, geometry)
    if kind == "td":
        return load_td_agent(spec, geometry)
    if kind == "mcts-net":
        return load_mcts_net_agent(spec, geometry)
    if kind == "openspiel-mcts":
        from dabjax.baselines.openspiel_mcts import OpenSpielMCTSAgent

        return OpenSpielMCTSAgent(spec.whole_number("SIMS (simulations)"))
    raise ValueError(f"unknown agent {spec.text!r}; known: {SPEC_HELP}")


# (key, states [N]) -> float32 [N, L]: the distribution over lines an agent's search ends with.
SearchPolicy = Callable[[jax.Array, object], jax.Array]


# --- the agent's search, for the page -------------------------------------------------------------------


def _search_policy_fn(config: mcts.SearchConfig, env: env_lib.Env, evaluator, params) -> SearchPolicy:
    def policy(params, key, states):
        # search_agent splits its key the same way: with the key of the agent's move this is that move's search.
        key_search, _ = jax.random.split(key)
        return mcts.run_search(config, env, evaluator, params, key_search, states).policy_target

    # The parameters are an argument, not constants folded into the compiled program (5x5 nets are large).
    return functools.partial(jax.jit(policy), params)


@functools.lru_cache(maxsize=None)
def search_policy(spec: str, geometry: BoardGeometry) -> SearchPolicy | None:
    """The search distribution behind the moves of agent ``spec``: visit shares for ``mcts:SIMS`` and for
    PUCT checkpoints, Gumbel MuZero's improved policy for Gumbel checkpoints (``ckpt:PATH[:SIMS]``,
    ``pretrained:RxC[:SIMS]``), the network's policy at 0 simulations (no search). None for agents that do not
    search this way (handcrafted, alpha-beta, the solver, ``td:``, ``mcts-net:``, ``openspiel-mcts:``); the page
    says so.

    Called with the key of the agent's own move, it repeats the very search that chose the move. For
    ``SPEC+exact[:SECONDS]`` it is SPEC's search run apart, with the move's key: where the solver did not choose
    the move, SPEC chose it in a search of its own (``ExactAgent`` draws SPEC's key itself), so the shares shown
    are a separate search of the same agent, not the one behind the move; the moves the solver chose are shown as
    such (``_analyse``).
    """
    parsed = parse_agent_spec(spec)
    if parsed.kind == "mcts":  # as make_agent reads it
        config = search_agents.pure_mcts_config(parsed.whole_number("SIMS (simulations)"))
        env = env_lib.Env.of(geometry)
        return _search_policy_fn(config, env, mcts.rollout_evaluator(env), None)
    found = _network_of(parsed, geometry)  # ckpt: and pretrained:, as make_agent reads them
    if found is None:
        return None
    loaded, sims = found
    evaluator = mcts.network_evaluator(loaded.network_config, geometry)
    if sims == 0:
        raw = jax.jit(lambda params, key, states: jax.nn.softmax(
            network.mask_logits(evaluator(params, key, states)[0], ~states.lines), axis=-1))
        return functools.partial(raw, loaded.params)
    sims = loaded.search_config.num_simulations if sims is None else sims
    config = dataclasses.replace(loaded.search_config, num_simulations=int(sims), gumbel_scale=0.0)
    return _search_policy_fn(config, env_lib.Env.of(geometry, loaded.early_termination), evaluator, loaded.params)


def make_agents(specs, geometry: BoardGeometry) -> dict[str, Agent]:
    """``{spec: agent}`` for a list of specs (or one comma-separated string); duplicates are an error."""
    if isinstance(specs, str):
        specs = [s for s in specs.split(",") if s.strip()]
    specs = [s.strip() for s in specs]
    duplicates = sorted({s for s in specs if specs.count(s) > 1})
    if duplicates:
        raise ValueError(f"agents named more than once: {duplicates}")
    return {spec: make_agent(spec, geometry) for spec in specs}
