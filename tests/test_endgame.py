"""Component analysis and the exact simple-endgame value: against the recursion and exact solves."""


import endgame_checks
import jax
import numpy as np
import pytest
from conftest import all_line_sets, batched, states_from_lines

from dabjax.game import chains, endgame, notation
from dabjax.game.geometry import board_geometry
from dabjax.solvers import endgame_values, retrograde


@pytest.fixture(scope="module")
def table3x3():
    return retrograde.solve_table(board_geometry(3, 3))


def test_reference_worked_examples():
    examples = {
        ((3,), ()): 3, ((), (4,)): 4, ((), (6,)): 6, ((3, 3), ()): 2, ((3, 3, 3), ()): 1,
        ((3, 3, 3, 3), ()): 2, ((4, 5, 6), ()): 7, ((), (4, 4)): 0, ((), (4, 6)): 2, ((), (6, 6)): 4,
        ((), (4, 4, 4)): 4, ((3,), (4,)): 1, ((3,), (6,)): 3, ((4,), (4,)): 0, ((3, 4), (4,)): 1,
        ((4,), (6, 6)): 4, ((3, 2, 2, 1, 6), (4, 6)): 0,
    }
    for (chain_lengths, loop_lengths), value in examples.items():
        assert endgame_values.endgame_value(chain_lengths, loop_lengths) == value, (chain_lengths, loop_lengths)
    with pytest.raises(ValueError, match="loop lengths"):
        endgame_values.endgame_value([3], [3])


def test_the_jitted_dp_premises_hold_up_to_30_boxes():
    """The premises of the jitted DP, on every multiset of chains and loops (even and odd loops): a shortest
    opening suffices, and the 1- and 2-chains count by parity."""
    assert endgame_checks.shortest_opening_counterexamples(30) == []
    assert endgame_checks.short_chain_counterexamples(30) == []
    odd_loops = [g for g in endgame_checks.component_multisets(22, loop_lengths=range(4, 23))
                 if not endgame_checks.shortest_opening_suffices(*g)]
    assert odd_loops == []


def test_paper_closed_form_agrees_where_defined():
    """Theorems 3 (case c >= 2) and 5 against the recursion; count where the closed form is silent."""
    agree = silent = 0
    for g in endgame_checks.component_multisets(25):
        closed = endgame_checks.paper_closed_form_value(*g)
        if closed is None:
            silent += 1
        else:
            assert closed == endgame_values.endgame_value(*g), g
            agree += 1
    assert agree == 17162 and silent == 5198


def test_jitted_dp_equals_recursion_on_every_multiset_up_to_25_boxes():
    slots_chain, slots_loop = 25, 6
    multisets = list(endgame_checks.component_multisets(25))
    chain_arr = np.zeros((len(multisets), slots_chain), np.int32)
    loop_arr = np.zeros((len(multisets), slots_loop), np.int32)
    for i, (c, l) in enumerate(multisets):
        chain_arr[i, : len(c)] = c
        loop_arr[i, : len(l)] = l
    counts_c = (chain_arr > 0).sum(1).astype(np.int32)
    counts_l = (loop_arr > 0).sum(1).astype(np.int32)
    dp = jax.jit(jax.vmap(lambda c, nc, l, nl: endgame.value_table(c, nc, l, nl)[0, 0]))
    got = np.asarray(dp(chain_arr, counts_c, loop_arr, counts_l))
    want = np.array([endgame_values.endgame_value(*g) for g in multisets])
    np.testing.assert_array_equal(got, want)


def test_component_analysis_on_a_drawn_position():
    g = board_geometry(2, 3)
    # The bottom row is drawn in full (its boxes claimed); the top row has only its bottom sides.
    s = notation.state_from_moves(g, ["h 1 0", "h 1 1", "h 1 2", "v 1 0", "v 1 1", "v 1 2", "v 1 3",
                                      "h 2 0", "h 2 1", "h 2 2"])
    comps = jax.jit(lambda st: chains.analyse(g, st))(s)
    sides = np.asarray(comps.undrawn_sides)
    assert sides.tolist() == [3, 3, 3, 0, 0, 0]
    assert not bool(comps.is_simple_endgame)
    assert np.asarray(comps.label).tolist() == [0, 0, 0, -1, -1, -1]
    # Drawing the middle top and the two outer sides leaves one 3-chain: h 0 0 - v 0 1 - v 0 2 - h 0 2.
    s2 = notation.play_move(g, s, "h 0 1")
    s2 = notation.play_move(g, s2, "v 0 0")
    s2 = notation.play_move(g, s2, "v 0 3")
    comps2 = chains.analyse(g, s2)
    assert bool(comps2.is_simple_endgame)
    assert int(comps2.num_chains) == 1 and int(comps2.chain_lengths[0]) == 3 and int(comps2.num_loops) == 0


def _simple_endgame_line_sets(geometry, all_lines):
    drawn = all_lines[:, geometry.box_lines].sum(-1)
    simple = ((drawn == 2) | (drawn == 4)).all(1) & (drawn == 2).any(1)
    return all_lines[simple]


def test_every_3x3_simple_endgame_against_exact_solve(table3x3):
    g = board_geometry(3, 3)
    lines = _simple_endgame_line_sets(g, all_line_sets(g.num_lines))
    assert len(lines) > 10000
    states = states_from_lines(g, lines)

    def evaluate(s):
        comps = chains.analyse(g, s)
        solved, margin = endgame.simple_endgame_margin(g, s, comps)
        return comps.is_simple_endgame, solved, margin - s.margin, endgame.opener_move(g, s, comps)

    is_simple, solved, remaining, move = batched(jax.jit(jax.vmap(evaluate)))(states)
    assert is_simple.all() and solved.all()
    keys = retrograde.position_keys(lines)
    np.testing.assert_array_equal(remaining, table3x3[keys])  # exact value on every simple endgame
    values = retrograde.move_values(g, table3x3, lines)
    chosen = values[np.arange(len(lines)), move]
    np.testing.assert_array_equal(chosen, table3x3[keys])  # the opener's move is optimal


def test_non_simple_positions_are_not_flagged():
    g = board_geometry(3, 3)
    rng = np.random.default_rng(0)
    lines = rng.random((4096, g.num_lines)) < 0.5
    drawn = lines[:, g.box_lines].sum(-1)
    expected = ((drawn == 2) | (drawn == 4)).all(1) & (drawn == 2).any(1)
    got = jax.jit(jax.vmap(lambda s: chains.analyse(g, s).is_simple_endgame))(states_from_lines(g, lines))
    np.testing.assert_array_equal(np.asarray(got), expected)
