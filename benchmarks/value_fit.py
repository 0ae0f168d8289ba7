"""The fit bench: which network learns the middle game's result from exact labels, and at what cost, before any
self-play.

    python benchmarks/value_fit.py                                   # 4x4: the default arms, two seeds
    python benchmarks/value_fit.py --arm graph:32x8 --arm transformer:64x4+h4 --samples 400000 --seeds 0 1 \
        --train-set data/4x4_train.npz --train-set results/4x4_early_train.npz --json value_fit.json
    python benchmarks/value_fit.py --tiny                            # 2x2 sets from the exact table, seconds (tests)

Every arm trains on the same exact labels (``--train-set``, repeatable: labelled sets of the board, kept to
``--train-moves``) for the same number of training samples (``--samples``; batches of 256, Adam at 1e-3 annealed
along a cosine to a tenth, a random board symmetry per sample, value to the sign of the exact result, policy
uniform over the best-result moves: ``dabjax.training.supervised.fit``), once per ``--seeds`` seed. Equal samples,
not equal CPU minutes: minutes would favour small dense networks on a CPU, while the GPU, where users train,
favours large matrix products; each arm's cost is printed beside it instead.

It is judged on ``--held-out`` (default the board's built-in set, ``data/RxC.npz``): positions of other games, none
of them also a training position (up to symmetry and the score so far: such training positions are dropped). By
move number, for each arm and seed:

* ``class``: the share of positions whose value names the exact result class (win above 1/3, loss below -1/3,
  else draw) on the held-out positions, and ``train class`` on (up to ``--train-sample`` of) its own training
  positions: a network that fits these but not the held-out ones memorises;
* ``raw``: the best-result share of the raw policy (the legal move of highest logit), held out;
* ``search``: the best-result share of the pruned Gumbel search at ``--simulations`` (0: not measured), held out.

And the network's cost: parameters, XLA's FLOPs and bytes per position of one evaluation at batch 256, the CPU's
µs per position of that evaluation, and of a training sample. The last lines give each arm's mean over seeds at
``--judge-moves`` (default 12-15) and the verdict: GO when an arm's held-out class share there is at least
``--go-class`` (0.90), or its search keeps the best result in at least ``--go-search`` (0.95) at every judged move.
Prints figures (``--json`` writes them); run it alone on the machine for the timings.

Arms are written ``KIND:WIDTHxBLOCKS[+paper][+hN][+lines][+control]``: a kind of ``dabjax.search.network_kinds``
(graph, graph_attention, transformer, resnet, mlp), ``+paper`` no parity plane, ``+hN`` N attention heads.

Intermediate targets (``--targets``, the graph kinds): ``+lines`` adds a head for every line's exact result class
after it is drawn, ``+control`` one for the nimstring outcome (who wins the fight for control), both fitted to the
solver's labels of the training positions (``exact_targets``; ``--targets-cache`` keeps them). Under ``--targets``
every arm trains by one loop (``fit_with_targets``), the plain arm with no heads, so that a 2x2 of the heads
differs in the heads only.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import sys
import time
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.search.trunks import GraphTrunk, kaiming
from dabjax.solvers import labelled, nimstring, retrograde
from dabjax.solvers.position_solver import PositionSolver, compile_kernels
from dabjax.training import learner, supervised

DEFAULT_ARMS = ("graph:32x8", "graph_attention:32x8+h4", "transformer:64x4+h4")
DRAW_BAND = 1.0 / 3.0  # a value within it names a draw
BATCH = 256


TARGET_OPTIONS = ("lines", "control")  # the intermediate-target heads an arm may add (``TargetsNet``)
TARGET_KINDS = ("graph", "graph_attention")  # the kinds ``TargetsNet`` builds


def arm_config(spec: str, value_hidden: int) -> network.NetworkConfig:
    """``KIND:WIDTHxBLOCKS[+paper][+hN][+lines][+control]`` -> a NetworkConfig (``value_hidden`` units in the
    value MLP); the target options are read by ``arm_targets``. Raises ValueError naming the problem."""
    head, *options = spec.split("+")
    kind, _, size = head.partition(":")
    width, _, blocks = size.partition("x")
    heads = [option for option in options if option.startswith("h") and option[1:].isdigit()]
    unknown = set(options) - {"paper", *TARGET_OPTIONS} - set(heads)
    if unknown or not (width.isdigit() and blocks.isdigit()) or len(heads) > 1:
        raise ValueError(f"arm {spec!r}: write KIND:WIDTHxBLOCKS[+paper][+hN][+lines][+control], e.g. "
                         "transformer:64x4+h4")
    if kind not in network.KINDS:
        raise ValueError(f"arm {spec!r}: kind {kind!r} is not one of {network.KINDS}")
    if set(options) & set(TARGET_OPTIONS) and kind not in TARGET_KINDS:
        raise ValueError(f"arm {spec!r}: the target heads (+lines, +control) sit on the graph kinds only")
    extra = {"attention_heads": int(heads[0][1:])} if heads else {}
    return network.NetworkConfig(kind=kind, width=int(width), blocks=int(blocks), value_hidden=value_hidden,
                                 parity_plane="paper" not in options, **extra)


def arm_targets(spec: str) -> tuple[float, float]:
    """``(lines weight, control weight)`` of an arm: 1 for each target head its spec adds, else 0."""
    options = spec.split("+")[1:]
    return float("lines" in options), float("control" in options)


def result_class(value: np.ndarray) -> np.ndarray:
    """int ``[N]``: +1, 0 or -1 for values above ``DRAW_BAND``, within it and below ``-DRAW_BAND``."""
    return np.where(value > DRAW_BAND, 1, np.where(value < -DRAW_BAND, -1, 0))


def class_share_by_move(value: np.ndarray, final: np.ndarray, move_numbers: np.ndarray, moves: np.ndarray
                        ) -> np.ndarray:
    """float ``[M]``: at each of ``moves``, the share of positions whose ``value`` names the class of ``final``
    (the exact final margin for the mover: its sign); NaN at a move with no position."""
    hit = result_class(value) == np.sign(final)
    return np.array([hit[move_numbers == m].mean() if (move_numbers == m).any() else np.nan for m in moves])


def values_of(config: network.NetworkConfig, params, observations: np.ndarray, batch: int = 2048) -> tuple:
    """``(logits [N, L], value [N])`` of the network on ``observations`` ``[N, H, W, C]``, in batches."""
    apply = jax.jit(network.PolicyValueNet(config).apply)
    outputs = [apply(params, observations[i:i + batch]) for i in range(0, len(observations), batch)]
    return (np.concatenate([np.asarray(o[0]) for o in outputs]), np.concatenate([np.asarray(o[1]) for o in outputs]))


def observations_of_set(labelled_set: labelled.LabelledSet) -> np.ndarray:
    """The network inputs ``[N, H, W, C]`` of a labelled set's positions."""
    geometry = labelled_set.geometry
    states = labelled.to_states(labelled_set)
    return np.asarray(jax.jit(jax.vmap(functools.partial(env_lib.observe, geometry)))(states))


def network_cost(config: network.NetworkConfig, params, geometry) -> dict:
    """Parameters, XLA's FLOPs and bytes accessed per position, and the µs per position (best of 5) of one jitted
    evaluation of ``BATCH`` positions of ``geometry``."""
    observations = jnp.zeros((BATCH, *geometry.grid_shape, env_lib.NUM_PLANES), jnp.float32)
    apply = jax.jit(network.PolicyValueNet(config).apply)
    compiled = apply.lower(params, observations).compile()
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else (analysis or {})
    jax.block_until_ready(apply(params, observations))
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        jax.block_until_ready(apply(params, observations))
        best = min(best, time.perf_counter() - began)
    return {"parameters": network.num_parameters(params),
            "flops_per_position": float(analysis.get("flops", float("nan"))) / BATCH,
            "bytes_per_position": float(analysis.get("bytes accessed", float("nan"))) / BATCH,
            "us_per_position": 1e6 * best / BATCH}


def search_shares(config: network.NetworkConfig, params, held_out: labelled.LabelledSet, simulations: int
                  ) -> np.ndarray:
    """float ``[M]``: the best-result share by move number of the pruned Gumbel search at ``simulations``."""
    geometry = held_out.geometry
    search_config = mcts.SearchConfig(num_simulations=simulations, gumbel_scale=0.0, max_depth=6)
    evaluator = mcts.network_evaluator(config, geometry)
    searcher = search_agents.search_agent(search_config, env_lib.Env.of(geometry), evaluator, params)
    moves = jax.jit(lambda key, states: searcher(geometry, key, states))
    return np.asarray(labelled.accuracy_by_move_number(lambda g, k, s: moves(k, s), held_out,
                                                       jax.random.PRNGKey(0)).best_result)


def measure_arm(config: network.NetworkConfig, params, held_out: labelled.LabelledSet, held_obs: np.ndarray,
                train_sample: labelled.LabelledSet, train_obs: np.ndarray, moves: np.ndarray, simulations: int
                ) -> dict:
    """The figures of one trained arm by move number (``moves`` ``[M]``): held-out and training class shares, the
    raw policy's and the search's best-result shares held out."""
    logits, value = values_of(config, params, held_obs)
    final = held_out.margin + held_out.value
    raw_moves = np.where(held_out.lines, -np.inf, logits).argmax(-1)
    raw = labelled.accuracy_of_moves(held_out, raw_moves)
    _, train_value = values_of(config, params, train_obs)
    row = {"moves": moves.tolist(),
           "class": class_share_by_move(value, final, held_out.move_numbers, moves).tolist(),
           "train_class": class_share_by_move(train_value, train_sample.margin + train_sample.value,
                                              train_sample.move_numbers, moves).tolist(),
           "raw": [float(raw.best_result[raw.move_numbers == m][0]) if (raw.move_numbers == m).any() else np.nan
                   for m in moves]}
    if simulations:
        searched = search_shares(config, params, held_out, simulations)
        numbers = np.unique(held_out.move_numbers)
        row["search"] = [float(searched[numbers == m][0]) if (numbers == m).any() else np.nan for m in moves]
    return row


def tiny_sets() -> tuple[list[labelled.LabelledSet], labelled.LabelledSet]:
    """2x2 training and held-out sets labelled from the exact table (seconds): the bench's test size."""
    geometry = board_geometry(2, 2)
    held_out = labelled.build_set(geometry, list(range(2, 9)), 20, seed=1)
    train = labelled.build_set(geometry, list(range(2, 9)), 60, seed=2, exclude=held_out)
    return [train], held_out


class ExactTargets(NamedTuple):
    """The intermediate targets of ``N`` labelled positions (``L`` lines), each with where it is known.

    ``line_result`` float32 ``[N, L]``: the exact result class (+1 win, 0 draw, -1 loss, for the side to move)
    after each line is drawn, known (``line_known``) at the legal lines of positions whose every move was solved;
    ``control`` float32 ``[N]``: +1 where the side to move wins nimstring (the fight for control), -1 where it
    loses, known (``control_known``) where the nimstring search finished."""

    line_result: np.ndarray
    line_known: np.ndarray
    control: np.ndarray
    control_known: np.ndarray


def exact_targets(labelled_set: labelled.LabelledSet, *, time_limit: float = 10.0, nimstring_seconds: float = 1.0,
                  cache: str | None = None, progress: bool = True) -> ExactTargets:
    """Every position's ``ExactTargets``: the line results from the set's ``move_values`` where it has them,
    else from the position solver (``time_limit`` seconds a position; one not solved in time stays unknown), and
    the control outcome from the nimstring solver (``nimstring_seconds`` a position). ``cache``: an ``.npz`` that
    keeps them for the same positions (rebuilt when the positions or their scores differ)."""
    lines = np.asarray(labelled_set.lines, bool)
    if cache and pathlib.Path(cache).exists():
        kept = np.load(cache)
        if (kept["lines"].shape == lines.shape and (kept["lines"] == lines).all()
                and (kept["margin"] == labelled_set.margin).all()):
            return ExactTargets(*(kept[name] for name in ExactTargets._fields))
    geometry = labelled_set.geometry
    legal = ~lines
    if labelled_set.move_values is not None:
        values = np.asarray(labelled_set.move_values, np.int32)
        solved = np.ones(len(labelled_set), bool)
    else:
        values = np.full(lines.shape, retrograde.ILLEGAL, np.int32)
        solved = np.zeros(len(labelled_set), bool)
    solver = None
    if not solved.all():
        compile_kernels(geometry)  # numba's compile stays out of the first position's time limit
        solver = PositionSolver(geometry)
    control = np.zeros(len(labelled_set), np.float32)
    control_known = np.zeros(len(labelled_set), bool)
    began = time.perf_counter()
    for i in range(len(labelled_set)):
        if not solved[i]:
            solution = solver.solve(lines[i], int(labelled_set.margin[i]), move_values=True, time_limit=time_limit)
            if solution.finished:
                values[i], solved[i] = solution.move_values, True
        outcome = nimstring.solve_nimstring(geometry, lines[i], max_seconds=nimstring_seconds)
        if outcome.finished:
            control[i], control_known[i] = (1.0 if outcome.wins else -1.0), True
        if progress and (i + 1) % 2000 == 0:
            print(f"  exact targets: {i + 1}/{len(labelled_set)} positions in {time.perf_counter() - began:.0f} s",
                  flush=True)
    line_known = legal & solved[:, None]
    line_result = np.where(line_known, np.sign(labelled_set.margin[:, None] + values), 0).astype(np.float32)
    targets = ExactTargets(line_result, line_known, control, control_known)
    if cache:
        np.savez_compressed(cache, lines=lines, margin=labelled_set.margin, **targets._asdict())
    return targets


class TargetsNet(nn.Module):
    """The graph network (``graph`` or ``graph_attention`` kinds) with intermediate-target heads beside its policy
    and value: ``observation [N, H, W, P] -> (logits [N, L], value [N], line results [N, L], control [N])``, the
    last two ``tanh`` outputs (zeros for a head it does not have). The trunk, policy and value layers are created
    as ``network.PolicyValueNet`` creates them, so the parameters without the extra heads (``playing_params``)
    are that network's, and the search measures it as any arm."""

    config: network.NetworkConfig
    line_results: bool
    control: bool

    @nn.compact
    def __call__(self, observation: jax.Array):
        config = self.config
        if config.kind not in TARGET_KINDS:
            raise ValueError(f"TargetsNet builds the {TARGET_KINDS} kinds, not {config.kind!r}")
        dtype = network.compute_dtype(config.dtype)
        heads = config.attention_heads if config.kind == "graph_attention" else 0
        line_states, value_features, _ = GraphTrunk(config.width, config.blocks, config.parity_plane, dtype,
                                                    heads)(observation)
        logits = nn.Dense(1, kernel_init=kaiming, dtype=dtype)(line_states)[..., 0].astype(jnp.float32)
        hidden = nn.relu(nn.Dense(config.value_hidden, kernel_init=kaiming, dtype=dtype)(value_features))
        value = jnp.tanh(nn.Dense(1, dtype=dtype)(hidden)[:, 0].astype(jnp.float32))
        line_result, control = jnp.zeros_like(logits), jnp.zeros_like(value)
        if self.line_results:
            per_line = nn.relu(nn.Dense(config.value_hidden, kernel_init=kaiming, dtype=dtype,
                                        name="line_result_hidden")(line_states))
            line_result = jnp.tanh(nn.Dense(1, dtype=dtype, name="line_result")(per_line)[..., 0]
                                   .astype(jnp.float32))
        if self.control:
            control_hidden = nn.relu(nn.Dense(config.value_hidden, kernel_init=kaiming, dtype=dtype,
                                              name="control_hidden")(value_features))
            control = jnp.tanh(nn.Dense(1, dtype=dtype, name="control")(control_hidden)[:, 0].astype(jnp.float32))
        return logits, value, line_result, control


def unknown_targets(labelled_set: labelled.LabelledSet) -> ExactTargets:
    """``ExactTargets`` that know nothing: what a plain arm of the targets loop trains beside (its weights are 0)."""
    count, num_lines = labelled_set.lines.shape
    return ExactTargets(np.zeros((count, num_lines), np.float32), np.zeros((count, num_lines), bool),
                        np.zeros(count, np.float32), np.zeros(count, bool))


def playing_params(config: network.NetworkConfig, params, geometry) -> dict:
    """``TargetsNet``'s parameters without its extra heads: ``network.PolicyValueNet(config)``'s (checked)."""
    fresh = network.init_params(config, geometry.grid_shape, jax.random.PRNGKey(0))
    kept = {"params": {name: tree for name, tree in params["params"].items() if name in fresh["params"]}}
    if jax.tree_util.tree_structure(kept) != jax.tree_util.tree_structure(fresh) or any(
            a.shape != b.shape for a, b in zip(jax.tree_util.tree_leaves(kept), jax.tree_util.tree_leaves(fresh))):
        raise ValueError(f"TargetsNet's parameters do not hold {config.kind}'s network")
    return kept


def fit_with_targets(geometry, config: network.NetworkConfig, samples, targets: ExactTargets, key: jax.Array, *,
                     steps: int, lines_weight: float, control_weight: float, lr: float = 1e-3,
                     final_lr_fraction: float = 0.1, chunk: int = 100) -> supervised.FitResult:
    """``supervised.fit``'s training (Adam, the rate annealed along a cosine, batches of ``BATCH`` drawn uniformly
    with a random board symmetry per sample) of ``TargetsNet``, whose loss adds ``lines_weight`` times the squared
    error of the line results (mean over a position's known lines) and ``control_weight`` times that of the
    control outcome, each over the samples that know it. ``targets`` row ``i`` is ``samples`` row ``i``. A weight
    of 0 leaves its head out, so the arm with both at 0 is the plain network under the same loop. Returns the
    parameters of ``playing_params``; its time per step leaves out the first step (the compile)."""
    count = int(samples.valid.shape[0])
    if targets.line_result.shape[0] != count:
        raise ValueError(f"{targets.line_result.shape[0]} targets for {count} samples")
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    model = TargetsNet(config, lines_weight > 0, control_weight > 0)
    init_key, key = jax.random.split(key)
    params = model.init(init_key, jnp.zeros((1, *geometry.grid_shape, env_lib.NUM_PLANES), jnp.float32))
    optimizer = optax.inject_hyperparams(optax.adam)(learning_rate=lr)
    state = learner.init_train_state(params, optimizer)
    data = (samples, jnp.asarray(targets.line_result), jnp.asarray(targets.line_known),
            jnp.asarray(targets.control), jnp.asarray(targets.control_known, jnp.float32))
    line_gathers = jnp.asarray(geometry.sym_line_gather)

    def loss_fn(params, batch: learner.Batch, line_result, line_known, control, control_known):
        logits, value, predicted_lines, predicted_control = model.apply(params, batch.observation)
        log_p = jax.nn.log_softmax(network.mask_logits(logits, batch.legal), axis=-1)
        policy_loss = -jnp.where(batch.policy > 0, batch.policy * log_p, 0.0).sum(-1).mean()
        value_loss = jnp.square(batch.value - value).mean()
        per_position = jnp.where(line_known, jnp.square(line_result - predicted_lines), 0.0).sum(-1)
        has_lines = line_known.any(-1)
        lines_loss = (jnp.where(has_lines, per_position / jnp.maximum(line_known.sum(-1), 1), 0.0).sum()
                      / jnp.maximum(has_lines.sum(), 1))
        control_loss = (control_known * jnp.square(control - predicted_control)).sum() / jnp.maximum(
            control_known.sum(), 1)
        return policy_loss + value_loss + lines_weight * lines_loss + control_weight * control_loss

    def step(state, key, data):
        samples, line_result, line_known, control, control_known = data
        pick_key, sym_key = jax.random.split(key)
        index = jax.random.randint(pick_key, (BATCH,), 0, count)
        sym = jax.random.randint(sym_key, (BATCH,), 0, geometry.num_symmetries)
        batch = learner.make_batch(geometry, samples, jnp.ones(count, jnp.float32), index, sym)
        gather = line_gathers[sym]  # the per-line targets mapped as make_batch maps the policy
        loss, grads = jax.value_and_grad(loss_fn)(
            state.params, batch, jnp.take_along_axis(line_result[index], gather, axis=1),
            jnp.take_along_axis(line_known[index], gather, axis=1), control[index], control_known[index])
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return learner.TrainState(params=optax.apply_updates(state.params, updates), opt_state=opt_state,
                                  step=state.step + 1), loss

    @jax.jit
    def run(state, keys, active, data):
        """The first ``active`` (traced: one compile for every chunk) steps of ``keys``' chunk; the samples are
        arguments, not constants compiled into the program."""
        def body(t, carry):
            state, total = carry
            state, loss = step(state, keys[t], data)
            return state, total + loss

        state, total = jax.lax.fori_loop(0, active, body, (state, jnp.float32(0.0)))
        return state, total / jnp.maximum(active, 1)

    def steps_of(state, active: int, taken: int):
        nonlocal key
        state = state.replace(opt_state=supervised.with_learning_rate(
            state.opt_state, learner.cosine_rate(lr, final_lr_fraction, taken / steps)))
        key, chunk_key = jax.random.split(key)
        return run(state, jax.random.split(chunk_key, chunk), jnp.int32(active), data)

    state, loss = steps_of(state, 1, 0)  # the compile of a one-step chunk, not timed
    jax.block_until_ready(state.params)
    began, taken = time.perf_counter(), 1
    while taken < steps:
        active = min(chunk, steps - taken)
        state, loss = steps_of(state, active, taken)
        taken += active
    jax.block_until_ready(state.params)
    seconds = time.perf_counter() - began
    rate = float(learner.cosine_rate(lr, final_lr_fraction, (taken - 1) / steps))
    return supervised.FitResult(playing_params(config, state.params, geometry), taken,
                                seconds / max(taken - 1, 1), float(loss), rate)


def parse_moves(text: str) -> np.ndarray:
    first, _, last = text.partition("-")
    return np.arange(int(first), int(last or first) + 1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="4x4")
    parser.add_argument("--arm", action="append", default=[], help="a network to train, repeatable "
                        f"(default: {', '.join(DEFAULT_ARMS)})")
    parser.add_argument("--train-set", action="append", default=[], help="labelled set to train on, repeatable "
                        "(default data/RxC_train.npz)")
    parser.add_argument("--held-out", help="the labelled set that judges (default data/RxC.npz)")
    parser.add_argument("--train-moves", default="8-20")
    parser.add_argument("--measure-moves", default="8-20")
    parser.add_argument("--judge-moves", default="12-15")
    parser.add_argument("--samples", type=int, default=786_432, help="training samples per arm and seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--value-hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--simulations", type=int, default=64, help="search simulations (0: no search figures)")
    parser.add_argument("--train-sample", type=int, default=4000, help="training positions measured per move")
    parser.add_argument("--go-class", type=float, default=0.90)
    parser.add_argument("--go-search", type=float, default=0.95)
    parser.add_argument("--json", help="write every arm's figures to this file (rewritten after each run)")
    parser.add_argument("--tiny", action="store_true", help="2x2 sets from the exact table and a few hundred "
                        "samples: the test size")
    parser.add_argument("--targets", action="store_true", help="train every arm by the intermediate-targets loop "
                        "(fit_with_targets; needed by +lines and +control arms; graph kinds only), so that a plain "
                        "arm is the same loop without the heads")
    parser.add_argument("--targets-cache", help="an .npz keeping the training positions' exact targets between runs")
    parser.add_argument("--cost-only", action="store_true", help="only each arm's cost on the board, freshly "
                        "initialised (quick; run it alone for the timings)")
    args = parser.parse_args(argv)
    try:
        arms = [(spec, arm_config(spec, args.value_hidden)) for spec in (args.arm or DEFAULT_ARMS)]
    except ValueError as error:
        parser.error(str(error))
    needs_targets = [spec for spec, _ in arms if any(arm_targets(spec))]
    if needs_targets and not args.targets:
        parser.error(f"arms {needs_targets} have target heads: run them with --targets")
    other_kinds = [spec for spec, config in arms if config.kind not in TARGET_KINDS]
    if args.targets and other_kinds:
        parser.error(f"--targets trains the {TARGET_KINDS} kinds only, not {other_kinds}")
    if args.cost_only:
        geometry = board_geometry(*parse_board_size("2x2" if args.tiny else args.board))
        costs = {}
        for spec, config in arms:
            params = network.init_params(config, geometry.grid_shape, jax.random.PRNGKey(0))
            costs[spec] = network_cost(config, params, geometry)
            print(f"{spec:<28} {costs[spec]['parameters']:>9,} parameters  "
                  f"{costs[spec]['flops_per_position'] / 1e6:6.2f} MFLOP  "
                  f"{costs[spec]['bytes_per_position'] / 1e3:6.0f} kB  {costs[spec]['us_per_position']:7.1f} µs "
                  f"a position at batch {BATCH} on {geometry.name}", flush=True)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(costs, indent=1))
        return {"costs": costs}
    if args.tiny:
        train_sets, held_out = tiny_sets()
        train_moves = measure_moves = judge_moves = np.arange(2, 9)
    else:
        geometry = board_geometry(*parse_board_size(args.board))
        train_sets = [labelled.load(path) for path in (args.train_set or [f"data/{geometry.name}_train.npz"])]
        held_out = labelled.load(args.held_out or f"data/{geometry.name}.npz")
        train_moves, measure_moves, judge_moves = (parse_moves(args.train_moves), parse_moves(args.measure_moves),
                                                   parse_moves(args.judge_moves))
    geometry = held_out.geometry
    for train_set in train_sets:
        if (train_set.rows, train_set.cols) != (geometry.rows, geometry.cols):
            parser.error(f"a training set is {train_set.rows}x{train_set.cols}, the held-out set {geometry.name}")
    held_out = labelled.subset(held_out, np.isin(held_out.move_numbers, measure_moves))
    train = labelled.merge([labelled.subset(s, np.isin(s.move_numbers, train_moves)) for s in train_sets])
    train, dropped = labelled.without(train, held_out)
    samples, _ = supervised.samples_from_set(train)
    targets = None
    if args.targets:  # the solver's labels only where an arm has a target head: a plain arm trains without them
        targets = (exact_targets(train, cache=args.targets_cache, progress=not args.tiny) if needs_targets
                   else unknown_targets(train))
    rng = np.random.default_rng(0)
    keep = np.zeros(len(train), bool)
    for move in np.unique(train.move_numbers):
        at = np.flatnonzero(train.move_numbers == move)
        keep[rng.choice(at, min(len(at), args.train_sample), replace=False)] = True
    train_sample = labelled.subset(train, keep)
    held_obs, train_obs = observations_of_set(held_out), observations_of_set(train_sample)
    moves = np.unique(np.concatenate([held_out.move_numbers, train.move_numbers]))
    moves = moves[np.isin(moves, measure_moves)]
    samples_per_arm = 2 * BATCH if args.tiny else args.samples
    steps = max(1, samples_per_arm // BATCH)
    decided = np.sign(held_out.margin + held_out.value)
    print(f"{geometry.name}: {len(train)} training positions at moves {train_moves[0]}-{train_moves[-1]} "
          f"({dropped} also held out dropped), {len(held_out)} held-out positions; {steps} steps of {BATCH} "
          f"({steps * BATCH:,} samples) an arm and seed; held-out classes won/drawn/lost "
          f"{np.mean(decided > 0):.2f}/{np.mean(decided == 0):.2f}/{np.mean(decided < 0):.2f}", flush=True)
    results = {"board": geometry.name, "train_positions": len(train), "held_out_positions": len(held_out),
               "samples": steps * BATCH, "moves": moves.tolist(), "judge_moves": judge_moves.tolist(), "arms": []}
    for spec, config in arms:
        for seed in args.seeds:
            began = time.perf_counter()
            if targets is not None:
                lines_weight, control_weight = arm_targets(spec)
                fit = fit_with_targets(geometry, config, samples, targets, jax.random.PRNGKey(seed), steps=steps,
                                       lines_weight=lines_weight, control_weight=control_weight, lr=args.lr)
            else:
                fit = supervised.fit(geometry, config, samples, jax.random.PRNGKey(seed), steps=steps, lr=args.lr,
                                     batch_size=BATCH, final_lr_fraction=0.1)
            train_seconds = time.perf_counter() - began
            row = {"arm": spec, "seed": seed, "config": dataclasses.asdict(config), "steps": fit.steps,
                   "train_seconds": train_seconds, "us_per_sample": 1e6 * fit.seconds_per_step / BATCH,
                   "final_loss": fit.loss,
                   **measure_arm(config, fit.params, held_out, held_obs, train_sample, train_obs, moves,
                                 args.simulations),
                   **network_cost(config, fit.params, geometry)}
            results["arms"].append(row)
            report_row(row, moves)
            if args.json:
                pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    results["summary"] = summarise(results["arms"], moves, judge_moves, args.go_class, args.go_search)
    for line in results["summary"]["lines"]:
        print(line)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def report_row(row: dict, moves: np.ndarray) -> None:
    print(f"\n{row['arm']} seed {row['seed']}: {row['parameters']:,} parameters, {row['steps']} steps in "
          f"{row['train_seconds']:.0f} s ({row['us_per_sample']:.0f} µs a sample), "
          f"{row['flops_per_position'] / 1e6:.2f} MFLOP and {row['bytes_per_position'] / 1e3:.0f} kB a position, "
          f"{row['us_per_position']:.1f} µs a position at batch {BATCH}")
    print("move:          " + " ".join(f"{m:>5d}" for m in moves))
    for name in ("class", "train_class", "raw", "search"):
        if name in row:
            print(f"{name:<14} " + " ".join(f"{x:5.2f}" for x in row[name]))
    sys.stdout.flush()


def summarise(rows: list[dict], moves: np.ndarray, judge_moves: np.ndarray, go_class: float, go_search: float
              ) -> dict:
    """Each arm's mean over seeds at the judged moves, and the verdict."""
    judged = np.isin(moves, judge_moves)
    arms, lines, go = {}, [f"\nmean over seeds at moves {judge_moves[0]}-{judge_moves[-1]}:"], []
    for spec in dict.fromkeys(row["arm"] for row in rows):
        mine = [row for row in rows if row["arm"] == spec]
        summary = {name: float(np.nanmean([np.nanmean(np.asarray(row[name])[judged]) for row in mine]))
                   for name in ("class", "train_class", "raw")}
        if "search" in mine[0]:
            by_move = np.nanmean([np.asarray(row["search"])[judged] for row in mine], axis=0)
            summary["search"], summary["search_min"] = float(np.nanmean(by_move)), float(np.nanmin(by_move))
        summary["us_per_position"] = float(np.mean([row["us_per_position"] for row in mine]))
        summary["flops_per_position"] = mine[0]["flops_per_position"]
        arms[spec] = summary
        passes = summary["class"] >= go_class or summary.get("search_min", 0.0) >= go_search
        if passes:
            go.append(spec)
        searched = (f"  search {summary['search']:.3f} (min {summary['search_min']:.3f})" if "search" in summary
                    else "")
        lines.append(f"{spec:<28} held-out class {summary['class']:.3f}  train class {summary['train_class']:.3f}  "
                     f"raw {summary['raw']:.3f}{searched}  {summary['us_per_position']:.1f} µs/position  "
                     f"{summary['flops_per_position'] / 1e6:.2f} MFLOP" + ("  GO" if passes else ""))
    verdict = f"GO: {', '.join(go)}" if go else (f"NO-GO: no arm reaches held-out class {go_class} or search "
                                                  f"{go_search} at every judged move")
    lines.append(f"verdict: {verdict}")
    return {"arms": arms, "go": go, "lines": lines}


if __name__ == "__main__":
    main()
