"""The shipping rule as one command: does a candidate agent replace a shipped one?

    python benchmarks/ship_check.py --board 4x4 --candidate ckpt:runs/my-agent --shipped pretrained:4x4 \\
        --set 4x4 --set results/4x4_unseen.npz --set results/4x4_unseen_large.npz --games 400 --out runs/ship-check

The rule a shipped agent is replaced by (docs/training.md, "Shipping an agent"): the candidate **beats it head
to head** (over ``--games`` games from random openings, each side first in half, the 95% interval of its Elo
against the shipped agent lies above 0) and is **no weaker at any move**: pooled over every ``--set`` (labelled
sets: a built-in name or a file, ideally ones no training file contains), at every move number the candidate
plays at least as many best-result moves as the shipped agent. Both play at ``--simulations`` simulations (64,
the shipped agents' setting).

It runs ``dabjax evaluate accuracy`` on each set (both agents in one call, so on the same positions) and
``dabjax evaluate arena`` once, keeps their outputs under ``--out`` (``accuracy_K/``, ``arena/``; a rerun skips
what is there, so a stopped check goes on) and prints the per-move table, the head-to-head record and the
verdict, also written to ``OUT/ship_check.json``. The "no weaker" half is the rule as written, with no
allowance for noise: the table gives each move's difference so a reader can see which misses are one position.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dabjax.evaluation import elo  # noqa: E402

RESULTS = "ship_check.json"


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


def pooled_by_move(accuracy_files: list[pathlib.Path], agents: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """``{agent: {move: (best-result moves, positions)}}`` summed over the ``accuracy.json`` files of
    ``dabjax evaluate accuracy`` (a share times its positions is a whole count of positions)."""
    pooled: dict[str, dict[int, tuple[int, int]]] = {agent: {} for agent in agents}
    for path in accuracy_files:
        for row in json.loads(pathlib.Path(path).read_text())["rows"]:
            if row["agent"] not in pooled:
                continue
            move, positions = int(row["move"]), int(row["positions"])
            best, seen = pooled[row["agent"]].get(move, (0, 0))
            pooled[row["agent"]][move] = (best + round(float(row["best_result"]) * positions), seen + positions)
    for agent, moves in pooled.items():
        if not moves:
            raise ValueError(f"no accuracy rows for {agent!r} in {[str(p) for p in accuracy_files]}")
    return pooled


def weaker_moves(pooled: dict[str, dict[int, tuple[int, int]]], candidate: str, shipped: str) -> list[int]:
    """The move numbers where the candidate plays fewer best-result moves than the shipped agent."""
    if set(pooled[candidate]) != set(pooled[shipped]):
        raise ValueError("the two agents were measured on different move numbers")
    return sorted(move for move in pooled[candidate] if pooled[candidate][move][0] < pooled[shipped][move][0])


def head_to_head(wins: int, draws: int, losses: int) -> dict:
    """The candidate's record against the shipped agent: its score and Elo with the 95% interval."""
    rating, low, high = elo.pair_rating(wins, draws, losses)
    return dict(wins=wins, draws=draws, losses=losses, score=(wins + draws / 2) / (wins + draws + losses),
                elo=rating, low=low, high=high)


def verdict(weaker: list[int], record: dict) -> tuple[bool, list[str]]:
    """``(ships, reasons it does not)`` under the rule: beats the shipped agent, no weaker at any move."""
    reasons = []
    if record["low"] <= 0:
        reasons.append(f"does not beat the shipped agent head to head (Elo {record['elo']:+.0f}, 95% interval "
                       f"[{record['low']:+.0f}, {record['high']:+.0f}] not above 0)")
    if weaker:
        reasons.append(f"weaker at move{'s' if len(weaker) > 1 else ''} {', '.join(map(str, weaker))}")
    return not reasons, reasons


def table(pooled: dict[str, dict[int, tuple[int, int]]], candidate: str, shipped: str) -> str:
    lines = ["| move | positions | candidate | shipped | difference |", "|---:|---:|---:|---:|---:|"]
    for move in sorted(pooled[candidate]):
        (best, positions), (base, _) = pooled[candidate][move], pooled[shipped][move]
        lines.append(f"| {move} | {positions} | {best} ({best / positions:.3f}) | {base} ({base / positions:.3f}) "
                     f"| {best - base:+d} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", required=True, help="the board of the sets and of the games, e.g. 4x4")
    parser.add_argument("--candidate", required=True, help="the agent that would ship (ckpt:PATH, pretrained:RxC)")
    parser.add_argument("--shipped", required=True, help="the agent shipped today (e.g. pretrained:4x4)")
    parser.add_argument("--set", action="append", dest="sets", required=True,
                        help="a labelled set to measure both on (repeat; pooled by move number)")
    parser.add_argument("--simulations", type=int, default=64, help="simulations at play time (default 64)")
    parser.add_argument("--games", type=int, default=400, help="games head to head (even; default 400)")
    parser.add_argument("--seed", type=int, default=21, help="the arena's seed (openings and search keys)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for the outputs (a rerun resumes)")
    args = parser.parse_args(argv)
    if args.games <= 0 or args.games % 2:
        parser.error(f"--games must be even and positive (each side first in half), got {args.games}")
    if args.simulations <= 0:
        parser.error(f"--simulations must be positive, got {args.simulations}")
    for name in ("candidate", "shipped"):
        spec = getattr(args, name)
        if spec.count(":") > 1 and spec.rsplit(":", 1)[1].isdigit():
            parser.error(f"--{name} {spec!r} names its simulations: --simulations sets both agents'")

    candidate, shipped = f"{args.candidate}:{args.simulations}", f"{args.shipped}:{args.simulations}"
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "log.txt"
    accuracy_files = []
    for index, labelled in enumerate(args.sets):
        folder = args.out / f"accuracy_{index}"
        if not (folder / "accuracy.json").exists():
            dabjax("evaluate", "accuracy", "--set", labelled, "--board", args.board, "--agents",
                   f"{candidate},{shipped}", "--out", str(folder), log=log)
        accuracy_files.append(folder / "accuracy.json")
    arena = args.out / "arena" / "arena.json"
    if not arena.exists():
        dabjax("evaluate", "arena", "--board", args.board, "--agents", f"{candidate},{shipped}", "--games",
               str(args.games), "--seed", str(args.seed), "--out", str(arena.parent), log=log)
    pair = json.loads(arena.read_text())["pairs"][0]

    pooled = pooled_by_move(accuracy_files, [candidate, shipped])
    weaker = weaker_moves(pooled, candidate, shipped)
    record = head_to_head(pair["wins"], pair["draws"], pair["losses"])
    ships, reasons = verdict(weaker, record)
    print(f"{candidate} against {shipped}, pooled over {', '.join(args.sets)}:")
    print(table(pooled, candidate, shipped))
    print(f"head to head: {record['wins']}-{record['draws']}-{record['losses']} (score {record['score']:.3f}), "
          f"Elo {record['elo']:+.0f} [{record['low']:+.0f}, {record['high']:+.0f}]")
    print("verdict: ships" if ships else "verdict: does not ship: " + "; ".join(reasons))
    (args.out / RESULTS).write_text(json.dumps(dict(
        candidate=candidate, shipped=shipped, sets=args.sets, head_to_head=record, weaker_moves=weaker,
        ships=ships, reasons=reasons,
        by_move={str(move): dict(positions=pooled[candidate][move][1], candidate=pooled[candidate][move][0],
                                 shipped=pooled[shipped][move][0]) for move in sorted(pooled[candidate])}),
        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
