"""Exact solver speeds: the whole 3x3 table, positions solved per second by move number, an empty board.

    python benchmarks/solver_speed.py                      # 3x3 table + 5x5 moves 22..30, 20 positions each
    python benchmarks/solver_speed.py --per-move 50 --moves 22-30 --move-values --table-3x4
    python benchmarks/solver_speed.py --board 4x4 --moves 4-20 --per-move 10
    python benchmarks/solver_speed.py --empty 4x4 --moves none   # the empty 4x4 board's value (published: 0)

Positions are reached as in the labelled sets (greedy opening policy mixed with 20% random moves, distinct
under symmetry). "solve" = exact value + best-margin + best-result move sets (what the labelled sets need
without --move-values); with --move-values also every move's exact value. One solver per move number (its
transposition table, 2**22 entries, persists across that move number's positions, as when building a set).
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from dabjax.cli.labelled import parse_move_numbers
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.solvers import labelled, retrograde
from dabjax.solvers.position_solver import PositionSolver


def table_time(rows: int, cols: int) -> None:
    geometry = board_geometry(rows, cols)
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        table = retrograde.solve_table(geometry, cache_dir=directory)  # computes and saves: no cache yet
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        retrograde.solve_table(geometry, cache_dir=directory)
        loaded = time.perf_counter() - start
    print(f"{geometry.name} whole table: {seconds:.2f} s to compute and save, {loaded:.2f} s to load; "
          f"value {int(table[0])}, {table.nbytes / 2**20:.0f} MiB")


def empty_board(rows: int, cols: int, time_limit: float, table_bits: int) -> None:
    """The value of the empty board by two null-window searches (is it >= 1? is it >= 0?), then exact."""
    geometry = board_geometry(rows, cols)
    solver = PositionSolver(geometry, table_bits=table_bits)
    solver.value(np.ones(geometry.num_lines, bool))  # compile outside the timing
    start = time.perf_counter()
    value = solver.value(np.zeros(geometry.num_lines, bool), time_limit=time_limit)
    seconds = time.perf_counter() - start
    shown = "unfinished" if value is None else f"{value:+d} for the first player"
    print(f"empty {geometry.name} board: value {shown} in {seconds:.1f} s (transposition table 2**{table_bits})")


def position_speed(rows: int, cols: int, moves: list[int], per_move: int, move_values: bool, time_limit: float,
                   seed: int) -> None:
    geometry = board_geometry(rows, cols)
    PositionSolver(geometry, table_bits=10).value(np.ones(geometry.num_lines, bool))  # compile outside timings
    positions = labelled.sample_positions(geometry, moves, per_move, seed=seed)
    print(f"{geometry.name} positions, {'with' if move_values else 'without'} every move's value, "
          f"time limit {time_limit:.0f} s each")
    print("move  positions  finished  positions/s  mean s  max s  mean nodes  Mnodes/s")
    for n in moves:
        at = np.flatnonzero(positions["move_numbers"] == n)
        solver = PositionSolver(geometry)
        seconds, nodes, finished = [], [], 0
        for i in at:
            solution = solver.solve(positions["lines"][i], int(positions["margin"][i]), move_values=move_values,
                                    time_limit=time_limit)
            seconds.append(solution.seconds)
            nodes.append(solution.nodes)
            finished += solution.finished
        total = sum(seconds)
        print(f"{n:4d}  {len(at):9d}  {finished:8d}  {len(at) / total:11.2f}  {total / len(at):6.2f}  "
              f"{max(seconds):5.1f}  {np.mean(nodes):10.0f}  {sum(nodes) / total / 1e6:8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--board", default="5x5", help="board of the positions (default 5x5)")
    parser.add_argument("--moves", default="22-30", help="move numbers, e.g. 22-30, or none")
    parser.add_argument("--empty", metavar="BOARD", help="also solve this empty board, e.g. 4x4")
    parser.add_argument("--table-bits", type=int, default=24, help="transposition table size for --empty")
    parser.add_argument("--per-move", type=int, default=20)
    parser.add_argument("--move-values", action="store_true", help="also every move's exact value")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per position")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--table-3x4", action="store_true", help="also time the 3x4 table (~8 min, 2.5 GB)")
    args = parser.parse_args()
    table_time(3, 3)
    if args.table_3x4:
        table_time(3, 4)
    if args.empty:
        empty_board(*parse_board_size(args.empty), args.time_limit, args.table_bits)
    if args.moves != "none":
        position_speed(*parse_board_size(args.board), parse_move_numbers(args.moves), args.per_move,
                       args.move_values, args.time_limit, args.seed)


if __name__ == "__main__":
    main()
