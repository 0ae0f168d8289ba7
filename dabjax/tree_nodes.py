"""Tree-node extraction for node-filtered augmentation (the paper's section 4.3, Table A2).

From a batched mctx search tree, the interior nodes whose visit count and value are both high enough
become extra training samples: their observation, move number, visit count ``N``, value ``Q`` (the node's
search value, from its side to move) and an improved policy target (the visit distribution for PUCT;
``softmax(prior logits + completed Q)`` for Gumbel MuZero, the policy its interior selection improves to).

A node qualifies when ``N > fraction * root visits`` and ``|Q| > q_threshold`` (strict, as the paper's
Table A2), with both thresholds chosen by the node's move number relative to the start step ``st``. The root
(a sample already), unvisited nodes, terminal nodes and nodes solved exactly by endgame pruning (marked
terminal in the tree) are never extracted. The output has a fixed size ``K`` per searched game with a
validity mask, so the whole thing stays inside jit.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np

from dabjax import env as env_lib
from dabjax.geometry import BoardGeometry

# Table A2: (lower bound of move - st, visit fraction, |Q| threshold), bands in increasing order.
PAPER_BANDS: tuple[tuple[int, float, float], ...] = (
    (0, 0.15, 0.5),
    (3, 0.20, 0.6),
    (5, 0.21, 0.7),
    (10, 0.22, 0.8),
    (15, 0.23, 0.85),
)


@dataclasses.dataclass(frozen=True)
class ExtractionConfig:
    """``bands``: ``(offset from st, visit fraction, |Q| threshold)`` sorted by offset, the first at 0;
    ``max_nodes``: K, nodes kept per searched game (the most visited that qualify)."""

    bands: tuple[tuple[int, float, float], ...] = PAPER_BANDS
    max_nodes: int = 8

    def __post_init__(self):
        offsets = [b[0] for b in self.bands]
        if not self.bands or offsets[0] != 0 or offsets != sorted(set(offsets)):
            raise ValueError(f"augmentation bands must start at offset 0 and increase, got {self.bands!r}")
        for offset, fraction, threshold in self.bands:
            if not (0 <= fraction <= 1 and 0 <= threshold <= 1):
                raise ValueError(f"augmentation band {(offset, fraction, threshold)!r}: values must be in [0, 1]")
        if not isinstance(self.max_nodes, int) or self.max_nodes < 1:
            raise ValueError(f"augmentation.max_nodes must be a positive integer, got {self.max_nodes!r}")


@chex.dataclass(frozen=True)
class ExtractedNodes:
    """``N`` games, ``K`` slots each, ``L`` lines, grid ``H x W``.

    observation: float32 ``[N, K, H, W, 3]``; move_number: int32 ``[N, K]``; visits: int32 ``[N, K]``;
    value: float32 ``[N, K]`` (Q from the node's side to move); policy: float32 ``[N, K, L]``;
    valid: bool ``[N, K]``.
    """

    observation: jax.Array
    move_number: jax.Array
    visits: jax.Array
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


def improved_policy(tree: mctx.Tree, node_index: jax.Array, algorithm: str) -> jax.Array:
    """float32 ``[N, K, L]``: the policy target of nodes ``node_index`` int32 ``[N, K]`` (module docstring)."""
    if algorithm == "puct":
        counts = jnp.take_along_axis(tree.children_visits, node_index[..., None], axis=1).astype(jnp.float32)
        return counts / jnp.maximum(counts.sum(-1, keepdims=True), 1.0)

    def one_game(game_tree, indices):
        def one_node(index):
            completed_q = mctx.qtransform_completed_by_mix_value(game_tree, index)
            return jax.nn.softmax(game_tree.children_prior_logits[index] + completed_q, axis=-1)

        return jax.vmap(one_node)(indices)

    return jax.vmap(one_game)(tree, node_index)


def select_nodes(
    config: ExtractionConfig, tree: mctx.Tree, start_step: jax.Array, algorithm: str = "gumbel"
) -> dict:
    """The K most visited qualifying nodes of each game's tree: their States (leading ``[N, K]``), visits,
    value (Q), policy target and validity. Jit-able; ``extract_nodes`` adds observations."""
    qualifies = qualifying_nodes(config, tree, start_step)
    k = min(config.max_nodes, tree.node_visits.shape[1])
    _, index = jax.lax.top_k(jnp.where(qualifies, tree.node_visits, -1), k)  # [N, K]
    take = lambda x: jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)
    return dict(
        states=jax.tree_util.tree_map(take, tree.embeddings),
        visits=take(tree.node_visits).astype(jnp.int32),
        value=take(tree.node_values).astype(jnp.float32),
        policy=improved_policy(tree, index, algorithm).astype(jnp.float32),
        valid=take(qualifies),
    )


def extract_nodes(
    config: ExtractionConfig,
    geometry: BoardGeometry,
    tree: mctx.Tree,
    start_step: jax.Array,
    algorithm: str = "gumbel",
) -> ExtractedNodes:
    """The K most visited qualifying nodes of each game's tree, with a validity mask. Jit-able."""
    nodes = select_nodes(config, tree, start_step, algorithm)
    states = nodes.pop("states")
    flat_states = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), states)
    observation = jax.vmap(lambda s: env_lib.observe(geometry, s))(flat_states)
    return ExtractedNodes(
        observation=observation.reshape(states.num_moves.shape + observation.shape[1:]),
        move_number=states.num_moves,
        **nodes,
    )
