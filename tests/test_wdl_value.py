"""The win / draw / loss value head (``network.value_head: wdl``, Leela Chess Zero's): what the search reads, its
cross-entropy loss, its targets from results and mixed z / Q values, and warm starts from a ``tanh`` head."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import network
from dabjax.training import config as config_lib
from dabjax.training import supervised
from dabjax.training import trainer as trainer_lib

G = board_geometry(2, 2)  # 12 lines, 4 boxes
TANH = network.NetworkConfig(kind="graph", width=8, blocks=1, value_hidden=8, dense_heads=True)
WDL = dataclasses.replace(TANH, value_head="wdl")


@pytest.fixture(scope="module")
def observation():
    """Four 2x2 positions: the empty board and three after 3, 6 and 9 random lines."""
    states, key, state = [], jax.random.PRNGKey(3), env_lib.init(G)
    for moves in range(10):
        if moves in (0, 3, 6, 9):
            states.append(state)
        key, pick = jax.random.split(key)
        state = env_lib.step(G, state, jax.random.choice(pick, G.num_lines, p=~state.lines / (~state.lines).sum()))
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *states)
    return jax.vmap(lambda s: env_lib.observe(G, s))(batch)


def test_the_search_reads_p_win_minus_p_loss_of_the_sown_logits(observation):
    params = network.init_params(WDL, G.grid_shape, jax.random.PRNGKey(0))
    assert params["params"][network.WDL_PARAMS]["kernel"].shape == (WDL.value_hidden, 3)
    (logits, value), sown = network.PolicyValueNet(WDL).apply(params, observation, mutable=["intermediates"])
    wdl = network.value_logits(sown)
    p = np.asarray(jax.nn.softmax(wdl, -1))
    assert wdl.shape == (4, 3) and logits.shape == (4, G.num_lines)
    np.testing.assert_allclose(np.asarray(value), p[:, 0] - p[:, 2], atol=1e-6)
    assert bool((jnp.abs(value) <= 1).all())
    # The plain call (the search's and play's) gives the same value, and the dense heads are still there.
    _, plain = network.PolicyValueNet(WDL).apply(params, observation)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(value))
    assert len(network.PolicyValueNet(WDL).apply(params, observation, dense=True)) == 4


def test_targets_keep_the_expectation_and_put_results_in_one_class():
    target = jnp.array([1.0, 0.0, -1.0, 0.5, -0.25])
    wdl = np.asarray(network.wdl_target(target))
    np.testing.assert_allclose(wdl[:3], np.eye(3))  # a won, drawn and lost game: one class each
    np.testing.assert_allclose(wdl.sum(-1), 1.0)
    np.testing.assert_allclose(wdl[:, 0] - wdl[:, 2], np.asarray(target))  # expectation = the target
    assert (wdl >= 0).all() and (wdl[:, 0] * wdl[:, 2] == 0).all()  # never both a win and a loss


def test_the_loss_is_the_cross_entropy_and_tanh_keeps_the_squared_error():
    logits = jax.random.normal(jax.random.PRNGKey(1), (5, 3))
    target = jnp.array([1.0, 0.0, -1.0, 0.5, -0.25])
    sown = {"intermediates": {network.WDL_LOGITS: (logits,)}}
    loss = network.value_head_loss(WDL, network.expected_value(logits), target, sown)
    expected = -(np.asarray(network.wdl_target(target)) * np.asarray(jax.nn.log_softmax(logits, -1))).sum(-1)
    np.testing.assert_allclose(np.asarray(loss), expected, rtol=1e-6)
    # Its gradient is softmax - target: zero where the head predicts the target distribution.
    grad = jax.grad(lambda x: network.value_head_loss(WDL, network.expected_value(x), target,
                                                      {"intermediates": {network.WDL_LOGITS: (x,)}}).sum())(logits)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(jax.nn.softmax(logits, -1) - network.wdl_target(target)),
                               atol=1e-6)
    value = jnp.array([0.2, -0.3, 0.9, 0.0, 0.1])
    np.testing.assert_allclose(np.asarray(network.value_head_loss(TANH, value, target, {})),
                               np.square(np.asarray(target - value)))


def test_a_tanh_head_warm_starts_a_wdl_one_with_the_same_values(observation):
    source = network.init_params(TANH, G.grid_shape, jax.random.PRNGKey(5))
    fresh = network.init_params(WDL, G.grid_shape, jax.random.PRNGKey(6))
    assert network.warm_starts(TANH, WDL) and not network.warm_starts(WDL, TANH)
    assert not network.warm_starts(TANH, dataclasses.replace(WDL, width=4))
    converted = network.with_heads_of(source, fresh)
    assert jax.tree_util.tree_structure(converted) == jax.tree_util.tree_structure(fresh)
    _, before = network.PolicyValueNet(TANH).apply(source, observation)
    _, after = network.PolicyValueNet(WDL).apply(converted, observation)
    # Only the small draw share (CONVERTED_DRAW_BIAS) separates them: under 1% of the value.
    np.testing.assert_allclose(np.asarray(after), np.asarray(before), atol=0.01 * float(jnp.abs(before).max()) + 1e-6)
    assert float(jnp.abs(before).max()) > 0.05  # a value to keep, not a network that says 0 everywhere
    # The trunk and the other heads carry over untouched.
    for name, subtree in converted["params"].items():
        if name != network.WDL_PARAMS:
            for a, b in zip(jax.tree_util.tree_leaves(subtree), jax.tree_util.tree_leaves(source["params"][name])):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert network.with_heads_of(converted, fresh) is converted  # a wdl network is left as it is
    # A source with dense heads into a wdl network without them: converted, and the heads dropped.
    headless = network.init_params(dataclasses.replace(WDL, dense_heads=False), G.grid_shape, jax.random.PRNGKey(6))
    assert network.warm_starts(TANH, dataclasses.replace(WDL, dense_heads=False))
    assert (jax.tree_util.tree_structure(network.with_heads_of(source, headless))
            == jax.tree_util.tree_structure(headless))
    # The trainer's warm start (run.init_from) takes the same path.
    config = config_lib.load_config("smoke", ["network.kind=graph", "network.width=8", "network.blocks=1",
                                              "network.value_hidden=8", "network.dense_heads=true",
                                              "network.value_head=wdl"])
    started = trainer_lib.Trainer(config).init_state(params=source).train_state.params
    np.testing.assert_array_equal(np.asarray(started["params"][network.WDL_PARAMS]["kernel"]),
                                  np.asarray(converted["params"][network.WDL_PARAMS]["kernel"]))


def test_a_wdl_network_fitted_to_draws_values_positions_near_0(observation):
    """Exact labels that say "draw" for every position, through the trainer's loss (``supervised.fit``): the wdl
    value of a network that started sure of a win falls toward 0."""
    count = 64
    lines = np.zeros((count, G.num_lines), bool)
    rng = np.random.default_rng(0)
    for i in range(count):  # at most 3 lines: no box is complete
        lines[i, rng.choice(G.num_lines, rng.integers(0, 4), replace=False)] = True
    claimed = np.zeros((count, G.num_boxes), bool)
    samples = supervised.exact_samples(lines, claimed, np.zeros(count, np.int32), np.zeros(count, np.int32),
                                       ~lines)
    params = network.init_params(WDL, G.grid_shape, jax.random.PRNGKey(0))
    params["params"][network.WDL_PARAMS]["bias"] = jnp.array([2.0, -2.0, -1.0])  # starts sure of a win
    fitted = supervised.fit(G, WDL, samples, jax.random.PRNGKey(1), steps=200, params=params, lr=1e-2,
                            batch_size=32)
    _, value = network.PolicyValueNet(WDL).apply(fitted.params, observation)
    _, start = network.PolicyValueNet(WDL).apply(params, observation)
    assert float(jnp.abs(value).mean()) < 0.25 * float(jnp.abs(start).mean()), (value, start)


def test_the_config_key_is_checked_and_old_checkpoints_read_as_tanh():
    with pytest.raises(config_lib.ConfigError, match="network.value_head"):
        config_lib.load_config("smoke", ["network.value_head=softmax"])
    assert config_lib.load_config("smoke", ["network.value_head=wdl"]).network.value_head == "wdl"
    saved_before = {k: v for k, v in dataclasses.asdict(TANH).items() if k != "value_head"}
    assert network.config_from_saved(saved_before).value_head == "tanh"
    assert network.config_from_saved(dataclasses.asdict(WDL)) == WDL
