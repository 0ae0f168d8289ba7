"""The levers of middle-game strength on 4x4, each alone, at equal training minutes: one table.

    python benchmarks/lever_ablation.py --minutes 10 --seeds 0,1 --unseen results/4x4_unseen.npz
    python benchmarks/lever_ablation.py --rows baseline,dense --minutes 5 --seeds 0 --games 100
    python benchmarks/lever_ablation.py --rows capacity-32x4,capacity-64x4,capacity-32x8 --minutes 10
    python benchmarks/lever_ablation.py --table-only          # the table of what has run so far
    python benchmarks/lever_ablation.py --protocol restart --minutes 6 --seeds 0   # configs/4x4.yaml as it is

Two runs at a time, each on its own core (equal compute per run, twice the runs per hour on 2 cores):

    taskset -c 0 python benchmarks/lever_ablation.py --seeds 0 --unseen results/4x4_unseen.npz &
    taskset -c 1 python benchmarks/lever_ablation.py --seeds 1 --unseen results/4x4_unseen.npz &

Every row is ``configs/4x4.yaml`` as the ablations measured it (``PLAIN``: no dense targets, 4 blocks, lr 1e-3 and
a quarter of every batch from the exact labels; the config took the heads, 8 blocks, lr 3e-4 and a half after the
tables of docs/lab/training.md were measured), plus the protocol's overrides (``PROTOCOLS``), plus the row's
(``ROWS``), trained for ``--minutes`` of training time (self-play + learning; ``run.max_minutes``) with each seed
of ``--seeds``, one run after the other (run them alone on the machine, or one a core: the budget is wall time).
The self-play levers all start from the same warm start, the ``pretrained:4x4`` shipped until 2026-11-27 (graph
32x4, kept as ``benchmarks/agents/4x4-graph-32x4``; today's is the 32x8 network the capacity rows led to): the
heads of a network that has them start fresh on its trunk. The protocol ``continue`` (the default) goes on as that
agent itself was trained (lr 3e-4, half of every batch from the exact labels); ``restart`` is ``PLAIN``'s
training (lr 1e-3, a quarter), whose first minutes undo part of the warm start. A wider or deeper network cannot
take that warm start's weights, so the capacity rows (``capacity-*``) train their network on the built-in exact
labels (``dabjax pretrain --labels 4x4_train``) for ``--minutes`` from scratch instead, the size then shipped
(``capacity-32x4``) included: capacity is compared with capacity, at equal minutes. No protocol changes them (they
are run again under each protocol's folder).

Each run is then measured at ``--simulations`` simulations (64):

* the best-result share by move number on data/4x4.npz (minimum over moves 12-39 and mean), and on
  ``--unseen`` (a set no file of the project contains: ``dabjax label build --board 4x4 --moves 12-39
  --per-move 40 --exclude 4x4_train --seed 11 --out results/4x4_unseen.npz``);
* ``--games`` games head to head against that same agent (random openings, each side first in half).

The table gives, per row, the seeds' mean and their range for the shares, and the head-to-head record pooled
over the seeds with its Elo and 95% interval (``dabjax.evaluation.elo``), and the row's Elo less its
reference's (the baseline's; for a capacity row, the shipped size's) with the difference's interval (game noise
only: not the spread between training seeds). Everything a run measured is kept in
``OUT/ROW/seedS/ablation.json``: rerunning the command skips what is done, so a stopped ablation goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from dabjax.evaluation import elo

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The pretrained:4x4 of the ablations (graph 32x4, no dense heads, shipped until 2026-11-27), kept here so that the
# table stays reproducible now that pretrained:4x4 is the 32x8 network the capacity rows led to.
REFERENCE_AGENT = ROOT / "benchmarks" / "agents" / "4x4-graph-32x4"
OPPONENT = f"ckpt:{REFERENCE_AGENT}"
# configs/4x4.yaml as the ablations measured it, before it took the dense targets and 8 blocks: the rows add their
# levers (the protocols their learning rate and exact share).
PLAIN = ("network.dense_heads=false", "targets.ownership_weight=0", "targets.margin_weight=0", "network.blocks=4",
         "train.lr=0.001", "train.exact_share=0.25")
# Dense targets (KataGo: final ownership and final score as auxiliary heads).
DENSE = ("network.dense_heads=true", "targets.ownership_weight=0.5", "targets.margin_weight=0.5")
# (row name, overrides of configs/4x4.yaml + PLAIN, how it trains: "selfplay" from REFERENCE_AGENT, or "supervised"
# from scratch on the exact labels).
ROWS: dict[str, tuple[tuple[str, ...], str]] = {
    "baseline": ((), "selfplay"),
    "dense": (DENSE, "selfplay"),
    "capacity-32x4": (("network.width=32", "network.blocks=4"), "supervised"),
    "capacity-64x4": (("network.width=64", "network.blocks=4"), "supervised"),
    "capacity-32x8": (("network.width=32", "network.blocks=8"), "supervised"),
    # Deeper still: depth was the lever from 4 to 8 blocks (docs/lab/training.md, "Capacity at 30 minutes").
    "capacity-32x12": (("network.width=32", "network.blocks=12"), "supervised"),
    "capacity-32x16": (("network.width=32", "network.blocks=16"), "supervised"),
}
# The overrides every self-play row of a protocol shares.
PROTOCOLS: dict[str, tuple[str, ...]] = {
    "continue": ("train.lr=0.0003", "train.exact_share=0.5"),
    "restart": (),
}
RESULTS = "ablation.json"
REFERENCE_CAPACITY = "capacity-32x4"  # the size shipped when they ran, that the other capacity rows are compared with


def dabjax(*args: str, log: pathlib.Path) -> None:
    """``python -m dabjax ARGS``, its output appended to ``log``; fails loudly with the log's tail."""
    with open(log, "a") as out:
        out.write(f"$ dabjax {' '.join(args)}\n")
        out.flush()
        done = subprocess.run([sys.executable, "-m", "dabjax", *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"dabjax {' '.join(args[:2])} failed (exit {done.returncode}); the log's tail:\n{tail}")


def shares(accuracy_file: pathlib.Path) -> dict:
    rows = json.loads(accuracy_file.read_text())["rows"]
    by_move = {int(row["move"]): float(row["best_result"]) for row in rows}
    return dict(min=min(by_move.values()), mean=float(np.mean(list(by_move.values()))), by_move=by_move)


def run_row(name: str, seed: int, args) -> dict:
    """Trains and measures one (row, seed), skipping the steps its ``ablation.json`` already holds."""
    overrides, how = ROWS[name]
    run = args.out / name / f"seed{seed}"
    run.mkdir(parents=True, exist_ok=True)
    results_file = run / RESULTS
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    log = run / "log.txt"

    def save():
        results_file.write_text(json.dumps(results, indent=1))

    if "trained" not in results:
        if how == "selfplay":
            dabjax("train", "--config", "4x4", "--quiet", *PLAIN, *PROTOCOLS[args.protocol], *overrides,
                   f"run.dir={run / 'run'}", f"run.seed={seed}",
                   f"run.max_minutes={args.minutes}", f"run.init_from={REFERENCE_AGENT}", "eval.every=0",
                   "run.progress=false", log=log)
            rows = [json.loads(line) for line in (run / "run" / "metrics.jsonl").read_text().splitlines() if line]
            results["trained"] = dict(iterations=rows[-1]["iteration"], minutes=rows[-1]["time"] / 60,
                                      start_step=rows[-1]["start_step"])
        else:
            dabjax("pretrain", "--config", "4x4", "--labels", "4x4_train", "--minutes", str(args.minutes),
                   "--seed", str(seed), "--out", str(run / "run"), *PLAIN, *overrides, log=log)
            results["trained"] = dict(minutes=args.minutes)
        save()
    agent = f"ckpt:{run / 'run'}:{args.simulations}"
    sets = {"set": "data/4x4.npz"} | ({"unseen": str(args.unseen)} if args.unseen else {})
    for key, labelled in sets.items():
        if key not in results:
            dabjax("evaluate", "accuracy", "--set", labelled, "--agents", agent, "--out", str(run / f"accuracy_{key}"),
                   log=log)
            results[key] = shares(run / f"accuracy_{key}" / "accuracy.json")
            save()
    if "head_to_head" not in results and args.games:
        dabjax("evaluate", "arena", "--board", "4x4", "--agents", f"{agent},{OPPONENT}:{args.simulations}",
               "--games", str(args.games), "--seed", str(100 + seed), "--out", str(run / "arena"), log=log)
        pair = json.loads((run / "arena" / "arena.json").read_text())["pairs"][0]
        results["head_to_head"] = {k: pair[k] for k in ("wins", "draws", "losses", "games")}
        save()
    return results


def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{np.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def pooled_elo(records: list[dict]) -> tuple[int, int, int, float, float, float] | None:
    """(wins, draws, losses, Elo, 95% low, 95% high) of the records pooled, against the reference agent."""
    if not records:
        return None
    wins, draws, losses = (sum(r[k] for r in records) for k in ("wins", "draws", "losses"))
    return wins, draws, losses, *elo.pair_rating(wins, draws, losses)


def head_to_head(records: list[dict]) -> str:
    """The pooled record against the reference agent, its score and Elo with the 95% interval."""
    pooled = pooled_elo(records)
    if pooled is None:
        return "n/a"
    wins, draws, losses, rating, low, high = pooled
    score = (wins + draws / 2) / (wins + draws + losses)
    return f"{wins}-{draws}-{losses} ({score:.2f}), {rating:+.0f} Elo [{low:+.0f}, {high:+.0f}]"


def against_reference(records: list[dict], reference: list[dict]) -> str:
    """The row's Elo minus its reference row's (both against the reference agent, independent games), with the 95%
    interval of the difference from the two intervals (normal: half-widths added in quadrature)."""
    row, base = pooled_elo(records), pooled_elo(reference)
    if row is None or base is None:
        return "n/a"
    half = float(np.hypot((row[5] - row[4]) / 2, (base[5] - base[4]) / 2))
    delta = row[3] - base[3]
    return f"{delta:+.0f} [{delta - half:+.0f}, {delta + half:+.0f}]"


def table(out: pathlib.Path, rows: list[str]) -> str:
    def found_in(name):
        found = [json.loads(p.read_text()) for p in sorted((out / name).glob(f"seed*/{RESULTS}"))]
        return [r for r in found if "set" in r]

    def records_of(name):
        return [r["head_to_head"] for r in found_in(name) if "head_to_head" in r]

    lines = ["| row | seeds | data/4x4.npz min / mean | unseen min / mean | vs 4x4-graph-32x4 (pooled) "
             "| Elo vs its reference |",
             "|---|---:|---|---|---|---|"]
    for name in rows:
        found = found_in(name)
        if not found:
            continue
        cells = []
        for key in ("set", "unseen"):
            measured = [r[key] for r in found if key in r]
            cells.append(f"{spread([m['min'] for m in measured])} / {spread([m['mean'] for m in measured])}"
                         if measured else "n/a")
        records = records_of(name)
        # The self-play rows against the baseline, the capacity rows against the shipped size.
        reference = REFERENCE_CAPACITY if name.startswith("capacity-") else "baseline"
        relative = "" if name == reference else f"{against_reference(records, records_of(reference))} ({reference})"
        lines.append(f"| {name} | {len(found)} | {cells[0]} | {cells[1]} | {head_to_head(records)} | {relative} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="baseline,dense",
                        help=f"comma-separated rows, of {', '.join(ROWS)}")
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes per run (default 10)")
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    parser.add_argument("--simulations", type=int, default=64, help="simulations at play time (default 64)")
    parser.add_argument("--games", type=int, default=200,
                        help="games against the reference agent (the ablations' 32x4) per run (0: none)")
    parser.add_argument("--unseen", type=pathlib.Path, help="a labelled 4x4 set no file of the project contains")
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="continue",
                        help="the self-play rows' shared overrides (default continue: lr 3e-4, exact_share 0.5)")
    parser.add_argument("--out", type=pathlib.Path,
                        help="where the runs go (default runs/ablation-4x4-PROTOCOL)")
    parser.add_argument("--table-only", action="store_true", help="print the table of the runs done; run nothing")
    args = parser.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"--rows: unknown {unknown}; choose from {list(ROWS)}")
    if args.unseen is not None and not args.unseen.exists():
        parser.error(f"--unseen {args.unseen}: no such file (the docstring says how to build one)")
    if args.games % 2:
        parser.error("--games must be even (each side moves first in half)")
    args.out = (args.out or ROOT / "runs" / f"ablation-4x4-{args.protocol}").resolve()
    if not args.table_only:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        for name in rows:
            for seed in seeds:
                print(f"{name}, seed {seed}: {json.dumps(run_row(name, seed, args).get('set', {}).get('min'))}",
                      flush=True)
    print(table(args.out, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
