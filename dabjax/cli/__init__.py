"""Command-line shells (argparse, files, terminal I/O, progress bars) over the functional core in ``dabjax``.

``main`` is the ``dabjax`` command (the console script; ``python -m dabjax``): it runs the ``main(argv, prog)`` of
one command module (docs/cli.md):

* ``train`` (``dabjax train``; ``python train.py`` in a clone): train, resume or sweep; ``--list-configs``. The
  runs themselves are ``dabjax.runs``' (the run directory and its loop, the lock, the BoxesZero and TD runs, the
  closing summary). Sweeps: ``sweep`` runs one (and is ``dabjax sweep summary``), ``sweep_ray`` is the Ray Tune
  launcher, ``sweep_summary`` the summary; the sweep directory is ``dabjax.runs.sweep_dir``, the sweep file
  ``dabjax.training.sweep_file``.
* ``evaluate`` (``dabjax evaluate``; ``python evaluate.py``): arena and Elo, Elo over training, accuracy, plots,
  and play in the terminal (``play``) or the browser (``serve``: the HTTP shell and its page in ``web/``; the game
  itself is ``dabjax.evaluation.game_session``).
* ``label`` (``dabjax label``), ``pretrain`` (``dabjax pretrain``), ``pretrained`` (``dabjax pretrained``),
  ``solve`` (``dabjax solve``) and ``demo`` (``dabjax demo``): each command's module is named after it.

This package parses arguments, prints and serves; it jits nothing and trains nothing itself (tests/test_style.py).
The command modules also run as ``python -m dabjax.cli.NAME``; the others say so and exit with status 2. No module
below imports this package.
"""

import argparse
import sys


def not_a_command(module: str) -> int:
    """What ``python -m`` on a module of this package that is no command does: says so on stderr (naming the
    ``dabjax`` command) and returns exit status 2, so that a guessed command never silently does nothing."""
    print(f"{module} is not a command; run 'dabjax --help' for the commands", file=sys.stderr)
    return 2


def run_subcommand(args: argparse.Namespace) -> int:
    """Runs ``args.handler(args)`` (a subcommand's handler); a ``ValueError`` or ``FileNotFoundError`` (a user's
    mistake: the message names it) becomes one line on stderr and exit status 2 instead of a traceback."""
    try:
        return args.handler(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
