"""``dabjax train`` (also ``python train.py`` in a clone, ``python -m dabjax.cli.train``): train, resume, or sweep.

    dabjax train                                      # the CPU default: 3x3 BoxesZero (built-in config 3x3)
    dabjax train --list-configs                       # the built-in configs and sweeps, with their purpose
    dabjax train --config 5x5_cpu                     # a built-in config by name (or a path: configs/5x5_cpu.yaml)
    dabjax train --config 3x3 train.lr=3e-4 run.dir=runs/try
    dabjax train --config runs/try/config.yaml        # resume a run from its own saved config
    dabjax train --sweep 3x3_ablation run.dir=runs/ablation
    dabjax train --sweep 3x3_search --launcher ray --max-concurrent 2 run.dir=runs/search
    dabjax train --config td_3x3                      # TD(lambda) learning (mode: td, dabjax.runs.train_td)

A run directory holds ``config.yaml`` (the resolved config: it names its labelled set by built-in name or
absolute path, so it resumes from anywhere), ``metrics.jsonl`` (one JSON object per iteration), ``tb/``
(TensorBoard event files) and ``checkpoints/<iteration>/`` (orbax, last k kept); see ``dabjax.runs.run_dir``.
Running the same command again on an existing run directory resumes from its newest intact checkpoint; a run
killed between checkpoints loses only the iterations after the last one (their metrics lines are dropped so the
log matches the state). A damaged newest checkpoint is set aside in ``checkpoints/damaged/`` with a warning
naming it, and unfinished saves are removed. SIGTERM and Ctrl-C save a checkpoint and exit with 143 / 130, one
line naming the checkpoint and the command that resumes (``dabjax.runs.stopping``); a full disk, a permission
error, a read-only file system or a device out of memory is one line with its remedy and its own exit status
(``dabjax.cli.faults``; ``--debug`` adds the traceback). A mistake in the config, the overrides or the files they
name is ``error: ...`` and exit status 2; any other failure of the run is one line with exit status 70. The
progress bar runs over the budget that ends the run (``run.iterations`` or ``run.max_minutes``); when the run
stops, the last line says why, and a closing summary gives the last evaluation, where the files are and the
commands to play, evaluate, resume and export the agent (``dabjax.runs.run_summary``). A config with ``mode: td``
goes to the TD(lambda) trainer (``dabjax.runs.train_td``).

Sweep files (``dabjax.training.sweep_file``; a path or a built-in sweep's name): ``base`` (a config, optional),
``overrides`` (applied to every run, optional), and one of ``runs`` (a list of ``{name: ..., overrides: [...]}``),
``grid`` (``key: [values]``, every combination) or ``search`` (ranges sampled by Optuna; ``--launcher ray``). Each
run goes to ``<sweep run.dir>/<name>``, one after another or, with ``--launcher ray`` (the ``sweep`` extra), as
Ray Tune trials in parallel on every device or across a Ray cluster; the same command again resumes the
unfinished ones, and a summary table and plot follow (``--summary`` shows them again).
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys

import jax

from dabjax import package_data
from dabjax.baselines.td_config import load_td_config
from dabjax.cli import DEBUG_FLAG_HELP, UsageError, faults, sweep, sweep_ray, sweep_summary, users_input
from dabjax.runs import run_lock, run_summary, stopping, train_td
from dabjax.runs.train_boxeszero import train
from dabjax.training import config as config_lib
from dabjax.training import sizing, sweep_file

DEFAULT_CONFIG = "3x3"  # the built-in CPU default (configs/3x3.yaml in a clone)


def list_builtins() -> str:
    """The built-in configs and sweeps, each with its one-line purpose (its first comment line), and the built-in
    labelled sets."""
    configs, sweeps = package_data.builtin_configs(), package_data.builtin_sweeps()
    width = max(map(len, [*configs, *sweeps]), default=0)
    lines = ["built-in configs (--config NAME; a path works too):"]
    lines += [f"  {name.ljust(width)}  {package_data.purpose(path)}" for name, path in configs.items()]
    lines.append("built-in sweeps (--sweep NAME):")
    lines += [f"  {name.ljust(width)}  {package_data.purpose(path)}" for name, path in sweeps.items()]
    lines.append("built-in labelled sets (eval.labelled_set=NAME, dabjax evaluate accuracy --set NAME): "
                 + ", ".join(package_data.builtin_sets()))
    return "\n".join(lines)


def start_distributed(coordinator: str, num_processes: int, process_id: int) -> None:
    """Joins a multi-process run (``jax.distributed``): every process runs the same command with its own
    ``--process-id``; the mesh then spans every device of every process. On CPUs the collectives go
    through gloo."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # affects the CPU backend only
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)


def config_file_mode(path) -> str | None:
    """The ``mode`` a config file (a path or a built-in config's name) names, if it is readable YAML (errors are
    reported by the loader)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.load(package_data.config_file(path)).get("mode")
    except Exception:  # missing or unreadable files fail later with a proper message
        return None


def print_closing_summary(config) -> None:
    """The run's closing summary (``dabjax.runs.run_summary``) on stdout."""
    board = f"{config.board.rows}x{config.board.cols}"
    if config.mode == "td":
        text = run_summary.closing_summary(config.run, board, f"td:{config.run.dir}", None, config.eval.every,
                                           exportable=False)
    else:
        text = run_summary.closing_summary(config.run, board, f"ckpt:{config.run.dir}", config.eval.labelled_set,
                                           config.eval.every)
    print(text, flush=True)


def build_parser(prog: str = "train.py") -> argparse.ArgumentParser:
    """The ``train`` command's parser."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help=f"YAML config: a path or a built-in config's name (default: {DEFAULT_CONFIG}, "
                                         "the 3x3 CPU default); --list-configs lists them")
    parser.add_argument("--sweep", help="YAML sweep file, a path or a built-in sweep's name: run several configs")
    parser.add_argument("--list-configs", action="store_true",
                        help="list the built-in configs, sweeps and labelled sets, and exit")
    parser.add_argument("--launcher", choices=("sequential", "ray"), default="sequential",
                        help="--sweep: one run after another (default), or Ray Tune trials in parallel (sweep extra)")
    parser.add_argument("--max-concurrent", type=int, help="--launcher ray: at most this many trials at once")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0, help="--launcher ray: CPUs per trial (1)")
    parser.add_argument("--gpus-per-trial", type=float,
                        help="--launcher ray: GPUs per trial (default 1 where the cluster has GPUs, else 0)")
    parser.add_argument("--summary", action="store_true",
                        help="--sweep: print (and write) the summary of the sweep's run directories; train nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    parser.add_argument("--debug", action="store_true", help=DEBUG_FLAG_HELP)
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--coordinator", help="several hosts: HOST:PORT of process 0 (jax.distributed)")
    parser.add_argument("--num-processes", type=int, help="several hosts: how many processes in all")
    parser.add_argument("--process-id", type=int, help="several hosts: this process's index (0 = primary)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.lr=3e-4 run.dir=runs/x")
    return parser


def command_line(prog: str, argv: list[str] | None) -> str:
    """The command as it was typed (``python train.py ...``, ``dabjax train ...``): what resumes the run."""
    words = list(sys.argv[1:] if argv is None else argv)
    head = f"python {prog}" if prog.endswith(".py") else prog
    return f"{head} {shlex.join(words)}".rstrip()


def memory_hint(config) -> str:
    """For a device out of memory: what half the games would need, by ``sizing.estimate_memory``."""
    if not isinstance(config, config_lib.TrainConfig) or config.selfplay.games < 2:
        return ""
    smaller = copy.deepcopy(config)
    smaller.selfplay.games = config.selfplay.games // 2
    try:
        needs = sizing.estimate_memory(smaller)["total"] / 2**30
    except Exception:  # a hint only: no estimate, no hint
        return ""
    return f"; selfplay.games={smaller.selfplay.games} needs about {needs:.2f} GiB per device"


def main(argv: list[str] | None = None, prog: str = "train.py") -> int:
    """The ``train`` command; returns its exit status: 0 done, 1 a sweep with trials left, 2 a configuration
    error (named on stderr), 3-6 a fault (``dabjax.cli.faults``: disk full, permission denied, read-only file
    system, device out of memory), 70 any other failure (``faults.UNEXPECTED``), 128 + the signal when stopped
    by SIGTERM (143) or SIGINT (130)."""
    command = command_line(prog, argv)
    parser = build_parser(prog)
    # Intermixed: options may come before or after the key=value overrides.
    args = parser.parse_intermixed_args(argv)
    loaded: dict = {}  # _run puts the config here once loaded: a fault's remedy names its run.dir and games
    try:
        return _run(parser, args, loaded)
    except stopping.StoppedBySignal as stopped:
        print(f"{parser.prog}: {stopped.describe()}; the same command resumes from it: {command}",
              file=sys.stderr, flush=True)
        return stopped.exit_status
    except Exception as error:
        return report_error(parser.prog, error, loaded.get("config"), command, faults.debug_requested(args.debug))


def is_users_mistake(error: BaseException) -> bool:
    """Whether ``error`` is about what the user gave: the command line and the files it names (``UsageError``),
    the config (``ConfigError``, also raised by a run that finds its config will not do, e.g. a resume with
    another network) or a run directory another trainer holds."""
    return isinstance(error, (UsageError, config_lib.ConfigError, run_lock.RunDirInUse))


def report_error(prog: str, error: Exception, config, command: str, debug: bool) -> int:
    """The line (and exit status) of an error ``main`` caught: the user's mistake (status 2), a fault with its
    remedy, or an unexpected failure. ``config``: the run's, once loaded."""
    fault = faults.classify(error)
    if fault is None and is_users_mistake(error):
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    if fault is None:
        return faults.report_failure(prog, error, debug)
    run_dir = config.run.dir if config is not None else None
    games = config.selfplay.games if isinstance(config, config_lib.TrainConfig) else None
    advice = faults.remedy(fault, run_dir, command, games, memory_hint(config))
    return faults.report(prog, error, fault, advice, debug)


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exits with the parser's usage error when the sweep and several-hosts options do not go together."""
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
    several_hosts = (args.coordinator, args.num_processes, args.process_id is not None)
    if any(several_hosts) and not all(several_hosts):
        parser.error("--coordinator, --num-processes and --process-id go together")


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, loaded: dict) -> int:
    """``main`` once the command line is parsed (``loaded["config"]``: the config, once loaded); raises what
    ``main`` turns into a line and an exit status."""
    if args.list_configs:
        if args.config or args.sweep or args.overrides:
            parser.error("--list-configs takes no --config, --sweep or overrides")
        print(list_builtins())
        return 0
    check_options(parser, args)
    if args.coordinator:
        start_distributed(args.coordinator, args.num_processes, args.process_id)
    # Temporal-difference learning (Kabir 2004) has its own trainer and config schema.
    td_mode = bool(args.config) and config_file_mode(args.config) == "td"
    if td_mode and args.sweep:
        parser.error(f"--sweep runs BoxesZero/AlphaZero configs; {args.config} is a TD config (mode: td)")
    if args.sweep:
        return _sweep(args)
    config_path = args.config if args.config is not None else DEFAULT_CONFIG
    with users_input():
        if td_mode:
            config, train_one = load_td_config(config_path, args.overrides), train_td.train
        else:
            config, train_one = config_lib.load_config(config_path, args.overrides), train
    loaded["config"] = config
    if args.print_config:
        print(config_lib.to_yaml(config), end="")
        return 0
    train_one(config, quiet=args.quiet)
    if not args.quiet and jax.process_index() == 0:
        print_closing_summary(config)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    """``--sweep``: the summary of its directories (``--summary``), or the sweep run; 1 while trials are left.
    A sweep file, launcher or trial that does not fit is a ConfigError before any trial starts."""
    if args.summary:
        with users_input():
            spec = sweep_file.load_sweep(args.sweep)
            print(sweep_summary.summarize(sweep_file.sweep_root(spec, args.config, args.overrides))[0])
        return 0
    settings = sweep_ray.RaySettings(args.cpus_per_trial, args.gpus_per_trial, args.max_concurrent)
    _, left = sweep.launch(args.sweep, args.config, args.overrides, args.quiet, args.launcher, settings)
    return 1 if left else 0  # 1: run it again to finish (a batch job can loop on this)


if __name__ == "__main__":
    sys.exit(main(prog="python -m dabjax.cli.train"))
