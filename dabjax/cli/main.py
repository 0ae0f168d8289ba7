"""``dabjax``: the command-line tool (a console script once the package is installed; also ``python -m dabjax``).

    dabjax train [--config NAME|FILE] [key=value ...]    train, resume or sweep (dabjax.cli.train)
    dabjax evaluate COMMAND ...                          arena, elo-curve, accuracy, plots, play, serve
    dabjax arena | play | serve ...                      shortcuts for dabjax evaluate arena | play | serve
    dabjax label build | merge | info ...                solver-labelled position sets (dabjax.cli.label)
    dabjax pretrain --config NAME [--labels F] --out DIR  a warm start trained on exact labels (run.init_from)
    dabjax pretrained export | list ...                  a run as pretrained:RxC (in your folder); list them
    dabjax solve --board RxC [--moves LIST]              the exact value of a position and of its moves
    dabjax sweep summary DIR                             a sweep directory's summary table and plot
    dabjax demo                                          random games on the batched environment

Each command is its module's ``main``, run with the rest of the command line; ``dabjax COMMAND --help`` shows its
options. In a clone, ``python train.py`` and ``python evaluate.py`` are the same ``train`` and ``evaluate``.
``dabjax --debug COMMAND ...`` runs the command with ``DABJAX_DEBUG=1``: a failure that is no mistake in the
arguments shows its traceback above its one line (``dabjax.cli.faults``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import NamedTuple

from dabjax.cli import faults


class Command(NamedTuple):
    """A ``dabjax`` command: the module whose ``main(argv, prog)`` runs it, what it does, and the subcommand it
    stands for (``serve`` is ``evaluate serve``), if any."""

    module: str
    summary: str
    subcommand: str | None = None


COMMANDS = {
    "train": Command("dabjax.cli.train", "train, resume or sweep; --list-configs lists the built-in configs"),
    "evaluate": Command("dabjax.cli.evaluate", "evaluate agents: arena, elo-curve, accuracy, plots, play, serve"),
    "arena": Command("dabjax.cli.evaluate", "matches between agents with Elo ratings (= evaluate arena)", "arena"),
    "play": Command("dabjax.cli.evaluate", "play an agent in the terminal (= evaluate play)", "play"),
    "serve": Command("dabjax.cli.evaluate", "play an agent in the browser (= evaluate serve)", "serve"),
    "label": Command("dabjax.cli.label", "build, merge and summarise solver-labelled position sets"),
    "pretrain": Command("dabjax.cli.pretrain", "supervised training on exact labels: a warm start for run.init_from"),
    "pretrained": Command("dabjax.cli.pretrained", "export a run as a pretrained agent (to your folder); list them"),
    "solve": Command("dabjax.cli.solve", "the exact value of a position (a move list) and of each of its moves"),
    "sweep": Command("dabjax.cli.sweep", "the summary of a sweep directory (sweeps run with dabjax train --sweep)"),
    "demo": Command("dabjax.cli.demo", "random games on the batched environment, with their speed"),
}


def usage(prog: str = "dabjax") -> str:
    """The overview ``dabjax --help`` prints: the commands and what each does."""
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} COMMAND [ARGS ...]", "",
             "Train and evaluate Dots-and-Boxes agents (BoxesZero, AlphaZero, TD learning). Commands:"]
    lines += [f"  {name.ljust(width)}  {command.summary}" for name, command in COMMANDS.items()]
    lines += ["", f"'{prog} COMMAND --help' shows a command's options. Boards count boxes (3x3 = 24 lines).",
              f"'{prog} --debug COMMAND ...' shows the traceback of a failure that is no mistake in the arguments."]
    return "\n".join(lines)


@contextlib.contextmanager
def debug_requested():
    """``DABJAX_DEBUG=1`` while the command runs: what ``--debug`` before the command means to every command
    (``faults.debug_requested``)."""
    before = os.environ.get(faults.DEBUG_VARIABLE)
    os.environ[faults.DEBUG_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[faults.DEBUG_VARIABLE]
        else:
            os.environ[faults.DEBUG_VARIABLE] = before


def main(argv: list[str] | None = None, prog: str = "dabjax") -> int:
    """Runs ``dabjax COMMAND ARGS``; returns its exit status (2 for an unknown or missing command)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(usage(prog), file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage(prog))
        return 0
    if argv[0] == "--debug":
        with debug_requested():
            return main(argv[1:], prog)
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        print(f"{prog}: unknown command {name!r}\n\n{usage(prog)}", file=sys.stderr)
        return 2
    module = importlib.import_module(command.module)  # only the command that runs is imported
    if command.subcommand is not None:
        return module.main([command.subcommand, *rest], prog=prog)
    return module.main(rest, prog=f"{prog} {name}")


if __name__ == "__main__":
    sys.exit(main(prog="python -m dabjax.cli.main"))
