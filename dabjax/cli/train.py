"""``python train.py``: train, resume, or sweep. The imperative shell around ``dabjax.training.trainer``.

    python train.py                                   # the CPU default: 3x3 BoxesZero
    python train.py --config configs/3x3.yaml train.lr=3e-4 run.dir=runs/try
    python train.py --config configs/3x3_alphazero.yaml
    python train.py --sweep configs/sweeps/3x3_ablation.yaml
    python train.py --sweep configs/sweeps/3x3_search.yaml --launcher ray --max-concurrent 2
    python train.py --config configs/td_3x3.yaml         # TD(lambda) learning (mode: td, dabjax.cli.train_td)

A run directory holds ``config.yaml`` (the resolved config), ``metrics.jsonl`` (one JSON object per
iteration), ``tb/`` (TensorBoard event files) and ``checkpoints/<iteration>/`` (orbax, last k kept); see
``dabjax.cli.run_dir``. Running the same command again on an existing run directory resumes from its newest
intact checkpoint; a run killed between checkpoints loses only the iterations after the last one (their metrics
lines are dropped so the log matches the state). A damaged newest checkpoint is set aside in
``checkpoints/damaged/`` with a warning naming it, and unfinished saves are removed. Ctrl-C saves a checkpoint
before exiting. The progress bar runs over the budget that ends the run (``run.iterations`` or
``run.max_minutes``) and the last line says why it stopped. A config with ``mode: td`` goes to the TD(lambda)
trainer (``dabjax.cli.train_td``).

Sweep files (YAML; ``dabjax.cli.sweep``): ``base`` (a config file, optional), ``overrides`` (applied to every
run, optional), and one of ``runs`` (a list of ``{name: ..., overrides: [...]}``), ``grid`` (``key: [values]``,
every combination) or ``search`` (ranges sampled by Optuna; ``--launcher ray``). Each run goes to ``<sweep
run.dir>/<name>``, one after another or, with ``--launcher ray`` (the ``sweep`` extra), as Ray Tune trials in
parallel on every device or across a Ray cluster; the same command again resumes the unfinished ones, and a
summary table and plot follow (``--summary`` shows them again).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import jax

from dabjax.baselines.td_config import load_td_config
from dabjax.cli import run_dir as run_dir_lib
from dabjax.cli import train_td
from dabjax.evaluation import pretrained
from dabjax.solvers import labelled
from dabjax.training import checkpoint
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib

# With no --config, the shipped CPU default when this is a clone of the repository, else the built-ins.
DEFAULT_CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "3x3.yaml"
DEFAULT_RUN_DIR = "runs/3x3-boxeszero"


# --- one run --------------------------------------------------------------------------------------------


def periodic_evaluation(trainer: trainer_lib.Trainer) -> trainer_lib.PeriodicEvaluation:
    """The trainer's periodic evaluation, with the labelled set its config names (``eval.labelled_set``) read
    from disk."""
    path = trainer.config.eval.labelled_set
    return trainer_lib.PeriodicEvaluation(trainer, labelled.load(path) if path is not None else None)


def warm_start_params(source: str, trainer: trainer_lib.Trainer):
    """The parameters of ``run.init_from`` (a run or checkpoint directory, an agent folder in the pretrained
    format, e.g. ``benchmarks/network_capacity.py --save``'s, or ``pretrained:RxC``) for a fresh run. Raises
    ConfigError naming ``run.init_from`` when they cannot serve: another network setting, or another board for
    an MLP (its first layer reads one board's grid)."""
    try:
        if source.startswith("pretrained:"):
            loaded = pretrained.load_pretrained(source[len("pretrained:"):].partition(":")[0])
        elif (pathlib.Path(source) / pretrained.AGENT_FILE).is_file():  # an agent folder (export or supervised)
            loaded = pretrained.load_agent_folder(source)
        else:
            loaded = checkpoint.load_for_play(source)
    except (ValueError, FileNotFoundError) as error:
        raise config_lib.ConfigError(f"run.init_from {source!r}: {error}") from None
    wanted = trainer.network_config
    if loaded.network_config != wanted:
        raise config_lib.ConfigError(f"run.init_from {source!r} holds a network {loaded.network_config}, this run's "
                                     f"network section asks for {wanted}")
    other_board = (loaded.rows, loaded.cols) != (trainer.geometry.rows, trainer.geometry.cols)
    if other_board and wanted.kind == "mlp":  # a ResNet's parameters fit any board too: fine-tuning is fine
        raise config_lib.ConfigError(f"run.init_from {source!r} is a {loaded.rows}x{loaded.cols} MLP; an MLP "
                                     f"plays one board size only (the graph and resnet kinds play any)")
    print(f"warm start from {source} ({loaded.rows}x{loaded.cols}, iteration {loaded.iteration})", file=sys.stderr)
    return loaded.params


class BoxesZeroTraining(run_dir_lib.ResumableTraining):
    """The BoxesZero / AlphaZero trainer (``dabjax.training.trainer``) in the run-directory loop."""

    def __init__(self, config: config_lib.TrainConfig):
        trainer_lib.validate_eval_opponents(config)
        self.trainer = trainer_lib.Trainer(config)
        self.evaluation = periodic_evaluation(self.trainer) if config.eval.every else None
        self.eval_every = config.eval.every
        self.title = f"{config.mode} on {self.trainer.geometry.name}"

    def init_state(self, new_run: bool = True):
        source = self.trainer.config.run.init_from
        params = warm_start_params(source, self.trainer) if source and new_run else None  # resumes ignore it
        return self.trainer.init_state(params=params)

    def restore(self, store: checkpoint.CheckpointStore, iteration: int, fresh):
        checkpoint.check_compatible(
            store.read_meta(iteration), self.trainer.geometry.rows, self.trainer.geometry.cols,
            self.trainer.network_config, store.directory / str(iteration),
        )
        trainer_target = fresh.replace(train_state=fresh.train_state.replace(params={}))
        params, restored, _ = store.restore(iteration, fresh.train_state.params, trainer_target)
        return restored.replace(train_state=restored.train_state.replace(params=params))

    def save(self, store: checkpoint.CheckpointStore, state) -> None:
        # The parameters are their own checkpoint item (enough to play); the trainer item holds the rest.
        trainer_part = state.replace(train_state=state.train_state.replace(params={}))
        store.save(int(state.iteration), state.train_state.params, trainer_part, self.trainer.meta(state))

    def progress(self, state) -> tuple[int, float]:
        return int(state.iteration), float(state.wall_time)

    def iterate(self, state):
        state, metrics = self.trainer.iteration(state)
        metrics["time"] = float(state.wall_time)
        return state, metrics

    def evaluate(self, state, key) -> dict:
        return self.evaluation(state.train_state.params, key)

    def describe(self, state) -> str:
        return f"iteration {int(state.iteration)}, st={int(state.start_step)}"

    def postfix(self, metrics: dict) -> dict[str, str]:
        fields = dict(
            st=str(metrics["start_step"]), gps=f"{metrics['games_per_s']:.0f}", loss=f"{metrics['loss']:.3f}",
            mqr=f"{metrics['mqr']:.2f}", nvr=f"{metrics['nvr']:.2f}",
        )
        if "eval/best_result_min" in metrics:
            fields["acc"] = f"{metrics['eval/best_result_min']:.2f}"
        return fields

    def note(self, metrics: dict) -> str | None:
        if metrics.get("advanced"):
            return f"iteration {metrics['iteration']}: st {metrics['start_step']} -> {metrics['next_start_step']}"
        return None


def train(config: config_lib.TrainConfig, quiet: bool = False) -> dict:
    """Trains (or resumes) one run to ``run.iterations`` or ``run.max_minutes``; returns its last metrics."""
    training = BoxesZeroTraining(config)
    return run_dir_lib.train_in_run_dir(config.run, config_lib.to_yaml(config), training, quiet=quiet)


# --- sweeps (dabjax.cli.sweep, imported when needed: it imports this module) --------------------------------


def sweep_runs(sweep_path) -> tuple[list[tuple[str, list[str]]], str | None]:
    """``([(name, overrides)], base config path)`` from a sweep file (``dabjax.cli.sweep.sweep_runs``)."""
    from dabjax.cli import sweep

    return sweep.sweep_runs(sweep_path)


def run_sweep(sweep_path, config_path, overrides: list[str], quiet: bool = False, **launch) -> list[tuple[str, dict]]:
    """Runs a sweep file's trials and prints the summary (``dabjax.cli.sweep.run_sweep``)."""
    from dabjax.cli import sweep

    return sweep.run_sweep(sweep_path, config_path, overrides, quiet=quiet, **launch)


# --- entry point ----------------------------------------------------------------------------------------


def start_distributed(coordinator: str, num_processes: int, process_id: int) -> None:
    """Joins a multi-process run (``jax.distributed``): every process runs the same command with its own
    ``--process-id``; the mesh then spans every device of every process. On CPUs the collectives go
    through gloo."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # affects the CPU backend only
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)


def config_file_mode(path) -> str | None:
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
    parser.add_argument("--sweep", help="YAML sweep file: run several configs (dabjax.cli.sweep)")
    parser.add_argument("--launcher", choices=("sequential", "ray"), default="sequential",
                        help="--sweep: one run after another (default), or Ray Tune trials in parallel (sweep extra)")
    parser.add_argument("--max-concurrent", type=int, help="--launcher ray: at most this many trials at once")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0, help="--launcher ray: CPUs per trial (1)")
    parser.add_argument("--gpus-per-trial", type=float,
                        help="--launcher ray: GPUs per trial (default 1 where the cluster has GPUs, else 0)")
    parser.add_argument("--summary", action="store_true",
                        help="--sweep: print (and write) the summary of the sweep's run directories; train nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--coordinator", help="several hosts: HOST:PORT of process 0 (jax.distributed)")
    parser.add_argument("--num-processes", type=int, help="several hosts: how many processes in all")
    parser.add_argument("--process-id", type=int, help="several hosts: this process's index (0 = primary)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.lr=3e-4 run.dir=runs/x")
    # Intermixed: options may come before or after the key=value overrides.
    args = parser.parse_intermixed_args(argv)
    ray_options = args.max_concurrent is not None or args.gpus_per_trial is not None or args.cpus_per_trial != 1.0
    if (args.launcher == "ray" or ray_options or args.summary) and not args.sweep:
        parser.error("--launcher, --max-concurrent, --cpus-per-trial, --gpus-per-trial and --summary go with --sweep")
    if ray_options and args.launcher != "ray":
        parser.error("--max-concurrent, --cpus-per-trial and --gpus-per-trial go with --launcher ray")
    if args.launcher == "ray" and args.coordinator:
        parser.error("--launcher ray places each trial on its own devices; it does not combine with --coordinator")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        parser.error("--max-concurrent must be >= 1")
    if args.cpus_per_trial <= 0 or (args.gpus_per_trial or 0) < 0:
        parser.error("--cpus-per-trial must be > 0 and --gpus-per-trial >= 0")
    if args.coordinator or args.num_processes or args.process_id is not None:
        if not (args.coordinator and args.num_processes and args.process_id is not None):
            parser.error("--coordinator, --num-processes and --process-id go together")
        start_distributed(args.coordinator, args.num_processes, args.process_id)
    # Temporal-difference learning (Kabir 2004) has its own trainer and config schema.
    td_mode = bool(args.config) and config_file_mode(args.config) == "td"
    if td_mode and args.sweep:
        parser.error(f"--sweep runs BoxesZero/AlphaZero configs; {args.config} is a TD config (mode: td)")
    config_path, base = args.config, None
    if config_path is None and not args.sweep:
        if DEFAULT_CONFIG.is_file():
            config_path = str(DEFAULT_CONFIG)
        else:
            base = {"run": {"dir": DEFAULT_RUN_DIR, "max_minutes": 15}}
    try:
        if args.sweep:
            from dabjax.cli import sweep

            if args.summary:
                spec = sweep.load_sweep(args.sweep)
                print(sweep.summarize(sweep.sweep_root(spec, args.config, args.overrides))[0])
                return 0
            settings = sweep.RaySettings(args.cpus_per_trial, args.gpus_per_trial, args.max_concurrent)
            _, left = sweep.launch(args.sweep, args.config, args.overrides, args.quiet, args.launcher, settings)
            return 1 if left else 0  # 1: run it again to finish (a batch job can loop on this)
        if td_mode:
            config, train_one = load_td_config(config_path, args.overrides), train_td.train
        else:
            config, train_one = config_lib.load_config(config_path, args.overrides, base=base), train
        if args.print_config:
            print(config_lib.to_yaml(config), end="")
            return 0
        train_one(config, quiet=args.quiet)
    except (config_lib.ConfigError, ValueError, FileNotFoundError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    return 0
