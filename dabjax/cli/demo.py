"""A demo of the batched environment: ``dabjax demo [--board 3x3] [--games 4096]`` (or ``python -m dabjax.cli.demo``).

Plays a batch of uniformly random games on the device, prints one of them move by move, and the batch's
results and speed. (Shell code: printing and argument parsing; the game logic lives in ``dabjax.game.env``.)
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import notation, playout
from dabjax.game.geometry import board_geometry, parse_board_size


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.demo") -> int:
    """The ``demo`` command; returns its exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="3x3", help="board size in boxes (default 3x3)")
    parser.add_argument("--games", type=int, default=4096, help="random games played in one batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--early-termination", action="store_true", help="stop at a majority of boxes")
    args = parser.parse_args(argv)
    if args.games < 1:
        parser.error(f"--games must be at least 1, got {args.games}")
    try:
        geometry = board_geometry(*parse_board_size(args.board))
    except ValueError as error:
        parser.error(str(error))

    env = env_lib.Env(geometry.rows, geometry.cols, args.early_termination)
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.games)
    jax.block_until_ready(playout.random_games(env, keys))  # compile
    began = time.perf_counter()
    final = jax.block_until_ready(playout.random_games(env, keys))
    seconds = time.perf_counter() - began
    order = playout.random_line_order(geometry, keys[0], env.init().lines)  # game 0's moves, as it played them

    print(f"{env.id}: {geometry.num_lines} lines, {geometry.num_boxes} boxes; backend {jax.default_backend()}")
    print("\nGame 0, move by move:")
    state = env.init()
    for move in np.asarray(order):
        if bool(state.terminated):
            break
        mover = notation.PLAYER_LABELS[int(state.current_player)]
        state = notation.play_move(env, state, int(move))
        move_name = notation.move_name(geometry, int(move))
        print(f"  {mover}: {move_name:<8} score A {int(state.scores[0])} - B {int(state.scores[1])}")
    print(notation.render(geometry, state))

    rewards = np.asarray(final.rewards[:, 0])
    print(
        f"\n{args.games} random games in {seconds * 1e3:.1f} ms "
        f"({args.games / seconds:,.0f} games/s, {int(final.num_moves.sum()) / seconds:,.0f} lines/s): "
        f"first player won {np.mean(rewards > 0):.1%}, drew {np.mean(rewards == 0):.1%}, "
        f"lost {np.mean(rewards < 0):.1%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
