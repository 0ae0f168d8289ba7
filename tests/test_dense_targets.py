"""Dense targets (issue 46): the final-ownership and final-margin heads, their targets from self-play and exact
labels, their losses, and warm starts from networks without them."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import heads, mcts, network, tree_nodes
from dabjax.training import config as config_lib
from dabjax.training import iteration, learner, replay, selfplay, supervised
from dabjax.training import trainer as trainer_lib

G = board_geometry(2, 2)  # 12 lines, 4 boxes
BASE = network.NetworkConfig(kind="mlp", width=16, blocks=1, value_hidden=8)
HEADS = dataclasses.replace(BASE, dense_heads=True)
SEARCH = mcts.SearchConfig(num_simulations=8, max_num_considered_actions=4, chain_pruning=False)


@pytest.fixture(scope="module")
def heads_params():
    return network.init_params(HEADS, G.grid_shape, jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def played(heads_params):
    """Self-play with dense targets and node augmentation: 8 games from move 4."""
    settings = selfplay.SelfPlaySettings(
        env=env_lib.Env.of(G), search=SEARCH, num_games=8, dense_targets=True,
        extraction=tree_nodes.ExtractionConfig(bands=((0, 0.0, 0.0),), max_nodes=2),
    )
    evaluator = mcts.network_evaluator(HEADS, G)
    play = jax.jit(lambda key: selfplay.self_play(settings, evaluator, heads_params, key, jnp.int32(4)))
    return play(jax.random.PRNGKey(1))


def test_final_targets_flip_with_the_side_to_move_and_leave_unclaimed_boxes_unknown():
    # A finished 2x2 game (by hand): player 0 owns box 0, player 1 boxes 1 and 2, box 3 left unclaimed (early
    # termination): scores 1-2.
    final = env_lib.batch_init(G, 1).replace(box_owner=jnp.array([[0, 1, 1, -1]], jnp.int32),
                                             scores=jnp.array([[1, 2]], jnp.int32))
    targets = selfplay.final_targets(G, final, jnp.array([[0], [1]], jnp.int32))  # [T=2, N=1]
    np.testing.assert_array_equal(np.asarray(targets.ownership)[:, 0], [[1, -1, -1, 0], [-1, 1, 1, 0]])
    np.testing.assert_allclose(np.asarray(targets.margin)[:, 0], [-0.25, 0.25])
    assert np.asarray(targets.margin_known).all()


def test_a_played_1x1_game_gives_the_box_to_its_capturer_from_each_side():
    g = board_geometry(1, 1)
    state = env_lib.init(g)
    movers = []
    for line in range(4):  # each player draws in turn; the fourth line completes the box for player 1
        movers.append(int(state.current_player))
        state = env_lib.step(g, state, jnp.int32(line))
    assert bool(state.terminated) and movers == [0, 1, 0, 1]
    final = jax.tree_util.tree_map(lambda x: x[None], state)
    targets = selfplay.final_targets(g, final, jnp.asarray(movers, jnp.int32)[:, None])
    np.testing.assert_array_equal(np.asarray(targets.ownership)[:, 0, 0], [-1, 1, -1, 1])
    np.testing.assert_allclose(np.asarray(targets.margin)[:, 0], [-1.0, 1.0, -1.0, 1.0])


def test_self_play_targets_are_the_played_games_and_tree_nodes_have_none(played):
    dense = played.dense
    searched = np.asarray(played.searched)
    ownership, margin = np.asarray(dense.ownership), np.asarray(dense.margin)
    assert ownership.shape == (G.num_lines, 8, G.num_boxes) and ownership.dtype == np.int8
    # Every box is claimed at the end (no early termination): the owners sum to the margin, whose sign is z.
    np.testing.assert_allclose(ownership.sum(-1)[searched] / G.num_boxes, margin[searched])
    np.testing.assert_array_equal(np.sign(margin[searched]), np.asarray(played.z)[searched])
    for game in range(8):  # two positions of a game: the same owners, or the opposite, by who moves
        rows = np.flatnonzero(searched[:, game])
        first, other = ownership[rows[0], game], ownership[rows[1:], game]
        assert all((o == first).all() or (o == -first).all() for o in other)
    samples = iteration.build_samples(played, jnp.float32(0.0), jnp.bool_(True))
    valid, from_node = np.asarray(samples.valid), np.asarray(samples.from_node)
    known = np.asarray(samples.dense.margin_known)
    assert (valid & from_node).any()
    assert known[valid & ~from_node].all() and not known[from_node].any()
    assert not np.asarray(samples.dense.ownership)[from_node].any()


def test_exact_labels_give_the_margin_and_no_ownership():
    lines = np.zeros((2, G.num_lines), bool)
    samples = supervised.exact_samples(lines, np.zeros((2, G.num_boxes), bool), np.zeros(2, np.int32),
                                       np.array([2, -4]), np.ones((2, G.num_lines), bool))
    np.testing.assert_allclose(np.asarray(samples.dense.margin), [0.5, -1.0])
    assert np.asarray(samples.dense.margin_known).all() and not np.asarray(samples.dense.ownership).any()
    assert replay.with_dense_targets(samples, False).dense is None


def test_heads_leave_the_policy_and_value_call_as_it_was(heads_params):
    base_params = network.init_params(BASE, G.grid_shape, jax.random.PRNGKey(0))
    assert heads.HEAD_PARAMS in heads_params["params"]
    trunk = {"params": {k: v for k, v in heads_params["params"].items() if k != heads.HEAD_PARAMS}}
    for a, b in zip(jax.tree_util.tree_leaves(base_params), jax.tree_util.tree_leaves(trunk)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the heads do not move the trunk's init
    observation = jax.vmap(lambda s: env_lib.observe(G, s))(env_lib.batch_init(G, 2))
    plain = network.PolicyValueNet(BASE).apply(base_params, observation)
    with_heads = network.PolicyValueNet(HEADS).apply(heads_params, observation)
    assert len(with_heads) == 2
    for a, b in zip(plain, with_heads):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    logits, value, ownership, margin = network.PolicyValueNet(HEADS).apply(heads_params, observation, dense=True)
    assert ownership.shape == (2, G.num_boxes) and margin.shape == (2,) and bool((jnp.abs(margin) <= 1).all())
    with pytest.raises(ValueError, match="no dense heads"):
        network.PolicyValueNet(BASE).apply(base_params, observation, dense=True)
    for kind in ("graph", "resnet"):  # the box-wise heads of the other trunks
        config = network.NetworkConfig(kind=kind, width=4, blocks=1, value_hidden=4, dense_heads=True)
        params = network.init_params(config, G.grid_shape, jax.random.PRNGKey(0))
        outputs = network.PolicyValueNet(config).apply(params, observation, dense=True)
        assert [o.shape for o in outputs] == [(2, G.num_lines), (2,), (2, G.num_boxes), (2,)]
    without_heads_field = {k: v for k, v in dataclasses.asdict(BASE).items() if k != "dense_heads"}
    with pytest.raises(ValueError, match="lack \\['dense_heads'\\]"):
        network.config_from_saved(without_heads_field)


def test_dense_losses_fall_on_a_tiny_overfit_and_weights_zero_give_todays_loss(played, heads_params):
    samples = iteration.build_samples(played, jnp.float32(0.0), jnp.bool_(True))
    count = int(samples.valid.shape[0])
    weights = samples.valid.astype(jnp.float32)
    index = jnp.argsort(~samples.valid)[:64].astype(jnp.int32)
    sym = jnp.zeros_like(index)
    # Weights 0: the loss of a network with heads is the loss of the same trunk without them (l2 0: the
    # regulariser covers the heads' kernels too).
    batch = learner.make_batch(G, samples, weights, index, sym)
    trunk = {"params": {k: v for k, v in heads_params["params"].items() if k != heads.HEAD_PARAMS}}
    with_heads, _ = learner.loss_fn(heads_params, network.PolicyValueNet(HEADS), batch, 0.0)
    without, metrics = learner.loss_fn(trunk, network.PolicyValueNet(BASE), replay_free(batch), 0.0)
    assert float(with_heads) == float(without) and float(metrics["ownership_loss"]) == 0.0
    optimizer = optax.adam(1e-2)
    step = jax.jit(learner.make_train_step(G, network.PolicyValueNet(HEADS), optimizer, 0.0, 1.0, 1.0))
    state = learner.init_train_state(heads_params, optimizer)
    history = []
    for _ in range(40):
        state, metrics = step(state, samples, weights, index, sym)
        history.append((float(metrics["ownership_loss"]), float(metrics["margin_loss"])))
    assert np.isfinite(history).all() and count > 64
    assert history[-1][0] < 0.5 * history[0][0] and history[-1][1] < 0.5 * history[0][1], history[::10]


def replay_free(batch):
    return batch.replace(dense=None)


def test_config_fields_are_checked():
    with pytest.raises(config_lib.ConfigError, match="targets.ownership_weight"):
        config_lib.load_config("smoke", ["targets.ownership_weight=1.0"])
    with pytest.raises(config_lib.ConfigError, match="targets.margin_weight"):
        config_lib.load_config("smoke", ["network.dense_heads=true", "targets.margin_weight=-1"])
    with pytest.raises(config_lib.ConfigError, match="network.dense_heads"):
        config_lib.load_config("smoke", ["network.dense_heads=maybe"])
    config = config_lib.load_config("smoke", ["network.dense_heads=true", "targets.ownership_weight=0.5",
                                              "targets.margin_weight=0.5"])
    assert config.network.dense_heads and config.targets.ownership_weight == config.targets.margin_weight == 0.5


def test_a_network_without_heads_warm_starts_the_trunk_of_one_with_them_and_back(tmp_path):
    config = config_lib.load_config("smoke", [f"run.dir={tmp_path}", "network.dense_heads=true",
                                              "targets.margin_weight=1.0"])
    trainer = trainer_lib.Trainer(config)
    source = network.init_params(dataclasses.replace(config.network, dense_heads=False), G.grid_shape,
                                 jax.random.PRNGKey(7))
    started = trainer.init_state(params=source).train_state.params
    fresh = trainer.init_state().train_state.params
    for name, subtree in source["params"].items():
        for a, b in zip(jax.tree_util.tree_leaves(subtree), jax.tree_util.tree_leaves(started["params"][name])):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree_util.tree_leaves(fresh["params"][heads.HEAD_PARAMS]),
                    jax.tree_util.tree_leaves(started["params"][heads.HEAD_PARAMS])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = network.init_params(dataclasses.replace(config.network, width=8), G.grid_shape, jax.random.PRNGKey(7))
    with pytest.raises(ValueError, match="do not fit"):
        trainer.init_state(params=other)
    # And back: a network with heads (a shipped agent) warm-starts one without, its heads dropped.
    headless = trainer_lib.Trainer(config_lib.load_config("smoke", [f"run.dir={tmp_path}"]))
    assert not headless.config.network.dense_heads
    dropped = headless.init_state(params=started).train_state.params
    assert heads.HEAD_PARAMS not in dropped["params"]
    for name, subtree in dropped["params"].items():
        for a, b in zip(jax.tree_util.tree_leaves(subtree), jax.tree_util.tree_leaves(started["params"][name])):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_warm_starts_allows_only_the_heads_to_differ():
    assert network.warm_starts(BASE, HEADS) and network.warm_starts(HEADS, HEADS)
    assert network.warm_starts(HEADS, BASE)  # the heads are dropped
    assert not network.warm_starts(BASE, dataclasses.replace(HEADS, width=8))
    assert not network.warm_starts(HEADS, dataclasses.replace(BASE, width=8))


def test_a_run_with_dense_heads_trains_them(tmp_path):
    """One smoke iteration with dense heads: the heads' losses are logged and finite, and the buffer's root
    samples carry known targets."""
    config = config_lib.load_config("smoke", [
        f"run.dir={tmp_path}", "network.dense_heads=true", "targets.ownership_weight=1.0", "targets.margin_weight=1.0",
        "curriculum.start_step=0", "curriculum.revisit=0.0", "augmentation.nodes=false"])
    trainer = trainer_lib.Trainer(config)
    state, metrics = trainer.iteration(trainer.init_state())
    assert metrics["ownership_loss"] > 0 and metrics["margin_loss"] > 0
    assert np.isfinite([metrics["loss"], metrics["ownership_loss"], metrics["margin_loss"]]).all()
    assert 0 < metrics["searched_positions"] <= config.selfplay.games * G.num_lines
    # The buffer holds a slot per round of every game, and nothing is dropped.
    assert trainer.capacity == config.selfplay.games * G.num_lines and metrics["dropped"] == 0
    samples = state.buffer.samples
    valid = np.asarray(samples.valid)
    assert np.asarray(samples.dense.margin_known)[valid].all()
