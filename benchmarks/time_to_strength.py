"""Time to strength from nothing: what a config buys in N minutes of training, with no warm start.

    python benchmarks/time_to_strength.py --config 3x3 --minutes 3 6 9 12 15 --out results/tts_3x3
    python benchmarks/time_to_strength.py --config 4x4 --minutes 10 20 30 45 60 --out results/tts_4x4 \
        --set 4x4 --set results/4x4_unseen.npz network.kind=transformer network.width=64 network.blocks=4
    python benchmarks/time_to_strength.py --config 5x5_scratch --minutes 2 4 8 --out results/tts_5x5   # a GPU
    python benchmarks/time_to_strength.py --config smoke --minutes 0.05 0.1 --out /tmp/tts --tiny        # tests

It trains the config (``train.py --config CONFIG``, with ``run.init_from=null`` and ``train.exact_labels=null``:
nothing learned before the run, no solver labels mixed in; the trailing ``KEY=VALUE`` overrides go to every stage)
in stages: the run stops when its training time (self-play and learning, summed over resumptions, not evaluation)
passes each ``--minutes`` mark, and its newest checkpoint is scored there before the run resumes. So each point is
the network as it stood after that many training minutes (a run stops at the end of the iteration that passes the
mark: the point's minutes are the run's own count). The score of a checkpoint (``ckpt:RUN:SIMS``, ``--simulations``
a move, default the config's evaluation setting):

* the best-result share on each ``--set`` (default the board's built-in one), by move group (``--groups``: the
  set's moves in that many equal groups), and its lowest move;
* Elo against the fixed ``--anchor`` (default ``level2``) from ``--games`` games (two random opening moves each),
  with its 95% interval.

Each point's network is kept as an agent folder, ``OUT/agents/m<MARK>`` (what ``ckpt:`` plays). It writes
``OUT/strength.json`` (rewritten after each point) and ``OUT/strength.png`` (the curves: one panel of best-result
shares by move group, one of Elo), and prints a table. A rerun with the same ``--out`` resumes the run; points
already scored are kept. ``--no-score`` only trains and keeps the agents (on a lent GPU, whose minutes go to
training): a later run without it, on any machine, scores them. Wall time: the minutes, plus the first compile of
every stage, plus the scoring. Run it alone for comparable curves.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

import jax
import numpy as np

from dabjax import package_data
from dabjax.evaluation import agent_registry, arena, elo, pretrained
from dabjax.runs import run_dir as run_dir_lib
from dabjax.solvers import labelled
from dabjax.training import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def stage_command(config: str, run_dir: pathlib.Path, minutes: float, overrides: list[str]) -> list[str]:
    """The ``train.py`` command of the stage that ends at ``minutes`` of training time."""
    return [sys.executable, str(ROOT / "train.py"), "--config", config, f"run.dir={run_dir}",
            "run.init_from=null", "train.exact_labels=null", f"run.max_minutes={minutes:g}",
            "run.iterations=1000000", "run.progress=false", *overrides]


def trained_minutes(run_dir: pathlib.Path) -> tuple[int, float]:
    """``(iteration, training minutes)`` of the run's last metrics row."""
    rows = run_dir_lib.read_metrics(run_dir)
    if not rows:
        raise RuntimeError(f"{run_dir} has no metrics: the stage did not train")
    return int(rows[-1]["iteration"]), float(rows[-1].get("time", 0.0)) / 60.0


def run_figures(run_dir: pathlib.Path) -> dict:
    """What the run's metrics say of its throughput: searched positions a second of self-play, the learning share
    of the training time, and the training minute the curriculum first reached start step 0 (None: not yet)."""
    rows = run_dir_lib.read_metrics(run_dir)
    selfplay = sum(r.get("selfplay_seconds", 0.0) for r in rows)
    learning = sum(r.get("train_seconds", 0.0) for r in rows)
    at_zero = [r for r in rows if r.get("start_step") == 0]
    return {"iterations": len(rows),
            "searched_positions_per_s": sum(r.get("searched_positions", 0) for r in rows) / max(selfplay, 1e-9),
            "learning_share": learning / max(selfplay + learning, 1e-9),
            "start_step_0_minute": at_zero[0]["time"] / 60.0 if at_zero else None}


def best_result_groups(accuracy: labelled.Accuracy, groups: int) -> dict:
    """The best-result share of a set's moves in ``groups`` equal groups (position-weighted), and its lowest move."""
    moves, shares, counts = accuracy.move_numbers, accuracy.best_result, accuracy.count
    parts = np.array_split(np.arange(len(moves)), min(groups, len(moves)))
    return {"groups": [f"{moves[p[0]]}-{moves[p[-1]]}" for p in parts],
            "shares": [float(np.average(shares[p], weights=counts[p])) for p in parts],
            "lowest": float(shares.min()), "lowest_move": int(moves[shares.argmin()])}


def score(spec: str, sets: dict, anchor: str, games: int, groups: int, seed: int) -> dict:
    """The figures of one checkpoint: best-result groups on each set and Elo against ``anchor``."""
    point = {"sets": {}}
    key = jax.random.PRNGKey(seed)
    for name, data in sets.items():
        agent = agent_registry.make_agent(spec, data.geometry)
        point["sets"][name] = best_result_groups(labelled.accuracy_by_move_number(agent, data, key), groups)
    geometry = next(iter(sets.values())).geometry
    agents = agent_registry.make_agents([spec, anchor], geometry)
    (pair,) = arena.play_pairings(geometry, agents, [(spec, anchor)], key, games, opening_moves=2)
    result = pair.result
    rating, low, high = elo.pair_rating(result.wins, result.draws, result.losses)
    point.update(elo=rating, elo_low=low, elo_high=high, score=result.score, games=result.games)
    return point


def plot(points: list[dict], title: str, path: pathlib.Path) -> pathlib.Path:
    """Two panels over training minutes: best-result share by set and move group, and Elo against the anchor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    minutes = [p["minutes"] for p in points]
    for set_name in points[0]["sets"]:
        for g, group in enumerate(points[0]["sets"][set_name]["groups"]):
            left.plot(minutes, [p["sets"][set_name]["shares"][g] for p in points], marker="o",
                      label=f"{set_name} moves {group}")
    left.set(xlabel="training minutes", ylabel="best-result share", ylim=(0, 1.02), title="best-result share")
    left.axhline(0.95, color="grey", lw=0.8, ls="--")
    left.legend(fontsize=7)
    elos = np.array([p["elo"] for p in points])
    right.errorbar(minutes, elos, yerr=[elos - [p["elo_low"] for p in points], [p["elo_high"] for p in points] - elos],
                   marker="o", capsize=3)
    right.set(xlabel="training minutes", ylabel=f"Elo against {points[0]['anchor']} (0)", title="Elo")
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a built-in config name or a YAML path")
    parser.add_argument("--minutes", type=float, nargs="+", required=True, help="training-minute marks, increasing")
    parser.add_argument("--out", required=True, help="folder for the run, strength.json and strength.png")
    parser.add_argument("--set", action="append", default=[], help="labelled set to score on, repeatable "
                        "(default: the board's built-in set)")
    parser.add_argument("--anchor", default="level2", help="the fixed opponent rated 0 (default level2)")
    parser.add_argument("--games", type=int, default=100, help="games against the anchor a point (even)")
    parser.add_argument("--groups", type=int, default=3, help="move groups of each set")
    parser.add_argument("--simulations", type=int, help="simulations a move when scoring (default: the "
                        "config's eval.num_simulations)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-score", action="store_true", help="train and keep the agents only; score later")
    parser.add_argument("--tiny", action="store_true", help="no subprocess output shown (tests)")
    args, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"unknown arguments {bad}: overrides are KEY=VALUE")
    if list(args.minutes) != sorted(args.minutes) or min(args.minutes) <= 0:
        parser.error("--minutes must be positive and increasing")
    if args.games < 2 or args.games % 2:
        parser.error("--games must be even and at least 2")
    config = config_lib.load_config(config_lib.config_path(args.config), overrides)
    board = f"{config.board.rows}x{config.board.cols}"
    set_names = [] if args.no_score else (args.set or [board])  # --no-score needs no set (a board may have none)
    sets = {name: labelled.load(package_data.labelled_set_file(name)) for name in set_names}
    for name, data in sets.items():
        if (data.rows, data.cols) != (config.board.rows, config.board.cols):
            parser.error(f"--set {name} is {data.rows}x{data.cols}, the config's board {board}")
    simulations = args.simulations or config.eval.num_simulations
    out = pathlib.Path(args.out).resolve()  # the stages run in the repository's root
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    results_path = out / "strength.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {
        "config": args.config, "overrides": overrides, "anchor": args.anchor, "simulations": simulations,
        "points": []}
    points = {p["mark"]: p for p in results["points"]}
    for mark in args.minutes:
        if mark not in points:
            command = stage_command(args.config, run_dir, mark, overrides)
            print(f"training to {mark:g} min: {' '.join(command[1:])}", flush=True)
            completed = subprocess.run(command, cwd=ROOT, capture_output=args.tiny, text=True)
            if completed.returncode != 0:
                raise SystemExit(f"the stage to {mark:g} min failed (exit {completed.returncode})"
                                 + (f":\n{completed.stderr[-2000:]}" if args.tiny else ""))
            iteration, minutes = trained_minutes(run_dir)
            agent = out / "agents" / f"m{mark:g}"
            pretrained.save_agent_folder(agent, pretrained.load_source(str(run_dir)),
                                         {"method": f"{args.config} from scratch", "training_minutes": minutes,
                                          "overrides": overrides})
            # Relative to OUT, so that the folder scores elsewhere (a GPU's agents, scored on a CPU).
            points[mark] = {"mark": mark, "minutes": minutes, "iteration": iteration,
                            "agent": str(agent.relative_to(out))}
            results["points"] = sorted(points.values(), key=lambda p: p["mark"])
            results_path.write_text(json.dumps(results, indent=1))
        point = points[mark]
        if args.no_score or "elo" in point:
            continue
        point.update(anchor=args.anchor, **score(f"ckpt:{out / point['agent']}:{simulations}", sets, args.anchor,
                                                  args.games, args.groups, args.seed))
        results_path.write_text(json.dumps(results, indent=1))
        shares = "  ".join(f"{name} {' / '.join(f'{s:.2f}' for s in figures['shares'])} (lowest {figures['lowest']:.2f}"
                           f" at {figures['lowest_move']})" for name, figures in point["sets"].items())
        print(f"{point['minutes']:6.1f} min, iteration {point['iteration']}: {shares}; Elo {point['elo']:+.0f} "
              f"[{point['elo_low']:+.0f}, {point['elo_high']:+.0f}] against {args.anchor}", flush=True)
    if run_dir.is_dir():  # not where only the agents came (scored elsewhere)
        results["run"] = run_figures(run_dir)
        figures = results["run"]
        at_zero = figures["start_step_0_minute"]
        print(f"the run: {figures['iterations']} iterations, {figures['searched_positions_per_s']:,.0f} searched "
              f"positions/s in self-play, learning {figures['learning_share']:.0%} of the training time, start "
              "step 0 " + (f"at {at_zero:.1f} min" if at_zero is not None else "not reached"))
        results_path.write_text(json.dumps(results, indent=1))
    scored = [p for p in results["points"] if "elo" in p]
    if not scored:
        print(f"wrote {results_path} (agents kept, not scored)")
        return results
    title = f"{args.config} from scratch{' ' + ' '.join(overrides) if overrides else ''}, {simulations} simulations"
    results["png"] = str(plot(scored, title, out / "strength.png"))
    results_path.write_text(json.dumps(results, indent=1))
    print(f"wrote {results_path} and {results['png']}")
    return results


if __name__ == "__main__":
    main()
