"""The one-GPU check: every figure of the GPU recipe in one run of at most 8 minutes, printed as one table.

    python benchmarks/gpu_check.py --out results/gpu_check        # on one GPU (scripts/gpu_check.sh wraps it)
    python benchmarks/gpu_check.py --tiny --out /tmp/check          # the same steps on tiny sizes, on any backend

Steps (each row of the table names its step, what it measured and the figure; they run in the order 1, 3, 4, 2,
the search getting what is left of ``--minutes``):

1. environment throughput (lines drawn per second, ``benchmarks/env_throughput.py``) at GPU batch sizes;
2. search throughput (simulations per second, Gumbel, pruned and unpruned: their ratio is the cost of the
   endgame and chain analysis, ``benchmarks/search_throughput.py``) of the recipe's graph network at GPU batch
   sizes, with the analysis loops as while-loops and with a fixed trip count (``DABJAX_LOOPS=bounded``): the
   difference is what the while-loops cost on the device;
3. the trainer bench (``benchmarks/trainer_throughput.py``) for ``configs/5x5.yaml`` (the recipe), for the
   recipe before it (the paper-sized ResNet as ``configs/5x5.yaml`` had it: fp32, learning steps in a host loop)
   and for the CPU recipe given 2,048 games (``configs/5x5_cpu.yaml`` with the overrides measured in
   docs/gpu.md), each after its compiling iteration;
4. a short ``configs/5x5.yaml`` training from its shipped warm start, then ``evaluate accuracy --set 5x5`` of the
   trained network at 64 simulations (best-result share at every move of the set).

``--tiny`` runs the same steps on the 2x2 and 3x3 boards with tiny sizes (the suite runs it on the CPU, so the
check cannot rot). JAX's persistent compilation cache is switched on under ``--out`` so that the training reuses
the trainer bench's compiles. Every figure also goes to ``OUT/gpu_check.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

BENCHMARKS = pathlib.Path(__file__).resolve().parent


def load_benchmark(name: str):
    """A sibling benchmark script as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the check measures: full (one GPU, at most 8 minutes) or tiny (the suite, on a CPU)."""

    env_board: str
    env_batches: tuple[int, ...]
    search_row: str  # BOARD:NETWORK of benchmarks/search_throughput.py
    search_batches: tuple[int, ...]
    search_simulations: int
    trainer_rows: tuple[tuple[str, str, tuple[str, ...], int], ...]  # (label, config, overrides, timed iterations)
    training_config: str
    training_overrides: tuple[str, ...]
    accuracy_set: str
    accuracy_simulations: int


FULL = Plan(
    env_board="5x5", env_batches=(16384, 131072),
    search_row="5x5:graph", search_batches=(2048,), search_simulations=32,
    trainer_rows=(
        ("recipe (configs/5x5.yaml)", "5x5", (), 3),
        # 25 s an iteration on an H200: one timed iteration.
        ("before: ResNet 160x6 fp32, host loop", "5x5_resnet", ("network.dtype=float32", "train.loop=host"), 1),
        ("CPU recipe, 2,048 games", "5x5_cpu", ("selfplay.games=2048", "train.batch_size=1024",
                                                 "train.max_steps_per_iteration=200", "train.loop=host"), 2),
    ),
    training_config="5x5", training_overrides=("run.max_minutes=2", "eval.every=0"),
    accuracy_set="5x5", accuracy_simulations=64,
)

TINY = Plan(
    env_board="3x3", env_batches=(64,),
    search_row="3x3:mlp", search_batches=(8,), search_simulations=4,
    trainer_rows=(
        ("recipe (smoke)", "smoke", ("train.loop=compiled",), 1),
        ("before: host loop", "smoke", ("train.loop=host",), 1),
    ),
    training_config="3x3",
    training_overrides=("run.iterations=2", "run.max_minutes=0", "eval.every=0", "selfplay.games=8",
                        "search.num_simulations=4", "train.max_steps_per_iteration=2", "network.width=16"),
    accuracy_set="3x3", accuracy_simulations=4,
)


def environment_rows(plan: Plan) -> list[tuple[str, str, str]]:
    env_throughput = load_benchmark("env_throughput")
    from dabjax.game.geometry import parse_board_size
    rows = []
    for batch in plan.env_batches:
        figures = env_throughput.dabjax_figures(*parse_board_size(plan.env_board), batch, repeats=2)
        rows.append(("environment", f"{plan.env_board} batch {batch:,}: lines/s natural / random games",
                     f"{figures['natural']:.3g} / {figures['games']:.3g}"))
    return rows


def search_rows(plan: Plan, out: pathlib.Path, results: dict, seconds: float) -> list[tuple[str, str, str]]:
    """benchmarks/search_throughput.py for the plan's network, once with the analysis loops as while-loops and
    once with a fixed trip count (``DABJAX_LOOPS``, read at import: a process each), within ``seconds``."""
    deadline = time.perf_counter() + seconds
    rows = []
    board, _, net_name = plan.search_row.partition(":")
    for loops in ("while", "bounded"):
        figures_file = out / f"search_{loops}.json"
        command = [sys.executable, str(BENCHMARKS / "search_throughput.py"), "--rows", plan.search_row,
                   "--batch-sizes", *map(str, plan.search_batches), "--simulations", str(plan.search_simulations),
                   "--repeats", "2", "--json", str(figures_file)]
        if net_name == "graph":
            command += ["--max-depth", "6"]  # as configs/5x5.yaml searches
        try:
            subprocess.run(command, check=True, env=dict(os.environ, DABJAX_LOOPS=loops), stdout=sys.stderr,
                           timeout=max(30.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            rows.append(("search", f"{plan.search_row}, {loops} loops", "not finished within the check's time"))
            continue
        for row in json.loads(figures_file.read_text()):
            results.setdefault("search", []).append(row)
            pruned, unpruned = row["pruned_sims_per_s"], row["unpruned_sims_per_s"]
            rows.append(("search", f"{plan.search_row} batch {row['batch']:,}, {plan.search_simulations} sims, "
                         f"{loops} loops: sims/s pruned / unpruned (ratio)",
                         f"{pruned:,.0f} / {unpruned:,.0f} ({pruned / unpruned:.2f})"))
    return rows


def trainer_rows(plan: Plan, results: dict) -> list[tuple[str, str, str]]:
    trainer_throughput = load_benchmark("trainer_throughput")
    rows = []
    for label, config, overrides, iterations in plan.trainer_rows:
        figures = trainer_throughput.measure(config, list(overrides), iterations, out=sys.stderr)
        results.setdefault("trainer", []).append(dict(label=label, **figures))
        m = figures["median"]
        busy = "n/a" if m["busy_share"] is None else f"{m['busy_share']:.2f}"
        rows.append(("trainer", f"{label}: s/iteration (play + learn), compile s",
                     f"{m['seconds']:.2f} ({m['selfplay_seconds']:.2f} + {m['train_seconds']:.2f}), "
                     f"{figures['compile_seconds']:.0f}"))
        rows.append(("trainer", f"{label}: positions/s, sims/s", f"{m['positions_per_s']:,.0f}, "
                     f"{m['simulations_per_s']:,.0f}"))
        rows.append(("trainer", f"{label}: steps/s, samples/s, host s, busy (nvidia-smi)",
                     f"{m['steps_per_s']:.1f}, {m['samples_per_s']:,.0f}, {m['host_seconds']:.3f}, {busy}"))
    benches = results["trainer"]
    for other in benches[1:]:  # the first target: positions/s against the recipes before
        ratio = benches[0]["median"]["positions_per_s"] / other["median"]["positions_per_s"]
        rows.append(("trainer", f"recipe / {other['label']}: positions/s", f"{ratio:.2f}x"))
    return rows


def training_rows(plan: Plan, out: pathlib.Path, results: dict) -> list[tuple[str, str, str]]:
    from dabjax.cli import evaluate as evaluate_cli
    from dabjax.cli import train_boxeszero
    from dabjax.training import config as config_lib

    run_dir = out / "training"
    config = config_lib.load_config(plan.training_config, [*plan.training_overrides, f"run.dir={run_dir}",
                                                           "run.progress=false"])
    began = time.perf_counter()
    last = train_boxeszero.train(config, quiet=True)
    seconds = time.perf_counter() - began
    accuracy_dir = out / "accuracy"
    with contextlib.redirect_stdout(sys.stderr):  # its own table: the check prints one
        evaluate_cli.main(["accuracy", "--set", plan.accuracy_set, "--agents",
                           f"ckpt:{run_dir}:{plan.accuracy_simulations}", "--out", str(accuracy_dir)])
    accuracy = json.loads((accuracy_dir / "accuracy.json").read_text())
    by_move = {row["move"]: row["best_result"] for row in accuracy["rows"]}
    results["training"] = dict(last_metrics={k: v for k, v in last.items() if not isinstance(v, list)},
                               seconds=seconds, best_result_by_move=by_move)
    weakest = min(by_move, key=by_move.get)
    return [
        ("training", f"{plan.training_config} from its warm start: iterations, training minutes, st, wall s",
         f"{last['iteration']}, {last['time'] / 60:.1f}, {last['start_step']}, {seconds:.0f}"),
        ("accuracy", f"best-result share on {plan.accuracy_set} at {plan.accuracy_simulations} sims: mean, "
         "weakest move", f"{accuracy['overall_best_result'][next(iter(accuracy['overall_best_result']))]:.3f}, "
         f"{by_move[weakest]:.2f} (move {weakest})"),
        ("accuracy", "by move", " ".join(f"{move}:{share:.2f}" for move, share in sorted(by_move.items()))),
    ]


def print_table(rows: list[tuple[str, str, str]], file=sys.stdout) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for step, what, figure in rows:
        print(f"{step:<{widths[0]}}  {what:<{widths[1]}}  {figure}", file=file)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for the run, the JSON and logs")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the suite's CPU run)")
    parser.add_argument("--minutes", type=float, default=8.0,
                        help="the check's budget: the search step (last) gets what is left (default 8)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["environment", "search", "trainer", "training"],
                        help="steps to leave out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(args.out / "jax-cache"))
    import jax

    plan = TINY if args.tiny else FULL
    device = jax.devices()[0]
    results: dict = dict(device=device.device_kind, backend=jax.default_backend(), jax=jax.__version__,
                         tiny=args.tiny)
    rows = [("device", "device, backend, JAX", f"{device.device_kind}, {jax.default_backend()}, {jax.__version__}")]
    began = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - began

    # The search runs last, in what is left of the budget: the trainer figures and the training matter most.
    steps = [("environment", lambda: environment_rows(plan)), ("trainer", lambda: trainer_rows(plan, results)),
             ("training", lambda: training_rows(plan, args.out, results)),
             ("search", lambda: search_rows(plan, args.out, results, 60.0 * args.minutes - elapsed()))]
    for name, step in steps:
        if name in args.skip:
            continue
        started = time.perf_counter()
        try:
            new_rows = step()
        except Exception as error:  # one failed step must not cost the others' figures
            new_rows = [(name, "FAILED", f"{type(error).__name__}: {error}")]
        rows += new_rows
        rows.append((name, "step seconds", f"{time.perf_counter() - started:.0f}"))
        print(f"[{time.perf_counter() - began:.0f} s] {name} done", file=sys.stderr, flush=True)
    rows.append(("total", "seconds", f"{time.perf_counter() - began:.0f}"))
    results["table"] = rows
    (args.out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str))
    print_table(rows)
    return 1 if any(what == "FAILED" for _, what, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
