"""Search throughput: simulations per second with and without the prunings, by board, network and batch size.

    python benchmarks/search_throughput.py                       # 3x3 MLP, 5x5 MLP, 5x5 ResNet; batch 1..256
    python benchmarks/search_throughput.py --rows 5x5:mlp --batch-sizes 1 256 --simulations 32 --repeats 5
    python benchmarks/search_throughput.py --rows 5x5:mlp --batch-sizes 256 --max-depth 6   # search.max_depth

Each row is one board and network (``BOARD:NETWORK``, randomly initialised): ``mlp`` is the CPU default's
(configs/3x3.yaml: a 256x2 MLP, on any board), ``resnet`` the paper-sized ResNet of configs/5x5_resnet.yaml
(width 160, 6 blocks, ~2.9 M parameters), ``graph`` the graph network of configs/5x5.yaml and 5x5_cpu.yaml,
and ``small-resnet`` the built-in one (width 32, 3 blocks: the 3x3 default before the MLP). Positions: the greedy
opening policy's games at move ``L/2`` (mid-game, where search matters), with the forced captures that follow played
(self-play searches no forced move). One "move" is one full search of one position; simulations/s = batch x
simulations / seconds.
Gumbel MuZero.

The pruned search (endgame and chain-loop pruning) and the unpruned one are timed alternately in the same process,
``--repeats`` times each, and the best time of each is kept: on a shared machine their ratio is more robust to other
jobs than either figure. On a GPU dabjax runs the search's while loops as XLA command buffers
(``dabjax.game.loops``).
``--max-depth`` caps both searches' depth (``search.max_depth``); the last column gives the pruned search's mean and
deepest leaf depth.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import policies
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.search import mcts, network
from dabjax.training import config as config_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"
NETWORKS = {
    "mlp": config_lib.load_config(str(CONFIGS / "3x3.yaml")).network,
    "resnet": config_lib.load_config(str(CONFIGS / "5x5_resnet.yaml")).network,
    "graph": config_lib.load_config(str(CONFIGS / "5x5.yaml")).network,
    "small-resnet": network.NetworkConfig(),  # the built-in default
}
DEFAULT_ROWS = ["3x3:mlp", "5x5:mlp", "5x5:resnet"]


def midgame_states(geometry, batch: int, key):
    """The greedy opening policy's games at move L/2, then any forced captures (as self-play searches)."""

    def body(states, k):
        actions = policies.greedy(geometry, k, states)
        return jax.vmap(lambda s, a: env_lib.step(geometry, s, a))(states, actions), None

    keys = jax.random.split(key, geometry.num_lines // 2)
    states = jax.lax.scan(body, env_lib.batch_init(geometry, batch), keys)[0]
    return mcts.search_roots(mcts.SearchConfig(), env_lib.Env.of(geometry), states)


def search_config(simulations: int, pruning: bool, max_depth: int | None) -> mcts.SearchConfig:
    """Gumbel MuZero with both prunings on, or both off."""
    return mcts.SearchConfig(
        num_simulations=simulations, endgame_pruning=pruning, chain_pruning=pruning, max_depth=max_depth
    )


def compiled_search(geometry, net, config: mcts.SearchConfig):
    """jit(params, key, states) -> actions of a search."""
    evaluator = mcts.network_evaluator(net, geometry)
    return jax.jit(lambda p, k, s: mcts.run_search(config, env_lib.Env.of(geometry), evaluator, p, k, s).action)


def node_depths(tree: mctx.Tree) -> jax.Array:
    """int32 ``[N, S + 1]``: every node's depth in a batched search tree (the root 0; unused slots 0).

    mctx creates a node after its parent, so one pass in node order suffices.
    """
    parents = tree.parents

    def body(node, depths):
        parent = parents[:, node]
        parent_depth = jnp.take_along_axis(depths, jnp.maximum(parent, 0)[:, None], axis=1)[:, 0]
        return depths.at[:, node].set(jnp.where(parent >= 0, parent_depth + 1, 0))

    return jax.lax.fori_loop(1, parents.shape[1], body, jnp.zeros(parents.shape, jnp.int32))


def tree_depths(geometry, net, config: mcts.SearchConfig, params, states) -> tuple[float, int]:
    """(mean, deepest) depth of the nodes the searches of ``states`` created (the root excluded)."""
    evaluator = mcts.network_evaluator(net, geometry)

    def depths(p, k, s):
        tree = mcts.run_search(config, env_lib.Env.of(geometry), evaluator, p, k, s).tree
        return node_depths(tree)[:, 1:], tree.node_visits[:, 1:] > 0

    depth, created = jax.jit(depths)(params, jax.random.PRNGKey(2), states)
    depth = np.asarray(depth)[np.asarray(created)]
    return float(depth.mean()), int(depth.max(initial=0))


def best_times(runs, params, states, repeats: int) -> list[float]:
    """Best wall time of each search in ``runs``, timed alternately ``repeats`` times after a warm-up."""
    for run in runs:
        jax.block_until_ready(run(params, jax.random.PRNGKey(2), states))
    best = [float("inf")] * len(runs)
    for r in range(repeats):
        for i, run in enumerate(runs):
            began = time.perf_counter()
            jax.block_until_ready(run(params, jax.random.PRNGKey(3 + r), states))
            best[i] = min(best[i], time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=DEFAULT_ROWS, help="BOARD:NETWORK, e.g. 5x5:mlp")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-depth", type=int, help="search.max_depth of both searches (default: no cap)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows to this file")
    args = parser.parse_args()
    cap = f", max depth {args.max_depth}" if args.max_depth else ""
    print(f"backend {jax.default_backend()}, {args.simulations} simulations per move, Gumbel MuZero{cap}")
    rows = []
    print(
        f"{'board':>5} {'network':>12} {'batch':>6} {'pruned sims/s':>14} {'unpruned sims/s':>16} "
        f"{'ratio':>6} {'pruned moves/s':>15} {'depth mean/max':>15}"
    )
    for row in args.rows:
        board, _, net_name = row.partition(":")
        net = NETWORKS[net_name or "mlp"]
        g = board_geometry(*parse_board_size(board))
        params = network.init_params(net, g.grid_shape, jax.random.PRNGKey(0))
        configs = [search_config(args.simulations, pruning, args.max_depth) for pruning in (True, False)]
        runs = [compiled_search(g, net, config) for config in configs]
        for batch in args.batch_sizes:
            states = jax.jit(lambda k: midgame_states(g, batch, k))(jax.random.PRNGKey(1))
            pruned, unpruned = best_times(runs, params, states, args.repeats)
            mean_depth, max_depth = tree_depths(g, net, configs[0], params, states)
            rows.append(dict(board=board, network=net_name, batch=batch,
                             pruned_sims_per_s=batch * args.simulations / pruned,
                             unpruned_sims_per_s=batch * args.simulations / unpruned))
            print(
                f"{board:>5} {net_name:>12} {batch:>6} {batch * args.simulations / pruned:>14,.0f} "
                f"{batch * args.simulations / unpruned:>16,.0f} {unpruned / pruned:>6.2f} {batch / pruned:>15,.1f} "
                f"{f'{mean_depth:.2f}/{max_depth}':>15}",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
