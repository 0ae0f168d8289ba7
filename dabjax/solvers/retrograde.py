"""Whole-board retrograde solver: the exact value of every set of drawn lines of a small board.

The value of a position depends only on its drawn lines (boxes already claimed no longer matter), so a
board with ``L`` lines has ``2**L`` positions, indexed by the bitmask of drawn lines (bit ``l`` = line ``l``,
OpenSpiel numbering). ``table[mask]`` is the best net margin over the *remaining* boxes for the side to move:
its future boxes minus the opponent's future boxes, with perfect play by both.

Recurrence: ``table[all lines] = 0``; otherwise, over the undrawn lines ``l`` with ``k`` boxes completed by
``l``, ``table[mask] = max(k + table[child] if k > 0 else -table[child])`` (a completing move keeps the turn).

A mask's children are larger masks, so one pass from the last mask down fills the table (numba,
``_fill_blocks``). The pass runs on every core: the masks are cut into blocks of ``2**20`` by their high bits,
and blocks whose high parts have the same number of bits depend on none of each other. The 3x3 table has 24
lines (16 MiB), 3x4 31 lines (2 GiB, and 2 GiB of memory to build; the times: docs/lab/solver.md, "Speeds"). Tables
are cached on disk (``DABJAX_CACHE_DIR`` or ``~/.cache/dabjax/solver``).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import threading

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from dabjax.game.geometry import BoardGeometry

MAX_TABLE_LINES = 31  # 3x4; 2**31 int8 entries = 2 GiB. Beyond that use the position solver.
TABLE_FORMAT_VERSION = 1  # Bump when the table layout or meaning changes: old cache files are ignored.
ILLEGAL = -128  # int8 marker for "no such move" in per-move value vectors.
_BLOCK_BITS = 20  # The parallel pass's blocks: 2**20 masks (1 MiB of table), 2**11 of them on 3x4.
# numba's workqueue threading layer, its fallback where OpenMP and TBB are missing, ends the process when two
# threads launch parallel work at once (a server answering two requests): one table is computed at a time.
_FILL_LOCK = threading.Lock()


def default_cache_dir() -> pathlib.Path:
    """``$DABJAX_CACHE_DIR`` if set, else ``~/.cache/dabjax/solver``."""
    env = os.environ.get("DABJAX_CACHE_DIR")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "dabjax" / "solver"


def position_key(lines) -> int:
    """The table index of one position: ``sum(2**l for drawn lines l)``. ``lines``: bool ``[L]``."""
    lines = np.asarray(lines)
    if lines.ndim != 1:
        raise ValueError(f"position_key takes one position (bool [L]), got shape {lines.shape}")
    return int(position_keys(lines[None])[0])


def position_keys(lines) -> np.ndarray:
    """int64 ``[N]``: the table indices of a batch of positions, ``lines`` bool ``[N, L]`` (``L <= 62``)."""
    lines = np.asarray(lines, dtype=bool)
    if lines.ndim != 2 or lines.shape[1] > 62:
        raise ValueError(f"position_keys takes bool [N, L] with L <= 62, got shape {lines.shape}")
    weights = np.left_shift(np.int64(1), np.arange(lines.shape[1], dtype=np.int64))
    return (lines.astype(np.int64) * weights).sum(axis=1)


def _check_table_size(geometry: BoardGeometry) -> None:
    if geometry.num_lines > MAX_TABLE_LINES:
        raise ValueError(
            f"board {geometry.name} has {geometry.num_lines} lines: a whole-board table is limited to "
            f"{MAX_TABLE_LINES} lines (2**{MAX_TABLE_LINES} bytes); use dabjax.solvers.position_solver.solve_position"
        )


def _completion_masks(geometry: BoardGeometry) -> np.ndarray:
    """int64 ``[L, 2]``: for each line, the side masks of its (up to two) boxes; 0 where there is no box.

    Drawing line ``l`` completes box ``j`` exactly when ``child & m == m`` for ``m = masks[l, j] != 0``.
    """
    masks = np.zeros((geometry.num_lines, 2), np.int64)
    for line in range(geometry.num_lines):
        for j, box in enumerate(geometry.line_boxes[line]):
            if box >= 0:
                masks[line, j] = sum(1 << int(s) for s in geometry.box_lines[box])
    return masks


@njit(cache=True, inline='always')
def _mask_value(table, mask, full, box_masks):
    """The value of ``mask`` from its children's (all larger masks, so already in ``table``): the best over
    the undrawn lines ``l`` of ``k + table[child]`` if ``l`` completes ``k > 0`` boxes, else ``-table[child]``.
    ``box_masks`` int64 ``[L, 2]``: ``_completion_masks`` with a never-drawn bit where a line has one box."""
    undrawn = full ^ mask
    best = -(1 << 20)
    while undrawn != 0:
        bit = undrawn & -undrawn
        undrawn ^= bit
        line = trailing_zeros(bit)
        child = mask | bit
        after = np.int64(table[child])
        first, second = box_masks[line, 0], box_masks[line, 1]
        gained = np.int64((child & first) == first) + np.int64((child & second) == second)
        value = gained + after if gained > 0 else -after
        if value > best:
            best = value
    return best


@njit(cache=True, parallel=True)
def _fill_blocks(table, highs, block_bits, full, box_masks):
    """Fills the blocks of ``table`` (int8 ``[2**L]``) whose high parts are ``highs`` int64 ``[N]``: each block
    is the ``2**block_bits`` masks that share a high part, filled from its last mask down. A mask's children
    are larger masks: in its own block, or in a block whose high part is a superset of its own, which must be
    filled already. The threads share the blocks out."""
    block_size = np.int64(1) << block_bits
    for i in prange(highs.shape[0]):
        start = highs[i] << block_bits
        for offset in range(block_size - 1, -1, -1):
            mask = start + offset
            table[mask] = 0 if mask == full else _mask_value(table, mask, full, box_masks)


def compute_table(geometry: BoardGeometry) -> np.ndarray:
    """int8 ``[2**L]``: the exact value of every position (see the module docstring). No caching."""
    _check_table_size(geometry)
    num_lines = geometry.num_lines
    box_masks = _completion_masks(geometry)
    box_masks[box_masks == 0] = np.int64(1) << 62  # a box no move completes: the line has one box
    table = np.empty(1 << num_lines, np.int8)
    block_bits = min(num_lines, _BLOCK_BITS)
    highs = np.arange(1 << (num_lines - block_bits), dtype=np.int64)
    high_counts = np.bitwise_count(highs)
    # Blocks whose high parts have the same number of bits depend on none of each other: one parallel pass
    # for each such level, from every high bit set down to none.
    with _FILL_LOCK:
        for level in range(num_lines - block_bits, -1, -1):
            _fill_blocks(table, highs[high_counts == level], block_bits, (np.int64(1) << num_lines) - 1,
                         box_masks)
    return table


def _cache_path(geometry: BoardGeometry, cache_dir) -> pathlib.Path:
    directory = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return directory / f"table_{geometry.name}_v{TABLE_FORMAT_VERSION}.npy"


def solve_table(geometry: BoardGeometry, cache_dir=None) -> np.ndarray:
    """int8 ``[2**L]``, the exact value of every position, loaded from the disk cache or computed and saved.

    Args:
      geometry: a board of at most ``MAX_TABLE_LINES`` lines.
      cache_dir: directory of the cache (default ``default_cache_dir()``). Tables over 64 MiB are
        memory-mapped read-only when loaded.
    """
    _check_table_size(geometry)
    path = _cache_path(geometry, cache_dir)
    if path.exists():
        table = np.load(path, mmap_mode="r" if geometry.num_lines > 26 else None)
        if table.shape == (1 << geometry.num_lines,) and table.dtype == np.int8:
            return table
    table = compute_table(geometry)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write to a temporary file and rename it: a crash or a concurrent writer never leaves a torn table.
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
        np.save(handle, table)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, path)
    return table


def move_values(geometry: BoardGeometry, table: np.ndarray, lines) -> np.ndarray:
    """int8 ``[..., L]``: the value for the mover of each move, ``ILLEGAL`` (-128) for drawn lines.

    ``lines``: bool ``[..., L]``. The value of move ``l`` is the mover's best net margin over the boxes
    remaining before the move: ``k + table[child]`` if ``l`` completes ``k > 0`` boxes, else ``-table[child]``.
    The position's value is the maximum over its moves.
    """
    lines = np.asarray(lines, dtype=bool)
    if lines.shape[-1] != geometry.num_lines:
        raise ValueError(f"lines has {lines.shape[-1]} entries, a {geometry.name} board has {geometry.num_lines}")
    flat = lines.reshape(-1, geometry.num_lines)
    keys = position_keys(flat)
    completion = _completion_masks(geometry)
    out = np.full(flat.shape, ILLEGAL, np.int8)
    for line in range(geometry.num_lines):
        child = keys | (np.int64(1) << line)
        gained = sum(((child & m) == m).astype(np.int16) for m in completion[line] if m)
        after = np.asarray(table[child]).astype(np.int16)
        value = np.where(gained > 0, gained + after, -after)
        out[:, line] = np.where(flat[:, line], ILLEGAL, value)
    return out.reshape(lines.shape)


def optimal_moves(geometry: BoardGeometry, table: np.ndarray, lines) -> tuple[np.ndarray, np.ndarray]:
    """``(value int8 [...], optimal bool [..., L])`` of positions ``lines`` bool ``[..., L]`` from the table.

    ``optimal`` marks the moves that keep the best net margin (all False at a finished position, value 0).
    """
    values = move_values(geometry, table, lines)
    best = values.max(axis=-1)
    finished = best == ILLEGAL
    best = np.where(finished, 0, best).astype(np.int8)
    return best, (values == best[..., None]) & ~finished[..., None]
