"""The exact value of a simple endgame (only chains and loops left) by its defining recursion: the one place
it is computed, in numba, for the searches' leaves and for the host.

``v(G)`` is the controller's net margin over the remaining boxes with optimal play from the start of a simple
endgame ``G``; the player to move (the opener) ends with ``margin - v(G)``. With ``r = v(G - C)`` (Berlekamp
2000; Niu et al., "BoxesZero: An Efficient and Computationally Frugal Dots-and-Boxes Agent", 2025):

    open a 1- or 2-chain (a 2-chain by its middle line):  a - r
    open a chain of length a >= 3:                         a - 2 + |2 - r|
    open a loop of length a >= 4:                          a - 4 + |4 - r|

and ``v(G)`` is the minimum over the components ``C``.

* ``endgame_recursion``: the recursion on sorted component codes (a chain of ``a`` boxes is ``a``, a loop
  ``loop_code + a``), memoised in a direct-mapped cache of plain arrays (``new_memo``) that persists between
  positions;
* ``simple_endgame_value``: ``v(G)`` of a board in the kernels' layout (``dabjax.solvers.board_kernels``),
  the leaf value of the position solver (``simple_endgame_value_in``: with its scratch passed in) and of the
  alpha-beta agent;
* ``endgame_value``: ``v(G)`` for chains and loops given by their lengths, on the host.

The jitted search does not call it: it uses the dynamic programme of ``dabjax.game.endgame``, whose premises
and values tests/endgame_checks.py compares with this recursion.
"""

from __future__ import annotations

import functools
from typing import Iterable

import numpy as np
from numba import njit

from dabjax.solvers.board_kernels import walk_component

MAX_COMPONENTS = 32  # Memo keys: 4 words of 8 codes of 8 bits.
_KEY_WORDS = 4
MEMO_BITS = 16  # the endgame memo's entries: 2**16 (a 5x5 solve meets a few thousand simple endgames)
_MEMO_EMPTY = np.iinfo(np.int64).min  # a free memo slot's value (values are margins, |v| <= 255)
_HOST_LOOP_CODE = 128  # host codes: a chain of a boxes is a (< 128), a loop 128 + a (< 256)


@njit(cache=True)
def open_value(code, loop_code, rest):
    """The controller's margin when the opener opens component ``code`` and ``v(G - C) = rest``."""
    if code > loop_code:  # a loop of length code - loop_code
        return code - loop_code - 4 + abs(4 - rest)
    if code >= 3:
        return code - 2 + abs(2 - rest)
    return code - rest


@njit(cache=True)
def _key_word(codes, count, word):
    """Word ``word`` of the memo key of ``codes[:count]``: codes ``8 * word`` to ``8 * word + 7``, 8 bits each
    (scalars rather than an array of words: the key is built at every leaf, and allocates nothing)."""
    packed = np.int64(0)
    for i in range(8 * word, min(count, 8 * word + 8)):
        packed |= np.int64(codes[i]) << np.int64(8 * (i % 8))
    return packed


@njit(cache=True, inline='always')
def _memo_slot(w0, w1, w2, w3, size):
    """The memo slot of a key (``size`` a power of two): its words mixed by odd multipliers (int64 products
    wrap), the high bits folded down."""
    mixed = (w0 * np.int64(-7046029254386353131)) ^ (w1 * np.int64(-4658895280553007687)) ^ (
        w2 * np.int64(-7723592293110705685)) ^ (w3 * np.int64(-2685821657736338717))
    mixed ^= mixed >> np.int64(29)
    return mixed & np.int64(size - 1)


@njit(cache=True)
def endgame_recursion(codes, count, loop_code, memo):
    """v(G) for the sorted component codes ``codes[:count]`` (at most ``MAX_COMPONENTS``): a chain of ``a``
    boxes is ``a``, a loop ``loop_code + a`` (``loop_code`` at least the longest chain, every code below 256).
    ``memo`` (``new_memo``) must only ever see one ``loop_code``. Allocates nothing: the position solver calls
    it from code compiled without numba's reference counting."""
    if count == 0:
        return 0
    keys, values, rests = memo
    w0, w1 = _key_word(codes, count, 0), _key_word(codes, count, 1)
    w2, w3 = _key_word(codes, count, 2), _key_word(codes, count, 3)
    slot = _memo_slot(w0, w1, w2, w3, values.shape[0])
    if (values[slot] != _MEMO_EMPTY and keys[slot, 0] == w0 and keys[slot, 1] == w1 and keys[slot, 2] == w2
            and keys[slot, 3] == w3):
        return values[slot]
    best = 1 << 20
    rest = rests[count]  # one row per depth: the recursion below uses rows < count
    for i in range(count):
        if i > 0 and codes[i] == codes[i - 1]:
            continue  # the same component type: the same option
        n = 0
        for j in range(count):
            if j != i:
                rest[n] = codes[j]
                n += 1
        value = open_value(codes[i], loop_code, endgame_recursion(rest, count - 1, loop_code, memo))
        if value < best:
            best = value
    # a direct-mapped cache: a colliding key replaces the entry, which is only ever recomputed
    keys[slot, 0], keys[slot, 1], keys[slot, 2], keys[slot, 3] = w0, w1, w2, w3
    values[slot] = best
    return best


@njit(cache=True)
def simple_endgame_value(lines, valence, line_boxes, box_lines, memo):
    """v(G) of a simple endgame: every unclaimed box has two undrawn sides and none can be captured. Codes
    loops after ``B`` (the number of boxes), so ``memo`` serves one board size."""
    num_boxes = valence.shape[0]
    return simple_endgame_value_in(lines, valence, line_boxes, box_lines, memo, np.zeros(num_boxes, np.uint8),
                                   np.empty(num_boxes + 1, np.int64), np.empty(num_boxes, np.int64))


@njit(cache=True)
def simple_endgame_value_in(lines, valence, line_boxes, box_lines, memo, seen, path, codes):
    """``simple_endgame_value`` with its scratch passed in (``seen`` ``[B]``, ``path`` int64 ``[B + 1]``,
    ``codes`` int64 ``[B]``), so that the position solver, which calls it at its leaves, allocates nothing."""
    num_boxes = valence.shape[0]
    seen[:] = 0
    count = 0
    for start in range(num_boxes):
        if valence[start] != 2 or seen[start]:
            continue
        size, is_loop, _, _, _ = walk_component(start, lines, valence, line_boxes, box_lines, path, seen)
        code = size + num_boxes if is_loop else size
        i = count  # insertion sort: a handful of components
        while i > 0 and codes[i - 1] > code:
            codes[i] = codes[i - 1]
            i -= 1
        codes[i] = code
        count += 1
    if count > MAX_COMPONENTS:
        raise ValueError("simple endgame with too many components for the memo key")
    return endgame_recursion(codes, count, num_boxes, memo)


def new_memo(bits: int = MEMO_BITS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty memo for ``endgame_recursion``, reusable across positions: ``(keys int64 [2**bits, 4],
    values int64 [2**bits], rests int64 [MAX_COMPONENTS + 1, MAX_COMPONENTS])``, a direct-mapped cache of
    component codes -> value (``rests``: the recursion's scratch, a row per depth). Plain arrays, not a numba
    dict: a dict needs numba's reference counting, which the position solver's recursion is compiled
    without. 2**16 entries take 2.6 MB."""
    size = 1 << int(bits)
    return (np.zeros((size, _KEY_WORDS), np.int64), np.full(size, _MEMO_EMPTY, np.int64),
            np.zeros((MAX_COMPONENTS + 1, MAX_COMPONENTS), np.int64))


# --- the host: components given by their lengths ---------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _host_memo():
    return new_memo()  # one for every host call: they all code loops after _HOST_LOOP_CODE


def endgame_value(chains: Iterable[int], loops: Iterable[int] = ()) -> int:
    """v(G) by the defining recursion, for chains and loops given by their lengths (at most ``MAX_COMPONENTS``
    components of at most 127 boxes; memoised across calls)."""
    chains, loops = tuple(sorted(int(a) for a in chains)), tuple(sorted(int(a) for a in loops))
    if any(a < 1 for a in chains):
        raise ValueError(f"chain lengths must be >= 1, got {chains}")
    if any(a < 4 for a in loops):
        raise ValueError(f"loop lengths must be >= 4, got {loops}")
    if any(a >= _HOST_LOOP_CODE for a in chains + loops) or len(chains) + len(loops) > MAX_COMPONENTS:
        raise ValueError(f"at most {MAX_COMPONENTS} components of at most {_HOST_LOOP_CODE - 1} boxes, got "
                         f"chains {chains} and loops {loops}")
    codes = np.array(chains + tuple(_HOST_LOOP_CODE + a for a in loops), np.int64)  # sorted: chains first
    return int(endgame_recursion(codes, len(codes), _HOST_LOOP_CODE, _host_memo()))
