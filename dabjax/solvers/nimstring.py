"""Exact nimstring solver: who wins the fight for control of a Dots-and-Boxes position, and which lines keep the win.

Nimstring (Berlekamp, Conway and Guy, "Winning Ways for your Mathematical Plays", ch. 16, 1982; Berlekamp,
"The Dots and Boxes Game", 2000) is Dots-and-Boxes where boxes do not count: a player who completes a box moves
again, and a player who has to move with no line left loses (so whoever completes the last box loses). Its winner
is the player who can take control: good nimstring moves are usually good Dots-and-Boxes moves.

``solve_nimstring(geometry, lines)`` returns, for the side to move, whether it wins and, for every undrawn line,
whether drawing it keeps the win (a line that completes a box leaves the same player to move), or reports that
it ran out of its node or time budget (``finished=False``): it never returns a guess.

The search is a memoised negamax over won / lost (numba), on the board layout of ``dabjax.solvers.board_kernels``:

* **Memo** keyed by the drawn lines only, canonical under the board's symmetries and under swapping the two outer
  sides of a corner box (``dabjax.solvers.board_keys``); it persists between positions of one board
  (``NimstringSolver``), and holds only proven outcomes and nimbers.
* **Free lines**: a capturable box whose undrawn side leads to the edge, to another capturable box or to a box
  with three or four undrawn sides is taken at once (it never loses in nimstring: the taker moves again, and
  a line that only completes boxes is a move either player can make at no cost, as if it was not there).
* **Loony positions**: a capturable chain of two or more boxes whose far end is the edge or a box with three or
  four undrawn sides, or four or more boxes capturable from both ends (an opened loop), is won by the side to
  move: it can take every box and move on, or decline the last two (four) boxes with a double-dealing move and
  make the opponent move on; one of the two wins.
* **Independent components** (``components``): when the undrawn lines fall apart into groups of boxes joined
  only through the edge of the board (the ground, shared and never captured), each group is a game of its own,
  and the position is won when the nim-sum of their nimbers (Sprague-Grundy values; Winning Ways, ch. 16) is
  not zero. A component's nimber is the mex over its options that leave no loony offer (those lose in any sum).
* **Simple endgames** (only chains and loops, nothing capturable): every move in a chain of three or more boxes
  or in a loop is loony, and opening a chain of one or two boxes (a 2-chain by its middle line, hard-hearted)
  hands the move over once, so the side to move wins exactly when the number of such short chains is odd.
  ``controller_margin`` reports the controller's Dots-and-Boxes margin ``v(G)`` there
  (``dabjax.solvers.endgame_values.simple_endgame_value``).

``reductions=False`` searches every line at every node with none of these rules (the reference the tests compare
them with); ``components=False`` keeps all but the components. Every rule is checked in the tests against
plain recursion (1x1 to 2x3, 1x5) and against the rule-free search (3x3). Time is checked between rounds of
``_ROUND_NODES`` nodes; an aborted round stores nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np
from numba import njit

from dabjax.game.geometry import BoardGeometry
from dabjax.solvers import board_keys, endgame_values
from dabjax.solvers.board_kernels import (
    kernel_tables,
    other_box,
    set_line,
    undrawn_side,
    unset_line,
    walk_chain,
    walk_component,
)

_ROUND_NODES = 1 << 20  # nodes between two time checks (well under a second)
DEFAULT_TABLE_BITS = 22  # memo entries: 4M, 70 MB
_BUCKET = 4  # memo slots probed per key

# outcomes for the side to move (int8 in the search)
_UNKNOWN, _LOSS, _WIN = -1, 0, 1
# memo bytes: 0 an empty slot, 1 + nimber when the nimber is known (1: lost), _WIN_ONLY a win of unknown nimber
_WIN_ONLY = 255
# counters (int64 [6]): _TOP is the height of the stack of lines drawn by ``_normalise`` and ``_nimber``
_NODES, _NODE_LIMIT, _ABORTED, _REDUCE, _COMPONENTS, _TOP = 0, 1, 2, 3, 4, 5
_MAX_NIMBER = 62  # nimbers are kept as bits of an int64 for the mex; larger ones stop the search (ValueError)
# what a capturable box allows (``_capturable``)
_NOTHING, _LOONY, _FREE = 0, 1, 2
_U64 = np.uint64


# --- rules ------------------------------------------------------------------------------------------------


@njit(cache=True)
def _capturable(lines, valence, line_boxes, box_lines, path):
    """``(kind, line)`` for the capturable boxes of a position: ``_LOONY`` when one of them starts a loony offer
    (see the module docstring), else ``_FREE`` and the line of one that may be taken at once, else
    ``_NOTHING``. ``path`` int64 ``[>= 1]`` is scratch."""
    free = -1
    for box in range(valence.shape[0]):
        if valence[box] != 1:
            continue
        side = undrawn_side(box, -1, lines, box_lines)
        passed, end = walk_chain(box, side, lines, valence, line_boxes, box_lines, path[:1])
        if end < 0 or valence[end] >= 3:  # an open capturable chain of passed + 1 boxes
            if passed >= 1:
                return _LOONY, -1
            free = side
        elif passed + 2 >= 4:  # capturable at both ends (an opened loop, or a chain opened at both ends)
            return _LOONY, -1
        elif free < 0:
            free = side
    if free >= 0:
        return _FREE, free
    return _NOTHING, -1


@njit(cache=True)
def _simple_endgame_outcome(lines, valence, line_boxes, box_lines, path, seen):
    """``_WIN`` / ``_LOSS`` when nothing is capturable and every unclaimed box has two undrawn sides (chains
    and loops only): won when the number of chains of one or two boxes is odd; ``_UNKNOWN`` otherwise."""
    for box in range(valence.shape[0]):
        if valence[box] != 0 and valence[box] != 2:
            return _UNKNOWN
    seen[:] = 0
    short = 0
    for box in range(valence.shape[0]):
        if valence[box] != 2 or seen[box]:
            continue
        size, is_loop, _, _, _ = walk_component(box, lines, valence, line_boxes, box_lines, path, seen)
        if not is_loop and size <= 2:
            short += 1
    return _WIN if short % 2 == 1 else _LOSS


# --- memo -------------------------------------------------------------------------------------------------


@njit(cache=True, inline='always')
def _canonical(keys):
    best0, best1 = keys[0, 0], keys[0, 1]
    for s in range(1, keys.shape[0]):
        if keys[s, 1] < best1 or (keys[s, 1] == best1 and keys[s, 0] < best0):
            best0, best1 = keys[s, 0], keys[s, 1]
    return best0, best1


@njit(cache=True, inline='always')
def _slot(k0, k1, mask):
    return np.int64(board_keys.mixed_key(k0, k1) & mask) * _BUCKET


@njit(cache=True)
def _memo_get(memo_keys, memo_values, k0, k1):
    """The byte stored for key ``(k0, k1)``, 0 when absent (see ``_memo_put``)."""
    base = _slot(k0, k1, _U64(memo_values.shape[0] // _BUCKET - 1))
    for slot in range(base, base + _BUCKET):
        stored = memo_values[slot]
        if stored == 0:
            return 0
        if memo_keys[slot, 0] == k0 and memo_keys[slot, 1] == k1:
            return stored
    return 0


@njit(cache=True)
def _memo_put(memo_keys, memo_values, k0, k1, stored):
    """Stores a byte for key ``(k0, k1)``: ``1 + nimber`` when the nimber is known (1: a loss for the side to
    move), ``_WIN_ONLY`` for a win of unknown nimber, which never replaces a nimber."""
    base = _slot(k0, k1, _U64(memo_values.shape[0] // _BUCKET - 1))
    target = base + np.int64((k0 ^ (k1 >> _U64(7))) & _U64(_BUCKET - 1))  # the victim when the bucket is full
    for slot in range(base, base + _BUCKET):
        if memo_values[slot] == 0:
            target = slot
            break
        if memo_keys[slot, 0] == k0 and memo_keys[slot, 1] == k1:
            if stored == _WIN_ONLY:
                return
            target = slot
            break
    memo_keys[target, 0], memo_keys[target, 1] = k0, k1
    memo_values[target] = stored



@njit(cache=True)
def _components(lines, valence, line_boxes, box_lines, labels):
    """Labels the unclaimed boxes by connected component (boxes joined by undrawn lines; the edge of the board
    joins nothing: nimstring components meet only at the ground) in ``labels`` int64 ``[B]`` (-1 for claimed
    boxes); returns the number of components."""
    num_boxes = valence.shape[0]
    labels[:] = -1
    todo = np.empty(num_boxes, np.int64)
    count = 0
    for start in range(num_boxes):
        if valence[start] == 0 or labels[start] >= 0:
            continue
        labels[start] = count
        todo[0] = start
        size = 1
        while size > 0:
            size -= 1
            box = todo[size]
            for k in range(4):
                side = box_lines[box, k]
                if lines[side]:
                    continue
                beyond = other_box(side, box, line_boxes)
                if beyond >= 0 and labels[beyond] < 0:
                    labels[beyond] = count
                    todo[size] = beyond
                    size += 1
        count += 1
    return count


@njit(cache=True, inline='always')
def _line_component(line, line_boxes, labels):
    first = line_boxes[line, 0]
    return labels[first] if first >= 0 else labels[line_boxes[line, 1]]

# --- search -----------------------------------------------------------------------------------------------


@njit(cache=True, inline='always')
def _draw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare):
    gained = set_line(line, lines, valence, line_boxes)
    board_keys.toggle_key(line, lines, keys, sym_bits, partner, spare)
    return gained


@njit(cache=True, inline='always')
def _undraw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare):
    unset_line(line, lines, valence, line_boxes)
    board_keys.toggle_key(line, lines, keys, sym_bits, partner, spare)


@njit(cache=True, inline='always')
def _move_outcome(gained, child):
    """Whether drawing a line wins for its player: ``child`` is the outcome for whoever moves next, the same
    player when the line completed a box."""
    if child == _UNKNOWN:
        return _UNKNOWN
    if gained > 0:
        return child
    return _WIN if child == _LOSS else _LOSS


@njit(cache=True, inline='always')
def _push(line, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack):
    """Draws ``line`` and records it on ``stack`` (``_undo_to`` takes it back)."""
    _draw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
    stack[counters[_TOP]] = line
    counters[_TOP] += 1


@njit(cache=True, inline='always')
def _undo_to(top, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack):
    """Takes back the lines drawn since the stack had height ``top``."""
    while counters[_TOP] > top:
        counters[_TOP] -= 1
        _undraw(stack[counters[_TOP]], lines, valence, keys, line_boxes, sym_bits, partner, spare)


@njit(cache=True)
def _normalise(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, counters, stack, path):
    """Takes every free box (``_capturable``), its lines pushed on ``stack``; returns whether a loony offer is
    left on the board (then the side to move wins)."""
    while True:
        kind, free = _capturable(lines, valence, line_boxes, box_lines, path)
        if kind == _LOONY:
            return True
        if kind == _NOTHING:
            return False
        _push(free, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack)


@njit(cache=True)
def _nimber(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys, memo_values,
            counters, stack, path):
    """The nimber (Sprague-Grundy value) of a position with nothing capturable, -1 when the node limit ran out.

    Components (``_components``) are independent games, so the nimber is the nim-sum of theirs, each found on
    the board with every other line drawn. A component's nimber is the mex of its options' nimbers, an option
    being a line drawn and the free boxes it offers taken by the opponent, who then moves on (it completes no
    box: nothing was capturable); options that leave a loony offer are left out, as they lose in any sum
    (Berlekamp, "The Dots and Boxes Game", 2000, ch. 6)."""
    if counters[_NODES] >= counters[_NODE_LIMIT]:
        counters[_ABORTED] = 1
        return -1
    counters[_NODES] += 1
    k0, k1 = _canonical(keys)
    stored = _memo_get(memo_keys, memo_values, k0, k1)
    if stored != 0 and stored != _WIN_ONLY:
        return np.int64(stored) - 1
    labels = np.empty(valence.shape[0], np.int64)
    count = _components(lines, valence, line_boxes, box_lines, labels)
    value = np.int64(0)
    if count > 1:
        for component in range(count):
            top = counters[_TOP]
            for line in range(lines.shape[0]):
                if not lines[line] and _line_component(line, line_boxes, labels) != component:
                    _push(line, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack)
            part = _nimber(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                           memo_values, counters, stack, path)
            _undo_to(top, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack)
            if part < 0:
                return -1
            value ^= part
    elif count == 1:
        options = np.int64(0)  # bit n: an option of nimber n
        for line in range(lines.shape[0]):
            if lines[line]:
                continue
            top = counters[_TOP]
            _push(line, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack)
            loony = _normalise(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, counters,
                               stack, path)
            option = np.int64(0)
            if not loony:
                option = _nimber(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                                 memo_values, counters, stack, path)
            _undo_to(top, lines, valence, keys, line_boxes, sym_bits, partner, spare, counters, stack)
            if loony:
                continue
            if option < 0:
                return -1
            options |= np.int64(1) << option
        while options >> value & 1:
            value += 1
    if value > _MAX_NIMBER:
        raise ValueError("nimber too large for the mex bits")
    _memo_put(memo_keys, memo_values, k0, k1, np.uint8(value + 1))
    return value


@njit(cache=True)
def _search(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys, memo_values,
            counters, stack, path, seen):
    """The outcome (``_WIN`` / ``_LOSS``) of the position for the side to move, ``_UNKNOWN`` when the node
    limit ran out (``counters[_ABORTED]`` set)."""
    if counters[_NODES] >= counters[_NODE_LIMIT]:
        counters[_ABORTED] = 1
        return _UNKNOWN
    counters[_NODES] += 1
    if counters[_REDUCE] != 0:
        kind, free = _capturable(lines, valence, line_boxes, box_lines, path)
        if kind == _LOONY:
            return _WIN
        if kind == _FREE:  # the mover takes it and moves again
            _draw(free, lines, valence, keys, line_boxes, sym_bits, partner, spare)
            outcome = _search(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                              memo_values, counters, stack, path, seen)
            _undraw(free, lines, valence, keys, line_boxes, sym_bits, partner, spare)
            return outcome
        simple = _simple_endgame_outcome(lines, valence, line_boxes, box_lines, path, seen)
        if simple != _UNKNOWN:
            return simple
    k0, k1 = _canonical(keys)
    stored = _memo_get(memo_keys, memo_values, k0, k1)
    if stored != 0:
        return _LOSS if stored == 1 else _WIN
    if counters[_COMPONENTS] != 0:
        labels = np.empty(valence.shape[0], np.int64)
        if _components(lines, valence, line_boxes, box_lines, labels) > 1:
            value = _nimber(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                            memo_values, counters, stack, path)
            if value < 0:
                return _UNKNOWN
            return _WIN if value > 0 else _LOSS
    outcome = _LOSS  # also with no line left: the side to move cannot move
    # Lines that give nothing away first (no box left with one undrawn side), then the rest.
    for sacrifices in range(2):
        for line in range(lines.shape[0]):
            if lines[line]:
                continue
            gives = False
            for j in range(2):
                box = line_boxes[line, j]
                if box >= 0 and valence[box] == 2:
                    gives = True
            if gives != (sacrifices == 1):
                continue
            gained = _draw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
            child = _search(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                            memo_values, counters, stack, path, seen)
            _undraw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
            result = _move_outcome(gained, child)
            if result == _UNKNOWN:
                return _UNKNOWN
            if result == _WIN:
                outcome = _WIN
                break
        if outcome == _WIN:
            break
    _memo_put(memo_keys, memo_values, k0, k1, np.uint8(_WIN_ONLY if outcome == _WIN else 1))
    return outcome


@njit(cache=True)
def _root_round(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys, memo_values,
                counters, stack, path, seen, move_outcomes):
    """Fills ``move_outcomes`` int8 ``[L]`` (-1 where not yet known, left as it is for drawn lines) with
    whether each undrawn line wins for its player, until the node limit; returns whether all are known."""
    for line in range(lines.shape[0]):
        if lines[line] or move_outcomes[line] != _UNKNOWN:
            continue
        gained = _draw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        child = _search(lines, valence, keys, line_boxes, box_lines, sym_bits, partner, spare, memo_keys,
                        memo_values, counters, stack, path, seen)
        _undraw(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        result = _move_outcome(gained, child)
        if result == _UNKNOWN:
            return False
        move_outcomes[line] = result
    return True


@njit(cache=True)
def _forced_simple_endgame(lines, valence, line_boxes, box_lines, path, seen, memo):
    """``(simple, v(G))``: whether the position is a simple endgame once its free boxes are taken
    (``_capturable``; not when a loony offer is on the board), and then its value. Works on copies."""
    lines = lines.copy()
    valence = valence.copy()
    while True:
        kind, free = _capturable(lines, valence, line_boxes, box_lines, path)
        if kind == _LOONY:
            return False, 0
        if kind == _NOTHING:
            break
        set_line(free, lines, valence, line_boxes)
    for box in range(valence.shape[0]):
        if valence[box] != 0 and valence[box] != 2:
            return False, 0
    return True, endgame_values.simple_endgame_value_in(lines, valence, line_boxes, box_lines, memo, seen, path,
                                                        np.empty(valence.shape[0], np.int64))


# --- host -------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NimstringResult:
    """The nimstring outcome of a position for the side to move.

    Attributes:
      finished: whether the search ended within its budget; when False, ``wins`` is None and ``winning_moves``
        only marks the lines proven winning so far.
      wins: whether the side to move wins nimstring (None when not finished).
      winning_moves: bool ``[L]``, the undrawn lines whose drawing keeps the win for their player.
      nodes: search nodes visited.
      seconds: wall-clock seconds.
      controller_margin: the controller's exact Dots-and-Boxes margin ``v(G)`` over the remaining boxes when the
        position, once its free boxes are taken, is a simple endgame (chains and loops only); the side to move
        there opens and ends with its boxes taken so far minus ``v(G)``. None otherwise.
    """

    finished: bool
    wins: bool | None
    winning_moves: np.ndarray
    nodes: int
    seconds: float
    controller_margin: int | None = None


class NimstringSolver:
    """Solves nimstring positions of one board, keeping its memo between them (``table_bits``: ``2**bits``
    entries of 17 bytes, shared by outcomes and nimbers). ``reductions=False`` searches without the rules of the
    module docstring, ``components=False`` without splitting positions into independent components."""

    def __init__(self, geometry: BoardGeometry, *, table_bits: int = DEFAULT_TABLE_BITS, reductions: bool = True,
                 components: bool = True):
        self.geometry = geometry
        self.line_boxes, self.box_lines = kernel_tables(geometry)[:2]
        self.partner, self.spare, self.sym_bits = board_keys.corner_tables(geometry)
        size = 1 << int(table_bits)
        self.memo_keys = np.zeros((size, 2), np.uint64)
        self.memo_values = np.zeros(size, np.uint8)
        self.reductions = bool(reductions)
        self.components = bool(components)
        self.endgame_memo = endgame_values.new_memo()

    def solve(self, lines, *, max_nodes: int | None = None, max_seconds: float | None = None) -> NimstringResult:
        """The outcome of the position with drawn ``lines`` (bool ``[L]``) for the side to move, within at most
        ``max_nodes`` nodes and about ``max_seconds`` seconds (None: no limit)."""
        start = time.perf_counter()
        g = self.geometry
        drawn = np.asarray(lines, bool).reshape(-1)
        if drawn.shape[0] != g.num_lines:
            raise ValueError(f"lines has {drawn.shape[0]} entries, a {g.name} board has {g.num_lines}")
        board = drawn.astype(np.uint8)
        valence = (4 - drawn[g.box_lines].sum(axis=1)).astype(np.int64)
        keys = board_keys.position_keys(board, self.sym_bits.shape[0], self.sym_bits, self.partner, self.spare)
        path = np.empty(g.num_boxes + 1, np.int64)
        seen = np.zeros(g.num_boxes, np.uint8)
        counters = np.zeros(6, np.int64)
        counters[_REDUCE] = int(self.reductions)
        counters[_COMPONENTS] = int(self.reductions and self.components)
        stack = np.zeros(g.num_lines, np.int64)
        move_outcomes = np.full(g.num_lines, _UNKNOWN, np.int8)
        node_budget = np.iinfo(np.int64).max if max_nodes is None else int(max_nodes)
        finished = False
        while True:
            counters[_ABORTED] = 0
            counters[_NODE_LIMIT] = min(node_budget, counters[_NODES] + _ROUND_NODES)
            finished = _root_round(board, valence, keys, self.line_boxes, self.box_lines, self.sym_bits,
                                   self.partner, self.spare, self.memo_keys, self.memo_values, counters, stack, path,
                                   seen, move_outcomes)
            if finished or counters[_NODES] >= node_budget:
                break
            if max_seconds is not None and time.perf_counter() - start >= max_seconds:
                break
        winning = move_outcomes == _WIN
        margin = None
        if self.reductions:
            simple, value = _forced_simple_endgame(board, valence, self.line_boxes, self.box_lines, path, seen,
                                                   self.endgame_memo)
            margin = int(value) if simple else None
        return NimstringResult(finished=bool(finished), wins=bool(winning.any()) if finished else None,
                               winning_moves=winning, nodes=int(counters[_NODES]),
                               seconds=time.perf_counter() - start, controller_margin=margin)


@functools.lru_cache(maxsize=None)
def default_solver(geometry: BoardGeometry) -> NimstringSolver:
    """One solver per board, whose memo every ``solve_nimstring`` call shares."""
    return NimstringSolver(geometry)


def solve_nimstring(geometry: BoardGeometry, lines, *, max_nodes: int | None = None,
                    max_seconds: float | None = None) -> NimstringResult:
    """``NimstringSolver.solve`` with the board's shared solver (``default_solver``)."""
    return default_solver(geometry).solve(lines, max_nodes=max_nodes, max_seconds=max_seconds)
