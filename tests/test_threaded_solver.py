"""The position solver on several threads: the answers of one thread, checked against the whole 3x3 table."""

import numpy as np
import pytest
from test_solver import assert_solver_matches_table

from dabjax.game.geometry import board_geometry
from dabjax.solvers import position_solver, retrograde


@pytest.fixture(scope="module")
def table_3x3(tmp_path_factory):
    return retrograde.solve_table(board_geometry(3, 3), tmp_path_factory.mktemp("solver-cache"))


@pytest.fixture
def always_parallel(monkeypatch):
    """Every position goes to the threads at once, with short rounds (so that stopping is exercised)."""
    monkeypatch.setattr(position_solver, "_SEQUENTIAL_NODES", 0)
    monkeypatch.setattr(position_solver, "_THREAD_ROUND_NODES", 4096)


def test_two_threads_match_the_table(always_parallel, table_3x3):
    solver = position_solver.PositionSolver(board_geometry(3, 3), table_bits=12, threads=2)  # small: replacement too
    assert_solver_matches_table(solver, table_3x3, seed=21, count=80)
    assert len(solver._helpers) == 1  # the positions did go to the second thread


def test_threads_search_one_tree_from_the_empty_board(always_parallel):
    """The empty 3x3 board (published value -3), every null window searched by three threads at once; the marks of
    the positions being searched are all cleared when they finish."""
    geometry = board_geometry(3, 3)
    solver = position_solver.PositionSolver(geometry, table_bits=16, threads=3)
    assert solver.value(np.zeros(24, bool)) == -3
    assert len(solver._helpers) == 2
    assert sum(thread.deferrals for thread in solver._thread_solvers()) > 0  # they did spread over the moves
    busy = solver._tt[1]
    assert busy.shape == (1 << position_solver._BUSY_BITS,) and not busy.any()


def test_threads_keep_the_budget():
    geometry = board_geometry(5, 5)
    solver = position_solver.PositionSolver(geometry, table_bits=12, threads=2)
    almost_full = np.ones(60, bool)
    almost_full[0] = False
    assert solver.solve(almost_full).finished  # numba compiles the search here, outside the budget below
    # The empty 5x5 board cannot be solved in 0.5 s: the threads stop, unfinished, with no value. How close to
    # the budget they stop is a wall time, measured by `benchmarks/solver_speed.py --budget 0.5 --threads 2`.
    solution = solver.solve(np.zeros(60, bool), time_limit=0.5)
    assert not solution.finished and solution.value is None and solution.seconds >= 0.5
    with pytest.raises(ValueError, match="threads=0"):
        position_solver.PositionSolver(geometry, table_bits=12, threads=0)


def test_two_threads_prove_results_as_the_table(always_parallel, table_3x3):
    from test_solver import assert_result_proofs_match_table
    solver = position_solver.PositionSolver(board_geometry(3, 3), table_bits=12, threads=2)
    assert_result_proofs_match_table(solver, table_3x3, seed=23, count=60)
    assert len(solver._helpers) == 1  # the root searches did go to the second thread


def _compiled_signatures() -> dict:
    """The compiled signatures of every numba kernel the position solver runs."""
    from numba.core.registry import CPUDispatcher

    from dabjax.solvers import board_kernels, board_keys, endgame_values, move_ordering
    kernels = {}
    for module in (position_solver, board_kernels, board_keys, endgame_values, move_ordering):
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher):
                kernels[f"{module.__name__}.{name}"] = len(value.signatures)
    return kernels


def test_compile_kernels_leaves_nothing_to_compile_in_a_timed_proof(always_parallel, table_3x3):
    """After ``compile_kernels``, a result proof and an exact solve on threads (the shared search) compile nothing:
    a clock agent's first proof would otherwise spend its budget in numba."""
    geometry = board_geometry(3, 3)
    position_solver.compile_kernels(geometry)
    before = _compiled_signatures()
    assert sum(before.values()) >= 5  # the kernels Python calls (the ones they call compile inside them)
    solver = position_solver.PositionSolver(geometry, table_bits=12, threads=2)
    rng = np.random.default_rng(5)
    while True:  # nothing to capture: the root is no chain-rule node, so a kept result's line is the proof's own
        lines = np.zeros(24, bool)
        lines[rng.permutation(24)[:9]] = True
        if lines[geometry.box_lines].sum(axis=1).max() < 3:
            break
    proofs = [solver.prove_result(lines, margin, order=rng.permutation(24), guess=0) for margin in (0, 3)]
    solver.solve(lines)
    assert all(p.result is not None for p in proofs) and proofs[1].move >= 0  # a kept result: its line found
    assert _compiled_signatures() == before


def test_a_table_entry_packs_its_bounds_and_move_in_one_cache_line_and_a_torn_one_is_absent():
    table = position_solver._new_table(16)
    assert table.shape == (16, 4) and table.ctypes.data % 64 == 0  # a bucket's two entries: one 64-byte line
    mask, k0, k1 = np.uint64(7), np.uint64(12345), np.uint64(678)
    assert position_solver._probe(table, k0, k1, mask)[0] == -1  # empty: absent
    position_solver._store(table, k0, k1, mask, np.int64(-5), np.int64(127), np.int64(-1), np.int64(30))
    slot, lower, upper, move = position_solver._probe(table, k0, k1, mask)
    assert slot >= 0 and (lower, upper, move) == (-5, 127, -1)
    position_solver._store(table, k0, k1, mask, np.int64(-3), np.int64(9), np.int64(17), np.int64(30))
    assert position_solver._probe(table, k0, k1, mask)[1:] == (-3, 9, 17)  # bounds intersected, move replaced
    table[slot, 2] ^= np.uint64(1 << 8)  # another writer's data beside this key: the check word fails
    assert position_solver._probe(table, k0, k1, mask)[0] == -1
