"""``python -m dabjax``: the ``dabjax`` command (``dabjax.cli.main``) without the console script."""

import sys

from dabjax.cli.main import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m dabjax"))
