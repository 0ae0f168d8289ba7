"""Human-facing helpers (not jitted): move notation, building a state from moves, text rendering.

Move notation: a line is written either as its OpenSpiel index (``"7"``) or as ``"h R C"`` / ``"v R C"``
(horizontal line ``(R, C)``: ``R in 0..rows``, ``C in 0..cols-1``; vertical line ``(R, C)``:
``R in 0..rows-1``, ``C in 0..cols``). Commas and parentheses are accepted, so OpenSpiel's action strings
(``"P1(h,0,1)"``) parse too. These helpers raise ``ValueError`` naming the move and the reason, unlike the
jitted ``step``, which scores an illegal move as a loss.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Sequence

import jax
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry

PLAYER_LABELS = ("A", "B")  # Player 0 and player 1 in renderings.

_MOVE_PATTERN = re.compile(r"^\s*(?:p[12])?\s*\(?\s*([hv])\s*[, ]\s*(\d+)\s*[, ]\s*(\d+)\s*\)?\s*$", re.I)


def move_name(geometry: BoardGeometry, line: int) -> str:
    """``"h R C"`` or ``"v R C"`` for a line index."""
    if not 0 <= int(line) < geometry.num_lines:
        raise ValueError(f"line {line} is outside 0..{geometry.num_lines - 1} on a {geometry.name} board")
    return geometry.line_name(int(line))


def parse_move(geometry: BoardGeometry, text: str | int) -> int:
    """The line index of a move written as an index or as ``h R C`` / ``v R C``. Raises ValueError."""
    if isinstance(text, (int, np.integer)):
        index = int(text)
        if not 0 <= index < geometry.num_lines:
            raise ValueError(
                f"move {index}: line index outside 0..{geometry.num_lines - 1} on a {geometry.name} board"
            )
        return index
    raw = str(text)
    stripped = raw.strip()
    if re.fullmatch(r"-?\d+", stripped):
        return parse_move(geometry, int(stripped))
    match = _MOVE_PATTERN.match(raw)
    if not match:
        raise ValueError(
            f"move {raw!r} is not understood: write a line index (0..{geometry.num_lines - 1}) "
            "or 'h R C' / 'v R C'"
        )
    kind, r, c = match.group(1).lower(), int(match.group(2)), int(match.group(3))
    rows, cols = geometry.rows, geometry.cols
    if kind == "h":
        if not (0 <= r <= rows and 0 <= c < cols):
            raise ValueError(
                f"move {raw!r}: horizontal line (r={r}, c={c}) is off a {geometry.name} board "
                f"(r in 0..{rows}, c in 0..{cols - 1})"
            )
        return geometry.h_line(r, c)
    if not (0 <= r < rows and 0 <= c <= cols):
        raise ValueError(
            f"move {raw!r}: vertical line (r={r}, c={c}) is off a {geometry.name} board "
            f"(r in 0..{rows - 1}, c in 0..{cols})"
        )
    return geometry.v_line(r, c)


@functools.lru_cache(maxsize=None)
def _jitted_step(env: env_lib.Env):
    return jax.jit(env.step)


def check_move(geometry: BoardGeometry, state: env_lib.State, move: str | int) -> int:
    """Parses ``move`` and checks that it is legal in ``state``; returns its index or raises ValueError."""
    line = parse_move(geometry, move)
    if bool(state.terminated):
        raise ValueError(f"move {move!r} ({move_name(geometry, line)}): the game is already over")
    if bool(np.asarray(state.lines)[line]):
        raise ValueError(f"move {move!r} ({move_name(geometry, line)}): that line is already drawn")
    return line


def play_move(board: BoardGeometry | env_lib.Env, state: env_lib.State, move: str | int) -> env_lib.State:
    """Plays one move given in any notation, raising ValueError if it is malformed or illegal. ``board``: the
    environment, or a bare board under the standard rule (``env_lib.as_env``)."""
    env = env_lib.as_env(board)
    line = check_move(env.geometry, state, move)
    return _jitted_step(env)(state, line)


def split_move_list(moves: Iterable[str | int] | str) -> list[str | int]:
    """The moves of a move list, each as written (any notation of ``parse_move``).

    ``moves`` is a sequence of moves, or one string of moves separated by ``;`` or new lines, where line indices
    may also be separated by spaces or commas: ``"h 0 0; v 0 1"``, ``"0 1 2 5"``, ``"0;1;2;5"`` and
    ``"h 0 0; 1, 2"`` all work. Empty parts of a string are skipped.
    """
    if not isinstance(moves, str):
        return list(moves)
    items: list[str | int] = []
    for part in re.split(r"[;\n]", moves):
        if re.fullmatch(r"[\d\s,]+", part):  # indices only: a space cannot separate the parts of a line index
            items += [index for index in re.split(r"[\s,]+", part) if index]
        elif part.strip():
            items.append(part.strip())
    return items


def parse_move_list(geometry: BoardGeometry, moves: Iterable[str | int] | str) -> list[int]:
    """The line indices of a move list (``split_move_list``), not checked for legality (``state_from_moves`` and
    ``dabjax.game.record.replay`` play them). Raises ValueError naming the first bad move and its position."""
    lines = []
    for number, move in enumerate(split_move_list(moves)):
        try:
            lines.append(parse_move(geometry, move))
        except ValueError as error:
            raise ValueError(f"move #{number} of the list: {error}") from None
    return lines


def state_from_moves(board: BoardGeometry | env_lib.Env, moves: Iterable[str | int] | str) -> env_lib.State:
    """The state reached by playing ``moves`` from the empty board (``board`` as in ``play_move``).

    ``moves`` is a sequence of moves in any notation, or one string of them (``split_move_list``: ``;`` or new
    lines between moves, spaces or commas also between line indices). Raises ValueError naming the first bad
    move and its position.
    """
    env = env_lib.as_env(board)
    state = env.init()
    for number, move in enumerate(split_move_list(moves)):
        try:
            state = play_move(env, state, move)
        except ValueError as error:
            raise ValueError(f"move #{number} of the list: {error}") from None
    return state


def render(geometry: BoardGeometry, state: env_lib.State) -> str:
    """A text picture of a single (unbatched) state, with the scores and the player to move.

    Dots are ``+``, drawn lines ``---`` and ``|``, claimed boxes show their owner (``A`` = player 0,
    ``B`` = player 1).
    """
    state = env_lib.to_numpy(state)
    if state.lines.ndim != 1:
        raise ValueError(f"render takes one state, got a batch of shape {state.lines.shape[:-1]}")
    rows, cols = geometry.rows, geometry.cols
    out: list[str] = []
    for r in range(rows + 1):
        row = "+"
        for c in range(cols):
            row += ("---" if state.lines[geometry.h_line(r, c)] else "   ") + "+"
        out.append(row)
        if r == rows:
            break
        row = ""
        for c in range(cols + 1):
            row += "|" if state.lines[geometry.v_line(r, c)] else " "
            if c < cols:
                owner = int(state.box_owner[r * cols + c])
                row += f" {PLAYER_LABELS[owner]} " if owner >= 0 else "   "
        out.append(row.rstrip())
    a, b = (int(x) for x in state.scores)
    if bool(state.terminated):
        status = "game over"
    else:
        status = f"{PLAYER_LABELS[int(state.current_player)]} to move"
    out.append(
        f"A {a} - B {b}, {status}, {int(state.num_moves)}/{geometry.num_lines} lines drawn"
    )
    return "\n".join(out)


def moves_to_string(geometry: BoardGeometry, moves: Sequence[int]) -> str:
    """``"h 0 0; v 1 2; ..."`` for a list of line indices."""
    return "; ".join(move_name(geometry, m) for m in moves)


def describe_move(geometry, before: env_lib.State, after: env_lib.State, who: str, line: int) -> str:
    """``"level1 drew h 0 1 (line 1) and completed 1 box"``."""
    gained = int(np.asarray(after.scores).sum() - np.asarray(before.scores).sum())
    text = f"{who} drew {move_name(geometry, line)} (line {line})"
    return text + (f" and completed {gained} box{'es' if gained > 1 else ''}" if gained else "")
