"""``python train.py``: the ``dabjax train`` command from a clone (``python train.py --help``). Trains the CPU
default (the built-in config 3x3: 3x3 BoxesZero) with no arguments.

See the README, docs/cli.md and ``dabjax.cli.train``.
"""

import sys

from dabjax.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
