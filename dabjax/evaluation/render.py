"""Pictures of positions and games: SVG text (notebooks, the web page), PNG images, animated GIFs.

It draws the positions of a game record (``dabjax.game.record``: who drew each line, the last move). A
picture is first built as a ``Scene`` (dots, segments, rectangles and labels in pixel coordinates, a pure
function of the position), then written out as SVG text (``scene_svg``) or drawn by matplotlib into an RGBA
array (``scene_image``), so the SVG and the PNG/GIF show the same thing from one description. File writers
(``write_png``, ``write_gif``, ``write_frames``) are called by the shell (``evaluate.py arena --save-games``).
"""

from __future__ import annotations

import copy
import dataclasses
import html
import pathlib
from typing import Mapping, Sequence

import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.geometry import BoardGeometry
from dabjax.game.record import Position, replay

PLAYER_COLOURS = ("#1f6fb4", "#c8334a")  # player 0 (A) blue, player 1 (B) red
BOX_FILLS = ("#d2e3f3", "#f5d3d9")  # the same hues, light, behind claimed boxes
DOT_COLOUR = "#222222"
UNDRAWN_COLOUR = "#c9c9c9"
LAST_MOVE_HALO = "#ffc933"
TOP_MOVE_COLOUR = "#ef7d12"
EXACT_BEST_COLOUR = "#1a9641"  # analysis board: lines that keep the best result
EXACT_OTHER_COLOUR = "#c0392b"  # and the lines that lose it
TEXT_COLOUR = "#333333"
FONT_FAMILY = "DejaVu Sans, Verdana, Arial, sans-serif"  # DejaVu Sans is matplotlib's own: PNGs look alike

SPACING = 64  # pixels between neighbouring dots
MARGIN = 28
HEADER = 40  # the players' names and scores
FOOTER = 30  # whose turn it is, or the result
MIN_WIDTH = 320  # small boards are centred in a wider picture so the names fit
LINE_WIDTH = 6
HIT_WIDTH = 20  # the web page's click target across a line
DOT_RADIUS = 5.5
NAME_CHARS = 16  # longer player names are shortened with an ellipsis


# --- scenes ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Segment:
    """A stroke from ``(x1, y1)`` to ``(x2, y2)``. ``attrs`` are extra SVG attributes (``data-line`` etc.) that
    pictures ignore."""

    x1: float
    y1: float
    x2: float
    y2: float
    colour: str
    width: float
    dashed: bool = False
    opacity: float = 1.0
    attrs: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Rect:
    """A filled rectangle. ``hit``: an invisible click target (SVG only, for the web page)."""

    x: float
    y: float
    width: float
    height: float
    fill: str
    hit: bool = False
    attrs: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Dot:
    x: float
    y: float
    radius: float
    colour: str


@dataclasses.dataclass(frozen=True)
class Label:
    """Text centred vertically on ``y``; ``anchor`` is start, middle or end (SVG's text-anchor). ``halo``: a
    white outline, for text drawn over lines."""

    x: float
    y: float
    text: str
    colour: str
    size: float
    anchor: str = "middle"
    bold: bool = False
    halo: bool = False
    attrs: tuple[tuple[str, str], ...] = ()


Shape = Segment | Rect | Dot | Label


@dataclasses.dataclass(frozen=True)
class Scene:
    """A picture: ``width x height`` pixels and its shapes, painted in order."""

    width: float
    height: float
    shapes: tuple[Shape, ...]


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "\u2026"


def status_text(position: Position, names: Sequence[str] = notation.PLAYER_LABELS) -> str:
    """``"A to move"``, ``"A wins 3 - 1"`` or ``"draw 2 - 2"`` with the players' names."""
    state = position.state
    scores = [int(s) for s in state.scores]
    if bool(state.terminated):
        if scores[0] == scores[1]:
            return f"draw {scores[0]} - {scores[1]}"
        winner = 0 if scores[0] > scores[1] else 1
        return f"{names[winner]} wins {scores[winner]} - {scores[1 - winner]}"
    return f"{names[int(state.current_player)]} to move"


def board_scene(
    geometry: BoardGeometry,
    position: Position,
    names: Sequence[str] = notation.PLAYER_LABELS,
    top_moves: Mapping[int, float] | None = None,
    interactive: bool = False,
    captions: bool = True,
    exact: Mapping[int, tuple[int, bool]] | None = None,
) -> Scene:
    """The picture of ``position``: claimed boxes filled with their owner's colour and letter, drawn lines in
    the colour of the player who drew them, the last move haloed, the names and scores above and whose turn
    it is (or the result) below.

    ``names``: the players' names (player 0, player 1); each is shown with its letter A / B.
    ``top_moves``: ``{line: share}`` of an agent's search, drawn in orange with the share in percent.
    ``interactive``: adds an invisible click target over every line (``class="hit" data-line="k"``) for the
    web page; pictures leave them out.
    ``captions``: the names and scores above the board and the status below (the web page shows its own).
    ``exact``: ``{line: (final margin, best result)}`` of the analysis board: each legal line labelled with the
    final margin it keeps for the side to move (perfect play), best-result lines in green, the others in red.
    """
    state = position.state
    rows, cols = geometry.rows, geometry.cols
    header, footer = (HEADER, FOOTER) if captions else (0, 0)
    width = max(2 * MARGIN + cols * SPACING, MIN_WIDTH if captions else 0)
    height = header + 2 * MARGIN + rows * SPACING + footer
    left = (width - cols * SPACING) / 2
    top = header + MARGIN

    def dot(r, c):
        return left + c * SPACING, top + r * SPACING

    def ends(line):
        r, c = (int(v) for v in geometry.line_rc[line])
        return dot(r, c), (dot(r, c + 1) if geometry.line_is_horizontal[line] else dot(r + 1, c))

    # Shapes of a kind are kept together (boxes, then their letters, ...): raster images draw each run at once.
    shapes: list[Shape] = []
    inset = 4
    claimed = [(int(state.box_owner[box]), *dot(box // cols, box % cols))
               for box in range(geometry.num_boxes) if state.box_owner[box] >= 0]
    for owner, x, y in claimed:
        shapes.append(Rect(x + inset, y + inset, SPACING - 2 * inset, SPACING - 2 * inset, BOX_FILLS[owner]))
    for owner, x, y in claimed:
        shapes.append(Label(x + SPACING / 2, y + SPACING / 2, notation.PLAYER_LABELS[owner], PLAYER_COLOURS[owner],
                            22, bold=True))
    lines = np.asarray(state.lines, bool)
    for line in range(geometry.num_lines):
        (x1, y1), (x2, y2) = ends(line)
        if line == position.last_move:
            shapes.append(Segment(x1, y1, x2, y2, LAST_MOVE_HALO, LINE_WIDTH + 8, opacity=0.9))
        if lines[line]:
            drawer = int(position.drawer[line])
            shapes.append(Segment(x1, y1, x2, y2, PLAYER_COLOURS[drawer], LINE_WIDTH, attrs=(
                ("class", "line drawn"), ("data-line", str(line)), ("data-drawer", str(drawer)))))
        else:
            shapes.append(Segment(x1, y1, x2, y2, UNDRAWN_COLOUR, 2, dashed=True,
                                  attrs=(("class", "line"), ("data-line", str(line)))))
    if top_moves:
        best = max(top_moves.values())
        for line, share in top_moves.items():
            (x1, y1), (x2, y2) = ends(line)
            if not lines[line]:
                shapes.append(Segment(x1, y1, x2, y2, TOP_MOVE_COLOUR, LINE_WIDTH,
                                      opacity=0.3 + 0.7 * share / max(best, 1e-9)))
        for line, share in top_moves.items():
            (x1, y1), (x2, y2) = ends(line)
            horizontal = bool(geometry.line_is_horizontal[line])
            x, y = (x1 + x2) / 2 + (0 if horizontal else 9), (y1 + y2) / 2 - (11 if horizontal else 0)
            shapes.append(Label(x, y, f"{100 * share:.0f}%", TOP_MOVE_COLOUR, 12, "middle" if horizontal else "start",
                                bold=True, halo=True, attrs=(("class", "share"), ("data-line", str(line)))))
    if exact:
        for line, (final_margin, best) in exact.items():
            (x1, y1), (x2, y2) = ends(line)
            if not lines[line]:
                shapes.append(Segment(x1, y1, x2, y2, EXACT_BEST_COLOUR if best else EXACT_OTHER_COLOUR,
                                      LINE_WIDTH if best else 2, opacity=0.8 if best else 0.5))
        for line, (final_margin, best) in exact.items():
            (x1, y1), (x2, y2) = ends(line)
            horizontal = bool(geometry.line_is_horizontal[line])
            x, y = (x1 + x2) / 2 + (0 if horizontal else 9), (y1 + y2) / 2 - (11 if horizontal else 0)
            shapes.append(Label(x, y, f"{final_margin:+d}", EXACT_BEST_COLOUR if best else EXACT_OTHER_COLOUR, 12,
                                "middle" if horizontal else "start", bold=best, halo=True, attrs=(
                                    ("class", "exact"), ("data-line", str(line)), ("data-margin", str(final_margin)),
                                    ("data-best", "true" if best else "false"))))
    for r in range(rows + 1):
        for c in range(cols + 1):
            shapes.append(Dot(*dot(r, c), DOT_RADIUS, DOT_COLOUR))
    if interactive:
        gap, half = DOT_RADIUS + 3, HIT_WIDTH / 2  # the dots stay outside the click targets
        for line in range(geometry.num_lines):
            (x1, y1), _ = ends(line)
            length = SPACING - 2 * gap
            x, y, w, h = ((x1 + gap, y1 - half, length, HIT_WIDTH) if geometry.line_is_horizontal[line]
                          else (x1 - half, y1 + gap, HIT_WIDTH, length))
            shapes.append(Rect(x, y, w, h, "#000000", hit=True, attrs=(
                ("class", "hit"), ("data-line", str(line)), ("data-name", notation.move_name(geometry, line)))))
    if captions:
        scores = [int(s) for s in state.scores]
        for player, (x, anchor) in enumerate(((MARGIN / 2, "start"), (width - MARGIN / 2, "end"))):
            text = f"{notation.PLAYER_LABELS[player]} {_short(names[player])}: {scores[player]}"
            shapes.append(Label(x, HEADER / 2 + 4, text, PLAYER_COLOURS[player], 16, anchor, bold=True))
        status = f"{status_text(position, names)}  \u00b7  {int(state.num_moves)}/{geometry.num_lines} lines"
        shapes.append(Label(width / 2, height - FOOTER / 2 - 4, status, TEXT_COLOUR, 14))
    return Scene(float(width), float(height), tuple(shapes))


# --- SVG ------------------------------------------------------------------------------------------------


def _attributes(pairs) -> str:
    return "".join(f' {name}="{html.escape(str(value))}"' for name, value in pairs)


def _svg_shape(shape: Shape) -> str:
    if isinstance(shape, Segment):
        pairs = [("x1", f"{shape.x1:g}"), ("y1", f"{shape.y1:g}"), ("x2", f"{shape.x2:g}"), ("y2", f"{shape.y2:g}"),
                 ("stroke", shape.colour), ("stroke-width", f"{shape.width:g}"), ("stroke-linecap", "round")]
        if shape.opacity < 1:
            pairs.append(("stroke-opacity", f"{shape.opacity:.2f}"))
        if shape.dashed:
            pairs.append(("stroke-dasharray", "3 6"))
        return f"<line{_attributes(pairs + list(shape.attrs))}/>"
    if isinstance(shape, Rect):
        pairs = [("x", f"{shape.x:g}"), ("y", f"{shape.y:g}"), ("width", f"{shape.width:g}"),
                 ("height", f"{shape.height:g}"), ("fill", shape.fill), ("rx", "3")]
        if shape.hit:  # transparent but still hit by the pointer
            pairs += [("fill-opacity", "0"), ("pointer-events", "all")]
        return f"<rect{_attributes(pairs + list(shape.attrs))}/>"
    if isinstance(shape, Dot):
        pairs = [("cx", f"{shape.x:g}"), ("cy", f"{shape.y:g}"), ("r", f"{shape.radius:g}"), ("fill", shape.colour)]
        return f"<circle{_attributes(pairs)}/>"
    pairs = [("x", f"{shape.x:g}"), ("y", f"{shape.y:g}"), ("fill", shape.colour), ("font-size", f"{shape.size:g}"),
             ("text-anchor", shape.anchor), ("dominant-baseline", "central")]
    if shape.bold:
        pairs.append(("font-weight", "bold"))
    if shape.halo:
        pairs += [("stroke", "#ffffff"), ("stroke-width", "3"), ("paint-order", "stroke")]
    return f"<text{_attributes(pairs + list(shape.attrs))}>{html.escape(shape.text)}</text>"


def scene_svg(scene: Scene) -> str:
    """The scene as a standalone SVG document (a string; scales with CSS through its viewBox)."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{scene.width:g}" height="{scene.height:g}" '
            f'viewBox="0 0 {scene.width:g} {scene.height:g}" font-family="{FONT_FAMILY}">')
    background = f'<rect width="{scene.width:g}" height="{scene.height:g}" fill="#ffffff"/>'
    return "\n".join([head, background, *(_svg_shape(s) for s in scene.shapes), "</svg>"])


def board_svg(
    geometry: BoardGeometry,
    position: Position,
    names: Sequence[str] = notation.PLAYER_LABELS,
    top_moves: Mapping[int, float] | None = None,
    interactive: bool = False,
    captions: bool = True,
    exact: Mapping[int, tuple[int, bool]] | None = None,
) -> str:
    """``scene_svg(board_scene(...))``: see ``board_scene``."""
    return scene_svg(board_scene(geometry, position, names, top_moves, interactive, captions, exact))


# --- raster images (matplotlib) -------------------------------------------------------------------------


def scene_image(scene: Scene, scale: float = 1.0) -> np.ndarray:
    """uint8 ``[H, W, 4]``: the scene drawn by matplotlib (Agg), ``H, W`` = its size times ``scale``.

    Coordinates are the scene's pixels, one pixel one point (dpi 72 x ``scale``), so widths and font sizes
    mean what they mean in the SVG. Click targets are left out. Each run of consecutive segments, rectangles or
    dots is one matplotlib collection (an artist per line is far slower), painted in scene
    order.
    """
    import itertools

    from matplotlib import colors, patheffects
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle, FancyBboxPatch

    figure = Figure(figsize=(scene.width / 72, scene.height / 72), dpi=72 * scale, facecolor="white")
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, scene.width)
    axes.set_ylim(scene.height, 0)
    axes.set_axis_off()
    halo = [patheffects.withStroke(linewidth=3, foreground="white")]
    shapes = [s for s in scene.shapes if not (isinstance(s, Rect) and s.hit)]
    for order, (kind, run) in enumerate(itertools.groupby(shapes, type)):
        run = list(run)
        if kind is Label:
            for s in run:
                axes.text(s.x, s.y, s.text, color=s.colour, fontsize=s.size, zorder=order,
                          ha={"start": "left", "middle": "center", "end": "right"}[s.anchor], va="center_baseline",
                          fontweight="bold" if s.bold else "normal", family="DejaVu Sans",
                          path_effects=halo if s.halo else None)
            continue
        if kind is Segment:
            collection = LineCollection(
                [[(s.x1, s.y1), (s.x2, s.y2)] for s in run], colors=[colors.to_rgba(s.colour, s.opacity) for s in run],
                linewidths=[s.width for s in run], capstyle="round",
                linestyles=[(0, (3 / s.width, 6 / s.width)) if s.dashed else "solid" for s in run])
        elif kind is Rect:
            collection = PatchCollection(
                [FancyBboxPatch((s.x, s.y), s.width, s.height, "round,pad=0,rounding_size=3") for s in run],
                facecolors=[s.fill for s in run], edgecolors="none")
        else:
            collection = PatchCollection([Circle((s.x, s.y), s.radius) for s in run],
                                         facecolors=[s.colour for s in run], edgecolors="none")
        collection.set_zorder(order)
        axes.add_collection(collection, autolim=False)
    canvas.draw()
    return np.array(canvas.buffer_rgba())


def _rgb(image: np.ndarray):
    from PIL import Image

    return Image.fromarray(image[..., :3])


def write_png(path, scene: Scene, scale: float = 2.0) -> pathlib.Path:
    """Writes the scene as a PNG (``scale`` 2: crisp on high-density screens); returns the path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _rgb(scene_image(scene, scale)).save(path, optimize=True)
    return path


def game_scenes(
    geometry: BoardGeometry, positions: Sequence[Position], names: Sequence[str] = notation.PLAYER_LABELS
) -> list[Scene]:
    """One scene per position of a replayed game (``replay``)."""
    return [board_scene(geometry, position, names) for position in positions]


def write_gif(
    path, scenes: Sequence[Scene], seconds_per_move: float = 0.7, final_seconds: float = 3.0, scale: float = 1.0
) -> pathlib.Path:
    """Writes the scenes as an animated GIF (looping; the last frame held ``final_seconds``)."""
    if not scenes:
        raise ValueError("a GIF needs at least one frame")
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from PIL import Image

    images = [scene_image(scene, scale) for scene in scenes]
    # One palette for every frame, from the first, middle and last (between them they hold every colour): no
    # flicker between frames, and far faster than quantizing each frame on its own.
    sample = np.concatenate([images[0], images[len(images) // 2], images[-1]])
    palette = _rgb(sample).quantize(colors=64, method=Image.Quantize.FASTOCTREE)
    frames = [_rgb(image).quantize(palette=palette, dither=Image.Dither.NONE) for image in images]
    durations = [int(1000 * seconds_per_move)] * (len(frames) - 1) + [int(1000 * final_seconds)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=durations, loop=0, optimize=False)
    return path


def write_frames(directory, scenes: Sequence[Scene], scale: float = 1.0) -> list[pathlib.Path]:
    """Writes one PNG per scene, ``move-000.png`` (the empty board), ``move-001.png``, ...; returns the paths."""
    directory = pathlib.Path(directory)
    return [write_png(directory / f"move-{number:03d}.png", scene, scale) for number, scene in enumerate(scenes)]


# --- notebooks ------------------------------------------------------------------------------------------


class GamePicture:
    """A game record shown as a board in notebooks (IPython calls ``_repr_svg_``).

    ``moves``: the lines drawn from the empty board, in any notation; ``upto``: show the position after that
    many moves (default: all of them); ``names``: the players (player 0 moves first); ``board``: the environment,
    or a bare board under the standard rule (``env_lib.as_env``).
    """

    def __init__(
        self,
        board: BoardGeometry | env_lib.Env,
        moves: Sequence[str | int] = (),
        names: Sequence[str] = notation.PLAYER_LABELS,
        upto: int | None = None,
    ):
        self.geometry = env_lib.as_env(board).geometry
        self.names = tuple(names)
        self.positions = replay(board, list(moves))
        self.upto = self._checked(len(self.positions) - 1 if upto is None else upto)

    def _checked(self, upto: int) -> int:
        if not 0 <= int(upto) < len(self.positions):
            raise ValueError(f"upto={upto} must be in 0..{len(self.positions) - 1} (the moves of the record)")
        return int(upto)

    @property
    def position(self) -> Position:
        return self.positions[self.upto]

    def at(self, upto: int) -> "GamePicture":
        """The same game shown after ``upto`` moves (no replay)."""
        picture = copy.copy(self)
        picture.upto = self._checked(upto)
        return picture

    def scene(self) -> Scene:
        return board_scene(self.geometry, self.position, self.names)

    def svg(self) -> str:
        return scene_svg(self.scene())

    def _repr_svg_(self) -> str:
        return self.svg()

    def __repr__(self) -> str:
        return notation.render(self.geometry, self.position.state)
