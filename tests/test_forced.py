"""Forced captures (chain-loop pruning) never change the value: checked against exact solves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import all_line_sets, batched, states_from_lines

from dabjax.game import env as env_lib
from dabjax.game import forced, notation
from dabjax.game.geometry import board_geometry
from dabjax.solvers import retrograde

EXHAUSTIVE = [(2, 2), (2, 3), (1, 4)]


def _capture_positions(geometry, lines):
    drawn = lines[:, geometry.box_lines].sum(-1)
    return lines[(drawn == 3).any(1)]


def _check_pruning(geometry, lines, check_exact_value=True):
    table = retrograde.solve_table(geometry)
    states = states_from_lines(geometry, lines)

    def evaluate(s):
        after, count = forced.play_forced_moves(env_lib.Env.of(geometry), s)
        if check_exact_value:
            solved, margin, move = forced.exact_value(env_lib.Env.of(geometry), s)
        else:
            solved, margin, move = jnp.bool_(False), s.margin, jnp.int32(0)
        return (forced.searchable_mask(geometry, s), after.lines, after.scores, count,
                solved, margin - s.margin, move)

    mask, after_lines, after_scores, count, solved, remaining, move = batched(
        jax.jit(jax.vmap(evaluate)), 8192)(states)
    keys = retrograde.position_keys(lines)
    values = retrograde.move_values(geometry, table, lines).astype(np.int32)
    truth = table[keys].astype(np.int32)
    # (a) The best move inside the mask is as good as the best move overall.
    assert (mask.sum(1) >= 1).all() and (mask <= ~lines).all()
    best_in_mask = np.where(mask, values, -999).max(1)
    np.testing.assert_array_equal(best_in_mask, truth)
    # (b) The macro step plays only optimal moves: value = boxes taken on the way + value afterwards.
    mover = np.asarray(states.current_player)
    gained = (after_scores - np.asarray(states.scores))[np.arange(len(lines)), mover]
    after_truth = table[retrograde.position_keys(after_lines)].astype(np.int32)
    np.testing.assert_array_equal(truth, gained + after_truth)
    np.testing.assert_array_equal(after_lines.sum(1) - lines.sum(1), count)  # one line drawn per forced move
    # (c) Where exact_value solves a position, its value and move are exact.
    np.testing.assert_array_equal(remaining[solved], truth[solved])
    np.testing.assert_array_equal(values[np.arange(len(lines)), move][solved], truth[solved])
    capturable = (lines[:, geometry.box_lines].sum(-1) == 3).sum(1)
    branching = mask.sum(1)
    assert (branching <= 2 * capturable).all()  # at most "take" and "hand out" per capturable box
    return branching, count, solved


@pytest.mark.parametrize("rows,cols", EXHAUSTIVE)
def test_pruning_is_exact_on_every_capture_position(rows, cols):
    g = board_geometry(rows, cols)
    lines = _capture_positions(g, all_line_sets(g.num_lines))
    branching, count, solved = _check_pruning(g, lines)
    assert branching.mean() < 2
    assert count.max() >= 2 and solved.mean() > 0.1


def test_pruning_is_exact_on_sampled_3x3_positions():
    g = board_geometry(3, 3)
    rng = np.random.default_rng(1)
    lines = rng.random((120_000, g.num_lines)) < rng.random((120_000, 1))
    lines = _capture_positions(g, lines)
    assert len(lines) > 40_000
    branching, count, solved = _check_pruning(g, lines)
    assert branching.mean() < 2 and count.max() >= 4


def _forced_and_mask(g):
    return jax.jit(lambda s: (forced.play_forced_moves(env_lib.Env.of(g), s), forced.searchable_mask(g, s)))


def test_long_chain_is_taken_all_but_two_and_loop_all_but_four():
    g = board_geometry(1, 5)
    # A 5-chain along the row: all horizontal sides drawn, inner verticals undrawn; open it at the left end.
    horizontals = [f"h {r} {c}" for r in range(2) for c in range(5)]
    s = notation.state_from_moves(g, horizontals + ["v 0 0"])
    (after, count), _ = _forced_and_mask(g)(s)
    assert int(count) == 3 and after.scores.tolist()[1] == 3  # player 1 took 3, two left
    mask = np.asarray(_forced_and_mask(g)(after)[1])
    assert sorted(np.flatnonzero(mask).tolist()) == [g.v_line(0, 4), g.v_line(0, 5)]  # take or hand out
    # A 2x2 loop (4 boxes around the centre), opened: nothing is forced; take from either end (2 lines)
    # or hand out all four with the middle line.
    g2 = board_geometry(2, 2)
    outer = ["h 0 0", "h 0 1", "h 2 0", "h 2 1", "v 0 0", "v 1 0", "v 0 2", "v 1 2"]
    s2 = notation.state_from_moves(g2, outer + ["h 1 0"])
    (_, count2), mask2 = _forced_and_mask(g2)(s2)
    assert int(count2) == 0
    assert int(np.asarray(mask2).sum()) == 3


def test_two_chain_opened_in_the_middle_is_taken_whole():
    g = board_geometry(1, 2)
    s = notation.state_from_moves(g, ["h 0 0", "h 0 1", "h 1 0", "h 1 1", "v 0 1"])
    (after, count), _ = _forced_and_mask(g)(s)
    assert int(count) == 2 and bool(after.terminated) and after.scores.tolist() == [0, 2]


@pytest.mark.slow
def test_pruning_is_exact_on_every_3x3_capture_position():
    """The mask and the macro step on all ~10 M capture positions of 3x3 (minutes; run with -m slow)."""
    g = board_geometry(3, 3)
    all_lines = all_line_sets(g.num_lines)
    for start in range(0, len(all_lines), 1 << 21):  # 2M positions at a time bounds the memory
        lines = _capture_positions(g, all_lines[start:start + (1 << 21)])
        if len(lines):
            _check_pruning(g, lines, check_exact_value=False)
