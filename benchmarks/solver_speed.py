"""Exact solver speeds: the whole 3x3 table, and 5x5 positions solved per second by move number.

    python benchmarks/solver_speed.py                      # 3x3 table + 5x5 moves 22..30, 20 positions each
    python benchmarks/solver_speed.py --per-move 50 --moves 22-30 --move-values --table-3x4

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

from dabjax import labelled, retrograde
from dabjax.geometry import board_geometry
from dabjax.solver import PositionSolver


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


def position_speed(moves: list[int], per_move: int, move_values: bool, time_limit: float, seed: int) -> None:
    geometry = board_geometry(5, 5)
    PositionSolver(geometry, table_bits=10).value(np.ones(60, bool))  # compile outside the timings
    positions = labelled.sample_positions(geometry, moves, per_move, seed=seed)
    print(f"5x5 positions, {'with' if move_values else 'without'} every move's value, "
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
    parser.add_argument("--moves", default="22-30", help="5x5 move numbers, e.g. 22-30")
    parser.add_argument("--per-move", type=int, default=20)
    parser.add_argument("--move-values", action="store_true", help="also every move's exact value")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per position")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--table-3x4", action="store_true", help="also time the 3x4 table (~8 min, 2.5 GB)")
    args = parser.parse_args()
    table_time(3, 3)
    if args.table_3x4:
        table_time(3, 4)
    position_speed(labelled._parse_moves(args.moves), args.per_move, args.move_values, args.time_limit, args.seed)


if __name__ == "__main__":
    main()
