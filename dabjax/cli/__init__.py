"""Command-line shells (argparse, files, terminal I/O) over the functional core in ``dabjax``."""
