"""Exact play at play time (the ``+exact`` agents): how often the solver finishes, and what it adds.

    python benchmarks/exact_play.py --set data/5x5.npz --agent pretrained:5x5:64 --per-move 30
    python benchmarks/exact_play.py --set data/4x4.npz --agent pretrained:4x4:64 --per-move 30 --exact-seconds 2

By move number of a labelled set (``--per-move`` positions of each, the first ones of the set): the share of
positions the position solver finishes within each of ``--budgets`` seconds (one solve per position, budget the
largest, a fresh transposition table per position so no position helps the next), and the best-result share of
``--agent`` alone and of ``--agent+exact:SECONDS`` (the agent as users get it: its self-calibrating limit on
undrawn lines included, positions in the set's order, one batch per move number). Wall times: run it alone on
the machine. Prints a table (and ``--json`` writes it); not a test.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dabjax.evaluation import agent_registry, exact_play  # noqa: E402
from dabjax.solvers import labelled  # noqa: E402
from dabjax.solvers.position_solver import PositionSolver  # noqa: E402


def first_per_move(data: labelled.LabelledSet, per_move: int) -> labelled.LabelledSet:
    keep = np.zeros(len(data), bool)
    for number in np.unique(data.move_numbers):
        keep[np.flatnonzero(data.move_numbers == number)[:per_move]] = True
    return labelled.subset(data, keep)


def solve_times(data: labelled.LabelledSet, limit: float, table_bits: int) -> np.ndarray:
    """float ``[N]``: seconds to solve each position (``inf`` when not within ``limit``)."""
    times = np.full(len(data), np.inf)
    exact_play.compile_solver_kernels(data.geometry)  # numba compiles on the first search, outside the timings
    for i in range(len(data)):
        solver = PositionSolver(data.geometry, table_bits=table_bits)
        solution = solver.solve(data.lines[i], result_moves=False, time_limit=limit)
        if solution.finished:
            times[i] = solution.seconds
        print(f"\r  solving {i + 1}/{len(data)}", end="", flush=True)
    print()
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", required=True)
    parser.add_argument("--agent", required=True, help="an agent spec, e.g. pretrained:5x5:64")
    parser.add_argument("--per-move", type=int, default=30)
    parser.add_argument("--budgets", default="0.5,2,10")
    parser.add_argument("--exact-seconds", type=float, default=2.0)
    parser.add_argument("--table-bits", type=int, default=22)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    budgets = [float(b) for b in args.budgets.split(",")]
    data = first_per_move(labelled.load(args.set), args.per_move)
    geometry = data.geometry
    print(f"{args.set}: {len(data)} positions, moves {data.move_numbers.min()}-{data.move_numbers.max()}")
    times = solve_times(data, max(budgets), args.table_bits)
    key = jax.random.PRNGKey(args.seed)
    plain = agent_registry.make_agent(args.agent, geometry)
    exact_spec = f"{args.agent}+exact:{args.exact_seconds:g}"
    exact = agent_registry.make_agent(exact_spec, geometry)
    start = time.perf_counter()
    plain_moves = labelled.agent_moves(plain, data, key)
    plain_seconds = time.perf_counter() - start
    exact_moves = np.zeros(len(data), np.int32)
    exact_seconds = {}
    for number in np.unique(data.move_numbers):  # one batch per move number, in order: as a game goes
        rows = np.flatnonzero(data.move_numbers == number)
        start = time.perf_counter()
        exact_moves[rows] = labelled.agent_moves(exact, labelled.subset(data, data.move_numbers == number), key)
        exact_seconds[int(number)] = time.perf_counter() - start
    plain_acc = labelled.accuracy_of_moves(data, plain_moves)
    exact_acc = labelled.accuracy_of_moves(data, exact_moves)
    rows = []
    header = (["move", "positions"] + [f"solved<={b:g}s" for b in budgets]
              + [args.agent, exact_spec, "exact s/position"])
    print("  ".join(header))
    for i, number in enumerate(plain_acc.move_numbers):
        here = data.move_numbers == number
        row = dict(move=int(number), positions=int(here.sum()),
                   solved={f"{b:g}": float(np.mean(times[here] <= b)) for b in budgets},
                   best_result=float(plain_acc.best_result[i]), best_result_exact=float(exact_acc.best_result[i]),
                   exact_seconds_per_position=exact_seconds[int(number)] / here.sum())
        rows.append(row)
        print("  ".join([f"{row['move']:4d}", f"{row['positions']:9d}"]
                        + [f"{row['solved'][f'{b:g}']:{len(f'solved<={b:g}s')}.2f}" for b in budgets]
                        + [f"{row['best_result']:{len(args.agent)}.3f}",
                           f"{row['best_result_exact']:{len(exact_spec)}.3f}",
                           f"{row['exact_seconds_per_position']:16.2f}"]))
    print(f"{args.agent}: {plain_seconds:.1f} s for all positions; {exact_spec}: "
          f"{sum(exact_seconds.values()):.1f} s; solver moves {exact.counts.get('solver', 0)}, "
          f"timeouts {exact.counts.get('timeout', 0)}, fallback {exact.counts.get('fallback', 0)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(dict(set=args.set, agent=args.agent, exact=exact_spec,
                                                           budgets=budgets, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
