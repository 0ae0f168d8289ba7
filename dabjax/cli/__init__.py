"""Command-line shells (argparse, files, terminal I/O, progress bars) over the functional core in ``dabjax``.

``train`` (``python train.py``: BoxesZero / AlphaZero, sweeps) and ``train_td`` (configs with ``mode: td``)
share ``run_dir`` (config, metrics log, the resume/save loop); ``evaluate`` (``python evaluate.py``) and
``play`` evaluate agents; ``labelled`` builds solver-labelled position sets; ``demo`` shows the environment.
No module of the core imports this package.
"""

import argparse
import sys


def run_subcommand(args: argparse.Namespace) -> int:
    """Runs ``args.handler(args)`` (a subcommand's handler); a ``ValueError`` or ``FileNotFoundError`` (a user's
    mistake: the message names it) becomes one line on stderr and exit status 2 instead of a traceback."""
    try:
        return args.handler(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
