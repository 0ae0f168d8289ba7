"""A game record: the list of moves from the empty board, and the positions it passes through.

The environment's ``State`` knows the lines and the box owners but not who drew each line, so ``replay`` plays
the record through the env (the only judge of the rules) and keeps, for every position, the player who drew
each line and the last move: what the pictures (``dabjax.evaluation.render``) and the web game need. Host-side
NumPy, one game at a time.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.geometry import BoardGeometry


@dataclasses.dataclass(frozen=True)
class Position:
    """One position of a game record.

    state: the env ``State`` (NumPy leaves, one game).
    drawer: int8 ``[L]``, the player who drew each line, ``-1`` for undrawn lines.
    last_move: the line drawn last, or None on the empty board.
    """

    state: env_lib.State
    drawer: np.ndarray
    last_move: int | None


def start_position(geometry: BoardGeometry) -> Position:
    """The empty board."""
    return Position(env_lib.to_numpy(env_lib.init(geometry)), np.full(geometry.num_lines, -1, np.int8), None)


def after_move(board: BoardGeometry | env_lib.Env, position: Position, move: str | int) -> Position:
    """The position after ``move`` (any notation); raises ValueError naming an illegal or malformed move.
    ``board``: the environment, or a bare board under the standard rule (``env_lib.as_env``)."""
    env = env_lib.as_env(board)
    line = notation.check_move(env.geometry, position.state, move)
    state = env_lib.to_numpy(notation.play_move(env, position.state, line))
    drawer = position.drawer.copy()
    drawer[line] = int(position.state.current_player)
    return Position(state, drawer, line)


def replay(board: BoardGeometry | env_lib.Env, moves: Sequence[str | int]) -> list[Position]:
    """The ``len(moves) + 1`` positions of a game record, from the empty board (``board`` as in ``after_move``).
    Raises ValueError naming the first bad move and its place in the list."""
    env = env_lib.as_env(board)
    positions = [start_position(env.geometry)]
    for number, move in enumerate(moves):
        try:
            positions.append(after_move(env, positions[-1], move))
        except ValueError as error:
            raise ValueError(f"move #{number} of the record: {error}") from None
    return positions
