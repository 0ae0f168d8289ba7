"""Proven values in the search tree (``search.proofs``): the bounds every node keeps are sound against the
whole-board table, a proven root's value and move are exact, and the search without proofs is unchanged."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_permutation, states_from_lines

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, tree_search
from dabjax.solvers import retrograde

GEOMETRY = board_geometry(2, 3)
ENV = env_lib.Env.of(GEOMETRY)


def zero_evaluator(params, key, states):
    """Uniform prior, value 0: whatever the search knows, it proved."""
    return jnp.zeros(states.lines.shape, jnp.float32), jnp.zeros(states.lines.shape[0], jnp.float32)


@functools.lru_cache(maxsize=None)
def searcher(algorithm: str, proofs: bool):
    config = mcts.SearchConfig(algorithm=algorithm, num_simulations=192, gumbel_scale=0.0, dirichlet_fraction=0.0,
                               max_num_considered_actions=16, proofs=proofs)
    return jax.jit(lambda key, states: mcts.run_search(config, ENV, zero_evaluator, None, key, states))


@pytest.fixture(scope="module")
def table():
    return retrograde.solve_table(GEOMETRY)


@pytest.fixture(scope="module")
def positions():
    """Mid-game 2x3 positions (5-9 of 17 lines drawn), the mover's side varied."""
    rng = np.random.default_rng(3)
    lines = np.zeros((48, GEOMETRY.num_lines), bool)
    for row, count in zip(lines, rng.integers(5, 10, len(lines))):
        row[random_permutation(rng, GEOMETRY.num_lines)[:count]] = True
    return mcts.search_roots(mcts.SearchConfig(), ENV, states_from_lines(GEOMETRY, lines))


def exact_class(table, states) -> np.ndarray:
    """The result class (+1, 0, -1) of each state for its mover under perfect play."""
    future = table[retrograde.position_keys(np.asarray(states.lines))].astype(np.int64)
    return np.sign(np.asarray(states.margin) + future)


def move_classes(table, states) -> np.ndarray:
    """int ``[N, L]``: the result class of each legal line for the mover (``-9`` where drawn)."""
    lines = np.asarray(states.lines)
    values = retrograde.move_values(GEOMETRY, table, lines).astype(np.int64)
    return np.where(lines, -9, np.sign(np.asarray(states.margin)[:, None] + values))


@pytest.mark.parametrize("algorithm", ["gumbel", "puct", "uct"])
def test_every_proven_bound_holds_and_a_proven_root_is_exact(algorithm, table, positions):
    out = searcher(algorithm, True)(jax.random.PRNGKey(0), positions)
    tree = out.tree
    lower, upper = np.asarray(tree.extra_data.lower), np.asarray(tree.extra_data.upper)
    visits = np.asarray(tree.node_visits)
    # What hangs below an exact edge (an exact leaf's, or a proven node's) is never read again, and an exact leaf
    # (terminal or solved: marked terminated) is worth its edge's reward; every other visited node's exact class
    # lies within its bounds.
    parents, actions = np.asarray(tree.parents), np.asarray(tree.action_from_parent)
    games, nodes = np.nonzero(visits > 0)
    below_exact = np.zeros(len(games), bool)
    for k, (game, node) in enumerate(zip(games, nodes)):
        walk = node
        while parents[game, walk] >= 0:
            parent = parents[game, walk]
            if walk != node and float(tree.children_discounts[game, parent, actions[game, walk]]) == 0.0:
                below_exact[k] = True
            walk = parent
    states = jax.tree_util.tree_map(lambda x: x[games, nodes], tree.embeddings)
    truth = exact_class(table, states)
    searched = ~below_exact & ~np.asarray(states.terminated)
    assert searched.sum() > 500
    assert (lower[games, nodes][searched] <= truth[searched]).all()
    assert (truth[searched] <= upper[games, nodes][searched]).all()
    proven_nodes = searched & (lower[games, nodes] == upper[games, nodes])
    assert proven_nodes.sum() > 50  # the proofs do prove

    roots = exact_class(table, positions)
    proven = np.asarray(out.root_proven)
    assert proven.mean() >= 0.5
    np.testing.assert_array_equal(np.asarray(out.root_q)[proven], roots[proven])
    chosen = move_classes(table, positions)[np.arange(len(roots)), np.asarray(out.action)]
    np.testing.assert_array_equal(chosen[proven], roots[proven])  # a proven root plays a move that keeps it
    # Moves proven worse than a sure result are out of the policy target (a solved root's tree is not searched).
    bounds = tree_search.root_bounds(tree)
    worse = np.asarray(bounds.action_upper < bounds.lower[:, None]) & (np.asarray(out.visit_counts) > 0)
    worse &= ~np.asarray(out.root_solved)[:, None]
    assert worse.sum() > 10
    assert (np.asarray(out.policy_target)[worse] == 0).all()


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_proofs_play_no_worse_and_leave_the_search_alone_when_off(algorithm, table, positions):
    with_proofs = searcher(algorithm, True)(jax.random.PRNGKey(1), positions)
    without = searcher(algorithm, False)(jax.random.PRNGKey(1), positions)
    classes = move_classes(table, positions)
    roots = exact_class(table, positions)
    rows = np.arange(len(roots))
    keeps_with = classes[rows, np.asarray(with_proofs.action)] == roots
    keeps_without = classes[rows, np.asarray(without.action)] == roots
    assert keeps_with.sum() >= keeps_without.sum()
    assert not np.asarray(without.root_proven & ~without.root_solved).any()
    # Off, the tree holds mctx's extra data only: nothing of the proofs.
    assert not isinstance(without.tree.extra_data, tree_search.Proofs)


def test_the_frontier_and_known_results_prove_what_a_solver_proved_wherever_the_search_meets_it(table, positions):
    """The most visited unproven nodes of a search (``proof_frontier``), proven outside it (here: the table) and
    given to a second search (``KnownResults``): every node of the second tree at one of them is proven at its exact
    class, and every bound still holds."""
    first = searcher("gumbel", True)(jax.random.PRNGKey(2), positions)
    frontier = jax.device_get(mcts.proof_frontier(first.tree, 8, jnp.int32(12)))
    valid, visits = np.asarray(frontier.valid), np.asarray(frontier.visits)
    assert valid.sum() > 20
    for game in range(len(valid)):  # most visited first; within the reach; open in the first tree
        assert (np.diff(visits[game][valid[game]]) <= 0).all()
        assert ((~frontier.lines[game][valid[game]]).sum(-1) <= 12).all()
    tree_states = jax.device_get(first.tree.embeddings)
    proofs = jax.device_get(first.tree.extra_data)
    node_visits = np.asarray(first.tree.node_visits)
    for game, row in zip(*np.nonzero(valid)):  # the row is its node: open, at its position, with its visits
        node = frontier.node[game, row]
        assert node != 0 and proofs.lower[game, node] < proofs.upper[game, node]
        assert not tree_states.terminated[game, node] and node_visits[game, node] == visits[game, row]
        np.testing.assert_array_equal(tree_states.lines[game, node], frontier.lines[game, row])
    # No open node within the reach has more visits than the least visited row taken.
    for game in range(len(valid)):
        open_ = ((node_visits[game] > 0) & ~tree_states.terminated[game] & (proofs.lower[game] < proofs.upper[game])
                 & ((~tree_states.lines[game]).sum(-1) <= 12))
        open_[0] = False
        if valid[game].sum() == 8:
            assert node_visits[game][open_].max() >= visits[game][valid[game]].min()
            assert np.sort(node_visits[game][open_])[-8:].min() == visits[game][valid[game]].min()
    game = int(valid.sum(-1).argmax())
    truth = exact_class(table, frontier.__class__(*(np.asarray(x)[game] for x in frontier)))
    known = mcts.KnownResults(lines=jnp.asarray(frontier.lines[game]), margin=jnp.asarray(frontier.margin[game]),
                              result=jnp.asarray(truth, jnp.float32), valid=jnp.asarray(valid[game]))
    config = mcts.SearchConfig(num_simulations=192, gumbel_scale=0.0, max_num_considered_actions=16, proofs=True)
    one = jax.tree_util.tree_map(lambda x: x[game:game + 1], positions)
    second = jax.jit(lambda key, states, known: mcts.run_search(config, ENV, zero_evaluator, None, key, states,
                                                                None, known))(jax.random.PRNGKey(2), one, known)
    tree = jax.device_get(second.tree)
    parents, actions = tree.parents[0], tree.action_from_parent[0]
    lines, margin, player = tree.embeddings.lines[0], tree.embeddings.margin[0], tree.embeddings.current_player[0]
    met = 0
    for row in np.flatnonzero(valid[game]):
        # The search's entries into the known position (below it, a solved node's visits stay at it):
        # exact edges, their reward its proven class from the parent's side.
        at = (lines == frontier.lines[game, row]).all(-1) & (margin == frontier.margin[game, row])
        entries = np.flatnonzero(at & (tree.node_visits[0] > 0) & (parents >= 0))
        entries = entries[~at[parents[entries]]]
        met += entries.size
        for node in entries:
            parent, action = parents[node], actions[node]
            side = 1.0 if player[parent] == player[node] else -1.0
            assert tree.children_discounts[0, parent, action] == 0.0
            assert tree.children_rewards[0, parent, action] == side * truth[row]
    assert met > 0
    visited = np.flatnonzero(tree.node_visits[0] > 0)
    states = jax.tree_util.tree_map(lambda x: x[0, visited], tree.embeddings)
    exact = exact_class(table, states)
    open_ = ~np.asarray(states.terminated)
    assert (tree.extra_data.lower[0, visited][open_] <= exact[open_]).all()
    assert (exact[open_] <= tree.extra_data.upper[0, visited][open_]).all()


def test_a_search_with_proofs_needs_their_extra_data():
    root = jnp.zeros((1, 3))
    with pytest.raises(TypeError, match="unproven"):
        tree_search.search(None, jax.random.PRNGKey(0), root=None, recurrent_fn=None,
                           root_action_selection_fn=None, interior_action_selection_fn=None, num_simulations=1,
                           invalid_actions=root, proofs=True)


def test_proofs_setting_is_validated():
    with pytest.raises(ValueError, match="search.proofs"):
        mcts.SearchConfig(proofs=1)


def test_the_tree_benchmark_compares_the_search_with_and_without_proofs():
    from conftest import load_benchmark
    clock_play = load_benchmark("clock_play")
    args = clock_play.argparse.Namespace(network="pretrained:3x3", set="3x3", simulations=8, per_move=1, batch=12,
                                         seed=0)
    out = clock_play.tree_proofs(args)
    assert out["positions"] == 24 and set(out["arms"]) == {"False", "True"}
    assert out["arms"]["False"]["proven_in_tree"] == 0.0  # without proofs nothing but the solved roots is exact
    for arm in out["arms"].values():
        assert 0 <= arm["best_result"] <= 1 and arm["ms_per_position"] > 0
        assert sorted(arm["by_move"]) == list(range(24))
