"""Learning throughput by batch size: optimiser steps and samples per second of the trainer's compiled learning
loop, and XLA's cost analysis of a step.

    python benchmarks/learning_steps.py                                   # configs/5x5_cpu.yaml's network
    python benchmarks/learning_steps.py --config 5x5 --batch-sizes 1024 4096 --steps 50
    python benchmarks/learning_steps.py --tiny                            # 3x3, tiny sizes (tests)

The samples are the board's built-in labelled set (data/RxC.npz, ``supervised.samples_from_set``); the network, loss
weights, L2 and optimiser (Adam on the SGDR schedule, ``learner.make_optimizer``) are the config's. For each batch
size, the trainer's compiled loop (``learner.make_train_steps``, ``loop="compiled"``) runs ``--steps`` steps of a
random epoch plan, best of ``--repeats`` runs. Figures: steps/s, samples/s (steps x batch) and the flops and bytes XLA
counts for one step (the loop's body). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp

from dabjax import package_data
from dabjax.game.geometry import board_geometry
from dabjax.search import network
from dabjax.solvers import labelled
from dabjax.training import config as config_lib
from dabjax.training import learner, supervised


def measure(config_name: str, overrides: list[str], batch_sizes: list[int], steps: int, repeats: int) -> list[dict]:
    config = config_lib.load_config(config_name, overrides)
    geometry = board_geometry(config.board.rows, config.board.cols)
    labelled_set = labelled.load(package_data.labelled_set_file(geometry.name))
    samples, _ = supervised.samples_from_set(labelled_set)
    samples = jax.tree_util.tree_map(jnp.asarray, samples)
    model = network.PolicyValueNet(config.network)
    params = network.init_params(config.network, geometry.grid_shape, jax.random.PRNGKey(0))
    weights = jnp.ones(samples.valid.shape, jnp.float32)
    train = config.train
    optimizer = learner.make_optimizer(train.lr, train.min_lr_fraction, train.restart_period)
    rows = []
    for batch in batch_sizes:
        count = int(samples.valid.sum())
        epochs = -(-steps * batch // count)  # enough for every step
        index, sym, _ = learner.epoch_plan(jax.random.PRNGKey(1), samples.valid, count, geometry.num_symmetries,
                                           "random", epochs, batch, steps)
        run = learner.make_train_steps(geometry, model, optimizer, train.l2, loop="compiled",
                                       ownership_weight=config.targets.ownership_weight,
                                       margin_weight=config.targets.margin_weight)
        state = learner.init_train_state(params, optimizer)
        arguments = (state, samples, weights, index, sym, jnp.int32(steps))
        compiled = run.lower(*arguments).compile()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(*arguments))
            best = min(best, time.perf_counter() - start)
        analysis = compiled.cost_analysis()
        analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
        rows.append(dict(batch=batch, steps_per_s=steps / best, samples_per_s=steps * batch / best,
                         step_flops=float(analysis.get("flops", 0.0)),
                         step_bytes=float(analysis.get("bytes accessed", 0.0))))
        row = rows[-1]
        print(f"| {batch:,} | {row['steps_per_s']:.1f} | {row['samples_per_s']:,.0f} | "
              f"{row['step_flops'] / 1e9:.2f} | {row['step_bytes'] / 1e6:.1f} |", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="5x5_cpu", help="a config file or built-in name (default: 5x5_cpu)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--steps", type=int, default=40, help="optimiser steps a timed run (default: 40)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best counts (default: 3)")
    parser.add_argument("--tiny", action="store_true", help="3x3, a small MLP, small batches, 3 steps (tests)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows to this file")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    if args.tiny:
        args.config, args.batch_sizes, args.steps, args.repeats = "3x3", [4, 16], 3, 1
        args.overrides = [*args.overrides, "network.width=16", "network.blocks=1"]
    print(f"{args.config} on {jax.default_backend()}: {args.steps} steps a run")
    print("| batch | steps/s | samples/s | GFLOP / step | MB / step |\n|---:|---:|---:|---:|---:|")
    rows = measure(args.config, args.overrides, args.batch_sizes, args.steps, args.repeats)
    if args.json is not None:
        args.json.write_text(json.dumps(dict(config=args.config, steps=args.steps, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
