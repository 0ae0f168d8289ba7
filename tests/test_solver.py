"""Exact solvers: published values, brute-force cross-checks, chain rules checked over whole tables."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from dabjax.game.geometry import board_geometry
from dabjax.solvers import board_kernels, board_keys, endgame_values, move_ordering, position_solver, retrograde

# Published values (D. Wilson's tables; Barker and Korf, "Solving Dots-And-Boxes", AAAI 2012): the
# first player's margin with perfect play.
PUBLISHED = {(1, 1): -1, (1, 2): 0, (1, 3): -1, (1, 4): 0, (1, 5): -1, (2, 2): 2, (2, 3): -2, (2, 4): 2,
             (3, 3): -3}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("solver_cache")


@pytest.fixture(scope="module")
def table_3x3(cache_dir):
    return retrograde.solve_table(board_geometry(3, 3), cache_dir)


def brute_force_move_values(geometry, lines: np.ndarray) -> np.ndarray:
    """int ``[L]``: every move's value by plain recursive negamax (no pruning), ILLEGAL for drawn lines."""
    box_lines = [tuple(int(x) for x in sides) for sides in geometry.box_lines]
    line_boxes = [[int(b) for b in pair if b >= 0] for pair in geometry.line_boxes]

    @functools.lru_cache(maxsize=None)
    def value(mask: int) -> int:
        options = [move_value(mask, line) for line in range(geometry.num_lines) if not mask >> line & 1]
        return max(options) if options else 0

    def move_value(mask: int, line: int) -> int:
        child = mask | 1 << line
        gained = sum(all(child >> side & 1 for side in box_lines[box]) for box in line_boxes[line])
        return gained + value(child) if gained else -value(child)

    mask = retrograde.position_key(lines)
    return np.array([retrograde.ILLEGAL if lines[l] else move_value(mask, l) for l in range(geometry.num_lines)])


def random_positions(rng, num_lines: int, count: int, min_drawn: int = 0) -> np.ndarray:
    """bool ``[count, L]``: random sets of drawn lines, at least ``min_drawn`` of them."""
    out = np.zeros((count, num_lines), bool)
    for i in range(count):
        drawn = rng.integers(min_drawn, num_lines + 1)
        out[i, rng.permutation(num_lines)[:drawn]] = True
    return out


# --- whole-board tables ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rows, cols", sorted(PUBLISHED))
def test_table_reproduces_published_value(rows, cols, cache_dir):
    geometry = board_geometry(rows, cols)
    table = retrograde.solve_table(geometry, cache_dir)
    assert table.dtype == np.int8 and table.shape == (1 << geometry.num_lines,)
    assert int(table[0]) == PUBLISHED[(rows, cols)]
    assert int(table[-1]) == 0


def test_2x2_first_moves():
    """Only the 8 perimeter first moves win (by 2); the 4 interior ones tie."""
    geometry = board_geometry(2, 2)
    values = retrograde.move_values(geometry, retrograde.compute_table(geometry), np.zeros(12, bool))
    interior = np.array([geometry.line_boxes[l, 1] >= 0 for l in range(12)])
    np.testing.assert_array_equal(values, np.where(interior, 0, 2))


def test_table_in_small_blocks_equals_the_one_block_table(monkeypatch):
    """The parallel pass cuts the masks into blocks by their high bits (2**20 masks each, so a board of up to
    20 lines is one block, which the brute-force checks below cover): blocks of 2**5 masks on 2x3 (4,096 blocks
    over 13 levels of high bits, shared out over the threads) give the same table."""
    geometry = board_geometry(2, 3)
    whole = retrograde.compute_table(geometry)
    monkeypatch.setattr(retrograde, "_BLOCK_BITS", 5)
    np.testing.assert_array_equal(retrograde.compute_table(geometry), whole)


def test_table_cache_round_trip(tmp_path, monkeypatch):
    geometry = board_geometry(1, 3)
    monkeypatch.setenv("DABJAX_CACHE_DIR", str(tmp_path))
    first = retrograde.solve_table(geometry)
    files = list(tmp_path.glob("table_1x3_*.npy"))
    assert len(files) == 1
    np.testing.assert_array_equal(np.load(files[0]), first)
    np.testing.assert_array_equal(retrograde.solve_table(geometry), first)


def test_table_rejects_large_boards():
    with pytest.raises(ValueError, match="4x4"):
        retrograde.solve_table(board_geometry(4, 4))


def test_position_key():
    lines = np.zeros(24, bool)
    lines[[0, 3, 23]] = True
    assert retrograde.position_key(lines) == 1 + 8 + (1 << 23)
    np.testing.assert_array_equal(retrograde.position_keys(np.stack([lines, ~lines])),
                                  [1 + 8 + (1 << 23), (1 << 24) - 1 - 9 - (1 << 23)])


@pytest.mark.parametrize("rows, cols, min_drawn", [(2, 2, 0), (1, 4, 0), (2, 3, 5)])
def test_table_moves_match_brute_force(rows, cols, min_drawn, cache_dir):
    geometry = board_geometry(rows, cols)
    table = retrograde.solve_table(geometry, cache_dir)
    rng = np.random.default_rng(rows * 10 + cols)
    positions = random_positions(rng, geometry.num_lines, 40, min_drawn)
    values = retrograde.move_values(geometry, table, positions)
    best, optimal = retrograde.optimal_moves(geometry, table, positions)
    for i, lines in enumerate(positions):
        expected = brute_force_move_values(geometry, lines)
        np.testing.assert_array_equal(values[i], expected)
        if not lines.all():
            assert best[i] == expected.max()
            np.testing.assert_array_equal(optimal[i], expected == expected.max())


# --- chain rules and simple endgames over every 3x3 / 2x4 position -------------------------------------


@njit
def _move_value(mask, move, completion, table):
    """The table value of drawing ``move`` in position ``mask`` (int bitmask), for the mover."""
    child = mask | (1 << move)
    gained = 0
    for j in range(2):
        m = completion[move, j]
        if m != 0 and (child & m) == m:
            gained += 1
    return gained + table[child] if gained > 0 else -table[child]


@njit
def _rule_violations(table, line_boxes, box_lines, num_lines, completion, memo, stride=1):
    """Positions where searching only the chain rules' moves, or the simple-endgame value, is not the
    table's value; and how many positions each rule applied to."""
    num_boxes = box_lines.shape[0]
    bad = 0
    applied = np.zeros(3, np.int64)
    lines = np.zeros(num_lines, np.uint8)
    valence = np.zeros(num_boxes, np.int64)
    for mask in range(0, table.shape[0], stride):
        for l in range(num_lines):
            lines[l] = (mask >> l) & 1
        for b in range(num_boxes):
            valence[b] = 4
            for k in range(4):
                valence[b] -= lines[box_lines[b, k]]
        forced, take, decline, simple = move_ordering.chain_rule(lines, valence, line_boxes, box_lines)
        if forced >= 0 or take >= 0:
            best = -128
            for move in (forced, take, decline):
                if move < 0:
                    continue
                best = max(best, _move_value(mask, move, completion, table))
            applied[0 if forced >= 0 else 1] += 1
            if best != table[mask]:
                bad += 1
        elif simple and mask != table.shape[0] - 1:
            applied[2] += 1
            if -endgame_values.simple_endgame_value(lines, valence, line_boxes, box_lines, memo) != table[mask]:
                bad += 1
    return bad, applied


@pytest.mark.parametrize("rows, cols", [(3, 3), (2, 4)])
def test_chain_rules_and_endgame_leaves_keep_every_table_value(rows, cols, cache_dir):
    geometry = board_geometry(rows, cols)
    table = retrograde.solve_table(geometry, cache_dir)
    tables = board_kernels.kernel_tables(geometry)
    bad, applied = _rule_violations(np.asarray(table), tables[0], tables[1], geometry.num_lines,
                                    retrograde._completion_masks(geometry), endgame_values.new_memo())
    assert bad == 0
    assert applied.min() > 1000  # every rule was exercised


@njit
def _pruning_violations(table, line_boxes, box_lines, num_lines, completion, scratch, stride=1):
    """Positions where the best of ``search_moves``' pruned move list is not the table's value, and how
    many positions had lines pruned."""
    bad = 0
    pruned = 0
    lines = np.zeros(num_lines, np.uint8)
    valence = np.zeros(box_lines.shape[0], np.int64)
    history = np.zeros(num_lines, np.int64)
    moves = np.empty(num_lines, np.int64)
    for mask in range(0, table.shape[0] - 1, stride):
        for l in range(num_lines):
            lines[l] = (mask >> l) & 1
        for b in range(box_lines.shape[0]):
            valence[b] = 4
            for k in range(4):
                valence[b] -= lines[box_lines[b, k]]
        count = move_ordering.search_moves(lines, valence, line_boxes, box_lines, -1, history, True, scratch,
                                           moves)
        if count < num_lines - lines.sum():
            pruned += 1
        best = -128
        for move in moves[:count]:
            best = max(best, _move_value(mask, move, completion, table))
        if best != table[mask]:
            bad += 1
    return bad, pruned


@pytest.mark.parametrize("rows, cols", [(3, 3), (2, 4)])
def test_pruned_moves_keep_every_table_value(rows, cols, cache_dir):
    """Leaving out the dominated lines (inner lines of long chains, all but one line of a loop, the end lines of a
    chain of two boxes, the second end line of any other chain) never changes a position's value: checked at every
    position of the whole table."""
    geometry = board_geometry(rows, cols)
    table = retrograde.solve_table(geometry, cache_dir)
    tables = board_kernels.kernel_tables(geometry)
    bad, pruned = _pruning_violations(np.asarray(table), tables[0], tables[1], geometry.num_lines,
                                      retrograde._completion_masks(geometry),
                                      move_ordering.move_scratch(geometry.num_lines, geometry.num_boxes))
    assert bad == 0
    assert pruned > 10000


def test_search_moves_lists_the_first_move_captures_safe_lines_by_priority_then_sacrifices_by_size():
    """``search_moves``' list against its definition, written out here: ``first``, the captures, the safe lines by
    priority (larger first), the sacrifices by ``move_score``, ties by line; every undrawn line once, but the
    dominated ones where no box can be captured. Random 4x4 positions (captures, chains and loops among them),
    random priorities with ties, and a random first move."""
    geometry = board_geometry(4, 4)
    num_lines = geometry.num_lines
    line_boxes, box_lines = geometry.line_boxes.astype(np.int64), geometry.box_lines.astype(np.int64)
    scratch = move_ordering.move_scratch(num_lines, geometry.num_boxes)
    rng = np.random.default_rng(5)
    kinds = set()
    for lines in random_positions(rng, num_lines, 300, 10):
        if lines.all():
            continue
        drawn = lines.astype(np.uint8)
        valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
        priority = rng.integers(0, 8, num_lines).astype(np.int64)
        first = int(rng.integers(-1, num_lines))
        skip = np.zeros(num_lines, np.int64)
        if not (valence == 1).any():
            move_ordering.dominated_lines(drawn, valence, line_boxes, box_lines, skip, np.zeros(geometry.num_boxes,
                                          np.int64), np.empty(geometry.num_boxes + 1, np.int64))
        listed = [line for line in range(num_lines) if not drawn[line] and not skip[line]]
        scores = {line: move_ordering.move_score(line, drawn, valence, line_boxes, box_lines,
                                                 np.empty(0, np.int64)) for line in listed}

        def kind(line):
            score, sacrifice = scores[line]
            return 0 if line == first else 1 if score < 0 else 3 if sacrifice else 2

        expected = sorted(listed, key=lambda line: (kind(line), -priority[line] if kind(line) == 2 else 0,
                                                    scores[line][0] if kind(line) == 3 else 0, line))
        moves = np.full(num_lines, -7, np.int64)
        count = move_ordering.search_moves(drawn, valence, line_boxes, box_lines, first, priority, True, scratch,
                                           moves)
        assert moves[:count].tolist() == expected
        kinds.update(kind(line) for line in listed)
    assert kinds == {0, 1, 2, 3}


@pytest.mark.parametrize("rows, cols", [(3, 3), (2, 4), (4, 4), (1, 4)])
def test_corner_keys_identify_swapped_corners(rows, cols):
    """``draw_keyed`` keys: the same canonical key for images under the board's symmetries and for swaps of
    the two outer sides of a corner box; different keys otherwise (checked on random positions)."""
    geometry = board_geometry(rows, cols)
    partner, spare, sym_bits = board_keys.corner_tables(geometry)
    corners = np.flatnonzero(partner >= 0)
    assert len(corners) == (8 if min(rows, cols) >= 2 else 2 * (cols - 2))
    rng = np.random.default_rng(rows * 10 + cols)

    def canonical(lines):
        keys = board_keys.position_keys(lines.astype(np.uint8), geometry.num_symmetries, sym_bits, partner, spare)
        return min((int(k[1]), int(k[0])) for k in keys)

    def corner_normal(lines):  # one outer side drawn: always the lower-numbered one
        lines = lines.copy()
        for a in corners:
            b = partner[a]
            if a < b and lines[a] != lines[b]:
                lines[a], lines[b] = True, False
        return lines

    seen = {}
    for lines in random_positions(rng, geometry.num_lines, 300):
        key = canonical(lines)
        for sym in range(geometry.num_symmetries):
            image = lines[geometry.sym_line_gather[sym]]
            assert canonical(image) == key
            swapped = image.copy()
            a = corners[rng.integers(len(corners))]
            swapped[[a, partner[a]]] = swapped[[partner[a], a]]
            assert canonical(swapped) == key
        classes = {corner_normal(lines[geometry.sym_line_gather[sym]]).tobytes()
                   for sym in range(geometry.num_symmetries)}
        assert seen.setdefault(key, classes) == classes  # a key collision would be two different classes
    # incremental keys (draw_keyed / undraw_keyed) agree with keys recomputed from scratch
    lines = np.zeros(geometry.num_lines, np.uint8)
    valence = np.full(geometry.num_boxes, 4, np.int64)
    keys = np.zeros((geometry.num_symmetries, 2), np.uint64)
    line_boxes = board_kernels.kernel_tables(geometry)[0]
    order = rng.permutation(geometry.num_lines)
    for line in order:
        board_keys.draw_keyed(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        np.testing.assert_array_equal(
            keys, board_keys.position_keys(lines, geometry.num_symmetries, sym_bits, partner, spare))
    for line in order[::-1][:10]:
        board_keys.undraw_keyed(line, lines, valence, keys, line_boxes, sym_bits, partner, spare)
        np.testing.assert_array_equal(
            keys, board_keys.position_keys(lines, geometry.num_symmetries, sym_bits, partner, spare))


@pytest.mark.parametrize("chains, loops", [
    ((3,), ()), ((), (4,)), ((3, 3, 3, 3), ()), ((4, 5, 6), ()), ((), (4, 4, 4)), ((4,), (6, 6)),
    ((3, 4), (4,)), ((3, 2, 2, 1, 6), (4, 6)), ((1, 1, 2), ()), ((2, 2, 3), (8,)),
])
def test_endgame_recursion_does_not_depend_on_where_loop_codes_start(chains, loops):
    """The solvers' leaves code loops after the board's boxes (here 25), the host after 128: the same values."""
    num_boxes = 25
    codes = np.sort(np.array(list(chains) + [num_boxes + a for a in loops], np.int64))
    value = endgame_values.endgame_recursion(codes, len(codes), num_boxes, endgame_values.new_memo())
    assert value == endgame_values.endgame_value(chains, loops)


# --- the position solver --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def solver_3x3():
    return position_solver.PositionSolver(board_geometry(3, 3), table_bits=16)


def assert_solver_matches_table(solver, table_3x3, seed: int, count: int) -> None:
    """``count`` random 3x3 positions with random margins: the solver's value, best-margin and best-result moves
    (and every move's value, every other position) are the whole table's."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(seed)
    positions = random_positions(rng, 24, count)
    margins = rng.integers(-4, 5, size=count)
    values = retrograde.move_values(geometry, table_3x3, positions)
    for i, lines in enumerate(positions):
        legal = ~lines
        solution = solver.solve(lines, int(margins[i]), move_values=bool(i % 2))
        assert solution.finished
        best = values[i].max() if legal.any() else 0
        assert solution.value == best
        np.testing.assert_array_equal(solution.best_margin_moves, legal & (values[i] == best))
        np.testing.assert_array_equal(solution.best_result_moves,
                                      position_solver.best_result_moves(values[i], legal, margins[i]))
        if i % 2:
            np.testing.assert_array_equal(solution.move_values, values[i])


def test_position_solver_matches_table(solver_3x3, table_3x3):
    assert_solver_matches_table(solver_3x3, table_3x3, seed=7, count=300)


_SOLVE_IN_A_NEW_PROCESS = """
import json, sys
import numpy as np
from dabjax.game.geometry import board_geometry
from dabjax.solvers import position_solver
geometry = board_geometry(3, 3)
position_solver.compile_kernels(geometry)
solver = position_solver.PositionSolver(geometry, table_bits=16)
values = [solver.solve(np.array(lines, bool), result_moves=False).value for lines in json.loads(sys.argv[1])]
stats = position_solver._search.stats  # the recursion (_node) is linked into _search's cached code
loaded, compiled = sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
print(json.dumps({"values": values, "loaded": loaded, "compiled": compiled}))
"""


def test_a_new_process_loads_the_search_from_numbas_cache_and_solves_exactly(table_3x3):
    """The recursive search is compiled once per machine, not once per process (it takes long to compile: label
    workers and every CLI process would pay it), and the kernel loaded from numba's cache gives exact values."""
    geometry = board_geometry(3, 3)
    position_solver.compile_kernels(geometry)  # compiles here (and writes the cache) if no process has yet
    positions = random_positions(np.random.default_rng(29), geometry.num_lines, 12, min_drawn=4)
    positions = positions[~positions.all(axis=1)]  # a legal move left in each
    run = subprocess.run([sys.executable, "-c", _SOLVE_IN_A_NEW_PROCESS, json.dumps(positions.tolist())],
                         capture_output=True, text=True, timeout=600, check=True)
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert (loaded["loaded"], loaded["compiled"]) == (1, 0), run.stderr
    values = retrograde.move_values(geometry, table_3x3, positions)
    assert loaded["values"] == [int(v[~lines].max()) for v, lines in zip(values, positions)]


@pytest.mark.parametrize("options", [
    dict(mtd=False, center_first=False, corners=False, prune=False, etc_min_lines=0),  # the plain search
    dict(mtd=True, center_first=False, corners=True, prune=False, etc_min_lines=0),
    dict(mtd=False, center_first=True, corners=False, prune=True, etc_min_lines=4),
])
def test_position_solver_options_match_table(options, table_3x3):
    """Every feature of the search can be switched off (benchmarks compare node counts): still exact."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(13)
    solver = position_solver.PositionSolver(geometry, table_bits=14, **options)
    positions = random_positions(rng, 24, 60)
    values = retrograde.move_values(geometry, table_3x3, positions)
    for i, lines in enumerate(positions):
        expected = values[i].max() if not lines.all() else 0
        assert solver.value(lines, guess=int(rng.integers(-3, 4))) == expected


def test_best_result_moves_semantics():
    legal = np.array([True, True, True, True, False])
    values = np.array([3, 1, -1, -3, -128])
    np.testing.assert_array_equal(position_solver.best_result_moves(values, legal, 0), [1, 1, 0, 0, 0])  # win
    np.testing.assert_array_equal(position_solver.best_result_moves(values, legal, -1), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(position_solver.best_result_moves(values, legal, -3), [1, 0, 0, 0, 0])  # draw
    np.testing.assert_array_equal(position_solver.best_result_moves(values, legal, -5), [1, 1, 1, 1, 0])  # lost


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 2), (2, 2), (2, 3), (1, 5), (3, 3), (2, 4)])
def test_position_solver_reproduces_published_value(rows, cols):
    geometry = board_geometry(rows, cols)
    solution = position_solver.PositionSolver(geometry, table_bits=18).solve(np.zeros(geometry.num_lines, bool))
    assert solution.finished and solution.value == PUBLISHED[(rows, cols)]


def test_position_solver_brute_force_small_positions():
    rng = np.random.default_rng(3)
    for rows, cols, min_drawn in [(2, 2, 0), (2, 3, 6), (1, 4, 0)]:
        geometry = board_geometry(rows, cols)
        solver = position_solver.PositionSolver(geometry, table_bits=12)  # tiny: replacement is exercised
        for lines in random_positions(rng, geometry.num_lines, 25, min_drawn):
            expected = brute_force_move_values(geometry, lines)
            solution = solver.solve(lines, move_values=True)
            np.testing.assert_array_equal(solution.move_values, expected)


def test_position_solver_is_symmetric(solver_3x3):
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(11)
    for lines in random_positions(rng, 24, 20, 8):
        base = solver_3x3.solve(lines)
        for sym in range(geometry.num_symmetries):
            image = solver_3x3.solve(lines[geometry.sym_line_gather[sym]])
            assert image.value == base.value
            gather = geometry.sym_line_gather[sym]
            np.testing.assert_array_equal(image.best_margin_moves, base.best_margin_moves[gather])


def test_budget_reports_unfinished():
    geometry = board_geometry(5, 5)
    lines = np.zeros(60, bool)
    solution = position_solver.PositionSolver(geometry, table_bits=12).solve(lines, max_nodes=1000)
    assert not solution.finished and solution.value is None and solution.best_margin_moves is None
    assert solution.nodes <= 1000


def test_solver_rejects_bad_input():
    with pytest.raises(ValueError, match="24"):
        position_solver.PositionSolver(board_geometry(3, 3), table_bits=10).solve(np.zeros(23, bool))


@pytest.mark.slow
def test_empty_4x4_is_a_draw():
    """The published value of the empty 4x4 board, 0 (Barker and Korf 2012), by two null-window searches
    ("is it >= 0?", "is it >= 1?"); see docs/lab/solver.md for the time (over an hour on one core)."""
    geometry = board_geometry(4, 4)
    solver = position_solver.PositionSolver(geometry, table_bits=25)
    assert solver.value(np.zeros(geometry.num_lines, bool)) == 0


@pytest.mark.slow
def test_3x4_table_and_first_moves():
    """3x4 ties; only the 3 middle vertical lines tie as first moves, every other loses by 2.
    Uses the machine's table cache (DABJAX_CACHE_DIR): about 30 s on two cores and 2.4 GB the first time."""
    geometry = board_geometry(3, 4)
    table = retrograde.solve_table(geometry)
    assert int(table[0]) == 0
    values = retrograde.move_values(geometry, table, np.zeros(31, bool))
    middle = [geometry.v_line(r, 2) for r in range(3)]
    np.testing.assert_array_equal(values, np.where(np.isin(np.arange(31), middle), 0, -2))
    tables = board_kernels.kernel_tables(geometry)
    bad, applied = _rule_violations(table, tables[0], tables[1], geometry.num_lines,
                                    retrograde._completion_masks(geometry), endgame_values.new_memo(), 97)
    assert bad == 0 and applied.min() > 1000
    solver = position_solver.PositionSolver(geometry, table_bits=20)
    rng = np.random.default_rng(5)
    for lines in random_positions(rng, 31, 200, 10):
        if not lines.all():
            assert solver.value(lines) == retrograde.move_values(geometry, table, lines).max()


def assert_result_proofs_match_table(solver, table_3x3, seed: int, count: int) -> None:
    """``prove_result`` on ``count`` random 3x3 positions with random margins, orders and guesses: the result class
    is the table's, the move keeps it, every line it refutes gives the class up and comes before the move in the
    order, and most moves are the first line of the order that keeps the class (the others are the proof's own
    move, the lines before it not settled within their short look)."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(seed)
    positions = random_positions(rng, 24, count)
    margins = rng.integers(-4, 5, size=count)
    values = retrograde.move_values(geometry, table_3x3, positions)
    seen, played_first, kept = set(), 0, 0
    for i, lines in enumerate(positions):
        legal = ~lines
        order = rng.permutation(24)
        proof = solver.prove_result(lines, int(margins[i]), order=order, guess=int(rng.integers(-1, 2)))
        best = values[i].max() if legal.any() else 0
        assert proof.result == np.sign(margins[i] + best)
        keeps = legal & (np.sign(margins[i] + values[i].astype(int)) == proof.result)
        if proof.result < 0 or not legal.any():
            assert proof.move == -1 and not proof.refuted.any()
        else:
            assert keeps[proof.move]
            tried = order[: list(order).index(proof.move)]
            assert set(np.flatnonzero(proof.refuted)) <= set(tried[legal[tried]])
            assert not (proof.refuted & keeps).any()
            kept += 1
            played_first += proof.move == next(m for m in order if keeps[m])
        seen.add(proof.result)
    assert seen == {-1, 0, 1}  # every class was met
    assert played_first >= kept // 2


def test_result_proofs_match_table(solver_3x3, table_3x3):
    assert_result_proofs_match_table(solver_3x3, table_3x3, seed=17, count=200)


def test_result_proofs_play_their_own_line_when_the_preferred_lines_are_not_settled(monkeypatch, table_3x3):
    """With looks of one node, the preferred lines are rarely settled: the proof's own line (the table's, or the
    root's first line that reached the class) is played, and it keeps the result; so does a proof with no order."""
    monkeypatch.setattr(position_solver, "WITNESS_LOOK_NODES", 1)
    geometry = board_geometry(3, 3)
    solver = position_solver.PositionSolver(geometry, table_bits=16)
    rng = np.random.default_rng(29)
    positions = random_positions(rng, 24, 80)
    margins = rng.integers(-3, 4, size=len(positions))
    values = retrograde.move_values(geometry, table_3x3, positions)
    own_lines = 0
    for i, lines in enumerate(positions):
        legal = ~lines
        if not legal.any():
            continue
        order = rng.permutation(24)
        keeps = legal & (np.sign(margins[i] + values[i].astype(int)) == np.sign(margins[i] + values[i][legal].max()))
        for proof in (solver.prove_result(lines, int(margins[i]), order=order, guess=1),
                      solver.prove_result(lines, int(margins[i]))):
            if proof.result >= 0:
                assert keeps[proof.move]
                assert not (proof.refuted & keeps).any()
        own_lines += proof.result >= 0 and proof.move != next(m for m in range(24) if keeps[m])
    assert own_lines > 0  # with no order, line order's first keeping line is not always the proof's


def test_a_result_proof_tries_the_callers_favourite_line_first(table_3x3):
    """``order``'s first legal line is the root's first try: where it keeps the result, the root's table entry ends
    with it as its move (a fresh solver, no enhanced cut-offs to end the root first); without an order the search's
    own first keeping line is stored, which is not always the same."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(37)
    positions = random_positions(rng, 24, 120)
    margins = rng.integers(-2, 3, size=len(positions))
    values = retrograde.move_values(geometry, table_3x3, positions)
    checked, differs = 0, 0
    for i, lines in enumerate(positions):
        legal = ~lines
        if not legal.any():
            continue
        result = np.sign(margins[i] + values[i][legal].max())
        keeps = legal & (np.sign(margins[i] + values[i].astype(int)) == result)
        order = rng.permutation(24)
        favourite = int(next(m for m in order if legal[m]))
        if result < 0 or not keeps[favourite]:
            continue
        entries = []
        for given in (order, None):
            solver = position_solver.PositionSolver(geometry, table_bits=12, etc_min_lines=0)
            solver.prove_result(lines, int(margins[i]), order=given, guess=int(result))
            entries.append(solver._root_entry(solver._position(lines)))
        if entries[0] is None:  # a chain-rule or simple-endgame root: its moves are decided, nothing stored
            continue
        assert entries[0][2] == favourite
        checked += 1
        differs += entries[1][2] != favourite
    assert checked >= 10 and differs > 0


def test_a_proof_out_of_budget_keeps_its_draw_floor_and_its_refutations(table_3x3):
    """Where draws are possible the draw boundary is asked first: a proof that then runs out of nodes still names a
    line that keeps the draw (the table agrees), and a finished one has its result as its floor. A proof out of
    budget also names the lines its table proves give the result up (none that keeps it). ``keeps_result`` agrees
    with the table on every line it is asked about."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(41)
    floors = refuted_seen = 0
    for _ in range(300):
        lines = np.zeros(24, bool)
        lines[rng.permutation(24)[:rng.integers(2, 9)]] = True
        values = retrograde.move_values(geometry, table_3x3, lines).astype(int)
        margin = int(-values[~lines].max() + rng.integers(-1, 2))  # near the draw boundary
        solver = position_solver.PositionSolver(geometry, table_bits=14)
        proof = solver.prove_result(lines, margin, order=rng.permutation(24), guess=int(rng.integers(-1, 2)),
                                    max_nodes=int(rng.integers(200, 5000)), round_nodes=128)
        result = np.sign(margin + values[~lines].max())
        if proof.result is not None:
            assert proof.result == result
            if proof.move >= 0 or result < 0:
                assert (proof.floor, proof.floor_move) == (proof.result, proof.move)
        if proof.floor == 0 and proof.result != 0:
            floors += proof.result is None
            assert result >= 0 and np.sign(margin + values[proof.floor_move]) >= 0
        if proof.floor is None:
            assert proof.floor_move == -1
        if proof.result is None:  # the lines the table proves below the boundary asked give the result up
            assert result == -1 or (np.sign(margin + values[proof.refuted]) < result).all()
            refuted_seen += proof.refuted.any()
        line = int(rng.choice(np.flatnonzero(~lines)))
        for kept in (-1, 0, 1):
            assert solver.keeps_result(lines, margin, line, kept) == (np.sign(margin + values[line]) >= kept)
    assert floors >= 3 and refuted_seen >= 10
    with pytest.raises(ValueError, match="not an undrawn line"):
        solver.keeps_result(np.ones(24, bool), 0, 0, 0)


def simple_root(geometry, lines) -> bool:
    """Whether the position is a simple endgame (only chains and loops, nothing to capture): valued by the
    endgame recursion, its moves are not in the solver's table."""
    line_boxes, box_lines = board_kernels.kernel_tables(geometry)[:2]
    drawn = lines.astype(np.uint8)
    valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
    return bool(move_ordering.chain_rule(drawn, valence, line_boxes, box_lines)[3])


def test_a_class_proven_in_the_budgets_last_round_is_kept_with_its_line(table_3x3):
    """The budget is checked between rounds, so the round that proves the class can spend it all: the proof still
    returns the class and a line that keeps it (a look past the budget), where draws are possible and where they
    are not (then the second boundary is the first's answer, not a second search that a spent budget refuses).
    Budgets of exactly the nodes of the first question, on fresh solvers."""
    geometry = board_geometry(3, 3)
    rng = np.random.default_rng(47)
    checked = {True: 0, False: 0}
    for lines in random_positions(rng, 24, 160, 4):
        legal = ~lines
        if not legal.any():
            continue
        values = retrograde.move_values(geometry, table_3x3, lines).astype(int)
        best = values[legal].max()
        margin = int(-best + rng.integers(-1, 2))
        result = int(np.sign(margin + best))
        solver = position_solver.PositionSolver(geometry, table_bits=14, threads=1)
        state = solver._position(lines)
        remaining = int(state[3])
        draws_possible = (remaining + margin) % 2 == 0
        guess = int(rng.integers(-1, 2))
        threshold = -margin if (draws_possible or guess <= 0) else 1 - margin  # the first question asked
        if not -remaining < threshold <= remaining:
            continue  # the bounds answer it without a search
        first = position_solver._Budget(None, None, position_solver.PROOF_ROUND_NODES)
        solver._at_least(first, state, -1, threshold)
        fresh = position_solver.PositionSolver(geometry, table_bits=14, threads=1)
        proof = fresh.prove_result(lines, margin, guess=guess, max_nodes=first.nodes_used)
        keeps = legal & (np.sign(margin + values) >= 0)
        if not draws_possible:
            assert proof.result == result
            if result > 0:
                assert proof.move >= 0 and np.sign(margin + values[proof.move]) == result
            checked[False] += 1
        elif proof.result is None and best + margin >= 0 and not simple_root(geometry, lines):
            assert proof.floor == 0 and keeps[proof.floor_move]  # the draw answered, the win not: its floor kept
            checked[True] += 1
    assert checked[False] >= 20 and checked[True] >= 5


def test_a_chain_rule_root_plays_the_rules_line_and_a_class_alone_names_no_line(table_3x3, monkeypatch):
    """At a root where the chain rule forces a capture (which the table does not keep), the capture is the proof's
    own line: played where the caller's preferred lines are not settled by their short looks (here none is
    looked at); ``keeping_move=False`` proves the class alone."""
    monkeypatch.setattr(position_solver, "WITNESS_LOOK_NODES", 0)
    geometry = board_geometry(3, 3)
    line_boxes, box_lines = board_kernels.kernel_tables(geometry)[:2]
    solver = position_solver.PositionSolver(geometry, table_bits=14)
    rng = np.random.default_rng(53)
    forced_roots = 0
    for lines in random_positions(rng, 24, 300, 6):
        legal = ~lines
        if not legal.any():
            continue
        drawn = lines.astype(np.uint8)
        valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
        forced, _, _, _ = move_ordering.chain_rule(drawn, valence, line_boxes, box_lines)
        values = retrograde.move_values(geometry, table_3x3, lines).astype(int)
        result = int(np.sign(values[legal].max()))
        alone = solver.prove_result(lines, 0, order=rng.permutation(24), keeping_move=False)
        assert alone.result == result and alone.move == -1
        if forced < 0 or result < 0:
            continue
        proof = solver.prove_result(lines, 0, order=rng.permutation(24), guess=-result)
        assert proof.result == result and proof.move == forced and np.sign(values[forced]) == result
        forced_roots += 1
    assert forced_roots >= 10


def test_a_pruned_line_gives_way_to_the_line_its_chain_keeps(table_3x3):
    """``searched_line``: a line the pruned search leaves out maps to an undrawn line it searches, in the same chain
    or loop, whose value is at least as good (the table's); a line it searches maps to itself."""
    geometry = board_geometry(3, 3)
    line_boxes, box_lines = geometry.line_boxes.astype(np.int64), geometry.box_lines.astype(np.int64)
    rng = np.random.default_rng(43)
    pruned_seen = 0
    for lines in random_positions(rng, 24, 400, 8):
        if lines.all():
            continue
        drawn = lines.astype(np.uint8)
        valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
        moves = np.zeros(24, np.int64)
        count = move_ordering.search_moves(drawn, valence, line_boxes, box_lines, -1,
                                           np.zeros(24, np.int64), True, move_ordering.move_scratch(24, 9), moves)
        searched = set(moves[:count].tolist())
        values = retrograde.move_values(geometry, table_3x3, lines)
        for line in np.flatnonzero(~lines):
            kept = int(move_ordering.searched_line(int(line), drawn, valence, line_boxes, box_lines))
            if line in searched:
                assert kept == line
            else:
                pruned_seen += 1
                assert kept in searched and values[kept] >= values[line]
    assert pruned_seen >= 50
    solver = position_solver.PositionSolver(geometry, table_bits=12)
    suggested = 0
    for lines in random_positions(rng, 24, 200, 8):
        state = solver._position(lines)
        drawn, valence = state[0], state[1]
        pruned = [int(line) for line in np.flatnonzero(~lines)
                  if move_ordering.searched_line(int(line), drawn, valence, line_boxes, box_lines) != line]
        if not pruned:
            continue
        solver._tt[0][:] = 0  # an empty table: the first try is stored
        solver._suggest(state, pruned[0])
        entry = solver._root_entry(state)
        if entry is not None:  # the root's first try is the line the pruned search keeps for it
            assert entry[2] == move_ordering.searched_line(pruned[0], drawn, valence, line_boxes, box_lines)
            suggested += 1
    assert suggested >= 10


def test_result_proof_out_of_budget():
    geometry = board_geometry(5, 5)
    proof = position_solver.PositionSolver(geometry, table_bits=12).prove_result(np.zeros(60, bool), max_nodes=1000,
                                                                                 round_nodes=256)
    assert proof.result is None and proof.move == -1 and proof.nodes <= 1000
