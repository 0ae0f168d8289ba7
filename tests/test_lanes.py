"""Loops on lanes (``loops.on_lanes``, ``loops.repeat_on_lanes``): the work of the elements that need it, gathered
into fewer lanes, gives element by element what the whole batch gives, in each of the three ways the batch can go
(none needs it, few do, more than the lanes hold); the forced-capture settle, the endgame analysis and a whole
search are the same at any lane share."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.game import chains, endgame, forced, loops, policies
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, network
from dabjax.training import config as config_lib


def collatz_steps(start):
    """Steps of the Collatz map from ``start`` to 1 (at most 200): a loop whose trips vary from element to
    element."""
    def step(carry):
        value, steps = carry
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1

    return loops.repeat_while(lambda c: (c[0] > 1) & (c[1] < 200), step, (start, jnp.int32(0)), 2)


@pytest.mark.parametrize("needing, lanes", [(0, 4), (3, 4), (4, 4), (9, 4), (5, 16)])
def test_on_lanes_gives_the_whole_batch_result_whichever_way_the_batch_goes(needing, lanes):
    rng = np.random.default_rng(needing)
    inputs = jnp.asarray(rng.integers(2, 1000, 16), jnp.int32)
    needs = jnp.zeros(16, bool).at[jnp.asarray(rng.permutation(16)[:needing])].set(True)
    otherwise = (-inputs, jnp.full(16, -1, jnp.int32))
    fn = jax.vmap(collatz_steps)
    expected = jax.tree_util.tree_map(lambda new, old: jnp.where(needs, new, old), fn(inputs), otherwise)
    got = jax.jit(lambda n, x, o: loops.on_lanes(fn, n, x, o, lanes))(needs, inputs, otherwise)
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(have, want)
    assert int((got[1] > 0).sum()) == needing  # only the elements that need it were worked on


@pytest.mark.parametrize("lanes, way", [(1, "whole"), (8, "lanes"), (32, "no switch")])
def test_a_loop_on_lanes_is_the_batched_loop(lanes, way):
    starts = jnp.asarray([1, 2, 3, 7, 27, 97, 1, 1, 871, 6, 1, 9], jnp.int32)  # 27, 97 and 871 loop long

    def cond(carry):
        return (carry[0] > 1) & (carry[1] < 200)

    def body(carry):
        value, steps = carry
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1

    init = (starts, jnp.zeros_like(starts))
    # The elements still going after the first turn: which way on_lanes goes.
    going = int(jax.vmap(cond)(jax.vmap(lambda c: loops._turn(cond, body, 2, c))(init)).sum())
    assert {"whole": 1 < going, "lanes": going <= lanes < 12, "no switch": lanes >= 12}[way], going
    expected = jax.vmap(lambda c: loops.repeat_while(cond, body, c, 2))(init)
    got = jax.jit(lambda c: loops.repeat_on_lanes(cond, body, c, 2, lanes))(init)
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(have, want)
    assert int(got[1][8]) == 178  # 871's trajectory, on whichever lanes


def test_lanes_for_takes_at_least_one_and_at_most_the_batch():
    assert loops.lanes_for(1024, 0.25) == 256
    assert loops.lanes_for(10, 0.25) == 3
    assert loops.lanes_for(3, 0.01) == 1
    assert loops.lanes_for(7, 1.0) == 7


def random_positions(geometry, games, move, key):
    def body(states, k):
        actions = policies.random_agent(geometry, k, states)
        return jax.vmap(lambda s, a: env_lib.step(geometry, s, a))(states, actions), None

    return jax.lax.scan(body, env_lib.batch_init(geometry, games), jax.random.split(key, move))[0]


@pytest.fixture(scope="module")
def positions_3x3():
    """96 random 3x3 games at each of moves 8, 14 and 19 (capture positions, long chains), then those of moves 14
    and 19 with their forced captures played (simple endgames among them): 480 positions."""
    geometry = board_geometry(3, 3)
    states = [random_positions(geometry, 96, move, jax.random.PRNGKey(move)) for move in (8, 14, 19)]
    states += [jax.vmap(lambda s: forced.play_forced_moves(env_lib.Env.of(geometry), s)[0])(s) for s in states[1:]]
    return geometry, jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), *states)


@pytest.mark.parametrize("way", ["whole", "lanes", "no switch"])
def test_the_settle_and_the_endgame_analysis_on_lanes_are_the_per_game_ones(positions_3x3, way):
    geometry, states = positions_3x3
    games = states.lines.shape[0]
    # The games that need each: still capturing after the settle's first turn; running simple endgames.
    settle = jax.vmap(lambda s: forced._settle_start(geometry, s))(states)
    going = functools.partial(forced._settle_going, geometry)
    settle_step = functools.partial(forced._settle_step, env_lib.Env.of(geometry))
    settle = jax.vmap(lambda c: loops._turn(going, settle_step, 2, c))(settle)
    capturing = int(jax.vmap(functools.partial(forced._settle_going, geometry))(settle).sum())
    simple = int((jax.vmap(lambda s: chains.is_simple_endgame(geometry, s))(states) & ~states.terminated).sum())
    assert 1 < min(capturing, simple) and max(capturing, simple) < games
    lanes = {"whole": 1, "lanes": max(capturing, simple), "no switch": games}[way]
    expected = jax.vmap(lambda s: forced.play_forced_moves_with_choice(env_lib.Env.of(geometry), s))(states)
    got = jax.jit(lambda s: forced.play_forced_moves_on_lanes(env_lib.Env.of(geometry), s, lanes))(states)
    for want, have in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)):
        np.testing.assert_array_equal(have, want)
    assert int(expected[1].max()) >= 3  # some game takes a long chain
    expected = jax.vmap(lambda s: endgame.simple_endgame_margin(geometry, s))(states)
    got = jax.jit(lambda s: endgame.simple_endgame_margin_on_lanes(geometry, s, lanes))(states)
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(have, want)


def test_a_search_is_the_same_at_any_lane_share(positions_3x3):
    geometry, states = positions_3x3
    config = config_lib.load_config("3x3")
    search = dataclasses.replace(config.search, num_simulations=8)
    params = network.init_params(config.network, geometry.grid_shape, jax.random.PRNGKey(0))
    evaluator = mcts.network_evaluator(config.network, geometry)
    env = env_lib.Env.of(geometry)
    roots = mcts.search_roots(search, env, jax.tree_util.tree_map(lambda x: x[96:192], states))
    outputs = []
    for share in (1.0, 0.25, 0.02):
        settings = dataclasses.replace(search, lane_share=share)
        run = jax.jit(lambda p, k, s, settings=settings: mcts.run_search(settings, env, evaluator, p, k, s))
        outputs.append(run(params, jax.random.PRNGKey(1), roots))
    for output in outputs[1:]:
        for want, have in zip(jax.tree_util.tree_leaves(outputs[0]), jax.tree_util.tree_leaves(output)):
            np.testing.assert_array_equal(have, want)


def test_a_lane_share_outside_zero_to_one_fails_naming_the_key():
    for share in (0, 1.5, -0.1):
        with pytest.raises(ValueError, match="search.lane_share"):
            mcts.SearchConfig(lane_share=share)
