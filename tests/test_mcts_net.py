"""MCTS with rollouts cut off by a value network (Cotarelo et al., 2021, Algorithm 5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.baselines import mcts_net, td
from dabjax.baselines.td_config import load_td_config
from dabjax.evaluation import agent_registry
from dabjax.game import env as env_lib
from dabjax.game import match, policies
from dabjax.game.geometry import board_geometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts
from dabjax.training.checkpoint import CheckpointStore

GEOMETRY = board_geometry(2, 2)
ENV = env_lib.Env.of(GEOMETRY)
CONFIDENT_FROM = 5  # the stub network is sure of itself from move 5 on


def stub_value(params, states):
    """A stub network: 0.95 for the mover from move ``CONFIDENT_FROM`` on (if player 0 moves, else -0.95),
    0.5 before: its confidence is known exactly."""
    sign = jnp.where(states.current_player == 0, 1.0, -1.0)
    return jnp.where(states.num_moves >= CONFIDENT_FROM, 0.95, 0.5) * sign


@pytest.fixture(scope="module")
def start_states():
    """16 positions after 0..3 random moves, some with player 1 to move."""
    key = jax.random.PRNGKey(3)
    states = env_lib.batch_init(GEOMETRY, 16)
    for t in range(3):
        key, sub = jax.random.split(key)
        moves = policies.random_agent(GEOMETRY, sub, states)
        stepped = jax.vmap(lambda s, a: env_lib.step(GEOMETRY, s, a))(states, moves)
        keep = jnp.arange(16) % 4 > t
        pick = lambda a, b: jnp.where(keep.reshape((16,) + (1,) * (a.ndim - 1)), a, b)
        states = jax.tree_util.tree_map(pick, stepped, states)
    return states


@pytest.fixture(scope="module")
def rollout():
    return jax.jit(
        lambda key, states, threshold: mcts_net.cutoff_rollout(stub_value, ENV, None, key, states, threshold)
    )


def test_rollout_stops_when_the_network_is_confident(start_states, rollout):
    value, moves = rollout(jax.random.PRNGKey(0), start_states, 0.9)
    start = np.asarray(start_states.num_moves)
    np.testing.assert_array_equal(np.asarray(moves), CONFIDENT_FROM - start)
    # It returns the network's value, from the leaf's side: the stub's +-0.95, whatever the path.
    assert np.allclose(np.abs(np.asarray(value)), 0.95)
    # A leaf where the network is already confident is not rolled out at all: its own value comes back.
    confident = start_states.replace(num_moves=start_states.num_moves + CONFIDENT_FROM)
    late_value, late_moves = rollout(jax.random.PRNGKey(0), confident, 0.9)
    assert not np.asarray(late_moves).any()
    np.testing.assert_allclose(np.asarray(late_value), np.asarray(stub_value(None, confident)))


def test_threshold_above_one_is_the_plain_rollout(start_states, rollout):
    plain = jax.jit(mcts.rollout_evaluator(ENV))
    for seed in range(3):
        key = jax.random.PRNGKey(seed)
        value, moves = rollout(key, start_states, 1.01)
        _, expected = plain(None, key, start_states)
        np.testing.assert_array_equal(np.asarray(value), np.asarray(expected))
        np.testing.assert_array_equal(np.asarray(moves), GEOMETRY.num_lines - np.asarray(start_states.num_moves))


def test_search_with_the_cutoff_evaluator_plays_legal_moves(start_states):
    config = search_agents.pure_mcts_config(16)
    evaluator = mcts_net.cutoff_rollout_evaluator(stub_value, ENV, 0.9)
    agent = jax.jit(lambda key, states: search_agents.search_agent(config, ENV, evaluator, None)(GEOMETRY, key, states))
    actions = np.asarray(agent(jax.random.PRNGKey(1), start_states))
    assert not np.asarray(start_states.lines)[np.arange(16), actions].any()


@pytest.fixture(scope="module")
def td_run(tmp_path_factory):
    """An untrained TD network saved as a TD run would be (no training needed for legality)."""
    run_dir = tmp_path_factory.mktemp("mcts_net") / "run"
    config = load_td_config(None, ["board.rows=2", "board.cols=2", f"run.dir={run_dir}", "network.hidden=[8]"])
    state = td.init_state(config)
    store = CheckpointStore(run_dir)
    store.save(1, state.params, {"iteration": state.iteration}, td.meta(config))
    store.close()
    return run_dir


def test_mcts_net_agent_from_the_registry_plays_legal_moves(td_run):
    agent = agent_registry.make_agent(f"mcts-net:{td_run}:8:0.9", GEOMETRY)
    start = env_lib.batch_init(GEOMETRY, 4)
    states = match.play_games(ENV, agent, policies.random_agent, jax.random.PRNGKey(0), start)
    assert bool(states.lines.all()) and int(states.scores.sum()) == 4 * GEOMETRY.num_boxes


@pytest.mark.parametrize(
    "spec, message",
    [
        ("mcts-net:8:0.9", "write mcts-net:PATH:SIMS:THRESHOLD"),
        ("mcts-net:runs/x:0:0.9", "SIMS"),
        ("mcts-net:runs/x:8:high", "THRESHOLD must be a number"),
        ("mcts-net:runs/x:8:-1", "THRESHOLD must be a number"),
    ],
)
def test_mcts_net_spec_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        agent_registry.make_agent(spec, GEOMETRY)
