"""Entry point: ``python train.py --help``. Trains the CPU default (3x3 BoxesZero) with no arguments.

See the README and ``dabjax.cli.train``.
"""

import sys

from dabjax.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
