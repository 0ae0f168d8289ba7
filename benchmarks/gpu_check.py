"""The one-GPU check: the figures of the GPU recipe in one run of at most 9 minutes, printed as one table.

    bash scripts/gpu_check.sh results/gpu_check                 # on one GPU: makes the c5236b8 baseline checkout
    python benchmarks/gpu_check.py --out OUT --baseline DIR       # the same, DIR a checkout of the commit before
    python benchmarks/gpu_check.py --tiny --out /tmp/check       # the same steps on tiny sizes, on any backend

Steps, in the order of the table (each row names its step, what it measured and the figure):

1. host loops: the ``while``, ``cond`` and host callbacks in the jaxprs of self-play, the searching agent and
   learning (``benchmarks/host_loops.py``; no device needed);
2. the trainer bench (``benchmarks/trainer_throughput.py``) of ``configs/5x5.yaml``, each row a process of its
   own: the recipe at ``--baseline`` (commit c5236b8, mctx's while loops run from the host), today's default
   (while loops as XLA command buffers, ``dabjax.game.loops``), without command buffers
   (``DABJAX_COMMAND_BUFFERS=0``), the default at 8,192 and 16,384
   games (batch and steps scaled with the samples), with a 64-wide and an 8-block graph network (the recipe's
   is 32x4), 16,384 games learning in 4x fewer steps of 4x the batch, and 16,384 games with the settle and the
   endgame analysis on the whole batch (``search.lane_share=1``, not on lanes); positions/s of each against the first
   row that ran; then, for each row, the profiler's device-busy share of one more iteration, its largest gaps and
   its top kernels by time with how often each ran (``benchmarks/device_profile.py``, with command buffers on
   under the profiler as they run without it; the baseline checkout's bench has no profiler and reports its older host
   clock); ``--trainer-rows`` picks rows;
3. three training minutes of the recipe from its shipped warm start, then ``evaluate accuracy --set 5x5`` of the
   trained network at 64 simulations (best-result share at every move of the set);
4. environment throughput (lines drawn per second) and search throughput (simulations per second, pruned and
   unpruned), then learning throughput (``benchmarks/learning_steps.py``: the recipe's learning loop at batch
   1,024 and 4,096), in what is left of ``--minutes``.

A row that no longer fits the budget says "skipped for time". ``--tiny`` runs the same steps on the 2x2 and 3x3
boards with tiny sizes (the suite runs it on the CPU, so the check cannot rot). JAX's persistent compilation cache
is switched on under ``--out``. Every figure also goes to ``OUT/gpu_check.json``.
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
ROOT = BENCHMARKS.parent


def load_benchmark(name: str):
    """A sibling benchmark script as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the check measures: full (one GPU, at most 9 minutes) or tiny (the suite, on a CPU)."""

    env_board: str
    env_batches: tuple[int, ...]
    search_row: str  # BOARD:NETWORK of benchmarks/search_throughput.py
    search_batches: tuple[int, ...]
    search_simulations: int
    # (label, config, overrides, timed iterations, environment): each row a process of its own, as XLA_FLAGS is
    # read when the backend starts; "baseline" rows run the --baseline checkout.
    trainer_rows: tuple[tuple[str, str, tuple[str, ...], int, tuple[tuple[str, str], ...]], ...]
    training_config: str
    training_overrides: tuple[str, ...]
    accuracy_set: str
    accuracy_simulations: int
    learning_tiny: bool  # benchmarks/learning_steps.py --tiny, else the recipe's batches


NO_COMMAND_BUFFERS = ("DABJAX_COMMAND_BUFFERS", "0")  # XLA_FLAGS without command buffers
BASELINE_2048 = ("selfplay.games=2048",)  # c5236b8 knows no selfplay.memory_share
RECIPE_2048 = ("selfplay.games=2048", "selfplay.memory_share=0")
FULL = Plan(
    env_board="5x5", env_batches=(16384, 131072),
    search_row="5x5:graph", search_batches=(2048,), search_simulations=32,
    trainer_rows=(
        # The recipe before (mctx's while loops run from the host), then today's default (while loops as XLA
        # command buffers, dabjax.game.loops), then without command buffers.
        ("baseline: the recipe at --baseline (c5236b8), 2,048 games", "5x5", BASELINE_2048, 2, (("baseline", "1"),)),
        ("default (while loops + command buffers), 2,048 games", "5x5", RECIPE_2048, 2, ()),
        ("while loops, no command buffers, 2,048 games", "5x5", RECIPE_2048, 2, (NO_COMMAND_BUFFERS,)),
        # 4x and 8x the games with the same sample reuse, as selfplay.memory_share scales them
        # (dabjax.training.sizing.scaled_to_games): the learning steps grow with the games, the batch stays.
        ("default, 8,192 games", "5x5", ("selfplay.games=8192", "selfplay.memory_share=0",
                                         "train.max_steps_per_iteration=800"), 2, ()),
        ("default, 16,384 games", "5x5", ("selfplay.games=16384", "selfplay.memory_share=0",
                                          "train.max_steps_per_iteration=1600"), 2, ()),
        # The network sizes for the recipe (issue 46, capacity): once a move does not wait on the host, the
        # network's own cost decides what a wider (64x4) or deeper (32x8) graph network costs per position.
        # (From a fresh network: the shipped warm start is 32x4.)
        ("default, 2,048 games, graph network 64x4", "5x5", (*RECIPE_2048, "network.width=64", "run.init_from=null"),
         2, ()),
        ("default, 2,048 games, graph network 32x8", "5x5", (*RECIPE_2048, "network.blocks=8", "run.init_from=null"),
         2, ()),
        # Learning was half an iteration at 16,384 games on an H200 (1,600 steps of 1,024 at ~780 steps/s, the same
        # rate at every size): the same samples in 4x fewer, 4x larger steps, the rate by the square-root rule for
        # Adam (2x) and the restart period counted in samples (500 steps of 1,024 = 125 of 4,096).
        ("default, 16,384 games, 400 steps of 4,096", "5x5", ("selfplay.games=16384", "selfplay.memory_share=0",
                                                             "train.max_steps_per_iteration=400",
                                                             "train.batch_size=4096", "train.lr=0.002",
                                                             "train.restart_period=125"), 2, ()),
        # The settle and the endgame analysis on the whole batch (search.lane_share=1) rather than on a quarter of
        # its lanes (loops.on_lanes, the default 0.25): against the 16,384-game default row.
        ("16,384 games, loops on the whole batch (search.lane_share=1)", "5x5",
         ("selfplay.games=16384", "selfplay.memory_share=0", "train.max_steps_per_iteration=1600",
          "search.lane_share=1"), 2, ()),
    ),
    training_config="5x5", training_overrides=("run.max_minutes=3", "eval.every=0"),
    accuracy_set="5x5", accuracy_simulations=64, learning_tiny=False,
)

TINY = Plan(
    env_board="3x3", env_batches=(64,),
    search_row="3x3:mlp", search_batches=(8,), search_simulations=4,
    trainer_rows=(
        ("baseline: smoke at --baseline", "smoke", ("train.loop=compiled",), 1, (("baseline", "1"),)),
        ("default (smoke)", "smoke", ("train.loop=compiled",), 1, ()),
        ("no command buffers (smoke)", "smoke", ("train.loop=compiled",), 1, (NO_COMMAND_BUFFERS,)),
        ("default, 4x the games", "smoke", ("train.loop=compiled", "selfplay.games=32",
                                            "train.max_steps_per_iteration=16"), 1, ()),
    ),
    training_config="3x3",
    training_overrides=("run.iterations=2", "run.max_minutes=0", "eval.every=0", "selfplay.games=8",
                        "search.num_simulations=4", "train.max_steps_per_iteration=2", "network.width=16"),
    accuracy_set="3x3", accuracy_simulations=4, learning_tiny=True,
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


def learning_rows(plan: Plan, out: pathlib.Path, results: dict, seconds: float) -> list[tuple[str, str, str]]:
    """benchmarks/learning_steps.py for the recipe's learning (batch 1,024 and 4,096), in a process of its own,
    within ``seconds``."""
    if seconds < 30:
        return [("learning", "steps", "skipped for time")]
    figures_file = out / "learning_steps.json"
    command = [sys.executable, str(BENCHMARKS / "learning_steps.py"), "--json", str(figures_file)]
    command += ["--tiny"] if plan.learning_tiny else ["--config", "5x5", "--batch-sizes", "1024", "4096",
                                                      "--steps", "50"]
    try:
        subprocess.run(command, check=True, stdout=sys.stderr, timeout=seconds)
    except subprocess.TimeoutExpired:
        return [("learning", "steps", "not finished within the check's time")]
    figures = json.loads(figures_file.read_text())
    results["learning"] = figures
    return [("learning", f"{figures['config']} batch {row['batch']:,}: steps/s, samples/s",
             f"{row['steps_per_s']:.1f}, {row['samples_per_s']:,.0f}") for row in figures["rows"]]


def search_rows(plan: Plan, out: pathlib.Path, results: dict, seconds: float) -> list[tuple[str, str, str]]:
    """benchmarks/search_throughput.py for the plan's network, in a process of its own, within ``seconds``."""
    if seconds < 30:
        return [("search", plan.search_row, "skipped for time")]
    board, _, net_name = plan.search_row.partition(":")
    figures_file = out / "search.json"
    command = [sys.executable, str(BENCHMARKS / "search_throughput.py"), "--rows", plan.search_row,
               "--batch-sizes", *map(str, plan.search_batches), "--simulations", str(plan.search_simulations),
               "--repeats", "2", "--json", str(figures_file)]
    if net_name == "graph":
        command += ["--max-depth", "6"]  # as configs/5x5.yaml searches
    try:
        subprocess.run(command, check=True, stdout=sys.stderr, timeout=seconds)
    except subprocess.TimeoutExpired:
        return [("search", plan.search_row, "not finished within the check's time")]
    rows = []
    for row in json.loads(figures_file.read_text()):
        results.setdefault("search", []).append(row)
        pruned, unpruned = row["pruned_sims_per_s"], row["unpruned_sims_per_s"]
        rows.append(("search", f"{plan.search_row} batch {row['batch']:,}, {plan.search_simulations} sims: "
                     "sims/s pruned / unpruned (ratio)", f"{pruned:,.0f} / {unpruned:,.0f} ({pruned / unpruned:.2f})"))
    return rows


def trainer_rows(plan: Plan, out: pathlib.Path, results: dict, seconds: float,
                 baseline: pathlib.Path | None, numbers: list[int] | None = None,
                 profile: bool = True) -> list[tuple[str, str, str]]:
    """benchmarks/trainer_throughput.py for each of the plan's rows (or those of the 1-based ``numbers``, in
    that order), each in a process of its own, within ``seconds``; a row that no longer fits is skipped and says
    so; ``profile`` false skips the profiled iteration. Ratios: positions/s against the first row that ran (the
    baseline checkout, when there is one)."""
    from dabjax.game import loops

    deadline = time.perf_counter() + seconds
    rows, profiled = [], []
    for index in [number - 1 for number in numbers] if numbers else range(len(plan.trainer_rows)):
        label, config, overrides, iterations, environment = plan.trainer_rows[index]
        environment = dict(environment)
        root = ROOT
        if environment.pop("baseline", None):
            if baseline is None:
                rows.append(("trainer", label, "skipped: no --baseline checkout"))
                continue
            root = baseline
        left = deadline - time.perf_counter()
        if left < 20:
            rows.append(("trainer", label, "skipped for time"))
            continue
        figures_file = out / f"trainer_{index}.json"
        command = [sys.executable, str(root / "benchmarks" / "trainer_throughput.py"), "--config", config,
                   "--iterations", str(iterations), "--json", str(figures_file)]
        if not profile and root == ROOT:  # the baseline checkout's bench has no profiler (nor the flag)
            command.append("--no-profile")
        command += overrides
        # The checkout first, then what the caller's PYTHONPATH holds (packages installed with --target, say).
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
        env.pop(loops.COMMAND_BUFFERS_VARIABLE, None)  # a row's own environment alone decides
        env.update(environment)
        if root != ROOT or environment.get(NO_COMMAND_BUFFERS[0]) == NO_COMMAND_BUFFERS[1]:
            # No command buffers at all (dabjax's, which this process put in XLA_FLAGS, or the caller's): the
            # baseline ran without them.
            env["XLA_FLAGS"] = " ".join(flag for flag in env.get("XLA_FLAGS", "").split()
                                        if not flag.startswith(loops.COMMAND_BUFFER_OPTION))
        try:
            subprocess.run(command, check=True, cwd=root, env=env, stdout=sys.stderr, timeout=left)
        except subprocess.TimeoutExpired:
            rows.append(("trainer", label, "not finished within the check's time"))
            continue
        except subprocess.CalledProcessError as error:
            rows.append(("trainer", label, f"FAILED: exit {error.returncode} (see the log)"))
            continue
        figures = json.loads(figures_file.read_text())
        results.setdefault("trainer", []).append(dict(label=label, environment=environment, **figures))
        m = figures["median"]
        rows.append(("trainer", f"{label}: s/iteration (play + learn), compile s",
                     f"{m['seconds']:.2f} ({m['selfplay_seconds']:.2f} + {m['train_seconds']:.2f}), "
                     f"{figures['compile_seconds']:.0f}"))
        rows.append(("trainer", f"{label}: positions/s, sims/s", f"{m['positions_per_s']:,.0f}, "
                     f"{m['simulations_per_s']:,.0f}"))
        rows.append(("trainer", f"{label}: steps/s, samples/s", f"{m['steps_per_s']:.1f}, {m['samples_per_s']:,.0f}"))
        rows.append(("trainer", f"{label}: {host_clock_title(m)}", host_clock_figures(m)))
        if figures.get("profile"):
            profiled.append(("profiler", f"{label}: one iteration, device busy share (wall s); largest gaps",
                             profile_figures(figures["profile"])))
            profiled.append(("profiler", f"{label}: top kernels, time (count) in one iteration",
                             kernel_figures(figures["profile"])))
    benches = results.get("trainer", [])
    for other in benches[1:]:  # the target: positions/s against the first row (the recipe before)
        ratio = other["median"]["positions_per_s"] / benches[0]["median"]["positions_per_s"]
        rows.append(("trainer", f"{other['label']} / {benches[0]['label']}: positions/s", f"{ratio:.2f}x"))
    return rows + profiled


def share(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def host_clock_title(median: dict) -> str:
    """The host clock's columns: dispatch and ready seconds, or a checkout's older ``host_seconds``."""
    if "dispatch_seconds" in median:
        return "dispatch s, ready s, busy (nvidia-smi)"
    return "host s (dispatch and waits inside it), busy (nvidia-smi)"


def host_clock_figures(median: dict) -> str:
    if "dispatch_seconds" in median:
        return (f"{median['dispatch_seconds']:.3f}, {median['ready_seconds']:.3f}, "
                f"{share(median.get('smi_busy_share'))}")
    return f"{median['host_seconds']:.3f}, {share(median.get('busy_share'))}"


def profile_figures(profile: dict) -> str:
    gaps = ", ".join(f"{seconds * 1e3:.1f} ms" for seconds, _ in profile["gaps"]) or "none"
    return f"{profile['busy_share']:.2f} ({profile['wall_seconds']:.2f} s); {gaps}"


def kernel_figures(profile: dict, count: int = 5) -> str:
    """The profiled iteration's top kernels by total time, each with how often it ran; a bench of an older
    checkout, whose profile lists none, says so."""
    kernels = profile.get("kernels") or []
    return "; ".join(f"{name} {seconds * 1e6:,.0f} µs ({calls}x)" for name, seconds, calls in kernels[:count]) or "n/a"


def host_loop_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """benchmarks/host_loops.py for the plan's training config: the while loops, cond branches and host callbacks
    of each program (host callbacks: 0)."""
    host_loops = load_benchmark("host_loops")
    from dabjax.training import config as config_lib

    config = config_lib.load_config(plan.training_config, list(plan.training_overrides))
    counts = host_loops.count(config)
    text = ", ".join(f"{name} {sum(1 for kind, _ in found if kind in ('while', 'cond'))} / "
                     f"{len(host_loops.host_callbacks(found))}" for name, found in counts.items())
    return [("host loops", f"{plan.training_config}: while + cond / host callbacks (jaxpr)", text)]


def training_rows(plan: Plan, out: pathlib.Path, results: dict) -> list[tuple[str, str, str]]:
    from dabjax.cli import evaluate as evaluate_cli
    from dabjax.runs import train_boxeszero
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
        ("training", f"{plan.training_config} from its warm start: games (from the memory), iterations, training "
         "minutes, st, wall s",
         f"{last['games']:,}, {last['iteration']}, {last['time'] / 60:.1f}, {last['start_step']}, {seconds:.0f}"),
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
    parser.add_argument("--out", type=pathlib.Path, help="folder for the run, the JSON and logs (required)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the suite's CPU run)")
    parser.add_argument("--minutes", type=float, default=9.0,
                        help="the check's budget (default 9): the trainer rows get what the training leaves, the "
                             "environment and search steps (last) what is left after them")
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="a checkout of the commit to compare with (scripts/gpu_check.sh makes one of c5236b8)")
    parser.add_argument("--trainer-rows", type=int, nargs="+", metavar="N",
                        help="run only these trainer rows, in this order (1-based, as --list-rows numbers them)")
    parser.add_argument("--list-rows", action="store_true", help="print the trainer rows, numbered, and stop")
    parser.add_argument("--no-profile", action="store_true",
                        help="no profiled iteration after each trainer row (a large GPU trace takes a while)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["host-loops", "trainer", "training", "environment", "search", "learning"],
                        help="steps to leave out")
    args = parser.parse_args(argv)
    plan = TINY if args.tiny else FULL
    if args.list_rows:
        for number, (label, config, overrides, _, environment) in enumerate(plan.trainer_rows, 1):
            print(f"{number}. {label}: {config} {' '.join(overrides)}"
                  f"{''.join(f' {k}={v}' for k, v in environment)}")
        return 0
    if args.out is None:
        parser.error("--out is required")
    bad = [n for n in args.trainer_rows or [] if not 1 <= n <= len(plan.trainer_rows)]
    if bad:
        parser.error(f"--trainer-rows: no row {bad[0]}; the rows are 1..{len(plan.trainer_rows)} (--list-rows)")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(args.out / "jax-cache"))
    import jax

    import dabjax  # noqa: F401  (its command buffers go into XLA_FLAGS before the backend starts)

    device = jax.devices()[0]
    results: dict = dict(device=device.device_kind, backend=jax.default_backend(), jax=jax.__version__,
                         tiny=args.tiny)
    rows = [("device", "device, backend, JAX", f"{device.device_kind}, {jax.default_backend()}, {jax.__version__}")]
    began = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - began

    # In the order of the table: the loop counts (no device), the trainer rows (the baseline, command buffers,
    # more games, network sizes) in what the training leaves, the training and its accuracy, then the
    # environment and search throughput in what is left.
    training_seconds = 0.0 if "training" in args.skip else (60.0 if args.tiny else 270.0)
    steps = [("host-loops", lambda: host_loop_rows(plan)),
             ("trainer", lambda: trainer_rows(plan, args.out, results,
                                              60.0 * args.minutes - training_seconds - elapsed(), args.baseline,
                                              args.trainer_rows, not args.no_profile)),
             ("training", lambda: training_rows(plan, args.out, results)),
             ("environment", lambda: environment_rows(plan) if 60.0 * args.minutes - elapsed() > 30 else
              [("environment", "all", "skipped for time")]),
             ("search", lambda: search_rows(plan, args.out, results, 60.0 * args.minutes - elapsed())),
             ("learning", lambda: learning_rows(plan, args.out, results, 60.0 * args.minutes - elapsed()))]
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
    return 1 if any(what == "FAILED" or figure.startswith("FAILED") for _, what, figure in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
