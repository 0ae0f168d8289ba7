"""Learning efficiency: BoxesZero against AlphaZero on one board under the same training-time budget.

    python benchmarks/learning_efficiency.py                 # 3x3: 15 minutes each, sequentially
    python benchmarks/learning_efficiency.py --board 4x4 --checkpoint-every 50 --eval-minutes 10,20,30,40,50
    python benchmarks/learning_efficiency.py --board 5x5 --modes boxeszero --checkpoint-every 50
    python benchmarks/learning_efficiency.py --minutes 5 --checkpoint-every 3
    python benchmarks/learning_efficiency.py --eval-minutes 2,4,6,8,10,12,15   # evaluate fewer checkpoints
    # the paper's protocol (search per position; 1024 simulations take ~0.1 s here), existing runs only:
    python benchmarks/learning_efficiency.py --eval-only --eval-minutes 12.5,15.1 \
        eval.num_simulations=1024 eval.batch_size=50 "eval.opponents=[]"

Trains the board's configs (``BOARDS``: configs/3x3.yaml for ``boxeszero`` and configs/3x3_alphazero.yaml for
``alphazero`` on 3x3, configs/4x4*.yaml on 4x4, configs/5x5_cpu.yaml on 5x5) one after the other, each for
``--minutes`` of training time (default: the config's ``run.max_minutes``; self-play + learning; evaluation is
done afterwards and does not count), keeping a checkpoint every ``--checkpoint-every`` iterations. Then every
checkpoint is evaluated with search at play time (``eval.num_simulations``, no Gumbel noise): the share of
best-result moves by move number on the labelled set data/<board>.npz, and the win rate against the level-2
agent. ``--plot PATH`` draws the learning curves (minimum and mean accuracy, win rate) as a PNG, with every mode
of the board evaluated so far (each run directory keeps its figures in ``efficiency.json``).

Target (issue 6): the BoxesZero default plays a best-result move in at least 95% of positions at every move
number within 15 minutes, sooner than AlphaZero. Existing run directories are reused (resumed up to the
budget; after a change of the shipped configs' network they fail with the checkpoint's network error);
pass --fresh to start over. ``--eval-only`` trains nothing and evaluates exactly the checkpoints that
``--eval-minutes`` picks (no final one) with each run's own config.yaml plus the overrides, e.g. with more
simulations at play time. The win rate needs ``eval.opponents`` to include level2 (the default here);
``"eval.opponents=[]"`` skips the games.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import shutil

import jax
import numpy as np

from dabjax.cli import train as train_cli
from dabjax.runs import train_boxeszero
from dabjax.training import checkpoint
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
BOARDS = {
    "3x3": {"boxeszero": "configs/3x3.yaml", "alphazero": "configs/3x3_alphazero.yaml"},
    "4x4": {"boxeszero": "configs/4x4.yaml", "alphazero": "configs/4x4_alphazero.yaml"},
    "5x5": {"boxeszero": "configs/5x5_cpu.yaml"},
}
TARGET = 0.95
RESULTS_FILE = "efficiency.json"  # a mode's evaluated checkpoints, in its run directory (for later plots)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="3x3", choices=sorted(BOARDS))
    parser.add_argument("--minutes", type=float, help="training minutes per mode (default: the config's)")
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--runs-dir", help="default: runs/efficiency (3x3) or runs/efficiency-<board>")
    parser.add_argument("--modes", help="comma-separated: boxeszero,alphazero (default: the board's configs)")
    parser.add_argument("--plot", help="write the learning curves to this PNG")
    parser.add_argument("--eval-games", type=int, default=200)
    parser.add_argument("--eval-minutes", default="",
                        help="comma-separated training minutes: evaluate only the last checkpoint at or before each "
                             "(and the final one); default: every checkpoint")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--eval-only", action="store_true",
                        help="train nothing; evaluate the checkpoints --eval-minutes picks in existing runs")
    parser.add_argument("--plot-only", action="store_true",
                        help="train and evaluate nothing; plot the figures saved by earlier evaluations (--plot)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides applied to both configs")
    args = parser.parse_intermixed_args()
    configs = BOARDS[args.board]
    modes = [m.strip() for m in (args.modes or ",".join(configs)).split(",") if m.strip()]
    unknown = [m for m in modes if m not in configs]
    if unknown:
        parser.error(f"--modes: unknown {unknown} on {args.board}; choose from {list(configs)}")
    runs_dir = args.runs_dir or ("runs/efficiency" if args.board == "3x3" else f"runs/efficiency-{args.board}")

    if args.eval_only and not args.eval_minutes.strip():
        parser.error("--eval-only needs --eval-minutes")
    if args.plot_only and not args.plot:
        parser.error("--plot-only needs --plot")
    if args.plot_only:
        modes = []

    summary = {}
    for mode in modes:
        run_dir = pathlib.Path(runs_dir) / mode
        if args.fresh and run_dir.exists() and not args.eval_only:
            shutil.rmtree(run_dir)
        overrides = [
            f"run.dir={run_dir}", *([f"run.max_minutes={args.minutes}"] if args.minutes else []),
            "run.iterations=100000", "eval.every=0", f"run.checkpoint_every={args.checkpoint_every}",
            "run.keep_checkpoints=100000", f"eval.games={args.eval_games}", "eval.opponents=[level2]",
            f"eval.labelled_set=data/{args.board}.npz", *args.overrides,
        ]
        # --eval-only evaluates runs as they were trained: their own resolved config (network included),
        # so runs made before a change of the shipped configs still load.
        config_path = run_dir / "config.yaml" if args.eval_only else ROOT / configs[mode]
        if not config_path.is_file():
            parser.error(f"--eval-only: {run_dir} holds no run (no config.yaml)")
        config = config_lib.load_config(str(config_path), overrides)
        if not args.eval_only:
            print(f"=== training {mode} for {config.run.max_minutes} min of training time in {run_dir}", flush=True)
            train_cli.train(config, quiet=False)

        print(f"=== evaluating {mode}'s checkpoints", flush=True)
        # Evaluation only: the trainer's static half without the exact labels a config may mix into training.
        plain = dataclasses.replace(config, train=dataclasses.replace(config.train, exact_labels=None))
        evaluator = train_boxeszero.periodic_evaluation(trainer_lib.Trainer(plain))
        rows = []
        for iteration, path, wall_time in checkpoints_to_evaluate(run_dir, args.eval_minutes, not args.eval_only):
            played = checkpoint.load_for_play(path)
            results = evaluator(played.params, jax.random.PRNGKey(iteration))
            accuracy = np.array(results["eval/best_result_by_move"])
            win_rate = results.get("eval/win_rate_vs_level2", float("nan"))
            rows.append({"iteration": iteration, "minutes": wall_time / 60, "start_step": played.meta.get("start_step"),
                         "best_result_min": float(accuracy.min()), "best_result_mean": float(accuracy.mean()),
                         "best_result_by_move": accuracy.tolist(), "win_rate_vs_level2": float(win_rate)})
            print(f"{mode:>9} it {iteration:>4} {wall_time / 60:6.2f} min st {played.meta.get('start_step'):>2} "
                  f"best-result min {accuracy.min():.3f} mean {accuracy.mean():.3f} "
                  f"win vs level2 {win_rate:.2f}", flush=True)
        summary[mode] = rows
        if rows and not args.eval_only:
            (run_dir / RESULTS_FILE).write_text(json.dumps(rows, indent=1))

    if summary:
        print("\n=== summary (training minutes; accuracy = share of best-result moves, min over move numbers)")
    for mode, rows in summary.items():
        reached = next((r for r in rows if r["best_result_min"] >= TARGET), None)
        last = rows[-1]
        when = f"{reached['minutes']:.2f} min (iteration {reached['iteration']})" if reached else "not reached"
        print(f"{mode:>9}: >= {TARGET:.0%} at every move number: {when}; final ({last['minutes']:.2f} min, "
              f"iteration {last['iteration']}): min {last['best_result_min']:.3f}, "
              f"mean {last['best_result_mean']:.3f}, win vs level2 {last['win_rate_vs_level2']:.2f}")
        print(f"{'':>9}  final accuracy by move number: " + " ".join(f"{a:.2f}" for a in last["best_result_by_move"]))
    if args.plot:
        # Modes evaluated by an earlier invocation (their run directory keeps the figures) join the plot.
        for mode in configs:
            saved = pathlib.Path(runs_dir) / mode / RESULTS_FILE
            if mode not in summary and saved.is_file():
                summary[mode] = json.loads(saved.read_text())
        print(f"wrote {plot_curves(summary, args.board, args.plot)}")


def plot_curves(summary: dict, board: str, path) -> pathlib.Path:
    """The learning curves of every mode (minimum and mean best-result share, win rate against level 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for mode, rows in summary.items():
        minutes = [r["minutes"] for r in rows]
        line = axes[0].plot(minutes, [r["best_result_min"] for r in rows], marker="o",
                            label=f"{mode} (min over moves)")[0]
        axes[0].plot(minutes, [r["best_result_mean"] for r in rows], linestyle="--", color=line.get_color(),
                     label=f"{mode} (mean)")
        axes[1].plot(minutes, [r["win_rate_vs_level2"] for r in rows], marker="o", label=mode)
    axes[0].axhline(TARGET, color="grey", linewidth=0.8)
    axes[0].set(xlabel="training minutes", ylabel="best-result share", title=f"{board}: best-result moves")
    axes[1].set(xlabel="training minutes", ylabel="win rate", title=f"{board}: win rate against level 2",
                ylim=(0, 1.02))
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def checkpoints_to_evaluate(run_dir, eval_minutes: str, final: bool = True) -> list[tuple[int, pathlib.Path, float]]:
    """Every checkpoint, or for each of the comma-separated training minutes the last checkpoint saved at or
    before it, plus (with ``final``) the final checkpoint; in order, without repeats."""
    saved = checkpoint.list_checkpoints(run_dir)
    if not eval_minutes.strip() or not saved:
        return saved
    chosen = {saved[-1][0]} if final else set()
    for minutes in (float(m) for m in eval_minutes.split(",") if m.strip()):
        before = [entry for entry in saved if entry[2] <= minutes * 60.0]
        if before:
            chosen.add(before[-1][0])
    return [entry for entry in saved if entry[0] in chosen]


if __name__ == "__main__":
    main()
