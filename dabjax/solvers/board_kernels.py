"""The board as the numba kernels hold it, and the one walk along its chains.

A board is ``lines`` uint8 ``[L]`` (1 = drawn) and ``valence`` int64 ``[B]`` (undrawn sides of each box), with
the incidence tables of ``kernel_tables``: ``line_boxes`` int64 ``[L, 2]`` (the boxes beside each line, -1 off
the board) and ``box_lines`` int64 ``[B, 4]``. The exact position solver (``dabjax.solvers.position_solver``)
and the alpha-beta agent (``dabjax.baselines.alphabeta``) search on it with

* ``dabjax.solvers.board_keys``: drawing and undrawing lines while keeping the position's keys;
* ``dabjax.solvers.move_ordering``: which moves to search and in what order (chain rules, pruned lines);
* ``dabjax.solvers.endgame_values``: the exact value of a simple endgame (chains and loops only).

Here: ``set_line`` / ``unset_line`` (draw a line, take it back), ``other_box`` / ``undrawn_side`` (neighbours),
``walk_chain`` (the walk along a run of boxes with two undrawn sides, which every kernel above uses) and
``walk_component`` (a whole chain or loop), and ``kernel_tables``.

The small kernels here and in the modules above are ``inline='always'``: the position solver's recursion,
compiled without reference counting, takes them into its own body (a call passes every array field by field,
and, with reference counting, counts each); measured, the larger ones (``move_ordering.move_score``,
``dominated_lines``) pay as well once they are counted nothing.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from dabjax.game.geometry import BoardGeometry

MAX_KERNEL_LINES = 128  # Keys are two 64-bit words.


@njit(cache=True, inline='always')
def set_line(line, lines, valence, line_boxes):
    """Marks ``line`` drawn and lowers its boxes' valences; returns the number of boxes it completes."""
    lines[line] = 1
    gained = 0
    for j in range(2):
        box = line_boxes[line, j]
        if box >= 0:
            valence[box] -= 1
            if valence[box] == 0:
                gained += 1
    return gained


@njit(cache=True, inline='always')
def unset_line(line, lines, valence, line_boxes):
    """Undoes ``set_line``."""
    lines[line] = 0
    for j in range(2):
        box = line_boxes[line, j]
        if box >= 0:
            valence[box] += 1


@njit(cache=True, inline='always')
def other_box(line, box, line_boxes):
    """The box on the other side of ``line`` from ``box`` (-1: the edge of the board)."""
    first = line_boxes[line, 0]
    return line_boxes[line, 1] if first == box else first


@njit(cache=True, inline='always')
def undrawn_side(box, excluded, lines, box_lines):
    """An undrawn side of ``box`` other than ``excluded`` (-1 if none)."""
    for k in range(4):
        side = box_lines[box, k]
        if lines[side] == 0 and side != excluded:
            return side
    return -1


# --- chains -----------------------------------------------------------------------------------------------


@njit(cache=True, inline='always')
def walk_chain(origin, side, lines, valence, line_boxes, box_lines, path):
    """Walks out of box ``origin`` through its undrawn line ``side``, then through every box with two undrawn
    sides it meets, leaving each by its other undrawn side, until the edge of the board, a box with another
    number of undrawn sides, or ``origin`` again (the walk went round a loop).

    Returns ``(passed, end)``: how many boxes with two undrawn sides the walk passed through, and where it
    stopped: -1 at the edge, else that box (``origin`` for a loop). ``path`` (int64, any length, 0 included)
    receives the lines crossed, as many as it holds: ``path[i]`` leads into the ``i``-th box passed,
    ``path[passed]`` into ``end``. It ends: the two-sided boxes form paths and cycles, and a walk can only
    enter a cycle where it starts.
    """
    passed = 0
    box = origin
    while True:
        if passed < path.shape[0]:
            path[passed] = side
        beyond = other_box(side, box, line_boxes)
        if beyond < 0 or beyond == origin or valence[beyond] != 2:
            return passed, beyond
        passed += 1
        side = undrawn_side(beyond, side, lines, box_lines)
        box = beyond


@njit(cache=True, inline='always')
def walk_component(start, lines, valence, line_boxes, box_lines, path, seen):
    """The chain or loop of boxes with two undrawn sides that holds ``start`` (one of them): ``walk_chain`` out
    of its first undrawn side, and, unless that went round a loop, out of its second. Marks its boxes in
    ``seen`` (uint8 ``[B]``).

    Returns ``(size, is_loop, inner, end0, end1)``: its boxes; whether it is a loop; how many of its lines
    ``path`` (int64 ``[>= B + 1]``) now holds, ``path[:inner]``: those between two of its boxes (every line of
    a loop); and a chain's two ends (-1 the edge, else the box with another number of undrawn sides; both
    ``start`` for a loop), ``path[inner]`` being the line from the chain into ``end1``.
    """
    first = undrawn_side(start, -1, lines, box_lines)
    passed0, end0 = walk_chain(start, first, lines, valence, line_boxes, box_lines, path)
    if end0 == start:
        size, is_loop, inner, end1 = passed0 + 1, True, passed0 + 1, start
    else:
        second = undrawn_side(start, first, lines, box_lines)
        passed1, end1 = walk_chain(start, second, lines, valence, line_boxes, box_lines, path[passed0:])
        size, is_loop, inner = 1 + passed0 + passed1, False, passed0 + passed1
    seen[start] = 1
    for i in range(inner):  # both boxes beside an inner line belong to the component
        seen[line_boxes[path[i], 0]] = 1
        seen[line_boxes[path[i], 1]] = 1
    return size, is_loop, inner, end0, end1


# --- host-side tables -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def kernel_tables(geometry: BoardGeometry) -> tuple[np.ndarray, ...]:
    """(line_boxes, box_lines, sym_bits uint64 [S, L, 2], sym_line_map, sym_line_gather) for the kernels.

    ``sym_bits[s, l]`` is the 128-bit key bit of line ``l``'s image under symmetry ``s`` (``board_keys``).
    """
    if geometry.num_lines > MAX_KERNEL_LINES:
        raise ValueError(
            f"board {geometry.name} has {geometry.num_lines} lines; the solver kernels handle at most "
            f"{MAX_KERNEL_LINES}"
        )
    sym_bits = np.zeros((geometry.num_symmetries, geometry.num_lines, 2), np.uint64)
    for s in range(geometry.num_symmetries):
        for line in range(geometry.num_lines):
            image = int(geometry.sym_line_map[s, line])
            sym_bits[s, line, image // 64] = np.uint64(1) << np.uint64(image % 64)
    return (
        np.ascontiguousarray(geometry.line_boxes, np.int64),
        np.ascontiguousarray(geometry.box_lines, np.int64),
        sym_bits,
        np.ascontiguousarray(geometry.sym_line_map, np.int64),
        np.ascontiguousarray(geometry.sym_line_gather, np.int64),
    )
