"""Whole-board retrograde solver: the exact value of every set of drawn lines of a small board.

The value of a position depends only on its drawn lines (boxes already claimed no longer matter), so a
board with ``L`` lines has ``2**L`` positions, indexed by the bitmask of drawn lines (bit ``l`` = line ``l``,
OpenSpiel numbering). ``table[mask]`` is the best net margin over the *remaining* boxes for the side to move:
its future boxes minus the opponent's future boxes, with perfect play by both.

Recurrence: ``table[all lines] = 0``; otherwise, over the undrawn lines ``l`` with ``k`` boxes completed by
``l``, ``table[mask] = max(k + table[child] if k > 0 else -table[child])`` (a completing move keeps the turn).

The table is computed level by level (level = number of drawn lines, from ``L`` down to 0) in vectorised
NumPy. A level is enumerated without sorting all ``2**L`` masks: a mask is split into a high and a low part
and level ``k`` is the union, over ``p``, of every high part with ``p`` bits times every low part with
``k - p`` bits. The 3x3 table (24 lines, 16 MiB) takes seconds; 3x4 (31 lines, 2 GiB) takes minutes and
needs about 3 GiB of memory. Tables are cached on disk (``DABJAX_CACHE_DIR`` or ``~/.cache/dabjax/solver``).
"""

from __future__ import annotations

import os
import pathlib
import tempfile

import numpy as np

from dabjax.game.geometry import BoardGeometry

MAX_TABLE_LINES = 31  # 3x4; 2**31 int8 entries = 2 GiB. Beyond that use the position solver.
TABLE_FORMAT_VERSION = 1  # Bump when the table layout or meaning changes: old cache files are ignored.
ILLEGAL = -128  # int8 marker for "no such move" in per-move value vectors.
_LOW_BITS = 16  # Bits of the low part of a mask in the level enumeration.
_CHUNK = 1 << 22  # Masks handled per vectorised step (bounds the temporaries to ~100 MB).


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


def _masks_by_popcount(num_bits: int) -> list[np.ndarray]:
    """``out[p]``: int64 array of every ``num_bits``-bit value with ``p`` bits set, ascending."""
    values = np.arange(1 << num_bits, dtype=np.int64)
    counts = np.bitwise_count(values)
    return [values[counts == p] for p in range(num_bits + 1)]


def _level_masks(num_lines: int, level: int):
    """Yields int64 arrays whose union is every ``num_lines``-bit mask with ``level`` bits set."""
    low_bits = min(num_lines, _LOW_BITS)
    high_bits = num_lines - low_bits
    lows = _masks_by_popcount(low_bits)
    highs = _masks_by_popcount(high_bits)
    for p in range(max(0, level - low_bits), min(level, high_bits) + 1):
        low = lows[level - p]
        high = highs[p] << low_bits
        rows_per_chunk = max(1, _CHUNK // len(low))
        for start in range(0, len(high), rows_per_chunk):
            yield (high[start : start + rows_per_chunk, None] | low[None, :]).reshape(-1)


def compute_table(geometry: BoardGeometry) -> np.ndarray:
    """int8 ``[2**L]``: the exact value of every position (see the module docstring). No caching."""
    _check_table_size(geometry)
    num_lines = geometry.num_lines
    completion = _completion_masks(geometry)
    table = np.zeros(1 << num_lines, np.int8)
    for level in range(num_lines - 1, -1, -1):
        for masks in _level_masks(num_lines, level):
            best = np.full(masks.shape, ILLEGAL, np.int16)
            for line in range(num_lines):
                bit = np.int64(1) << line
                child = masks | bit
                gained = np.zeros(masks.shape, np.int16)
                for m in completion[line]:
                    if m:
                        gained += (child & m) == m
                after = table[child].astype(np.int16)
                value = np.where(gained > 0, gained + after, -after)
                value[(masks & bit) != 0] = ILLEGAL  # line already drawn: not a move
                np.maximum(best, value, out=best)
            table[masks] = best.astype(np.int8)
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
