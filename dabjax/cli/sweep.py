"""Sweeps: several training runs from one sweep file, one after another (the default) or as Ray Tune trials in
parallel on every device and across machines (``python train.py --sweep FILE --launcher ray``; the ``sweep``
install extra brings Ray Tune and Optuna).

A sweep file (YAML) has ``base`` (a config file, optional), ``overrides`` (applied to every trial, optional) and
exactly one of three forms:

* ``runs``: a list of ``{name: ..., overrides: [...]}``;
* ``grid``: ``key: [values]``, every combination;
* ``search``: ``{space: {key: {kind: args}}, trials: N, seed: 0, sampler: random|qmc}``, ``trials`` configs
  sampled by Optuna from the ``space``, whose kinds are ``uniform: [low, high]``, ``loguniform: [low, high]``,
  ``int: [low, high]`` (both ends included), ``logint: [low, high]`` and ``choice: [values]``. Needs Ray.

and optionally ``metric`` (a metrics key, e.g. ``eval/best_result_min`` or ``eval/win_rate_vs_level2``) with
``mode`` (``max``, the default, or ``min``), reported to Ray Tune and used to rank the summary, and ``scheduler``
(``asha``, or ``{asha: {grace_period: iterations, reduction_factor: 3, brackets: 1}}``: Ray Tune's ASHA, which
stops trials that trail their peers at each rung; needs Ray and a metric).

Every trial is validated before any starts (a bad key, value or range fails at once, naming it). Trial ``NAME``
trains the normal way in its own run directory ``<run.dir>/NAME`` (config, metrics, TensorBoard, checkpoints:
``dabjax.cli.run_dir``); the sweep directory ``<run.dir>`` also holds ``sweep.json`` (the trials, their settings
and the metric; a search's sampled trials are replayed from it), ``summary.txt`` and ``summary.png``.

Resuming: the same command again continues the unfinished trials from their checkpoints and skips the finished
ones (budget reached, ``run.iterations`` or ``run.max_minutes``) and the ones the scheduler stopped (their run
directory holds ``stopped_early.json``). The run directories are the record; Ray's own files (``ray_tune/``)
are not needed to resume.

With Ray each trial is one Ray Tune trial: ``--gpus-per-trial`` devices where the cluster has GPUs (one by
default: Ray sets ``CUDA_VISIBLE_DEVICES``, so two JAX processes never share a GPU's preallocation; a fraction
packs several trials on a GPU and turns preallocation off), else ``--cpus-per-trial`` CPUs (1 by default: as many
concurrent trials as cores), at most ``--max-concurrent`` at once. Set ``RAY_ADDRESS`` (or ``ray start`` a
cluster first) to run on a cluster; the sweep directory must then be on storage every node sees at the same
path (docs/training.md, "Sweeps").

``python -m dabjax.cli.sweep summary DIR`` prints and writes the summary of a sweep directory on demand.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import pathlib
import sys
import time
from typing import Any, Sequence

from tqdm import tqdm

from dabjax.cli import run_dir as run_dir_lib
from dabjax.cli import train as train_cli
from dabjax.training import checkpoint
from dabjax.training import config as config_lib

RECORD_FILE = "sweep.json"  # <sweep dir>/sweep.json: the trials, their settings, the metric
STOPPED_EARLY_FILE = "stopped_early.json"  # <trial run dir>/stopped_early.json: the scheduler stopped it
SUMMARY_TEXT, SUMMARY_PLOT = "summary.txt", "summary.png"
RAY_DIR = "ray_tune"  # <sweep dir>/ray_tune/<launch time>/: Ray Tune's own files (not needed to resume)
EXTRA_HINT = "pip install -e '.[sweep]' (or pip install 'dabjax[sweep]': ray[tune] and optuna)"

FORMS = ("runs", "grid", "search")
SPACE_KINDS = ("uniform", "loguniform", "int", "logint", "choice")
SAMPLERS = ("random", "qmc")
MODES = ("max", "min")
ASHA_DEFAULTS = {"grace_period": 1, "reduction_factor": 3, "brackets": 1}

# Trial statuses, from the run directory.
NOT_STARTED, UNFINISHED, FINISHED, STOPPED_EARLY = "not started", "unfinished", "finished", "stopped early"


# --- the sweep file ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Trial:
    """One run of a sweep: its name (its run directory's), its overrides (the sweep's common ones first) and the
    settings it varies, for the summary (``{"train.lr": 3e-4}``, or ``{"overrides": "..."}`` for a ``runs``
    entry)."""

    name: str
    overrides: tuple[str, ...]
    params: dict


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A parsed sweep file. ``search`` (the ``search`` form's spec) is None for ``runs`` and ``grid``;
    ``scheduler`` is None or ``{"asha": {grace_period, reduction_factor, brackets}}``."""

    path: str
    form: str
    base: str | None
    trials: tuple[Trial, ...]
    metric: str | None
    mode: str
    scheduler: dict | None
    search: dict | None

    def needs_ray(self) -> str | None:
        """Why this sweep cannot run one trial after another (None when it can)."""
        if self.form == "search":
            return "its 'search' form samples trials for Ray Tune to run"
        if self.scheduler is not None:
            return "its 'scheduler' is Ray Tune's"
        return None


def value_text(value) -> str:
    """A value as the right-hand side of a ``key=value`` override (YAML flow: JSON is a subset)."""
    return json.dumps(value)


def load_sweep(sweep_path) -> Sweep:
    """Parses (and, for the ``search`` form, samples) a sweep file; ConfigError naming the bad entry."""
    from omegaconf import OmegaConf

    path = pathlib.Path(sweep_path)
    where = f"sweep file {str(path)!r}"
    if not path.is_file():
        raise config_lib.ConfigError(f"{where} does not exist")
    spec = OmegaConf.to_container(config_lib.load_yaml(path))
    if not isinstance(spec, dict):
        raise config_lib.ConfigError(f"{where} must be a mapping")
    unknown = set(spec) - {"base", "overrides", "metric", "mode", "scheduler", *FORMS}
    if unknown:
        raise config_lib.ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    forms = [form for form in FORMS if form in spec]
    if len(forms) != 1:
        raise config_lib.ConfigError(f"{where} needs exactly one of 'runs', 'grid' or 'search', has {forms}")
    form = forms[0]
    common = tuple(str(x) for x in spec.get("overrides") or [])
    if form == "grid":
        trials = _grid_trials(spec["grid"], common, where)
        search = None
    elif form == "runs":
        trials = _listed_trials(spec["runs"], common, where)
        search = None
    else:
        search = _search_spec(spec["search"], where)
        trials = tuple(
            Trial(f"trial{i:03d}", common + tuple(f"{k}={value_text(v)}" for k, v in params.items()), params)
            for i, params in enumerate(sample_space(search["space"], search["trials"], search["seed"],
                                                    search["sampler"]))
        )
    names = [trial.name for trial in trials]
    if len(set(names)) != len(names):
        raise config_lib.ConfigError(f"{where}: run names repeat ({sorted({n for n in names if names.count(n) > 1})})"
                                     "; each trial needs its own run directory")
    metric = spec.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise config_lib.ConfigError(f"{where}: metric must be a metrics key such as eval/best_result_min")
    mode = spec.get("mode", "max")
    if mode not in MODES:
        raise config_lib.ConfigError(f"{where}: mode must be one of {MODES}, got {mode!r}")
    scheduler = _scheduler_spec(spec.get("scheduler"), where)
    if scheduler is not None and metric is None:
        raise config_lib.ConfigError(f"{where}: a scheduler needs a 'metric' (and 'mode') to compare trials by")
    if form == "search" and metric is None:
        raise config_lib.ConfigError(f"{where}: a search needs a 'metric' (and 'mode') to rank its trials by")
    base = spec.get("base")
    if base is not None:
        base = str((path.parent / base) if not pathlib.Path(base).is_file() else base)
    return Sweep(str(path), form, base, trials, metric, mode, scheduler, search)


def _grid_trials(grid, common: tuple[str, ...], where: str) -> tuple[Trial, ...]:
    if not isinstance(grid, dict) or not grid or not all(isinstance(v, list) and v for v in grid.values()):
        raise config_lib.ConfigError(f"{where}: 'grid' must map each key to a non-empty list of values")
    keys = list(grid)
    return tuple(
        Trial(
            "_".join(f"{k.split('.')[-1]}={v}" for k, v in zip(keys, values)),
            common + tuple(f"{k}={value_text(v)}" for k, v in zip(keys, values)),
            dict(zip(keys, values)),
        )
        for values in itertools.product(*(grid[k] for k in keys))
    )


def _listed_trials(runs, common: tuple[str, ...], where: str) -> tuple[Trial, ...]:
    if not isinstance(runs, list) or not runs:
        raise config_lib.ConfigError(f"{where}: 'runs' must be a non-empty list")
    trials = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or "overrides" not in run:
            raise config_lib.ConfigError(f"sweep run #{i} needs 'overrides' (and optionally 'name')")
        own = tuple(str(x) for x in run["overrides"] or [])
        trials.append(Trial(str(run.get("name", f"run{i}")), common + own, {"overrides": " ".join(own)}))
    return tuple(trials)


def _search_spec(search, where: str) -> dict:
    """The ``search`` form checked, with its defaults: ``{space, trials, seed, sampler}``."""
    if not isinstance(search, dict):
        raise config_lib.ConfigError(f"{where}: 'search' must be a mapping with 'space' and 'trials'")
    unknown = set(search) - {"space", "trials", "seed", "sampler"}
    if unknown:
        raise config_lib.ConfigError(f"{where}: unknown keys in 'search': {sorted(unknown)}")
    space = search.get("space")
    if not isinstance(space, dict) or not space:
        raise config_lib.ConfigError(f"{where}: search.space must map config keys to ranges or choices")
    for key, range_ in space.items():
        _check_range(key, range_)
    trials, seed = search.get("trials"), search.get("seed", 0)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise config_lib.ConfigError(f"{where}: search.trials must be a positive integer, got {trials!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise config_lib.ConfigError(f"{where}: search.seed must be an integer, got {seed!r}")
    sampler = search.get("sampler", "random")
    if sampler not in SAMPLERS:
        raise config_lib.ConfigError(f"{where}: search.sampler must be one of {SAMPLERS}, got {sampler!r}")
    return {"space": space, "trials": trials, "seed": seed, "sampler": sampler}


def _check_range(key: str, range_) -> None:
    """ConfigError naming ``key`` unless ``range_`` is ``{kind: args}`` of one of ``SPACE_KINDS``."""
    what = f"search.space {key}: {range_!r}"
    if not isinstance(range_, dict) or len(range_) != 1 or next(iter(range_)) not in SPACE_KINDS:
        raise config_lib.ConfigError(f"{what} must be {{kind: args}} with a kind of {SPACE_KINDS}")
    kind, args = next(iter(range_.items()))
    if kind == "choice":
        if not isinstance(args, list) or not args:
            raise config_lib.ConfigError(f"{what}: choice needs a non-empty list of values")
        return
    numbers = isinstance(args, list) and len(args) == 2 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in args)
    if not numbers or not args[0] < args[1]:
        raise config_lib.ConfigError(f"{what}: {kind} needs [low, high] with low < high")
    if kind in ("int", "logint") and not all(isinstance(x, int) for x in args):
        raise config_lib.ConfigError(f"{what}: {kind} needs integer bounds")
    if kind.startswith("log") and args[0] <= 0:
        raise config_lib.ConfigError(f"{what}: {kind} needs low > 0")


def _import_optuna():
    try:
        import optuna
    except ImportError:
        raise config_lib.ConfigError(f"a sweep's 'search' form samples with Optuna: {EXTRA_HINT}") from None
    return optuna


def sample_space(space: dict, trials: int, seed: int, sampler: str) -> list[dict]:
    """``trials`` settings ``{key: value}`` drawn from ``space`` by Optuna's seeded sampler (``random``, or
    ``qmc``: a scrambled Sobol sequence, spreading few trials evenly). The same arguments give the same
    settings, and asking for more trials keeps the first ones."""
    import warnings

    optuna = _import_optuna()
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {}
    for key, range_ in space.items():
        (kind, args), = range_.items()
        if kind == "choice":  # sampled as an index: Optuna's categories must be scalars, values may be lists
            distributions[key] = CategoricalDistribution(list(range(len(args))))
        elif kind in ("int", "logint"):
            distributions[key] = IntDistribution(args[0], args[1], log=kind == "logint")
        else:
            distributions[key] = FloatDistribution(float(args[0]), float(args[1]), log=kind == "loguniform")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # QMCSampler is "experimental"
        chosen = (optuna.samplers.RandomSampler(seed=seed) if sampler == "random"
                  else optuna.samplers.QMCSampler(seed=seed, scramble=True))
        study = optuna.create_study(sampler=chosen)
        settings = []
        for _ in range(trials):
            asked = study.ask(distributions)
            study.tell(asked, 0.0)  # QMC walks its sequence over completed trials; the value is not used
            settings.append({
                key: space[key]["choice"][value] if "choice" in space[key] else value
                for key, value in asked.params.items()
            })
    return settings


def _scheduler_spec(scheduler, where: str) -> dict | None:
    if scheduler is None:
        return None
    if scheduler == "asha":
        scheduler = {"asha": {}}
    if not isinstance(scheduler, dict) or set(scheduler) != {"asha"}:
        raise config_lib.ConfigError(f"{where}: scheduler must be 'asha' or {{asha: {{grace_period: ...}}}}")
    options = scheduler["asha"] or {}
    unknown = set(options) - set(ASHA_DEFAULTS)
    if unknown:
        raise config_lib.ConfigError(f"{where}: unknown scheduler.asha keys {sorted(unknown)}")
    options = {**ASHA_DEFAULTS, **options}
    for name in ("grace_period", "brackets"):
        value = options[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise config_lib.ConfigError(f"{where}: scheduler.asha.{name} must be an integer >= 1, got {value!r}")
    if not isinstance(options["reduction_factor"], (int, float)) or not options["reduction_factor"] > 1:
        raise config_lib.ConfigError(f"{where}: scheduler.asha.reduction_factor must be > 1")
    return {"asha": options}


def sweep_runs(sweep_path) -> tuple[list[tuple[str, list[str]]], str | None]:
    """``([(name, overrides)], base config path)`` of a sweep file (a search's sampled trials included)."""
    sweep = load_sweep(sweep_path)
    return [(trial.name, list(trial.overrides)) for trial in sweep.trials], sweep.base


# --- validating a sweep against its configs ---------------------------------------------------------------


def sweep_root(sweep: Sweep, config_path, overrides: Sequence[str]) -> str:
    """The sweep directory: ``run.dir`` of the base config with the command line's overrides."""
    return config_lib.load_config(config_path or sweep.base, list(overrides)).run.dir


def trial_configs(sweep: Sweep, trials: Sequence[Trial], config_path, overrides: Sequence[str],
                  root: str) -> list[config_lib.TrainConfig]:
    """Every trial's config (the command line's overrides last, ``run.dir = <root>/<name>``), each validated,
    and the sweep's metric, scheduler and search ranges checked against them; ConfigError naming the trial and
    key otherwise. Nothing has started when this raises."""
    config_path = config_path or sweep.base
    configs = []
    for trial in trials:
        try:
            configs.append(config_lib.load_config(
                config_path, [*trial.overrides, *overrides, f"run.dir={root}/{trial.name}"]))
        except config_lib.ConfigError as error:
            raise config_lib.ConfigError(f"sweep trial {trial.name}: {error}") from None
    if sweep.search is not None:
        _check_range_ends(sweep.search["space"], trials[0], config_path, overrides)
    if sweep.metric is not None and sweep.metric.startswith("eval/"):
        for trial, config in zip(trials, configs):
            reported = eval_metric_names(config)
            if sweep.metric not in reported:
                raise config_lib.ConfigError(
                    f"metric {sweep.metric!r}: trial {trial.name} does not report it; its evaluations (eval.every="
                    f"{config.eval.every}, eval.opponents, eval.labelled_set) report {reported or 'nothing'}"
                )
    if sweep.scheduler is not None:
        grace = sweep.scheduler["asha"]["grace_period"]
        shortest = min(config.run.iterations for config in configs)
        if grace > shortest:
            raise config_lib.ConfigError(
                f"scheduler.asha.grace_period ({grace} iterations) exceeds a trial's run.iterations ({shortest})")
    return configs


def _check_range_ends(space: dict, trial: Trial, config_path, overrides: Sequence[str]) -> None:
    """Each range's ends and every choice, in turn, in a sampled trial's config: a range that reaches past
    what the config accepts fails now, naming it, not when a later sample falls there."""
    for key, range_ in space.items():
        (kind, args), = range_.items()
        for value in args:
            try:
                config_lib.load_config(config_path, [*trial.overrides, f"{key}={value_text(value)}", *overrides])
            except config_lib.ConfigError as error:
                raise config_lib.ConfigError(f"search.space {key}: {range_!r}: at {value!r}: {error}") from None


def eval_metric_names(config: config_lib.TrainConfig) -> list[str]:
    """The scalar ``eval/...`` keys the trainer's periodic evaluation reports for ``config``
    (``dabjax.training.trainer.PeriodicEvaluation``)."""
    if not config.eval.every:
        return []
    names = [f"eval/{what}_vs_{opponent}" for opponent in config.eval.opponents for what in ("win_rate", "score")]
    if config.eval.labelled_set is not None:
        names += ["eval/best_result_min", "eval/best_result_mean"]
    return names


# --- the sweep directory: the record and each trial's status ----------------------------------------------


def read_record(root) -> dict | None:
    path = pathlib.Path(root) / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(root, sweep: Sweep, trials: Sequence[Trial], overrides: Sequence[str]) -> None:
    record = {
        "sweep_file": sweep.path, "form": sweep.form, "metric": sweep.metric, "mode": sweep.mode,
        "scheduler": sweep.scheduler, "search": sweep.search, "command_line_overrides": list(overrides),
        "trials": [{"name": t.name, "overrides": list(t.overrides), "params": t.params} for t in trials],
    }
    pathlib.Path(root).mkdir(parents=True, exist_ok=True)
    path = pathlib.Path(root) / RECORD_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)  # atomic: a kill leaves the old record or the new one


def replayed_trials(sweep: Sweep, root) -> tuple[Trial, ...]:
    """The trials to run: a search whose sweep directory already has a record replays the trials sampled at its
    first launch (and samples only those beyond them, when ``trials`` grew), so that a rerun resumes the same
    trials whatever Optuna's version; ConfigError when that record's search space differs."""
    record = read_record(root)
    if sweep.search is None or record is None or record.get("search") is None:
        return sweep.trials
    stored, fresh = record["search"], sweep.search
    if {k: v for k, v in stored.items() if k != "trials"} != {k: v for k, v in fresh.items() if k != "trials"}:
        raise config_lib.ConfigError(
            f"the sweep directory {root} was started from another search (its {RECORD_FILE} has space, seed and "
            f"sampler {json.dumps({k: v for k, v in stored.items() if k != 'trials'})}); give another run.dir "
            "to start a new search"
        )
    kept = [Trial(t["name"], tuple(t["overrides"]), t["params"]) for t in record["trials"]]
    return tuple((kept + list(sweep.trials[len(kept):]))[: fresh["trials"]])


def trial_status(run: config_lib.RunSection) -> str:
    """``finished`` (its budget reached and the last iteration saved), ``stopped early`` (by the scheduler),
    ``unfinished`` or ``not started``, from the run directory ``run.dir`` and the budget in ``run``."""
    run_dir = pathlib.Path(run.dir)
    if (run_dir / STOPPED_EARLY_FILE).is_file():
        return STOPPED_EARLY
    try:
        rows = run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
    except (FileNotFoundError, ValueError):  # no log yet, or a damaged one: the trainer's resume deals with it
        rows = []
    if not rows:
        return NOT_STARTED
    saved = checkpoint.saved_iterations(checkpoint.checkpoint_root(run_dir))
    return FINISHED if _budget_reached(run, rows[-1]) and rows[-1]["iteration"] in saved else UNFINISHED


def _budget_reached(run: config_lib.RunSection, last_row: dict) -> bool:
    return run_dir_lib.stop_reason(run, last_row["iteration"], last_row.get("time", 0.0)) is not None


def _mark_if_stopped_early(run: config_lib.RunSection, why: str) -> None:
    """Writes ``stopped_early.json`` in the run directory of a trial that ended before its budget."""
    last = _last_row(run.dir)
    if not last or not _budget_reached(run, last):
        note = {"by": why, "iteration": last.get("iteration", 0), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        (pathlib.Path(run.dir) / STOPPED_EARLY_FILE).write_text(json.dumps(note) + "\n")


# --- running a sweep --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """How trials use a Ray cluster's resources: per trial ``cpus`` and ``gpus`` (None: 1 when the cluster has
    GPUs, else 0; a fraction packs several trials on one GPU), and at most ``max_concurrent`` trials at once
    (None: as many as the resources allow)."""

    cpus: float = 1.0
    gpus: float | None = None
    max_concurrent: int | None = None


def run_sweep(sweep_path, config_path, overrides: Sequence[str], quiet: bool = False, launcher: str = "sequential",
              ray_settings: RaySettings = RaySettings()) -> list[tuple[str, dict]]:
    """Runs (or resumes) every trial of the sweep file, then prints the summary and writes it to the sweep
    directory; returns ``[(trial name, its last metrics row)]`` in the file's order (empty for a trial that
    never ran). ConfigError before anything starts when a trial, the metric or the launcher does not fit."""
    return launch(sweep_path, config_path, overrides, quiet, launcher, ray_settings)[0]


def launch(sweep_path, config_path, overrides: Sequence[str], quiet: bool = False, launcher: str = "sequential",
           ray_settings: RaySettings = RaySettings()) -> tuple[list[tuple[str, dict]], list[str]]:
    """``run_sweep``, also returning the names of the trials left not done (interrupted, failed)."""
    sweep = load_sweep(sweep_path)
    if launcher not in ("sequential", "ray"):
        raise config_lib.ConfigError(f"--launcher must be sequential or ray, got {launcher!r}")
    why = sweep.needs_ray()
    if launcher == "sequential" and why:
        raise config_lib.ConfigError(
            f"sweep file {sweep.path!r} needs --launcher ray: {why} (install it with {EXTRA_HINT})")
    if launcher == "ray":
        _import_ray()  # fail before writing anything when Ray is missing
    root = sweep_root(sweep, config_path, overrides)
    trials = replayed_trials(sweep, root)
    configs = trial_configs(sweep, trials, config_path, overrides, root)
    write_record(root, sweep, trials, overrides)
    say = (lambda text: None) if quiet else tqdm.write
    todo = []
    for trial, config in zip(trials, configs):
        status = trial_status(config.run)
        if status in (FINISHED, STOPPED_EARLY):
            say(f"=== sweep trial {trial.name}: {status}, skipped ({config.run.dir})")
        else:
            todo.append((trial, config))
    if launcher == "sequential":
        for trial, config in todo:
            say(f"=== sweep trial {trial.name}: {config.run.dir}")
            train_cli.train(config, quiet=quiet)
            if trial_status(config.run) != FINISHED:  # Ctrl-C: the trainer saved and returned; stop the sweep too
                break
    elif todo:
        _run_with_ray(sweep, todo, root, ray_settings, quiet)
    text, _ = summarize(root, write=True)
    print(text)
    left = [trial.name for trial, config in todo if trial_status(config.run) in (NOT_STARTED, UNFINISHED)]
    if left:
        tqdm.write(f"{len(left)} of {len(trials)} trials are not done ({', '.join(left)}): the same command again "
                   "resumes them from their checkpoints", file=sys.stderr)
    return [(trial.name, _last_row(config.run.dir)) for trial, config in zip(trials, configs)], left


def _last_row(run_dir) -> dict:
    try:
        rows = run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
    except (FileNotFoundError, ValueError):
        return {}
    return rows[-1] if rows else {}


def _import_ray():
    try:
        import ray
        from ray import tune
    except ImportError:
        raise config_lib.ConfigError(f"--launcher ray needs Ray Tune: {EXTRA_HINT}") from None
    return ray, tune


def start_ray(attempts: int = 3, **init_args) -> None:
    """``ray.init(include_dashboard=False, **init_args)``: joins ``RAY_ADDRESS``'s cluster, else starts a local Ray.
    A local start is tried ``attempts`` times: Ray gives its processes a few seconds to start, which a machine
    busy with other work can miss."""
    ray, _ = _import_ray()
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
    training = train_cli.BoxesZeroTraining(config)
    # A trial's output goes to the driver's terminal, interleaved with the others': messages yes, bars no.
    run = dataclasses.replace(config.run, progress=False)
    run_dir_lib.train_in_run_dir(run, config_lib.to_yaml(config), training, report=TuneReporter(tune.report, metric))


def _run_with_ray(sweep: Sweep, todo: list, root: str, settings: RaySettings, quiet: bool) -> None:
    """The trials of ``todo`` (``[(Trial, TrainConfig)]``) as Ray Tune trials; a trial the scheduler stops gets
    ``stopped_early.json`` in its run directory. Starts a local Ray (or joins ``RAY_ADDRESS``'s cluster) unless
    Ray is already running in this process, and stops what it started."""
    ray, tune = _import_ray()
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
                _mark_if_stopped_early(run_dirs[trial.config["trial"]], "the ASHA scheduler")

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


# --- the summary ------------------------------------------------------------------------------------------


def default_metric(rows_by_trial: dict) -> tuple[str | None, str]:
    """``(metric, mode)`` for a summary whose sweep names none: the labelled set's worst-move accuracy, else the
    first evaluation score, else the training loss."""
    keys = {k for rows in rows_by_trial.values() for row in rows for k, v in row.items() if isinstance(v, float)}
    if "eval/best_result_min" in keys:
        return "eval/best_result_min", "max"
    scores = sorted(k for k in keys if k.startswith("eval/score_vs_"))
    if scores:
        return scores[0], "max"
    return ("loss", "min") if "loss" in keys else (None, "max")


def summarize(
    root, metric: str | None = None, mode: str | None = None, write: bool = True,
) -> tuple[str, pathlib.Path | None]:
    """The table of a sweep directory's trials, best first by ``metric`` (its last value; default: the sweep's,
    else ``default_metric``), and, with ``write``, ``summary.txt`` and ``summary.png`` (the metric over training
    time per trial) in ``root``. Returns ``(table, the PNG's path or None)``. Reads only the run directories and
    ``sweep.json`` (without one, every subdirectory with a metrics log is a trial)."""
    root = pathlib.Path(root)
    record = read_record(root)
    if record is not None:
        entries = [(t["name"], t["params"]) for t in record["trials"]]
    elif root.is_dir():
        entries = [(p.name, {}) for p in sorted(root.iterdir()) if (p / run_dir_lib.METRICS_FILE).is_file()]
    else:
        raise FileNotFoundError(f"no sweep directory at {root}")
    if not entries:
        raise FileNotFoundError(f"no trials in {root}: neither {RECORD_FILE} nor run directories with metrics")
    rows_by_trial, statuses = {}, {}
    for name, _ in entries:
        run_dir = root / name
        try:
            rows_by_trial[name] = run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
        except (FileNotFoundError, ValueError):
            rows_by_trial[name] = []
        statuses[name] = _status_from_dir(run_dir)
    if metric is None and record is not None and record.get("metric") is not None:
        metric, mode = record["metric"], mode or record.get("mode")
    if metric is None:
        metric, default_mode = default_metric(rows_by_trial)
        mode = mode or default_mode
    mode = mode or "max"
    sign = 1.0 if mode == "max" else -1.0

    def last(name, key):
        values = [row[key] for row in rows_by_trial[name] if isinstance(row.get(key), (int, float))]
        return values[-1] if values else None

    def best(name):
        values = [row[metric] for row in rows_by_trial[name] if isinstance(row.get(metric), (int, float))]
        return (max if mode == "max" else min)(values) if values else None

    ranked = sorted(entries, key=lambda e: (last(e[0], metric) is None, -sign * (last(e[0], metric) or 0.0)))
    param_keys = list(dict.fromkeys(k for _, params in entries for k in params))
    evals = sorted({k for rows in rows_by_trial.values() for row in rows for k, v in row.items()
                    if k.startswith("eval/") and k != metric and isinstance(v, (int, float))})
    shown = [k for k in ("loss", *evals) if k != metric]
    header = ["#", "trial", "status", *param_keys, f"{metric} (last)", f"best ({mode})", "iteration", "minutes",
              *shown]
    table = [header]
    for rank, (name, params) in enumerate(ranked, 1):
        minutes = last(name, "time")
        cells = [str(rank), name, statuses[name], *(_cell(params.get(k, "")) for k in param_keys),
                 _cell(last(name, metric)), _cell(best(name)), _cell(last(name, "iteration")),
                 _cell(minutes / 60 if minutes is not None else None), *(_cell(last(name, k)) for k in shown)]
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    text = f"sweep {root}: {len(entries)} trials, best first by {metric} ({mode}, last value)\n" + "\n".join(lines)
    plot = None
    if write:
        (root / SUMMARY_TEXT).write_text(text + "\n")
        if metric is not None and any(last(name, metric) is not None for name, _ in entries):
            from dabjax.evaluation import plots

            plot = plots.plot_metric_over_time(
                {name: rows_by_trial[name] for name, _ in ranked}, metric, root / SUMMARY_PLOT,
                title=f"{root.name}: {metric} per trial",
            )
            text += f"\nwrote {root / SUMMARY_TEXT} and {plot}"
    return text, plot


def _status_from_dir(run_dir: pathlib.Path) -> str:
    """``trial_status`` with the budget of the run directory's own config."""
    config_path = run_dir / run_dir_lib.CONFIG_FILE
    if not config_path.is_file():
        return NOT_STARTED
    try:
        run = config_lib.load_config(str(config_path)).run
    except config_lib.ConfigError:
        return UNFINISHED
    return trial_status(dataclasses.replace(run, dir=str(run_dir)))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e-2 and value != 0 else f"{value:.3f}"
    return str(value)


# --- python -m dabjax.cli.sweep ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dabjax.cli.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="the table and plot of a sweep directory's trials")
    summary.add_argument("dir", help="the sweep directory (the sweep's run.dir)")
    summary.add_argument("--metric", help="rank by this metrics key (default: the sweep's)")
    summary.add_argument("--mode", choices=MODES, help="max or min (default: the sweep's, else max)")
    args = parser.parse_args(argv)
    try:
        text, _ = summarize(args.dir, args.metric, args.mode)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
