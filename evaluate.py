"""``python evaluate.py``: the ``dabjax evaluate`` command from a clone (``python evaluate.py --help``: arena and
Elo, Elo over training, accuracy, plots, play in the terminal or the browser).

See docs/evaluate.md, docs/cli.md and ``dabjax.cli.evaluate``.
"""

import sys

from dabjax.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
