"""Entry point: ``python evaluate.py --help`` (arena and Elo, Elo over training, accuracy, plots, play).

See docs/evaluate.md and ``dabjax.cli.evaluate``.
"""

import sys

from dabjax.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
