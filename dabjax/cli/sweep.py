"""Running a sweep: every trial of a sweep file (``dabjax.training.sweep_file``), one after another (the default)
or as Ray Tune trials in parallel on every device and across machines (``dabjax train --sweep FILE --launcher
ray``, ``dabjax.cli.sweep_ray``; the ``sweep`` install extra brings Ray Tune and Optuna), then the summary
(``dabjax.cli.sweep_summary``).

Every trial is validated before any starts. Trial ``NAME`` trains the normal way in its own run directory
``<run.dir>/NAME`` (config, metrics, TensorBoard, checkpoints: ``dabjax.runs.run_dir``); the sweep directory
``<run.dir>`` also holds ``sweep.json`` (``dabjax.runs.sweep_dir``), ``summary.txt`` and ``summary.png``.

Resuming: the same command again continues the unfinished trials from their checkpoints and skips the finished
ones (budget reached, ``run.iterations`` or ``run.max_minutes``) and the ones the scheduler stopped.

``dabjax sweep summary DIR`` (or ``python -m dabjax.cli.sweep summary DIR``) prints and writes the summary of a
sweep directory on demand.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tqdm import tqdm

from dabjax.cli import sweep_ray, sweep_summary
from dabjax.runs import sweep_dir, train_boxeszero
from dabjax.training import config as config_lib
from dabjax.training import sweep_file
from dabjax.training.sweep_file import MODES

LAUNCHERS = ("sequential", "ray")


def run_sweep(sweep_path, config_path, overrides: Sequence[str], quiet: bool = False, launcher: str = "sequential",
              ray_settings: sweep_ray.RaySettings = sweep_ray.RaySettings()) -> list[tuple[str, dict]]:
    """Runs (or resumes) every trial of the sweep file, then prints the summary and writes it to the sweep
    directory; returns ``[(trial name, its last metrics row)]`` in the file's order (empty for a trial that
    never ran). ConfigError before anything starts when a trial, the metric or the launcher does not fit."""
    return launch(sweep_path, config_path, overrides, quiet, launcher, ray_settings)[0]


def launch(sweep_path, config_path, overrides: Sequence[str], quiet: bool = False, launcher: str = "sequential",
           ray_settings: sweep_ray.RaySettings = sweep_ray.RaySettings()) -> tuple[list[tuple[str, dict]], list[str]]:
    """``run_sweep``, also returning the names of the trials left not done (interrupted, failed)."""
    sweep = sweep_file.load_sweep(sweep_path)
    if launcher not in LAUNCHERS:
        raise config_lib.ConfigError(f"--launcher must be sequential or ray, got {launcher!r}")
    why = sweep.needs_ray()
    if launcher == "sequential" and why:
        raise config_lib.ConfigError(
            f"sweep file {sweep.path!r} needs --launcher ray: {why} (install it with {sweep_file.EXTRA_HINT})")
    if launcher == "ray":
        sweep_ray.import_ray()  # fail before writing anything when Ray is missing
    root = sweep_file.sweep_root(sweep, config_path, overrides)
    trials = sweep_dir.replayed_trials(sweep, root)
    configs = sweep_file.trial_configs(sweep, trials, config_path, overrides, root)
    sweep_dir.write_record(root, sweep, trials, overrides)
    say = (lambda text: None) if quiet else tqdm.write
    todo = []
    for trial, config in zip(trials, configs):
        status = sweep_dir.trial_status(config.run)
        if status in (sweep_dir.FINISHED, sweep_dir.STOPPED_EARLY):
            say(f"=== sweep trial {trial.name}: {status}, skipped ({config.run.dir})")
        else:
            todo.append((trial, config))
    if launcher == "sequential":
        for trial, config in todo:
            say(f"=== sweep trial {trial.name}: {config.run.dir}")
            train_boxeszero.train(config, quiet=quiet)
            # A KeyboardInterrupt the trainer caught: it saved and returned; stop the sweep too. (SIGTERM and
            # SIGINT stop it through dabjax.runs.stopping.StoppedBySignal, raised once the trial is saved.)
            if sweep_dir.trial_status(config.run) != sweep_dir.FINISHED:
                break
    elif todo:
        sweep_ray.run_with_ray(sweep, todo, root, ray_settings, quiet)
    text, _ = sweep_summary.summarize(root, write=True)
    print(text)
    left = [trial.name for trial, config in todo
            if sweep_dir.trial_status(config.run) in (sweep_dir.NOT_STARTED, sweep_dir.UNFINISHED)]
    if left:
        tqdm.write(f"{len(left)} of {len(trials)} trials are not done ({', '.join(left)}): the same command again "
                   "resumes them from their checkpoints", file=sys.stderr)
    return [(trial.name, sweep_dir.last_row(config.run.dir)) for trial, config in zip(trials, configs)], left


# --- dabjax sweep / python -m dabjax.cli.sweep --------------------------------------------------------------


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.sweep") -> int:
    """The ``sweep`` command: ``summary DIR`` prints (and writes) a sweep directory's summary."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    summary = commands.add_parser("summary", help="the table and plot of a sweep directory's trials")
    summary.add_argument("dir", help="the sweep directory (the sweep's run.dir)")
    summary.add_argument("--metric", help="rank by this metrics key (default: the sweep's)")
    summary.add_argument("--mode", choices=MODES, help="max or min (default: the sweep's, else max)")
    args = parser.parse_args(argv)
    try:
        text, _ = sweep_summary.summarize(args.dir, args.metric, args.mode)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
