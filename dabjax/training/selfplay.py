"""Batched backward self-play (the paper's section 4.2.1): one jitted function per iteration.

``N`` games run in lockstep from the empty board. Moves before the start step ``st`` are played by the
greedy opening policy and not recorded; from ``st`` on, every decision comes from the search (with chain
pruning, forced captures are played without searching and not recorded either). Finished games are
masked, not waited on: the loop has a static length of ``L`` rounds (each round makes at least one move in
every running game). A round in which no game searches skips the search entirely (``lax.cond``, a command
buffer's conditional on a GPU: ``dabjax.game.loops``).

Every searched position is recorded compactly (drawn lines, claimed boxes, the mover's margin so far, from
which the observation is rebuilt at training time) with its move number, policy target, root Q, network
value ``v`` and, once the game is over, the result ``z`` from that position's side to move. With node
augmentation the qualifying search-tree nodes of every search are recorded too, as the
``tree_nodes.NodeSamples`` that extraction returns. For a network with dense heads (``dense_targets``) every
recorded position also gets its game's final box owners and margin from its side to move (``replay.DenseTargets``):
exact, since the game is played to its end, whatever move the curriculum started it at.

AlphaZero's forward self-play is the same function with ``st = 0``. The start step may differ per game
(``curriculum.game_start_steps``: games that revisit earlier curriculum stages).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from dabjax.game import env as env_lib
from dabjax.game import policies
from dabjax.game.geometry import BoardGeometry
from dabjax.search import mcts, tree_nodes
from dabjax.training import replay


class RoundRecord(NamedTuple):
    """What one round of ``self_play`` records of every game, before the games end (``N`` games, ``L`` lines;
    the rounds' ``lax.scan`` stacks them to ``[T, N, ...]``).

    positions: ``tree_nodes.Positions [N]``, each game's position at its decision (after forced captures);
    move_number int32 ``[N]``: moves played before it; mover int32 ``[N]``: the player to move (0 or 1); policy
    float32 ``[N, L]``: the search's policy target (a distribution over the lines); root_q, root_value float32
    ``[N]``: the search's value target and the network's own value of the position, from the mover's side, in
    [-1, 1] (``mcts.SearchOutput``); searched bool ``[N]``: the game searched this round, so the slot holds a
    sample (the other fields are meaningless where it does not).
    """

    positions: tree_nodes.Positions
    move_number: jax.Array
    mover: jax.Array
    policy: jax.Array
    root_q: jax.Array
    root_value: jax.Array
    searched: jax.Array


@chex.dataclass(frozen=True)
class SelfPlayRecord:
    """One iteration's data. ``T = L`` rounds, ``N`` games, ``K`` node slots, ``L`` lines.

    positions: ``tree_nodes.Positions [T, N]``; move_number int32 ``[T, N]``; policy float32 ``[T, N, L]``;
    root_q, root_value, z float32 ``[T, N]``; searched bool ``[T, N]`` (the slot holds a searched position);
    nodes: ``tree_nodes.NodeSamples [T, N, K]``, the qualifying nodes of every search's tree (valid only in
    searched slots), or None without node augmentation; final_scores int32 ``[N, 2]``; start_step int32
    ``[N]``: each game's start step; dense: ``replay.DenseTargets [T, N]`` (``final_targets``), or None without
    ``dense_targets``.
    """

    positions: tree_nodes.Positions
    move_number: jax.Array
    policy: jax.Array
    root_q: jax.Array
    root_value: jax.Array
    z: jax.Array
    searched: jax.Array
    nodes: tree_nodes.NodeSamples | None
    final_scores: jax.Array
    start_step: jax.Array
    dense: replay.DenseTargets | None = None


def final_targets(geometry: BoardGeometry, final: env_lib.State, mover: jax.Array) -> replay.DenseTargets:
    """The dense targets of positions whose side to move is ``mover`` (int32 ``[T, N]``) in the games that ended
    in ``final`` (``N`` states): each box's final owner from the mover's view (+1 mine, -1 the opponent's, 0 a
    box early termination left unclaimed) and the final margin over the number of boxes."""
    owner = final.box_owner[None, :, :]  # [1, N, B]: 0 or 1, -1 unclaimed
    ownership = jnp.where(owner < 0, 0, jnp.where(owner == mover[..., None], 1, -1)).astype(jnp.int8)
    margin_p0 = (final.scores[:, 0] - final.scores[:, 1]).astype(jnp.float32)[None, :]
    margin = jnp.where(mover == 0, margin_p0, -margin_p0) / geometry.num_boxes
    return replay.DenseTargets(ownership=ownership, margin=margin, margin_known=jnp.ones(mover.shape, bool))


@dataclasses.dataclass(frozen=True)
class SelfPlaySettings:
    """Static settings of ``self_play`` (hashable, so the jitted function is built once)."""

    env: env_lib.Env  # the board and its rule
    search: mcts.SearchConfig
    num_games: int
    extraction: tree_nodes.ExtractionConfig | None  # None: no node augmentation
    sample_moves: int = 0  # searched moves played as SearchOutput.sampled_action, then .action
    batch_sharding: jax.sharding.Sharding | None = None  # games split over devices (see dabjax.training.devices)
    dense_targets: bool = False  # record the dense heads' targets (final owners and margin)

    @property
    def geometry(self) -> BoardGeometry:
        return self.env.geometry


def self_play(
    settings: SelfPlaySettings, evaluator: mcts.Evaluator, params, key: jax.Array, start_step: jax.Array
) -> SelfPlayRecord:
    """Plays ``settings.num_games`` games: greedy before ``start_step`` (int32 ``[]``, or ``[N]``: one per
    game), searched after."""
    num_games = settings.num_games
    start_step = jnp.broadcast_to(jnp.asarray(start_step, jnp.int32), (num_games,))
    play_round = functools.partial(_play_round, settings, evaluator, params, start_step)
    init = (_empty_boards(settings), jnp.zeros(num_games, jnp.int32))
    keys = jax.random.split(key, settings.geometry.num_lines)
    (final, _), (records, nodes) = jax.lax.scan(play_round, init, keys)
    return _finished_record(settings, final, records, nodes, start_step)


def _empty_boards(settings: SelfPlaySettings) -> env_lib.State:
    """``N`` empty boards, laid over the devices when ``settings.batch_sharding`` asks."""
    start = env_lib.batch_init(settings.geometry, settings.num_games)
    if settings.batch_sharding is not None:
        # Every array with the games axis follows: XLA partitions search and steps over the devices.
        start = jax.lax.with_sharding_constraint(start, settings.batch_sharding)
    return start


def _play_round(settings: SelfPlaySettings, evaluator: mcts.Evaluator, params, start_step: jax.Array, carry,
                round_key: jax.Array):
    """One round of every game (a ``lax.scan`` body): forced captures (with chain pruning), then one move,
    searched from the start step on and greedy before it. ``carry``: ``(states, searched moves int32 [N])``;
    returns the next carry and ``(the round's RoundRecord, its tree nodes or None)``."""
    g, config = settings.geometry, settings.search
    states, searched_count = carry
    key_greedy, key_search = jax.random.split(round_key)
    in_search_phase = ~states.terminated & (states.num_moves >= start_step)
    # The forced captures of the games past their start step are played first, unrecorded: not decisions.
    states = mcts.search_roots(config, settings.env, states, in_search_phase)
    searching = ~states.terminated & (states.num_moves >= start_step)
    output, nodes = _search_where_needed(settings, evaluator, params, start_step, states, searching, key_search)
    action = jnp.where(searched_count < settings.sample_moves, output.sampled_action, output.action)
    greedy = policies.greedy(g, key_greedy, states)
    action = jnp.where(searching, action, greedy).astype(jnp.int32)
    record = RoundRecord(
        positions=tree_nodes.positions_of(states),
        move_number=states.num_moves.astype(jnp.int32),
        mover=states.current_player,
        policy=output.policy_target,
        root_q=output.root_q,
        root_value=output.root_value,
        searched=searching,
    )
    if nodes is not None:
        nodes = nodes.replace(valid=nodes.valid & searching[:, None])
    next_states = jax.vmap(settings.env.step)(states, action)
    return (next_states, searched_count + searching.astype(jnp.int32)), (record, nodes)


def _search_where_needed(settings: SelfPlaySettings, evaluator: mcts.Evaluator, params, start_step: jax.Array,
                         states: env_lib.State, searching: jax.Array, key: jax.Array):
    """``(mcts.SearchOutput, tree_nodes.NodeSamples or None)`` of every game's search, or zeros of their shapes
    when no game of the round is ``searching`` (bool ``[N]``): a ``lax.cond`` skips the search then."""
    config = settings.search

    run_search = mcts.search_function(config)

    def search(states, key):
        output = run_search(config, settings.env, evaluator, params, key, states)
        nodes = None
        if settings.extraction is not None:
            nodes = tree_nodes.extract_nodes(settings.extraction, output.tree, start_step, mcts.node_policy(config))
        return output, nodes

    shapes = jax.eval_shape(search, states, key)
    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    return jax.lax.cond(searching.any(), lambda: search(states, key), lambda: zeros)


def _finished_record(settings: SelfPlaySettings, final: env_lib.State, records: RoundRecord, nodes,
                     start_step: jax.Array) -> SelfPlayRecord:
    """The ``SelfPlayRecord`` of the rounds' ``records`` (``[T, N, ...]``) once the games ended in ``final``:
    each position's result ``z`` from its side to move, and the dense targets when asked."""
    final_margin_p0 = (final.scores[:, 0] - final.scores[:, 1]).astype(jnp.float32)  # [N]
    z = jnp.sign(jnp.where(records.mover == 0, final_margin_p0[None, :], -final_margin_p0[None, :]))
    return SelfPlayRecord(
        positions=records.positions,
        move_number=records.move_number,
        policy=records.policy,
        root_q=records.root_q,
        root_value=records.root_value,
        z=z.astype(jnp.float32),
        searched=records.searched,
        nodes=nodes,
        final_scores=final.scores,
        start_step=start_step,
        dense=final_targets(settings.geometry, final, records.mover) if settings.dense_targets else None,
    )


def advancement_ratios(record: SelfPlayRecord, start_step: jax.Array, mq_threshold: float, nv_threshold: float):
    """``(mqr, nvr, count)`` over the searched positions of the games that start at the curriculum's
    ``start_step`` (int32 ``[]``; games revisiting later start steps do not count): the paper's Table 2
    statistics.

    mqr: share with ``|Q| > mqth``; nvr: share with ``|v| >= nvth`` and ``v * Q > 0``.
    """
    searched = record.searched & (record.start_step == start_step)[None, :]
    count = searched.sum()
    q, v = record.root_q, record.root_value
    mq = (jnp.abs(q) > mq_threshold) & searched
    nv = (jnp.abs(v) >= nv_threshold) & (v * q > 0) & searched
    denominator = jnp.maximum(count, 1).astype(jnp.float32)
    return mq.sum() / denominator, nv.sum() / denominator, count
