"""Any dabjax agent as an OpenSpiel bot: ``DabjaxBot(game, spec)`` is a ``pyspiel.Bot`` for OpenSpiel's own
evaluation loops (``open_spiel.python.algorithms.evaluate_bots``), the game a ``dots_and_boxes`` of OpenSpiel
(same line numbering as dabjax), the spec any agent of ``evaluate.py`` (``"level2"``, ``"mcts:1000"``,
``"ckpt:RUN"``, ``"pretrained:5x5"``, ...). OpenSpiel is an optional dependency (in the ``test`` extra).
"""

from __future__ import annotations

import jax

try:  # a pyspiel.Bot subclass needs the class at import time; without OpenSpiel, DabjaxBot() says what to install
    import pyspiel

    _Bot = pyspiel.Bot
except ImportError:  # pragma: no cover - depends on the environment
    pyspiel = None
    _Bot = object

from dabjax.baselines.openspiel_mcts import openspiel_dependency
from dabjax.evaluation import agent_registry, arena
from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.geometry import board_geometry


class DabjaxBot(_Bot):
    """A dabjax agent as a ``pyspiel.Bot``: ``DabjaxBot(game, spec)``.

    ``game``: OpenSpiel's ``dots_and_boxes`` (``pyspiel.load_game("dots_and_boxes(num_rows=R,num_cols=C)")``);
    ``spec``: any agent of ``dabjax.evaluation.agent_registry.make_agent`` for that board. Each ``step`` reads the
    OpenSpiel state's history (its actions are our line indices), replays the new moves through the dabjax env
    and asks the agent for one move. Jax agents get a fresh key per move, split from ``seed``'s key, so a bot
    plays a reproducible sequence of moves; host agents get a NumPy generator seeded from that key. The bot
    keeps no per-game state beyond a cache of the last position, so ``restart_at`` and ``inform_action`` have
    nothing to do and one bot can play any number of games, in either seat.
    """

    def __init__(self, game, spec: str, seed: int = 0):
        openspiel_dependency()  # fail early, with the install hint
        pyspiel.Bot.__init__(self)
        if game.get_type().short_name != "dots_and_boxes":
            raise ValueError(f"DabjaxBot plays dots_and_boxes, not {game.get_type().short_name!r}")
        parameters = game.get_parameters()
        self.geometry = board_geometry(int(parameters["num_rows"]), int(parameters["num_cols"]))
        self.spec = str(spec)
        self.agent = agent_registry.make_agent(self.spec, self.geometry)
        self._key = jax.random.PRNGKey(seed)
        self._history: list[int] = []
        self._state = env_lib.init(self.geometry)

    def __str__(self) -> str:
        return f"DabjaxBot({self.spec!r}, {self.geometry.name})"

    def restart_at(self, state) -> None:
        """Nothing to reset: ``step`` reads the history of the state it is given."""

    def inform_action(self, state, player_id, action) -> None:
        """Nothing to track: ``step`` reads the history of the state it is given."""

    def _env_state(self, history: list[int]) -> env_lib.State:
        """The dabjax state after ``history``; replays only the moves since the last call when it continues
        that game (a new game or another branch starts from the empty board)."""
        if history[: len(self._history)] != self._history:
            self._history, self._state = [], env_lib.init(self.geometry)
        for line in history[len(self._history):]:
            self._state = notation.play_move(self.geometry, self._state, line)
            self._history.append(line)
        return self._state

    def step(self, state) -> int:
        """The agent's move (an OpenSpiel action = a line index) in ``state``."""
        if state.is_terminal():
            raise ValueError(f"{self} asked to move in a finished game")
        history = [int(action) for action in state.history()]
        env_state = self._env_state(history)
        if int(env_state.current_player) != state.current_player():
            raise ValueError(f"{self}: OpenSpiel and dabjax disagree on the player to move after {history}")
        self._key, key = jax.random.split(self._key)
        return arena.agent_move(self.geometry, self.agent, key, env_state, history)
