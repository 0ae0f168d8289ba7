import jax
import numpy as np
import pytest
from conftest import jitted_play_prefix

from dabjax.game import env as env_lib
from dabjax.game import playout
from dabjax.game.geometry import board_geometry


@pytest.mark.parametrize("early", [False, True])
def test_fast_playout_scores_equal_stepped_games(early):
    rows, cols = 3, 3
    g = board_geometry(rows, cols)
    rng = np.random.default_rng(0)
    batch = 64
    moves = np.stack([rng.permutation(g.num_lines) for _ in range(batch)]).astype(np.int32)
    counts = rng.integers(0, g.num_lines + 1, size=batch).astype(np.int32)
    starts = jax.vmap(jitted_play_prefix(rows, cols, early))(moves, counts)
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    env = env_lib.Env.of(g, early)
    stepped = jax.jit(jax.vmap(lambda k, s: playout.play_random_game(env, k, s)))(keys, starts)
    fast = jax.jit(jax.vmap(lambda k, s: playout.random_playout_scores(env, k, s)))(keys, starts)
    assert bool(stepped.terminated.all())
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(stepped.scores))
    if not early:
        assert (np.asarray(stepped.scores).sum(1) == g.num_boxes).all()


def test_random_line_order_is_uniform_over_undrawn_lines():
    g = board_geometry(1, 1)
    lines = np.array([True, False, False, False])
    keys = jax.random.split(jax.random.PRNGKey(1), 3000)
    orders = np.asarray(jax.vmap(lambda k: playout.random_line_order(g, k, lines))(keys))
    assert (orders[:, -1] == 0).all()  # the drawn line comes last
    first = np.bincount(orders[:, 0], minlength=4)[1:] / len(orders)
    np.testing.assert_allclose(first, 1 / 3, atol=0.04)
