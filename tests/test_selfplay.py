"""Backward self-play: greedy before each game's start step, searched after; results from the mover's side;
the curriculum statistics over the games at the curriculum's start step; revisiting start steps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax import curriculum, network, search, selfplay
from dabjax.geometry import board_geometry

G = board_geometry(2, 2)  # 12 lines
START_STEPS = np.array([0, 3, 7, 12], np.int32)  # 12: never searched


@pytest.fixture(scope="module")
def record():
    net = network.NetworkConfig(width=4, blocks=1, value_hidden=4)
    settings = selfplay.SelfPlaySettings(
        geometry=G,
        # Without chain pruning every move from the start step on is searched, so the record is exact.
        search=search.SearchConfig(num_simulations=4, max_num_considered_actions=4, chain_pruning=False),
        num_games=len(START_STEPS),
        extraction=None,
    )
    params = network.init_params(net, G.grid_shape, jax.random.PRNGKey(0))
    play = jax.jit(lambda key, st: selfplay.self_play(settings, search.network_evaluator(net, G), params, key, st))
    return play(jax.random.PRNGKey(1), jnp.asarray(START_STEPS))


def test_each_game_is_searched_from_its_own_start_step(record):
    searched = np.asarray(record.searched)  # [T, N]
    moves = np.asarray(record.move_number)
    assert np.asarray(record.start_step).tolist() == START_STEPS.tolist()
    for game, start in enumerate(START_STEPS):
        searched_moves = sorted(moves[searched[:, game], game].tolist())
        assert searched_moves == list(range(start, G.num_lines)), (game, searched_moves)


def test_results_are_from_the_side_to_move(record):
    searched = np.asarray(record.searched)
    z = np.asarray(record.z)
    scores = np.asarray(record.final_scores)
    assert scores.sum(-1).tolist() == [G.num_boxes] * len(START_STEPS)
    # Game 0 is searched from the empty board, where player 0 moves.
    first = np.flatnonzero(searched[:, 0] & (np.asarray(record.move_number)[:, 0] == 0))[0]
    assert z[first, 0] == np.sign(scores[0, 0] - scores[0, 1])
    assert set(np.unique(z[searched]).tolist()) <= {-1.0, 0.0, 1.0}


def test_curriculum_ratios_count_only_the_games_at_the_start_step(record):
    searched = np.asarray(record.searched)
    _, _, count = selfplay.advancement_ratios(record, jnp.int32(3), mq_threshold=0.5, nv_threshold=0.5)
    assert int(count) == searched[:, 1].sum() == G.num_lines - 3
    _, _, none = selfplay.advancement_ratios(record, jnp.int32(5), mq_threshold=0.5, nv_threshold=0.5)
    assert int(none) == 0


def test_revisiting_games_draw_start_steps_between_st_and_the_initial_one():
    draw = jax.jit(curriculum.game_start_steps, static_argnums=(2, 3, 4))
    steps = np.asarray(draw(jax.random.PRNGKey(0), jnp.int32(4), 12, 4000, 0.5))
    assert steps.min() == 4 and steps.max() == 12
    at_st = np.mean(steps == 4)  # half stay at st; 1/9 of the revisiting half draws st too
    assert abs(at_st - (0.5 + 0.5 / 9)) < 0.03
    assert abs(np.mean(steps[steps > 4]) - 8.5) < 0.2  # uniform over 5..12
    assert np.all(np.asarray(draw(jax.random.PRNGKey(0), jnp.int32(4), 12, 64, 0.0)) == 4)
    assert np.all(np.asarray(draw(jax.random.PRNGKey(0), jnp.int32(0), 0, 64, 0.5)) == 0)
