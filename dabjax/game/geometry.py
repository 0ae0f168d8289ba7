"""Board geometry: line numbering, line/box incidence, the observation grid and symmetries.

Everything here is a NumPy constant built once per board size (``board_geometry`` is cached) and used as
a static table by the pure JAX functions of the environment, the endgame evaluator and the network.

Line numbering is OpenSpiel's ``dots_and_boxes`` numbering, for a board of ``rows x cols`` *boxes*:

* horizontal line ``(r, c)``, ``r in 0..rows``, ``c in 0..cols-1``: index ``r * cols + c``;
* vertical line ``(r, c)``, ``r in 0..rows-1``, ``c in 0..cols``: index ``(rows + 1) * cols + r * (cols + 1) + c``.

Box ``(r, c)`` has index ``r * cols + c``; its sides are the horizontal lines ``(r, c)`` (top) and
``(r + 1, c)`` (bottom) and the vertical lines ``(r, c)`` (left) and ``(r, c + 1)`` (right).

The observation grid has ``(2 * rows + 1) x (2 * cols + 1)`` cells: dot ``(r, c)`` sits at cell
``(2r, 2c)``, horizontal line ``(r, c)`` at ``(2r, 2c + 1)``, vertical line ``(r, c)`` at ``(2r + 1, 2c)``
and box ``(r, c)`` at ``(2r + 1, 2c + 1)``.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

MAX_SIDE = 9  # Largest supported side, in boxes; tables are tiny, the bound only keeps sizes sane.


@dataclasses.dataclass(frozen=True, eq=False)
class BoardGeometry:
    """Static tables of one board size. Hashable by ``(rows, cols)`` so it can be a jit static argument.

    Attributes (``L`` lines, ``B`` boxes, ``H x W`` grid, ``S`` symmetries):
      rows, cols: board size in boxes.
      num_lines: ``L = (rows + 1) * cols + rows * (cols + 1)``.
      num_boxes: ``B = rows * cols``.
      grid_shape: ``(H, W) = (2 * rows + 1, 2 * cols + 1)``.
      box_lines: int32 ``[B, 4]``, the sides of each box (top, bottom, left, right).
      line_boxes: int32 ``[L, 2]``, the boxes each line borders, ``-1`` padding for the edge of the board.
      line_box_valid: bool ``[L, 2]``, ``line_boxes >= 0``.
      line_is_horizontal: bool ``[L]``.
      line_rc: int32 ``[L, 2]``, the ``(r, c)`` coordinates of each line within its orientation.
      line_cells: int32 ``[L, 2]``, the grid cell ``(i, j)`` of each line.
      box_cells: int32 ``[B, 2]``, the grid cell of each box.
      cell_line: int32 ``[H, W]``, the line at each grid cell or ``-1``.
      cell_box: int32 ``[H, W]``, the box at each grid cell or ``-1``.
      line_neighbours: int32 ``[L, 6]``: the other sides of the boxes this line borders, ``-1`` padded.
      box_neighbours: int32 ``[B, 4]``: the box across each side of a box (order of ``box_lines``), ``-1``
        for the edge of the board.
      sym_line_gather: int32 ``[S, L]``; ``x_sym = x[sym_line_gather[k]]`` maps a per-line vector (lines,
        legal mask, policy) to its image under symmetry ``k``. Symmetry 0 is the identity.
      sym_box_gather: int32 ``[S, B]``, the same for per-box vectors.
      sym_cell_gather: int32 ``[S, H * W]``, the same for a flattened grid.
      sym_line_map: int32 ``[S, L]``; line ``l`` is mapped to line ``sym_line_map[k, l]`` (the inverse of
        the gather), so an action ``a`` becomes ``sym_line_map[k, a]``.
      sym_names: names of the symmetries.
    """

    rows: int
    cols: int
    num_lines: int
    num_boxes: int
    grid_shape: tuple[int, int]
    box_lines: np.ndarray
    line_boxes: np.ndarray
    line_box_valid: np.ndarray
    line_is_horizontal: np.ndarray
    line_rc: np.ndarray
    line_cells: np.ndarray
    box_cells: np.ndarray
    cell_line: np.ndarray
    cell_box: np.ndarray
    line_neighbours: np.ndarray
    box_neighbours: np.ndarray
    sym_line_gather: np.ndarray
    sym_box_gather: np.ndarray
    sym_cell_gather: np.ndarray
    sym_line_map: np.ndarray
    sym_names: tuple[str, ...]

    @property
    def num_symmetries(self) -> int:
        return len(self.sym_names)

    @property
    def name(self) -> str:
        return f"{self.rows}x{self.cols}"

    def __hash__(self) -> int:
        return hash((self.rows, self.cols))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, BoardGeometry)
            and (self.rows, self.cols) == (other.rows, other.cols)
        )

    def __repr__(self) -> str:
        return f"BoardGeometry({self.rows}x{self.cols}, lines={self.num_lines}, boxes={self.num_boxes})"

    def h_line(self, r: int, c: int) -> int:
        """Index of horizontal line ``(r, c)``."""
        return r * self.cols + c

    def v_line(self, r: int, c: int) -> int:
        """Index of vertical line ``(r, c)``."""
        return (self.rows + 1) * self.cols + r * (self.cols + 1) + c

    def line_name(self, line: int) -> str:
        """OpenSpiel-style name of a line, e.g. ``h 0 1`` or ``v 2 0``."""
        r, c = self.line_rc[line]
        return f"{'h' if self.line_is_horizontal[line] else 'v'} {r} {c}"


def parse_board_size(text: str) -> tuple[int, int]:
    """Parses ``"3x3"`` or ``"2x4"`` (rows x cols, in boxes). Raises ValueError on anything else."""
    parts = str(text).lower().replace(" ", "").split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"board size {text!r} is not of the form RxC, e.g. '3x3' (counted in boxes)")
    return int(parts[0]), int(parts[1])


def _grid_transforms(height: int, width: int, square: bool):
    """Symmetries of the grid as functions (i, j) -> (i', j'). Only shape-preserving ones."""
    h, w = height - 1, width - 1
    transforms = [
        ("identity", lambda i, j: (i, j)),
        ("flip_rows", lambda i, j: (h - i, j)),  # mirror top <-> bottom
        ("flip_cols", lambda i, j: (i, w - j)),  # mirror left <-> right
        ("rotate_180", lambda i, j: (h - i, w - j)),
    ]
    if square:
        transforms += [
            ("transpose", lambda i, j: (j, i)),
            ("anti_transpose", lambda i, j: (w - j, h - i)),
            ("rotate_90", lambda i, j: (j, h - i)),
            ("rotate_270", lambda i, j: (w - j, i)),
        ]
    return transforms


@functools.lru_cache(maxsize=None)
def board_geometry(rows: int, cols: int) -> BoardGeometry:
    """The geometry of a ``rows x cols`` boxes board, built once per size."""
    if not (isinstance(rows, (int, np.integer)) and isinstance(cols, (int, np.integer))):
        raise ValueError(f"board size must be two integers, got rows={rows!r}, cols={cols!r}")
    rows, cols = int(rows), int(cols)
    if not (1 <= rows <= MAX_SIDE and 1 <= cols <= MAX_SIDE):
        raise ValueError(
            f"board size {rows}x{cols} is not supported: rows and cols (in boxes) must be in 1..{MAX_SIDE}"
        )
    num_h = (rows + 1) * cols
    num_lines = num_h + rows * (cols + 1)
    num_boxes = rows * cols
    height, width = 2 * rows + 1, 2 * cols + 1

    line_is_horizontal = np.arange(num_lines) < num_h
    line_rc = np.zeros((num_lines, 2), np.int32)
    line_cells = np.zeros((num_lines, 2), np.int32)
    cell_line = -np.ones((height, width), np.int32)
    for r in range(rows + 1):
        for c in range(cols):
            line = r * cols + c
            line_rc[line] = (r, c)
            line_cells[line] = (2 * r, 2 * c + 1)
    for r in range(rows):
        for c in range(cols + 1):
            line = num_h + r * (cols + 1) + c
            line_rc[line] = (r, c)
            line_cells[line] = (2 * r + 1, 2 * c)
    cell_line[line_cells[:, 0], line_cells[:, 1]] = np.arange(num_lines)

    box_lines = np.zeros((num_boxes, 4), np.int32)
    box_cells = np.zeros((num_boxes, 2), np.int32)
    cell_box = -np.ones((height, width), np.int32)
    for r in range(rows):
        for c in range(cols):
            box = r * cols + c
            box_lines[box] = (
                r * cols + c,
                (r + 1) * cols + c,
                num_h + r * (cols + 1) + c,
                num_h + r * (cols + 1) + c + 1,
            )
            box_cells[box] = (2 * r + 1, 2 * c + 1)
            cell_box[2 * r + 1, 2 * c + 1] = box

    line_boxes = -np.ones((num_lines, 2), np.int32)
    counts = np.zeros(num_lines, np.int32)
    for box in range(num_boxes):
        for line in box_lines[box]:
            line_boxes[line, counts[line]] = box
            counts[line] += 1
    line_box_valid = line_boxes >= 0

    line_neighbours = -np.ones((num_lines, 6), np.int32)
    for line in range(num_lines):
        others = [int(o) for b in line_boxes[line] if b >= 0 for o in box_lines[b] if o != line]
        line_neighbours[line, : len(others)] = others

    box_neighbours = -np.ones((num_boxes, 4), np.int32)
    for box in range(num_boxes):
        for side, line in enumerate(box_lines[box]):
            others = [b for b in line_boxes[line] if b >= 0 and b != box]
            box_neighbours[box, side] = others[0] if others else -1

    transforms = _grid_transforms(height, width, square=(rows == cols))
    num_sym = len(transforms)
    sym_line_map = np.zeros((num_sym, num_lines), np.int32)
    sym_box_map = np.zeros((num_sym, num_boxes), np.int32)
    sym_cell_map = np.zeros((num_sym, height * width), np.int32)
    for k, (_, f) in enumerate(transforms):
        for i in range(height):
            for j in range(width):
                i2, j2 = f(i, j)
                sym_cell_map[k, i * width + j] = i2 * width + j2
                if cell_line[i, j] >= 0:
                    sym_line_map[k, cell_line[i, j]] = cell_line[i2, j2]
                if cell_box[i, j] >= 0:
                    sym_box_map[k, cell_box[i, j]] = cell_box[i2, j2]

    def invert(maps: np.ndarray) -> np.ndarray:
        inverse = np.zeros_like(maps)
        for k in range(maps.shape[0]):
            inverse[k, maps[k]] = np.arange(maps.shape[1])
        return inverse

    tables = dict(
        box_lines=box_lines,
        line_boxes=line_boxes,
        line_box_valid=line_box_valid,
        line_is_horizontal=line_is_horizontal,
        line_rc=line_rc,
        line_cells=line_cells,
        box_cells=box_cells,
        cell_line=cell_line,
        cell_box=cell_box,
        line_neighbours=line_neighbours,
        box_neighbours=box_neighbours,
        sym_line_gather=invert(sym_line_map),
        sym_box_gather=invert(sym_box_map),
        sym_cell_gather=invert(sym_cell_map),
        sym_line_map=sym_line_map,
    )
    for array in tables.values():
        array.setflags(write=False)  # Shared by every caller: never mutate.
    return BoardGeometry(
        rows=rows,
        cols=cols,
        num_lines=num_lines,
        num_boxes=num_boxes,
        grid_shape=(height, width),
        sym_names=tuple(name for name, _ in transforms),
        **tables,
    )
