"""Endgame evaluator throughput on 5x5, and how often greedy play reaches a simple endgame.

    python benchmarks/endgame_throughput.py [--board 5x5] [--batch 4096] [--games 4096]

Prints:
  * the share of greedy-vs-greedy games (the BoxesZero opening policy) in a simple endgame, by move number
    (before the move of that number), and the share that have reached one by then;
  * positions per second at the given batch through (a) the component analysis, (b) analysis + the exact
    simple-endgame value (``endgame.simple_endgame_margin``), (c) ``forced.exact_value`` (which also
    resolves capture positions by exact look-ahead), on simple-endgame positions from those games, and
    (a) on positions of every move number.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chains, endgame, forced, policies
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry, parse_board_size


def greedy_trajectories(geometry, num_games: int, key):
    """States before every move of greedy self-play: a State with leading axes [L, N]."""

    def body(states, key):
        actions = policies.greedy(geometry, key, states)
        next_states = jax.vmap(lambda s, a: env_lib.step(geometry, s, a))(states, actions)
        return next_states, states

    keys = jax.random.split(key, geometry.num_lines)
    return jax.lax.scan(body, env_lib.batch_init(geometry, num_games), keys)[1]


def rate(fn, states, repeats: int = 3) -> float:
    jax.block_until_ready(fn(states))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(states))
        best = min(best, time.perf_counter() - start)
    return states.lines.shape[0] / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="5x5")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--games", type=int, default=4096)
    args = parser.parse_args()
    g = board_geometry(*parse_board_size(args.board))

    trajectory = jax.jit(lambda k: greedy_trajectories(g, args.games, k))(jax.random.PRNGKey(0))
    simple = np.asarray(jax.jit(jax.vmap(jax.vmap(lambda s: chains.analyse(g, s).is_simple_endgame)))(trajectory))
    running = ~np.asarray(trajectory.terminated)
    reached = np.maximum.accumulate(simple, axis=0)
    print(f"board {g.name}, backend {jax.default_backend()}; greedy self-play, {args.games} games")
    print(f"{'move':>4} {'in simple endgame':>18} {'reached by then':>16}")
    for move in range(g.num_lines):
        if running[move].any() or simple[move].any():
            print(f"{move:>4} {simple[move].mean():>18.1%} {reached[move].mean():>16.1%}")

    flat = jax.tree_util.tree_map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), trajectory)
    endgame_index = np.flatnonzero(simple.reshape(-1))
    rng = np.random.default_rng(0)
    pick = rng.choice(endgame_index, size=args.batch, replace=len(endgame_index) < args.batch)
    endgames = jax.tree_util.tree_map(lambda x: jnp.asarray(x[pick]), flat)
    any_index = rng.choice(np.flatnonzero(running.reshape(-1)), size=args.batch)
    anything = jax.tree_util.tree_map(lambda x: jnp.asarray(x[any_index]), flat)

    analyse = jax.jit(jax.vmap(lambda s: chains.analyse(g, s)))
    value = jax.jit(jax.vmap(lambda s: endgame.simple_endgame_margin(g, s)))
    exact = jax.jit(jax.vmap(lambda s: forced.exact_value(env_lib.Env.of(g), s)))
    print(f"\npositions/s at batch {args.batch}:")
    print(f"  component analysis, simple endgames        {rate(analyse, endgames):>12,.0f}")
    print(f"  analysis + exact value, simple endgames    {rate(value, endgames):>12,.0f}")
    print(f"  forced.exact_value, simple endgames        {rate(exact, endgames):>12,.0f}")
    print(f"  component analysis, positions of any move  {rate(analyse, anything):>12,.0f}")
    print(f"  forced.exact_value, positions of any move  {rate(exact, anything):>12,.0f}")


if __name__ == "__main__":
    main()
