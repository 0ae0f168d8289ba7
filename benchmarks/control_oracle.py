"""Go/no-go for a nimstring control oracle: does the exact nimstring solver (``dabjax.solvers.nimstring``) pick
Dots-and-Boxes moves that keep the best result, fast enough to use inside play or training?

    nice -n 10 taskset -c 1 python benchmarks/control_oracle.py --budget-seconds 5 --limit 100 \
        --out results/control_oracle.json

For each labelled set and move number (defaults: ``data/4x4.npz`` moves 12-15, ``results/4x4_unseen_nimstring.npz``
moves 12-15, a 4x4 set kept apart from ``data/4x4.npz`` and ``data/4x4_train.npz``, built by ``dabjax label build
--exclude``, and ``data/5x5.npz`` moves 22-25), at most ``--limit`` positions each, it prints a markdown table:

* the solver's seconds per position (median, p90; a fresh solver per position, so that no position gains from
  another's memo: ``--shared-memo`` keeps one per set, as a player would between its moves) and the share
  finished within ``--budget-seconds`` and within 1 s;
* the share of finished positions won in nimstring by the side to move, and the agreement of that outcome with
  the exact result of the labels (``margin + value``): a win against a draw or loss, and a win or draw against
  a loss (finished positions);
* the best-result share of the raw policy (the legal move of highest logit of ``--agent`` at 0 simulations, as
  ``benchmarks/result_classes.py`` and the periodic evaluation compute it) and of the oracle's move: the
  nimstring-winning line of highest logit, the raw policy's move when none wins or the solver did not finish.

``--timing-moves`` adds rows of 5x5 positions sampled (unlabelled) at earlier move numbers, timings only: the
earliest move where 90% finish within 1 s. The verdict: GO when, on the 4x4 sets' moves 12-15 together, the
oracle's best-result share or the win / draw-or-loss agreement reaches 0.90; else NO-GO. ``--out`` writes every
figure as JSON. Not a test.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dabjax.cli.label import parse_move_numbers  # noqa: E402
from dabjax.evaluation import agent_registry  # noqa: E402
from dabjax.game import env as env_lib  # noqa: E402
from dabjax.game.geometry import board_geometry  # noqa: E402
from dabjax.search import network  # noqa: E402
from dabjax.solvers import labelled  # noqa: E402
from dabjax.solvers.nimstring import NimstringSolver  # noqa: E402

DEFAULT_SETS = ("data/4x4.npz:12-15", "results/4x4_unseen_nimstring.npz:12-15", "data/5x5.npz:22-25")
GO_SHARE = 0.90
FAST_SECONDS = 1.0  # "finishes fast": the earliest 5x5 move where 90% of positions finish within this


def policy_logits(checkpoint, data: labelled.LabelledSet) -> np.ndarray:
    """float32 ``[N, L]``: the network's policy logits, illegal lines at -inf (its raw policy is the argmax)."""
    geometry = data.geometry
    model = network.PolicyValueNet(checkpoint.network_config)
    states = labelled.to_states(data)
    observations = jax.jit(jax.vmap(lambda s: env_lib.observe(geometry, s)))(states)
    dense = checkpoint.network_config.dense_heads
    logits = np.asarray(jax.jit(lambda o: model.apply(checkpoint.params, o, dense=dense))(observations)[0])
    return np.where(~data.lines, logits, -np.inf)


def solve_all(geometry, lines: np.ndarray, budget: float, shared_memo: bool) -> dict[str, np.ndarray]:
    """The solver's results for positions ``lines`` bool ``[N, L]``: ``seconds`` ``[N]``, ``finished`` ``[N]``,
    ``wins`` ``[N]`` (False where unfinished) and ``winning_moves`` ``[N, L]``; one solver for all positions
    (``shared_memo``) or a fresh one for each."""
    warm_up(geometry)
    shared = NimstringSolver(geometry) if shared_memo else None
    count = len(lines)
    out = {"seconds": np.zeros(count), "finished": np.zeros(count, bool), "wins": np.zeros(count, bool),
           "winning_moves": np.zeros(lines.shape, bool)}
    for i in range(count):
        solver = shared or NimstringSolver(geometry)
        result = solver.solve(lines[i], max_seconds=budget)
        out["seconds"][i] = result.seconds
        out["finished"][i] = result.finished
        out["wins"][i] = bool(result.wins)
        out["winning_moves"][i] = result.winning_moves
    return out


def warm_up(geometry) -> None:
    """Compiles (or loads) the solver's kernels, so that no position's time includes it."""
    NimstringSolver(geometry, table_bits=8).solve(np.ones(geometry.num_lines, bool))


def labelled_rows(name: str, data: labelled.LabelledSet, checkpoint, budget: float, shared_memo: bool) -> list[dict]:
    """One row of figures per move number of ``data``."""
    solved = solve_all(data.geometry, data.lines, budget, shared_memo)
    logits = policy_logits(checkpoint, data)
    index = np.arange(len(data))
    policy_move = logits.argmax(1)
    oracle_move = np.where(solved["winning_moves"], logits, -np.inf).argmax(1)
    has_winner = solved["finished"] & solved["winning_moves"].any(1)
    oracle_move = np.where(has_winner, oracle_move, policy_move)
    keeps = data.best_result & ~data.lines
    final = data.margin.astype(np.int64) + data.value.astype(np.int64)
    rows = []
    for move in np.unique(data.move_numbers):
        at = data.move_numbers == move
        done = at & solved["finished"]
        rows.append({
            "set": name, "board": data.geometry.name, "move": int(move), "positions": int(at.sum()),
            "median_s": float(np.median(solved["seconds"][at])),
            "p90_s": float(np.percentile(solved["seconds"][at], 90)),
            "finished": float(solved["finished"][at].mean()),
            "finished_1s": float((solved["finished"] & (solved["seconds"] <= FAST_SECONDS))[at].mean()),
            "agree_win": float((solved["wins"] == (final > 0))[done].mean()) if done.any() else float("nan"),
            "agree_not_loss": float((solved["wins"] == (final >= 0))[done].mean()) if done.any() else float("nan"),
            "nimstring_wins": float(solved["wins"][done].mean()) if done.any() else float("nan"),
            "raw_policy": float(keeps[index, policy_move][at].mean()),
            "oracle": float(keeps[index, oracle_move][at].mean()),
            "oracle_moves_differ": float((oracle_move != policy_move)[at].mean()),
            "counts": {"agree_win": int((solved["wins"] == (final > 0))[done].sum()),
                       "agree_not_loss": int((solved["wins"] == (final >= 0))[done].sum()),
                       "finished": int(done.sum()), "raw_policy": int(keeps[index, policy_move][at].sum()),
                       "oracle": int(keeps[index, oracle_move][at].sum())},
        })
    return rows


def timing_rows(rows_cols: tuple[int, int], moves: list[int], count: int, budget: float, seed: int,
                shared_memo: bool) -> list[dict]:
    """Timings only, on ``count`` positions sampled per move number as the labelled sets are (no labels)."""
    geometry = board_geometry(*rows_cols)
    positions = labelled.sample_positions(geometry, moves, count, seed=seed)
    solved = solve_all(geometry, positions["lines"], budget, shared_memo)
    rows = []
    for move in moves:
        at = positions["move_numbers"] == move
        if not at.any():
            continue
        rows.append({
            "set": "sampled (timing only)", "board": geometry.name, "move": int(move), "positions": int(at.sum()),
            "median_s": float(np.median(solved["seconds"][at])),
            "p90_s": float(np.percentile(solved["seconds"][at], 90)),
            "finished": float(solved["finished"][at].mean()),
            "finished_1s": float((solved["finished"] & (solved["seconds"] <= FAST_SECONDS))[at].mean()),
        })
    return rows


def pooled(rows: list[dict], key: str, total: str) -> float:
    """A share pooled over rows from their counts (``total``: the count it is a share of)."""
    hits = sum(row["counts"][key] for row in rows)
    base = sum(row["counts"][total] if total != "positions" else row["positions"] for row in rows)
    return hits / base if base else float("nan")


def table(rows: list[dict]) -> str:
    def cell(row, key, digits=3):
        value = row.get(key)
        return "" if value is None else f"{value:.{digits}f}"

    lines = ["| set | move | positions | median s | p90 s | finished | within 1 s | nimstring won | "
             "agree win/draw-or-loss | agree win-or-draw/loss | raw policy best-result | oracle best-result | "
             "oracle differs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['set']} ({row['board']}) | {row['move']} | {row['positions']} | "
                     f"{cell(row, 'median_s')} | {cell(row, 'p90_s')} | {cell(row, 'finished')} | "
                     f"{cell(row, 'finished_1s')} | {cell(row, 'nimstring_wins')} | {cell(row, 'agree_win')} | "
                     f"{cell(row, 'agree_not_loss')} | "
                     f"{cell(row, 'raw_policy')} | {cell(row, 'oracle')} | {cell(row, 'oracle_moves_differ')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", help="PATH:MOVES, a labelled set and its move numbers; "
                        f"repeatable (default: {' '.join(DEFAULT_SETS)})")
    parser.add_argument("--agent", help="the network of the raw policy (default: pretrained:RxC of each set)")
    parser.add_argument("--budget-seconds", type=float, default=5.0, help="solver time per position")
    parser.add_argument("--limit", type=int, default=100, help="positions per move number (at most)")
    parser.add_argument("--timing-moves", default="", help="5x5 move numbers to time on sampled positions, "
                        "e.g. 10,14,18 (none by default)")
    parser.add_argument("--timing-count", type=int, default=20, help="sampled positions per timing move")
    parser.add_argument("--seed", type=int, default=7, help="the sampling seed of --timing-moves")
    parser.add_argument("--shared-memo", action="store_true", help="one solver (and memo) per set, not per position")
    parser.add_argument("--out", help="write every figure to this JSON file")
    args = parser.parse_args(argv)
    rows = []
    for spec in args.set or DEFAULT_SETS:
        path, _, moves = spec.rpartition(":")
        if not path:
            parser.error(f"--set {spec!r} is not PATH:MOVES")
        data = labelled.load(path)
        keep = np.isin(data.move_numbers, parse_move_numbers(moves))
        for move in np.unique(data.move_numbers[keep]):
            extra = np.flatnonzero(data.move_numbers == move)[args.limit:]
            keep[extra] = False
        data = labelled.subset(data, keep)
        agent = args.agent or f"pretrained:{data.geometry.name}"
        checkpoint = agent_registry.load_network(agent, data.geometry)[0]
        start = time.perf_counter()
        rows += labelled_rows(path, data, checkpoint, args.budget_seconds, args.shared_memo)
        print(f"{path}: {len(data)} positions in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    if args.timing_moves:
        rows += timing_rows((5, 5), parse_move_numbers(args.timing_moves), args.timing_count, args.budget_seconds,
                            args.seed, args.shared_memo)
    print(table(rows))
    small = [row for row in rows if row["board"] == "4x4" and 12 <= row["move"] <= 15 and "counts" in row]
    verdict = {
        "oracle_best_result": pooled(small, "oracle", "positions"),
        "raw_policy_best_result": pooled(small, "raw_policy", "positions"),
        "agree_win": pooled(small, "agree_win", "finished"),
        "agree_not_loss": pooled(small, "agree_not_loss", "finished"),
    }
    go = verdict["oracle_best_result"] >= GO_SHARE or verdict["agree_win"] >= GO_SHARE
    fives = [row for row in rows if row["board"] == "5x5" and row["finished_1s"] >= 0.9]
    verdict["earliest_5x5_move_90pct_within_1s"] = min((row["move"] for row in fives), default=None)
    verdict["go"] = bool(go)
    print(f"\n4x4 moves 12-15 ({sum(row['positions'] for row in small)} positions): oracle best-result "
          f"{verdict['oracle_best_result']:.3f} (raw policy {verdict['raw_policy_best_result']:.3f}), agreement "
          f"win/draw-or-loss {verdict['agree_win']:.3f}, win-or-draw/loss {verdict['agree_not_loss']:.3f}; earliest "
          f"5x5 move with 90% within {FAST_SECONDS:g} s: {verdict['earliest_5x5_move_90pct_within_1s']}")
    print(f"verdict: {'GO' if go else 'NO-GO'} (oracle best-result share or win/draw-or-loss agreement >= "
          f"{GO_SHARE:.2f} at 4x4 moves 12-15)")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows, "verdict": verdict},
                                                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
