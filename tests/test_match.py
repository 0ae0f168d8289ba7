"""The compiled match: each agent asked only where it moves, results from A's side, both seats."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.evaluation import arena
from dabjax.game import env as env_lib
from dabjax.game import match
from dabjax.game.geometry import board_geometry

GEOMETRY = board_geometry(2, 2)


def first_legal(geometry, key, states):
    return jnp.argmax(states.legal_action_mask, axis=-1).astype(jnp.int32)


def last_legal(geometry, key, states):
    count = states.legal_action_mask.shape[-1]
    return (count - 1 - jnp.argmax(states.legal_action_mask[:, ::-1], axis=-1)).astype(jnp.int32)


def counting(agent, calls: list):
    """``agent``, appending the batch size of each call that runs (a branch that ``lax.cond`` skips runs none)."""

    def counted(geometry, key, states):
        jax.debug.callback(lambda n: calls.append(int(n)), states.current_player.shape[0])
        return agent(geometry, key, states)

    return counted


def test_each_agent_is_asked_only_in_the_parts_where_it_moves():
    states = env_lib.batch_init(GEOMETRY, 8)
    a_moves = jnp.array([False, True, False, False, True, False, True, False])
    calls_a, calls_b = [], []
    moves = jax.jit(lambda k: match.movers_moves(GEOMETRY, counting(first_legal, calls_a),
                                                 counting(last_legal, calls_b), k, states, a_moves, 4))
    result = np.asarray(moves(jax.random.PRNGKey(0)))
    jax.effects_barrier()
    # Sorted, A's 3 games fill the first part of 2 and half the second: A runs on 2 parts, B on 3 of the 4.
    assert calls_a == [2, 2] and calls_b == [2, 2, 2]
    expected = np.where(np.asarray(a_moves), 0, GEOMETRY.num_lines - 1)
    np.testing.assert_array_equal(result, expected)


def test_play_both_sides_reports_from_a_seat_in_each_half():
    reward, margin = jax.jit(lambda k: match.play_both_sides(env_lib.Env.of(GEOMETRY), first_legal, last_legal, k, 6))(
        jax.random.PRNGKey(1))
    # Deterministic agents: the three games of each half are the same game.
    reward, margin = np.asarray(reward), np.asarray(margin)
    assert len(set(margin[:3])) == 1 and len(set(margin[3:])) == 1
    assert np.all(np.sign(margin) == np.sign(reward))
    # The same games played by hand from each seat.
    for a_first, row in ((True, 0), (False, 3)):
        state = env_lib.init(GEOMETRY)
        while not bool(state.terminated):
            a_to_move = (int(state.current_player) == 0) == a_first
            agent = first_legal if a_to_move else last_legal
            batch = jax.tree_util.tree_map(lambda x: x[None], state)
            state = env_lib.step(GEOMETRY, state, agent(GEOMETRY, None, batch)[0])
        own, other = (0, 1) if a_first else (1, 0)
        assert margin[row] == int(state.scores[own]) - int(state.scores[other])
    with pytest.raises(ValueError, match="even"):
        match.play_both_sides(env_lib.Env.of(GEOMETRY), first_legal, last_legal, jax.random.PRNGKey(0), 5)


def test_head_to_head_of_equal_agents_is_balanced_and_the_host_match_agrees():
    result = arena.head_to_head(GEOMETRY, first_legal, last_legal, jax.random.PRNGKey(0), 10)
    assert result.games == 10 and result.wins + result.draws + result.losses == 10
    hosted = arena.play_match(GEOMETRY, first_legal, last_legal, jax.random.PRNGKey(0), 10).summary()
    # Deterministic agents without openings: the same two games, whichever loop plays them.
    assert (hosted.wins, hosted.draws, hosted.losses) == (result.wins, result.draws, result.losses)


def test_host_match_pads_a_jax_agent_batch_to_a_few_sizes():
    assert [arena.agent_batch_size(count, 100) for count in (1, 25, 26, 50, 51, 99, 100)] == [
        25, 25, 50, 50, 75, 100, 100]
    assert arena.agent_batch_size(1, 1) == 1
    assert {arena.agent_batch_size(count, 10) for count in range(1, 11)} == {3, 6, 9, 10}
