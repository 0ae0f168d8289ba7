"""dabjax: a JAX, accelerator-native trainer for Dots-and-Boxes agents (the BoxesZero method)."""

from dabjax.game.env import Env, State, init, observe, step
from dabjax.game.geometry import BoardGeometry, board_geometry, parse_board_size

__version__ = "0.1.0"

__all__ = [
    "BoardGeometry",
    "Env",
    "State",
    "board_geometry",
    "init",
    "observe",
    "parse_board_size",
    "step",
]
