"""Does a second frame help the value learn the middle game? The value bench with the last two moves as inputs.

    python benchmarks/second_frame.py                                  # 4x4, moves 12-20, 2 seeds, 3 min an arm
    python benchmarks/second_frame.py --minutes 5 --seeds 0 1 2 --json second_frame.json
    python benchmarks/second_frame.py --tiny                           # 2x2, a few seconds (tests)

A second input frame, the last moves, let a network learn Nim's reply (Riis, arXiv 2411.06403, 2024); in
Dots-and-Boxes the middle
game turns on the same kind of parity. At play time the frame is free: the search knows the path to every node.
This measures it offline, as the value bench does (benchmarks/network_capacity.py): supervised training on exact
labels, the network measured on positions it never saw.

Positions come with their history. Games of the labelled sets' generator (the greedy opening policy mixed with
20% random moves: ``labelled.play_trajectories``) are played, and every position at the training moves (distinct
under symmetry and score so far) keeps the two moves that led to it. The position solver labels them exactly
(``parallel_labels.solve_parallel``): ``--per-move`` training positions a move, and ``--measure-per-move`` measured
ones at ``--measure-moves``, from other games, none also in the training positions.

Two arms train the same graph network (configs/5x5.yaml's kind and size unless ``--width``/``--blocks``) for the
same ``--minutes`` each, on the same positions, with each ``--seeds`` seed:

* plain: the network as dabjax ships it;
* last two moves: two more inputs on every line, 1 where it is the last move and where it is the move before.

The training: Adam (lr 1e-3), batches of 256 with a random board symmetry each (the frames move with the lines),
the value fitted to the sign of the exact result for the side to move (0 for a draw), the policy to the
best-result moves (uniform). The measure: the balanced sign accuracy of the value (the mean of its accuracy on
won and on lost positions; draws left out) by move number on the measured positions, and on the training ones
(can it fit them at all). The last lines give each arm's mean over seeds at the measured moves. Run it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.search import network, trunks
from dabjax.search.network_inputs import line_cells_of_grid
from dabjax.solvers import labelled, parallel_labels
from dabjax.training import config as config_lib

FRAMES = 2  # the last move and the one before


class GraphTrunk(trunks.GraphTrunk):
    """The graph trunk with the last two moves as two more line inputs, read from observation planes 4 and 5
    (1 at the move's line cell). The class name keeps the trunk's parameter paths."""

    def graph_inputs(self, observation):
        node_in, line_in, position_in = super().graph_inputs(observation)
        _, height, width, _ = observation.shape
        cells = line_cells_of_grid(height, width)
        frames = observation.reshape(observation.shape[0], height * width, -1)[:, cells, 4:4 + FRAMES]
        return node_in, jnp.concatenate([line_in, frames.astype(jnp.float32)], -1), position_in


def sample_with_history(geometry, move_numbers, per_move: int, seed: int, avoid: set) -> dict:
    """Up to ``per_move`` positions a move number from the generator's games, distinct under symmetry and score so
    far and not in ``avoid`` (identities, updated), each with its last two moves (int ``[N, 2]``, -1 before the
    game's second move): ``move_numbers, lines, claimed, margin, last_moves``."""
    key = jax.random.PRNGKey(seed)
    chosen = {n: [] for n in move_numbers}
    for _ in range(40):
        if all(len(chosen[n]) >= per_move for n in move_numbers):
            break
        key, sub = jax.random.split(key)
        history = labelled.play_trajectories(geometry, sub, 256, 0.2)
        lines = np.asarray(history.lines)  # [T, G, L]: the position after t = 0 .. L - 1 moves of each game
        for n in move_numbers:
            at_n = jax.tree_util.tree_map(lambda x: x[n], history)
            scores, mover = np.asarray(at_n.scores), np.asarray(at_n.current_player)
            margins = 2 * scores[np.arange(len(mover)), mover] - scores.sum(-1)  # the mover's lead
            keys = labelled.canonical_keys(geometry, at_n.lines)
            for game in range(lines.shape[1]):
                identity = (keys[game], int(margins[game]))
                if identity in avoid or len(chosen[n]) >= per_move:
                    continue
                avoid.add(identity)
                last = [int(np.flatnonzero(lines[t, game] & ~lines[t - 1, game])[0]) if t >= 1 else -1
                        for t in (n, n - 1)]
                chosen[n].append((n, lines[n, game], np.asarray(at_n.box_owner[game]) >= 0, margins[game], last))
    picked = [row for n in move_numbers for row in chosen[n]]
    return dict(move_numbers=np.array([r[0] for r in picked], np.int32),
                lines=np.array([r[1] for r in picked], bool).reshape(-1, geometry.num_lines),
                claimed=np.array([r[2] for r in picked], bool).reshape(-1, geometry.num_boxes),
                margin=np.array([r[3] for r in picked], np.int32),
                last_moves=np.array([r[4] for r in picked], np.int32).reshape(-1, FRAMES))


def labelled_positions(geometry, move_numbers, per_move, seed, avoid, workers, progress) -> dict:
    """``sample_with_history`` with exact labels (``final``: the mover's final margin under best play, the lead
    so far included; ``best_result`` ``[N, L]``), unfinished positions dropped."""
    positions = sample_with_history(geometry, move_numbers, per_move, seed, avoid)
    labels = parallel_labels.solve_parallel(geometry.rows, geometry.cols, positions["lines"], positions["margin"],
                                            positions["move_numbers"], workers=workers, move_values=False,
                                            time_limit=60.0, progress=progress)
    keep = labels["finished"]
    final = positions["margin"] + labels["value"].astype(np.int32)
    return {**{k: v[keep] for k, v in positions.items()}, "final": final[keep],
            "best_result": labels["best_result"][keep]}


def observations(geometry, data: dict, sym: jax.Array | None) -> jax.Array:
    """float32 ``[N, H, W, 6]``: each position's observation (under board symmetry ``sym [N]``, if given) with
    its last two moves as planes 4 and 5."""
    gather = jnp.asarray(geometry.sym_line_gather)
    box_gather = jnp.asarray(geometry.sym_box_gather)
    cell_line = jnp.asarray(geometry.cell_line.reshape(-1))
    height, width = geometry.grid_shape

    def one(lines, claimed, margin, last, s):
        frames = (last[:, None] == jnp.arange(geometry.num_lines)[None]).T  # [L, 2]
        if s is not None:
            lines, claimed, frames = lines[gather[s]], claimed[box_gather[s]], frames[gather[s]]
        planes = env_lib.observation_from(geometry, lines, claimed, margin)
        frames = jnp.concatenate([frames, jnp.zeros((1, FRAMES), bool)])[cell_line].astype(jnp.float32)
        return jnp.concatenate([planes, frames.reshape(height, width, FRAMES)], -1)

    arrays = (data["lines"], data["claimed"], data["margin"], data["last_moves"])
    if sym is None:
        return jax.vmap(lambda *a: one(*a, None))(*arrays)
    return jax.vmap(one)(*arrays, sym)


def targets(geometry, data: dict, sym: jax.Array | None):
    """The value target (the sign of the mover's final result) and the best-result moves (under ``sym``)."""
    best = data["best_result"]
    if sym is not None:
        best = jax.vmap(lambda b, s: b[jnp.asarray(geometry.sym_line_gather)[s]])(best, sym)
    return jnp.sign(data["final"]).astype(jnp.float32), best


@contextlib.contextmanager
def trunk_reading_frames(frames: bool):
    """Within it, ``PolicyValueNet`` builds the trunk that reads the frames (``frames``) or the shipped one. The
    network module names its trunk class; swapping that name for the bench's subclass changes nothing else."""
    original = network.GraphTrunk
    network.GraphTrunk = GraphTrunk if frames else original
    try:
        yield
    finally:
        network.GraphTrunk = original


def train(geometry, config, frames: bool, data: dict, seed: int, minutes: float, batch: int = 256):
    """Parameters after ``minutes`` of training (compilation excluded) and the steps taken."""
    model = network.PolicyValueNet(config)
    with trunk_reading_frames(frames):
        params = model.init(jax.random.PRNGKey(seed), jnp.zeros((1, *geometry.grid_shape, 4 + FRAMES)))
        optimiser = optax.adam(1e-3)
        device_data = {k: jnp.asarray(v) for k, v in data.items()}

        @jax.jit
        def step(params, opt_state, key):
            k_index, k_sym = jax.random.split(key)
            index = jax.random.randint(k_index, (batch,), 0, len(data["final"]))
            sym = jax.random.randint(k_sym, (batch,), 0, geometry.num_symmetries)
            rows = {k: v[index] for k, v in device_data.items()}
            obs = observations(geometry, rows, sym)
            value_target, best = targets(geometry, rows, sym)
            policy_target = best / jnp.maximum(best.sum(-1, keepdims=True), 1)

            def loss(p):
                logits, value = model.apply(p, obs)
                logits = network.mask_logits(logits, ~jax.vmap(lambda l, s: l[jnp.asarray(
                    geometry.sym_line_gather)[s]])(rows["lines"], sym))
                policy_loss = -(policy_target * jax.nn.log_softmax(logits)).sum(-1).mean()
                return ((value - value_target) ** 2).mean() + policy_loss

            grads = jax.grad(loss)(params)
            updates, opt_state = optimiser.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        opt_state = optimiser.init(params)
        key = jax.random.PRNGKey(1000 + seed)
        params, opt_state = step(params, opt_state, key)  # compiles
        steps, start = 1, time.perf_counter()
        while time.perf_counter() - start < minutes * 60:
            for _ in range(50):
                key, sub = jax.random.split(key)
                params, opt_state = step(params, opt_state, sub)
            jax.block_until_ready(params)
            steps += 50
        return params, steps


def sign_accuracy(geometry, config, frames: bool, params, data: dict) -> dict[int, float]:
    """``{move number: balanced sign accuracy}`` of the value on ``data`` (draws left out)."""
    with trunk_reading_frames(frames):
        apply = jax.jit(network.PolicyValueNet(config).apply)
        obs = observations(geometry, {k: jnp.asarray(v) for k, v in data.items()}, None)
        value = np.concatenate([np.asarray(apply(params, obs[i:i + 2048])[1]) for i in range(0, len(obs), 2048)])
    result = {}
    for n in np.unique(data["move_numbers"]):
        at = data["move_numbers"] == n
        shares = [float(np.mean(value[at & (data["final"] > 0)] > 0))] if (at & (data["final"] > 0)).any() else []
        if (at & (data["final"] < 0)).any():
            shares.append(float(np.mean(value[at & (data["final"] < 0)] < 0)))
        result[int(n)] = float(np.mean(shares)) if shares else float("nan")
    return result


def parse_moves(text: str) -> list[int]:
    """``"12-20"`` -> ``[12, ..., 20]``; ``"12"`` -> ``[12]``."""
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="4x4")
    parser.add_argument("--moves", default="12-20", help="training move numbers (default: 12-20)")
    parser.add_argument("--per-move", type=int, default=2400, help="training positions a move (default: 2400)")
    parser.add_argument("--measure-moves", default="12-15", help="measured move numbers (default: 12-15)")
    parser.add_argument("--measure-per-move", type=int, default=600, help="measured positions a move (default: 600)")
    parser.add_argument("--minutes", type=float, default=3.0, help="training minutes an arm and seed (default: 3)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--width", type=int, help="graph width (default: configs/5x5.yaml's)")
    parser.add_argument("--blocks", type=int, help="graph blocks (default: configs/5x5.yaml's)")
    parser.add_argument("--workers", type=int, default=2, help="solver processes (default: 2)")
    parser.add_argument("--data", type=pathlib.Path, help="keep the labelled positions in this .npz (reused)")
    parser.add_argument("--tiny", action="store_true", help="2x2 board, few positions, seconds (tests)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.tiny:
        args.board, args.moves, args.per_move, args.measure_moves, args.measure_per_move = "2x2", "3-6", 30, "4-5", 10
        args.minutes, args.width, args.blocks, args.workers = 0.02, 8, 1, 1
    geometry = board_geometry(*parse_board_size(args.board))
    for moves in (args.moves, args.measure_moves):
        if not 2 <= min(parse_moves(moves)) <= max(parse_moves(moves)) < geometry.num_lines:
            parser.error(f"move numbers {moves} must lie in 2..{geometry.num_lines - 1} on {args.board}")
    recipe = config_lib.load_config("5x5").network
    config = network.NetworkConfig(kind="graph", width=args.width or recipe.width, blocks=args.blocks or recipe.blocks,
                                   value_hidden=recipe.value_hidden)
    identity = np.array([args.board, args.moves, str(args.per_move), args.measure_moves, str(args.measure_per_move)])
    if args.data is not None and args.data.exists():
        stored = np.load(args.data)
        if "identity" not in stored.files or list(stored["identity"]) != list(identity):
            parser.error(f"{args.data} holds other positions than --board, --moves, --per-move, --measure-moves and "
                         "--measure-per-move ask for: give another --data file")
        train_data = {k[6:]: stored[k] for k in stored.files if k.startswith("train_")}
        measure_data = {k[8:]: stored[k] for k in stored.files if k.startswith("measure_")}
    else:
        avoid: set = set()
        say = functools.partial(print, flush=True) if not args.tiny else None
        measure_data = labelled_positions(geometry, parse_moves(args.measure_moves), args.measure_per_move, 7, avoid,
                                          args.workers, say)
        train_data = labelled_positions(geometry, parse_moves(args.moves), args.per_move, 8, avoid, args.workers, say)
        if args.data is not None:
            np.savez_compressed(args.data, identity=identity, **{f"train_{k}": v for k, v in train_data.items()},
                                **{f"measure_{k}": v for k, v in measure_data.items()})
    print(f"{args.board}: {len(train_data['final'])} training positions (moves {args.moves}), "
          f"{len(measure_data['final'])} measured (moves {args.measure_moves}, none trained on); "
          f"graph {config.width}x{config.blocks}, {args.minutes} min an arm", flush=True)
    rows = []
    for seed in args.seeds:
        for frames in (False, True):
            params, steps = train(geometry, config, frames, train_data, seed, args.minutes)
            line_inputs = int(params["params"]["GraphTrunk_0"]["Dense_2"]["kernel"].shape[0])  # the lines' first layer
            rows.append(dict(arm="last two moves" if frames else "plain", seed=seed, steps=steps,
                             line_inputs=line_inputs,
                             measured=sign_accuracy(geometry, config, frames, params, measure_data),
                             trained=sign_accuracy(geometry, config, frames, params, train_data)))
            row = rows[-1]
            print(f"seed {seed} {row['arm']:>14}: {steps} steps; measured "
                  + " ".join(f"{n}:{a:.3f}" for n, a in row["measured"].items()) + "; trained "
                  + " ".join(f"{n}:{a:.3f}" for n, a in row["trained"].items()), flush=True)
    for arm in ("plain", "last two moves"):
        means = [np.nanmean(list(r["measured"].values())) for r in rows if r["arm"] == arm]
        print(f"{arm}: mean balanced sign accuracy at moves {args.measure_moves} over seeds "
              + ", ".join(f"{m:.3f}" for m in means) + f" (mean {np.nanmean(means):.3f})")
    if args.json is not None:
        args.json.write_text(json.dumps(dict(board=args.board, moves=args.moves, measure_moves=args.measure_moves,
                                             minutes=args.minutes, width=config.width, blocks=config.blocks,
                                             training_positions=int(len(train_data["final"])),
                                             measured_positions=int(len(measure_data["final"])), rows=rows),
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
