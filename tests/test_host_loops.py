"""The hot path without host callbacks (benchmarks/host_loops.py walks the jaxprs of its programs), whose while
loops a GPU runs as command buffers; the search's own loop gives mctx's tree."""

import pathlib

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.game import env as env_lib
from dabjax.game import loops
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, network, tree_search
from dabjax.training import config as config_lib
from dabjax.training import iteration, learner
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


host_loops = load_benchmark("host_loops")

# Tiny configs whose programs hold every part of the hot path: Gumbel with both prunings, node extraction and
# revisits (smoke); PUCT with Dirichlet noise and a graph network (AlphaZero on 2x2); dense
# heads and their losses.
CONFIGS = {
    "smoke": ("smoke.yaml", []),
    "dense": ("smoke.yaml", ["network.dense_heads=true", "targets.ownership_weight=1.0",
                             "targets.margin_weight=1.0"]),
    "puct-graph": ("3x3_alphazero.yaml", ["board.rows=2", "board.cols=2", "selfplay.games=4",
                                         "search.num_simulations=4", "network.kind=graph", "network.width=8",
                                         "network.blocks=1",
                                         "train.batch_size=8", "train.max_steps_per_iteration=2"]),
}


def tiny_config(name: str) -> config_lib.TrainConfig:
    path, overrides = CONFIGS[name]
    return config_lib.load_config(str(ROOT / "configs" / path), overrides)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_programs_hold_no_host_callback(name):
    counts = host_loops.count(tiny_config(name))
    assert set(counts) == {"self-play", "agent", "learning"}
    for program, found in counts.items():
        assert host_loops.host_callbacks(found) == [], program  # it would keep the loops out of command buffers
    # The same walk finds the data-dependent loops and branches, so it can fail.
    kinds = {program: {kind for kind, _ in found} for program, found in counts.items()}
    # A pruned search has a cond where its batch is larger than its lanes: loops.on_lanes chooses, for the whole
    # batch, where the settle and the endgame analysis run.
    config = tiny_config(name)
    search, batch = config.search, config.eval.batch_size
    on_lanes = (search.chain_pruning or search.endgame_pruning) and loops.lanes_for(batch, search.lane_share) < batch
    assert kinds["self-play"] == {"while", "cond"} and kinds["learning"] == {"while"}
    assert kinds["agent"] == ({"while", "cond"} if on_lanes else {"while"}), name
    assert on_lanes or name == "puct-graph"  # the AlphaZero preset prunes nothing


def test_the_walk_reads_nested_programs_and_names_the_place():
    def program(x):
        inner = jax.jit(lambda y: jax.lax.while_loop(lambda c: c < y, lambda c: c + 1.0, 0.0))
        scanned = jax.lax.fori_loop(0, 3, lambda _, c: c + jax.lax.cond(x > 0, lambda: 1.0, lambda: 2.0), 0.0)
        batched = jax.vmap(lambda v: jax.lax.cond(v > 0, lambda: v, lambda: -v))(jnp.arange(3.0))  # a select
        called = jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct((), jnp.float32), x)
        return inner(x) + scanned + batched.sum() + called

    found = loops.host_waits(jax.make_jaxpr(program)(2.0))
    assert sorted(kind for kind, _ in found) == ["cond", "pure_callback", "while"]
    assert all("test_host_loops.py" in where for _, where in found)
    assert [kind for kind, _ in host_loops.host_callbacks(found)] == ["pure_callback"]


def test_importing_dabjax_adds_command_buffers_exactly_where_they_work():
    import os

    # This process imported dabjax before its first computation: the flag is in XLA_FLAGS once where the
    # installed driver, runtime and jaxlib run command buffers or the environment forces them, and absent where
    # the environment opts out or the decision is off (without a GPU: no driver). XLA_FLAGS that set
    # command buffers themselves stand as they are.
    flags = os.environ.get("XLA_FLAGS", "")
    if loops.COMMAND_BUFFER_OPTION in flags.replace(loops.COMMAND_BUFFER_FLAG, ""):
        pytest.skip("XLA_FLAGS set command buffers before dabjax did")
    forced = os.environ.get(loops.COMMAND_BUFFERS_VARIABLE)
    on, _ = loops.command_buffer_decision(*loops.installed_versions())
    expected = forced == "1" or (forced != "0" and on)
    assert flags.count(loops.COMMAND_BUFFER_FLAG) == int(expected)


@pytest.fixture(scope="module")
def mid_game_search_inputs():
    """2x2 positions after a few random moves, forced captures played, and a small random network."""
    g = board_geometry(2, 2)
    key = jax.random.PRNGKey(0)
    states = env_lib.batch_init(g, 16)
    step = jax.jit(jax.vmap(lambda s, a: env_lib.step(g, s, a)))
    for _ in range(4):
        key, pick = jax.random.split(key)
        scores = jnp.where(states.legal_action_mask, jax.random.uniform(pick, states.legal_action_mask.shape), -1)
        states = step(states, jnp.argmax(scores, -1))
    net = network.NetworkConfig(kind="mlp", width=16, blocks=1, value_hidden=8)
    params = network.init_params(net, g.grid_shape, jax.random.PRNGKey(1))
    return g, states, net, params


def search_outputs(config, g, net, params, states, library=False):
    """The search's outputs; ``library``: through mctx's own ``search`` and Gumbel policy."""
    evaluator = mcts.network_evaluator(net, g)
    roots = mcts.search_roots(config, env_lib.Env.of(g), states)
    if library:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tree_search, "gumbel_muzero_policy", mctx.gumbel_muzero_policy)
            patch.setattr(tree_search, "search", mctx.search)
            run = jax.jit(lambda p, k, s: mcts.run_search(config, env_lib.Env.of(g), evaluator, p, k, s))
            return run(params, jax.random.PRNGKey(7), roots)
    run = jax.jit(lambda p, k, s: mcts.run_search(config, env_lib.Env.of(g), evaluator, p, k, s))
    return run(params, jax.random.PRNGKey(7), roots)


@pytest.mark.parametrize("algorithm,max_depth", [("gumbel", None), ("gumbel", 2), ("puct", None)])
def test_the_search_loop_gives_mctx_tree(mid_game_search_inputs, algorithm, max_depth):
    g, states, net, params = mid_game_search_inputs
    config = mcts.SearchConfig(algorithm=algorithm, num_simulations=12, max_num_considered_actions=4,
                               max_depth=max_depth)
    reference = search_outputs(config, g, net, params, states, library=True)
    assert int(reference.tree.node_visits[:, 0].min()) == 13  # every simulation backed up into the root
    ours = search_outputs(config, g, net, params, states)
    for mine, theirs in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(reference)):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_self_play_skips_idle_rounds_and_learning_runs_the_active_steps():
    trainer = trainer_lib.Trainer(tiny_config("smoke"))
    state = trainer.init_state()
    # st 6 of 12: the first rounds have no searching game (their search is skipped).
    record = jax.jit(trainer.core.self_play)(state.train_state.params, jax.random.PRNGKey(3), jnp.int32(6))
    assert int(record.searched[:6].sum()) == 0 and int(record.searched.sum()) > 0
    step = learner.make_train_step(trainer.geometry, trainer.model, trainer.optimizer, 1e-4)
    samples = iteration.build_samples(record, jnp.float32(0.0), jnp.bool_(True))
    count = samples.valid.shape[0]
    index = jax.random.randint(jax.random.PRNGKey(4), (4, 16), 0, count)
    sym = jnp.zeros((4, 16), jnp.int32)
    weights = jnp.ones(count)
    trained, compiled_metrics = jax.jit(
        lambda s, active: learner.run_steps(step, s, samples, weights, index, sym, active))(
        state.train_state, jnp.int32(2))
    assert int(trained.step) == 2  # two of the plan's four steps ran: the same as two steps driven from the host
    by_hand, host_metrics = learner.run_steps_on_host(jax.jit(step), state.train_state, samples, weights, index, sym, 2)
    assert int(by_hand.step) == 2
    for mine, theirs in zip(jax.tree_util.tree_leaves(trained), jax.tree_util.tree_leaves(by_hand)):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=1e-5, atol=1e-6)
    for name in learner.METRIC_NAMES:
        assert float(compiled_metrics[name]) == pytest.approx(float(host_metrics[name]), rel=1e-5, abs=1e-7), name


def test_the_descent_records_the_path_that_the_parents_give(mid_game_search_inputs):
    g, states, net, params = mid_game_search_inputs
    config = mcts.SearchConfig(num_simulations=12, max_num_considered_actions=4)
    tree = search_outputs(config, g, net, params, states).tree
    # Every node's visits are one more than the sum of its children's (each simulation passes once).
    used = tree.node_visits > 0
    children = tree.children_visits.sum(-1)
    expanded = np.asarray(used & (children > 0))
    np.testing.assert_array_equal(np.asarray(tree.node_visits)[expanded], np.asarray(children + 1)[expanded])
