"""The hot path without host round trips: the bounded loop style's programs hold no ``while`` or ``cond``
(benchmarks/host_loops.py walks their jaxprs), and both styles, and mctx's own search, give the same results."""

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
from dabjax.training import learner
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


host_loops = load_benchmark("host_loops")

# Tiny configs whose programs hold every part of the hot path: Gumbel with both prunings, node extraction and
# revisits (smoke); PUCT with Dirichlet noise and a graph network with chain features (AlphaZero on 2x2); the
# middle-game levers (issue 46): dense heads and their losses, the margin utility, playout-cap randomisation.
CONFIGS = {
    "smoke": ("smoke.yaml", []),
    "dense-capped": ("smoke.yaml", ["network.dense_heads=true", "targets.ownership_weight=1.0",
                                    "targets.margin_weight=1.0", "search.margin_utility=0.2",
                                    "selfplay.full_search_share=0.5", "selfplay.cheap_simulations=2"]),
    "puct-graph": ("3x3_alphazero.yaml", ["board.rows=2", "board.cols=2", "selfplay.games=4",
                                         "search.num_simulations=4", "network.kind=graph", "network.width=8",
                                         "network.blocks=1", "network.chain_features=true",
                                         "train.batch_size=8", "train.max_steps_per_iteration=2"]),
}


def tiny_config(name: str) -> config_lib.TrainConfig:
    path, overrides = CONFIGS[name]
    return config_lib.load_config(str(ROOT / "configs" / path), overrides)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_bounded_programs_never_wait_for_the_host(name):
    config = tiny_config(name)
    bounded = host_loops.count(config, "bounded")
    assert set(bounded) == {"self-play", "agent", "learning"}
    for program, found in bounded.items():
        unexplained = [(kind, where) for kind, where in found if not host_loops.allowed(where)]
        assert unexplained == [], f"{program}: {unexplained}"
    # The same walk finds the data-dependent loops of the while style (the default), so it can fail; and that
    # style has no host callback, which would keep its loops out of a GPU's command buffers.
    kinds = {program: {kind for kind, _ in found} for program, found in host_loops.count(config, "while").items()}
    assert kinds["self-play"] == {"while", "cond"} and kinds["agent"] == {"while"} and kinds["learning"] == {"while"}


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
    assert host_loops.allowed("/x/dabjax/game/match.py:56 (part_moves)") and not host_loops.allowed(found[0][1])


def test_the_loop_style_is_while_unless_overridden(monkeypatch):
    monkeypatch.delenv(loops.ENVIRONMENT_VARIABLE, raising=False)
    for backend in ("cpu", "gpu", "tpu"):  # auto: while loops everywhere (a GPU runs them as command buffers)
        monkeypatch.setattr(jax, "default_backend", lambda: backend)
        assert loops.loop_style() == "while" and not loops.bounded()
    monkeypatch.undo()
    monkeypatch.setenv(loops.ENVIRONMENT_VARIABLE, "bounded")
    assert loops.loop_style() == "bounded"
    with loops.use_loop_style("while"):
        assert loops.loop_style() == "while" and not loops.bounded()
    monkeypatch.setenv(loops.ENVIRONMENT_VARIABLE, "fast")
    with pytest.raises(ValueError, match="DABJAX_LOOPS must be one of"):
        loops.loop_style()
    with pytest.raises(ValueError, match="loop style must be one of"):
        with loops.use_loop_style("fast"):
            pass


def test_importing_dabjax_adds_command_buffers_for_loops_to_xla_flags():
    import os

    # This process imported dabjax before its first computation: the flag is in XLA_FLAGS once (unless the
    # environment opted out or set command buffers itself).
    flags = os.environ.get("XLA_FLAGS", "")
    assert (flags.count(loops.COMMAND_BUFFER_FLAG) == 1 or os.environ.get(loops.COMMAND_BUFFERS_VARIABLE) == "0"
            or loops.COMMAND_BUFFER_OPTION in flags.replace(loops.COMMAND_BUFFER_FLAG, ""))
    environ = {"XLA_FLAGS": "--xla_dump_to=/tmp/dump"}
    assert loops.enable_command_buffers(environ)
    assert environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/dump {loops.COMMAND_BUFFER_FLAG}"
    assert not loops.enable_command_buffers(environ)  # once
    assert environ["XLA_FLAGS"].count("command_buffer") == 1
    own = {"XLA_FLAGS": "--xla_gpu_enable_command_buffer="}  # the user's choice (here: none) stands
    assert not loops.enable_command_buffers(own) and own["XLA_FLAGS"] == "--xla_gpu_enable_command_buffer="
    opted_out = {loops.COMMAND_BUFFERS_VARIABLE: "0"}
    assert not loops.enable_command_buffers(opted_out) and "XLA_FLAGS" not in opted_out
    fresh = {}
    assert loops.enable_command_buffers(fresh) and fresh["XLA_FLAGS"] == loops.COMMAND_BUFFER_FLAG


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


def search_outputs(config, g, net, params, states, style, library=False):
    """The search's outputs in ``style``; ``library``: through mctx's own ``search`` and Gumbel policy."""
    evaluator = mcts.network_evaluator(net, g)
    roots = mcts.prepare_roots(config, g, states)
    with loops.use_loop_style(style):
        if library:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(tree_search, "gumbel_muzero_policy", mctx.gumbel_muzero_policy)
                patch.setattr(tree_search, "search", mctx.search)
                run = jax.jit(lambda p, k, s: mcts.run_search(config, g, evaluator, p, k, s))
                return run(params, jax.random.PRNGKey(7), roots)
        run = jax.jit(lambda p, k, s: mcts.run_search(config, g, evaluator, p, k, s))
        return run(params, jax.random.PRNGKey(7), roots)


@pytest.mark.parametrize("algorithm,max_depth", [("gumbel", None), ("gumbel", 2), ("puct", None)])
def test_the_search_loop_gives_mctx_tree_in_both_styles(mid_game_search_inputs, algorithm, max_depth):
    g, states, net, params = mid_game_search_inputs
    config = mcts.SearchConfig(algorithm=algorithm, num_simulations=12, max_num_considered_actions=4,
                               max_depth=max_depth)
    reference = search_outputs(config, g, net, params, states, "while", library=True)
    assert int(reference.tree.node_visits[:, 0].min()) == 13  # every simulation backed up into the root
    for style in ("while", "bounded"):
        ours = search_outputs(config, g, net, params, states, style)
        for mine, theirs in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(reference)):
            np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_self_play_and_learning_are_the_same_in_both_styles():
    config = tiny_config("smoke")
    results = {}
    for style in ("while", "bounded"):
        with loops.use_loop_style(style):
            trainer = trainer_lib.Trainer(config)
            state = trainer.init_state()
            # st 6 of 12: the first rounds have no searching game (the while style skips their search).
            record = jax.jit(trainer._play)(state.train_state.params, jax.random.PRNGKey(3), jnp.int32(6))
            step = learner.make_train_step(trainer.geometry, trainer.model, trainer.optimizer, 1e-4)
            samples = trainer_lib.build_samples(record, jnp.float32(0.0), jnp.bool_(True))
            count = samples.valid.shape[0]
            index = jax.random.randint(jax.random.PRNGKey(4), (4, 16), 0, count)
            run = jax.jit(lambda s, active: learner.run_steps(step, s, samples, jnp.ones(count), index,
                                                              jnp.zeros((4, 16), jnp.int32), active))
            results[style] = (record, run(state.train_state, jnp.int32(2)))
    assert int(results["while"][0].searched[:6].sum()) == 0 and int(results["while"][0].searched.sum()) > 0
    trained = results["while"][1][0]
    assert int(trained.step) == 2  # two of the plan's four steps ran
    for mine, theirs in zip(jax.tree_util.tree_leaves(results["bounded"]), jax.tree_util.tree_leaves(results["while"])):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_the_descent_records_the_path_that_the_parents_give(mid_game_search_inputs):
    g, states, net, params = mid_game_search_inputs
    config = mcts.SearchConfig(num_simulations=12, max_num_considered_actions=4)
    tree = search_outputs(config, g, net, params, states, "bounded").tree
    # Every node's visits are one more than the sum of its children's (each simulation passes once).
    used = tree.node_visits > 0
    children = tree.children_visits.sum(-1)
    expanded = np.asarray(used & (children > 0))
    np.testing.assert_array_equal(np.asarray(tree.node_visits)[expanded], np.asarray(children + 1)[expanded])
