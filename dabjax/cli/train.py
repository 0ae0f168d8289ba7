"""``python train.py``: train, resume, or sweep. The imperative shell around ``dabjax.trainer``.

    python train.py                                   # the CPU default: 3x3 BoxesZero
    python train.py --config configs/3x3.yaml train.lr=3e-4 run.dir=runs/try
    python train.py --config configs/3x3_alphazero.yaml
    python train.py --sweep configs/sweeps/3x3_ablation.yaml

A run directory holds ``config.yaml`` (the resolved config), ``metrics.jsonl`` (one JSON object per
iteration), ``tb/`` (TensorBoard event files) and ``checkpoints/<iteration>/`` (orbax, last k kept).
Running the same command again on an existing run directory resumes from its latest checkpoint; a run
killed between checkpoints loses only the iterations after the last one (their metrics lines are dropped
so the log matches the state). Ctrl-C saves a checkpoint before exiting.

Sweep files (YAML): ``base`` (a config file, optional), ``overrides`` (applied to every run, optional), and
either ``grid`` (``key: [values]``, every combination) or ``runs`` (a list of ``{name: ..., overrides:
[...]}``). Each run goes to ``<sweep run.dir>/<name>``, one after another, and a summary table follows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import sys
import time

import jax
from tqdm import tqdm

from dabjax import checkpoint, config as config_lib, trainer as trainer_lib

# With no --config, the shipped CPU default when this is a clone of the repository, else the built-ins.
DEFAULT_CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "3x3.yaml"
DEFAULT_RUN_DIR = "runs/3x3-boxeszero"


# --- run directory I/O ----------------------------------------------------------------------------------


class MetricsLog:
    """``metrics.jsonl`` plus TensorBoard scalars."""

    def __init__(self, run_dir: pathlib.Path, resume_iteration: int):
        self.path = run_dir / "metrics.jsonl"
        self._truncate_after(resume_iteration)
        self._file = self.path.open("a")
        try:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"))
        except ImportError:  # TensorBoard logging is optional; the JSONL log is not
            self._tb = None

    def _truncate_after(self, iteration: int) -> None:
        """Drops lines of iterations after the checkpoint we resume from (they will be redone)."""
        if not self.path.exists():
            return
        kept = [
            line for line in self.path.read_text().splitlines()
            if line.strip() and json.loads(line).get("iteration", 0) <= iteration
        ]
        self.path.write_text("".join(line + "\n" for line in kept))

    def write(self, metrics: dict) -> None:
        self._file.write(json.dumps(metrics) + "\n")
        self._file.flush()
        if self._tb is not None:
            step = metrics["iteration"]
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "iteration":
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(run_dir) -> list[dict]:
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _save(store: checkpoint.CheckpointStore, trainer: trainer_lib.Trainer, state) -> None:
    trainer_part = state.replace(train_state=state.train_state.replace(params={}))
    store.save(int(state.iteration), state.train_state.params, trainer_part, trainer.meta(state))


def _restore(store: checkpoint.CheckpointStore, trainer: trainer_lib.Trainer, fresh, iteration: int):
    meta = store.read_meta(iteration)
    checkpoint.check_compatible(
        meta, trainer.geometry.rows, trainer.geometry.cols, trainer.network_config, store.directory / str(iteration)
    )
    params_target = fresh.train_state.params
    trainer_target = fresh.replace(train_state=fresh.train_state.replace(params={}))
    params, restored, _ = store.restore(iteration, params_target, trainer_target)
    return restored.replace(train_state=restored.train_state.replace(params=params))


# --- one run --------------------------------------------------------------------------------------------


def train(config: config_lib.TrainConfig, quiet: bool = False) -> dict:
    """Trains (or resumes) one run to ``run.iterations`` or ``run.max_minutes``; returns its last metrics."""
    trainer_lib.validate_eval_opponents(config)
    run_dir = pathlib.Path(config.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = trainer_lib.Trainer(config)
    evaluator = trainer_lib.Evaluator(trainer) if config.eval.every else None
    store = checkpoint.CheckpointStore(run_dir, keep=config.run.keep_checkpoints)
    primary = jax.process_index() == 0  # several processes: only process 0 writes logs and messages
    quiet = quiet or not primary
    fresh = trainer.init_state()
    latest = store.latest_iteration()
    try:
        state = fresh if latest is None else _restore(store, trainer, fresh, latest)
    except ValueError:
        store.close()
        raise
    if primary:
        _write_config(run_dir, config, quiet=quiet)
    start_iteration = int(state.iteration)
    log = MetricsLog(run_dir, start_iteration) if primary else None
    say = (lambda *a: None) if quiet else (lambda text: tqdm.write(text))
    say(
        f"{'resuming' if latest is not None else 'starting'} {config.mode} on "
        f"{trainer.geometry.name} at iteration {start_iteration}, st={int(state.start_step)}; run dir {run_dir}; "
        f"backend {jax.default_backend()}"
    )
    # The budget counts training time (self-play and learning, summed over resumptions), not evaluation.
    budget = config.run.max_minutes * 60 if config.run.max_minutes else math.inf
    metrics: dict = {}
    bar = tqdm(
        total=config.run.iterations, initial=start_iteration, disable=quiet or not config.run.progress,
        unit="it", dynamic_ncols=True,
    )
    eval_key = jax.random.PRNGKey(config.run.seed + 1)
    try:
        while int(state.iteration) < config.run.iterations and float(state.wall_time) < budget:
            state, metrics = trainer.iteration(state)
            iteration = metrics["iteration"]
            metrics["time"] = float(state.wall_time)
            if evaluator is not None and iteration % config.eval.every == 0:
                eval_key, sub = jax.random.split(eval_key)
                metrics.update(evaluator(state.train_state.params, sub))
            if log is not None:
                log.write(metrics)
            if iteration % config.run.checkpoint_every == 0:
                _save(store, trainer, state)
            bar.set_postfix(
                st=metrics["start_step"], gps=f"{metrics['games_per_s']:.0f}", loss=f"{metrics['loss']:.3f}",
                mqr=f"{metrics['mqr']:.2f}", nvr=f"{metrics['nvr']:.2f}",
                **({"acc": f"{metrics['eval/best_result_min']:.2f}"} if "eval/best_result_min" in metrics else {}),
            )
            bar.update(1)
            if metrics.get("advanced"):
                say(f"iteration {iteration}: st {metrics['start_step']} -> {metrics['next_start_step']}")
    except KeyboardInterrupt:
        say("interrupted: saving a checkpoint")
    finally:
        bar.close()
        if latest is None or int(state.iteration) > latest:
            if store.latest_iteration() != int(state.iteration):
                _save(store, trainer, state)
        store.close()
        if log is not None:
            log.close()
    say(f"done: iteration {int(state.iteration)}, st={int(state.start_step)}; checkpoints in {store.directory}")
    return metrics


def _write_config(run_dir: pathlib.Path, config: config_lib.TrainConfig, quiet: bool) -> None:
    path = run_dir / "config.yaml"
    text = config_lib.to_yaml(config)
    if path.exists() and path.read_text() != text:
        previous = run_dir / f"config.{time.strftime('%Y%m%d-%H%M%S')}.yaml"
        path.rename(previous)  # keep the old settings: nothing silently lost
        if not quiet:
            tqdm.write(f"config differs from the run's previous one; the old one is kept as {previous.name}")
    path.write_text(text)


# --- sweeps ---------------------------------------------------------------------------------------------


def sweep_runs(sweep_path) -> tuple[list[tuple[str, list[str]]], str | None]:
    """``([(name, overrides)], base config path)`` from a sweep file."""
    from omegaconf import OmegaConf

    path = pathlib.Path(sweep_path)
    if not path.is_file():
        raise config_lib.ConfigError(f"sweep file {str(path)!r} does not exist")
    spec = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(spec, dict):
        raise config_lib.ConfigError(f"sweep file {str(path)!r} must be a mapping")
    unknown = set(spec) - {"base", "overrides", "grid", "runs"}
    if unknown:
        raise config_lib.ConfigError(f"sweep file {str(path)!r}: unknown keys {sorted(unknown)}")
    if ("grid" in spec) == ("runs" in spec):
        raise config_lib.ConfigError(f"sweep file {str(path)!r} needs exactly one of 'grid' or 'runs'")
    common = [str(x) for x in spec.get("overrides", [])]
    runs = []
    if "grid" in spec:
        keys = list(spec["grid"])
        for values in itertools.product(*(spec["grid"][k] for k in keys)):
            name = "_".join(f"{k.split('.')[-1]}={v}" for k, v in zip(keys, values))
            runs.append((name, common + [f"{k}={v}" for k, v in zip(keys, values)]))
    else:
        for i, run in enumerate(spec["runs"]):
            if not isinstance(run, dict) or "overrides" not in run:
                raise config_lib.ConfigError(f"sweep run #{i} needs 'overrides' (and optionally 'name')")
            runs.append((str(run.get("name", f"run{i}")), common + [str(x) for x in run["overrides"]]))
    base = spec.get("base")
    if base is not None:
        base = str((path.parent / base) if not pathlib.Path(base).is_file() else base)
    return runs, base


def run_sweep(sweep_path, config_path, overrides: list[str], quiet: bool = False) -> list[tuple[str, dict]]:
    runs, base = sweep_runs(sweep_path)
    config_path = config_path or base
    root = config_lib.load_config(config_path, overrides).run.dir
    # Validate every run first, so a bad entry fails before hours of training.
    configs = [
        (name, config_lib.load_config(config_path, run_overrides + overrides + [f"run.dir={root}/{name}"]))
        for name, run_overrides in runs
    ]
    results = []
    for name, config in configs:
        if not quiet:
            tqdm.write(f"=== sweep run {name}: {config.run.dir}")
        results.append((name, train(config, quiet=quiet)))
    print(summary_table(results))
    return results


def summary_table(results: list[tuple[str, dict]]) -> str:
    columns = ["iteration", "start_step", "loss", "value_loss", "mqr", "nvr", "time"]
    evals = sorted({k for _, m in results for k in m if k.startswith("eval/") and not isinstance(m[k], list)})
    header = ["run"] + columns + evals
    rows = [header]
    for name, metrics in results:
        row = [name]
        for key in columns + evals:
            value = metrics.get(key, "")
            row.append(f"{value:.3f}" if isinstance(value, float) else str(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


# --- entry point ----------------------------------------------------------------------------------------


def start_distributed(coordinator: str, num_processes: int, process_id: int) -> None:
    """Joins a multi-process run (``jax.distributed``): every process runs the same command with its own
    ``--process-id``; the mesh then spans every device of every process. On CPUs the collectives go
    through gloo."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # affects the CPU backend only
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)


def _yaml_mode(path) -> str | None:
    """The ``mode`` a config file names, if it is readable YAML (errors are reported by the loader)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.load(path).get("mode")
    except Exception:  # unreadable files fail later with a proper message
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", help="YAML config (default: the built-in 3x3 CPU config)")
    parser.add_argument("--sweep", help="YAML sweep file: run several configs one after another")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--coordinator", help="several hosts: HOST:PORT of process 0 (jax.distributed)")
    parser.add_argument("--num-processes", type=int, help="several hosts: how many processes in all")
    parser.add_argument("--process-id", type=int, help="several hosts: this process's index (0 = primary)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.lr=3e-4 run.dir=runs/x")
    # Intermixed: options may come before or after the key=value overrides.
    args = parser.parse_intermixed_args(argv)
    if args.coordinator or args.num_processes or args.process_id is not None:
        if not (args.coordinator and args.num_processes and args.process_id is not None):
            parser.error("--coordinator, --num-processes and --process-id go together")
        start_distributed(args.coordinator, args.num_processes, args.process_id)
    if args.config and _yaml_mode(args.config) == "td":
        # Temporal-difference learning (seed 003) has its own trainer and config schema.
        from dabjax.cli import train_td

        return train_td.main(argv)
    config_path, base = args.config, None
    if config_path is None and not args.sweep:
        if DEFAULT_CONFIG.is_file():
            config_path = str(DEFAULT_CONFIG)
        else:
            base = {"run": {"dir": DEFAULT_RUN_DIR, "max_minutes": 15}}
    try:
        if args.sweep:
            run_sweep(args.sweep, args.config, args.overrides, quiet=args.quiet)
            return 0
        config = config_lib.load_config(config_path, args.overrides, base=base)
        if args.print_config:
            print(config_lib.to_yaml(config), end="")
            return 0
        train(config, quiet=args.quiet)
    except (config_lib.ConfigError, ValueError, FileNotFoundError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    return 0
