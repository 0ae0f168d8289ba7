"""Search throughput: simulations and moves per second by batch size, board and pruning.

    python benchmarks/search_throughput.py                       # 3x3 and 5x5, batch 1..1024
    python benchmarks/search_throughput.py --boards 3x3 --batch-sizes 1 64 --simulations 32

Networks, randomly initialised: 3x3 uses the CPU default's (configs/3x3.yaml: a 256x2 MLP), 5x5 the
paper-sized ResNet (configs/5x5.yaml: width 160, 6 blocks, ~2.9 M parameters), other boards and ``--resnet``
the built-in ResNet (width 32, 3 blocks: the 3x3 default before the MLP). Positions: the greedy
opening policy's games at move ``L/2`` (mid-game, where search matters). One "move" is one full search of
one position; simulations/s = batch x simulations / seconds.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jnp

from dabjax import agents, network, search
from dabjax import config as config_lib
from dabjax import env as env_lib
from dabjax.geometry import board_geometry, parse_board_size

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"
NETWORKS = {board: config_lib.load_config(str(CONFIGS / f"{board}.yaml")).network_config() for board in ("3x3", "5x5")}
RESNET = config_lib.TrainConfig().network_config()


def midgame_states(geometry, batch: int, key):
    def body(states, k):
        actions = agents.greedy(geometry, k, states)
        return jax.vmap(lambda s, a: env_lib.step(geometry, s, a))(states, actions), None

    keys = jax.random.split(key, geometry.num_lines // 2)
    return jax.lax.scan(body, env_lib.batch_init(geometry, batch), keys)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boards", nargs="+", default=["3x3", "5x5"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64, 256, 1024])
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--resnet", action="store_true", help="the built-in 32x3 ResNet on every board but 5x5")
    args = parser.parse_args()
    print(f"backend {jax.default_backend()}, {args.simulations} simulations per move, Gumbel MuZero")
    print(f"{'board':>5} {'pruning':>8} {'batch':>6} {'sims/s':>12} {'moves/s':>10} {'ms/search':>10}")
    for board in args.boards:
        g = board_geometry(*parse_board_size(board))
        net = NETWORKS["5x5"] if board == "5x5" else RESNET if args.resnet else NETWORKS.get(board, RESNET)
        params = network.init_params(net, g.grid_shape, jax.random.PRNGKey(0))
        evaluator = search.network_evaluator(net, g)
        for pruning in (True, False):
            config = search.SearchConfig(
                num_simulations=args.simulations, endgame_pruning=pruning, chain_pruning=pruning
            )
            run = jax.jit(lambda p, k, s: search.run_search(config, g, evaluator, p, k, s).action)
            for batch in args.batch_sizes:
                states = jax.jit(lambda k: midgame_states(g, batch, k))(jax.random.PRNGKey(1))
                jax.block_until_ready(run(params, jax.random.PRNGKey(2), states))
                best = float("inf")
                for r in range(args.repeats):
                    began = time.perf_counter()
                    jax.block_until_ready(run(params, jax.random.PRNGKey(3 + r), states))
                    best = min(best, time.perf_counter() - began)
                print(
                    f"{board:>5} {'on' if pruning else 'off':>8} {batch:>6} "
                    f"{batch * args.simulations / best:>12,.0f} {batch / best:>10,.1f} {best * 1e3:>10.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
