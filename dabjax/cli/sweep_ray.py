"""The Ray Tune launcher of sweeps (``dabjax train --sweep FILE --launcher ray``; the ``sweep`` install extra): each
trial one Ray Tune trial, in parallel on every device and across machines.

Each trial gets ``--gpus-per-trial`` devices where the cluster has GPUs (one by default: Ray sets
``CUDA_VISIBLE_DEVICES``, so two JAX processes never share a GPU's preallocation; a fraction packs several trials
on a GPU and turns preallocation off), else ``--cpus-per-trial`` CPUs (1 by default: as many concurrent trials as
cores), at most ``--max-concurrent`` at once. Set ``RAY_ADDRESS`` (or ``ray start`` a cluster first) to run on a
cluster; the sweep directory must then be on storage every node sees at the same path (docs/training.md,
"Sweeps"). A trial trains the normal way in its own run directory (``dabjax.runs.train_boxeszero``) and reports
each iteration to Tune; a trial the ASHA scheduler stops gets ``stopped_early.json`` (``dabjax.runs.sweep_dir``).
Ray's own files go to ``<sweep dir>/ray_tune/``; they are not needed to resume.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import sys
import time

from tqdm import tqdm

from dabjax.cli.faults import not_a_command
from dabjax.runs import run_dir as run_dir_lib
from dabjax.runs import sweep_dir, train_boxeszero
from dabjax.training import config as config_lib
from dabjax.training import sweep_file
from dabjax.training.sweep_file import Sweep

RAY_DIR = "ray_tune"  # <sweep dir>/ray_tune/<launch time>/: Ray Tune's own files (not needed to resume)


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """How trials use a Ray cluster's resources: per trial ``cpus`` and ``gpus`` (None: 1 when the cluster has
    GPUs, else 0; a fraction packs several trials on one GPU), and at most ``max_concurrent`` trials at once
    (None: as many as the resources allow)."""

    cpus: float = 1.0
    gpus: float | None = None
    max_concurrent: int | None = None


def import_ray():
    """``(ray, ray.tune)``; ConfigError saying how to install them when they are missing."""
    try:
        import ray
        from ray import tune
    except ImportError:
        raise config_lib.ConfigError(f"--launcher ray needs Ray Tune: {sweep_file.EXTRA_HINT}") from None
    return ray, tune


def start_ray(attempts: int = 3, **init_args) -> None:
    """``ray.init(include_dashboard=False, **init_args)``: joins ``RAY_ADDRESS``'s cluster, else starts a local Ray.
    A local start is tried ``attempts`` times: Ray gives its processes a few seconds to start, which a machine
    busy with other work can miss."""
    ray, _ = import_ray()
    for attempt in range(attempts):
        try:
            ray.init(include_dashboard=False, **init_args)
            return
        except Exception:  # "The current node timed out during startup" (Ray raises a bare Exception)
            ray.shutdown()
            if attempt == attempts - 1 or os.environ.get("RAY_ADDRESS"):
                raise


class TuneReporter:
    """Sends each iteration's scalar metrics to Ray Tune (``report(dict)``). The latest evaluation's metrics
    are carried forward, so that a scheduler comparing trials at any iteration sees each trial's latest
    evaluation; iterations before the first evaluation are not reported when the metric is an evaluation's
    (Tune refuses results without the metric it optimises)."""

    def __init__(self, report, metric: str | None):
        self.report, self.metric = report, metric
        self.evaluation: dict = {}

    def __call__(self, metrics: dict) -> None:
        scalars = {k: v for k, v in metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        self.evaluation.update({k: v for k, v in scalars.items() if k.startswith("eval/")})
        result = {**scalars, **self.evaluation}
        if self.metric is None or self.metric in result:
            self.report(result)


def tune_trial(tune_config: dict, configs: dict, cwd: str, metric: str | None, gpus: float) -> None:
    """One Ray Tune trial, in a Ray worker: trains the trial's config (``configs[name]``, a plain dict) in its
    run directory, resuming it, and reports to Tune as it goes. ``cwd`` is the driver's working directory, where
    relative paths in the config (``run.dir``, ``eval.labelled_set``) start."""
    from ray import tune

    if 0 < gpus < 1:  # several trials share a GPU: each allocates what it uses, not 75% of the GPU
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # before JAX starts its backend, below
    if not os.path.isdir(cwd):
        import socket

        raise RuntimeError(
            f"the sweep was started in {cwd}, which this node ({socket.gethostname()}) does not have: put the sweep "
            "on storage every node mounts at the same path, and start it from there"
        )
    os.chdir(cwd)  # Ray Tune starts a trial in its own folder
    name = tune_config["trial"]
    config = config_lib.load_config(base=configs[name])
    training = train_boxeszero.BoxesZeroTraining(config)
    # A trial's output goes to the driver's terminal, interleaved with the others': messages yes, bars no.
    run = dataclasses.replace(config.run, progress=False)
    run_dir_lib.train_in_run_dir(run, config_lib.to_yaml(config), training, report=TuneReporter(tune.report, metric))


def run_with_ray(sweep: Sweep, todo: list, root: str, settings: RaySettings, quiet: bool) -> None:
    """The trials of ``todo`` (``[(Trial, TrainConfig)]``) as Ray Tune trials; a trial the scheduler stops gets
    ``stopped_early.json`` in its run directory. Starts a local Ray (or joins ``RAY_ADDRESS``'s cluster) unless
    Ray is already running in this process, and stops what it started."""
    ray, tune = import_ray()
    started = not ray.is_initialized()
    if started:
        start_ray(log_to_driver=not quiet, logging_level="WARNING" if quiet else "INFO")
    try:
        available = ray.cluster_resources()
        gpus = settings.gpus
        if gpus is None:
            gpus = 1.0 if available.get("GPU", 0) > 0 else 0.0
        for what, wanted, flag in (("GPU", gpus, "--gpus-per-trial"), ("CPU", settings.cpus, "--cpus-per-trial")):
            if wanted > available.get(what, 0):  # Tune would wait for them forever
                raise config_lib.ConfigError(
                    f"{flag} {wanted:g}: the Ray cluster has {available.get(what, 0):g} {what}s in all")
        configs = {trial.name: config_lib.to_dict(config) for trial, config in todo}
        names = [trial.name for trial, _ in todo]
        run_dirs = {trial.name: config.run for trial, config in todo}
        trainable = tune.with_resources(
            tune.with_parameters(tune_trial, configs=configs, cwd=os.getcwd(), metric=sweep.metric, gpus=gpus),
            {"cpu": settings.cpus, "gpu": gpus},
        )
        scheduler = None
        if sweep.scheduler is not None:
            from ray.tune.schedulers import ASHAScheduler

            asha = sweep.scheduler["asha"]
            scheduler = ASHAScheduler(
                time_attr="iteration", metric=sweep.metric, mode=sweep.mode,
                max_t=max(config.run.iterations for _, config in todo), grace_period=asha["grace_period"],
                reduction_factor=asha["reduction_factor"], brackets=asha["brackets"],
                stop_last_trials=False,  # the trials' own budgets end them, with their last checkpoint saved
            )

        class MarkStoppedEarly(tune.Callback):
            """A trial that completes (not fails) before its budget was stopped by the scheduler: a rerun of the
            sweep is not to resume it."""

            def on_trial_complete(self, iteration, trials, trial, **info):
                sweep_dir.mark_if_stopped_early(run_dirs[trial.config["trial"]], "the ASHA scheduler")

        tuner = tune.Tuner(
            trainable,
            param_space={"trial": tune.grid_search(names)},
            tune_config=tune.TuneConfig(
                scheduler=scheduler, max_concurrent_trials=settings.max_concurrent,
                trial_name_creator=lambda t: t.config["trial"], trial_dirname_creator=lambda t: t.config["trial"],
            ),
            run_config=tune.RunConfig(
                name=time.strftime("%Y%m%d-%H%M%S"),
                storage_path=str((pathlib.Path(root) / RAY_DIR).absolute()),
                callbacks=[MarkStoppedEarly()], verbose=0 if quiet else 1,
            ),
        )
        grid = tuner.fit()
    finally:
        if started:
            ray.shutdown()
    for result in grid:
        if result.error is not None:
            lines = str(result.error).strip().splitlines() or [type(result.error).__name__]
            tqdm.write(f"warning: trial {pathlib.Path(result.path).name} failed: {lines[-1]}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(not_a_command(__spec__.name))
