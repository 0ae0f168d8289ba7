"""``dabjax pretrained export RUN`` (also ``python -m dabjax.cli.pretrained``): ship a run's checkpoint as the
board's pretrained agent.

    dabjax pretrained export runs/4x4-boxeszero            # -> dabjax/pretrained/4x4/ of this package
    dabjax pretrained export runs/4x4-boxeszero/checkpoints/900 --sims 64 --out agents/4x4
    dabjax pretrained list

Exported into the package (in a clone: ``dabjax/pretrained/<board>/``, to commit) the agent plays as
``pretrained:4x4`` (``dabjax.evaluation.pretrained``); exported with ``--out DIR`` it plays as ``ckpt:DIR``.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import subprocess
import sys

from dabjax.cli import run_subcommand, users_input
from dabjax.evaluation import pretrained
from dabjax.training import checkpoint


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def cmd_export(args) -> int:
    with users_input():
        if args.sims is not None and args.sims < 1:
            raise ValueError(f"--sims must be >= 1, got {args.sims}")
        loaded = checkpoint.load_for_play(args.checkpoint)
    if args.sims is not None:
        loaded = dataclasses.replace(
            loaded, search_config=dataclasses.replace(loaded.search_config, num_simulations=args.sims)
        )
    source = {
        "checkpoint": str(args.checkpoint),
        "iteration": loaded.iteration,
        "training_minutes": round(loaded.wall_time / 60, 2),
        "commit": _commit(),
        "note": args.note,
    }
    board = f"{loaded.rows}x{loaded.cols}"
    out = pathlib.Path(args.out) if args.out else pathlib.Path(pretrained.__file__).parents[1] / "pretrained" / board
    size = pretrained.save_agent_folder(out, loaded, source)
    print(f"wrote {out}: {size / 2**20:.2f} MiB of parameters, iteration {loaded.iteration}, "
          f"{source['training_minutes']} training minutes")
    return 0


def cmd_list(args) -> int:
    boards = pretrained.available()
    print("pretrained agents:", ", ".join(f"pretrained:{b}" for b in boards) if boards else "none")
    warm = pretrained.available_warm_starts()
    print("warm starts (run.init_from):", ", ".join(f"supervised:{b}" for b in warm) if warm else "none")
    return 0


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.pretrained") -> int:
    """The ``pretrained`` command; returns its exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    export = commands.add_parser("export", help="write a checkpoint as a pretrained agent")
    export.add_argument("checkpoint", help="a run directory (its latest checkpoint) or RUN/checkpoints/N")
    export.add_argument("--sims", type=int, help="simulations it searches at play time (default: the run's)")
    export.add_argument("--out", help="output folder, then played as ckpt:OUT (default: dabjax/pretrained/<board>/ "
                                      "in this package, played as pretrained:<board>)")
    export.add_argument("--note", default="", help="a note kept in agent.json's source")
    export.set_defaults(handler=cmd_export)
    listing = commands.add_parser("list", help="the boards with a pretrained agent")
    listing.set_defaults(handler=cmd_list)
    return run_subcommand(parser.parse_args(argv), prog)


if __name__ == "__main__":
    sys.exit(main())
