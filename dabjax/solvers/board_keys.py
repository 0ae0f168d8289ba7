"""Position keys kept up to date while the kernels draw and undraw lines (numba).

A position's keys are ``keys`` uint64 ``[S, 2]``: the 128-bit key of the drawn lines under each of the
board's ``S`` symmetries (``S = 0`` when no transposition table is used), the bits of ``kernel_tables``'
``sym_bits``; the smallest of them names the position up to symmetry.

* ``draw`` / ``undraw``: play and take back a line, keys of the lines themselves.
* ``draw_keyed`` / ``undraw_keyed`` (with ``corner_tables``): keys that identify the position also up to
  swapping the two outer sides of a box with exactly two sides on the edge of the board (a corner box): both
  are strings from the same coin to the ground, so the two positions are the same game.
* ``toggle_key``, ``position_keys``: one line's update of those keys, and the keys of a whole position;
  ``canonical_key_after``: the canonical key one line later, for probing a child without drawing it.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from dabjax.game.geometry import BoardGeometry
from dabjax.solvers.board_kernels import MAX_KERNEL_LINES, kernel_tables, set_line, unset_line

_U64 = np.uint64


@njit(cache=True)
def draw(line, lines, valence, keys, line_boxes, sym_bits):
    """Draws ``line``; returns the number of boxes it completes. Updates valences and symmetric keys."""
    gained = set_line(line, lines, valence, line_boxes)
    for s in range(keys.shape[0]):
        keys[s, 0] ^= sym_bits[s, line, 0]
        keys[s, 1] ^= sym_bits[s, line, 1]
    return gained


@njit(cache=True)
def undraw(line, lines, valence, keys, line_boxes, sym_bits):
    """Undoes ``draw``."""
    unset_line(line, lines, valence, line_boxes)
    for s in range(keys.shape[0]):
        keys[s, 0] ^= sym_bits[s, line, 0]
        keys[s, 1] ^= sym_bits[s, line, 1]


# --- keys up to corner swaps ---------------------------------------------------------------------------


@njit(cache=True, inline='always')
def toggle_key(line, lines, keys, sym_bits, partner, spare):
    """Updates ``keys`` for drawing or undrawing ``line`` (the same update both ways). A line with a
    ``partner`` (the other outer side of its corner box) is counted, not named: one of the pair drawn is
    the pseudo-line ``spare[line]``, both drawn are the two lines themselves."""
    p = partner[line]
    if p < 0:
        for s in range(keys.shape[0]):
            keys[s, 0] ^= sym_bits[s, line, 0]
            keys[s, 1] ^= sym_bits[s, line, 1]
        return
    q = spare[line]
    if lines[p]:
        for s in range(keys.shape[0]):
            keys[s, 0] ^= sym_bits[s, q, 0] ^ sym_bits[s, line, 0] ^ sym_bits[s, p, 0]
            keys[s, 1] ^= sym_bits[s, q, 1] ^ sym_bits[s, line, 1] ^ sym_bits[s, p, 1]
    else:
        for s in range(keys.shape[0]):
            keys[s, 0] ^= sym_bits[s, q, 0]
            keys[s, 1] ^= sym_bits[s, q, 1]


@njit(cache=True, inline='always')
def canonical_key_after(line, lines, keys, sym_bits, partner, spare):
    """The canonical key ``(low word, high word)`` (the smallest image, high word first) of the position after
    drawing undrawn ``line``: ``toggle_key``'s update, image by image, without copying or changing ``keys``."""
    p = partner[line]
    q = spare[line]
    best0, best1 = _U64(0), _U64(0)
    for s in range(keys.shape[0]):
        if p < 0:
            c0, c1 = keys[s, 0] ^ sym_bits[s, line, 0], keys[s, 1] ^ sym_bits[s, line, 1]
        elif lines[p]:
            c0 = keys[s, 0] ^ sym_bits[s, q, 0] ^ sym_bits[s, line, 0] ^ sym_bits[s, p, 0]
            c1 = keys[s, 1] ^ sym_bits[s, q, 1] ^ sym_bits[s, line, 1] ^ sym_bits[s, p, 1]
        else:
            c0, c1 = keys[s, 0] ^ sym_bits[s, q, 0], keys[s, 1] ^ sym_bits[s, q, 1]
        if s == 0 or c1 < best1 or (c1 == best1 and c0 < best0):
            best0, best1 = c0, c1
    return best0, best1


@njit(cache=True, inline='always')
def draw_keyed(line, lines, valence, keys, line_boxes, sym_bits, partner, spare):
    """``draw`` with keys up to corner swaps (``corner_tables``); returns the boxes completed."""
    gained = set_line(line, lines, valence, line_boxes)
    toggle_key(line, lines, keys, sym_bits, partner, spare)
    return gained


@njit(cache=True, inline='always')
def undraw_keyed(line, lines, valence, keys, line_boxes, sym_bits, partner, spare):
    """Undoes ``draw_keyed``."""
    unset_line(line, lines, valence, line_boxes)
    toggle_key(line, lines, keys, sym_bits, partner, spare)


@njit(cache=True, inline='always')
def mixed_key(k0, k1):
    """One well-mixed uint64 of a position's two key words, for a hash table's slot (splitmix64's finaliser)."""
    h = (k0 * _U64(0x9E3779B97F4A7C15)) ^ (k1 * _U64(0xC2B2AE3D27D4EB4F))
    h ^= h >> _U64(31)
    h *= _U64(0xBF58476D1CE4E5B9)
    h ^= h >> _U64(29)
    return h


@njit(cache=True)
def position_keys(lines, num_symmetries, sym_bits, partner, spare):
    """uint64 ``[S, 2]``: the keys of the drawn ``lines`` (as kept by ``draw_keyed``)."""
    keys = np.zeros((num_symmetries, 2), np.uint64)
    replay = np.zeros_like(lines)
    for line in range(lines.shape[0]):
        if lines[line]:
            toggle_key(line, replay, keys, sym_bits, partner, spare)
            replay[line] = 1
    return keys


@functools.lru_cache(maxsize=None)
def corner_tables(geometry: BoardGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(partner, spare, sym_bits)`` for ``draw_keyed``: ``partner`` int64 ``[L]``, the other outer side of
    the line's box when that box has exactly two sides on the edge of the board (else -1); ``spare`` int64
    ``[L]``, the pseudo-line (index ``>= L``) standing for "one of the pair drawn"; ``sym_bits`` uint64
    ``[S, L + P, 2]``, ``kernel_tables``' bits extended to the ``P`` pseudo-lines. No pairs (``P = 0``) when
    the key has no room for them (``L + P > 128``)."""
    line_boxes, box_lines, sym_bits = kernel_tables(geometry)[:3]
    num_lines = geometry.num_lines
    on_edge = (line_boxes < 0).any(axis=1)
    pairs = [tuple(int(x) for x in box_lines[box] if on_edge[x]) for box in range(geometry.num_boxes)]
    pairs = [pair for pair in pairs if len(pair) == 2]
    if num_lines + len(pairs) > MAX_KERNEL_LINES:
        pairs = []
    partner = np.full(num_lines, -1, np.int64)
    spare = np.full(num_lines, -1, np.int64)
    pair_of = {}
    for k, (a, b) in enumerate(pairs):
        partner[a], partner[b] = b, a
        spare[a] = spare[b] = num_lines + k
        pair_of[a] = pair_of[b] = k
    extended = np.zeros((sym_bits.shape[0], num_lines + len(pairs), 2), np.uint64)
    extended[:, :num_lines] = sym_bits
    for s in range(sym_bits.shape[0]):
        for k, (a, _) in enumerate(pairs):
            image = num_lines + pair_of[int(geometry.sym_line_map[s, a])]
            extended[s, num_lines + k, image // 64] = np.uint64(1) << np.uint64(image % 64)
    return partner, spare, extended
