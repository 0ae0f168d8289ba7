"""Monte Carlo tree search with mctx over the true game, pruned by the endgame evaluator and forced captures.

The environment's ``step`` is the model: a node's embedding is the batched ``State``. Values are from the
point of view of the player to move at each node; mctx backs a child's value up as
``reward + discount * value``, so:

* the discount is turn-aware: ``-1`` when the player to move changes, ``+1`` after a capture (the same
  player moves again); a constant ``-1``, as in the usual two-player examples, is wrong for this game;
* a terminal transition gives the mover its result (+1 win, 0 draw, -1 loss) as ``reward`` with
  ``discount = 0`` and value 0, and nothing below a terminal node counts;
* **endgame pruning**: a node whose position is a simple endgame is solved exactly
  (``endgame.simple_endgame_margin``) and treated like a terminal node, its exact result as the reward;
* **chain-loop pruning**: after every move the forced captures are played at once
  (``forced.play_forced_moves``), and a node's prior is restricted to the moves worth searching
  (``forced.searchable_mask``), so the tree only branches at real decisions;
* **proofs** (``search.proofs``): the exact leaves' values are backed up as proven bounds through the tree
  (``tree_search``'s score-bounded search), and the root's bounds correct the move, the policy target and the
  value (``_proven_root``);
* **known results**: positions a solver proved outside the search (``KnownResults``, e.g. the most visited open
  positions of an earlier tree, ``proof_frontier``) are solved wherever the search meets them.

One function per algorithm, as mctx has one per policy: ``gumbel_search`` (Gumbel MuZero), ``puct_search``
(AlphaZero's PUCT) and ``uct_search`` (UCB1, pure MCTS). Each returns a ``SearchOutput`` whose fields mean the same
whatever the algorithm: the move to play, the move to play while exploring, the root's visit counts, the policy
target and the value target (its docstring says what each is for each algorithm). ``ALGORITHMS`` maps the config's
``search.algorithm`` to its functions, the one place the name is read: ``search_function``, ``node_policy`` and
``run_search`` look it up there. ``search_roots`` plays the forced captures before a search (self-play's roots).

An *evaluator* is ``fn(params, key, states) -> (logits [N, L], value [N])`` on a batch of states: the
network (``network_evaluator``) or random rollouts (``rollout_evaluator``, for the pure MCTS baseline).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import mctx

from dabjax.game import endgame, forced, loops, playout
from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry
from dabjax.search import network, tree_search

Evaluator = Callable[[object, jax.Array, env_lib.State], tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How to search: the ``search`` section of a training config (``dabjax.training.config``) and the one
    place its defaults live. The game's rules are not here: a search takes them as its ``env_lib.Env``. Frozen,
    so hashable (a jit static argument); every field is validated at construction, the message naming the config
    key.

    algorithm: ``"gumbel"`` (``gumbel_search``: ``mctx.gumbel_muzero_policy``); ``"puct"`` (``puct_search``:
      AlphaZero's PUCT with Dirichlet noise at the root, through ``mctx.search``); or ``"uct"`` (``uct_search``:
      UCB1, unvisited moves first, for pure MCTS with rollouts). PUCT and UCT mask pruned and illegal moves at
      every node, not only the root. ``ALGORITHMS`` maps the name to its functions.
    num_simulations: simulations per move.
    max_num_considered_actions: Gumbel's root candidates.
    gumbel_scale: Gumbel noise scale (0 for deterministic evaluation play).
    c_puct: PUCT exploration constant (the paper's C_puct = 2; mctx's ``pb_c_init``), or UCB1's ``c``.
    dirichlet_alpha, dirichlet_fraction: PUCT root noise.
    endgame_pruning: solve simple endgames exactly inside the tree (solved and terminal nodes are worth their
      result's sign: +1 win, 0 draw, -1 loss).
    chain_pruning: play forced captures as macro steps and search only the moves worth searching.
    max_depth: deepest level a simulation descends to (mctx's ``max_depth``; None: no limit). A batched
      search runs as many traversal steps as the deepest tree of the batch, and exact values let a few
      trees follow proven lines far down; a cap bounds that cost (benchmarks/search_throughput.py).
    proofs: keep proven bounds on every node's value inside the tree (``tree_search``'s score-bounded search:
      MCTS-Solver with draws). A node is proven when its exact leaves settle it: its parent's Q of it is then
      exact, a root move proven worse than another's sure result is neither played nor in the policy target,
      and a proven root plays a move that keeps its result (``SearchOutput.root_proven``).
    lane_share: the share of a batch's games that the forced-capture settle and the endgame analysis run on
      (``loops.on_lanes``): the games that need them are gathered into that many lanes, so a few long captures
      or chain walks do not hold every game's lanes; where more games need them, the whole batch runs. The
      same results at any share; 1: always the whole batch.
    """

    algorithm: str = "gumbel"
    num_simulations: int = 32
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    c_puct: float = 2.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    endgame_pruning: bool = True
    chain_pruning: bool = True
    max_depth: Optional[int] = None
    proofs: bool = False
    lane_share: float = 0.25

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"search.algorithm must be one of {tuple(ALGORITHMS)}, got {self.algorithm!r}")
        if not isinstance(self.num_simulations, int) or self.num_simulations < 1:
            raise ValueError(f"search.num_simulations must be a positive integer, got {self.num_simulations!r}")
        if not isinstance(self.max_num_considered_actions, int) or self.max_num_considered_actions < 1:
            raise ValueError(
                f"search.max_num_considered_actions must be a positive integer, got "
                f"{self.max_num_considered_actions!r}"
            )
        if self.max_depth is not None and (not isinstance(self.max_depth, int) or self.max_depth < 1):
            raise ValueError(f"search.max_depth must be a positive integer or null, got {self.max_depth!r}")
        if not isinstance(self.lane_share, (int, float)) or not 0 < self.lane_share <= 1:
            raise ValueError(f"search.lane_share must be in (0, 1], got {self.lane_share!r}")
        for name in ("endgame_pruning", "chain_pruning", "proofs"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"search.{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("gumbel_scale", "c_puct", "dirichlet_alpha", "dirichlet_fraction"):
            if getattr(self, name) < 0:
                raise ValueError(f"search.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.dirichlet_fraction > 1:
            raise ValueError(f"search.dirichlet_fraction must be <= 1, got {self.dirichlet_fraction!r}")


# Settings dabjax had, with the one value that still describes its search: checkpoints and agents saved before
# they went carry them.
REMOVED_FIELDS = {"exact_value": "sign"}


# The environment's rule, saved beside the search settings (a checkpoint's or an agent's ``search`` fields):
# ``rule_from_saved`` reads it, ``config_from_saved`` leaves it out.
SAVED_RULE = "early_termination"


def rule_from_saved(fields: dict) -> bool:
    """The majority rule (``env_lib.Env``'s) saved with search settings; False where none was saved."""
    return bool(fields.get(SAVED_RULE, False))


def saved_fields(config: SearchConfig, env: env_lib.Env) -> dict:
    """What a checkpoint or an agent's description saves of a search: ``config``'s fields and ``env``'s rule."""
    return {**dataclasses.asdict(config), SAVED_RULE: env.early_termination}


def config_from_saved(fields: dict) -> SearchConfig:
    """The ``SearchConfig`` stored in a checkpoint's metadata or an agent's description (``dataclasses.asdict``
    of it, with the environment's rule, ``SAVED_RULE``, which is left out). A removed setting
    (``REMOVED_FIELDS``) is dropped where it holds the behaviour kept; another value of it is a ValueError naming
    it."""
    for name, kept in REMOVED_FIELDS.items():
        if name in fields and fields[name] != kept:
            raise ValueError(f"saved search settings have search.{name}={fields[name]!r}: this dabjax has no "
                             f"search.{name} and searches as {name}={kept!r} did")
    return SearchConfig(**{name: value for name, value in fields.items()
                           if name not in REMOVED_FIELDS and name != SAVED_RULE})


@chex.dataclass(frozen=True)
class SearchOutput:
    """Results of one batched search (``N`` games, ``L`` lines). Every field means the same for every algorithm;
    the algorithms differ only in how they come to it.

    action: int32 ``[N]``, the move to play (agents' greedy play, self-play after its sampled moves). Gumbel
      MuZero: mctx's ``action``, the candidate sequential halving keeps (with the root's Gumbel noise: a sample
      at ``gumbel_scale > 0``, the best by the network and search at 0). PUCT, UCT: the most visited move (the
      lowest line index among equals).
    sampled_action: int32 ``[N]``, the move to play while self-play explores (its first ``sample_moves``
      searched moves). PUCT, UCT: drawn in proportion to the visit counts (temperature 1). Gumbel MuZero:
      ``action``, which its Gumbel noise already samples.
    visit_counts: int32 ``[N, L]``, the root's visits of each move (0 for moves not searched; they sum to the
      number of simulations).
    policy_target: float32 ``[N, L]``, the policy training learns from: non-negative, summing to 1, 0 at the
      moves not searchable (illegal, or pruned). Gumbel MuZero: the improved policy (mctx's ``action_weights``,
      softmax of the masked prior logits plus the completed Q-values as mctx transforms them). PUCT, UCT: the
      visit distribution, ``visit_counts / visit_counts.sum()``.
    root_q: float32 ``[N]``, the value target, from the root's side to move: the exact value (+1/0/-1) where
      the root is solved; else PUCT, UCT: the visit-weighted mean of the children's Q; Gumbel MuZero: the
      improved policy's expectation of the completed Q-values (``completed_q_value``).
    root_value: float32 ``[N]``, the evaluator's own value of the root (``v`` in the paper's nvr).
    root_solved: bool ``[N]``, the root is terminal or a simple endgame (then ``root_q`` is exact).
    root_proven: bool ``[N]``, ``root_q`` is exact: the root is solved, or (``proofs``) the tree proved it.
    tree: the mctx search tree (for node extraction: ``node_policy`` gives its nodes' policy targets).
    """

    action: jax.Array
    sampled_action: jax.Array
    visit_counts: jax.Array
    policy_target: jax.Array
    root_q: jax.Array
    root_value: jax.Array
    root_solved: jax.Array
    root_proven: jax.Array
    tree: mctx.Tree


def masked_argmax(key: jax.Array, scores: jax.Array, valid: jax.Array) -> jax.Array:
    """int32 ``[]``: the index of the highest of ``scores`` float32 ``[K]`` among ``valid`` bool ``[K]``, ties
    broken at random by noise of at most ``1e-7`` (far below any value difference). Unbatched: vmap it."""
    noise = 1e-7 * jax.random.uniform(key, scores.shape)  # tie-break
    return jnp.argmax(jnp.where(valid, scores + noise, -jnp.inf)).astype(jnp.int32)


def puct_selection(key, tree, node_index, depth, *, c_puct: float, pb_c_base: float = 19652.0):
    """AlphaZero's PUCT on an unbatched mctx tree, with searchable-move masking at every node."""
    visits = tree.children_visits[node_index]
    node_visits = tree.node_visits[node_index]
    pb_c = c_puct + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    exploration = jnp.sqrt(node_visits) * pb_c * prior / (visits + 1)
    value = mctx.qtransform_by_parent_and_siblings(tree, node_index)
    return masked_argmax(key, value + exploration, tree_search.searchable_children(tree, node_index, depth))


def uct_selection(key, tree, node_index, depth, *, c: float):
    """UCB1 on an unbatched mctx tree: unvisited searchable moves first, then ``Q + c sqrt(ln N / n)``."""
    visits = tree.children_visits[node_index].astype(jnp.float32)
    total = jnp.maximum(tree.node_visits[node_index].astype(jnp.float32), 1.0)
    q = tree.qvalues(node_index)
    score = jnp.where(visits > 0, q + c * jnp.sqrt(jnp.log(total) / jnp.maximum(visits, 1.0)), 1e9)
    return masked_argmax(key, score, tree_search.searchable_children(tree, node_index, depth))


def _dirichlet_logits(config: SearchConfig, key: jax.Array, logits: jax.Array, valid: jax.Array) -> jax.Array:
    """Root prior mixed with Dirichlet noise over the searchable moves (AlphaZero's exploration)."""
    probs = jax.nn.softmax(logits, axis=-1)
    noise = jax.random.dirichlet(key, jnp.full(logits.shape[-1], config.dirichlet_alpha), logits.shape[:-1])
    noise = jnp.where(valid, noise, 0.0)
    noise = noise / jnp.maximum(noise.sum(-1, keepdims=True), 1e-12)
    mixed = (1 - config.dirichlet_fraction) * probs + config.dirichlet_fraction * noise
    return network.mask_logits(jnp.log(jnp.maximum(mixed, 1e-30)), valid)


def network_evaluator(network_config: network.NetworkConfig, geometry: BoardGeometry) -> Evaluator:
    """The policy-value network as an evaluator: ``params`` are its flax variables."""
    model = network.PolicyValueNet(network_config)

    def evaluate(params, key, states):
        del key
        observations = jax.vmap(lambda s: env_lib.observe(geometry, s))(states)
        return model.apply(params, observations)

    return evaluate


def rollout_evaluator(env: env_lib.Env) -> Evaluator:
    """Uniform prior and one uniformly random playout's result (+1/0/-1 for the mover): pure MCTS."""

    def evaluate(params, key, states):
        del params
        keys = jax.random.split(key, states.lines.shape[0])
        scores = jax.vmap(lambda k, s: playout.random_playout_scores(env, k, s))(keys, states)
        own = jnp.take_along_axis(scores, states.current_player[:, None], axis=1)[:, 0]
        value = jnp.sign(2 * own - scores.sum(-1)).astype(jnp.float32)
        return jnp.zeros(states.lines.shape, jnp.float32), value

    return evaluate


@chex.dataclass(frozen=True)
class KnownResults:
    """Positions whose result a solver proved outside the search (``K`` of them, ``L`` lines): a search given them
    treats a node at one of these positions as solved, its proven result its exact value, as it treats a simple
    endgame (and, with ``proofs``, backs it up as proven bounds).

    lines: bool ``[K, L]``; margin: int32 ``[K]``, the mover's boxes minus the opponent's so far; result: float32
    ``[K]``, the proven result class for the side to move (+1 win, 0 draw, -1 loss); valid: bool ``[K]``, the
    rows that hold a proven position.
    """

    lines: jax.Array
    margin: jax.Array
    result: jax.Array
    valid: jax.Array


def no_known_results(count: int, num_lines: int) -> KnownResults:
    """``KnownResults`` of ``count`` empty rows: a fixed shape to fill, so that a compiled search takes them all."""
    return KnownResults(lines=jnp.zeros((count, num_lines), jnp.bool_), margin=jnp.zeros(count, jnp.int32),
                        result=jnp.zeros(count, jnp.float32), valid=jnp.zeros(count, jnp.bool_))


def _known(known: KnownResults, states: env_lib.State) -> tuple[jax.Array, jax.Array]:
    """``(matched [N], proven result for the mover [N])``: the states at a position of ``known``."""
    same = ((states.lines[:, None, :] == known.lines[None]).all(-1)
            & (states.margin[:, None] == known.margin[None]) & known.valid[None])  # [N, K]
    # The first matching row: a position may sit in several rows (a tree's transpositions), all with its one result.
    return same.any(-1), known.result[jnp.argmax(same, axis=-1)]


class Frontier(NamedTuple):
    """The most visited unproven positions of a searched tree within a solver's reach, to prove outside the
    search (``proof_frontier``; ``count`` rows a game). node: int32 ``[N, count]``, the node's index in the tree;
    lines: bool ``[N, count, L]``; margin: int32 ``[N, count]``; value: float32 ``[N, count]``, the node's value
    in the search from its mover's side (a first guess for a prover); prior_logits: float32 ``[N, count, L]``, its
    masked prior (a move ordering); visits: int32 ``[N, count]``; valid: bool ``[N, count]``."""

    node: jax.Array
    lines: jax.Array
    margin: jax.Array
    value: jax.Array
    prior_logits: jax.Array
    visits: jax.Array
    valid: jax.Array


def proof_frontier(tree: mctx.Tree, count: int, max_undrawn: jax.Array) -> Frontier:
    """The ``count`` most visited nodes below the root of ``tree`` (batched; searched with ``proofs`` or not)
    whose position has at most ``max_undrawn`` undrawn lines and is neither over, solved nor proven in the tree:
    the promising leaves a solver can prove within a move. Static ``count``; jit-able."""
    states = tree.embeddings
    undrawn = (~states.lines).sum(-1)  # [N, S + 1]
    visits = tree.node_visits
    open_ = (visits > 0) & ~states.terminated & (undrawn <= max_undrawn)
    open_ = open_.at[:, tree_search.ROOT].set(False)
    if isinstance(tree.extra_data, tree_search.Proofs):
        open_ &= tree.extra_data.lower < tree.extra_data.upper
    score = jnp.where(open_, visits, -1)
    _, nodes = jax.lax.top_k(score, min(count, score.shape[1]))  # [N, k]: a small tree has fewer nodes

    def take(x):  # the chosen nodes' rows, padded to ``count`` (padding rows are not valid)
        rows = jnp.take_along_axis(x, nodes.reshape(nodes.shape + (1,) * (x.ndim - 2)), axis=1)
        return jnp.pad(rows, [(0, 0), (0, count - rows.shape[1])] + [(0, 0)] * (x.ndim - 2))

    return Frontier(node=jnp.pad(nodes, [(0, 0), (0, count - nodes.shape[1])]).astype(jnp.int32),
                    lines=take(states.lines), margin=take(states.margin), value=take(tree.node_values),
                    prior_logits=take(tree.children_prior_logits), visits=take(visits), valid=take(open_))


def _lanes(config: SearchConfig, states: env_lib.State) -> int:
    """The lanes of a batch's data-dependent work (``search.lane_share`` of its games)."""
    return loops.lanes_for(states.lines.shape[0], config.lane_share)


def _solve(config: SearchConfig, geometry: BoardGeometry, states: env_lib.State,
           known: Optional[KnownResults] = None):
    """``(solved [N], exact value for the mover [N]: the result's sign)``: terminal states, simple endgames if
    pruning, and the positions of ``known`` (their proven result)."""
    if config.endgame_pruning:
        solved, margin = endgame.simple_endgame_margin_on_lanes(geometry, states, _lanes(config, states))
    else:
        solved, margin = states.terminated, states.margin
    exact = jnp.sign(margin).astype(jnp.float32)
    if known is None:
        return solved, exact
    matched, result = _known(known, states)
    return solved | matched, jnp.where(solved, exact, result)


def _searchable(config: SearchConfig, geometry: BoardGeometry, states: env_lib.State) -> jax.Array:
    if config.chain_pruning:
        return jax.vmap(lambda s: forced.searchable_mask(geometry, s))(states)
    return states.legal_action_mask


def _expand(config: SearchConfig, env: env_lib.Env, states: env_lib.State, actions: jax.Array):
    """``(children, searchable [N, L])``: the positions after ``actions`` (and, with chain pruning, the forced
    captures that follow), and their moves worth searching (the forced-capture loop computes them last)."""
    states = jax.vmap(env.step)(states, actions)
    if not config.chain_pruning:
        return states, states.legal_action_mask

    states, _, choice = forced.play_forced_moves_on_lanes(env, states, _lanes(config, states))
    return states, jax.vmap(forced.searchable_from_choice)(states, choice)


def make_recurrent_fn(config: SearchConfig, env: env_lib.Env, evaluator: Evaluator,
                      known: Optional[KnownResults] = None):
    """The mctx ``recurrent_fn``: the true environment as the model, with the prunings (and ``known``'s
    positions solved)."""

    def recurrent_fn(params, key, action, states):
        mover = states.current_player
        was_over = states.terminated  # terminal, or solved and marked so: nothing below counts
        # The barrier keeps XLA from fusing the forced-capture loop's last steps into every later reader of the
        # children (the endgame analysis, the observation), which made every step slower (docs/lab/training.md,
        # "Search depth").
        next_states, searchable = jax.lax.optimization_barrier(_expand(config, env, states, action))
        solved, exact = _solve(config, env.geometry, next_states, known)
        same_player = next_states.current_player == mover
        reward = jnp.where(solved & ~was_over, jnp.where(same_player, exact, -exact), 0.0)
        logits, value = evaluator(params, key, next_states)
        stop = solved | was_over
        # Below a terminal or solved node nothing counts. A uniform prior over every line there makes the
        # interior selection try a new child on each visit, so that such a subtree stays one level deep
        # instead of growing a chain: every level is one more step of each later traversal.
        logits = jnp.where(stop[:, None], 0.0, network.mask_logits(logits, searchable))
        discount = jnp.where(stop, 0.0, jnp.where(same_player, 1.0, -1.0))
        next_states = next_states.replace(terminated=next_states.terminated | solved)
        output = mctx.RecurrentFnOutput(
            reward=reward.astype(jnp.float32),
            discount=discount.astype(jnp.float32),
            prior_logits=logits,
            value=jnp.where(stop, 0.0, value).astype(jnp.float32),
        )
        return output, next_states

    return recurrent_fn


def search_roots(config: SearchConfig, env: env_lib.Env, states: env_lib.State,
                 where: Optional[jax.Array] = None) -> env_lib.State:
    """The roots to search from ``states`` (leading axis N): with chain pruning the forced captures are played
    first (they are not decisions, and nothing records them), in the games ``where`` (bool ``[N]``; None: all);
    without it the states as given. Self-play searches these roots; an agent searches its states as given, its
    move being for that position (a search's root prior holds only the forced capture there)."""
    if not config.chain_pruning:
        return states
    played, _, _ = forced.play_forced_moves_on_lanes(env, states, _lanes(config, states))
    if where is None:
        return played
    return jax.tree_util.tree_map(
        lambda a, b: jnp.where(jnp.reshape(where, (-1,) + (1,) * (a.ndim - 1)), a, b), played, states)


def visit_weighted_q(tree: mctx.Tree) -> jax.Array:
    """float32 ``[N]``: the visit-weighted mean of the root's children's Q (PUCT's and UCT's value target)."""
    qvalues = tree.qvalues(jnp.zeros(tree.node_visits.shape[0], jnp.int32))  # [N, L]
    visits = tree.children_visits[:, 0].astype(jnp.float32)
    return (visits * qvalues).sum(-1) / jnp.maximum(visits.sum(-1), 1.0)


def completed_q_value(tree: mctx.Tree, policy_target: jax.Array) -> jax.Array:
    """float32 ``[N]``: Gumbel MuZero's value target. It spreads visits evenly over its candidates (sequential
    halving), so the value is the improved policy's (``policy_target [N, L]``) expectation of the completed
    Q-values (unvisited moves take mctx's mixed value, as in its completed-Q transform)."""
    qvalues = tree.qvalues(jnp.zeros(tree.node_visits.shape[0], jnp.int32))  # [N, L]
    visits = tree.children_visits[:, 0].astype(jnp.float32)
    prior = jax.nn.softmax(tree.children_prior_logits[:, 0], axis=-1)
    prior = jnp.maximum(prior, jnp.finfo(prior.dtype).tiny)
    visited = visits > 0
    weighted_q = (jnp.where(visited, prior * qvalues, 0.0)).sum(-1) / jnp.maximum(
        jnp.where(visited, prior, 0.0).sum(-1), jnp.finfo(prior.dtype).tiny
    )
    total = visits.sum(-1)
    mixed = (tree.raw_values[:, 0] + total * weighted_q) / (total + 1)
    completed = jnp.where(visited, qvalues, mixed[:, None])
    return (policy_target * completed).sum(-1)


def visit_policy(tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
    """float32 ``[N, K, L]``: the visit distribution over the children of the nodes ``node_index`` int32
    ``[N, K]`` of a batched tree: PUCT's and UCT's policy target of a tree node."""
    counts = jnp.take_along_axis(tree.children_visits, node_index[..., None], axis=1).astype(jnp.float32)
    return counts / jnp.maximum(counts.sum(-1, keepdims=True), 1.0)


def gumbel_policy(tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
    """float32 ``[N, K, L]``: ``softmax(prior logits + completed Q)`` at the nodes ``node_index`` int32 ``[N, K]``
    of a batched tree, the policy Gumbel MuZero's interior selection improves to: its policy target of a tree
    node."""

    def one_game(game_tree, indices):
        def one_node(index):
            completed_q = mctx.qtransform_completed_by_mix_value(game_tree, index)
            return jax.nn.softmax(game_tree.children_prior_logits[index] + completed_q, axis=-1)

        return jax.vmap(one_node)(indices)

    return jax.vmap(one_game)(tree, node_index)


def _root(config: SearchConfig, env: env_lib.Env, evaluator: Evaluator, params, key: jax.Array,
          states: env_lib.State, root_mask: Optional[jax.Array] = None):
    """``(keys for the search, the root's noise and its sampled move; masked prior logits [N, L]; value [N];
    searchable [N, L])``: the root every algorithm starts from. ``root_mask`` (bool ``[N, L]``, None: all): the
    root's searchable moves are only those it holds, in each game where it holds one."""
    key_root, key_search, key_noise, key_action = jax.random.split(key, 4)
    logits, value = evaluator(params, key_root, states)
    searchable = _searchable(config, env.geometry, states)
    if root_mask is not None:
        kept = searchable & root_mask
        searchable = jnp.where(kept.any(-1, keepdims=True), kept, searchable)
    return (key_search, key_noise, key_action), network.mask_logits(logits, searchable), value, searchable


def _output(config: SearchConfig, env: env_lib.Env, states: env_lib.State, tree: mctx.Tree, action,
            sampled_action, policy_target, search_q, value) -> SearchOutput:
    """The ``SearchOutput`` of a search's results; solved roots take their exact value, and with ``proofs`` the
    tree's proven bounds at the root correct the moves, the policy target and the value (``_proven_root``)."""
    solved, exact = _solve(config, env.geometry, states)
    proven = solved
    if config.proofs:
        action, sampled_action, policy_target, search_q, proven = _proven_root(
            tree, solved, action, sampled_action, policy_target, search_q)
    return SearchOutput(
        action=action.astype(jnp.int32),
        sampled_action=sampled_action.astype(jnp.int32),
        visit_counts=tree.children_visits[:, 0].astype(jnp.int32),
        policy_target=policy_target.astype(jnp.float32),
        root_q=jnp.where(solved, exact, search_q).astype(jnp.float32),
        root_value=value.astype(jnp.float32),
        root_solved=solved,
        root_proven=proven,
        tree=tree,
    )


def _proven_root(tree: mctx.Tree, solved: jax.Array, action, sampled_action, policy_target, search_q):
    """What the proven bounds at the roots (``tree_search.root_bounds``) change, where the root is not solved
    (a solved root's subtree is not searched): a move whose upper bound is below the root's lower bound (a sure
    result another move keeps) leaves the policy target and is not played; at a proven root, a move not proven
    to keep its result is not played either. Such a move is replaced by the kept move of highest policy target.
    Returns ``(action, sampled_action, policy_target, search_q, proven)``, ``proven`` bool ``[N]``."""
    bounds = tree_search.root_bounds(tree)
    searchable = jax.vmap(tree_search.searchable_children, (0, None, None))(tree, tree_search.ROOT, 0)
    low = bounds.lower[:, None]
    worse = searchable & (bounds.action_upper < low) & ~solved[:, None]
    keeps = searchable & (bounds.action_lower >= low)
    proven = ~solved & (bounds.lower == bounds.upper)
    kept = jnp.where(worse, 0.0, policy_target)
    kept_total = kept.sum(-1, keepdims=True)
    policy_target = jnp.where(kept_total > 0, kept / jnp.maximum(kept_total, 1e-30), policy_target)
    best_kept = jnp.argmax(jnp.where(keeps, policy_target, -1.0), axis=-1)

    def corrected(move):
        chosen_worse = jnp.take_along_axis(worse, move[:, None], axis=1)[:, 0]
        chosen_keeps = jnp.take_along_axis(keeps, move[:, None], axis=1)[:, 0]
        return jnp.where(chosen_worse | (proven & ~chosen_keeps), best_kept, move)

    search_q = jnp.where(proven, bounds.lower, search_q)
    return corrected(action), corrected(sampled_action), policy_target, search_q, proven | solved


def _proof_arguments(config: SearchConfig, states: env_lib.State, value: jax.Array, extra_data: bool = False):
    """The keyword arguments that turn ``tree_search``'s proofs on, where ``config.proofs``; none otherwise, so
    that without them the call is mctx's own (the suite runs mctx's functions in their place)."""
    if not config.proofs:
        return {}
    if not extra_data:
        return {"proofs": True}
    unproven = tree_search.unproven(states.lines.shape[0], config.num_simulations, value.dtype)
    return {"proofs": True, "extra_data": unproven}


def gumbel_search(
    config: SearchConfig,
    env: env_lib.Env,
    evaluator: Evaluator,
    params,
    key: jax.Array,
    states: env_lib.State,
    root_mask: Optional[jax.Array] = None,
    known: Optional[KnownResults] = None,
) -> SearchOutput:
    """Gumbel MuZero (``mctx.gumbel_muzero_policy``) over every state of the batch (leading axis N), searched as
    given (``search_roots`` plays forced captures first). ``config.algorithm`` is not read. Jit-able;
    ``config``, ``env`` and ``evaluator`` are static."""
    (key_search, _, _), logits, value, searchable = _root(config, env, evaluator, params, key, states, root_mask)
    result = tree_search.gumbel_muzero_policy(
        params,
        key_search,
        mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states),
        make_recurrent_fn(config, env, evaluator, known),
        num_simulations=config.num_simulations,
        invalid_actions=~searchable,
        max_num_considered_actions=min(config.max_num_considered_actions, env.num_actions),
        gumbel_scale=config.gumbel_scale,
        max_depth=config.max_depth,
        **_proof_arguments(config, states, value),
    )
    tree, policy_target = result.search_tree, result.action_weights
    return _output(config, env, states, tree, result.action, result.action, policy_target,
                   completed_q_value(tree, policy_target), value)


def _visit_search(config: SearchConfig, env: env_lib.Env, evaluator: Evaluator, params, key: jax.Array,
                  states: env_lib.State, select, root_noise: bool, root_mask: Optional[jax.Array],
                  known: Optional[KnownResults] = None) -> SearchOutput:
    """A search through ``mctx.search`` with ``select`` at every node, its targets from the root's visits (PUCT,
    UCT); ``root_noise``: Dirichlet noise in the root's prior."""
    (key_search, key_noise, key_action), logits, value, searchable = _root(
        config, env, evaluator, params, key, states, root_mask)
    if root_noise:
        logits = _dirichlet_logits(config, key_noise, logits, searchable)
    tree = tree_search.search(
        params,
        key_search,
        root=mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states),
        recurrent_fn=make_recurrent_fn(config, env, evaluator, known),
        root_action_selection_fn=lambda key, tree, node: select(key, tree, node, jnp.int32(0)),
        interior_action_selection_fn=select,
        num_simulations=config.num_simulations,
        invalid_actions=~searchable,
        max_depth=config.max_depth,
        **_proof_arguments(config, states, value, extra_data=True),
    )
    visits = tree.children_visits[:, 0].astype(jnp.float32)
    policy_target = visits / jnp.maximum(visits.sum(-1, keepdims=True), 1.0)
    most_visited = jnp.argmax(policy_target, axis=-1)
    sampled = jax.random.categorical(key_action, network.mask_logits(jnp.log(visits), visits > 0))
    return _output(config, env, states, tree, most_visited, sampled, policy_target, visit_weighted_q(tree),
                   value)


def puct_search(
    config: SearchConfig,
    env: env_lib.Env,
    evaluator: Evaluator,
    params,
    key: jax.Array,
    states: env_lib.State,
    root_mask: Optional[jax.Array] = None,
    known: Optional[KnownResults] = None,
) -> SearchOutput:
    """AlphaZero's PUCT (``puct_selection``, constant ``config.c_puct``) with Dirichlet noise at the root, through
    ``mctx.search``, over every state of the batch (leading axis N), searched as given. ``config.algorithm`` is
    not read. Jit-able; ``config``, ``env`` and ``evaluator`` are static."""
    select = functools.partial(puct_selection, c_puct=config.c_puct)
    return _visit_search(config, env, evaluator, params, key, states, select, config.dirichlet_fraction > 0,
                         root_mask, known)


def uct_search(
    config: SearchConfig,
    env: env_lib.Env,
    evaluator: Evaluator,
    params,
    key: jax.Array,
    states: env_lib.State,
    root_mask: Optional[jax.Array] = None,
    known: Optional[KnownResults] = None,
) -> SearchOutput:
    """UCB1 (``uct_selection``, constant ``config.c_puct``; the prior is not read) through ``mctx.search``, over
    every state of the batch (leading axis N), searched as given: pure MCTS with ``rollout_evaluator``.
    ``config.algorithm`` is not read. Jit-able; ``config``, ``env`` and ``evaluator`` are static."""
    select = functools.partial(uct_selection, c=config.c_puct)
    return _visit_search(config, env, evaluator, params, key, states, select, False, root_mask, known)


# (config, env, evaluator, params, key, states[, root_mask[, known]]) -> SearchOutput
SearchFunction = Callable[..., SearchOutput]
NodePolicy = Callable[[mctx.Tree, jax.Array], jax.Array]


class Algorithm(NamedTuple):
    """A search algorithm: its search, and the policy target of a node of its tree (``tree_nodes``)."""

    search: SearchFunction
    node_policy: NodePolicy


# The one place ``search.algorithm`` is read.
ALGORITHMS: dict[str, Algorithm] = {
    "gumbel": Algorithm(gumbel_search, gumbel_policy),
    "puct": Algorithm(puct_search, visit_policy),
    "uct": Algorithm(uct_search, visit_policy),
}


def search_function(config: SearchConfig) -> SearchFunction:
    """The search of ``config.algorithm``: ``gumbel_search``, ``puct_search`` or ``uct_search``."""
    return ALGORITHMS[config.algorithm].search


def node_policy(config: SearchConfig) -> NodePolicy:
    """The policy target of a tree node for ``config.algorithm``: ``gumbel_policy`` (Gumbel MuZero) or
    ``visit_policy`` (PUCT, UCT)."""
    return ALGORITHMS[config.algorithm].node_policy


def run_search(
    config: SearchConfig,
    env: env_lib.Env,
    evaluator: Evaluator,
    params,
    key: jax.Array,
    states: env_lib.State,
    root_mask: Optional[jax.Array] = None,
    known: Optional[KnownResults] = None,
) -> SearchOutput:
    """The search of ``config.algorithm`` (``search_function``) over every state of the batch (leading axis N),
    searched as given (``search_roots`` plays forced captures first). ``root_mask`` (bool ``[N, L]``, optional):
    the root searches only the moves it holds (where it holds a searchable one), e.g. not the moves a solver
    refuted. ``known`` (``KnownResults``, optional): positions a solver proved, solved wherever the search meets
    them. Every search function takes both. Jit-able; ``config``, ``env`` and ``evaluator`` are static."""
    return search_function(config)(config, env, evaluator, params, key, states, root_mask, known)
