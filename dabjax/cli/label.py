"""``dabjax label`` (also ``python -m dabjax.cli.label``): build and summarise solver-labelled position sets
(``dabjax.solvers.labelled``; see docs/solver.md).

    dabjax label build --board 3x3 --moves 0-23 --per-move 200 --out data/3x3.npz
    dabjax label build --board 5x5 --moves 22-30 --per-move 1000 --out data/5x5_22-30.npz   # on every core
    dabjax label build --board 5x5 --moves 18-30 --per-move 18-21:10,22:100,23-30:2000 --exclude 5x5 \
        --seed 11 --no-move-values --out sets/5x5_train.npz          # resumable: rerun to go on after a stop
    dabjax label merge data/5x5.npz part_22.npz part_23.npz part_24-34.npz
    dabjax label info 3x3                 # a built-in set by name, or a file: dabjax label info data/3x3.npz
"""

from __future__ import annotations

import argparse
import signal
import sys

import numpy as np

from dabjax import package_data
from dabjax.cli import run_subcommand, users_input
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.runs import label_build, stopping
from dabjax.solvers import labelled


def parse_move_numbers(text: str) -> list[int]:
    """``"22-30"`` or ``"0,5,7"`` or ``"3"`` (or a mix: ``"0-3,9"``) -> the move numbers, in that order."""
    numbers: list[int] = []
    for part in text.split(","):
        bounds = part.split("-")
        if not all(b.strip().isdigit() for b in bounds) or len(bounds) > 2:
            raise ValueError(f"--moves {text!r}: write a range like 22-30 or a list like 0,5,7")
        low, high = int(bounds[0]), int(bounds[-1])
        numbers.extend(range(low, high + 1))
    return numbers


def parse_per_move(text: str, move_numbers: list[int]) -> int | dict[int, int]:
    """``"200"`` (every move number) or ``"18-21:10,22:100,26-30:3500"`` (a count per group of move numbers,
    which must cover ``move_numbers`` exactly) -> the count or ``{move number: count}``."""
    if ":" not in text:
        if not text.strip().isdigit():
            raise ValueError(f"--per-move {text!r}: write a count like 200, or counts by move like 18-21:10,22:100")
        return int(text)
    counts: dict[int, int] = {}
    for part in text.split(","):
        numbers, _, count = part.partition(":")
        if not count.strip().isdigit():
            raise ValueError(f"--per-move {text!r}: {part!r} is not MOVES:COUNT (e.g. 22-25:500)")
        for n in parse_move_numbers(numbers):
            counts[n] = int(count)
    if set(counts) != set(move_numbers):
        raise ValueError(f"--per-move {text!r} gives counts for move numbers {sorted(counts)}, --moves has "
                         f"{sorted(set(move_numbers))}")
    return counts


def cmd_build(args) -> int:
    with users_input():
        geometry = board_geometry(*parse_board_size(args.board))
        move_numbers = parse_move_numbers(args.moves)
        per_move = parse_per_move(args.per_move, move_numbers)
        labelled.check_sampling(geometry, move_numbers, args.random_rate)
        exclude = None
        if args.exclude:
            try:
                exclude = (args.exclude, labelled.load(package_data.labelled_set_file(args.exclude)))
            except (ValueError, FileNotFoundError) as error:
                raise ValueError(f"--exclude {args.exclude}: {error}") from None
    signals = stopping.InterruptOnSignals()  # SIGTERM (a preempted machine) stops it as Ctrl-C does
    try:
        # A work directory holding another build is the user's mistake (a ConfigError); any other error is not.
        with signals:
            built = label_build.build_resumable(
                geometry, move_numbers, per_move, args.out, seed=args.seed, random_rate=args.random_rate,
                move_values=not args.no_move_values, time_limit=args.time_limit, workers=args.workers,
                exclude=exclude, work_dir=args.work_dir, progress_bar=not args.no_progress)
    except KeyboardInterrupt as stopped:
        signum = signals.signum or signal.SIGINT
        said = str(stopped) or "stopped; the same command starts the build again"
        print(said.replace("stopped", f"stopped by {stopping.signal_name(signum)}", 1), file=sys.stderr)
        return stopping.exit_status(signum)
    numbers, counts = np.unique(built.move_numbers, return_counts=True)
    print(f"wrote {args.out}: {len(built)} positions ({built.settings['unfinished']} unfinished dropped), per move "
          f"number {dict(zip(numbers.tolist(), counts.tolist()))}, {built.settings['build_seconds']:.0f} s")
    return 0


def cmd_merge(args) -> int:
    excluded = ""
    with users_input():  # the sets named, their boards and their overlap
        merged = labelled.merge(labelled.load(package_data.labelled_set_file(path)) for path in args.parts)
        if args.exclude:
            try:
                merged, dropped = labelled.without(merged, labelled.load(package_data.labelled_set_file(args.exclude)))
            except (ValueError, FileNotFoundError) as error:
                raise ValueError(f"--exclude {args.exclude}: {error}") from None
    if args.exclude:
        merged.settings["excluded"] = {"set": args.exclude, "dropped": dropped}
        excluded = f", {dropped} also in {args.exclude} dropped"
    labelled.save(merged, args.out)
    print(f"wrote {args.out}: {len(merged)} positions from {len(args.parts)} sets "
          f"({merged.settings['duplicates_dropped']} already in an earlier part dropped{excluded}), move numbers "
          f"{merged.settings['move_numbers']}")
    return 0


def cmd_info(args) -> int:
    with users_input():
        loaded = labelled.load(package_data.labelled_set_file(args.path))
    numbers, counts = np.unique(loaded.move_numbers, return_counts=True)
    print(f"{loaded.rows}x{loaded.cols}: {len(loaded)} positions; settings {loaded.settings}")
    print("per move number:", dict(zip(numbers.tolist(), counts.tolist())))
    return 0


def build_parser(prog: str = "python -m dabjax.cli.label") -> argparse.ArgumentParser:
    """The ``label`` command's parser."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build = commands.add_parser("build", help="build a labelled set and save it as .npz")
    build.add_argument("--board", required=True, help="RxC in boxes, e.g. 3x3 or 5x5")
    build.add_argument("--moves", required=True, help="move numbers, e.g. 0-23 or 22-30 or 0,5,7")
    build.add_argument("--per-move", default="200",
                       help="positions per move number: a count (default 200), or counts by move numbers, e.g. "
                            "18-21:10,22:100,23-30:2000")
    build.add_argument("--out", required=True, help="output .npz path")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--random-rate", type=float, default=0.2, help="share of uniformly random moves (default 0.2)")
    build.add_argument("--time-limit", type=float, default=60.0, help="seconds per position (search only; default 60)")
    build.add_argument("--no-move-values", action="store_true",
                       help="skip every move's exact value (search only; faster, no margin losses)")
    build.add_argument("--workers", type=int, default=None, metavar="N",
                       help="solver processes (search only; default: every core, 1: in this process)")
    build.add_argument("--exclude", metavar="SET",
                       help="leave out the positions also in this set (a file or a built-in name, e.g. 5x5): "
                            "training labels kept apart from the set that measures")
    build.add_argument("--work-dir", metavar="DIR",
                       help="where the build keeps its progress (default OUT.parts); rerun the same command to "
                            "go on after a stop")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    build.set_defaults(handler=cmd_build)
    merge = commands.add_parser("merge", help="merge labelled sets of one board (e.g. built in parts)")
    merge.add_argument("out", help="output .npz path")
    merge.add_argument("parts", nargs="+", help="labelled sets to merge, in order (files or built-in names)")
    merge.add_argument("--exclude", metavar="SET", help="drop the positions also in this set (a file or a built-in "
                       "name, e.g. 4x4: a training set kept apart from the set that measures)")
    merge.set_defaults(handler=cmd_merge)
    info = commands.add_parser("info", help="summarise a labelled set")
    info.add_argument("path", help="a labelled set: a .npz file or a built-in set's name (3x3, 4x4, 5x5, 4x4_train)")
    info.set_defaults(handler=cmd_info)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.label") -> int:
    """The ``label`` command; returns its exit status."""
    return run_subcommand(build_parser(prog).parse_args(argv), prog)


if __name__ == "__main__":
    sys.exit(main())
