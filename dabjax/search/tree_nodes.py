"""Tree-node extraction for node-filtered augmentation (the paper's section 4.3, Table A2).

From a batched mctx search tree, the interior nodes whose visit count and value are both high enough
become extra training samples: their position (compact, ``Positions``), move number, value ``Q`` (the node's
search value, from its side to move) and the search algorithm's policy target of that node (``mcts.node_policy``:
the visit distribution for PUCT and UCT; ``softmax(prior logits + completed Q)`` for Gumbel MuZero, the policy its
interior selection improves to).

A node qualifies when ``N > fraction * root visits`` and ``|Q| > q_threshold`` (strict, as the paper's
Table A2), with both thresholds chosen by the node's move number relative to the start step ``st``. The root
(a sample already), unvisited nodes, terminal nodes and nodes solved exactly by endgame pruning (marked
terminal in the tree) are never extracted. The output, a ``NodeSamples`` record, has a fixed size ``K`` per
searched game with a validity mask, so the whole thing stays inside jit; self-play stacks it over its rounds
and the trainer writes it to the replay buffer (``dabjax.training``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np

from dabjax.game import env as env_lib

# Table A2: (lower bound of move - st, visit fraction, |Q| threshold), bands in increasing order.
PAPER_BANDS: tuple[tuple[int, float, float], ...] = (
    (0, 0.15, 0.5),
    (3, 0.20, 0.6),
    (5, 0.21, 0.7),
    (10, 0.22, 0.8),
    (15, 0.23, 0.85),
)


@chex.dataclass(frozen=True)
class Positions:
    """Compact positions (any leading shape ``...``): lines bool ``[..., L]``, claimed bool ``[..., B]`` (the box
    has an owner), the mover's margin so far int32 ``[...]`` (boxes). ``env.observation_from`` turns one into
    the network's input; a buffer of these is far smaller than one of observations."""

    lines: jax.Array
    claimed: jax.Array
    margin: jax.Array


def positions_of(states: env_lib.State) -> Positions:
    """The compact positions of ``states`` (same leading shape)."""
    return Positions(lines=states.lines, claimed=states.box_owner >= 0, margin=states.margin.astype(jnp.int32))


@dataclasses.dataclass(frozen=True)
class ExtractionConfig:
    """Which nodes become samples; also the base of the ``augmentation`` section of a training config
    (``dabjax.training.config``), so its defaults live here only. Frozen, so hashable (a jit static argument).

    ``bands``: ``(offset from st, visit fraction, |Q| threshold)`` sorted by offset, the first at 0 (default:
    the paper's Table A2); ``max_nodes``: K, nodes kept per searched game (the most visited that qualify).
    """

    bands: tuple[tuple[int, float, float], ...] = PAPER_BANDS
    max_nodes: int = 4

    def __post_init__(self):
        # A config file gives the bands as lists of numbers (older run directories' config.yaml wrote the
        # offsets as floats, 0.0): stored as a tuple of (int, float, float), hashable and exact.
        object.__setattr__(self, "bands", _normalised_bands(self.bands))
        offsets = [b[0] for b in self.bands]
        if not self.bands or offsets[0] != 0 or offsets != sorted(set(offsets)):
            raise ValueError(f"augmentation.bands must start at offset 0 and increase, got {self.bands!r}")
        for offset, fraction, threshold in self.bands:
            if not (0 <= fraction <= 1 and 0 <= threshold <= 1):
                band = (offset, fraction, threshold)
                raise ValueError(f"augmentation.bands: band {band!r}: fraction and threshold must be in [0, 1]")
        if not isinstance(self.max_nodes, int) or self.max_nodes < 1:
            raise ValueError(f"augmentation.max_nodes must be a positive integer, got {self.max_nodes!r}")


def _normalised_bands(bands) -> tuple[tuple[int, float, float], ...]:
    """``bands`` as a tuple of ``(int offset, float, float)``; ValueError naming the key if malformed."""
    normalised = []
    for band in bands:
        try:
            offset, fraction, threshold = (float(x) for x in band)
        except (TypeError, ValueError):
            raise ValueError(
                f"augmentation.bands: each band is [offset, visit fraction, |Q| threshold], got {band!r}"
            ) from None
        if offset != int(offset):
            raise ValueError(f"augmentation.bands: offsets are whole numbers of moves, got {offset!r}")
        normalised.append((int(offset), fraction, threshold))
    return tuple(normalised)


@chex.dataclass(frozen=True)
class NodeSamples:
    """Training samples from search-tree nodes: ``...`` leading axes (``[N, K]`` from ``extract_nodes``: ``N``
    games, ``K`` slots each; self-play stacks rounds in front, ``[T, N, K]``), ``L`` lines.

    positions: ``Positions [...]``; move_number: int32 ``[...]``; value: float32 ``[...]``, the node's Q from
    its side to move (the value target); policy: float32 ``[..., L]``, the improved policy (the policy
    target); valid: bool ``[...]``, the slot holds a qualifying node (the others are padding).
    """

    positions: Positions
    move_number: jax.Array
    value: jax.Array
    policy: jax.Array
    valid: jax.Array


def node_thresholds(config: ExtractionConfig, move_number: jax.Array, start_step: jax.Array):
    """``(visit fraction, |Q| threshold)`` for nodes at ``move_number`` given start step ``st``."""
    offsets = jnp.asarray(np.array([b[0] for b in config.bands], np.int32))
    fractions = jnp.asarray(np.array([b[1] for b in config.bands], np.float32))
    thresholds = jnp.asarray(np.array([b[2] for b in config.bands], np.float32))
    band = jnp.clip(jnp.searchsorted(offsets, move_number - start_step, side="right") - 1, 0, len(offsets) - 1)
    return fractions[band], thresholds[band]


def qualifying_nodes(config: ExtractionConfig, tree: mctx.Tree, start_step: jax.Array) -> jax.Array:
    """bool ``[N, nodes]``: the nodes that pass the filter. ``start_step`` int32 ``[]`` or ``[N]``."""
    states: env_lib.State = tree.embeddings
    visits = tree.node_visits
    root_visits = visits[:, :1].astype(jnp.float32)
    start = jnp.broadcast_to(jnp.asarray(start_step, jnp.int32), visits.shape[:1])[:, None]
    fraction, threshold = node_thresholds(config, states.num_moves, start)
    interior = jnp.arange(visits.shape[1]) > 0
    return (
        interior[None, :]
        & (visits > 0)
        & ~states.terminated
        & (visits.astype(jnp.float32) > fraction * root_visits)
        & (jnp.abs(tree.node_values) > threshold)
    )


def most_visited_qualifying(
    config: ExtractionConfig, tree: mctx.Tree, start_step: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(node index int32 [N, K], valid bool [N, K])``: the K most visited qualifying nodes of each game's
    tree (``K = min(max_nodes, tree nodes)``); slots past the qualifying ones are invalid."""
    qualifies = qualifying_nodes(config, tree, start_step)
    k = min(config.max_nodes, tree.node_visits.shape[1])
    _, index = jax.lax.top_k(jnp.where(qualifies, tree.node_visits, -1), k)
    return index, jnp.take_along_axis(qualifies, index, axis=1)


def extract_nodes(config: ExtractionConfig, tree: mctx.Tree, start_step: jax.Array,
                  node_policy: Callable[[mctx.Tree, jax.Array], jax.Array]) -> NodeSamples:
    """The K most visited qualifying nodes of each game's tree as samples ``[N, K]``, with a validity mask.
    ``start_step``: int32 ``[]`` or ``[N]``; ``node_policy``: ``(tree, node index int32 [N, K]) -> policy
    float32 [N, K, L]``, the search algorithm's policy target of a node (``mcts.node_policy``). Jit-able."""
    index, valid = most_visited_qualifying(config, tree, start_step)
    take = lambda x: jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)
    states = jax.tree_util.tree_map(take, tree.embeddings)
    return NodeSamples(
        positions=positions_of(states),
        move_number=states.num_moves.astype(jnp.int32),
        value=take(tree.node_values).astype(jnp.float32),
        policy=node_policy(tree, index).astype(jnp.float32),
        valid=valid,
    )
