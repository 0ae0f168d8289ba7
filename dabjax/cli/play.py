"""Play Dots-and-Boxes against an agent in the terminal.

Move notation (``dabjax.game.notation``): a line is written as ``h R C`` (horizontal line in row ``R`` of dots,
between dot columns ``C`` and ``C+1``; ``R in 0..rows``, ``C in 0..cols-1``), ``v R C`` (vertical line
between dot rows ``R`` and ``R+1`` in dot column ``C``; ``R in 0..rows-1``, ``C in 0..cols``), or as its
OpenSpiel index (horizontal lines row by row, then vertical lines). ``P1(h,0,1)`` parses too. Commands:
``moves`` lists the legal moves, ``help`` shows the notation, ``quit`` ends the game.

Input and output are injectable (``read_line``, ``write``) so the loop can be scripted in tests.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable

import jax
import numpy as np

from dabjax.cli.faults import not_a_command
from dabjax.evaluation import arena
from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.geometry import BoardGeometry

HELP = (
    "Moves: 'h R C' (horizontal line, R = dot row 0..{rows}, C = 0..{last_col}), "
    "'v R C' (vertical line, R = 0..{last_row}, C = dot column 0..{cols}), or a line index 0..{last_line}.\n"
    "Commands: 'moves' lists the legal moves, 'help' shows this, 'quit' ends the game."
)


@dataclasses.dataclass
class GameRecord:
    """The outcome of one terminal game: the lines in play order, the final scores (player 0, player 1),
    the human's seat and whether the human quit."""

    moves: list[int]
    scores: tuple[int, int]
    human_player: int
    quit: bool


def play_game(
    geometry: BoardGeometry,
    agent,
    human_player: int = 0,
    seed: int = 0,
    read_line: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
    agent_name: str = "agent",
) -> GameRecord:
    """Runs one game between a human (``read_line``) and ``agent``; returns its record.

    Malformed or illegal input is refused with the reason and asked again; end of input quits.
    """
    if human_player not in (0, 1):
        raise ValueError(f"human_player must be 0 (moves first) or 1, got {human_player}")
    labels = notation.PLAYER_LABELS
    write(f"You are {labels[human_player]}, {agent_name} is {labels[1 - human_player]}. "
          f"{labels[0]} moves first. Type 'help' for the notation.")
    help_text = HELP.format(rows=geometry.rows, cols=geometry.cols, last_col=geometry.cols - 1,
                            last_row=geometry.rows - 1, last_line=geometry.num_lines - 1)
    state = env_lib.init(geometry)
    history: list[int] = []
    key = jax.random.PRNGKey(seed)
    while not bool(state.terminated):
        write(notation.render(geometry, state))
        if int(state.current_player) == human_player:
            try:
                text = read_line(f"your move ({labels[human_player]}): ").strip()
            except EOFError:
                text = "quit"
            command = text.lower()
            if command in ("quit", "exit", "q"):
                write("You quit.")
                return GameRecord(history, tuple(int(s) for s in state.scores), human_player, True)
            if command in ("help", "?", ""):
                write(help_text)
                continue
            if command == "moves":
                legal = np.flatnonzero(~np.asarray(state.lines))
                write("legal moves: " + ", ".join(f"{notation.move_name(geometry, m)} ({m})" for m in legal))
                continue
            try:
                line = notation.check_move(geometry, state, text)
            except ValueError as error:
                write(f"Refused: {error}. Try again ('help' for the notation).")
                continue
            who = "You"
        else:
            key, sub = jax.random.split(key)
            line = arena.agent_move(geometry, agent, sub, state, history)
            who = agent_name
        before = state
        state = notation.play_move(geometry, state, line)
        history.append(line)
        write(notation.describe_move(geometry, before, state, who, line))
    write(notation.render(geometry, state))
    scores = tuple(int(s) for s in state.scores)
    mine, theirs = scores[human_player], scores[1 - human_player]
    verdict = "You win" if mine > theirs else ("You lose" if mine < theirs else "Draw")
    write(f"{verdict}: {mine} - {theirs}.")
    return GameRecord(history, scores, human_player, False)


if __name__ == "__main__":
    sys.exit(not_a_command(__spec__.name))
