"""Where does a network go wrong: by the exact result of the position (won, drawn, lost), is it its policy or its
value? A diagnostic for the weakest moves of the best-result share.

    python benchmarks/result_classes.py --agent pretrained:4x4 --set data/4x4.npz \
        --set results/4x4_unseen_large.npz --set data/4x4_train.npz --moves 12-15

For the positions of each labelled ``--set`` at ``--moves`` (every move number of the set by default), with the
network of ``--agent`` (``pretrained:RxC``, or ``ckpt:PATH`` of a run, checkpoint or agent folder), it prints:

* how hard the positions are: the share that has a move which gives up the best result (in a lost position
  every move keeps it), and in those the share of legal moves that keep it;
* by the position's exact result (its label: the final margin under best play): how many there are, and the
  best-result share of the raw policy (the legal move of highest logit) and of a one-move lookahead with the
  value (the legal move whose next position the network values most for the mover: the value of a move that
  completes a box, after which the mover moves again, is read as the mover's, else negated);
* the value's result class (win above 1/3, loss below -1/3, else draw) against the exact one, on the positions
  and, where the set has move values, on every legal move's next position (the mover's result after it);
* with dense heads, the same class from the margin head (a win when the predicted final margin exceeds half a
  box).

A search leans on the value of the next positions, so a low next-position class share says the value, not the
policy or the search, is what to improve. Prints figures (``--json`` writes them); not a test.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from play_settings import network_and_sets  # noqa: E402  (a sibling script: benchmarks/ is on the path)

from dabjax.game import env as env_lib  # noqa: E402
from dabjax.search import network  # noqa: E402
from dabjax.solvers import labelled  # noqa: E402

CLASSES = {"lost": -1, "drawn": 0, "won": 1}
DRAW_BAND = 1.0 / 3.0  # |value| at most this reads as a draw


def result_class(value: np.ndarray, band: float = DRAW_BAND) -> np.ndarray:
    """int ``[N]``: +1, 0 or -1 for values above ``band``, within it, and below ``-band``."""
    return np.where(value > band, 1, np.where(value < -band, -1, 0))


def next_position_values(geometry, model: network.PolicyValueNet, params, states: env_lib.State) -> np.ndarray:
    """float32 ``[N, L]``: the network's value of the position after each legal move, for the player who made
    it (-inf for illegal moves). One batched evaluation per line."""
    step = jax.jit(jax.vmap(lambda s, a: env_lib.step(geometry, s, a)))
    observe = jax.jit(jax.vmap(lambda s: env_lib.observe(geometry, s)))
    apply = jax.jit(lambda o: model.apply(params, o)[1])
    mover = np.asarray(states.current_player)
    count = mover.shape[0]
    values = np.full((count, geometry.num_lines), -np.inf, np.float32)
    for line in range(geometry.num_lines):
        after = step(states, jnp.full(count, line, jnp.int32))
        value = np.asarray(apply(observe(after)))
        same = np.asarray(after.current_player) == mover
        done = np.asarray(after.terminated)
        # A finished game's value is its result, not the network's.
        final = np.sign(np.asarray(after.scores)[:, 0] - np.asarray(after.scores)[:, 1]) * np.where(mover == 0, 1, -1)
        values[:, line] = np.where(done, final, np.where(same, value, -value))
    return np.where(np.asarray(states.legal_action_mask), values, -np.inf)


def breakdown(geometry, checkpoint, data: labelled.LabelledSet) -> dict:
    """The figures of the module docstring for the positions of ``data`` (a ``PlayableCheckpoint``'s network)."""
    model = network.PolicyValueNet(checkpoint.network_config)
    states = labelled.to_states(data)
    observations = jax.jit(jax.vmap(lambda s: env_lib.observe(geometry, s)))(states)
    dense = checkpoint.network_config.dense_heads
    outputs = jax.jit(lambda o: model.apply(checkpoint.params, o, dense=dense))(observations)
    logits, value = np.asarray(outputs[0]), np.asarray(outputs[1])
    legal = ~data.lines
    keeps = data.best_result & legal
    index = np.arange(len(data))
    policy_move = np.where(legal, logits, -np.inf).argmax(1)
    children = next_position_values(geometry, model, checkpoint.params, states)
    lookahead_move = children.argmax(1)
    final = data.margin.astype(np.int64) + data.value.astype(np.int64)
    exact = np.sign(final)
    hard = keeps.sum(1) < legal.sum(1)
    figures = {
        "positions": int(len(data)),
        "with_a_losing_move": float(hard.mean()),
        "keeping_share_of_legal_moves_there": float((keeps.sum(1) / legal.sum(1))[hard].mean()) if hard.any()
        else float("nan"),
        "raw_policy": float(keeps[index, policy_move].mean()),
        "lookahead": float(keeps[index, lookahead_move].mean()),
        "value_class": float((result_class(value) == exact).mean()),
        "by_result": {},
    }
    for name, sign in CLASSES.items():
        at = exact == sign
        figures["by_result"][name] = {
            "positions": int(at.sum()),
            "raw_policy": float(keeps[index, policy_move][at].mean()) if at.any() else float("nan"),
            "lookahead": float(keeps[index, lookahead_move][at].mean()) if at.any() else float("nan"),
        }
    if data.move_values is not None:
        after = np.sign(data.margin[:, None].astype(np.int64) + data.move_values.astype(np.int64))
        figures["next_position_class"] = float((result_class(children) == after)[legal].mean())
    if dense:
        margin = np.asarray(outputs[3]) * geometry.num_boxes
        figures["margin_head_class"] = float((result_class(margin, 0.5) == exact).mean())
    return figures


def report(path: str, figures: dict) -> None:
    print(f"{path}: {figures['positions']} positions; {figures['with_a_losing_move']:.3f} have a losing move, "
          f"where {figures['keeping_share_of_legal_moves_there']:.3f} of the legal moves keep the result")
    print(f"  best-result share: raw policy {figures['raw_policy']:.3f}, one-move lookahead {figures['lookahead']:.3f}")
    for name, row in figures["by_result"].items():
        print(f"  {name:>5} ({row['positions']:>5}): raw policy {row['raw_policy']:.3f}, "
              f"lookahead {row['lookahead']:.3f}")
    classes = [f"the position's {figures['value_class']:.3f}"]
    if "next_position_class" in figures:
        classes.append(f"every next position's {figures['next_position_class']:.3f}")
    if "margin_head_class" in figures:
        classes.append(f"the margin head's {figures['margin_head_class']:.3f}")
    print("  result class (win/draw/loss) right: " + ", ".join(classes), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", required=True, help="a network agent: pretrained:RxC, ckpt:PATH")
    parser.add_argument("--set", action="append", required=True, help="a labelled set of its board; repeatable")
    parser.add_argument("--moves", help="move numbers to measure, e.g. 12-15 (default: every one of the set)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    checkpoint, geometry, sets = network_and_sets(parser, args)
    results = {}
    for path, data in sets.items():
        if len(data) == 0:
            parser.error(f"--set {path} has no position at --moves {args.moves}")
        results[path] = breakdown(geometry, checkpoint, data)
        report(path, results[path])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
