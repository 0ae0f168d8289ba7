"""Random games against OpenSpiel's dots_and_boxes: same scores, player to move and terminal flag."""

import functools

import jax
import numpy as np
import pyspiel  # the test extra installs OpenSpiel: a broken install fails here, never skips
import pytest

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry

SIZES = [(1, 1), (2, 3), (3, 3), (5, 5), (4, 7), (3, 1)]
GAMES_PER_SIZE = 6


@functools.lru_cache(maxsize=None)
def trajectory_fn(rows, cols):
    """jit(moves[G, L]) -> per-move scores [G, L, 2], player [G, L], terminated [G, L], rewards [G, L, 2]."""
    g = board_geometry(rows, cols)

    def one_game(moves):
        def body(state, action):
            state = env_lib.step(g, state, action)
            return state, (state.scores, state.current_player, state.terminated, state.rewards)

        return jax.lax.scan(body, env_lib.init(g), moves)[1]

    return jax.jit(jax.vmap(one_game))


@pytest.mark.parametrize("rows,cols", SIZES)
def test_random_games_agree_with_openspiel(rows, cols):
    g = board_geometry(rows, cols)
    rng = np.random.default_rng(rows * 100 + cols)
    moves = np.stack([rng.permutation(g.num_lines) for _ in range(GAMES_PER_SIZE)]).astype(np.int32)
    scores, players, terminated, rewards = map(np.asarray, trajectory_fn(rows, cols)(moves))
    game = pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols})
    for i in range(GAMES_PER_SIZE):
        state = game.new_initial_state()
        for t, action in enumerate(moves[i]):
            assert action in state.legal_actions()
            state.apply_action(int(action))
            assert bool(terminated[i, t]) == state.is_terminal(), (i, t)
            if not state.is_terminal():
                assert int(players[i, t]) == state.current_player(), (i, t)
            # OpenSpiel shows each claimed box as its owner's number (1 or 2) inside the box.
            text = str(state)
            assert tuple(scores[i, t]) == (text.count(" 1 "), text.count(" 2 ")), (i, t, text)
        # The final result agrees: OpenSpiel's returns are +1/-1/0 for the winner.
        assert list(rewards[i, -1]) == [float(r) for r in state.returns()]
        assert scores[i, -1].sum() == g.num_boxes


@pytest.mark.parametrize("rows,cols", [(2, 3), (3, 3)])
def test_scores_agree_with_openspiel_utility_margin(rows, cols):
    """With utility_margin, OpenSpiel's returns are the final box margin."""
    g = board_geometry(rows, cols)
    rng = np.random.default_rng(7)
    moves = np.stack([rng.permutation(g.num_lines) for _ in range(GAMES_PER_SIZE)]).astype(np.int32)
    scores = np.asarray(trajectory_fn(rows, cols)(moves)[0])
    game = pyspiel.load_game(
        "dots_and_boxes", {"num_rows": rows, "num_cols": cols, "utility_margin": True}
    )
    for i in range(GAMES_PER_SIZE):
        state = game.new_initial_state()
        for action in moves[i]:
            state.apply_action(int(action))
        margin = scores[i, -1, 0] - scores[i, -1, 1]
        assert state.returns()[0] == pytest.approx(margin)
