"""Component analysis: the strings-and-coins graph of a position, its chains and loops.

The unclaimed boxes are coins; each undrawn line is a string, between two coins or from a coin to the
ground (the edge of the board; a claimed box never has an undrawn side). A position is a *simple endgame*
when every unclaimed box has exactly two undrawn sides: its components are then *chains* (paths with both
ends on the ground) and *loops* (cycles, length >= 4 and even on a grid).

Two tools, for two needs:

* **Bit boards** (``BitTables``, ``side_planes``, ``across``): a set of boxes is a few ``uint32`` words
  (bit ``b % 32`` of word ``b // 32`` for box ``b``), "the boxes across side ``d``" is a shift of those
  words, and the four sides of every box are four such sets. A position's whole analysis is then a few
  dozen integer operations on a handful of words: under ``vmap`` every operation acts on ``[N, W]``
  arrays, which fuse into a few kernels on any backend. The forced-capture rule (``dabjax.game.forced``)
  and ``chains_and_loops`` (the multiset of chain and loop lengths of a simple endgame, all the exact value
  needs) use them.
* **Labels** (``label_components``): every unclaimed box's component, labelled by its smallest box index
  (label propagation with pointer jumping over the ``[B, 4]`` neighbour table). ``analyse`` reports them
  with the lengths; the opener's move needs them to find the lines of the component it opens.

``chains_and_loops`` walks the chains of a simple endgame from both ends at once: a walker starts on every
box with an undrawn side to the ground, all walkers step along their chains together, and the two walkers
of a chain of ``n`` boxes meet after ``ceil(n / 2)`` steps (on one box when ``n`` is odd, across one line
when it is even), which counts that chain. The boxes no walker visits form loops, filled one after the
other from their smallest box (a loop of ``n`` boxes takes ``n / 2`` steps). Lengths are kept as counts
per length (``[B + 1]``) and read out ascending in fixed-size arrays. Functions act on one position;
``jax.vmap`` them for batches.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dabjax.game import env as env_lib
from dabjax.game import loops
from dabjax.game.geometry import BoardGeometry

NO_COMPONENT = -1
WORD_BITS = 32
OPPOSITE_SIDE = (1, 0, 3, 2)  # sides in the order of geometry.box_lines: top, bottom, left, right
STEPS_PER_TURN = 2  # steps of the bit-board loops (walking chains, playing forced captures) per loop turn


# --- bit boards -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class BitTables:
    """Static tables of one board's bit boards (``W`` words, ``B`` boxes, ``L`` lines), built once per size.

    Attributes:
      words: ``W = ceil(B / 32)``.
      box_bits: uint32 ``[B, W]``, box ``b``'s bit in each word (0 in the words that do not hold it).
      valid: uint32 ``[W]``, every box of the board.
      not_first_column / not_last_column: uint32 ``[W]``, the boxes outside the first / last column.
      edge: uint32 ``[4, W]``, the boxes whose side ``d`` is on the edge of the board.
      line_slots: int32 ``[L, 2]``: where line ``l``'s flag sits in flattened side planes ``[4 * W + 1]``
        (``4 * W`` is a zero word appended for a line with one box): the word of each box it borders.
      line_shifts: uint32 ``[L, 2]``: the bit of that box within its word.
    """

    words: int
    box_bits: np.ndarray
    valid: np.ndarray
    not_first_column: np.ndarray
    not_last_column: np.ndarray
    edge: np.ndarray
    line_slots: np.ndarray
    line_shifts: np.ndarray


@functools.lru_cache(maxsize=None)
def bit_tables(geometry: BoardGeometry) -> BitTables:
    """The bit-board tables of a board (cached per size)."""
    num_boxes, cols = geometry.num_boxes, geometry.cols
    words = (num_boxes + WORD_BITS - 1) // WORD_BITS
    boxes = np.arange(num_boxes)
    box_bits = np.zeros((num_boxes, words), np.uint32)
    box_bits[boxes, boxes // WORD_BITS] = np.uint32(1) << (boxes % WORD_BITS).astype(np.uint32)

    def board(selected) -> np.ndarray:
        return np.bitwise_or.reduce(box_bits[np.asarray(selected, bool)], axis=0, initial=np.uint32(0))

    row, col = boxes // cols, boxes % cols
    edge = np.stack([board(row == 0), board(row == geometry.rows - 1), board(col == 0), board(col == cols - 1)])
    line_slots = np.full((geometry.num_lines, 2), 4 * words, np.int32)
    line_shifts = np.zeros((geometry.num_lines, 2), np.uint32)
    for box in range(num_boxes):
        for side, line in enumerate(geometry.box_lines[box]):
            slot = 0 if line_slots[line, 0] == 4 * words else 1
            line_slots[line, slot] = side * words + box // WORD_BITS
            line_shifts[line, slot] = box % WORD_BITS
    tables = BitTables(
        words=words,
        box_bits=box_bits,
        valid=board(boxes >= 0),
        not_first_column=board(col != 0),
        not_last_column=board(col != cols - 1),
        edge=edge,
        line_slots=line_slots,
        line_shifts=line_shifts,
    )
    for value in dataclasses.asdict(tables).values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)  # Shared by every caller: never mutate.
    return tables


def pack(geometry: BoardGeometry, flags: jax.Array) -> jax.Array:
    """uint32 ``[..., W]``: the bit board of per-box flags bool ``[..., B]``."""
    box_bits = jnp.asarray(bit_tables(geometry).box_bits)
    return jnp.where(flags[..., None], box_bits, jnp.uint32(0)).sum(-2, dtype=jnp.uint32)  # distinct bits: OR


def unpack(geometry: BoardGeometry, board: jax.Array) -> jax.Array:
    """bool ``[B]``: the per-box flags of a bit board uint32 ``[W]``."""
    box_bits = jnp.asarray(bit_tables(geometry).box_bits)
    return ((board & box_bits) != 0).any(-1)


@struct.dataclass
class BoxSets:
    """One position as bit boards (uint32 ``[W]`` each).

    Attributes:
      undrawn: the boxes whose top / bottom / left / right side is undrawn (a tuple of four boards).
      unclaimed: the unclaimed boxes.
    """

    undrawn: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    unclaimed: jax.Array

    @property
    def open_sides(self) -> tuple[jax.Array, ...]:
        """The undrawn sides of unclaimed boxes (the same in any position reached by play)."""
        return tuple(plane & self.unclaimed for plane in self.undrawn)


def box_sets(geometry: BoardGeometry, state: env_lib.State) -> BoxSets:
    """The bit boards of a position."""
    flags = jnp.concatenate([~state.lines[jnp.asarray(geometry.box_lines.T)], (state.box_owner < 0)[None]])
    packed = pack(geometry, flags)  # [5, W]
    return BoxSets(undrawn=tuple(packed[side] for side in range(4)), unclaimed=packed[4])


def lines_of_sides(geometry: BoardGeometry, planes) -> jax.Array:
    """bool ``[L]``: the lines that are side ``d`` of a box in ``planes[d]`` (four uint32 ``[W]`` boards)."""
    tables = bit_tables(geometry)
    flat = computed_once(jnp.concatenate(list(planes) + [jnp.zeros(1, jnp.uint32)]))
    bits = (flat[jnp.asarray(tables.line_slots)] >> jnp.asarray(tables.line_shifts)) & jnp.uint32(1)
    return (bits != 0).any(-1)


def computed_once(words: jax.Array) -> jax.Array:
    """``words`` (uint32 ``[K]``) unchanged, but computed into memory once.

    XLA fuses cheap integer work into every consumer, so a consumer that reads each word many times (the
    per-line unpacking above reads the planes twice per line) would redo the whole analysis behind them each
    time, many times over on a CPU. A scatter (here of the words onto themselves) is not fused into its users.
    """
    return jnp.zeros_like(words).at[jnp.arange(words.shape[-1])].set(words)


def _shift_to_higher(board: jax.Array, count: int) -> jax.Array:
    """Bit ``b`` to bit ``b + count`` (``0 < count < 32``), across words."""
    moved = board << count
    if board.shape[-1] > 1:
        carried = board[..., :-1] >> (WORD_BITS - count)
        moved = moved | jnp.concatenate([jnp.zeros_like(board[..., :1]), carried], axis=-1)
    return moved


def _shift_to_lower(board: jax.Array, count: int) -> jax.Array:
    """Bit ``b`` to bit ``b - count`` (``0 < count < 32``), across words."""
    moved = board >> count
    if board.shape[-1] > 1:
        carried = board[..., 1:] << (WORD_BITS - count)
        moved = moved | jnp.concatenate([carried, jnp.zeros_like(board[..., :1])], axis=-1)
    return moved


def across(geometry: BoardGeometry, board: jax.Array, side: int) -> jax.Array:
    """uint32 ``[..., W]``: the boxes whose neighbour across side ``side`` is in ``board``."""
    tables = bit_tables(geometry)
    if side == 0:  # the box above is box - C
        return _shift_to_higher(board, geometry.cols) & jnp.asarray(tables.valid)
    if side == 1:  # the box below is box + C
        return _shift_to_lower(board, geometry.cols)
    if side == 2:  # the box on the left is box - 1
        return _shift_to_higher(board, 1) & jnp.asarray(tables.not_first_column)
    return _shift_to_lower(board, 1) & jnp.asarray(tables.not_last_column)


def across_each_side(geometry: BoardGeometry, board: jax.Array) -> tuple[jax.Array, ...]:
    """``across(board, d)`` for the four sides."""
    return tuple(across(geometry, board, side) for side in range(4))


def facing(geometry: BoardGeometry, planes) -> tuple[jax.Array, ...]:
    """Plane ``d``: the boxes whose neighbour across ``d`` is in ``planes`` for the same line (that is, in
    ``planes[OPPOSITE_SIDE[d]]``)."""
    return tuple(across(geometry, planes[OPPOSITE_SIDE[side]], side) for side in range(4))


def any_bit(board: jax.Array) -> jax.Array:
    """bool ``[...]``: the board is not empty."""
    return (board != 0).any(-1)


def count_bits(board: jax.Array) -> jax.Array:
    """int32 ``[...]``: how many boxes the board holds."""
    return jax.lax.population_count(board).astype(jnp.int32).sum(-1)


def lowest_bit(board: jax.Array) -> jax.Array:
    """uint32 ``[..., W]``: the box of smallest index in the board alone (empty for an empty board)."""
    lowest = board & (~board + jnp.uint32(1))
    if board.shape[-1] == 1:
        return lowest
    nonzero = board != 0
    earlier = jnp.cumsum(nonzero, axis=-1) - nonzero > 0  # a lower word already holds a box
    return jnp.where(earlier, jnp.uint32(0), lowest)


def union(boards) -> jax.Array:
    """uint32 ``[W]``: the union of a sequence of boards."""
    return functools.reduce(jnp.bitwise_or, list(boards))


def union_of_others(planes, side: int) -> jax.Array:
    """uint32 ``[W]``: the union of the four ``planes`` but ``planes[side]``."""
    return union([planes[other] for other in range(4) if other != side])


def side_classes(planes) -> tuple[jax.Array, jax.Array]:
    """``(one, two)`` uint32 ``[W]``: the boxes with exactly one and exactly two sides in the four
    ``planes`` (bit-sliced addition)."""
    top, bottom, left, right = planes
    low_a, carry_a = top ^ bottom, top & bottom
    low_b, carry_b = left ^ right, left & right
    odd, carry = low_a ^ low_b, low_a & low_b  # count = odd + 2 * (carry_a + carry_b + carry)
    one = odd & ~(carry_a | carry_b | carry)
    two = ~odd & (carry | (carry_a ^ carry_b))
    return one, two


# --- chains and loops of a simple endgame -----------------------------------------------------------------


@struct.dataclass
class ChainsAndLoops:
    """The components of one position if it is a simple endgame (``B`` boxes).

    Attributes:
      is_simple_endgame: bool ``[]``, at least one unclaimed box and every one has two undrawn sides.
      chain_counts: int32 ``[B + 1]``, how many chains of each length (index = length); zero elsewhere.
      loop_counts: int32 ``[B + 1]``, the same for loops.

    The properties read the lengths out ascending, zero-padded: ``chain_lengths`` ``[B]``, ``loop_lengths``
    ``[B // 4]``, ``long_chain_lengths`` ``[B // 3]`` (chains of 3 boxes or more).
    """

    is_simple_endgame: jax.Array
    chain_counts: jax.Array
    loop_counts: jax.Array

    @property
    def num_chains(self) -> jax.Array:
        return self.chain_counts.sum(-1)

    @property
    def num_loops(self) -> jax.Array:
        return self.loop_counts.sum(-1)

    @property
    def num_long_chains(self) -> jax.Array:
        return self.chain_counts[..., 3:].sum(-1)

    @property
    def num_short_chains(self) -> jax.Array:
        """int32 ``[..., 2]``: how many chains of 1 and of 2 boxes."""
        counts = self.chain_counts
        if counts.shape[-1] < 3:  # a one-box board
            counts = jnp.concatenate([counts, jnp.zeros_like(counts[..., :1])], axis=-1)
        return counts[..., 1:3]

    @property
    def chain_lengths(self) -> jax.Array:
        return ascending_lengths(self.chain_counts, self.chain_counts.shape[-1] - 1)

    @property
    def loop_lengths(self) -> jax.Array:
        return ascending_lengths(self.loop_counts, max(1, (self.loop_counts.shape[-1] - 1) // 4))

    @property
    def long_chain_lengths(self) -> jax.Array:
        long_counts = jnp.where(jnp.arange(self.chain_counts.shape[-1]) < 3, 0, self.chain_counts)
        return ascending_lengths(long_counts, max(1, (self.chain_counts.shape[-1] - 1) // 3))


def ascending_lengths(counts: jax.Array, slots: int) -> jax.Array:
    """int32 ``[..., slots]``: the lengths counted by ``counts`` int32 ``[..., B + 1]`` (index = length),
    ascending, zero-padded. The ``i``-th is the number of lengths whose running count is at most ``i``."""
    running = jnp.cumsum(counts, axis=-1)  # [..., B + 1]
    slot = jnp.arange(slots, dtype=jnp.int32)
    lengths = (running[..., None, :] <= slot[:, None]).sum(-1, dtype=jnp.int32)
    return jnp.where(slot < running[..., -1:], lengths, 0)


def _is_simple(sets: BoxSets) -> jax.Array:
    _, two = side_classes(sets.open_sides)
    return any_bit(sets.unclaimed) & ~any_bit(sets.unclaimed & ~two)


def is_simple_endgame(geometry: BoardGeometry, state: env_lib.State) -> jax.Array:
    """bool ``[]``: every unclaimed box has exactly two undrawn sides (and one is left): a few operations on
    bit boards, the cheap test before any walk (``ChainsAndLoops.is_simple_endgame``)."""
    return _is_simple(box_sets(geometry, state))


def chains_and_loops(geometry: BoardGeometry, state: env_lib.State) -> ChainsAndLoops:
    """The chain and loop lengths of a simple endgame (bit boards; see the module docstring): a walk that stops as
    soon as the batch is walked, at most ``2 B`` steps."""
    num_boxes = geometry.num_boxes
    sets = box_sets(geometry, state)
    open_sides = sets.open_sides
    is_simple = _is_simple(sets)
    boxes = jnp.where(is_simple, sets.unclaimed, jnp.uint32(0))  # elsewhere nothing to walk: done at once
    open_sides = tuple(plane & boxes for plane in open_sides)
    edge = jnp.asarray(bit_tables(geometry).edge)
    lengths = jnp.arange(num_boxes + 1, dtype=jnp.int32)

    def step(carry):
        walkers, unvisited, fill, steps, chain_counts, loop_counts = carry
        # Chains: walkers ``steps`` boxes from their end (plane d: entered by side d). Two on one box, or
        # two about to swap across a line, are the two ends of one chain meeting.
        w = walkers
        on_one_box = (w[0] & (w[1] | w[2] | w[3])) | (w[1] & (w[2] | w[3])) | (w[2] & w[3])
        alone = tuple(plane & ~on_one_box for plane in walkers)
        exits = [open_sides[e] & union_of_others(alone, e) for e in range(4)]  # a box is left by its other side
        vertical = exits[1] & across(geometry, exits[0], 1)  # exits down, and the box below exits up
        horizontal = exits[3] & across(geometry, exits[2], 3)
        chain_counts = chain_counts + jnp.where(lengths == 2 * steps - 1, count_bits(on_one_box), 0)
        chain_counts = chain_counts + jnp.where(
            lengths == 2 * steps, count_bits(vertical) + count_bits(horizontal), 0
        )
        exits = (exits[0] & ~across(geometry, vertical, 0), exits[1] & ~vertical,
                 exits[2] & ~across(geometry, horizontal, 2), exits[3] & ~horizontal)
        walked = union(walkers)
        unvisited = unvisited & ~walked
        walkers = tuple(plane & boxes for plane in facing(geometry, exits))  # entered by the side facing back
        # Loops, once every chain is walked: fill the loop of the smallest unvisited box from it.
        seed = jnp.where(any_bit(fill), fill, lowest_bit(unvisited))
        seed = jnp.where(any_bit(walked), jnp.uint32(0), seed)
        grown = seed | union(plane & near for plane, near in zip(open_sides, across_each_side(geometry, seed)))
        leaks = union(plane & grown & ~near for plane, near in zip(open_sides, across_each_side(geometry, grown)))
        size = count_bits(grown)
        closed = ~any_bit(leaks) & (size > 0)
        loop_counts = loop_counts + jnp.where(closed & (lengths == size), 1, 0)
        unvisited = jnp.where(closed, unvisited & ~grown, unvisited)
        fill = jnp.where(closed, jnp.uint32(0), grown)
        return walkers, unvisited, fill, steps + 1, chain_counts, loop_counts

    def unfinished(carry):
        walkers, unvisited, _, steps, _, _ = carry
        return (any_bit(union(walkers)) | any_bit(unvisited)) & (steps <= 2 * num_boxes)

    zeros = jnp.zeros(num_boxes + 1, jnp.int32)
    walkers = tuple(plane & edge[side] for side, plane in enumerate(open_sides))  # entered from the ground
    start = (walkers, boxes, jnp.zeros_like(boxes), jnp.int32(1), zeros, zeros)
    _, _, _, _, chain_counts, loop_counts = loops.repeat_while(unfinished, step, start, STEPS_PER_TURN)
    return ChainsAndLoops(is_simple_endgame=is_simple, chain_counts=chain_counts, loop_counts=loop_counts)


# --- labels -------------------------------------------------------------------------------------------------


@struct.dataclass
class Components(ChainsAndLoops):
    """The component analysis of one position (``B`` boxes): its ``ChainsAndLoops`` (lengths meaningful in a
    simple endgame) and the components' labels.

    Attributes (besides those of ``ChainsAndLoops``):
      undrawn_sides: int32 ``[B]``, undrawn sides of each box (0 for claimed boxes).
      capturable: bool ``[B]``, unclaimed boxes with exactly one undrawn side.
      label: int32 ``[B]``, the component of each unclaimed box (its smallest box index), ``-1`` if claimed.
      size: int32 ``[B]``, boxes in component ``c`` (indexed by label; 0 where no component has that label).
      touches_ground: bool ``[B]``, component ``c`` has an undrawn line to the edge of the board.
      is_chain / is_loop: bool ``[B]``, per component label, meaningful in a simple endgame.
    """

    undrawn_sides: jax.Array
    capturable: jax.Array
    label: jax.Array
    size: jax.Array
    touches_ground: jax.Array
    is_chain: jax.Array
    is_loop: jax.Array


def undrawn_sides(geometry: BoardGeometry, lines: jax.Array) -> jax.Array:
    """bool ``[B, 4]``: which sides of each box are undrawn (order of ``geometry.box_lines``)."""
    return ~lines[jnp.asarray(geometry.box_lines)]


def box_valences(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array) -> jax.Array:
    """int32 ``[B]``: the undrawn sides of each unclaimed box, 0 for claimed ones (``lines`` bool ``[L]``,
    ``claimed`` bool ``[B]``)."""
    return jnp.where(claimed, 0, undrawn_sides(geometry, lines).sum(-1, dtype=jnp.int32))


def side_counts(geometry: BoardGeometry, state: env_lib.State) -> tuple[jax.Array, jax.Array]:
    """``(undrawn_sides int32 [B], capturable bool [B])``: the cheap part of ``analyse`` (no labels)."""
    unclaimed = state.box_owner < 0
    sides = box_valences(geometry, state.lines, ~unclaimed)
    return sides, unclaimed & (sides == 1)


def label_components(
    geometry: BoardGeometry, lines: jax.Array, unclaimed: jax.Array, active: jax.Array | bool = True
) -> jax.Array:
    """int32 ``[B]``: each unclaimed box's component label (smallest box index in it), ``-1`` if claimed.

    Two unclaimed boxes are connected when the line between them is undrawn. ``unclaimed`` (bool ``[B]``)
    may be any subset of the boxes: links to boxes outside it are never followed. Where ``active`` (bool ``[]``)
    is False no link is followed: every box is its own component (a cheap answer where none is wanted).
    """
    num_boxes = geometry.num_boxes
    neighbours = jnp.asarray(geometry.box_neighbours)  # [B, 4]
    open_link = undrawn_sides(geometry, lines) & (neighbours >= 0) & active
    safe_neighbours = jnp.maximum(neighbours, 0)
    big = jnp.int32(num_boxes)
    label = jnp.where(unclaimed, jnp.arange(num_boxes, dtype=jnp.int32), big)

    def propagate(carry):
        label, _, count = carry
        across_link = jnp.where(open_link, label[safe_neighbours], big).min(-1)
        updated = jnp.minimum(label, across_link)
        # Pointer jumping: follow the label's own label, which shortens long chains to a few rounds.
        updated = jnp.minimum(updated, updated[jnp.minimum(updated, num_boxes - 1)])
        # Boxes outside ``unclaimed`` keep no label: else one bordering a member would pass labels on.
        updated = jnp.where(unclaimed, updated, big)
        return updated, (updated != label).any(), count + 1

    # Until nothing changes; B rounds always suffice (the longest path has B boxes).
    label, _, _ = loops.repeat_while(lambda carry: carry[1] & (carry[2] < num_boxes), propagate,
                                     (label, jnp.bool_(True), jnp.int32(0)), 1)
    return jnp.where(unclaimed, label, NO_COMPONENT)


def analyse(geometry: BoardGeometry, state: env_lib.State, only_simple_endgames: bool = False) -> Components:
    """The component analysis of one position.

    With ``only_simple_endgames`` (static) the labels are only traced in simple endgames (elsewhere every
    box is its own component, and ``label``, ``size`` and what follows from them are meaningless): the
    opener's move needs no more, and large components elsewhere would cost propagation rounds.
    """
    num_boxes = geometry.num_boxes
    unclaimed = state.box_owner < 0
    undrawn = undrawn_sides(geometry, state.lines)  # [B, 4]
    sides, capturable = side_counts(geometry, state)
    lengths = chains_and_loops(geometry, state)
    active = lengths.is_simple_endgame if only_simple_endgames else True
    label = label_components(geometry, state.lines, unclaimed, active)
    member = label[None, :] == jnp.arange(num_boxes, dtype=jnp.int32)[:, None]  # [c, b]
    size = member.sum(-1, dtype=jnp.int32)
    ground_open = (undrawn & (jnp.asarray(geometry.box_neighbours) < 0)).any(-1) & unclaimed  # [B]
    touches_ground = (member & ground_open[None, :]).any(-1)
    is_component = size > 0
    return Components(
        is_simple_endgame=lengths.is_simple_endgame,
        chain_counts=lengths.chain_counts,
        loop_counts=lengths.loop_counts,
        undrawn_sides=sides,
        capturable=capturable,
        label=label,
        size=size,
        touches_ground=touches_ground,
        is_chain=is_component & touches_ground,
        is_loop=is_component & ~touches_ground,
    )
