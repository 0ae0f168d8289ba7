"""The replay buffer: on device, the last ``D`` iterations, one fixed-size block per iteration.

Iteration ``i`` writes block ``i mod D``, replacing the oldest iteration's data whole, so the buffer always
holds exactly the last ``D`` iterations. A block has ``M`` slots (``capacity_per_iteration``). When an
iteration produces more than ``M`` samples, the root samples (searched positions) are kept first, then the
tree-node samples in the order given (most visited first); the rest are dropped and counted in the
``dropped`` figure that ``insert`` returns (the trainer logs it), never silently.

Each sample stores its position compactly (``tree_nodes.Positions``), its policy and value targets, move
number and whether it came from a tree node (``samples_of_nodes`` takes extraction's ``tree_nodes.NodeSamples``);
its loss weight is ``gamma ** age`` with ``age`` the number of iterations since it was written. A network with
dense heads (``network.dense_heads``) adds the ``DenseTargets`` of each sample (its game's final box owners and
margin); without them the field is None and takes no device memory.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from dabjax.game.geometry import BoardGeometry
from dabjax.search.tree_nodes import NodeSamples, Positions


@chex.dataclass(frozen=True)
class DenseTargets:
    """The dense heads' targets (``heads.DenseHeads``), from the sample's side to move (leading axes ``...``).

    ownership int8 ``[..., B]``: each box's final owner, +1 mine, -1 the opponent's, 0 unknown (no loss: a
    sample whose game was not finished, an exact label, or a box left unclaimed by early termination);
    margin float32 ``[...]``: the final margin over the number of boxes, in [-1, 1]; margin_known bool ``[...]``:
    whether ``margin`` is a target (no loss where not)."""

    ownership: jax.Array
    margin: jax.Array
    margin_known: jax.Array


def unknown_dense_targets(num_boxes: int, shape: tuple[int, ...]) -> DenseTargets:
    """Dense targets that give no loss (every box unknown, no margin), for samples without them."""
    return DenseTargets(ownership=jnp.zeros(shape + (num_boxes,), jnp.int8), margin=jnp.zeros(shape, jnp.float32),
                        margin_known=jnp.zeros(shape, bool))


@chex.dataclass(frozen=True)
class Samples:
    """A flat batch of samples (leading axis ``S``): positions, policy float32 ``[S, L]``, value float32
    ``[S]``, move_number int32 ``[S]``, from_node bool ``[S]``, valid bool ``[S]``; dense: ``DenseTargets [S]``
    for a network with dense heads, else None."""

    positions: Positions
    policy: jax.Array
    value: jax.Array
    move_number: jax.Array
    from_node: jax.Array
    valid: jax.Array
    dense: DenseTargets | None = None


def with_dense_targets(samples: Samples, dense: bool) -> Samples:
    """``samples`` fitted to a network with (``dense``) or without dense heads: their dense targets dropped
    without, unknown ones (``unknown_dense_targets``) added with where they have none."""
    if not dense:
        return samples.replace(dense=None)
    if samples.dense is not None:
        return samples
    return samples.replace(dense=unknown_dense_targets(samples.positions.claimed.shape[-1], samples.valid.shape))


@chex.dataclass(frozen=True)
class ReplayBuffer:
    """``D`` blocks of ``M`` slots. ``iteration`` int32 ``[D]``: the iteration that wrote each block (-1:
    empty). Sample fields have leading axes ``[D, M]``."""

    samples: Samples
    iteration: jax.Array


def samples_of_nodes(nodes: NodeSamples, include: jax.Array, dense: bool = False) -> Samples:
    """Flat tree-node samples ``[S]`` (``nodes`` flattened to one leading axis) as buffer samples, valid
    where the node is and ``include`` (bool ``[]``: stage 1 only) holds. With ``dense``, their dense targets are
    unknown: a node off the played path is a position whose own game was never finished, so it has no final
    owners or margin (the played game's would be wrong labels for it)."""
    samples = Samples(
        positions=nodes.positions,
        policy=nodes.policy,
        value=nodes.value,
        move_number=nodes.move_number,
        from_node=jnp.ones(nodes.valid.shape, bool),
        valid=nodes.valid & include,
    )
    return with_dense_targets(samples, dense)


def empty_samples(geometry: BoardGeometry, shape: tuple[int, ...], dense: bool = False) -> Samples:
    samples = Samples(
        positions=Positions(
            lines=jnp.zeros(shape + (geometry.num_lines,), bool),
            claimed=jnp.zeros(shape + (geometry.num_boxes,), bool),
            margin=jnp.zeros(shape, jnp.int32),
        ),
        policy=jnp.zeros(shape + (geometry.num_lines,), jnp.float32),
        value=jnp.zeros(shape, jnp.float32),
        move_number=jnp.zeros(shape, jnp.int32),
        from_node=jnp.zeros(shape, bool),
        valid=jnp.zeros(shape, bool),
    )
    return with_dense_targets(samples, dense)


def init_buffer(geometry: BoardGeometry, iterations: int, capacity_per_iteration: int,
                dense: bool = False) -> ReplayBuffer:
    """An empty buffer; ``dense``: with room for the dense heads' targets."""
    return ReplayBuffer(
        samples=empty_samples(geometry, (iterations, capacity_per_iteration), dense),
        iteration=-jnp.ones(iterations, jnp.int32),
    )


def insert(buffer: ReplayBuffer, samples: Samples, iteration: jax.Array) -> tuple[ReplayBuffer, jax.Array]:
    """Writes ``samples`` (flat, with a validity mask) as iteration ``iteration``'s block.

    Valid samples are packed to the front in their given order (callers put root samples first); the
    ones beyond the block's capacity are dropped. Returns ``(buffer, number dropped)``. Jit-able.
    """
    num_blocks, capacity = buffer.iteration.shape[0], buffer.samples.valid.shape[1]
    shortfall = capacity - samples.valid.shape[0]
    if shortfall > 0:  # fewer candidates than slots: pad with invalid (all-zero) samples
        samples = jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.zeros((shortfall,) + x.shape[1:], x.dtype)]), samples
        )
    order = jnp.argsort(~samples.valid, stable=True)[:capacity]  # valid first, given order kept
    block = jax.tree_util.tree_map(lambda x: x[order], samples)
    index = jnp.mod(iteration, num_blocks)
    new_samples = jax.tree_util.tree_map(lambda stored, new: stored.at[index].set(new), buffer.samples, block)
    dropped = jnp.maximum(samples.valid.sum() - capacity, 0)
    return ReplayBuffer(samples=new_samples, iteration=buffer.iteration.at[index].set(iteration)), dropped


def sample_weights(buffer: ReplayBuffer, iteration: jax.Array, gamma: float) -> jax.Array:
    """float32 ``[D, M]``: ``gamma ** age`` for valid samples, 0 elsewhere."""
    age = (iteration - buffer.iteration).astype(jnp.float32)  # [D]
    weight = jnp.where(buffer.iteration >= 0, gamma**age, 0.0)
    return jnp.where(buffer.samples.valid, weight[:, None], 0.0)
