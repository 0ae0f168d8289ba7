"""TD(lambda) learning (Kabir, 2004): returns, config validation, training on 2x2, the td:PATH agent."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.baselines import td
from dabjax.baselines.td_config import load_td_config
from dabjax.cli import train as train_cli
from dabjax.evaluation import agent_registry, arena
from dabjax.game import env as env_lib
from dabjax.game import match, policies
from dabjax.game.geometry import board_geometry
from dabjax.training.config import ConfigError

ROOT = pathlib.Path(__file__).resolve().parents[1]
TD_2X2 = str(ROOT / "configs" / "td_2x2.yaml")


def test_lambda_returns_match_a_hand_computed_example():
    # b_1, b_2, b_3 = 0.5, -0.2, z = 1; lambda = 0.5:
    # G_2 = z = 1; G_1 = 0.5 * -0.2 + 0.5 * 1 = 0.4; G_0 = 0.5 * 0.5 + 0.5 * 0.4 = 0.45
    returns = td.lambda_returns(jnp.array([0.5, -0.2, 1.0]), 0.5)
    np.testing.assert_allclose(np.asarray(returns), [0.45, 0.4, 1.0], rtol=1e-6)
    # lambda = 0: one-step TD targets; lambda = 1: the final result everywhere (Monte Carlo).
    np.testing.assert_allclose(np.asarray(td.lambda_returns(jnp.array([0.5, -0.2, 1.0]), 0.0)), [0.5, -0.2, 1.0])
    np.testing.assert_allclose(np.asarray(td.lambda_returns(jnp.array([0.5, -0.2, 1.0]), 1.0)), [1.0, 1.0, 1.0])


def test_forward_view_equals_accumulating_eligibility_traces():
    """For a linear V(s) = w . x(s) and offline updates, sum_t (G_t - V_t) x_t (forward view, what the
    trainer's semi-gradient uses) equals sum_t delta_t e_t with e_t = lambda e_{t-1} + x_t (backward view)."""
    rng = np.random.default_rng(0)
    steps, dim, lam = 6, 4, 0.7
    x = rng.normal(size=(steps, dim)).astype(np.float32)
    w = rng.normal(size=dim).astype(np.float32)
    z = 1.0
    values = x @ w
    next_values = np.append(values[1:], z)  # b_{t+1}; the last successor is the result
    forward = ((np.asarray(td.lambda_returns(jnp.asarray(next_values), lam)) - values)[:, None] * x).sum(0)
    trace, backward = np.zeros(dim), np.zeros(dim)
    for t in range(steps):
        trace = lam * trace + x[t]
        backward += (next_values[t] - values[t]) * trace
    np.testing.assert_allclose(forward, backward, rtol=1e-4, atol=1e-5)


def test_td_targets_take_each_side_to_move():
    # Two moves: the learner moves at t = 0, the opponent at t = 1, then the game is over (t = 2).
    record = td.GameRecord(
        features=jnp.zeros((3, 1, 1)),
        to_learner=jnp.array([[1.0], [-1.0], [1.0]]),
        live=jnp.array([[True], [True], [False]]),
        outcome=jnp.array([1.0]),
        margin=jnp.array([1]),
    )
    values = jnp.array([[0.2], [0.6], [0.0]])  # the opponent thinks it wins (0.6): -0.6 for the learner
    targets = np.asarray(td.td_targets(values, record, 0.5))[:, 0]
    # learner's view: G_1 = 1 (then the end), G_0 = 0.5 * -0.6 + 0.5 * 1 = 0.2; the opponent's: -G_1.
    np.testing.assert_allclose(targets, [0.2, -1.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize(
    "override, message",
    [
        ("td.lam=1.5", "td.lam must be in"),
        ("td.opponent=level3", "td.opponent must be one of"),
        ("td.games=7", "td.games must be even"),
        ("td.lamda=0.5", "config key 'td.lamda'"),
        ("network.hidden=[]", "network.hidden"),
        ("network.activation=gelu", "network.activation must be one of"),
        ("train.optimizer=rmsprop", "train.optimizer must be one of"),
        ("train.lr=0", "train.lr must be > 0"),
        ("eval.opponents=[solver]", "eval.opponents must be one of"),
        ("board.rows=0", "board.rows must be in"),
        ("td.epsilon=abc", "config key 'td.epsilon'"),
    ],
)
def test_config_errors_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_td_config(TD_2X2, [override])


def test_config_loads_the_shipped_files():
    config = load_td_config(str(ROOT / "configs" / "td_3x3.yaml"))
    assert (config.board.rows, config.td.opponent, config.network.hidden) == (3, "level0", (64,))
    assert load_td_config(TD_2X2, ["td.lam=0.3"]).td.lam == 0.3


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """The tiny 2x2 config trained through train.py (TD mode dispatch), 60 iterations of 128 games."""
    run_dir = tmp_path_factory.mktemp("td") / "run"
    assert train_cli.main(["--config", TD_2X2, f"run.dir={run_dir}", "--quiet"]) == 0
    return run_dir


def test_training_beats_level0_more_often_than_random_does(trained_run):
    geometry = board_geometry(2, 2)
    lines = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == list(range(1, 61))
    assert all(np.isfinite(m["loss"]) for m in lines)
    assert (trained_run / "config.yaml").is_file()
    agent = agent_registry.make_agent(f"td:{trained_run}", geometry)
    key = jax.random.PRNGKey(7)
    trained = arena.head_to_head(geometry, agent, policies.random_agent, key, 400)
    baseline = arena.head_to_head(geometry, policies.random_agent, policies.random_agent, key, 400)
    assert trained.win_rate > baseline.win_rate + 0.2, (trained, baseline)
    assert lines[-1]["eval/win_rate_vs_level0"] > 0.6


def test_resume_continues_from_the_checkpoint(trained_run):
    assert train_cli.main(["--config", TD_2X2, f"run.dir={trained_run}", "run.iterations=62", "--quiet"]) == 0
    lines = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines][-3:] == [60, 61, 62]
    assert td.load_td_checkpoint(trained_run).iteration == 62
    # Another network in the same run directory is refused, naming the key.
    assert train_cli.main(["--config", TD_2X2, f"run.dir={trained_run}", "network.hidden=[8]", "--quiet"]) == 2


def test_td_agent_plays_legal_moves_and_is_refused_elsewhere(trained_run):
    geometry = board_geometry(2, 2)
    agent = agent_registry.make_agent(f"td:{trained_run}", geometry)
    states = match.play_games(
        env_lib.Env.of(geometry), agent, policies.level1, jax.random.PRNGKey(0), env_lib.batch_init(geometry, 16)
    )
    # An illegal move ends the game at once with the mover's rewards -1: every game is played out instead.
    assert bool(states.lines.all()) and int(states.scores.sum()) == 16 * geometry.num_boxes
    with pytest.raises(ValueError, match="is for a 2x2 board"):
        agent_registry.make_agent(f"td:{trained_run}", board_geometry(3, 3))
    with pytest.raises(ValueError, match="is a TD run; use td:"):
        agent_registry.make_agent(f"ckpt:{trained_run}", geometry)
    with pytest.raises(FileNotFoundError):
        agent_registry.make_agent(f"td:{trained_run}/nothing", geometry)


def test_td_player_takes_a_free_box_when_it_knows_boxes_are_good():
    """With a value network that only sees the score (margin plane), the player completes a box."""
    geometry = board_geometry(2, 2)
    margin_value = lambda params, states: jnp.tanh(states.margin.astype(jnp.float32))
    state = env_lib.init(geometry)
    for line in geometry.box_lines[0][:3]:  # three sides of box 0, by both players
        state = env_lib.step(geometry, state, int(line))
    batch = jax.tree_util.tree_map(lambda x: x[None], state)
    act = jax.jit(lambda key, states: td.td_actions(margin_value, env_lib.Env.of(geometry), None, key, states))
    action = act(jax.random.PRNGKey(0), batch)
    assert int(action[0]) == int(geometry.box_lines[0][3])
