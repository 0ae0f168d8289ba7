"""Environment behaviour: properties, jit/vmap, early termination, illegal moves, observation, symmetry."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import jitted_play_prefix, jitted_step, trees_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.env import Env
from dabjax.game.geometry import board_geometry
from dabjax.game.host_agent import mover_margins

PROPERTY_SIZES = [(2, 2), (2, 3), (3, 3)]
HYPOTHESIS = settings(max_examples=40, deadline=None)


def positions(rows, cols):
    """Hypothesis strategy: (moves, count) for a random position of a rows x cols board."""
    num_lines = board_geometry(rows, cols).num_lines
    return st.tuples(st.permutations(list(range(num_lines))), st.integers(0, num_lines))


def state_of(rows, cols, moves, count, early=False):
    return jitted_play_prefix(rows, cols, early)(np.asarray(moves, np.int32), np.int32(count))


@pytest.mark.parametrize("rows,cols", PROPERTY_SIZES)
def test_score_sum_equals_claimed_boxes(rows, cols):
    @HYPOTHESIS
    @given(positions(rows, cols))
    def check(position):
        s = state_of(rows, cols, *position)
        owner = np.asarray(s.box_owner)
        assert int(s.scores.sum()) == int((owner >= 0).sum())
        assert int(s.scores[0]) == int((owner == 0).sum())
        assert int(s.num_moves) == int(np.asarray(s.lines).sum())
        # A box is claimed exactly when its four sides are drawn.
        g = board_geometry(rows, cols)
        assert ((owner >= 0) == np.asarray(s.lines)[g.box_lines].all(1)).all()
        assert bool(s.terminated) == (int(s.num_moves) == g.num_lines)

    check()


@pytest.mark.parametrize("rows,cols", PROPERTY_SIZES)
def test_mover_margins_in_numpy_agree_with_the_states_margin(rows, cols):
    @HYPOTHESIS
    @given(positions(rows, cols))
    def check(position):
        s = state_of(rows, cols, *position)
        margin = mover_margins(np.asarray(s.scores), np.asarray(s.current_player))
        assert margin.dtype == np.int32 and int(margin) == int(s.margin)

    check()
    # A batch, each from its own mover's side.
    batch = mover_margins(np.array([[3, 1], [3, 1], [0, 4]]), np.array([0, 1, 0]))
    assert batch.tolist() == [2, -2, -4]


@pytest.mark.parametrize("rows,cols", PROPERTY_SIZES)
def test_step_on_terminal_state_is_a_noop(rows, cols):
    g = board_geometry(rows, cols)
    step = jitted_step(rows, cols)

    @HYPOTHESIS
    @given(st.permutations(list(range(g.num_lines))), st.integers(-3, g.num_lines + 3))
    def check(moves, action):
        final = state_of(rows, cols, moves, g.num_lines)
        assert bool(final.terminated)
        assert trees_equal(step(final, np.int32(action)), final)

    check()


@pytest.mark.parametrize("rows,cols", PROPERTY_SIZES + [(2, 4)])
def test_symmetry_commutes_with_step(rows, cols):
    g = board_geometry(rows, cols)
    step = jitted_step(rows, cols)
    sym_state = jax.jit(lambda s, k: env_lib.symmetric_state(g, s, k))

    @HYPOTHESIS
    @given(positions(rows, cols), st.integers(0, g.num_symmetries - 1), st.integers(0, g.num_lines - 1))
    def check(position, k, action):
        s = state_of(rows, cols, *position)
        a_sym = env_lib.symmetric_action(g, jnp.int32(action), k)
        left = step(sym_state(s, k), a_sym)
        right = sym_state(step(s, np.int32(action)), k)
        assert trees_equal(left, right)

    check()


def test_symmetric_observation_and_policy_are_consistent():
    g = board_geometry(3, 3)
    rng = np.random.default_rng(0)
    s = state_of(3, 3, rng.permutation(g.num_lines), 11)
    obs = env_lib.observe(g, s)
    for k in range(g.num_symmetries):
        sk = env_lib.symmetric_state(g, s, k)
        # Observing the transformed state equals transforming the observation.
        np.testing.assert_array_equal(env_lib.observe(g, sk), env_lib.symmetric_observation(g, obs, k))
        np.testing.assert_array_equal(
            sk.legal_action_mask, env_lib.symmetric_lines(g, s.legal_action_mask, k)
        )
        policy = jnp.asarray(rng.random(g.num_lines), jnp.float32)
        moved = env_lib.symmetric_lines(g, policy, k)
        for line in range(g.num_lines):
            assert moved[int(env_lib.symmetric_action(g, line, k))] == policy[line]


def test_jit_and_vmap_equal_unbatched():
    rows, cols = 2, 3
    g = board_geometry(rows, cols)
    rng = np.random.default_rng(1)
    moves = np.stack([rng.permutation(g.num_lines) for _ in range(8)]).astype(np.int32)
    counts = rng.integers(0, g.num_lines, size=8).astype(np.int32)
    play = jitted_play_prefix(rows, cols)
    batched = jax.jit(jax.vmap(play))(moves, counts)
    actions = moves[np.arange(8), np.minimum(counts, g.num_lines - 1)]
    stepped = jax.vmap(lambda s, a: env_lib.step(g, s, a))(batched, actions)
    for i in range(8):
        single = env_lib.init(g)
        for t in range(counts[i]):
            single = env_lib.step(g, single, moves[i, t])  # not jitted
        assert trees_equal(jax.tree_util.tree_map(lambda x: x[i], batched), single)
        assert trees_equal(
            jax.tree_util.tree_map(lambda x: x[i], stepped), env_lib.step(g, single, actions[i])
        )


def test_capture_keeps_the_turn_and_scores():
    g = board_geometry(2, 2)
    s = notation.state_from_moves(g, ["h 0 0", "h 1 0", "v 0 0"])
    assert int(s.current_player) == 1
    s = notation.play_move(g, s, "v 0 1")  # player 1 completes box (0, 0)
    assert s.scores.tolist() == [0, 1] and int(s.current_player) == 1
    assert int(s.box_owner[0]) == 1
    s = notation.play_move(g, s, "h 2 1")  # no capture: turn passes
    assert int(s.current_player) == 0


def test_double_box_capture_scores_two():
    g = board_geometry(1, 2)
    # Draw everything except the middle vertical line, then draw it: two boxes at once.
    middle = g.v_line(0, 1)
    others = [line for line in range(g.num_lines) if line != middle]
    s = notation.state_from_moves(g, others)
    mover = int(s.current_player)
    s = notation.play_move(g, s, middle)
    assert int(s.scores[mover]) == 2 and bool(s.terminated)
    assert s.rewards.tolist() == ([1.0, -1.0] if mover == 0 else [-1.0, 1.0])


def test_early_termination_stops_when_majority_is_held():
    g = board_geometry(1, 3)
    # Player 1 takes box 0 with v 0 1, moves again and takes box 1 with v 0 2: 2 of 3 boxes.
    moves = ["h 0 0", "h 1 0", "h 0 1", "h 1 1", "v 0 0", "v 0 1", "v 0 2"]
    s_full = notation.state_from_moves(g, moves)
    s_early = notation.state_from_moves(env_lib.Env.of(g, early_termination=True), moves)
    assert s_full.scores.tolist() == s_early.scores.tolist() == [0, 2]
    assert bool(s_early.terminated) and not bool(s_full.terminated)
    assert s_early.rewards.tolist() == [-1.0, 1.0] and s_full.rewards.tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="already over"):
        notation.play_move(env_lib.Env.of(g, early_termination=True), s_early, "h 0 2")
    # Property over random games: early games end exactly when someone holds a majority, same winner.
    rng = np.random.default_rng(3)
    play_full, play_early = jitted_play_prefix(3, 3, False), jitted_play_prefix(3, 3, True)
    g3 = board_geometry(3, 3)
    for _ in range(20):
        perm = rng.permutation(g3.num_lines).astype(np.int32)
        full = play_full(perm, np.int32(g3.num_lines))
        early = play_early(perm, np.int32(g3.num_lines))
        assert bool(early.terminated)
        assert early.rewards.tolist() == full.rewards.tolist()
        assert 2 * int(early.scores.max()) > g3.num_boxes
        assert int(early.num_moves) <= int(full.num_moves)


@pytest.mark.parametrize("action", [-1, 12, 40])
def test_illegal_action_out_of_range_loses(action):
    g = board_geometry(2, 2)
    s = notation.state_from_moves(g, [0, 1, 2])
    mover = int(s.current_player)
    t = jitted_step(2, 2)(s, np.int32(action))
    assert bool(t.terminated)
    assert t.rewards[mover] == -1.0 and t.rewards[1 - mover] == 1.0
    np.testing.assert_array_equal(t.lines, s.lines)  # board unchanged
    np.testing.assert_array_equal(t.scores, s.scores)


def test_illegal_action_drawn_line_loses_inside_jit_and_vmap():
    g = board_geometry(2, 2)
    s = notation.state_from_moves(g, [0, 5])
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), s)
    out = jax.jit(jax.vmap(lambda st, a: env_lib.step(g, st, a)))(batch, jnp.array([5, 6], jnp.int32))
    assert out.terminated.tolist() == [True, False]
    assert out.rewards[0].tolist() == [-1.0, 1.0]  # player 0 to move drew a drawn line
    assert out.rewards[1].tolist() == [0.0, 0.0]


def test_observation_planes_from_side_to_move():
    g = board_geometry(2, 2)
    s = notation.state_from_moves(g, ["h 0 0", "h 1 0", "v 0 0", "v 0 1"])  # player 1 scores
    obs = np.asarray(env_lib.observe(g, s))
    assert obs.shape == (5, 5, 4) and obs.dtype == np.float32
    assert obs[0, 1, 0] == 1 and obs[2, 1, 0] == 1 and obs[1, 0, 0] == 1 and obs[1, 2, 0] == 1
    assert obs[..., 0].sum() == 4
    assert obs[1, 1, 1] == 1 and obs[..., 1].sum() == 1
    # Player 1 to move with one box more: +0.25 everywhere; seen by player 0 it would be -0.25.
    assert int(s.current_player) == 1
    np.testing.assert_allclose(obs[..., 2], 0.25)
    # 2x2 has 12 lines: 8 undrawn, an even number.
    np.testing.assert_array_equal(obs[..., 3], 0.0)
    s = notation.play_move(g, s, "h 2 1")
    obs = np.asarray(env_lib.observe(g, s))
    np.testing.assert_allclose(obs[..., 2], -0.25)
    np.testing.assert_array_equal(obs[..., 3], 1.0)  # 7 undrawn


def test_parity_plane_follows_undrawn_lines_on_odd_and_even_boards():
    for rows, cols in [(1, 2), (2, 3), (3, 3)]:  # 7, 17 and 24 lines
        g = board_geometry(rows, cols)
        state = env_lib.init(g)
        for move in range(g.num_lines):
            parity = np.asarray(env_lib.observe(g, state))[..., 3]
            assert np.all(parity == (g.num_lines - move) % 2), (rows, cols, move)
            state = env_lib.step(g, state, jnp.int32(move))


def test_env_object_is_pgx_like():
    env = Env(3, 3)
    assert env.num_actions == 24 and env.observation_shape == (7, 7, 4) and env.num_players == 2
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    states = jax.vmap(env.init)(keys)
    assert states.legal_action_mask.shape == (4, 24) and bool(states.legal_action_mask.all())
    states = jax.jit(jax.vmap(env.step))(states, jnp.arange(4, dtype=jnp.int32))
    assert states.num_moves.tolist() == [1, 1, 1, 1] and states.current_player.tolist() == [1, 1, 1, 1]
    assert jax.vmap(env.observe)(states).shape == (4, 7, 7, 4)
