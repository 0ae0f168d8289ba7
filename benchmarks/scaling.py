"""Scaling: self-play positions/s and training steps/s against the number of devices and the batch size.

    python benchmarks/scaling.py                                   # 1, 2, 4 simulated CPU devices
    python benchmarks/scaling.py --devices 1 2 4 8 --games 64 256 --board 3x3

Each device count runs in its own process (``XLA_FLAGS=--xla_force_host_platform_device_count=N`` must be
set before JAX starts; on a GPU/TPU machine pass ``--real`` to use the real devices, one process). Figures:
searched positions per second in self-play (after a warm-up iteration that compiles), and optimiser steps
per second. On a CPU the simulated devices share the same cores, so the table shows the overhead of
sharding, not a speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

MEASURE = r"""
import json, sys, time
import jax
from dabjax.training import config as C, trainer as T
board, games, batch, sims = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows, cols = board.split("x")
cfg = C.load_config(None, [f"board.rows={rows}", f"board.cols={cols}", f"selfplay.games={games}",
                          f"train.batch_size={batch}", f"search.num_simulations={sims}", "eval.every=0",
                          "curriculum.start_step=0", "train.max_steps_per_iteration=20", "train.epochs=100"])
trainer = T.Trainer(cfg)
state, _ = trainer.iteration(trainer.init_state())        # compiles everything
state, m = trainer.iteration(state)
print(json.dumps({"devices": jax.device_count(), "positions_per_s": m["searched_positions"] / m["selfplay_seconds"],
                  "steps_per_s": m["train_steps"] / max(m["train_seconds"], 1e-9),
                  "games_per_s": m["games_per_s"]}))
"""


def run(devices: int | None, board: str, games: int, batch: int, sims: int) -> dict:
    env = dict(os.environ)
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
        env["JAX_PLATFORMS"] = "cpu"
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, board, str(games), str(batch), str(sims)],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--games", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--board", default="3x3")
    parser.add_argument("--real", action="store_true", help="use the machine's real devices (one process)")
    args = parser.parse_args()
    print(f"board {args.board}, {args.simulations} simulations, training batch {args.batch_size}")
    print(f"{'devices':>7} {'games':>6} {'positions/s':>12} {'games/s':>9} {'train steps/s':>14}")
    for devices in ([None] if args.real else args.devices):
        for games in args.games:
            figures = run(devices, args.board, games, args.batch_size, args.simulations)
            print(f"{figures['devices']:>7} {games:>6} {figures['positions_per_s']:>12,.0f} "
                  f"{figures['games_per_s']:>9,.1f} {figures['steps_per_s']:>14,.1f}", flush=True)


if __name__ == "__main__":
    main()
