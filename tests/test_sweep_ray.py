"""Sweeps through Ray Tune (``--launcher ray``, dabjax.cli.sweep_ray) on the CPU, with the smoke config: the same
per-run results as the sequential runner, a search form ranked by its summary, a killed sweep resumed, and the
checks that fail a sweep before anything starts.

Ray's start-up is slow, so the module shares one local Ray instance (2 CPUs: two trials at once)."""

import dataclasses
import json
import pathlib
import sys

import pytest

from dabjax.cli import sweep as sweep_lib
from dabjax.cli import sweep_ray, sweep_summary
from dabjax.cli import train as train_cli
from dabjax.runs import run_dir as run_dir_lib
from dabjax.runs import sweep_dir, train_boxeszero
from dabjax.training import checkpoint, sweep_file
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
# Wall-clock measurements differ between any two runs; everything else a run logs is fixed by its seed.
TIMINGS = {"time", *trainer_lib.TIMING_METRICS}  # "time": the shell's training minutes


@pytest.fixture(scope="module")
def ray_instance():
    import ray

    sweep_ray.start_ray(num_cpus=2, log_to_driver=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def write_sweep(path: pathlib.Path, body: str) -> str:
    path.write_text(f"base: {SMOKE}\n{body}")
    return str(path)


def rows_without_timings(run_dir) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in run_dir_lib.read_metrics(run_dir)]


def test_ray_trials_give_the_sequential_runners_results_and_are_not_redone(tmp_path, ray_instance, capsys):
    sweep = write_sweep(tmp_path / "sweep.yaml", "overrides: [run.iterations=2]\ngrid: {run.seed: [0, 1]}\n")
    sequential = sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'seq'}"], quiet=True)
    parallel = sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'ray'}"], quiet=True, launcher="ray")
    names = ["seed=0", "seed=1"]
    assert [name for name, _ in sequential] == [name for name, _ in parallel] == names
    for name in names:
        seq, par = tmp_path / "seq" / name, tmp_path / "ray" / name
        assert [row["iteration"] for row in run_dir_lib.read_metrics(par)] == [1, 2]
        assert rows_without_timings(par) == rows_without_timings(seq)  # same seed, same numbers
        assert "eval/win_rate_vs_level1" in run_dir_lib.read_metrics(par)[-1]
        # Each trial is the normal trainer in its normal run directory.
        assert (par / "config.yaml").read_text() == (seq / "config.yaml").read_text().replace(
            str(tmp_path / "seq"), str(tmp_path / "ray"))
        assert any((par / "tb").iterdir()) and checkpoint.saved_iterations(par / "checkpoints")[-1] == 2
    for directory in ("seq", "ray"):
        summary = (tmp_path / directory / "summary.txt").read_text()
        assert all(name in summary for name in names) and "finished" in summary
        assert (tmp_path / directory / "summary.png").read_bytes()[:4] == b"\x89PNG"
    # The same command again: every trial is finished, none is redone (no Ray trial even starts).
    before = {name: (tmp_path / "ray" / name / "metrics.jsonl").read_bytes() for name in names}
    capsys.readouterr()
    sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'ray'}"], launcher="ray")
    out = capsys.readouterr().out
    assert all(f"sweep trial {name}: finished, skipped" in out for name in names)
    assert before == {name: (tmp_path / "ray" / name / "metrics.jsonl").read_bytes() for name in names}


@pytest.mark.slow  # minutes: `python -m pytest -m slow` (docs/maintaining.md)
def test_a_search_runs_its_sampled_trials_and_the_summary_ranks_them(tmp_path, ray_instance, capsys):
    sweep = write_sweep(tmp_path / "search.yaml", (
        "overrides: [run.iterations=1, eval.every=1]\n"
        "metric: eval/score_vs_level1\nmode: max\n"
        "scheduler: {asha: {grace_period: 1, reduction_factor: 2}}\n"
        "search:\n  trials: 3\n  seed: 7\n  space:\n"
        "    train.lr: {loguniform: [1.0e-4, 1.0e-1]}\n"
        "    search.num_simulations: {choice: [2, 4]}\n"
    ))
    root = tmp_path / "search"
    sweep_lib.run_sweep(sweep, None, [f"run.dir={root}"], quiet=True, launcher="ray",
                        ray_settings=sweep_ray.RaySettings(max_concurrent=2))
    record = json.loads((root / "sweep.json").read_text())
    sampled = sweep_file.load_sweep(sweep).trials
    assert [t["name"] for t in record["trials"]] == ["trial000", "trial001", "trial002"]
    assert [t["params"] for t in record["trials"]] == [t.params for t in sampled]
    for trial in sampled:  # each trial trained its own sampled settings
        config = config_lib.load_config(str(root / trial.name / "config.yaml"))
        assert config.train.lr == pytest.approx(trial.params["train.lr"])
        assert config.search.num_simulations == trial.params["search.num_simulations"]
    last = {t.name: sweep_dir.last_row(root / t.name).get("eval/score_vs_level1") for t in sampled}
    assert all(value is not None for value in last.values())
    capsys.readouterr()
    assert sweep_lib.main(["summary", str(root)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "best first by eval/score_vs_level1 (max" in table[0]
    ranked = [line.split()[1] for line in table[2:5]]
    assert sorted(last.values(), reverse=True) == [last[name] for name in ranked]
    assert all(line.split()[2] in ("finished", "stopped") for line in table[2:5])  # ASHA may stop one early
    assert (root / "summary.png").read_bytes()[:4] == b"\x89PNG"


def test_a_killed_sweep_resumes_its_unfinished_trials_only(tmp_path, ray_instance, capsys):
    """The state a kill leaves: one trial finished, one cut after its checkpoint at iteration 1 (with a logged
    iteration 2 that no checkpoint holds and a line torn in the middle of a write), one the scheduler stopped."""
    sweep = write_sweep(tmp_path / "sweep.yaml", (
        "overrides: [run.iterations=2, eval.every=0]\n"
        "runs:\n  - {name: done, overrides: []}\n  - {name: cut, overrides: []}\n  - {name: stopped, overrides: []}\n"
    ))
    root = tmp_path / "sweep"
    config = config_lib.load_config(str(SMOKE), ["run.iterations=2", "eval.every=0"])

    def in_dir(name, **run):
        return dataclasses.replace(config, run=dataclasses.replace(config.run, dir=str(root / name), **run))

    train_boxeszero.train(in_dir("done"), quiet=True)
    train_boxeszero.train(in_dir("cut", iterations=1), quiet=True)
    with open(root / "cut" / "metrics.jsonl", "a") as log:
        log.write(json.dumps({**run_dir_lib.read_metrics(root / "done")[1]}) + "\n" + '{"iteration": 3, "lo')
    (root / "stopped").mkdir()  # what a trial the scheduler stopped at iteration 1 leaves (its checkpoints aside)
    (root / "stopped" / "metrics.jsonl").write_text(json.dumps(run_dir_lib.read_metrics(root / "done")[0]) + "\n")
    sweep_dir.mark_if_stopped_early(in_dir("stopped").run, "the ASHA scheduler")
    statuses = {name: sweep_dir.trial_status(in_dir(name).run) for name in ("done", "cut", "stopped")}
    assert statuses == {"done": "finished", "cut": "unfinished", "stopped": "stopped early"}
    done_log = (root / "done" / "metrics.jsonl").read_bytes()
    capsys.readouterr()
    _, left = sweep_lib.launch(sweep, None, [f"run.dir={root}"], launcher="ray")
    out = capsys.readouterr().out
    assert left == []
    assert "sweep trial done: finished, skipped" in out and "sweep trial stopped: stopped early, skipped" in out
    assert (root / "done" / "metrics.jsonl").read_bytes() == done_log  # not redone
    assert [row["iteration"] for row in run_dir_lib.read_metrics(root / "stopped")] == [1]  # not resumed
    # The cut trial went on from its checkpoint: the same numbers as the trial that was never cut.
    assert rows_without_timings(root / "cut") == rows_without_timings(root / "done")
    assert sweep_dir.trial_status(in_dir("cut").run) == "finished"


def test_resources_the_cluster_lacks_fail_at_once(tmp_path, ray_instance):
    sweep = write_sweep(tmp_path / "sweep.yaml", "grid: {run.seed: [0]}\n")
    for settings, message in ((sweep_ray.RaySettings(cpus=3), "--cpus-per-trial 3: the Ray cluster has 2 CPUs"),
                              (sweep_ray.RaySettings(gpus=1), "--gpus-per-trial 1: the Ray cluster has 0 GPUs")):
        with pytest.raises(config_lib.ConfigError, match=message):
            sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'x'}"], launcher="ray", ray_settings=settings)
    assert not (tmp_path / "x" / "seed=0").exists()


# --- checks before anything starts (no Ray needed) --------------------------------------------------------


SEARCH = "metric: eval/score_vs_level1\nsearch:\n  trials: 3\n  space:\n    {space}\n"


@pytest.mark.parametrize("space, message", [
    ("train.nope: {choice: [1, 2]}", "train.nope"),
    ("train.lr: {uniform: [-1.0, 1.0]}", r"search.space train.lr: .*at -1.0: train.lr must be > 0"),
    ("train.lr: {loguniform: [0.0, 1.0]}", "search.space train.lr.*low > 0"),
    ("train.lr: {uniform: [0.5, 0.1]}", "search.space train.lr.*low < high"),
    ("train.batch_size: {uniform: [8, 16]}", "train.batch_size"),
    ("train.lr: {normal: [0, 1]}", "search.space train.lr.*kind"),
    ("search.num_simulations: {choice: []}", "search.space search.num_simulations.*non-empty"),
])
def test_a_bad_search_key_or_range_fails_at_once_naming_it(tmp_path, space, message):
    sweep = write_sweep(tmp_path / "bad.yaml", SEARCH.format(space=space))
    with pytest.raises(config_lib.ConfigError, match=message):
        sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'bad'}"], quiet=True, launcher="ray")
    assert not (tmp_path / "bad").exists()  # nothing written, nothing started


def test_sweep_file_errors_name_the_problem(tmp_path):
    def fails(body, message, launcher="ray"):
        sweep = write_sweep(tmp_path / "bad.yaml", body)
        with pytest.raises(config_lib.ConfigError, match=message):
            sweep_lib.run_sweep(sweep, None, [f"run.dir={tmp_path / 'bad'}"], quiet=True, launcher=launcher)
        assert not (tmp_path / "bad").exists()

    search = SEARCH.format(space="train.lr: {loguniform: [1.0e-4, 1.0e-2]}")
    fails(search, r"needs --launcher ray: its 'search' form.*\.\[sweep\]", launcher="sequential")
    fails("metric: loss\nscheduler: asha\ngrid: {run.seed: [0]}\n", "needs --launcher ray", launcher="sequential")
    fails("scheduler: asha\ngrid: {run.seed: [0]}\n", "a scheduler needs a 'metric'")
    fails(search.replace("eval/score_vs_level1", "eval/best_result_min"),
          "metric 'eval/best_result_min': trial trial000 does not report it")
    fails("metric: eval/score_vs_level2\ngrid: {run.seed: [0]}\n", "score_vs_level2")  # smoke plays level1 only
    fails("metric: loss\nscheduler: {asha: {grace_period: 9}}\ngrid: {run.seed: [0]}\n", "grace_period")
    fails("runs: []\ngrid: {run.seed: [0]}\n", "exactly one of")
    fails("grid: {run.seed: [0]}\nmode: maximum\n", "mode must be one of")
    fails("runs:\n  - {name: a, overrides: []}\n  - {name: a, overrides: [run.seed=1]}\n", "names repeat")


def test_missing_ray_or_optuna_names_the_extra(tmp_path, monkeypatch):
    grid = write_sweep(tmp_path / "grid.yaml", "grid: {run.seed: [0]}\n")
    search = write_sweep(tmp_path / "search.yaml", SEARCH.format(space="train.lr: {loguniform: [1.0e-4, 1.0e-2]}"))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(config_lib.ConfigError, match=r"--launcher ray needs Ray Tune: pip install -e '\.\[sweep\]'"):
        sweep_lib.run_sweep(grid, None, [f"run.dir={tmp_path / 'x'}"], launcher="ray")
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(config_lib.ConfigError, match=r"samples with Optuna: pip install -e '\.\[sweep\]'"):
        sweep_file.load_sweep(search)
    assert not (tmp_path / "x").exists()


def test_sampling_is_seeded_and_a_rerun_replays_the_recorded_trials(tmp_path):
    space = {"train.lr": {"loguniform": [1e-4, 1e-2]}, "search.num_simulations": {"choice": [2, 4]},
             "eval.opponents": {"choice": [["level1"], ["level1", "level2"]]}, "train.epochs": {"int": [1, 3]}}
    for sampler in sweep_file.SAMPLERS:
        five = sweep_file.sample_space(space, 5, seed=3, sampler=sampler)
        assert sweep_file.sample_space(space, 3, seed=3, sampler=sampler) == five[:3]  # more trials keep the first
        assert five != sweep_file.sample_space(space, 5, seed=4, sampler=sampler)
        assert all(1e-4 <= s["train.lr"] <= 1e-2 and s["train.epochs"] in (1, 2, 3) for s in five)
        assert all(s["eval.opponents"] in (["level1"], ["level1", "level2"]) for s in five)
    body = ("metric: loss\nmode: min\nsearch:\n  trials: {n}\n  space:\n"
            "    train.lr: {{loguniform: [1.0e-4, 1.0e-2]}}\n    train.epochs: {{int: [1, 3]}}\n")
    path = write_sweep(tmp_path / "search.yaml", body.format(n=2))
    root = tmp_path / "root"
    sweep = sweep_file.load_sweep(path)
    sweep_dir.write_record(root, sweep, sweep.trials, [])
    # A record from another Optuna version (other samples): the rerun replays the record, not a fresh draw.
    record = json.loads((root / "sweep.json").read_text())
    record["trials"][0]["overrides"][-2:] = ["train.lr=0.005", "train.epochs=2"]
    record["trials"][0]["params"] = {"train.lr": 0.005, "train.epochs": 2}
    (root / "sweep.json").write_text(json.dumps(record))
    more = sweep_file.load_sweep(write_sweep(tmp_path / "search.yaml", body.format(n=3)))
    replayed = sweep_dir.replayed_trials(more, root)
    assert [t.name for t in replayed] == ["trial000", "trial001", "trial002"]
    assert replayed[0].params == {"train.lr": 0.005, "train.epochs": 2} and replayed[1:] == more.trials[1:]
    assert sweep_file.trial_configs(more, replayed, None, [], str(root))[0].train.lr == 0.005
    other = sweep_file.load_sweep(write_sweep(tmp_path / "search.yaml", body.format(n=3).replace("1.0e-2", "1.0e-1")))
    with pytest.raises(config_lib.ConfigError, match="started from another search"):
        sweep_dir.replayed_trials(other, root)


def test_the_tune_reporter_carries_the_latest_evaluation_forward():
    sent = []
    reporter = sweep_ray.TuneReporter(sent.append, "eval/score_vs_level1")
    reporter({"iteration": 1, "loss": 2.0, "advanced": False, "samples_by_move": [1, 2]})
    assert sent == []  # no evaluation yet: Tune refuses a result without its metric
    reporter({"iteration": 2, "loss": 1.5, "eval/score_vs_level1": 0.75, "eval/best_result_by_move": [0.5]})
    reporter({"iteration": 3, "loss": 1.0})
    assert sent == [{"iteration": 2, "loss": 1.5, "eval/score_vs_level1": 0.75},
                    {"iteration": 3, "loss": 1.0, "eval/score_vs_level1": 0.75}]


def test_the_summary_reads_run_directories_without_a_record(tmp_path, capsys):
    """An older sweep directory (no sweep.json): every run directory with a metrics log is a trial."""
    for name, scores in (("a", [0.2, 0.4]), ("b", [0.9, 0.6]), ("c", [])):
        run_dir = tmp_path / name
        run_dir.mkdir()
        rows = [{"iteration": i + 1, "time": 60.0 * (i + 1), "loss": 1.0, "eval/score_vs_level1": s}
                for i, s in enumerate(scores)] or [{"iteration": 1, "time": 30.0, "loss": 2.0}]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    text, plot = sweep_summary.summarize(tmp_path)
    lines = text.splitlines()
    assert "best first by eval/score_vs_level1 (max" in lines[0]
    assert [line.split()[1] for line in lines[2:5]] == ["b", "a", "c"]  # last values 0.6, 0.4, none
    assert plot is not None and plot.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit):
        train_cli.main(["--launcher", "ray"])  # --launcher goes with --sweep
    with pytest.raises(SystemExit):
        train_cli.main(["--sweep", "x.yaml", "--max-concurrent", "2"])  # ... and --max-concurrent with ray
    assert "go with --sweep" in capsys.readouterr().err


def flat_settings(config) -> dict:
    """``{"search.endgame_pruning": True, ...}``: every setting of a config (dataclasses, or the nested dicts of
    ``key=value`` overrides) by its dotted key."""
    def walk(prefix, value):
        if dataclasses.is_dataclass(value):
            value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        if isinstance(value, dict):
            for key, inner in value.items():
                yield from walk(f"{prefix}{key}.", inner)
        else:
            yield prefix[:-1], value

    return dict(walk("", config))


def test_every_shipped_sweep_validates():
    """Each shipped sweep's trials are its file's: the base config with the file's common overrides, then each
    trial's own (a ``runs`` entry's overrides with its mode's preset, or a ``search`` trial's sample, inside its
    ranges), and nothing else, each in its own run directory."""
    from omegaconf import OmegaConf

    paths = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))
    assert [path.stem for path in paths] == ["3x3_ablation", "3x3_search"]
    for path in paths:
        spec = OmegaConf.to_container(OmegaConf.load(path))
        sweep = sweep_file.load_sweep(path)
        configs = sweep_file.trial_configs(sweep, sweep.trials, None, [], "runs/check")
        base = flat_settings(config_lib.load_config(path.parent / spec["base"], spec["overrides"]))
        if "runs" in spec:
            own = {run["name"]: run["overrides"] for run in spec["runs"]}
        else:
            own = {trial.name: [f"{k}={sweep_file.value_text(v)}" for k, v in trial.params.items()]
                   for trial in sweep.trials}
            assert len(own) == spec["search"]["trials"] == len({tuple(t.params.values()) for t in sweep.trials})
            for trial in sweep.trials:
                assert set(trial.params) == set(spec["search"]["space"]), trial
                for key, ranges in spec["search"]["space"].items():
                    ((kind, bounds),), value = ranges.items(), trial.params[key]
                    assert value in bounds if kind == "choice" else bounds[0] <= value <= bounds[1], (key, value)
        assert [trial.name for trial in sweep.trials] == list(own) and len(configs) == len(own) >= 2
        for (name, overrides), config in zip(own.items(), configs):
            settings = flat_settings(config)
            assert settings.pop("run.dir") == f"runs/check/{name}"
            wanted = flat_settings(OmegaConf.to_container(OmegaConf.from_dotlist(list(overrides))))
            if "mode" in wanted:  # a mode brings its preset (alphazero: no prunings, forward self-play, ...)
                wanted = {**flat_settings(config_lib.MODE_PRESETS[wanted["mode"]]), **wanted}
            for key, value in wanted.items():
                assert settings[key] == (pytest.approx(value) if isinstance(value, float) else value), (name, key)
            changed = {key for key, value in settings.items() if value != base[key]}
            assert changed <= set(wanted), (path.stem, name, changed - set(wanted))
            assert bool(changed) == bool(wanted), (path.stem, name)  # no trial repeats the base by mistake
