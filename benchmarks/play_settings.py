"""Is the search's setting at play time a lever? One network, its search settings varied, best-result shares.

    python benchmarks/play_settings.py --agent pretrained:4x4 --set data/4x4.npz --set results/4x4_unseen.npz \
        --moves 12-20 --variant max_num_considered_actions=8 --variant max_num_considered_actions=4 \
        --variant max_num_considered_actions=32 --variant algorithm=puct --variant max_depth=null

The network of ``--agent`` (``pretrained:RxC``, ``ckpt:PATH``: anything ``dabjax evaluate`` plays) searches
with ``--simulations`` simulations (64), without Gumbel noise (as every evaluation plays), first with its own
settings (the agent as shipped), then with each ``--variant``: ``KEY=VALUE[,KEY=VALUE...]`` over the fields of
``dabjax.search.mcts.SearchConfig`` (``null`` for None). For each labelled ``--set`` it prints the best-result
share by move number over ``--moves`` and their mean. The sets hold a few hundred positions a move (about +-0.03
at 200, +-0.07 at 40): a variant is a lever when it beats the shipped settings by more than that on both sets.
Prints figures (``--json`` writes them); not a test.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import pathlib
import sys

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dabjax.cli.label import parse_move_numbers  # noqa: E402
from dabjax.evaluation import agent_registry  # noqa: E402
from dabjax.search import mcts  # noqa: E402
from dabjax.solvers import labelled  # noqa: E402


def parse_variant(text: str) -> dict:
    """``"max_num_considered_actions=8,algorithm=puct"`` -> ``{name: value}``; values are Python literals,
    ``null``/``none`` None, anything else a string. Raises ValueError naming an unknown field."""
    fields = {field.name for field in dataclasses.fields(mcts.SearchConfig)}
    changes = {}
    for part in text.split(","):
        name, equals, value = (piece.strip() for piece in part.partition("="))
        if not equals or name not in fields:
            raise ValueError(f"--variant {text!r}: {name!r} is not a search setting; choose from {sorted(fields)}")
        if value.lower() in ("null", "none"):
            changes[name] = None
            continue
        try:
            changes[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            changes[name] = value
    return changes


def network_and_sets(parser: argparse.ArgumentParser, args) -> tuple:
    """``(checkpoint, geometry, {path: set})``: the network of ``args.agent`` and the labelled sets of
    ``args.set`` (one board), each cut to ``args.moves`` when given; ``parser.error`` names what is wrong."""
    try:
        sets = {path: labelled.load(path) for path in args.set}
        moves = parse_move_numbers(args.moves) if args.moves else None
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    geometry = next(iter(sets.values())).geometry
    if any((s.rows, s.cols) != (geometry.rows, geometry.cols) for s in sets.values()):
        parser.error("--set: every set must be of one board")
    try:
        loaded = agent_registry.load_network(args.agent, geometry)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    if loaded is None:
        parser.error(f"--agent {args.agent!r} is not a network agent (pretrained:RxC or ckpt:PATH)")
    if moves is not None:
        sets = {path: labelled.subset(s, np.isin(s.move_numbers, moves)) for path, s in sets.items()}
    return loaded[0], geometry, sets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", required=True, help="a network agent: pretrained:RxC, ckpt:PATH")
    parser.add_argument("--set", action="append", required=True, help="a labelled set of its board; repeatable")
    parser.add_argument("--moves", help="move numbers to measure, e.g. 12-20 (default: every one of the set)")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--variant", action="append", default=[], help="KEY=VALUE[,KEY=VALUE...]; repeatable")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    try:
        variants = {"as shipped": {}} | {text: parse_variant(text) for text in args.variant}
    except ValueError as error:
        parser.error(str(error))
    checkpoint, geometry, sets = network_and_sets(parser, args)
    results = []
    for name, changes in variants.items():
        try:
            search_config = dataclasses.replace(checkpoint.search_config, **changes)
        except (ValueError, TypeError) as error:
            parser.error(f"--variant {name!r}: {error}")
        agent = agent_registry.checkpoint_agent(dataclasses.replace(checkpoint, search_config=search_config),
                                                geometry, args.simulations)
        row = {"variant": name, "sets": {}}
        for path, data in sets.items():
            accuracy = labelled.accuracy_by_move_number(agent, data, jax.random.PRNGKey(0))
            mean = float(np.average(accuracy.best_result, weights=accuracy.count))
            row["sets"][path] = {"moves": accuracy.move_numbers.tolist(), "best_result": accuracy.best_result.tolist(),
                                 "mean": mean}
            print(f"{name:<32} {path}: " + " ".join(f"{x:.2f}" for x in accuracy.best_result) + f"  (mean {mean:.3f})",
                  flush=True)
        results.append(row)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
