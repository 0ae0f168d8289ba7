"""Backward self-play: greedy before each game's start step, searched after; results from the mover's side;
tree-node samples from the searches to the buffer's samples; the curriculum statistics over the games at the
curriculum's start step; revisiting start steps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, network, tree_nodes
from dabjax.training import curriculum, iteration, replay, selfplay

G = board_geometry(2, 2)  # 12 lines
START_STEPS = np.array([0, 3, 7, 12], np.int32)  # 12: never searched


@pytest.fixture(scope="module")
def record():
    net = network.NetworkConfig(width=4, blocks=1, value_hidden=4)
    settings = selfplay.SelfPlaySettings(
        env=env_lib.Env.of(G),
        # Without chain pruning every move from the start step on is searched, so the record is exact.
        search=mcts.SearchConfig(num_simulations=4, max_num_considered_actions=4, chain_pruning=False),
        num_games=len(START_STEPS),
        extraction=None,
    )
    params = network.init_params(net, G.grid_shape, jax.random.PRNGKey(0))
    play = jax.jit(lambda key, st: selfplay.self_play(settings, mcts.network_evaluator(net, G), params, key, st))
    return play(jax.random.PRNGKey(1), jnp.asarray(START_STEPS))


def test_tree_nodes_travel_as_one_record_from_the_searches_to_the_buffer():
    """With node augmentation every search's qualifying nodes ride along (``NodeSamples [T, N, K]``), valid
    only in searched slots, each a position after its search's root; the trainer's samples take them after
    the roots, as node samples, in stage 1 only."""
    net = network.NetworkConfig(width=4, blocks=1, value_hidden=4)
    settings = selfplay.SelfPlaySettings(
        env=env_lib.Env.of(G),
        search=mcts.SearchConfig(num_simulations=16, max_num_considered_actions=4, chain_pruning=False),
        num_games=8,
        extraction=tree_nodes.ExtractionConfig(bands=((0, 0.0, 0.0),), max_nodes=3),
    )
    params = network.init_params(net, G.grid_shape, jax.random.PRNGKey(0))
    evaluator = mcts.network_evaluator(net, G)
    play = jax.jit(lambda key: selfplay.self_play(settings, evaluator, params, key, jnp.int32(4)))
    played = play(jax.random.PRNGKey(1))
    nodes = played.nodes
    assert isinstance(nodes, tree_nodes.NodeSamples) and nodes.valid.shape == (G.num_lines, 8, 3)
    valid = np.asarray(nodes.valid)
    searched = np.asarray(played.searched)
    assert valid.any() and not (valid & ~searched[..., None]).any()
    node_moves = np.asarray(nodes.move_number)
    assert (node_moves > np.asarray(played.move_number)[..., None])[valid].all()
    assert (np.asarray(nodes.positions.lines).sum(-1) == node_moves)[valid].all()  # a line a move
    for include in (True, False):
        samples = iteration.build_samples(played, jnp.float32(0.0), jnp.bool_(include))
        assert isinstance(samples, replay.Samples)
        roots = searched.size
        assert np.asarray(samples.valid[:roots]).sum() == searched.sum()
        assert not np.asarray(samples.from_node[:roots]).any() and np.asarray(samples.from_node[roots:]).all()
        assert np.asarray(samples.valid[roots:]).sum() == (valid.sum() if include else 0)
        np.testing.assert_array_equal(np.asarray(samples.value[roots:]), np.asarray(nodes.value).reshape(-1))


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
