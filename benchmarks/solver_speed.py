"""Exact solver speeds: the whole 3x3 table, positions solved per second by move number, an empty board.

    python benchmarks/solver_speed.py                      # 3x3 table + 5x5 moves 22..30, 20 positions each
    python benchmarks/solver_speed.py --per-move 50 --moves 22-30 --move-values --table-3x4
    python benchmarks/solver_speed.py --board 4x4 --moves 4-20 --per-move 10
    python benchmarks/solver_speed.py --empty 4x4 --moves none --no-table   # the empty 4x4 board: 0, ~16 min
    python benchmarks/solver_speed.py --compare --board 4x4 --moves 12,16 --per-move 10 --no-table
    python benchmarks/solver_speed.py --no-table --moves 22 --per-move 10 --threads 2   # one position, 2 threads
    python benchmarks/solver_speed.py --no-table --moves none --budget 0.5 --threads 2  # the budget kept

Positions are reached as in the labelled sets (greedy opening policy mixed with 20% random moves, distinct
under symmetry). "solve" = exact value + best-margin + best-result move sets (what the labelled sets need
without --move-values); with --move-values also every move's exact value. One solver per move number (its
transposition table, 2**22 entries, persists across that move number's positions, as when building a set).
With --compare, node counts of the exact value (deterministic, unlike times on a shared CPU) on the same
positions with the search's features switched on one after another, from the search as it was before them
("before": full window, line order, no corner keys, no pruned lines, no enhanced transposition cut-offs).
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from dabjax.cli.label import parse_move_numbers
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.solvers import labelled, retrograde
from dabjax.solvers.position_solver import PositionSolver


def compile_kernels(geometry, **options) -> None:
    """Runs the search once (a position with one undrawn line, a tiny table): numba compiles the recursive
    kernel on its first search, seconds that no timing below should include. (The full board returns
    before the search, so solving it compiles nothing.)"""
    almost_full = np.ones(geometry.num_lines, bool)
    almost_full[0] = False
    PositionSolver(geometry, table_bits=4, **options).value(almost_full)


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


def empty_board(rows: int, cols: int, time_limit: float | None, table_bits: int, threads: int = 1) -> None:
    """The value of the empty board by null-window searches from 0 (MTD(f)): for a draw, "is it >= 0?"
    then "is it >= 1?"."""
    geometry = board_geometry(rows, cols)
    solver = PositionSolver(geometry, table_bits=table_bits, threads=threads)
    compile_kernels(geometry)
    start = time.perf_counter()

    def log(threshold, bound, nodes):
        answer = "out of budget" if bound is None else f"{'yes' if bound >= threshold else 'no'} (bound {bound:+d})"
        print(f"  value >= {threshold:+d}? {answer}: {nodes:,} nodes so far, {time.perf_counter() - start:.1f} s",
              flush=True)

    stats = {}
    value = solver.value(np.zeros(geometry.num_lines, bool), time_limit=time_limit, stats=stats, log=log)
    seconds = time.perf_counter() - start
    shown = "unfinished" if value is None else f"{value:+d} for the first player"
    print(f"empty {geometry.name} board: value {shown} in {seconds:.1f} s, {stats['nodes']:,} nodes "
          f"({stats['nodes'] / seconds / 1e6:.2f} M/s; {threads} thread(s), transposition table 2**{table_bits}, "
          f"{solver.etc_cuts:,} enhanced transposition cut-offs)", flush=True)


# The search's features, switched on one after another (PositionSolver keyword arguments).
FEATURES = {
    "before": dict(mtd=False, center_first=False, corners=False, prune=False, etc_min_lines=0),
    "+mtd(f)": dict(mtd=True, center_first=False, corners=False, prune=False, etc_min_lines=0),
    "+centre order": dict(mtd=True, center_first=True, corners=False, prune=False, etc_min_lines=0),
    "+corner keys": dict(mtd=True, center_first=True, corners=True, prune=False, etc_min_lines=0),
    "+pruned lines": dict(mtd=True, center_first=True, corners=True, prune=True, etc_min_lines=0),
    "+etc (now)": dict(mtd=True, center_first=True, corners=True, prune=True, etc_min_lines=16),
}


def compare_features(rows: int, cols: int, moves: list[int], per_move: int, seed: int, max_nodes: int) -> None:
    """Total nodes for the exact values of the positions of each move number, per feature set; a fresh
    2**22 table per position. A position not solved within ``max_nodes`` counts ``max_nodes`` (marked >)."""
    geometry = board_geometry(rows, cols)
    positions = labelled.sample_positions(geometry, moves, per_move, seed=seed)
    print(f"{geometry.name}: nodes for the exact value (total over the positions; time on this CPU in brackets)")
    counts = [int((positions["move_numbers"] == n).sum()) for n in moves]
    print(f"{'features':16s}" + "".join(f"{f'move {n} ({k} positions)':>30s}" for n, k in zip(moves, counts)))
    for name, options in FEATURES.items():
        compile_kernels(geometry, **options)
        row = f"{name:16s}"
        for n in moves:
            total, seconds, capped, values = 0, 0.0, False, []
            for lines in positions["lines"][positions["move_numbers"] == n]:
                stats = {}
                start = time.perf_counter()
                values.append(PositionSolver(geometry, **options).value(lines, max_nodes=max_nodes, stats=stats))
                seconds += time.perf_counter() - start
                total += stats["nodes"]
                capped |= values[-1] is None
            shown = (">" if capped else "") + f"{total:,}"
            row += f"{shown:>20s} ({seconds:6.1f} s)"
        print(row, flush=True)


def position_speed(rows: int, cols: int, moves: list[int], per_move: int, move_values: bool, time_limit: float,
                   seed: int, threads: int = 1) -> None:
    geometry = board_geometry(rows, cols)
    compile_kernels(geometry)
    positions = labelled.sample_positions(geometry, moves, per_move, seed=seed)
    print(f"{geometry.name} positions, {'with' if move_values else 'without'} every move's value, "
          f"time limit {time_limit:.0f} s each, {threads} thread(s)")
    print("move  positions  finished  positions/s  mean s  max s  mean nodes  Mnodes/s")
    for n in moves:
        at = np.flatnonzero(positions["move_numbers"] == n)
        solver = PositionSolver(geometry, threads=threads)
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


def budget_kept(time_limit: float, threads: int) -> None:
    """How well the solver keeps its wall-time budget on a position it cannot finish (the empty 5x5 board),
    on ``threads`` threads: seconds it took against ``time_limit`` (the target: stopped within a few tenths)."""
    geometry = board_geometry(5, 5)
    compile_kernels(geometry, threads=threads)
    solver = PositionSolver(geometry, table_bits=12, threads=threads)
    began = time.perf_counter()
    solution = solver.solve(np.zeros(geometry.num_lines, bool), time_limit=time_limit)
    wall = time.perf_counter() - began
    print(f"budget {time_limit:.2f} s on {threads} thread(s), the empty 5x5 board: finished {solution.finished}, "
          f"{solution.seconds:.2f} s by the solver, {wall:.2f} s wall ({wall / time_limit:.2f}x the budget)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--board", default="5x5", help="board of the positions (default 5x5)")
    parser.add_argument("--moves", default="22-30", help="move numbers, e.g. 22-30, or none")
    parser.add_argument("--empty", metavar="BOARD", help="also solve this empty board, e.g. 4x4")
    parser.add_argument("--table-bits", type=int, default=27,
                        help="transposition table size for --empty (2**27 entries: 2.9 GB)")
    parser.add_argument("--per-move", type=int, default=20)
    parser.add_argument("--move-values", action="store_true", help="also every move's exact value")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per position")
    parser.add_argument("--empty-time-limit", type=float, help="seconds for the --empty solve (default: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="the solver's threads (positions and --empty)")
    parser.add_argument("--table-3x4", action="store_true", help="also time the 3x4 table (~30 s on two cores, 2.4 GB)")
    parser.add_argument("--no-table", action="store_true", help="skip the 3x3 table timing")
    parser.add_argument("--compare", action="store_true",
                        help="node counts with the search's features switched on one by one, not the speeds")
    parser.add_argument("--max-nodes", type=float, default=2e8, help="node cap per position for --compare")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="also: how long an unfinishable solve with this time limit takes (--threads threads)")
    args = parser.parse_args()
    if args.budget:
        budget_kept(args.budget, args.threads)
    if not args.no_table:
        table_time(3, 3)
    if args.table_3x4:
        table_time(3, 4)
    if args.empty:
        empty_board(*parse_board_size(args.empty), args.empty_time_limit, args.table_bits, args.threads)
    if args.moves != "none" and args.compare:
        compare_features(*parse_board_size(args.board), parse_move_numbers(args.moves), args.per_move, args.seed,
                         int(args.max_nodes))
    elif args.moves != "none":
        position_speed(*parse_board_size(args.board), parse_move_numbers(args.moves), args.per_move,
                       args.move_values, args.time_limit, args.seed, args.threads)


if __name__ == "__main__":
    main()
