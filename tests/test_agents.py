"""Handcrafted agents: legal, batched, behave as defined, and rank random < level1 < level2 on 3x3."""

import jax
import numpy as np
import pytest
from conftest import states_from_lines

from dabjax.evaluation import arena
from dabjax.game import policies
from dabjax.game.geometry import board_geometry


@pytest.fixture(scope="module")
def positions():
    g = board_geometry(3, 3)
    rng = np.random.default_rng(0)
    lines = rng.random((2048, g.num_lines)) < rng.random((2048, 1)) * 0.95
    lines[:, 0] = False  # keep every position running
    return g, lines, states_from_lines(g, lines)


@pytest.mark.parametrize("name", ["random", "level1", "level2", "greedy"])
def test_agents_play_legal_moves_with_their_priorities(positions, name):
    g, lines, states = positions
    agent = policies.HANDCRAFTED_AGENTS[name]
    actions = np.asarray(jax.jit(lambda k, s: agent(g, k, s))(jax.random.PRNGKey(1), states))
    assert actions.shape == (len(lines),)
    assert not lines[np.arange(len(lines)), actions].any()  # always an undrawn line
    classes = np.asarray(jax.vmap(lambda l: policies.move_classes(g, l))(lines))
    chosen = classes[np.arange(len(lines)), actions]
    best = np.where(~lines, classes, 99).min(1)
    can_complete = best == policies.COMPLETES_BOX
    if name in ("level1", "level2", "greedy"):
        assert (chosen[can_complete] == policies.COMPLETES_BOX).all()
    if name in ("level2", "greedy"):
        np.testing.assert_array_equal(chosen, best)  # never a worse class than available
    if name == "random":
        assert (chosen[can_complete] != policies.COMPLETES_BOX).any()


def test_move_classes_on_a_small_board():
    g = board_geometry(1, 2)
    lines = np.zeros(g.num_lines, bool)
    lines[[g.h_line(0, 0), g.h_line(1, 0)]] = True  # box 0 has two sides
    classes = np.asarray(policies.move_classes(g, lines))
    assert classes[g.v_line(0, 0)] == policies.GIVES_BOX  # third side of box 0
    assert classes[g.v_line(0, 2)] == policies.SAFE
    lines[g.v_line(0, 0)] = True
    classes = np.asarray(policies.move_classes(g, lines))
    assert classes[g.v_line(0, 1)] == policies.COMPLETES_BOX


def test_random_tie_breaking_covers_every_best_move():
    g = board_geometry(2, 2)
    states = states_from_lines(g, np.zeros((4000, g.num_lines), bool))
    actions = np.asarray(jax.jit(lambda k, s: policies.greedy(g, k, s))(jax.random.PRNGKey(2), states))
    counts = np.bincount(actions, minlength=g.num_lines)
    assert (counts > 200).all()  # every line is a first/second side on the empty board


def test_agents_rank_in_order_on_3x3():
    g = board_geometry(3, 3)
    key = jax.random.PRNGKey(0)
    l1_vs_random = arena.head_to_head(g, policies.level1, policies.random_agent, key, 1000)
    l2_vs_l1 = arena.head_to_head(g, policies.level2, policies.level1, key, 1000)
    assert l1_vs_random.games == 1000 and l1_vs_random.win_rate > 0.95
    assert l2_vs_l1.win_rate > 0.75
    assert l1_vs_random.wins + l1_vs_random.draws + l1_vs_random.losses == 1000
