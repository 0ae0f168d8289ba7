"""Search over the true game: turn-aware discount, terminal handling, prunings, extraction, agents."""

import dataclasses
import functools

import flax.errors
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import all_line_sets, load_benchmark, states_from_lines

from dabjax.game import env as env_lib
from dabjax.game import forced, policies
from dabjax.game.geometry import board_geometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network, tree_nodes
from dabjax.solvers import labelled, retrograde


def zero_evaluator(params, key, states):
    """Uniform prior, value 0: the search alone must find the moves."""
    return jnp.zeros(states.lines.shape, jnp.float32), jnp.zeros(states.lines.shape[0], jnp.float32)


@functools.lru_cache(maxsize=None)
def searcher(config, rows, cols):
    g = board_geometry(rows, cols)
    return jax.jit(lambda key, states: mcts.run_search(config, env_lib.Env.of(g), zero_evaluator, None, key, states))


def _only_winner_is_a_capture(geometry, table):
    """Positions (no box claimed yet) whose only winning move completes a box and keeps the turn."""
    lines = all_line_sets(geometry.num_lines)
    lines = lines[~lines[:, geometry.box_lines].all(-1).any(1)]  # score 0-0 so far
    values = retrograde.move_values(geometry, table, lines).astype(int)
    legal = ~lines
    winning = legal & (values > 0)
    classes = np.asarray(jax.vmap(lambda l: policies.move_classes(geometry, l))(lines))
    completes = classes == policies.COMPLETES_BOX
    pick = (winning.sum(1) == 1) & (winning & completes).any(1) & (legal.sum(1) >= 3) & (legal.sum(1) <= 5)
    pick &= ~(legal & ~winning & (values >= 0)).any(1)  # every other move loses
    return lines[pick], np.argmax(winning[pick], axis=1)


@pytest.mark.parametrize("algorithm", ["gumbel", "puct", "uct"])
def test_turn_aware_discount_finds_the_capture_that_moves_again(algorithm):
    """No pruning, random-rollout values: a wrong sign after the capture would steer the search away."""
    g = board_geometry(2, 2)
    lines, winner = _only_winner_is_a_capture(g, retrograde.solve_table(g))
    assert len(lines) >= 16
    lines, winner = lines[:32], winner[:32]
    config = mcts.SearchConfig(algorithm=algorithm, num_simulations=256, endgame_pruning=False,
                                 chain_pruning=False, gumbel_scale=0.0, dirichlet_fraction=0.0)
    rollouts = mcts.rollout_evaluator(env_lib.Env.of(g))
    run = jax.jit(lambda key, states: mcts.run_search(config, env_lib.Env.of(g), rollouts, None, key, states))
    out = run(jax.random.PRNGKey(0), states_from_lines(g, lines))
    chosen = np.asarray(out.action)
    # With the constant -1 discount of the usual two-player examples this share is 0.19 for all three.
    assert (chosen == winner).mean() >= (0.75 if algorithm == "gumbel" else 0.9)
    assert (np.asarray(out.root_q) > 0).mean() >= 0.75  # the root knows it wins


def test_recurrent_fn_discounts_rewards_and_terminals():
    g = board_geometry(1, 2)
    config = mcts.SearchConfig(endgame_pruning=False, chain_pruning=False)
    recurrent = jax.jit(mcts.make_recurrent_fn(config, env_lib.Env.of(g), zero_evaluator))
    # Box 0 has three sides: v 0 1 captures it (turn kept), h 0 1 does not (turn passes).
    base = ["h 0 0", "h 1 0", "v 0 0"]
    lines = np.zeros((3, g.num_lines), bool)
    for name in base:
        row, col = int(name[2]), int(name[4])
        lines[:, g.h_line(row, col) if name[0] == "h" else g.v_line(row, col)] = True
    # Third state: everything drawn but the middle line: it ends the game with a double capture.
    lines[2] = True
    lines[2, g.v_line(0, 1)] = False
    states = states_from_lines(g, lines)
    states = states.replace(current_player=jnp.zeros(3, jnp.int32), scores=jnp.zeros((3, 2), jnp.int32),
                            box_owner=-jnp.ones((3, 2), jnp.int8))
    actions = jnp.array([g.v_line(0, 1), g.h_line(0, 1), g.v_line(0, 1)], jnp.int32)
    out, nxt = recurrent(None, jax.random.PRNGKey(0), actions, states)
    assert out.discount.tolist() == [1.0, -1.0, 0.0]
    assert out.reward.tolist() == [0.0, 0.0, 1.0]  # the mover takes both boxes and wins
    assert bool(nxt.terminated[2]) and out.value[2] == 0.0
    # Below a terminal node nothing counts.
    out2, _ = recurrent(None, jax.random.PRNGKey(1), actions, nxt)
    assert out2.discount[2] == 0.0 and out2.reward[2] == 0.0


def test_endgame_pruning_solves_simple_endgames_as_leaves():
    g = board_geometry(2, 2)
    config = mcts.SearchConfig(num_simulations=64, chain_pruning=True, endgame_pruning=True)
    # A position whose only components are chains: every box has two undrawn sides.
    lines = all_line_sets(g.num_lines)
    drawn = lines[:, g.box_lines].sum(-1)
    simple = lines[(drawn == 2).all(1)][:16]
    states = states_from_lines(g, simple)
    out = searcher(config, 2, 2)(jax.random.PRNGKey(0), states)
    table = retrograde.solve_table(g)
    exact = np.sign(table[retrograde.position_keys(simple)])  # the result: +1 win, 0 draw, -1 loss
    assert bool(out.root_solved.all()) and set(exact) >= {-1, 1}
    np.testing.assert_array_equal(np.asarray(out.root_q), exact)


@pytest.fixture(scope="module")
def labelled_3x3():
    return labelled.load("data/3x3.npz")


def test_pruned_search_with_uniform_prior_finds_best_result_moves_late(labelled_3x3):
    config = mcts.SearchConfig(num_simulations=64, gumbel_scale=0.0)
    agent = search_agents.search_agent(config, env_lib.Env(3, 3), zero_evaluator, None)
    late = labelled.subset(labelled_3x3, labelled_3x3.move_numbers >= 14)
    acc = labelled.accuracy_by_move_number(jax.jit(agent, static_argnums=0), late, jax.random.PRNGKey(0))
    table = {int(m): r for m, r in zip(acc.move_numbers, acc.best_result)}
    for move in range(14, 24):
        assert table[move] >= 0.9, (move, table[move])


def test_extraction_returns_only_qualifying_nodes():
    g = board_geometry(3, 3)
    config = mcts.SearchConfig(num_simulations=96, algorithm="gumbel")
    extraction = tree_nodes.ExtractionConfig(max_nodes=8)
    rng = np.random.default_rng(3)
    lines = rng.random((64, g.num_lines)) < 0.55
    states = states_from_lines(g, lines)
    states = states.replace(terminated=jnp.zeros(64, bool), legal_action_mask=jnp.asarray(~lines))
    out = searcher(config, 3, 3)(jax.random.PRNGKey(0), states)
    start_step = 10
    nodes = jax.jit(lambda tree: tree_nodes.extract_nodes(extraction, tree, start_step, mcts.gumbel_policy))(out.tree)
    index, chosen = tree_nodes.most_visited_qualifying(extraction, out.tree, start_step)
    valid = np.asarray(nodes.valid)
    np.testing.assert_array_equal(valid, np.asarray(chosen))
    assert valid.any() and not valid.all()
    root_visits = np.asarray(out.tree.node_visits[:, 0])
    fraction, threshold = tree_nodes.node_thresholds(extraction, nodes.move_number, start_step)
    fraction, threshold = np.asarray(fraction), np.asarray(threshold)
    visits = np.take_along_axis(np.asarray(out.tree.node_visits), np.asarray(index), axis=1)
    value = np.asarray(nodes.value)
    assert (visits[valid] > (fraction * root_visits[:, None])[valid]).all()
    assert (np.abs(value[valid]) > threshold[valid]).all()
    policy = np.asarray(nodes.policy)[valid]
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    # The samples are the nodes' own positions: compact, and rebuilt into the network's input at training time.
    node_states = jax.tree_util.tree_map(lambda x: np.take_along_axis(
        np.asarray(x), np.asarray(index).reshape(index.shape + (1,) * (x.ndim - 2)), axis=1), out.tree.embeddings)
    np.testing.assert_array_equal(np.asarray(nodes.positions.lines), node_states.lines)
    np.testing.assert_array_equal(np.asarray(nodes.move_number), node_states.num_moves)
    observe = lambda p: env_lib.observation_from(g, p.lines, p.claimed, p.margin)
    observation = jax.vmap(jax.vmap(observe))(nodes.positions)
    assert observation.shape == (64, 8, 7, 7, env_lib.NUM_PLANES)
    # Cross-check the filter against the whole tree: every qualifying node is found (up to K per game).
    qualifies = np.asarray(tree_nodes.qualifying_nodes(extraction, out.tree, start_step))
    np.testing.assert_array_equal(valid.sum(1), np.minimum(qualifies.sum(1), 8))
    assert not qualifies[:, 0].any()  # never the root


def test_thresholds_follow_table_a2():
    config = tree_nodes.ExtractionConfig()
    moves = jnp.array([10, 12, 13, 15, 19, 20, 24, 25, 40])
    fraction, threshold = tree_nodes.node_thresholds(config, moves, 10)
    np.testing.assert_allclose(np.asarray(fraction), [0.15, 0.15, 0.2, 0.21, 0.21, 0.22, 0.22, 0.23, 0.23])
    np.testing.assert_allclose(np.asarray(threshold), [0.5, 0.5, 0.6, 0.7, 0.7, 0.8, 0.8, 0.85, 0.85])
    with pytest.raises(ValueError, match="offset 0"):
        tree_nodes.ExtractionConfig(bands=((1, 0.1, 0.5),))


def test_network_shapes_parameters_and_masking():
    paper = network.NetworkConfig(width=160, blocks=6, value_hidden=128)
    params = jax.eval_shape(lambda: network.init_params(paper, (11, 11), jax.random.PRNGKey(0)))
    assert 2.5e6 < network.num_parameters(params) < 3.5e6  # "about 3 M" as the paper
    small = network.NetworkConfig(width=16, blocks=1, value_hidden=8)
    params = network.init_params(small, (5, 5), jax.random.PRNGKey(0))
    model = network.PolicyValueNet(small)
    for rows, cols in [(2, 2), (3, 3), (2, 4)]:  # one set of parameters, any board
        obs = jax.random.uniform(jax.random.PRNGKey(1), (4, 2 * rows + 1, 2 * cols + 1, 4))
        logits, value = model.apply(params, obs)
        assert logits.shape == (4, board_geometry(rows, cols).num_lines) and value.shape == (4,)
        assert bool((jnp.abs(value) <= 1).all())
    masked = network.mask_logits(jnp.zeros(3), jnp.array([True, False, True]))
    assert float(jax.nn.softmax(masked)[1]) == 0.0
    with pytest.raises(ValueError, match="network.width"):
        network.NetworkConfig(width=0)
    with pytest.raises(ValueError, match="network.parity_plane"):
        network.NetworkConfig(parity_plane=1)


def test_parity_plane_switch_and_checkpoints_from_before_it():
    obs = jax.random.uniform(jax.random.PRNGKey(1), (2, 7, 7, 4))
    flipped = obs.at[..., 3].set(1.0 - obs[..., 3])
    for parity_plane in (True, False):
        config = network.NetworkConfig(width=8, blocks=1, value_hidden=8, parity_plane=parity_plane)
        params = network.init_params(config, (7, 7), jax.random.PRNGKey(0))
        assert params["params"]["Conv_0"]["kernel"].shape[2] == config.input_planes
        model = network.PolicyValueNet(config)
        changed = not np.allclose(model.apply(params, obs)[0], model.apply(params, flipped)[0])
        assert changed == parity_plane  # the paper's input ignores the fourth plane
    saved = dataclasses.asdict(network.NetworkConfig(width=8))
    assert network.config_from_saved(saved).parity_plane
    del saved["parity_plane"], saved["width"]  # every field is written: none is filled in from the defaults
    with pytest.raises(ValueError, match="lack \\['width', 'parity_plane'\\]"):
        network.config_from_saved(saved)


def test_mlp_network_reads_the_whole_grid_and_fits_one_board():
    config = network.NetworkConfig(kind="mlp", width=32, blocks=2, value_hidden=8)
    params = network.init_params(config, (7, 7), jax.random.PRNGKey(0))
    assert params["params"]["Dense_0"]["kernel"].shape == (7 * 7 * 4, 32)  # the flattened observation
    assert 7 * 7 * 4 * 32 < network.num_parameters(params) < 7 * 7 * 4 * 32 + 6000
    model = network.PolicyValueNet(config)
    obs = jax.random.uniform(jax.random.PRNGKey(1), (3, 7, 7, 4))
    logits, value = model.apply(params, obs)
    assert logits.shape == (3, 24) and value.shape == (3,) and bool((jnp.abs(value) <= 1).all())
    # Dense, not local: a change in one corner of the grid moves every line's logit; a ResNet with no
    # blocks (receptive field radius 2) leaves the far lines' logits alone.
    corner = obs.at[:, 0, 0, 0].add(1.0)
    assert bool((model.apply(params, corner)[0] != logits).all())
    local = network.NetworkConfig(kind="resnet", width=8, blocks=0, value_hidden=8)
    local_params = network.init_params(local, (7, 7), jax.random.PRNGKey(0))
    local_model = network.PolicyValueNet(local)
    moved = local_model.apply(local_params, corner)[0] != local_model.apply(local_params, obs)[0]
    assert 0 < int(moved[0].sum()) < 24
    with pytest.raises(flax.errors.ScopeParamShapeError):  # another board's grid does not fit an MLP's
        model.apply(params, jnp.zeros((1, 5, 5, 4)))
    paper_input = network.NetworkConfig(kind="mlp", width=32, blocks=0, value_hidden=8, parity_plane=False)
    paper_params = network.init_params(paper_input, (7, 7), jax.random.PRNGKey(0))
    assert paper_params["params"]["Dense_0"]["kernel"].shape[0] == 147
    with pytest.raises(ValueError, match="network.kind"):
        network.NetworkConfig(kind="gnn")
    saved = dataclasses.asdict(config)
    assert network.config_from_saved(saved) == config


@pytest.mark.parametrize("algorithm", ["gumbel", "puct", "uct"])
def test_the_search_outputs_mean_the_same_for_every_algorithm(algorithm):
    """Whatever the algorithm: the moves are searchable (legal, and the forced capture where there is one), the
    policy target a distribution over them, the visit counts the root's (summing to the simulations), and the
    move to play the most visited for PUCT and UCT, whose policy target is the visit distribution; the policy of
    an extracted tree node is a distribution too (the visit distribution for PUCT and UCT)."""
    g = board_geometry(3, 3)
    config = mcts.SearchConfig(algorithm=algorithm, num_simulations=24, max_num_considered_actions=8)
    assert mcts.search_function(config) is {"gumbel": mcts.gumbel_search, "puct": mcts.puct_search,
                                            "uct": mcts.uct_search}[algorithm]
    small = network.NetworkConfig(kind="mlp", width=8, blocks=1, value_hidden=8)
    params = network.init_params(small, g.grid_shape, jax.random.PRNGKey(0))
    rng = np.random.default_rng(4)
    lines = rng.random((32, g.num_lines)) < 0.4
    states = mcts.search_roots(config, env_lib.Env.of(g), states_from_lines(g, lines))
    assert not np.asarray(states.terminated).any()
    search = mcts.search_function(config)
    extraction = tree_nodes.ExtractionConfig(bands=((0, 0.1, 0.0),), max_nodes=4)  # nodes of 3 visits or more

    def run(key, states):
        out = search(config, env_lib.Env.of(g), mcts.network_evaluator(small, g), params, key, states)
        return out, tree_nodes.extract_nodes(extraction, out.tree, 0, mcts.node_policy(config))

    out, nodes = jax.jit(run)(jax.random.PRNGKey(1), states)
    rows = np.arange(len(lines))
    searchable = np.asarray(jax.vmap(lambda s: forced.searchable_mask(g, s))(states))
    policy, visits = np.asarray(out.policy_target), np.asarray(out.visit_counts)
    for move in (np.asarray(out.action), np.asarray(out.sampled_action)):
        assert move.shape == (32,) and searchable[rows, move].all()
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert (policy >= 0).all() and (policy[~searchable] == 0).all()
    np.testing.assert_array_equal(visits, np.asarray(out.tree.children_visits[:, 0]))
    assert (visits.sum(-1) == 24).all() and (visits[~searchable] == 0).all()
    assert out.root_q.shape == out.root_value.shape == (32,) and bool((jnp.abs(out.root_q) <= 1).all())
    node_policy = np.asarray(nodes.policy)[np.asarray(nodes.valid)]
    assert len(node_policy) and np.allclose(node_policy.sum(-1), 1.0, atol=1e-5)
    if algorithm == "gumbel":
        assert (np.asarray(out.sampled_action) == np.asarray(out.action)).all()
    else:
        np.testing.assert_allclose(policy, visits / visits.sum(-1, keepdims=True), rtol=1e-6)
        assert (visits[rows, np.asarray(out.action)] == visits.max(-1)).all()
        index, valid = tree_nodes.most_visited_qualifying(extraction, out.tree, 0)
        counts = np.take_along_axis(np.asarray(out.tree.children_visits), np.asarray(index)[..., None], axis=1)
        counts = counts[np.asarray(valid)]
        np.testing.assert_allclose(node_policy, counts / counts.sum(-1, keepdims=True), rtol=1e-6)


def test_search_config_validation():
    with pytest.raises(ValueError, match="search.algorithm"):
        mcts.SearchConfig(algorithm="alpha")
    with pytest.raises(ValueError, match="num_simulations"):
        mcts.SearchConfig(num_simulations=0)
    with pytest.raises(ValueError, match="search.max_depth"):
        mcts.SearchConfig(max_depth=0)


def test_max_depth_caps_the_tree_and_node_depths_follow_parents():
    node_depths = load_benchmark("search_throughput").node_depths
    g = board_geometry(3, 3)
    lines = np.zeros((8, g.num_lines), bool)
    lines[:, :14] = True  # 10 lines left: the uncapped trees go deeper than 2
    lines = np.stack([np.roll(row, shift) for shift, row in enumerate(lines)])
    states = states_from_lines(g, lines)
    deepest = {}
    for cap in (None, 2):
        config = mcts.SearchConfig(num_simulations=64, gumbel_scale=0.0, max_depth=cap)
        tree = searcher(config, 3, 3)(jax.random.PRNGKey(0), states).tree
        depths = np.asarray(node_depths(tree))
        parents = np.asarray(tree.parents)
        created = np.asarray(tree.node_visits) > 0
        for game, node in zip(*np.nonzero(created[:, 1:])):
            assert depths[game, node + 1] == depths[game, parents[game, node + 1]] + 1
        deepest[cap] = depths[created].max()
    assert deepest[None] > 2 and deepest[2] == 2, deepest


def test_agents_run_under_jit_and_vmap():
    """A vmapped agent plays each group of games as it plays that group alone, each move legal in its own game;
    pure MCTS under jit plays legal moves and the only one where one line is left."""
    g = board_geometry(2, 2)
    config = mcts.SearchConfig(num_simulations=8, gumbel_scale=0.0)
    small = network.NetworkConfig(width=8, blocks=1, value_hidden=8)
    params = network.init_params(small, g.grid_shape, jax.random.PRNGKey(0))
    agent = search_agents.search_agent(config, env_lib.Env.of(g), mcts.network_evaluator(small, g), params)
    rng = np.random.default_rng(5)
    lines = np.zeros((6, g.num_lines), bool)
    for row, drawn in zip(lines, (0, 3, 5, 7, 9, 11)):  # the last game has one line left
        row[rng.permutation(g.num_lines)[:drawn]] = True
    states = states_from_lines(g, lines)
    legal = np.asarray(states.legal_action_mask)
    assert not np.asarray(states.terminated).any() and legal.sum(1).tolist() == [12, 9, 7, 5, 3, 1]
    grouped = jax.tree_util.tree_map(lambda x: x.reshape((2, 3) + x.shape[1:]), states)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    actions = np.asarray(jax.jit(jax.vmap(lambda k, s: agent(g, k, s)))(keys, grouped))
    alone = jax.jit(lambda k, s: agent(g, k, s))
    for group in range(2):
        one = jax.tree_util.tree_map(lambda x: x[group], grouped)
        np.testing.assert_array_equal(actions[group], np.asarray(alone(keys[group], one)))
    assert legal[np.arange(6), actions.reshape(-1)].all()
    assert actions.reshape(-1)[-1] == np.flatnonzero(legal[-1])[0]
    pure_mcts = search_agents.mcts_agent(g, num_simulations=16)
    moves = np.asarray(jax.jit(lambda k, s: pure_mcts(g, k, s))(jax.random.PRNGKey(1), states))
    assert moves.shape == (6,) and legal[np.arange(6), moves].all()
    assert moves[-1] == np.flatnonzero(legal[-1])[0]
