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

A mistake in what the user gave (arguments, the files they name, the config) is one line, ``error: ...``, and exit
status 2; any other failure is one line too (``dabjax.cli.faults``), its traceback with ``--debug``: each command
reads its inputs under ``users_input`` and runs under ``run_guarded``, so a bug in the work never passes for the
user's mistake.

This package parses arguments, prints and serves; it jits nothing and trains nothing itself (tests/test_style.py).
The command modules also run as ``python -m dabjax.cli.NAME``; the others say so and exit with status 2
(``faults.not_a_command``). No module below imports this package, and ``faults`` imports nothing of it: this
package's guards import ``faults``, never the other way (tests/test_style.py).
"""

import contextlib
import sys
from typing import Callable

DEBUG_FLAG_HELP = "a failure that is not a mistake in the arguments shows its traceback too (or set DABJAX_DEBUG=1)"


class UsageError(ValueError):
    """A mistake in what the user gave (an argument, a file named on the command line, a config): one line on
    stderr naming it and exit status 2 (``run_guarded``)."""


@contextlib.contextmanager
def users_input():
    """Marks the reading and checking of what the user gave: a ValueError or FileNotFoundError raised inside (a
    bad argument, a missing or malformed file named on the command line) is a ``UsageError`` with its message;
    a recognised fault (``dabjax.cli.faults``: a full disk, ...) stays one. Only the reading goes inside: an
    error of the work itself is a failure, not the user's mistake."""
    try:
        yield
    except UsageError:
        raise
    except (ValueError, FileNotFoundError) as error:
        from dabjax.cli import faults  # here, not at the top: `python -m dabjax.cli.faults` finds it unimported

        if faults.classify(error) is not None:
            raise
        raise UsageError(str(error)) from error


def run_guarded(prog: str, work: Callable[[], int], debug: bool = False) -> int:
    """Runs ``work()`` and returns its exit status. A ``UsageError`` or a ``ConfigError`` (the config, named by
    its key) is ``error: MESSAGE`` on stderr and status 2; any other exception is one line (``dabjax.cli.faults``:
    a recognised fault with its remedy and status, anything else ``faults.UNEXPECTED``), after its traceback with
    ``debug`` or ``DABJAX_DEBUG=1``."""
    try:
        return work()
    except Exception as error:
        from dabjax.cli import faults
        from dabjax.training.config import ConfigError

        if isinstance(error, (UsageError, ConfigError)):
            print(f"error: {error}", file=sys.stderr)
            return 2
        return faults.report_failure(prog, error, faults.debug_requested(debug))


def run_subcommand(args, prog: str) -> int:
    """Runs ``args.handler(args)`` (a subcommand's handler) under ``run_guarded``; ``args.debug`` (the
    ``--debug`` flag), when the parser has one, asks for tracebacks."""
    return run_guarded(prog, lambda: args.handler(args), getattr(args, "debug", False))
