"""``dabjax pretrain`` (also ``python -m dabjax.cli.pretrain``): supervised training on exact labels, a warm start
for a run's ``run.init_from`` (``dabjax.runs.warm_start``: this module parses and prints).

    dabjax label build --board 4x4 --moves 12-39 --per-move 600 --seed 101 --no-move-values --out 4x4_train.npz
    dabjax pretrain --config 4x4 --labels 4x4_train.npz --minutes 15 --out runs/supervised-4x4
    dabjax train --config 4x4 run.init_from=runs/supervised-4x4
    dabjax pretrain --config 3x3 --out runs/supervised-3x3     # 3x3: labels from the exact table, no file
    dabjax pretrain --config 5x5_cpu --labels 5x5_train.npz --init pretrained:5x5 --minutes 15 --out runs/tuned

The network is the config's ``network`` section (so the warm start fits the run), the board the config's unless
``--board`` names another (the graph and ResNet networks play every board: labels of 4x4 warm-start a 5x5 run);
the learning rate, L2 and batch size are the config's ``train`` section. Positions that are also in the built-in
labelled set of the labels' board are left out (``--exclude SET`` names another set instead, ``--exclude none``
none), so the set that measures a run on that board stays unseen. ``--init`` starts from a trained network (a
self-play run's, a shipped agent's) instead of a fresh one: exact labels fine-tune it (then go on with self-play
and ``train.exact_labels``: labels alone, which cover only their moves, wear down its play of the others). The
folder written is an agent in the pretrained format (``agent.json``, ``params.msgpack``), playable as
``ckpt:FOLDER``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import jax
from tqdm import tqdm

from dabjax import package_data
from dabjax.cli import DEBUG_FLAG_HELP, run_guarded
from dabjax.evaluation import pretrained
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.runs import training_labels, warm_start
from dabjax.search import network
from dabjax.solvers import labelled
from dabjax.training import config as config_lib


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the run's config (a built-in name or a file): its network "
                        "and train sections")
    parser.add_argument("--labels", help="a labelled set to train on (dabjax label build); boards up to 3x3 may "
                        "leave it out and use the exact table")
    parser.add_argument("--board", help="the board of the labels, if not the config's (not for an MLP)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, help="train for this much wall time (default 15)")
    budget.add_argument("--steps", type=int, help="train for this many optimiser steps")
    parser.add_argument("--exclude", help="a labelled set whose positions to leave out (default: the board's "
                        "built-in set, if any; 'none' leaves nothing out)")
    parser.add_argument("--init", help="start from this network instead of a fresh one (fine-tune): "
                        "pretrained:RxC, supervised:RxC, an agent folder or a run / checkpoint directory, with the "
                        "config's network")
    parser.add_argument("--final-lr-fraction", type=float, default=1.0,
                        help="anneal the rate (train.lr) along a cosine to this share of it by the end of the budget "
                             "(default 1: a constant rate)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="the agent folder to write")
    parser.add_argument("--debug", action="store_true", help=DEBUG_FLAG_HELP)
    parser.add_argument("overrides", nargs="*", help="config overrides key=value (e.g. network.width=64)")
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """The ``pretrain`` command; returns its exit status (2: a mistake in the arguments, named on stderr; another
    failure is one line, ``dabjax.cli.run_guarded``)."""
    parser = build_parser(prog)
    args = parser.parse_intermixed_args(argv)  # overrides may come before or after the options
    return run_guarded(parser.prog, lambda: _pretrain(parser, args), args.debug)


def _pretrain(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``main`` once the command line is parsed: its mistakes are ``parser.error``s (exit status 2)."""
    if (args.steps is not None and args.steps < 1) or (args.minutes is not None and not args.minutes > 0):
        parser.error("--steps and --minutes must be positive")
    if not 0 <= args.final_lr_fraction <= 1:
        parser.error(f"--final-lr-fraction must be in [0, 1], got {args.final_lr_fraction}")
    minutes = None if args.steps is not None else (15.0 if args.minutes is None else args.minutes)
    try:
        config = config_lib.load_config(args.config, args.overrides)
    except config_lib.ConfigError as error:
        parser.error(str(error))
    network_config = config.network
    board = args.board or f"{config.board.rows}x{config.board.cols}"
    try:
        geometry = board_geometry(*parse_board_size(board))
    except ValueError as error:
        parser.error(f"--board: {error}")
    other_board = (geometry.rows, geometry.cols) != (config.board.rows, config.board.cols)
    if other_board and not network.fits_any_board(network_config):
        parser.error(f"network.kind={network_config.kind} plays one board size only: labels of {geometry.name} "
                     f"cannot train it for {config.board.rows}x{config.board.cols} (the graph and resnet kinds can)")
    try:
        excluded, excluded_name = training_labels.set_to_leave_out(args.exclude, geometry)
    except (FileNotFoundError, ValueError) as error:
        parser.error(f"--exclude {args.exclude}: {error}")
    initial = None
    if args.init:
        try:
            initial = pretrained.load_to_continue(args.init, network_config, geometry.rows, geometry.cols).params
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"--init {args.init}: {error}")
    games_key, fit_key = jax.random.split(jax.random.PRNGKey(args.seed))
    if args.labels:
        try:
            train_set = labelled.load(package_data.labelled_set_file(args.labels))
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"--labels {args.labels}: {error}")
        if (train_set.rows, train_set.cols) != (geometry.rows, geometry.cols):
            parser.error(f"--labels {args.labels} is {train_set.rows}x{train_set.cols}, not {geometry.name} "
                         "(give --board for labels of another board than the config's)")
        try:
            samples, dropped = warm_start.label_samples(geometry, train_set, excluded, games_key)
        except ValueError as error:
            parser.error(f"--labels {args.labels}: {error} (--exclude none keeps them)")
        source = f"{args.labels} ({training_labels.left_out(dropped, excluded_name)})"
    elif geometry.num_lines <= labelled.TABLE_LABEL_MAX_LINES:
        print(f"solving {geometry.name} exactly for the labels ...", file=sys.stderr)
        try:
            samples, dropped = warm_start.label_samples(geometry, None, excluded, games_key)
        except ValueError as error:
            parser.error(f"{error} (--exclude none keeps them)")
        source = (f"the exact {geometry.name} table ({warm_start.TABLE_GAMES} games, 30% random moves; "
                  f"{training_labels.left_out(dropped, excluded_name)})")
    else:
        parser.error(f"{geometry.name} has no exact table here: give --labels (dabjax label build)")
    count = int(samples.valid.shape[0])
    print(f"{count} labelled positions from {source}; {network_config.kind} {network_config.width}x"
          f"{network_config.blocks}{f' from {args.init}' if args.init else ''}; "
          f"{f'{minutes} min' if minutes else f'{args.steps} steps'}", file=sys.stderr)
    total = args.steps if minutes is None else 60.0 * minutes
    with tqdm(total=total, unit="step" if minutes is None else "s", desc="pretrain",
              bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}") as bar:
        def on_chunk(steps, seconds, loss):
            bar.update((steps if minutes is None else min(seconds, total)) - bar.n)
            bar.set_postfix(steps=steps, loss=f"{loss:.3f}")

        fitted = warm_start.fit(geometry, config, samples, fit_key, steps=args.steps, minutes=minutes,
                                params=initial, final_lr_fraction=args.final_lr_fraction, on_chunk=on_chunk)
    out = pathlib.Path(args.out)
    parameters = warm_start.save(out, geometry, config, fitted, source=source, init=args.init,
                                 config_name=args.config, overrides=args.overrides,
                                 final_lr_fraction=args.final_lr_fraction)
    print(f"wrote {out}: {parameters} parameters after {fitted.steps} steps "
          f"({1000 * fitted.seconds_per_step:.1f} ms each), last loss {fitted.loss:.3f}\n"
          f"  warm-start a run from it:  dabjax train --config {' '.join([args.config, *args.overrides])} "
          f"run.init_from={out}\n"
          f"  play it:                   dabjax evaluate arena --board {geometry.name} --vs ckpt:{out} "
          f"--agents level2", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
