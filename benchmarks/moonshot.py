"""An empty board solved in resumable jobs, one per first move: a search of hours that survives being stopped.

    python benchmarks/moonshot.py --board 4x4 --dir runs/moonshot-4x4 --table-bits 27        # ~4 min
    python benchmarks/moonshot.py --board 4x5 --dir runs/moonshot-4x5 --table-bits 27 --hours 2.5

The value of the empty board by MTD(f) from 0, as ``benchmarks/solver_speed.py --empty`` finds it, but each
null-window question ("is the value >= t?") is split into one job per first move (moves whose positions are
images of another's under the board's symmetries and corner swaps are asked once): the answer is yes as soon
as one first move reaches ``t``, else no after every first move. Each job's answer goes into
``DIR/ledger.json`` when it is proved, and every ``--checkpoint-minutes`` (and on Ctrl-C or ``--hours``) the
transposition table is saved in ``DIR/table_*.npy`` (29 bytes an entry: 3.9 GB at 2**27): the table is the
search's memory, so a rerun of the same command skips the answered jobs and finds most of the unfinished one's
work in the table. ``--hours`` stops the run (resumable) after that much wall time. Prints each job's answer,
nodes and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from solver_speed import compile_kernels  # noqa: E402

from dabjax.game.geometry import board_geometry, parse_board_size  # noqa: E402
from dabjax.solvers import move_ordering, position_solver  # noqa: E402
from dabjax.solvers.position_solver import PositionSolver  # noqa: E402


def first_moves(solver: PositionSolver, state) -> list[int]:
    """The empty board's first moves in the search's order (centre first), one per class of images."""
    lines, valence = state[0], state[1]
    line_boxes, box_lines = solver._tables[0], solver._tables[1]
    buffer = np.empty(lines.shape[0], np.int64)
    count = move_ordering.search_moves(lines, valence, line_boxes, box_lines, -1, solver._priority, False,
                                       move_ordering.move_scratch(lines.shape[0], valence.shape[0]), buffer)
    return position_solver._distinct_children(buffer[:count].tolist(), state, solver._tables)


def save_table(solver: PositionSolver, directory: pathlib.Path) -> float:
    start = time.perf_counter()
    for i, array in enumerate(solver._tt):
        partial = directory / f"table_{i}.tmp.npy"
        np.save(partial, array)
        os.replace(partial, directory / f"table_{i}.npy")
    return time.perf_counter() - start


def load_table(solver: PositionSolver, directory: pathlib.Path) -> bool:
    paths = [directory / f"table_{i}.npy" for i in range(len(solver._tt))]
    if not all(path.is_file() for path in paths):
        return False
    for path, array in zip(paths, solver._tt):
        saved = np.load(path, mmap_mode="r")
        if saved.shape != array.shape or saved.dtype != array.dtype:
            raise ValueError(f"{path} holds a table of shape {saved.shape}, this run's is {array.shape}: give the "
                             "same --table-bits")
        np.copyto(array, saved)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--board", required=True, help="RxC, e.g. 4x5")
    parser.add_argument("--dir", required=True, help="the run's directory (ledger and table checkpoints)")
    parser.add_argument("--table-bits", type=int, default=27, help="2**N table entries (27: 3.9 GB)")
    parser.add_argument("--checkpoint-minutes", type=float, default=20.0)
    parser.add_argument("--hours", type=float, default=None, help="stop (resumable) after this much wall time")
    args = parser.parse_args()
    if not args.checkpoint_minutes >= 1:
        parser.error("--checkpoint-minutes must be at least 1 (a job runs at least that long between saves)")
    geometry = board_geometry(*parse_board_size(args.board))
    directory = pathlib.Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    ledger_path = directory / "ledger.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {
        "board": geometry.name, "table_bits": args.table_bits, "passes": {}, "value": None}
    if (ledger["board"], ledger["table_bits"]) != (geometry.name, args.table_bits):
        parser.error(f"{directory} holds a {ledger['board']} run with --table-bits {ledger['table_bits']}")
    compile_kernels(geometry)
    solver = PositionSolver(geometry, table_bits=args.table_bits)
    print(f"table loaded from {directory}" if load_table(solver, directory) else "a fresh table", flush=True)
    state = solver._position(np.zeros(geometry.num_lines, bool))
    moves = first_moves(solver, state)
    boxes = geometry.num_boxes
    print(f"empty {geometry.name}: {len(moves)} first moves up to symmetry: {moves}", flush=True)
    stop_at = time.perf_counter() + (np.inf if args.hours is None else 3600 * args.hours)
    checkpoint_at = time.perf_counter() + 60 * args.checkpoint_minutes

    def write_ledger():
        partial = directory / "ledger.tmp.json"
        partial.write_text(json.dumps(ledger, indent=1))
        os.replace(partial, ledger_path)

    lower, upper, guess = -boxes, boxes, 0
    for answers in ledger["passes"].values():  # what earlier runs proved
        threshold = answers["threshold"]
        if answers.get("answer") == "yes":
            lower = max(lower, answers["bound"])
        elif answers.get("answer") == "no":
            upper = min(upper, answers["bound"])
    guess = min(max(guess, lower), upper)
    while lower < upper:
        threshold = max(guess, lower + 1)
        answers = ledger["passes"].setdefault(str(threshold), {"threshold": threshold, "moves": {}})
        best = -boxes - 1
        for move in moves:
            done = answers["moves"].get(str(move))
            while done is None:
                # At least a second: a job always gets somewhere before the next save.
                budget = position_solver._Budget(None, max(1.0, min(checkpoint_at, stop_at) - time.perf_counter()))
                start = time.perf_counter()
                try:
                    bound = solver._bounded(budget, state, move, threshold - 1, threshold)
                except KeyboardInterrupt:  # between two rounds of the search: the table holds what they proved
                    seconds = save_table(solver, directory)
                    print(f"interrupted: table saved in {seconds:.0f} s; rerun the same command to go on", flush=True)
                    return 130
                if bound is not None:
                    seconds = round(time.perf_counter() - start, 1)
                    done = {"bound": bound, "nodes": budget.nodes_used, "seconds": seconds}
                    answers["moves"][str(move)] = done
                    write_ledger()
                    print(f"  first move {move}: value {'>=' if bound >= threshold else '<'} {threshold} (bound "
                          f"{bound:+d}), {budget.nodes_used:,} nodes, {done['seconds']} s", flush=True)
                    break
                seconds = save_table(solver, directory)
                print(f"  checkpoint: table saved in {seconds:.0f} s (first move {move}, value >= {threshold}?)",
                      flush=True)
                checkpoint_at = time.perf_counter() + 60 * args.checkpoint_minutes
                if time.perf_counter() >= stop_at:
                    print(f"stopped after --hours {args.hours}; rerun the same command to go on", flush=True)
                    return 0
            best = max(best, done["bound"])
            if done["bound"] >= threshold:
                break
        answers["answer"], answers["bound"] = ("yes", best) if best >= threshold else ("no", best)
        if best >= threshold:
            lower = best
        else:
            upper = best
        guess = best
        write_ledger()
        print(f"value >= {threshold}? {answers['answer']} (bound {best:+d})", flush=True)
    ledger["value"] = lower
    write_ledger()
    total_nodes = sum(m["nodes"] for p in ledger["passes"].values() for m in p["moves"].values())
    total_seconds = sum(m["seconds"] for p in ledger["passes"].values() for m in p["moves"].values())
    print(f"empty {geometry.name} board: value {lower:+d} for the first player; {total_nodes:,} nodes, "
          f"{total_seconds:.0f} s in the jobs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
