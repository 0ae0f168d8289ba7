"""Chain-structure features of a position: what the long-chain rule reads, as network inputs.

Who gets control of the long chains decides most middle games of Dots-and-Boxes, and it is a parity
question over the structure of the strings-and-coins graph (Berlekamp, "The Dots and Boxes Game", 2000).
Plain networks learn parity-like functions of many inputs badly (Zhou and Riis, "Impartial games: a
challenge for reinforcement learning", 2022), so these features hand the network the pieces it would
otherwise have to assemble: each box's valence (its undrawn sides), the *segments* (boxes of valence 2
joined by undrawn lines: the chains and loops in the making) and their lengths, which lines are safe
(drawing them offers no box), the structure left once the safe lines are played, and global counts with
their parities.

Everything is computed from the lines and the claimed boxes alone, so a network can derive it from its
observation (``dabjax.search.network``); functions act on one position, ``jax.vmap`` them for batches.
Scales are fixed constants, not board sizes, so a feature means the same on every board (a graph network
is size independent).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dabjax.game import chains
from dabjax.game.geometry import BoardGeometry
from dabjax.game.loops import repeat_while

LONG_SEGMENT = 3  # the long-chain rule's "long": three boxes or more
LENGTH_SCALE = 1.0 / 8.0  # segment lengths and counts are fed as n / 8 (fixed: the same on every board)
COUNT_SCALE = 1.0 / 8.0

# Per box (unclaimed boxes only; claimed boxes are all zero).
BOX_FEATURES = ("valence1", "valence2", "valence3", "valence4", "segment_length", "long_segment",
                "short_segment", "segment_touches_ground", "loop", "settled_long_segment", "settled_loop")
# Per line (undrawn lines only; drawn lines are all zero).
LINE_FEATURES = ("safe", "offers_capture", "opens_long", "opens_short", "on_edge")
# Per position.
GLOBAL_FEATURES = ("safe_lines", "safe_lines_odd", "long_segments", "long_segments_odd", "loops",
                   "capturable", "undrawn_odd", "control_odd", "safe_moves", "safe_moves_odd", "settled_long",
                   "settled_long_odd", "settled_loops", "settled_control_odd")


@struct.dataclass
class ChainFeatures:
    """``box``: float32 ``[B, len(BOX_FEATURES)]``; ``line``: float32 ``[L, len(LINE_FEATURES)]``;
    ``position``: float32 ``[len(GLOBAL_FEATURES)]``."""

    box: jax.Array
    line: jax.Array
    position: jax.Array


@struct.dataclass
class Segments:
    """The valence-2 structure of one position: ``valence`` int32 ``[B]`` (0 for claimed boxes),
    ``in_segment`` / ``long`` / ``loop`` / ``touches_ground`` bool ``[B]`` (per box, of its segment),
    ``length`` int32 ``[B]`` (its segment's boxes, 0 outside segments), ``num_long`` / ``num_loops`` int32
    ``[]``."""

    valence: jax.Array
    in_segment: jax.Array
    length: jax.Array
    long: jax.Array
    loop: jax.Array
    touches_ground: jax.Array
    num_long: jax.Array
    num_loops: jax.Array


def box_valences(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> jax.Array:
    """int32 ``[B]``: the undrawn sides of each unclaimed box, 0 for claimed ones."""
    return jnp.where(claimed, 0, chains.undrawn_sides(geometry, lines).sum(-1, dtype=jnp.int32))


def segments(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> Segments:
    """The components of the unclaimed valence-2 boxes linked by undrawn lines (``chains.label_components``
    on that subset). A segment is a *loop* when each of its boxes has both undrawn sides inside it."""
    num_boxes = geometry.num_boxes
    undrawn = chains.undrawn_sides(geometry, lines)  # [B, 4]
    valence = box_valences(geometry, lines, claimed)
    in_segment = valence == 2
    label = chains.label_components(geometry, lines, in_segment)  # [B], -1 outside segments
    member = (label[None, :] == jnp.arange(num_boxes, dtype=jnp.int32)[:, None]) & in_segment[None, :]  # [s, b]
    size = member.sum(-1, dtype=jnp.int32)  # [s]: boxes of segment s (0 if s labels none)
    neighbours = jnp.asarray(geometry.box_neighbours)  # [B, 4]
    to_ground = undrawn & (neighbours < 0)
    inside = undrawn & (neighbours >= 0) & (label[jnp.maximum(neighbours, 0)] == label[:, None]) & in_segment[:, None]
    closed_box = inside.sum(-1) == 2  # both undrawn sides stay within its segment
    segment_touches_ground = (member & to_ground.any(-1)[None, :]).any(-1)  # [s]
    segment_loop = (size > 0) & ~(member & ~closed_box[None, :]).any(-1)  # [s]
    box_label = jnp.maximum(label, 0)
    length = jnp.where(in_segment, size[box_label], 0)
    return Segments(
        valence=valence, in_segment=in_segment, length=length, long=length >= LONG_SEGMENT,
        loop=in_segment & segment_loop[box_label], touches_ground=in_segment & segment_touches_ground[box_label],
        num_long=((size >= LONG_SEGMENT)).sum(dtype=jnp.int32),
        num_loops=((size > 0) & segment_loop).sum(dtype=jnp.int32),
    )


def safe_lines(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> jax.Array:
    """bool ``[L]``: undrawn lines whose boxes all have valence 3 or more (drawing one offers no box)."""
    valence = box_valences(geometry, lines, claimed)
    line_boxes = jnp.asarray(geometry.line_boxes)  # [L, 2], -1 on the edge (the ground never gives a box)
    end_valence = jnp.where(line_boxes >= 0, valence[jnp.maximum(line_boxes, 0)], 4)
    return ~lines & (end_valence >= 3).all(-1)


def settle(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Plays safe lines (the lowest-numbered first) until none is left: ``(lines bool [L], moves int32 [])``.

    A cheap look ahead at the structure the fight for control will leave (its chains and loops) and at how
    many safe moves are left (its parity decides who must open the first chain). One greedy order, so an
    estimate: a player can often change the count by one, which is what the fight is about.
    """

    def unsettled(carry):
        return safe_lines(geometry, carry[0], claimed).any()

    def play(carry):
        current, moves = carry
        first = jnp.argmax(safe_lines(geometry, current, claimed))
        return current.at[first].set(True), moves + 1

    # Each move draws a line, so the loop ends within L moves.
    return repeat_while(unsettled, play, (lines, jnp.int32(0)), 1)


def chain_features(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> ChainFeatures:
    """The features of one position: ``lines`` bool ``[L]`` (drawn), ``claimed`` bool ``[B]``.

    Per box: its valence, its segment's length, long or short, whether it touches the ground or is a loop,
    and whether it is in a long segment / a loop once the safe lines are played (``settle``). Per line:
    *safe*, *offers a capture* (borders a box of valence 1), *opens* a long / short segment (borders a box
    of one), on the edge. Per position: counts and parities of safe lines, long segments, loops and
    capturable boxes now, of safe moves and long segments and loops after ``settle``, and ``control_odd``
    / ``settled_control_odd``: the parity of undrawn lines plus long segments (now / settled); with the
    mover's parity plane they tell which side the long-chain rule favours, without asking the network to
    compute a parity.
    """
    now = segments(geometry, lines, claimed)
    settled_lines, safe_moves = settle(geometry, lines, claimed)
    settled = segments(geometry, settled_lines, claimed)
    box = jnp.stack([
        now.valence == 1, now.valence == 2, now.valence == 3, now.valence == 4,
        now.length * LENGTH_SCALE, now.long, now.in_segment & ~now.long, now.touches_ground, now.loop,
        settled.long, settled.loop,
    ], axis=-1).astype(jnp.float32)

    line_boxes = jnp.asarray(geometry.line_boxes)  # [L, 2], -1 on the edge
    valid = line_boxes >= 0
    ends = jnp.maximum(line_boxes, 0)
    open_line = ~lines
    safe = safe_lines(geometry, lines, claimed)
    offers = open_line & (valid & (now.valence[ends] == 1)).any(-1)
    opens_long = open_line & (valid & now.long[ends]).any(-1)
    opens_short = open_line & (valid & now.in_segment[ends] & ~now.long[ends]).any(-1)
    on_edge = open_line & ~valid.all(-1)
    line = jnp.stack([safe, offers, opens_long, opens_short, on_edge], axis=-1).astype(jnp.float32)

    num_safe = safe.sum(dtype=jnp.int32)
    num_undrawn = open_line.sum(dtype=jnp.int32)
    position = jnp.stack([
        num_safe * COUNT_SCALE, num_safe % 2, now.num_long * COUNT_SCALE, now.num_long % 2,
        now.num_loops * COUNT_SCALE, (now.valence == 1).sum(dtype=jnp.int32) * COUNT_SCALE, num_undrawn % 2,
        (num_undrawn + now.num_long) % 2,
        safe_moves * COUNT_SCALE, safe_moves % 2, settled.num_long * COUNT_SCALE, settled.num_long % 2,
        settled.num_loops * COUNT_SCALE, (num_undrawn - safe_moves + settled.num_long) % 2,
    ]).astype(jnp.float32)
    return ChainFeatures(box=box, line=line, position=position)
