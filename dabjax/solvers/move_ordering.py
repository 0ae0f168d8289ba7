"""Which moves the numba searches try, and in what order (boards as in ``dabjax.solvers.board_kernels``).

* ``chain_rule``: the captures that are provably optimal (no branching needed), or the take/decline pair.
* ``ordered_moves``: the alpha-beta agent's order (safe lines first, sacrifices by size).
* ``search_moves``: the exact solver's moves in search order, without the moves that another listed move
  provably matches or beats (``dominated_lines``: every chain and loop is opened by one line); ``centre_priority``
  orders its safe lines.

Every walk along a chain is ``board_kernels.walk_chain``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dabjax.game.geometry import BoardGeometry
from dabjax.solvers.board_kernels import other_box, undrawn_side, walk_chain, walk_component

_SCORE_PER_CAPTURE = -1000  # captures first
_SCORE_PER_SACRIFICE = 100  # then safe lines (0), then sacrifices, by the boxes they hand over


@njit(cache=True, inline='always')
def chain_rule(lines, valence, line_boxes, box_lines):
    """The chain rules at one position: ``(forced, take, decline, simple)``.

    ``forced >= 0``: a capture that is optimal, search only it: a capturable box whose capturing line does
    not lead into a box with two undrawn sides, or the first box of a capturable chain of 3 or more boxes
    whose far end is closed, or of 3 or 5+ boxes when the far end is capturable too (an opened loop: it is
    handed over all but 4). Else ``take >= 0``: the only capturable boxes are the last two of a chain
    with a closed far end, or the two ends of an opened chain of 4: search only ``take`` and ``decline``
    (the double-dealing line, or the middle line that hands over two pairs). With several such chains
    capturable at once, ``forced`` takes a box of one of them, keeping the keep-or-hand-over decision for
    the last chain, one that is cheapest to hand over (2 boxes of a chain with a closed end rather than 4).
    Else, when no box can be captured, ``simple`` tells whether every unclaimed box has two undrawn sides.
    """
    num_boxes = valence.shape[0]
    pair_take, pair_decline = -1, -1
    loop_take, loop_decline = -1, -1
    capturable, pairs, loop_ends = 0, 0, 0
    simple = True
    for box in range(num_boxes):
        v = valence[box]
        if v == 1:
            capturable += 1
            take = undrawn_side(box, -1, lines, box_lines)
            beyond = other_box(take, box, line_boxes)
            if beyond < 0 or valence[beyond] != 2:
                return take, -1, -1, False  # taking it opens nothing new
            # The capturable chain from ``box`` on: its far end is closed (the edge, a box with 3+ undrawn
            # sides) or open (a capturable box, which then counts in the chain). ``valence[:0]``: an empty
            # int64 path (the walk records no lines) that, unlike a new array, allocates nothing.
            passed, end = walk_chain(box, take, lines, valence, line_boxes, box_lines, valence[:0])
            far_open = end >= 0 and valence[end] == 1
            length = 1 + passed + (1 if far_open else 0)
            if length >= 3 and (not far_open or length != 4):
                return take, -1, -1, False  # the keep-or-hand-over decision comes later in the chain
            after_second = undrawn_side(beyond, take, lines, box_lines)  # the line after the second box
            if far_open:
                loop_ends += 1
                if loop_take < 0:
                    loop_take, loop_decline = take, after_second
            else:
                pairs += 1
                if pair_take < 0:
                    pair_take, pair_decline = take, after_second
        elif v >= 3:
            simple = False
    if capturable == 1 and pair_take >= 0:
        return -1, pair_take, pair_decline, False
    if capturable == 2 and loop_take >= 0:  # both capturable boxes are the ends of that chain of 4
        return -1, loop_take, loop_decline, False
    if pairs >= 1 and loop_ends >= 2:
        return loop_take, -1, -1, False  # take an opened chain of 4; decide on a chain of 2
    if pairs >= 2:
        return pair_take, -1, -1, False
    if loop_ends >= 4:
        return loop_take, -1, -1, False
    return -1, -1, -1, simple and capturable == 0


@njit(cache=True, inline='always')
def move_score(line, lines, valence, line_boxes, box_lines, no_path):
    """(score, sacrifice) of drawing undrawn ``line``: -1000 per box it captures, 100 + the chain length per
    box it hands over (``sacrifice``: at least one); 0 for a safe line. Lower is searched first.
    ``no_path``: an empty int64 array (the walks record no lines), passed in so that scoring allocates nothing."""
    score = 0
    sacrifice = False
    for j in range(2):
        box = line_boxes[line, j]
        if box >= 0 and valence[box] == 2:
            # the run of two-sided boxes that ``box`` starts, walking away from ``line``
            passed, _ = walk_chain(box, undrawn_side(box, line, lines, box_lines), lines, valence, line_boxes,
                                   box_lines, no_path)
            score += _SCORE_PER_SACRIFICE + 1 + passed
            sacrifice = True
        elif box >= 0 and valence[box] == 1:
            score += _SCORE_PER_CAPTURE
    return score, sacrifice


@njit(cache=True, inline='always')
def insert_sorted(moves, scores, count, line, score):
    """Inserts ``line`` with ``score`` into the first ``count`` entries of ``moves``/``scores``, kept sorted by
    score (stable: earlier insertions first among ties)."""
    i = count
    while i > 0 and scores[i - 1] > score:
        moves[i] = moves[i - 1]
        scores[i] = scores[i - 1]
        i -= 1
    moves[i] = line
    scores[i] = score


@njit(cache=True)
def ordered_moves(lines, valence, line_boxes, box_lines, first):
    """int64 ``[n]``: the undrawn lines in search order: ``first`` (e.g. a transposition table's move; -1 for
    none), then safe lines (no box gets its third side), then sacrifices by the boxes they hand over; boxes
    that can be captured (positions no chain rule covers) come before everything but ``first``. Ties keep
    line order."""
    num_lines = lines.shape[0]
    moves = np.empty(num_lines, np.int64)
    scores = np.empty(num_lines, np.int64)
    count = 0
    for line in range(num_lines):
        if lines[line]:
            continue
        score, _ = move_score(line, lines, valence, line_boxes, box_lines, moves[:0])
        if line == first:
            score = -10000
        insert_sorted(moves, scores, count, line, score)
        count += 1
    return moves[:count]


# --- the exact solver's moves ---------------------------------------------------------------------------


@njit(cache=True, inline='always')
def dominated_lines(lines, valence, line_boxes, box_lines, skip, seen, path):
    """Marks in ``skip`` (``[L]``, zeroed by the caller) the lines whose value some other undrawn
    line provably matches or beats, at a position where no box can be captured; ``seen`` (``[B]``) and
    ``path`` (int64 ``[B + 1]``) are scratch, passed in so that the search allocates nothing. Per component
    of boxes with two undrawn sides (a chain between two ends, each the edge of the board or a box with 3+
    undrawn sides, or a loop):

    * a loop: every line but one (opening it anywhere gives the same position up to isomorphism);
    * a chain of 3+ boxes: its inner lines. Opened inside, the taker can still reach, by captures alone,
      the position of the all-but-two (double-dealing) line of the chain opened at one end, and taking
      the chain's first box is optimal there (the chain rule), so the taker does at least as well;
    * a chain of two boxes: its two end lines (the middle line, the hard-hearted handout, does at least as well);
    * a single box, or a chain of three or more boxes: its second end line (the first does as well). Against
      either end line the taker's captures are forced (the chain rule: each leads into the edge, a box with
      three or more undrawn sides, or a chain of three or more boxes with such a far end) down to the last two
      boxes of a chain, where it takes both or hands them back by the far end line. Both openings reach the
      same position by taking all, and by handing back positions that differ only in which of the chain's
      lines completes the two boxes handed back: the same game. Each opening changes only its own end box.

    Returns the number of lines marked.
    """
    num_boxes = valence.shape[0]
    seen[:] = 0
    marked = 0
    for start in range(num_boxes):
        if valence[start] != 2 or seen[start]:
            continue
        size, is_loop, inner, end0, end1 = walk_component(start, lines, valence, line_boxes, box_lines, path,
                                                          seen)
        if is_loop:
            for i in range(1, inner):
                skip[path[i]] = 1
            marked += inner - 1
            continue
        if size >= 3:
            for i in range(inner):
                skip[path[i]] = 1
            marked += inner
        if size == 2:
            # Both end lines: the middle line (the hard-hearted handout) does at least as well. Against it the
            # taker's first capture is forced (the chain rule: it leads into no box with two undrawn sides),
            # and that capture's position, with the same box taken, is one the taker can also reach against
            # an end line, by drawing the middle.
            middle = path[0]
            for j in range(2):
                box = line_boxes[middle, j]
                skip[undrawn_side(box, middle, lines, box_lines)] = 1
            marked += 2
            continue
        skip[path[inner]] = 1  # the second end of a single box or of a chain of 3+
        marked += 1
    return marked


@njit(cache=True)
def searched_line(line, lines, valence, line_boxes, box_lines):
    """The line the pruned search (``search_moves`` with ``prune``) searches in place of ``line``: ``line``
    itself unless ``dominated_lines`` leaves it out, else the line it keeps of the same chain or loop, which
    matches or beats it (e.g. a caller's favourite line, made the search's first try)."""
    num_boxes = valence.shape[0]
    for box in range(num_boxes):
        if valence[box] == 1:
            return line  # a capturable box: nothing is pruned
    skip = np.zeros(lines.shape[0], np.int64)
    seen = np.zeros(num_boxes, np.int64)
    path = np.empty(num_boxes + 1, np.int64)
    dominated_lines(lines, valence, line_boxes, box_lines, skip, seen, path)
    if not skip[line]:
        return line
    for j in range(2):
        start = line_boxes[line, j]
        if start < 0 or valence[start] != 2:
            continue
        seen[:] = 0
        walk_component(start, lines, valence, line_boxes, box_lines, path, seen)
        for box in range(num_boxes):  # the component's one undrawn side that is kept
            if seen[box]:
                for k in range(4):
                    side = box_lines[box, k]
                    if lines[side] == 0 and not skip[side]:
                        return side
    return line


@njit(cache=True, inline='always')
def search_moves(lines, valence, line_boxes, box_lines, first, priority, prune, scratch, moves):
    """Writes into ``moves`` (int64 ``[>= n]``) the exact solver's ``n`` moves in search order and returns
    ``n``: ``first`` (e.g. a transposition table's move; -1 for none), moves that capture, safe lines (no box
    gets its third side) by ``priority`` (int64 ``[L]`` in ``0..2**40``, larger first; e.g.
    ``centre_priority``), then sacrifices by the boxes they hand over. With ``prune`` and no capturable box,
    the ``dominated_lines`` are left out. Ties keep line order. ``scratch``: ``move_scratch``'s buffers,
    so that the search, which calls this at every node, allocates nothing."""
    scores, skip, seen, path = scratch
    num_lines = lines.shape[0]
    skip[:] = 0
    if prune:
        capturable = False
        for box in range(valence.shape[0]):
            if valence[box] == 1:
                capturable = True
                break
        if not capturable:
            dominated_lines(lines, valence, line_boxes, box_lines, skip, seen, path)
    count = 0
    for line in range(num_lines):
        if lines[line] or skip[line]:
            continue
        score, sacrifice = move_score(line, lines, valence, line_boxes, box_lines, moves[:0])
        if score >= 0 and not sacrifice:
            score = -priority[line] - 1  # a safe line
        elif score < 0:
            score = -(np.int64(1) << np.int64(42))  # a capture
        if line == first:
            score = -(np.int64(1) << np.int64(44))
        insert_sorted(moves, scores, count, line, score)
        count += 1
    return count


def move_scratch(num_lines: int, num_boxes: int) -> tuple[np.ndarray, ...]:
    """The scratch buffers of ``search_moves`` (int64, as the position solver's): move scores, pruned-line
    marks, and a component walk's boxes and lines (``dominated_lines``)."""
    return (np.empty(num_lines, np.int64), np.zeros(num_lines, np.int64), np.zeros(num_boxes, np.int64),
            np.empty(num_boxes + 1, np.int64))


def centre_priority(geometry: BoardGeometry) -> np.ndarray:
    """int64 ``[L]``: larger for lines nearer the centre of the board (grid-cell Manhattan distance), the
    order in which ``search_moves`` tries safe lines: on 4x4 positions it needs about a third fewer nodes
    than line order (an order from the centre outwards, as in Barker and Korf's solver)."""
    cells = geometry.line_cells.astype(np.float64)
    centre = (np.array(geometry.grid_shape, np.float64) - 1) / 2
    return np.round(1000 - 10 * np.abs(cells - centre).sum(axis=1)).astype(np.int64)
