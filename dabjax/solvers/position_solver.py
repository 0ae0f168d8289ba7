"""Exact position solver for boards too large for a whole-board table (4x4, 5x5, ... up to 128 lines).

``solve_position`` returns the exact value of a position (the best net margin over the remaining boxes for
the side to move, as in ``dabjax.solvers.retrograde``), its best-margin moves and its best-result moves (those that
keep the best win / draw / loss reachable given the score so far), or reports that it ran out of budget.
It never returns a guess as exact. ``prove_result`` proves less for less: the result class (win, draw or loss)
by null-window searches at the two class boundaries, and a line that keeps it: the proof's own, or one the caller
prefers to it that a short search shows to keep it too.

The search is a fail-soft negamax alpha-beta compiled with numba:

* **Root driver**: MTD(f), null-window searches from a guess (0 by default), each fail-soft bound narrowing
  the range, instead of one full-window search (``mtd=False``): the empty 4x4 board (value 0) takes two.
* **Transposition table** keyed by the drawn lines only (the value does not depend on who owns the claimed
  boxes), canonical under the board's symmetries (the smallest of the 4 or 8 images, kept up to date
  incrementally) and under swapping the two outer sides of a corner box (both join the same box to the
  edge: the same game; ``corners=False`` keys the lines themselves), two entries per bucket (one kept for
  the largest subtree, one always replaced; the bucket is one 64-byte cache line, so a probe is one memory
  access), storing lower and upper bounds and the best move. It persists
  between positions of one board, so solving many positions of the same game is cheaper than solving them
  apart. Enhanced transposition cut-offs: at nodes with ``etc_min_lines`` or more undrawn lines, a move
  whose position the table already proves good enough ends the node before any search.
* **Chain rules** (forced captures), checked exhaustively against the whole-board tables in the tests:
  a capturable box whose capturing line does not lead into a box with two undrawn sides is taken at once;
  so is the first box of a capturable chain of three or more boxes (3 or 5+ when both ends are open); at
  the last two boxes of a capturable chain, or an opened chain of 4, only two moves are searched, take the
  box or hand the boxes over; several capturable chains are taken but the last (``move_ordering.chain_rule``).
* **Simple-endgame leaves**: when no box can be captured and every unclaimed box has exactly two undrawn
  sides, the position is chains and loops only and its value is ``-v(G)`` by the exact recursion over its
  chains and loops (``endgame_values.simple_endgame_value``, memoised).
* **Pruned lines** (``prune``): when no box can be captured, the lines that another line provably matches
  or beats are not searched: the inner lines of a chain of 3+ boxes, all but one line of a loop, the end
  lines of a chain of two boxes (the middle line, the hard-hearted handout, does as well), the second end line of
  any other chain (``move_ordering.dominated_lines``; checked against every position of the 3x3 and 2x4
  tables).
* **Move ordering**: the table's best move, captures, safe lines (no third side) from the centre of the
  board outwards (``center_first``; else in line order), then sacrifices by the number of boxes they hand
  over.
* **Cost per node**: the recursion (``_node``) gets its arrays borrowed (``_borrowed``: no owner, so numba's
  atomic reference counts skip them), is compiled without reference counting, and has the kernels it calls
  inlined; the enhanced transposition cut-offs prefetch every child's table entry before probing any.
* **Threads** (``threads``): the threads search one tree together on the shared table, each from the root;
  a node of ``BUSY_MIN_MOVES`` or more marks itself busy while it is searched, and a thread puts off a move
  whose position another thread has marked (ABDADA, Weill 1996), so that they spread over the moves and use each
  other's proofs. The child checks the mark itself, with the key it computes for its table probe anyway.
* **Budget**: a node budget and a time budget. Time is checked between bounded-node rounds of the search
  (an aborted round stores nothing; the table keeps everything proven before), so the result is either
  exact or ``finished=False``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import queue
import threading
import time

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from dabjax.game.geometry import BoardGeometry
from dabjax.solvers import board_kernels, board_keys, endgame_values, move_ordering

MAX_SOLVER_LINES = board_kernels.MAX_KERNEL_LINES
_ROUND_NODES = 1 << 21  # Nodes per search round between two time checks (a fraction of a second: docs/lab/solver.md,
# "Speeds").
# With threads: a position goes parallel after this many nodes on one thread (smaller ones are over before
# the threads would start), and its rounds are shorter, so that a thread stops soon after another answered.
_SEQUENTIAL_NODES = 1 << 18
_THREAD_ROUND_NODES = 1 << 16
_MAX_DEFAULT_THREADS = 8
# Nodes per round of a result proof (``prove_result``): a time check every few milliseconds, so that a solve on a
# clock overruns its share by little (an aborted round loses only its own unfinished work).
PROOF_ROUND_NODES = 1 << 15
# Nodes for each line that a result proof's caller prefers to the proof's own keeping move (a few milliseconds).
WITNESS_LOOK_NODES = 1 << 15
# Nodes for each root line when a proof ran out, to read from the table which lines it proved below its boundary
# (``_refuted_by_table``): enough to pass the forced captures under a line, not to search.
TABLE_LOOK_NODES = 1 << 8
_NO_MOVE = -1
_U64 = np.uint64

# The search's int64 working array: counters (these slots), then its scratch (``_work_size``). One array,
# because every array passed down the recursion costs time at every node. _DEPTH: lines drawn since the
# root, which picks the node's move list.
# _EXCLUSIVE: set by a parent searching one tree with other threads (``_SHARED``) before it enters a child it can put
# off; the child clears it on entry, and sets it to _WAS_BUSY when another thread is searching it (then it returns
# at once). _BUSY_MIN: the moves a node needs to mark itself busy.
_NODES, _NODE_LIMIT, _ABORTED, _FLAGS, _ETC_MIN, _ETC_CUTS, _DEPTH, _DEFERRALS, _EXCLUSIVE, _BUSY_MIN = range(10)
_COUNTERS = 10
_WAS_BUSY = 2
# _FLAGS bits. _SHARED: the threads search one tree together (``_shared_search``): a move whose position another
# thread is searching is deferred (``_node``).
_PRUNE, _ETC, _SHARED = 1, 2, 4
# Entries of the table of positions being searched (``busy``, one per bucket, shared by the threads): a hint only, so
# a collision or a race costs a deferral at worst, never a wrong value.
_BUSY_BITS = 16
# Moves a node needs to mark itself busy for the other threads (``_SHARED``): smaller subtrees end before a mark
# would help, and each mark is a write to memory the threads share.
BUSY_MIN_MOVES = 10


# --- transposition table --------------------------------------------------------------------------------


@njit(cache=True, inline='always')
def _canonical_symmetry(keys):
    """The symmetry whose image of the position has the smallest (high word, low word) key."""
    best = 0
    for s in range(1, keys.shape[0]):
        if keys[s, 1] < keys[best, 1] or (keys[s, 1] == keys[best, 1] and keys[s, 0] < keys[best, 0]):
            best = s
    return best


@njit(cache=True, inline='always')
def _bucket(k0, k1, mask):
    return np.int64(board_keys.mixed_key(k0, k1) & mask) * 2


@njit(cache=True, inline='always')
def _pack(lower, upper, move, size):
    """An entry's data word: lower and upper bound, canonical move (-1: none) and subtree size, 8, 8, 8 and 16
    bits."""
    return (_U64(np.int64(lower) & 0xFF) | (_U64(np.int64(upper) & 0xFF) << _U64(8))
            | (_U64(np.int64(move) & 0xFF) << _U64(16)) | (_U64(np.int64(size) & 0xFFFF) << _U64(24)))


@njit(cache=True, inline='always')
def _signed_byte(data, shift):
    value = np.int64((data >> _U64(shift)) & _U64(0xFF))
    return value - 256 if value >= 128 else value


@njit(cache=True, inline='always')
def _entry_size(data):
    return np.int64((data >> _U64(24)) & _U64(0xFFFF))


@njit(cache=True, inline='always')
def _entry_check(k0, k1, data):
    """The fourth word of an entry: a hash of its key and data word. Threads share one table without locks
    (``PositionSolver(threads=...)``), so a reader may see one writer's key beside another's data; such a torn
    entry fails this check (but for a 2**-64 chance) and counts as absent, never as wrong bounds. An all-zero
    (empty) entry fails it too."""
    return (k0 * _U64(0xD6E8FEB86659FD93)) ^ (k1 * _U64(0xA0761D6478BD642F)) ^ ((data + _U64(1)) * _U64(
        0xE7037ED1A0B428DB))


@njit(cache=True, inline='always')
def _probe(table, k0, k1, mask):
    """(slot, lower, upper, canonical move) of the entry for key ``(k0, k1)``, slot -1 if absent (or torn)."""
    base = _bucket(k0, k1, mask)
    for slot in range(base, base + 2):
        if table[slot, 0] == k0 and table[slot, 1] == k1:
            data = table[slot, 2]
            lower, upper = _signed_byte(data, 0), _signed_byte(data, 8)
            if lower <= upper and table[slot, 3] == _entry_check(k0, k1, data):
                return slot, lower, upper, _signed_byte(data, 16)
    return -1, np.int64(-127), np.int64(127), np.int64(-1)


@njit(cache=True, inline='always')
def _store(table, k0, k1, mask, lower, upper, move, size):
    """Stores bounds for key ``(k0, k1)``: into its own slot (intersecting), else the bucket's first slot
    if this subtree (``size`` = undrawn lines) is at least as large as its occupant's, else the second. The
    check word (``_entry_check``) is written last, from the data written. ``move`` (-1: none) is one whose
    value reaches ``lower``, and it replaces the held move only when ``lower`` does not fall below the held
    one: an entry's move always reaches the entry's lower bound (a result proof's keeping move)."""
    base = _bucket(k0, k1, mask)
    for slot in range(base, base + 2):
        if table[slot, 0] == k0 and table[slot, 1] == k1:
            held = table[slot, 2]
            held_lower, held_upper = _signed_byte(held, 0), _signed_byte(held, 8)
            if held_lower <= held_upper and table[slot, 3] == _entry_check(k0, k1, held):
                new_move = move if move >= 0 and lower >= held_lower else _signed_byte(held, 16)
                data = _pack(max(held_lower, lower), min(held_upper, upper), new_move, _entry_size(held))
                table[slot, 2] = data
                table[slot, 3] = _entry_check(k0, k1, data)
                return
    slot = base if size >= _entry_size(table[base, 2]) else base + 1
    data = _pack(lower, upper, move, size)
    table[slot, 0] = k0
    table[slot, 1] = k1
    table[slot, 2] = data
    table[slot, 3] = _entry_check(k0, k1, data)


def _new_table(size: int) -> np.ndarray:
    """uint64 ``[size, 4]``, zeros (every entry absent): per entry its key (two words), data (``_pack``) and check
    (``_entry_check``); a bucket's two entries fill one 64-byte cache line, so a probe costs one memory access."""
    flat = np.zeros(size * 4 + 8, np.uint64)
    skip = (-flat.ctypes.data % 64) // 8  # to a cache line's start
    return flat[skip:skip + size * 4].reshape(size, 4)


# --- the search -----------------------------------------------------------------------------------------


def _work_size(num_lines, num_boxes):
    """The length of the search's working array: the counters, a move list per depth (``L + 1`` of ``L``),
    then ``_scratch``'s buffers, then ``_child_keys``."""
    return _COUNTERS + (num_lines + 1) * num_lines + 2 * num_lines + 3 * num_boxes + 1 + 2 * num_lines


@njit(cache=True, inline='always')
def _move_list(work, num_lines):
    """The move list (int64 ``[L]``) of the node at depth ``work[_DEPTH]``: it must outlive its children's."""
    start = _COUNTERS + work[_DEPTH] * num_lines
    return work[start:start + num_lines]


@njit(cache=True, inline='always')
def _scratch(work, num_lines, num_boxes):
    """``(search_moves' scratch, codes)``: the buffers that one node at a time uses (``work``'s tail)."""
    start = _COUNTERS + (num_lines + 1) * num_lines
    scores, skip = work[start:start + num_lines], work[start + num_lines:start + 2 * num_lines]
    start += 2 * num_lines
    seen, path = work[start:start + num_boxes], work[start + num_boxes:start + 2 * num_boxes + 1]
    codes = work[start + 2 * num_boxes + 1:start + 3 * num_boxes + 1]
    return (scores, skip, seen, path), codes


@njit(cache=True, inline='always')
def _child_keys(work, num_lines, num_boxes):
    """int64 ``[2 L]``: the canonical keys (low, high word) of a node's children, by move index (``work``'s
    last buffer; the enhanced transposition cut-offs' keys, computed before any probe)."""
    start = _COUNTERS + (num_lines + 1) * num_lines + 2 * num_lines + 3 * num_boxes + 1
    return work[start:start + 2 * num_lines]


@njit(cache=True, inline='always')
def _captures(line, valence, line_boxes):
    """Whether drawing ``line`` completes a box (the mover moves again: no cut-off from the child's entry)."""
    captures = False
    for j in range(2):
        box = line_boxes[line, j]
        if box >= 0 and valence[box] == 1:
            captures = True
    return captures


@intrinsic
def _borrowed(typingctx, owned):
    """The array ``owned`` without its owner (a null meminfo): numba's reference counting, which counts every
    array passed to a call, sliced or unpacked from a tuple with an atomic operation, skips it. Only for what a
    caller keeps alive for the whole call (the search's arguments)."""
    if not isinstance(owned, types.Array):
        return None

    def codegen(context, builder, signature, args):
        view = cgutils.create_struct_proxy(owned)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return owned(owned), codegen


@intrinsic
def _prefetch(typingctx, array, index):
    """Asks the CPU to bring ``array[index]`` (a C-contiguous array's flat index) into its caches, without
    waiting for it: the table probes that follow find their entries there instead of missing one by one."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, value=args[0])
        address = builder.gep(view.data, [args[1]])
        i8_ptr, i32 = llvm_ir.IntType(8).as_pointer(), llvm_ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, llvm_ir.FunctionType(llvm_ir.VoidType(), [i8_ptr, i32, i32, i32]), "llvm.prefetch")
        # read (0), high temporal locality (3), data cache (1)
        builder.call(prefetch, [builder.bitcast(address, i8_ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, index), codegen


# cache: compiling the search is slow, so each process after the first loads it (safe for this recursion: it
# compiles to direct calls, without the late-bound symbol that makes numba's cached recursive functions crash,
# tests/test_solver.py). nogil: a solve in one thread (the web page's analysis board) leaves the others running.
@njit(cache=True, nogil=True)
def _search(move, remaining, alpha, beta, lines, valence, keys, tables, tt, work, memo, priority):
    """Fail-soft negamax: the mover's net margin over the ``remaining`` unclaimed boxes, within
    ``(alpha, beta)``; outside it a bound on the correct side. Returns 0 once aborted (never stored).

    With ``move >= 0``: the mover's value of drawing ``move`` first (``k + child`` when it completes ``k``
    boxes, else ``-child``). The host's entry to ``_node``, the recursion, which gets every array borrowed
    (``_borrowed``: the host holds them for the whole call), so that passing them costs no reference counts.
    """
    line_boxes, box_lines, sym_bits, sym_map, sym_gather, partner, spare = tables
    tables = (_borrowed(line_boxes), _borrowed(box_lines), _borrowed(sym_bits), _borrowed(sym_map),
              _borrowed(sym_gather), _borrowed(partner), _borrowed(spare))
    table, busy = tt
    tt = (_borrowed(table), _borrowed(busy))
    lines, valence, keys = _borrowed(lines), _borrowed(valence), _borrowed(keys)
    work, priority = _borrowed(work), _borrowed(priority)
    memo = (_borrowed(memo[0]), _borrowed(memo[1]), _borrowed(memo[2]))
    if move < 0:
        return _node(remaining, alpha, beta, lines, valence, keys, tables, tt, work, memo, priority)
    line_boxes, box_lines, sym_bits, sym_map, sym_gather, partner, spare = tables
    gained = board_keys.draw_keyed(move, lines, valence, keys, line_boxes, sym_bits, partner, spare)
    work[_DEPTH] += 1
    if gained > 0:
        value = gained + _node(remaining - gained, alpha - gained, beta - gained, lines, valence, keys, tables,
                               tt, work, memo, priority)
    else:
        value = -_node(remaining, -beta, -alpha, lines, valence, keys, tables, tt, work, memo, priority)
    work[_DEPTH] -= 1
    board_keys.undraw_keyed(move, lines, valence, keys, line_boxes, sym_bits, partner, spare)
    return value


@njit(cache=True, nogil=True, _nrt=False, no_cpython_wrapper=True)
def _node(remaining, alpha, beta, lines, valence, keys, tables, tt, work, memo, priority):
    """``_search`` at a position, every array borrowed. Compiled without numba's reference counting
    (``_nrt=False``: it allocates nothing; numba refuses to compile it if it ever does), which otherwise
    costs a call per array per passing, slicing and tuple unpacking, and so without a Python entry
    (``no_cpython_wrapper``: only ``_search`` calls it). The small kernels it calls are inlined
    (``inline='always'``) and so counted nothing either. A node draws its children's lines itself rather
    than through a call that draws one line: every call passes all the arrays below, which costs time.

    Entered with ``work[_EXCLUSIVE]`` set (a parent searching one tree with other threads), a node that another
    thread has marked busy returns 0 at once with ``work[_EXCLUSIVE] = _WAS_BUSY``: not a value, put off."""
    line_boxes, box_lines, sym_bits, sym_map, sym_gather, partner, spare = tables
    exclusive = work[_EXCLUSIVE]  # the parent puts this node off if another thread is searching it
    work[_EXCLUSIVE] = 0
    if remaining == 0:
        return 0
    if work[_ABORTED] != 0:
        return 0
    if work[_NODES] >= work[_NODE_LIMIT]:
        work[_ABORTED] = 1
        return 0
    work[_NODES] += 1
    table, busy = tt
    flags = work[_FLAGS]

    forced, pair_take, pair_decline, simple = move_ordering.chain_rule(lines, valence, line_boxes, box_lines)
    num_lines, num_boxes = lines.shape[0], valence.shape[0]
    if simple:
        move_scratch, codes = _scratch(work, num_lines, num_boxes)
        return -endgame_values.simple_endgame_value_in(lines, valence, line_boxes, box_lines, memo,
                                                       move_scratch[2], move_scratch[3], codes)
    # A chain-rule node searches the forced capture, or the last two boxes of a capturable chain: take, or
    # decline both; it neither probes nor stores.
    chain_node = forced >= 0 or pair_take >= 0
    moves = priority[:0]  # typed here; only a node that searches its own moves fills it
    count = 1 if forced >= 0 else 2
    k0, k1, mask, sym = _U64(0), _U64(0), _U64(0), 0
    busy_slot, tag = np.int64(0), _U64(0)
    alpha_start = alpha
    if not chain_node:
        # Transposition table.
        sym = _canonical_symmetry(keys)
        k0, k1 = keys[sym, 0], keys[sym, 1]
        mask = _U64(table.shape[0] // 2 - 1)
        slot, lower, upper, canonical_move = _probe(table, k0, k1, mask)
        lower = max(lower, -remaining)
        upper = min(upper, remaining)
        if lower >= beta:
            return lower
        if upper <= alpha:
            return upper
        if lower == upper:
            return lower
        alpha = max(alpha, lower)
        beta = min(beta, upper)
        alpha_start = alpha
        if (flags & _SHARED) != 0:
            busy_slot = np.int64(board_keys.mixed_key(k0, k1) & _U64(busy.shape[0] - 1))
            tag = k0 | _U64(1)
            if exclusive != 0 and busy[busy_slot] == tag:
                work[_EXCLUSIVE] = _WAS_BUSY
                work[_DEFERRALS] += 1
                return 0

        # Move ordering: the table's move, captures, safe lines, then sacrifices by size.
        hint = -1
        if canonical_move >= 0:
            hint = sym_gather[sym, canonical_move]
            if lines[hint] and partner[hint] >= 0:
                hint = partner[hint]  # the stored position had the other outer side of this corner drawn
        moves = _move_list(work, num_lines)
        count = move_ordering.search_moves(lines, valence, line_boxes, box_lines, hint, priority,
                                           (flags & _PRUNE) != 0, _scratch(work, num_lines, num_boxes)[0],
                                           moves)

        # Enhanced transposition cut-off: a move whose position the table already proves good enough.
        if (flags & _ETC) != 0 and count >= work[_ETC_MIN]:
            # First every child's key, each bucket prefetched, then the probes in move order: the cache misses
            # overlap instead of queueing. A capture is skipped (the mover moves again: not the child's value).
            child_keys = _child_keys(work, num_lines, num_boxes)
            for i in range(count):
                m = moves[i]
                if _captures(m, valence, line_boxes):
                    continue
                c0, c1 = board_keys.canonical_key_after(m, lines, keys, sym_bits, partner, spare)
                child_keys[2 * i], child_keys[2 * i + 1] = np.int64(c0), np.int64(c1)
                slot = _bucket(c0, c1, mask)
                _prefetch(table, 4 * slot)
            for i in range(count):
                if _captures(moves[i], valence, line_boxes):
                    continue
                c0, c1 = _U64(child_keys[2 * i]), _U64(child_keys[2 * i + 1])
                c_slot, c_lower, c_upper, _ = _probe(table, c0, c1, mask)
                if c_slot >= 0 and -c_upper >= beta:
                    work[_ETC_CUTS] += 1
                    value = -c_upper
                    _store(table, k0, k1, mask, value, np.int64(127),
                           sym_map[sym, moves[i]], count)
                    return value

    # Searching one tree with other threads (``_SHARED``): a node of ``_BUSY_MIN`` moves or more marks itself busy
    # (``busy``: the positions being searched) until it returns. Its first move is searched at once; a later one (in
    # the first pass) that finds itself marked by another thread returns at once (``_EXCLUSIVE``; a node all the same:
    # it has probed the table) and is put off to a second pass, which searches it whatever its mark, so that the
    # threads spread over the moves (ABDADA, Weill 1996). The child checks its own mark with the key it computes
    # anyway. The deferred moves are packed at the front of ``moves``, over moves already searched.
    shared_node = (flags & _SHARED) != 0 and not chain_node
    marked = shared_node and count >= work[_BUSY_MIN]
    if marked:
        busy[busy_slot] = tag
    best = np.int64(-128)
    best_move = -1
    position, end, deferred, second_pass = 0, count, 0, False
    while True:
        if position == end:
            if second_pass or deferred == 0:
                break
            position, end, second_pass = 0, deferred, True
        if chain_node:
            m = forced if forced >= 0 else (pair_take if position == 0 else pair_decline)
        else:
            m = moves[position]
        position += 1
        if marked and not second_pass and position > 1:
            work[_EXCLUSIVE] = 1
        gained = board_keys.draw_keyed(m, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        work[_DEPTH] += 1
        if gained > 0:
            value = gained + _node(remaining - gained, alpha - gained, beta - gained, lines, valence, keys,
                                   tables, tt, work, memo, priority)
        else:
            value = -_node(remaining, -beta, -alpha, lines, valence, keys, tables, tt, work, memo, priority)
        work[_DEPTH] -= 1
        board_keys.undraw_keyed(m, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        if work[_EXCLUSIVE] == _WAS_BUSY:
            work[_EXCLUSIVE] = 0
            moves[deferred] = m
            deferred += 1
            continue
        if work[_ABORTED] != 0:
            if marked and busy[busy_slot] == tag:
                busy[busy_slot] = 0
            return 0
        if value > best:
            best = value
            best_move = m
            if value > alpha:
                alpha = value
                if alpha >= beta:
                    break
    if chain_node:
        return best
    if marked and busy[busy_slot] == tag:
        busy[busy_slot] = 0
    # Fail-soft within (alpha_start, beta): at or below it an upper bound, at or above beta a lower one.
    new_lower = best if best > alpha_start else np.int64(-127)
    new_upper = best if best < beta else np.int64(127)
    _store(table, k0, k1, mask, new_lower, new_upper,
           sym_map[sym, best_move] if best > alpha_start else -1, count)
    return best


# --- the host side --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PositionSolution:
    """The outcome of ``PositionSolver.solve``. ``L`` lines.

    Attributes:
      finished: True when every field below is exact; False when the budget ran out (then the fields that
        were not completed are None).
      value: the best net margin over the remaining boxes for the side to move.
      margin: the score so far, the mover's boxes minus the opponent's (as given).
      best_margin_moves: bool ``[L]``, the moves that achieve ``value``.
      best_result_moves: bool ``[L]``, the moves that keep the best result (win > draw > loss of the final
        margin ``margin + value``) reachable; every legal move when the position is lost.
      move_values: int8 ``[L]``, the exact value of every move (``retrograde.ILLEGAL`` for drawn lines), only
        when asked for.
      nodes: search nodes visited; seconds: wall-clock time.
    """

    finished: bool
    value: int | None
    margin: int
    best_margin_moves: np.ndarray | None
    best_result_moves: np.ndarray | None
    move_values: np.ndarray | None
    nodes: int
    seconds: float


class _Budget:
    """Nodes and seconds left for one ``solve`` call, shared by its threads (``spend`` holds a lock); ``stop``
    ends the searches of the other threads once one of them has answered a root question."""

    def __init__(self, max_nodes: int | None, time_limit: float | None, round_nodes: int = _ROUND_NODES):
        self.nodes_left = np.inf if max_nodes is None else int(max_nodes)
        self.deadline = np.inf if time_limit is None else time.perf_counter() + float(time_limit)
        self.nodes_used = 0
        self.round_nodes = int(round_nodes)
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def spend(self, nodes: int) -> None:
        with self._lock:
            self.nodes_left -= nodes
            self.nodes_used += nodes

    def exhausted(self) -> bool:
        return self.nodes_left <= 0 or time.perf_counter() >= self.deadline or self.stop.is_set()

    def allowance(self) -> "_Budget":
        """``WITNESS_LOOK_NODES`` nodes past this budget, without a deadline (spent apart, as ``sub_budget``): for
        the looks that confirm what a finished proof found (``PositionSolver._confirms``)."""
        return _Budget(WITNESS_LOOK_NODES, None, self.round_nodes)

    def sub_budget(self, max_nodes: int) -> "_Budget":
        """A budget of at most ``max_nodes`` more nodes within this one's deadline (spent apart: ``spend``
        the sub-budget's ``nodes_used`` here afterwards)."""
        sub = _Budget(None, None, self.round_nodes)
        sub.nodes_left, sub.deadline = min(self.nodes_left, max_nodes), self.deadline
        return sub


class PositionSolver:
    """An exact alpha-beta solver for one board size; its transposition table persists between calls.

    Args:
      geometry: the board (at most ``MAX_SOLVER_LINES`` lines).
      table_bits: the transposition table holds ``2**table_bits`` entries (32 bytes each; 22 -> 134 MB).
      corners, prune, center_first, etc_min_lines, mtd: the search's features (see the module docstring),
        all on by default; switching them off gives the same values with more nodes (benchmarks compare).
      threads: the threads of one ``solve`` (1: this thread only). With more, a position that one thread
        does not prove within ``_SEQUENTIAL_NODES`` nodes is solved on all of them: every thread searches each
        null-window question of MTD(f) from the root, putting off the moves another thread is searching
        (``_shared_search``), and the per-move searches
        (best-margin, best-result moves, every move's value) run side by side. The threads share the one
        table without locks (a torn entry fails its check word and counts as absent: ``_entry_check``); each
        has its own position arrays and endgame memo. The kernels release the GIL; the answers are those of
        one thread.
    """

    def __init__(self, geometry: BoardGeometry, table_bits: int = 22, *, corners: bool = True, prune: bool = True,
                 center_first: bool = True, etc_min_lines: int = 16, mtd: bool = True, threads: int = 1):
        if not 4 <= int(table_bits) <= 30:
            raise ValueError(f"table_bits={table_bits} must be in 4..30")
        if int(threads) < 1:
            raise ValueError(f"threads={threads} must be at least 1")
        self.geometry = geometry
        self.threads = int(threads)
        self._features = dict(table_bits=int(table_bits), corners=corners, prune=prune, center_first=center_first,
                              etc_min_lines=etc_min_lines, mtd=mtd)
        self._helpers: list[PositionSolver] = []  # the other threads' solvers, made on first use
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        line_boxes, box_lines, sym_bits, sym_map, sym_gather = board_kernels.kernel_tables(geometry)
        partner, spare, extended = board_keys.corner_tables(geometry)
        if not corners:
            partner, extended = np.full_like(partner, -1), sym_bits
        self._tables = (line_boxes, box_lines, extended, sym_map, sym_gather, partner, spare)
        self._flags = (_PRUNE if prune else 0) | (_ETC if etc_min_lines else 0)
        self._etc_min = int(etc_min_lines)
        self._mtd = bool(mtd)
        self._priority = move_ordering.centre_priority(geometry) if center_first else np.zeros(
            geometry.num_lines, np.int64)
        self.etc_cuts = 0  # enhanced transposition cut-offs so far (for benchmarks)
        self.deferrals = 0  # moves this thread put off because another thread was searching them (``_SHARED``)
        size = 1 << int(table_bits)
        self._tt = (
            _new_table(size),
            np.zeros(1 << _BUSY_BITS, np.uint64),  # the positions being searched (``_SHARED``)
        )
        self._memo = endgame_values.new_memo()

    # state of one position -------------------------------------------------------------------------------

    def _position(self, lines) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        geometry = self.geometry
        lines = np.asarray(lines)
        if lines.shape != (geometry.num_lines,):
            raise ValueError(
                f"lines must be bool [{geometry.num_lines}] for a {geometry.name} board, got shape {lines.shape}"
            )
        drawn = lines.astype(np.uint8)
        valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
        _, _, sym_bits, _, _, partner, spare = self._tables
        keys = board_keys.position_keys(drawn, geometry.num_symmetries, sym_bits, partner, spare)
        remaining = int((valence > 0).sum())
        return drawn, valence, keys, remaining

    def _bounded(self, budget: _Budget, state, move: int, alpha: int, beta: int, shared: bool = False
                 ) -> int | None:
        """The fail-soft value within ``(alpha, beta)`` of the position (``move=-1``) or of one move,
        repeating node-bounded rounds (proven work stays in the table) until done or out of budget.
        ``shared``: other threads search the same tree (``_SHARED``)."""
        lines, valence, keys, remaining = state
        flags = self._flags | (_SHARED if shared else 0)
        while not budget.exhausted():
            limit = int(min(budget.round_nodes, budget.nodes_left))
            work = np.zeros(_work_size(lines.shape[0], valence.shape[0]), np.int64)
            work[_NODE_LIMIT], work[_FLAGS], work[_ETC_MIN] = limit, flags, self._etc_min
            work[_BUSY_MIN] = BUSY_MIN_MOVES
            value = _search(move, remaining, alpha, beta, lines, valence, keys, self._tables, self._tt, work,
                            self._memo, self._priority)
            used = int(work[_NODES])
            self.etc_cuts += int(work[_ETC_CUTS])
            self.deferrals += int(work[_DEFERRALS])
            budget.spend(used)
            if work[_ABORTED] == 0:
                return int(value)
        return None

    def _exact(self, budget: _Budget, state, move: int, guess: int, lower: int, upper: int,
               log=None, bounded=None) -> int | None:
        """The exact value, known to lie in ``[lower, upper]``, of the position (``move=-1``) or of one move:
        MTD(f), null-window searches from ``guess`` (each fail-soft bound narrows the range), or one
        full-window search without ``mtd``. None if out of budget. ``log(threshold, bound, nodes)`` is
        called after each null-window search. ``bounded(alpha, beta)``: the fail-soft search to use (default
        ``self._bounded`` of ``state`` and ``move``; ``_shared_search`` for the threaded root)."""
        if bounded is None:
            def bounded(alpha, beta):
                return self._bounded(budget, state, move, alpha, beta)
        if not self._mtd:
            return bounded(lower - 1, upper + 1)
        value = min(max(int(guess), lower), upper)
        while lower < upper:
            beta = max(value, lower + 1)
            value = bounded(beta - 1, beta)
            if log is not None:
                log(beta, value, budget.nodes_used)
            if value is None:
                return None
            if value < beta:
                upper = value
            else:
                lower = value
        return lower

    def _at_least(self, budget, state, move: int, threshold: int) -> bool | None:
        """Whether the move's value is ``>= threshold`` (a null-window search), None if out of budget."""
        value = self._bounded(budget, state, move, threshold - 1, threshold)
        return None if value is None else value >= threshold

    # threads ---------------------------------------------------------------------------------------------

    def _thread_solvers(self) -> list[PositionSolver]:
        """This solver and one more per extra thread, all on this solver's table (each keeps its own position
        arrays, working array and endgame memo)."""
        if not self._helpers:
            features = {**self._features, "table_bits": 4}  # a placeholder table, replaced by the shared one
            self._helpers = [PositionSolver(self.geometry, **features) for _ in range(self.threads - 1)]
            for helper in self._helpers:
                helper._tt = self._tt
            self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="position-solver")
        return [self, *self._helpers]

    def _run_threaded(self, solvers: list[PositionSolver], state, tasks: list, task) -> list:
        """``[task(solver, state_copy, item) for item in tasks]``, on the threads: each item goes to the next
        free solver, with that solver's own copy of the position's arrays (the search draws on them)."""
        free: queue.SimpleQueue = queue.SimpleQueue()
        for solver in solvers:
            free.put((solver, (state[0].copy(), state[1].copy(), state[2].copy(), state[3])))

        def run(item):
            solver, own = free.get()
            try:
                return task(solver, own, item)
            finally:
                free.put((solver, own))

        return list(self._pool.map(run, tasks))

    def _shared_search(self, budget: _Budget, solvers: list[PositionSolver], state, alpha: int, beta: int
                       ) -> int | None:
        """The fail-soft value of the position within ``(alpha, beta)``, searched by every thread at once on the
        shared table: each starts at the root, and at large nodes puts off the moves another thread is searching
        (``_SHARED``), so they spread over the tree and use each other's proofs. Once one has finished the others
        stop, and a finished thread's bound answers (each is a valid fail-soft bound). None if out of budget."""
        stop = threading.Event()
        local = _Budget(None, None, _THREAD_ROUND_NODES)
        local.nodes_left, local.deadline, local.stop = budget.nodes_left, budget.deadline, stop

        def task(solver, own, _):
            value = solver._bounded(local, own, -1, alpha, beta, shared=True)
            if value is not None:
                stop.set()
            return value

        values = self._run_threaded(solvers, state, list(range(len(solvers))), task)
        budget.spend(local.nodes_used)
        found = [v for v in values if v is not None]
        return found[0] if found else None

    # public ----------------------------------------------------------------------------------------------

    def value(self, lines, max_nodes: int | None = None, time_limit: float | None = None, *, guess: int = 0,
              stats: dict | None = None, log=None) -> int | None:
        """The exact value of a position (bool ``[L]`` drawn lines), None if the budget ran out.

        ``guess``: the first null-window threshold (the closer to the value, the fewer searches); ``stats``,
        when given, receives ``nodes``; ``log(threshold, bound, nodes)`` is called after each null-window
        search (the bound is ``>= threshold`` when the value is, else an upper bound; None out of budget).
        """
        state = self._position(lines)
        budget = _Budget(max_nodes, time_limit)
        value, _ = self._root_value(budget, state, guess, log)
        if stats is not None:
            stats["nodes"] = budget.nodes_used
        return value

    def solve(
        self,
        lines,
        margin: int = 0,
        *,
        move_values: bool = False,
        result_moves: bool = True,
        max_nodes: int | None = None,
        time_limit: float | None = None,
    ) -> PositionSolution:
        """Solves a position: its value, best-margin and best-result moves (and every move's value).

        Args:
          lines: bool ``[L]``, the drawn lines.
          margin: the score so far, the mover's boxes minus the opponent's.
          move_values: also compute the exact value of every move (needed for margin losses; costlier).
          result_moves: also prove the best-result moves (False: ``best_result_moves`` is None, which saves the
            extra searches of a won position when only a best-margin move is wanted).
          max_nodes, time_limit: the budget (None: unlimited). Out of budget, ``finished`` is False.
        """
        start = time.perf_counter()
        budget = _Budget(max_nodes, time_limit)
        state = self._position(lines)
        remaining = state[3]
        legal = state[0] == 0
        moves = np.flatnonzero(legal)

        def result(finished, value=None, best_margin=None, best_result=None, values=None):
            return PositionSolution(finished, value, int(margin), best_margin, best_result, values,
                                    budget.nodes_used, time.perf_counter() - start)

        value, solvers = self._root_value(budget, state)
        if value is None:
            return result(False)
        if moves.size == 0:
            return result(True, 0, legal.copy(), legal.copy(), np.full(legal.shape, -128, np.int8))

        def each_move(search, items) -> list:
            """``[search(solver, state, move) for move in items]``: on this thread, or on every thread once
            the position has proved big enough for threads to pay."""
            nonlocal solvers
            items = [int(m) for m in items]
            if self.threads == 1 or len(items) < 2 or budget.nodes_used < _SEQUENTIAL_NODES // 4:
                return [search(self, state, m) for m in items]
            if solvers is None:
                solvers = self._thread_solvers()
            return self._run_threaded(solvers, state, items, search)

        if move_values:
            found = each_move(lambda solver, own, m: solver._exact(budget, own, m, value, -remaining, value), moves)
            if any(v is None for v in found):
                return result(False, value)
            values = np.full(legal.shape, -128, np.int8)
            values[moves] = found
            best_margin = values == value
            best_result = best_result_moves(values, legal, margin)
            return result(True, value, best_margin, best_result, values)
        found = each_move(lambda solver, own, m: solver._at_least(budget, own, m, value), moves)
        if any(ok is None for ok in found):
            return result(False, value)
        best_margin = np.zeros(legal.shape, bool)
        best_margin[moves] = found
        final = margin + value
        if not result_moves:
            return result(True, value, best_margin)
        if final > 0 and -margin + 1 < value:  # won: the moves that still win, possibly by less
            others = moves[~best_margin[moves]]
            found = each_move(lambda solver, own, m: solver._at_least(budget, own, m, 1 - margin), others)
            if any(ok is None for ok in found):
                return result(False, value, best_margin)
            best_result = best_margin.copy()
            best_result[others] = found
        elif final >= 0:
            best_result = best_margin.copy()  # a win by exactly one, or a draw: only the best margin keeps it
        else:
            best_result = legal.copy()  # lost whatever is played
        return result(True, value, best_margin, best_result)

    def prove_result(self, lines, margin: int = 0, *, order=None, guess: int = 1, time_limit: float | None = None,
                     max_nodes: int | None = None, round_nodes: int = PROOF_ROUND_NODES,
                     keeping_move: bool = True) -> ResultProof:
        """Proves the result class (win, draw or loss for the side to move), not the margin, and finds a line
        that keeps it: at most two null-window searches at the root, around the two class boundaries. The last
        that reached the proven class found a keeping line (the proof's own: the root's table entry's move).
        Where draws are possible the draw boundary is asked first, whatever the guess: its "yes" is cheap (any
        line that keeps a draw proves it), and a proof that then runs out of budget on the win boundary still
        returns its floor, a draw and a line that keeps it (``ResultProof.floor``; at a chain-rule root the rule's
        line; none where the root is a simple endgame, whose moves the table does not keep, or where the bounds alone
        settle the draw).
        It is checked (its subtree is in the table: a short search), the lines ``order``
        puts before it get ``WITNESS_LOOK_NODES`` each, and the first shown to keep the result is played, else the
        proof's own. Where no such line is known, one search per line in ``order``. Cheaper than ``solve``, which
        needs the exact value.

        Args:
          lines: bool ``[L]``, the drawn lines.
          margin: the score so far, the mover's boxes minus the opponent's.
          order: int ``[K]``, the caller's preference among the lines that keep the result, best first (e.g. by a
            network's policy). Its first legal line is also the search's first try at the root where the table has
            no move for it yet (``_suggest``). None: every legal line in line order.
          guess: the expected result (+1, 0 or -1; e.g. the sign of a network's value): where no draw is possible
            the two boundaries are one question (the boxes left fix the margin's parity), asked once at the
            boundary the guess points at; where one is, the draw boundary is tested first whatever the guess.
          time_limit, max_nodes: the budget (None: unlimited); time is checked every ``round_nodes`` nodes, so the
            round that proves the class may end past it: the checks of the line it found then get
            ``WITNESS_LOOK_NODES`` nodes past the budget (``_confirms``: one allowance for the floor's line, one for
            the result's).
          keeping_move: False: the class only, no line that keeps it (``move`` -1, no floor), e.g. for a leaf of a
            search, where only the class is used.
        """
        start = time.perf_counter()
        budget = _Budget(max_nodes, time_limit, round_nodes)
        state = self._position(lines)
        remaining, margin = state[3], int(margin)
        legal = state[0] == 0
        refuted = np.zeros(legal.shape, bool)
        if order is not None:
            preferred = [int(m) for m in np.asarray(order, np.int64) if 0 <= m < legal.size and legal[m]]
            if preferred:
                self._suggest(state, preferred[0])

        proven_after = None
        floor_move = _NO_MOVE  # a line proven to keep at least a draw, once the draw boundary is answered "yes"

        def proof(result, move=-1):
            if result is not None and (move >= 0 or result < 0 or not legal.any()):
                floor, kept = result, move
            else:  # the class, or the line that keeps it, was not found in budget: the draw proven, if it was
                floor, kept = (0, floor_move) if floor_move >= 0 else (None, _NO_MOVE)
            return ResultProof(result, int(move), refuted, margin, budget.nodes_used, time.perf_counter() - start,
                               proven_after, floor, int(kept))

        def at_least(threshold: int) -> bool | None:
            """Whether the position's value is ``>= threshold``, from the bounds alone where they decide."""
            if threshold <= -remaining:
                return True
            if threshold > remaining:
                return False
            return self._root_at_least(budget, state, threshold)

        wins_at, draws_at = 1 - margin, -margin  # the value at which the final margin is > 0, >= 0
        # The parity of the boxes left decides whether a draw is possible: without one the two boundaries are one
        # question, asked once at the boundary the guess picks, and its answer is both (asked again, a budget spent
        # by the round that answered would refuse it).
        draws_possible = (remaining + margin) % 2 == 0
        if not draws_possible:
            win = draw = at_least(wins_at if int(np.sign(guess)) > 0 else draws_at)
        else:
            draw = at_least(draws_at)
            if draw and legal.any() and keeping_move:
                floor_move = self._checked_witness(budget, state, draws_at)
            win = False if draw is False else (None if draw is None else at_least(wins_at))
        if win is None or draw is None:
            # Out of budget: the lines the table already proves below the boundary asked (the draw's where a draw
            # is proven) give the result up wherever it reaches that boundary. Where that is every line, the
            # position is proven below it: a loss.
            asked = wins_at if win is None and draw is None and not draws_possible and int(np.sign(guess)) > 0 \
                else draws_at
            refuted[:] = self._refuted_by_table(state, asked, legal)
            if not (legal.any() and refuted[legal].all()):
                return proof(None)
            refuted[:] = False
            proven_after = time.perf_counter() - start
            return proof(-1)
        result = 1 if win else (0 if draw else -1)
        proven_after = time.perf_counter() - start
        if result < 0 or not legal.any() or not keeping_move:
            return proof(result)
        target = wins_at if result > 0 else draws_at
        candidates = [int(m) for m in (np.flatnonzero(legal) if order is None else np.asarray(order, np.int64))
                      if 0 <= m < legal.size and legal[m]]
        witness = self._witness(state, target)
        if witness < 0 and result == 0:
            witness = floor_move  # the win question's fail-low may have replaced the root's entry
        if witness < 0 and len(rule_lines := self._rule_lines(state)) == 1:
            witness = rule_lines[0]  # a chain-rule root (the table does not keep it): its forced capture is best
        past = budget.allowance()  # the looks below share one allowance past a spent budget
        if witness in candidates:
            # The proof's own line keeps the result, and its subtree is in the table: checked first (a short
            # search), then the lines the caller prefers to it get a short look each (refuting one can cost as
            # much as the proof), and the first shown to keep the result is played, else the proof's own.
            keeps = self._confirms(budget, state, witness, target, allowance=past)
            if keeps:
                for move in candidates[:candidates.index(witness)]:
                    look = budget.sub_budget(WITNESS_LOOK_NODES)
                    preferred = self._at_least(look, state, move, target)
                    budget.spend(look.nodes_used)
                    if preferred:
                        return proof(result, move)
                    if preferred is False:
                        refuted[move] = True
                    if budget.exhausted():
                        break
                return proof(result, witness)
            if keeps is False:
                refuted[witness] = True
        for move in candidates:
            if refuted[move]:
                continue
            keeps = self._confirms(budget, state, int(move), target, allowance=past)
            if keeps is None:
                break
            if keeps:
                return proof(result, move)
            refuted[move] = True
        return proof(result)

    def keeps_result(self, lines, margin: int, move: int, result: int, *, time_limit: float | None = None,
                     max_nodes: int | None = None) -> bool | None:
        """Whether drawing ``move`` keeps at least the result class ``result`` (+1 a win, 0 a draw, -1 a loss) for
        the side to move (one null-window search; the table's proofs, e.g. of a ``prove_result`` of the same
        position, make it short). None when the budget ran out.

        Args:
          lines: bool ``[L]``, the drawn lines; move: an undrawn line.
          margin: the score so far, the mover's boxes minus the opponent's.
          result: the class to keep; time_limit, max_nodes: the budget (None: unlimited).
        """
        state = self._position(lines)
        if not 0 <= int(move) < state[0].size or state[0][int(move)]:
            raise ValueError(f"move {move} is not an undrawn line of this position")
        if int(result) < 0:
            return True
        threshold = (1 if int(result) > 0 else 0) - int(margin)
        return self._at_least(_Budget(max_nodes, time_limit, PROOF_ROUND_NODES), state, int(move), threshold)

    def _root_entry(self, state) -> tuple[int, int, int] | None:
        """``(lower, upper, move)`` of the root's table entry (``move``: a legal line, -1 for none), or None where
        the table holds none, or the root is a chain-rule or simple-endgame node (which the search never stores)."""
        lines, valence, keys, _ = state
        line_boxes, box_lines, _, _, sym_gather, partner, _ = self._tables
        forced, take, _, simple = move_ordering.chain_rule(lines, valence, line_boxes, box_lines)
        if forced >= 0 or take >= 0 or simple:
            return None
        sym = _canonical_symmetry(keys)
        table = self._tt[0]
        mask = _U64(table.shape[0] // 2 - 1)
        slot, lower, upper, canonical_move = _probe(table, keys[sym, 0], keys[sym, 1], mask)
        if slot < 0:
            return None
        move = _NO_MOVE
        if canonical_move >= 0:
            move = int(sym_gather[sym, canonical_move])
            if lines[move] and partner[move] >= 0:
                move = int(partner[move])  # the stored position had the other outer side of this corner drawn
            move = _NO_MOVE if lines[move] else move
        return int(lower), int(upper), move

    def _suggest(self, state, move: int) -> None:
        """Makes ``move`` the root's first try: a table entry with no bounds and ``move``, where the table holds no
        move for the root (one the search chose stays; an entry with bounds and no move keeps its bounds). A
        network's favourite line tried first saves nodes where it keeps the result; its favourite replies deeper
        down save none over the centre-first order (docs/lab/solver.md, "Threads that search one tree"). A line the
        pruned search leaves out (``move_ordering.dominated_lines``) gives way to the line of its chain or loop
        that the search keeps, which does at least as well: otherwise the search would never try it first."""
        lines, valence, keys, _ = state
        line_boxes, box_lines, _, sym_map, _, _, _ = self._tables
        forced, take, _, simple = move_ordering.chain_rule(lines, valence, line_boxes, box_lines)
        entry = self._root_entry(state)
        if forced >= 0 or take >= 0 or simple or (entry is not None and entry[2] >= 0):
            return  # the chain rule or the endgame values decide the root's moves; or the search has chosen one
        if self._flags & _PRUNE:  # a line the pruned search leaves out: the one it keeps in its chain or loop
            move = int(move_ordering.searched_line(move, lines, valence, line_boxes, box_lines))
        sym = _canonical_symmetry(keys)
        table = self._tt[0]
        mask = _U64(table.shape[0] // 2 - 1)
        _store(table, keys[sym, 0], keys[sym, 1], mask, np.int64(-127), np.int64(127),
               np.int64(sym_map[sym, move]), np.int64((lines == 0).sum()))

    def _refuted_by_table(self, state, threshold: int, legal: np.ndarray) -> np.ndarray:
        """bool ``[L]``: the ``legal`` lines that the table (and a search of at most ``TABLE_LOOK_NODES`` under
        each, through the forced captures that neither probe nor store) proves below ``threshold``: a proof that
        ran out leaves its finished subtrees there. A few milliseconds, outside any budget."""
        refuted = np.zeros(legal.shape, bool)
        for move in np.flatnonzero(legal):
            look = _Budget(TABLE_LOOK_NODES, None, TABLE_LOOK_NODES)
            refuted[move] = self._at_least(look, state, int(move), threshold) is False
        return refuted

    def _checked_witness(self, budget: _Budget, state, threshold: int) -> int:
        """The root move the last null-window search proved ``>= threshold`` (``_witness``; at a chain-rule root
        the rule's line that keeps it), checked by a short search (its subtree is in the table;
        ``WITNESS_LOOK_NODES`` at most, out of ``budget`` or past it where it is spent: ``_confirms``); -1 when
        none is known or the check did not confirm it."""
        witness = self._witness(state, threshold)
        past = budget.allowance()
        for line in [witness] if witness >= 0 else self._rule_lines(state):
            if self._confirms(budget, state, line, threshold, WITNESS_LOOK_NODES, allowance=past):
                return line
        return _NO_MOVE

    def _rule_lines(self, state) -> list[int]:
        """At a chain-rule root (which the table does not keep), the lines among which the rule finds a best one:
        its capture, or its take-or-decline pair; else none."""
        forced, take, decline, _ = move_ordering.chain_rule(state[0], state[1], self._tables[0], self._tables[1])
        return [int(forced)] if forced >= 0 else ([int(take), int(decline)] if take >= 0 else [])

    def _confirms(self, budget: _Budget, state, move: int, threshold: int, most: float = np.inf,
                  allowance: _Budget | None = None) -> bool | None:
        """Whether ``move`` keeps ``threshold``, for a line of a finished proof: a search on ``budget`` (``most`` nodes
        of it at most), and where the budget is spent, on ``allowance`` (``_Budget.allowance``: nodes past it; a new
        one unless several looks share one). Time is checked between rounds, so the round that finished the proof
        may end past the deadline, and what it proved must not be lost for want of a look. None if neither
        settles it."""
        look = budget.sub_budget(most)
        keeps = self._at_least(look, state, move, threshold)
        budget.spend(look.nodes_used)
        if keeps is None and budget.exhausted():
            allowance = allowance or budget.allowance()
            used = allowance.nodes_used
            keeps = self._at_least(allowance, state, move, threshold)
            budget.spend(allowance.nodes_used - used)
        return keeps

    def _witness(self, state, threshold: int) -> int:
        """A root move that the last null-window search proved ``>= threshold``: the root's table entry's move
        when its lower bound reaches ``threshold``, else -1 (none known)."""
        entry = self._root_entry(state)
        if entry is None or entry[0] < threshold:
            return _NO_MOVE
        return entry[2]

    def _root_at_least(self, budget: _Budget, state, threshold: int) -> bool | None:
        """Whether the position's value is ``>= threshold`` (one null-window search), None out of budget: on this
        thread, or when it is not proved within ``_SEQUENTIAL_NODES`` and there are threads, on all of them
        (``_shared_search``)."""
        if self.threads == 1:
            return self._at_least(budget, state, -1, threshold)
        first = budget.sub_budget(_SEQUENTIAL_NODES)
        value = self._bounded(first, state, -1, threshold - 1, threshold)
        budget.spend(first.nodes_used)
        if value is None and not budget.exhausted():
            value = self._shared_search(budget, self._thread_solvers(), state, threshold - 1, threshold)
        return None if value is None else value >= threshold

    def _root_value(self, budget: _Budget, state, guess: int = 0, log=None
                    ) -> tuple[int | None, list[PositionSolver] | None]:
        """``(value, solvers)``: the position's exact value (None out of budget; MTD(f) from ``guess``, ``log``
        as in ``_exact``), on this thread, or when it is not proved within ``_SEQUENTIAL_NODES`` and there are
        threads, by ``_shared_search`` on all of them (``solvers``: theirs, else None)."""
        remaining = state[3]
        if self.threads == 1:
            return self._exact(budget, state, -1, guess, -remaining, remaining, log), None
        first = budget.sub_budget(_SEQUENTIAL_NODES)
        value = self._exact(first, state, -1, guess, -remaining, remaining)
        budget.spend(first.nodes_used)
        if value is not None or budget.exhausted():
            return value, None
        solvers = self._thread_solvers()
        value = self._exact(budget, state, -1, guess, -remaining, remaining, log,
                            bounded=lambda alpha, beta: self._shared_search(budget, solvers, state, alpha, beta))
        return value, solvers


@dataclasses.dataclass(frozen=True)
class ResultProof:
    """The outcome of ``PositionSolver.prove_result``: the result class, not the margin. ``L`` lines.

    Attributes:
      result: +1 when the side to move wins under perfect play (final margin > 0, the score so far included),
        0 a draw, -1 a loss; None when the budget ran out before it was proven.
      move: a legal line that keeps ``result`` (``prove_result`` says which); -1 when none is
        proven: out of budget, no legal line, or a lost position (every line keeps a loss).
      refuted: bool ``[L]``, the legal lines proven not to keep ``result`` (each gives up at least one class).
        With ``result`` None: the lines proven below the boundary the proof was asking when it ran out (below a
        draw where a draw is proven), which give the result up wherever it reaches that boundary.
      margin: the score so far, the mover's boxes minus the opponent's (as given).
      nodes: search nodes visited; seconds: wall-clock time; class_seconds: the wall-clock time at which the
        result was proven (None if it was not), before the search for a keeping line.
      floor: the best result class known to be kept by a known line: ``result`` when it and a keeping ``move``
        are proven (or it is a loss), else 0 where the draw boundary was answered "yes" with a keeping line but
        the win boundary, or a line that keeps a win, was not settled in budget; else None.
      floor_move: a legal line that keeps at least ``floor`` (``move`` when that is ``result``'s); -1 when none is
        known (and for a loss).
    """

    result: int | None
    move: int
    refuted: np.ndarray
    margin: int
    nodes: int
    seconds: float
    class_seconds: float | None = None
    floor: int | None = None
    floor_move: int = -1


def best_result_moves(values: np.ndarray, legal: np.ndarray, margin) -> np.ndarray:
    """bool ``[..., L]``: the legal moves whose final result ``sign(margin + value)`` is the best one."""
    result = np.where(legal, np.sign(np.asarray(margin)[..., None] + values.astype(np.int32)), -2)
    return legal & (result == result.max(axis=-1, keepdims=True))


def compile_kernels(geometry: BoardGeometry) -> None:
    """Runs every search path of the position solver once, briefly, so that numba compiles their kernels here
    (seconds on a machine's first run) and not inside a timed solve: the exact search near the full board, the
    result proof with its line search, the threads' shared search from the empty board within a few thousand
    nodes, and the host's probe and store (a proof's own line, the root's first try). On throwaway solvers with a
    tiny table; the kernels serve every solver of the process."""
    almost_full = np.ones(geometry.num_lines, bool)
    almost_full[0] = False
    solver = PositionSolver(geometry, table_bits=4, threads=2)
    solver.solve(almost_full, result_moves=False)
    two_left = almost_full.copy()
    two_left[-1] = False
    for guess in (1, 0, -1):
        solver.prove_result(two_left, 0, order=np.arange(geometry.num_lines), guess=guess)
    empty = solver._position(np.zeros(geometry.num_lines, bool))
    solver._shared_search(_Budget(1 << 12, None, 1 << 10), solver._thread_solvers(), empty, -1, 0)
    solver._witness(empty, 0)  # the table probe for a proof's own line, from the host
    solver._suggest(empty, 0)  # and the store of the root's first try
    move_ordering.searched_line(0, *empty[:2], *solver._tables[:2])  # which may map a pruned line (not here)
    solver._pool.shutdown()


def solver_refusal(geometry: BoardGeometry) -> str | None:
    """Why the solver cannot take ``geometry`` (more than ``MAX_SOLVER_LINES`` lines), naming the board and the
    limit; None when it can."""
    if geometry.num_lines <= MAX_SOLVER_LINES:
        return None
    return (f"the position solver takes boards of at most {MAX_SOLVER_LINES} lines, and {geometry.name} has "
            f"{geometry.num_lines}")


def default_threads() -> int:
    """The threads of a solve where a user waits: every core, at most ``_MAX_DEFAULT_THREADS``."""
    return max(1, min(os.cpu_count() or 1, _MAX_DEFAULT_THREADS))


@functools.lru_cache(maxsize=4)
def default_solver(geometry: BoardGeometry) -> PositionSolver:
    """One shared ``PositionSolver`` per board, on ``default_threads()`` threads (its tables are reused by every
    call)."""
    return PositionSolver(geometry, threads=default_threads())


def solve_position(geometry: BoardGeometry, lines, margin: int = 0, **kwargs) -> PositionSolution:
    """``default_solver(geometry).solve(lines, margin, **kwargs)``; see ``PositionSolver.solve``."""
    return default_solver(geometry).solve(lines, margin, **kwargs)
