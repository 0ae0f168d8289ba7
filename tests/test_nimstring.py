"""The nimstring solver: against plain recursion on tiny boards, its rules against its own rule-free search, and
positions worked by hand from Berlekamp's "The Dots and Boxes Game" (2000)."""

import functools

import numpy as np
import pytest

from dabjax.game.geometry import board_geometry
from dabjax.solvers import endgame_values
from dabjax.solvers.nimstring import NimstringSolver, solve_nimstring


@functools.lru_cache(maxsize=None)
def brute_force(rows: int, cols: int):
    """``(wins, winning_moves)``: ``wins(mask) -> bool`` for a drawn-line bitmask, nimstring by its definition in
    plain recursion (a line that completes a box leaves its player to move; a player with no line left to draw
    loses), and ``winning_moves(mask) -> bool [L]``, the lines that keep the win for their player."""
    g = board_geometry(rows, cols)
    box_masks = [sum(1 << int(line) for line in g.box_lines[box]) for box in range(g.num_boxes)]
    line_boxes = [[int(b) for b in g.line_boxes[line] if b >= 0] for line in range(g.num_lines)]

    def completes(mask, line):
        after = mask | (1 << line)
        return any(after & box_masks[b] == box_masks[b] for b in line_boxes[line])

    @functools.lru_cache(maxsize=None)
    def wins(mask):
        return any(wins(mask | (1 << line)) == completes(mask, line)
                   for line in range(g.num_lines) if not mask >> line & 1)

    def winning_moves(mask):
        return np.array([not mask >> line & 1 and wins(mask | (1 << line)) == completes(mask, line)
                         for line in range(g.num_lines)])

    return wins, winning_moves


def mask_of(lines) -> int:
    return sum(1 << int(line) for line in np.flatnonzero(lines))


def lines_of(geometry, drawn) -> np.ndarray:
    lines = np.zeros(geometry.num_lines, bool)
    lines[list(drawn)] = True
    return lines


def assert_matches_brute_force(rows, cols, positions):
    g = board_geometry(rows, cols)
    wins, winning_moves = brute_force(rows, cols)
    solvers = [NimstringSolver(g, table_bits=14), NimstringSolver(g, table_bits=14, reductions=False)]
    for lines in positions:
        mask = mask_of(lines)
        for solver in solvers:
            result = solver.solve(lines)
            assert result.finished
            assert result.wins == wins(mask), (solver.reductions, np.flatnonzero(lines))
            np.testing.assert_array_equal(result.winning_moves, winning_moves(mask),
                                          err_msg=f"{solver.reductions} {np.flatnonzero(lines)}")


@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 2), (1, 3), (2, 2)])
def test_every_position_of_a_tiny_board_matches_brute_force(rows, cols):
    g = board_geometry(rows, cols)
    masks = np.arange(1 << g.num_lines)
    positions = (masks[:, None] >> np.arange(g.num_lines)) & 1 == 1
    assert_matches_brute_force(rows, cols, positions)


@pytest.mark.parametrize("rows,cols", [(2, 3), (1, 5)])
def test_sampled_positions_match_brute_force(rows, cols):
    g = board_geometry(rows, cols)
    rng = np.random.default_rng(rows * 10 + cols)
    positions = []
    for _ in range(150):
        lines = np.zeros(g.num_lines, bool)
        lines[rng.choice(g.num_lines, rng.integers(4, g.num_lines + 1), replace=False)] = True
        positions.append(lines)
    assert_matches_brute_force(rows, cols, positions)


@pytest.mark.parametrize("components", [True, False])
def test_rules_agree_with_the_rule_free_search_on_3x3(components):
    g = board_geometry(3, 3)
    rng = np.random.default_rng(3)
    reduced = NimstringSolver(g, table_bits=18, components=components)
    plain = NimstringSolver(g, table_bits=20, reductions=False)
    for _ in range(120):
        lines = np.zeros(g.num_lines, bool)
        lines[rng.choice(g.num_lines, rng.integers(6, g.num_lines + 1), replace=False)] = True
        expected, got = plain.solve(lines), reduced.solve(lines)
        assert expected.finished and got.finished
        assert got.wins == expected.wins, np.flatnonzero(lines)
        np.testing.assert_array_equal(got.winning_moves, expected.winning_moves, err_msg=str(np.flatnonzero(lines)))


def test_the_last_move_loses():
    g = board_geometry(1, 1)
    last = solve_nimstring(g, lines_of(g, [0, 1, 2]))  # drawing the last side completes the box: move again
    assert last.finished and last.wins is False and not last.winning_moves.any()
    two_left = solve_nimstring(g, lines_of(g, [0, 1]))  # either line leaves the opponent the last one
    assert two_left.wins is True
    np.testing.assert_array_equal(np.flatnonzero(two_left.winning_moves), [2, 3])
    assert solve_nimstring(g, lines_of(g, [0, 1, 2, 3])).wins is False  # nothing to draw: the mover loses


def test_a_2_chain_hard_hearted_handout_wins_and_half_hearted_loses():
    g = board_geometry(1, 2)
    # Both boxes' tops and bottoms drawn: a 2-chain with both ends on the edge.
    lines = lines_of(g, [g.h_line(0, 0), g.h_line(0, 1), g.h_line(1, 0), g.h_line(1, 1)])
    result = solve_nimstring(g, lines)
    assert result.finished and result.wins is True
    # The middle line hands over two separate boxes (the taker must then move: no line left, a loss); an end
    # line offers the chain whole, and the taker may decline with a double-dealing move.
    np.testing.assert_array_equal(np.flatnonzero(result.winning_moves), [g.v_line(0, 1)])
    assert result.controller_margin == endgame_values.endgame_value([2]) == 2


def test_a_long_chain_has_only_loony_moves():
    g = board_geometry(1, 3)
    chain = lines_of(g, [g.h_line(r, c) for r in range(2) for c in range(3)])  # a 3-chain, both ends open
    result = solve_nimstring(g, chain)
    assert result.finished and result.wins is False and not result.winning_moves.any()
    assert result.controller_margin == endgame_values.endgame_value([3]) == 3
    opened = solve_nimstring(g, chain | lines_of(g, [g.v_line(0, 0)]))  # a loony move was made: its taker wins
    assert opened.finished and opened.wins is True
    assert opened.winning_moves[g.v_line(0, 1)]  # take a box and keep the choice of declining
    assert opened.controller_margin is None


def test_short_chains_count_by_parity():
    g = board_geometry(1, 4)
    tops = [g.h_line(0, c) for c in range(4)]
    bottoms = [g.h_line(1, c) for c in range(4)]
    # boxes 0-1: a 2-chain (left edge to top of box 1); box 2 taken; box 3: a 1-chain (top and right edge)
    two_and_one = lines_of(g, tops[:1] + tops[2:3] + bottoms + [g.v_line(0, 2), g.v_line(0, 3)])
    result = solve_nimstring(g, two_and_one)
    assert result.finished and result.wins is False
    assert result.controller_margin == endgame_values.endgame_value([2, 1])
    # the 1-chain made a 3-chain with box 2 (its left side undrawn): one short chain, odd, a win
    one_and_three = lines_of(g, tops[:1] + tops[2:] + bottoms + [g.v_line(0, 2)])
    result = solve_nimstring(g, one_and_three)
    assert result.finished and result.wins is True


def test_separate_components_add_as_nimbers():
    g = board_geometry(1, 5)
    top, bottom, side = (lambda c: g.h_line(0, c)), (lambda c: g.h_line(1, c)), (lambda c: g.v_line(0, c))
    # Box 2 taken splits the row into boxes 0-1 and boxes 3-4, two games that meet only at the ground.
    middle = [top(2), bottom(2), side(2), side(3)]
    mirrored = lines_of(g, middle + [top(1), top(3)])  # the right half the mirror image of the left
    result = solve_nimstring(g, mirrored)
    assert result.finished and result.wins is False  # equal nimbers: nim-sum zero
    assert not result.winning_moves.any()
    wins, winning_moves = brute_force(1, 5)
    assert wins(mask_of(mirrored)) is False
    lopsided = lines_of(g, middle + [top(1), top(3), bottom(4)])
    result = solve_nimstring(g, lopsided)
    assert result.finished and result.wins == wins(mask_of(lopsided))
    np.testing.assert_array_equal(result.winning_moves, winning_moves(mask_of(lopsided)))


def test_budget_runs_out_as_unknown():
    g = board_geometry(4, 4)
    solver = NimstringSolver(g, table_bits=16)
    empty = np.zeros(g.num_lines, bool)
    by_nodes = solver.solve(empty, max_nodes=1000)
    assert not by_nodes.finished and by_nodes.wins is None and by_nodes.nodes <= 1000
    by_time = solver.solve(empty, max_seconds=0.0)  # one round of nodes, then the clock stops it
    assert not by_time.finished and by_time.wins is None
