"""``dabjax pretrained export RUN`` (also ``python -m dabjax.cli.pretrained``): a run's checkpoint as the
board's pretrained agent.

    dabjax pretrained export runs/4x4-boxeszero            # -> ~/.local/share/dabjax/agents/4x4/: pretrained:4x4
    dabjax pretrained export runs/4x4-boxeszero/checkpoints/900 --sims 64 --out agents/4x4   # ckpt:agents/4x4
    dabjax pretrained export runs/4x4-boxeszero --replace-shipped   # in a clone: dabjax/pretrained/4x4/, to commit
    dabjax pretrained list

With no ``--out`` the agent goes to the user's folder of agents (``$DABJAX_AGENTS``, else
``~/.local/share/dabjax/agents``; ``dabjax.evaluation.pretrained.user_folder``) and plays as ``pretrained:4x4``,
before the shipped agent of its board, which stays as it was. ``--replace-shipped`` writes over the package's
own agent instead: only in a clone or an editable install, never in an installed package's site-packages.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

from dabjax.cli import UsageError, run_subcommand, users_input
from dabjax.evaluation import pretrained
from dabjax.runs.source_commit import source_commit
from dabjax.training import checkpoint


def cmd_export(args) -> int:
    with users_input():
        if args.sims is not None and args.sims < 1:
            raise ValueError(f"--sims must be >= 1, got {args.sims}")
        if args.replace_shipped and args.out:
            raise ValueError("--out and --replace-shipped name two places: give one")
        shipped = pretrained.shipped_folder()
        if args.replace_shipped and pretrained.installed_in_site_packages(shipped):
            raise UsageError(f"--replace-shipped refused: the shipped agents in {shipped} are an installed "
                             "package's files; export without it (to your folder, played as pretrained:RxC first) "
                             "or replace them in a clone")
        loaded = checkpoint.load_for_play(args.checkpoint)
    if args.sims is not None:
        loaded = dataclasses.replace(
            loaded, search_config=dataclasses.replace(loaded.search_config, num_simulations=args.sims)
        )
    source = {
        "checkpoint": str(args.checkpoint),
        "iteration": loaded.iteration,
        "training_minutes": round(loaded.wall_time / 60, 2),
        "commit": source_commit(),
        "note": args.note,
    }
    board = f"{loaded.rows}x{loaded.cols}"
    if args.out:
        out, played_as = pathlib.Path(args.out), f"ckpt:{args.out}"
    else:
        out = (shipped if args.replace_shipped else pretrained.user_folder()) / board
        played_as = f"pretrained:{board}"
    replaced = out.is_dir() and (out / pretrained.AGENT_FILE).is_file()
    size = pretrained.save_agent_folder(out, loaded, source)
    print(f"wrote {out}{' (replaced the agent there)' if replaced else ''}: {size / 2**20:.2f} MiB of parameters, "
          f"iteration {loaded.iteration}, {source['training_minutes']} training minutes; plays as {played_as}")
    return 0


def cmd_list(args) -> int:
    boards = pretrained.available()
    print("pretrained agents:", ", ".join(f"pretrained:{b}" for b in boards) if boards else "none")
    warm = pretrained.available_warm_starts()
    print("warm starts (run.init_from):", ", ".join(f"supervised:{b}" for b in warm) if warm else "none")
    folder = pretrained.user_folder()
    yours = pretrained.available(folder)
    print(f"yours, played before the shipped ones ({folder}):",
          ", ".join(f"pretrained:{b}" for b in yours) if yours else "none")
    return 0


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.pretrained") -> int:
    """The ``pretrained`` command; returns its exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    export = commands.add_parser("export", help="write a checkpoint as a pretrained agent")
    export.add_argument("checkpoint", help="a run directory (its latest checkpoint) or RUN/checkpoints/N")
    export.add_argument("--sims", type=int, help="simulations it searches at play time (default: the run's)")
    export.add_argument("--out", help="output folder, then played as ckpt:OUT (default: <board>/ in your folder of "
                                      "agents, $DABJAX_AGENTS or ~/.local/share/dabjax/agents, played as "
                                      "pretrained:<board> before the shipped one)")
    export.add_argument("--replace-shipped", action="store_true",
                        help="write over the package's shipped agent of the board (dabjax/pretrained/<board>/) "
                             "instead: in a clone or an editable install only, refused in site-packages")
    export.add_argument("--note", default="", help="a note kept in agent.json's source")
    export.set_defaults(handler=cmd_export)
    listing = commands.add_parser("list", help="the boards with a pretrained agent")
    listing.set_defaults(handler=cmd_list)
    return run_subcommand(parser.parse_args(argv), prog)


if __name__ == "__main__":
    sys.exit(main())
