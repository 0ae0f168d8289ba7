"""The sweep file: several training configs in one YAML file, parsed, sampled and checked against the configs it
makes (the core of ``dabjax train --sweep FILE``; ``dabjax.cli.sweep`` runs it).

A sweep file (a path, or a built-in sweep's name such as ``3x3_ablation``: ``dabjax.package_data``) has ``base``
(a config file, looked for in the sweep file's folder first (an absolute path is itself), then as a built-in
config's name, then from the current folder; optional), ``overrides`` (applied to every trial, optional) and
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

Every trial is validated before any starts (``trial_configs``): a bad key, value or range fails at once, naming
it. Trial ``NAME`` trains in the run directory ``<run.dir>/NAME``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pathlib
from typing import Sequence

from dabjax import package_data
from dabjax.training import config as config_lib

EXTRA_HINT = "pip install -e '.[sweep]' (or pip install 'dabjax[sweep]': ray[tune] and optuna)"

FORMS = ("runs", "grid", "search")
SPACE_KINDS = ("uniform", "loguniform", "int", "logint", "choice")
SAMPLERS = ("random", "qmc")
MODES = ("max", "min")
ASHA_DEFAULTS = {"grace_period": 1, "reduction_factor": 3, "brackets": 1}


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
    """Parses (and, for the ``search`` form, samples) a sweep file, a path or a built-in sweep's name
    (``3x3_ablation``); ConfigError naming the bad entry."""
    from omegaconf import OmegaConf

    try:
        path = package_data.sweep_file(sweep_path)
    except FileNotFoundError as error:
        raise config_lib.ConfigError(str(error)) from None
    where = f"sweep file {str(path)!r}"
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
    return Sweep(str(path), form, None if base is None else _base_config(str(base), path), trials, metric, mode,
                 scheduler, search)


def _base_config(base: str, sweep_path: pathlib.Path) -> str:
    """Where the sweep file's ``base`` is: in the sweep file's folder (an absolute path is itself), else the
    built-in config of that name, else ``base`` as written (a path from the current folder; loading it names it
    if it is missing). The first two as absolute paths: no file of the current folder can shadow them."""
    beside = sweep_path.parent / base
    if beside.is_file():
        return str(beside.resolve())
    builtin = package_data.builtin_config(base)
    return base if builtin is None else str(builtin.resolve())


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
            raise config_lib.ConfigError(f"{where}: run #{i} needs 'overrides' (and optionally 'name')")
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
    (``dabjax.evaluation.periodic.PeriodicEvaluation``)."""
    if not config.eval.every:
        return []
    names = [f"eval/{what}_vs_{opponent}" for opponent in config.eval.opponents for what in ("win_rate", "score")]
    if config.eval.labelled_set is not None:
        names += ["eval/best_result_min", "eval/best_result_mean"]
    return names
