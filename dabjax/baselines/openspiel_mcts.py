"""OpenSpiel's MCTS bot as a dabjax opponent (the other way, dabjax agents as OpenSpiel bots, is
``dabjax.evaluation.as_openspiel_bot.DabjaxBot``).

``OpenSpielMCTSAgent`` (the ``openspiel-mcts:SIMS`` agent): OpenSpiel's own ``MCTSBot`` (random rollouts) as a
host agent, an opponent nobody here wrote. Each move rebuilds the game in OpenSpiel's C++ ``dots_and_boxes``
from the game's move history (the line numbering is the same) and asks a fresh ``MCTSBot`` with
``max_simulations`` simulations, ``uct_c`` and one random rollout per leaf (``RandomRolloutEvaluator``),
OpenSpiel's defaults otherwise (its MCTS-Solver on). OpenSpiel is an optional dependency
(``pip install open-spiel``; it is in the ``test`` extra).
"""

from __future__ import annotations

import functools

import numpy as np

from dabjax.game.geometry import BoardGeometry
from dabjax.game.host_agent import HostAgent


def openspiel_dependency():
    """``(pyspiel, open_spiel.python.algorithms.mcts)``; ValueError with the install hint when OpenSpiel is missing."""
    try:
        import pyspiel
        from open_spiel.python.algorithms import mcts
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ValueError(
            "agent 'openspiel-mcts' needs the optional dependency open-spiel: pip install open-spiel "
            f"(or pip install -e '.[test]'); import failed: {error}"
        ) from None
    return pyspiel, mcts


@functools.lru_cache(maxsize=None)
def openspiel_game(rows: int, cols: int):
    """OpenSpiel's ``dots_and_boxes`` for a board of ``rows x cols`` boxes."""
    pyspiel, _ = openspiel_dependency()
    return pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols})


class OpenSpielMCTSAgent(HostAgent):
    """``openspiel-mcts:SIMS``: OpenSpiel's ``MCTSBot`` with random rollouts, game by game."""

    needs_history = True

    def __init__(self, num_simulations: int, uct_c: float = 2.0, rollouts: int = 1):
        if not isinstance(num_simulations, int) or num_simulations < 1:
            raise ValueError(f"openspiel-mcts simulations must be a positive integer, got {num_simulations!r}")
        openspiel_dependency()  # fail early, with the install hint
        self.num_simulations = num_simulations
        self.uct_c = float(uct_c)
        self.rollouts = int(rollouts)
        self.name = f"openspiel-mcts:{num_simulations}"

    def move(self, geometry: BoardGeometry, history, rng: np.random.Generator) -> int:
        """OpenSpiel's move after the lines ``history`` (in play order) on a fresh board."""
        _, mcts = openspiel_dependency()
        game = openspiel_game(geometry.rows, geometry.cols)
        state = game.new_initial_state()
        for line in history:
            state.apply_action(int(line))
        if state.is_terminal():
            raise ValueError(f"openspiel-mcts asked to move in a finished game (history {list(history)})")
        random_state = np.random.RandomState(int(rng.integers(0, 2**31 - 1)))
        evaluator = mcts.RandomRolloutEvaluator(n_rollouts=self.rollouts, random_state=random_state)
        bot = mcts.MCTSBot(game, self.uct_c, self.num_simulations, evaluator, random_state=random_state)
        return int(bot.step(state))

    def act(self, geometry, rng, states, histories) -> np.ndarray:
        if histories is None:
            raise ValueError(f"agent {self.name!r} needs the move history of each game")
        return np.array([self.move(geometry, history, rng) for history in histories], np.int32)
