"""Component analysis: the strings-and-coins graph of a position, its chains and loops.

The unclaimed boxes are coins; each undrawn line is a string, between two coins or from a coin to the
ground (the edge of the board; a claimed box never has an undrawn side). A position is a *simple endgame*
when every unclaimed box has exactly two undrawn sides: its components are then *chains* (paths with both
ends on the ground) and *loops* (cycles, length >= 4 and even on a grid).

Everything is fixed-size: components are labelled by the smallest box index in them (label propagation
over the ``[B, 4]`` neighbour table, ``B`` iterations at most), and lengths are reported in ``[B]`` arrays.
Functions act on one position; ``jax.vmap`` them for batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dabjax import env as env_lib
from dabjax.geometry import BoardGeometry

NO_COMPONENT = -1


@struct.dataclass
class Components:
    """The component analysis of one position (``B`` boxes, ``K = B // 4`` loop slots).

    Attributes:
      undrawn_sides: int32 ``[B]``, undrawn sides of each box (0 for claimed boxes).
      capturable: bool ``[B]``, unclaimed boxes with exactly one undrawn side.
      label: int32 ``[B]``, the component of each unclaimed box (its smallest box index), ``-1`` if claimed.
      size: int32 ``[B]``, boxes in component ``c`` (indexed by label; 0 where no component has that label).
      touches_ground: bool ``[B]``, component ``c`` has an undrawn line to the edge of the board.
      is_simple_endgame: bool ``[]``, at least one unclaimed box and every one has two undrawn sides.
      is_chain / is_loop: bool ``[B]``, per component label, meaningful in a simple endgame.
      chain_lengths: int32 ``[B]``, chain lengths ascending, zero-padded at the end (simple endgame only).
      num_chains: int32 ``[]``.
      loop_lengths: int32 ``[K]``, loop lengths ascending, zero-padded.
      num_loops: int32 ``[]``.
    """

    undrawn_sides: jax.Array
    capturable: jax.Array
    label: jax.Array
    size: jax.Array
    touches_ground: jax.Array
    is_simple_endgame: jax.Array
    is_chain: jax.Array
    is_loop: jax.Array
    chain_lengths: jax.Array
    num_chains: jax.Array
    loop_lengths: jax.Array
    num_loops: jax.Array


def max_loops(geometry: BoardGeometry) -> int:
    """Most loops a board can hold: each has at least 4 boxes."""
    return max(1, geometry.num_boxes // 4)


def undrawn_sides(geometry: BoardGeometry, lines: jax.Array) -> jax.Array:
    """bool ``[B, 4]``: which sides of each box are undrawn (order of ``geometry.box_lines``)."""
    return ~lines[jnp.asarray(geometry.box_lines)]


def side_counts(geometry: BoardGeometry, state: env_lib.State) -> tuple[jax.Array, jax.Array]:
    """``(undrawn_sides int32 [B], capturable bool [B])``: the cheap part of ``analyse`` (no labels)."""
    unclaimed = state.box_owner < 0
    sides = jnp.where(unclaimed, undrawn_sides(geometry, state.lines).sum(-1, dtype=jnp.int32), 0)
    return sides, unclaimed & (sides == 1)


def label_components(geometry: BoardGeometry, lines: jax.Array, unclaimed: jax.Array) -> jax.Array:
    """int32 ``[B]``: each unclaimed box's component label (smallest box index in it), ``-1`` if claimed.

    Two unclaimed boxes are connected when the line between them is undrawn.
    """
    num_boxes = geometry.num_boxes
    neighbours = jnp.asarray(geometry.box_neighbours)  # [B, 4]
    open_link = undrawn_sides(geometry, lines) & (neighbours >= 0)
    safe_neighbours = jnp.maximum(neighbours, 0)
    big = jnp.int32(num_boxes)
    label = jnp.where(unclaimed, jnp.arange(num_boxes, dtype=jnp.int32), big)

    def propagate(carry):
        label, _, count = carry
        across = jnp.where(open_link, label[safe_neighbours], big).min(-1)
        updated = jnp.minimum(label, across)
        # Pointer jumping: follow the label's own label, which shortens long chains to a few rounds.
        updated = jnp.minimum(updated, updated[jnp.minimum(updated, num_boxes - 1)])
        return updated, (updated != label).any(), count + 1

    # Until nothing changes; B rounds always suffice (the longest path has B boxes).
    label, _, _ = jax.lax.while_loop(
        lambda carry: carry[1] & (carry[2] < num_boxes), propagate, (label, jnp.bool_(True), jnp.int32(0))
    )
    return jnp.where(unclaimed, label, NO_COMPONENT)


def _sorted_lengths(values: jax.Array, keep: jax.Array, slots: int) -> tuple[jax.Array, jax.Array]:
    """Ascending ``values[keep]`` in ``slots`` entries, zero-padded; and how many there are."""
    sentinel = jnp.iinfo(jnp.int32).max
    ordered = jnp.sort(jnp.where(keep, values, sentinel))[:slots]
    return jnp.where(ordered == sentinel, 0, ordered).astype(jnp.int32), keep.sum(dtype=jnp.int32)


def analyse(geometry: BoardGeometry, state: env_lib.State) -> Components:
    """The component analysis of one position."""
    num_boxes = geometry.num_boxes
    unclaimed = state.box_owner < 0
    undrawn = undrawn_sides(geometry, state.lines)  # [B, 4]
    sides, capturable = side_counts(geometry, state)
    label = label_components(geometry, state.lines, unclaimed)
    member = label[None, :] == jnp.arange(num_boxes, dtype=jnp.int32)[:, None]  # [c, b]
    size = member.sum(-1, dtype=jnp.int32)
    ground_open = (undrawn & (jnp.asarray(geometry.box_neighbours) < 0)).any(-1) & unclaimed  # [B]
    touches_ground = (member & ground_open[None, :]).any(-1)
    is_simple = unclaimed.any() & jnp.all(~unclaimed | (sides == 2))
    is_component = size > 0
    is_chain = is_component & touches_ground
    is_loop = is_component & ~touches_ground
    chain_lengths, num_chains = _sorted_lengths(size, is_chain, num_boxes)
    loop_lengths, num_loops = _sorted_lengths(size, is_loop, max_loops(geometry))
    return Components(
        undrawn_sides=sides,
        capturable=capturable,
        label=label,
        size=size,
        touches_ground=touches_ground,
        is_simple_endgame=is_simple,
        is_chain=is_chain,
        is_loop=is_loop,
        chain_lengths=chain_lengths,
        num_chains=num_chains,
        loop_lengths=loop_lengths,
        num_loops=num_loops,
    )
