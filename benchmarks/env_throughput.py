"""Environment throughput: lines drawn per second by the batched env, against OpenSpiel's C++ game.

    python benchmarks/env_throughput.py                      # 5x5, batch sizes 1..8192
    python benchmarks/env_throughput.py --board 3x3 --batch-sizes 1 64 4096

Figures (all in lines drawn per second):
  natural whole random games the pgx way: ``jax.random.categorical`` over the legal mask, then
          ``env.step``, in a ``fori_loop`` (fresh random numbers at every step; what most code writes first);
  games   whole uniformly random games through ``env.step`` by ``playout.play_random_game`` (one random
          permutation per game up front, then plain steps: the documented fast way);
  steps   ``env.step`` alone, on moves given in advance (a scan of whole games of known moves);
  fast    ``playout.random_playout_scores``: whole random games by the closed form (final scores only).
OpenSpiel: ``pyspiel`` dots_and_boxes driven from Python, a random legal move per step ("games"), and
applying a given move list ("steps").
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import playout
from dabjax.game.geometry import board_geometry, parse_board_size


def time_call(fn, *args, repeats: int) -> float:
    """Best wall time of ``repeats`` calls, after one warm-up (compile) call."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def dabjax_figures(rows: int, cols: int, batch: int, repeats: int) -> dict[str, float]:
    g = board_geometry(rows, cols)
    lines_per_call = batch * g.num_lines
    start = env_lib.batch_init(g, batch)
    keys = jax.random.split(jax.random.PRNGKey(0), batch)

    games = jax.jit(jax.vmap(lambda k, s: playout.play_random_game(env_lib.Env.of(g), k, s)))

    def natural_game(key, state):
        def body(t, carry):
            state, key = carry
            key, sub = jax.random.split(key)
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(sub, logits).astype(jnp.int32)
            return env_lib.step(g, state, action), key

        return jax.lax.fori_loop(0, g.num_lines, body, (state, key))[0]

    natural = jax.jit(jax.vmap(natural_game))
    fast = jax.jit(jax.vmap(lambda k, s: playout.random_playout_scores(env_lib.Env.of(g), k, s)))

    def known_moves(s, moves):
        return jax.lax.scan(lambda st, a: (env_lib.step(g, st, a), None), s, moves)[0]

    steps = jax.jit(jax.vmap(known_moves))
    moves = jax.vmap(lambda k: jax.random.permutation(k, g.num_lines).astype(jnp.int32))(keys)
    return {
        "natural": lines_per_call / time_call(natural, keys, start, repeats=repeats),
        "games": lines_per_call / time_call(games, keys, start, repeats=repeats),
        "steps": lines_per_call / time_call(steps, start, moves, repeats=repeats),
        "fast": lines_per_call / time_call(fast, keys, start, repeats=repeats),
    }


def openspiel_figures(rows: int, cols: int, seconds: float) -> dict[str, float] | None:
    try:
        import pyspiel
    except ImportError:
        return None
    game = pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols})
    rng = np.random.default_rng(0)
    figures = {}
    # Random games: a random legal move each step, as an agent-free rollout would do.
    lines, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = game.new_initial_state()
        while not state.is_terminal():
            legal = state.legal_actions()
            state.apply_action(legal[rng.integers(len(legal))])
            lines += 1
    figures["games"] = lines / (time.perf_counter() - start)
    # Steps only: apply a given permutation.
    num_lines = game.num_distinct_actions()
    perms = [rng.permutation(num_lines).tolist() for _ in range(256)]
    lines, start, i = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        state = game.new_initial_state()
        for action in perms[i % len(perms)]:
            state.apply_action(action)
        lines += num_lines
        i += 1
    figures["steps"] = lines / (time.perf_counter() - start)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="5x5", help="board size in boxes, e.g. 5x5")
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[1, 8, 64, 512, 1024, 4096, 8192]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--openspiel-seconds", type=float, default=3.0)
    args = parser.parse_args()
    rows, cols = parse_board_size(args.board)

    print(f"board {rows}x{cols}, backend {jax.default_backend()}, devices {jax.device_count()}")
    spiel = openspiel_figures(rows, cols, args.openspiel_seconds)
    if spiel is None:
        print("OpenSpiel not installed (pip install open-spiel): no baseline")
    else:
        print(f"OpenSpiel from Python: games {spiel['games']:,.0f} lines/s, steps {spiel['steps']:,.0f} lines/s")
    header = f"{'batch':>6} {'games/s':>10} {'natural':>14} {'games':>14} {'steps':>14} {'fast':>14}"
    if spiel:
        header += f" {'natural x':>9} {'games x':>8} {'steps x':>8} {'fast x':>8}"
    print(header)
    for batch in args.batch_sizes:
        f = dabjax_figures(rows, cols, batch, args.repeats)
        g = board_geometry(rows, cols)
        row = (f"{batch:>6} {f['games'] / g.num_lines:>10,.0f} {f['natural']:>14,.0f} {f['games']:>14,.0f} "
               f"{f['steps']:>14,.0f} {f['fast']:>14,.0f}")
        if spiel:
            row += (
                f" {f['natural'] / spiel['games']:>9.1f} {f['games'] / spiel['games']:>8.1f}"
                f" {f['steps'] / spiel['steps']:>8.1f} {f['fast'] / spiel['games']:>8.1f}"
            )
        print(row, flush=True)
    print("columns: lines drawn per second; 'x' columns are ratios to OpenSpiel's figure of the same kind "
          "('natural' and 'fast' compared with OpenSpiel's random games)")


if __name__ == "__main__":
    main()
