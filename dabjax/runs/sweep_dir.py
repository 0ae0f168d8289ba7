"""A sweep's directory (``run.dir`` of a sweep): its record ``sweep.json`` (the trials, their settings and the metric;
a search's sampled trials are replayed from it) and each trial's status, read from the trial's run directory
(``dabjax.runs.run_dir``): ``finished``, ``unfinished``, ``not started`` or ``stopped early`` (the scheduler stopped
it: its run directory holds ``stopped_early.json``). The run directories are the record a rerun resumes from.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Sequence

from dabjax.runs import run_dir as run_dir_lib
from dabjax.training import checkpoint
from dabjax.training import config as config_lib
from dabjax.training.sweep_file import Sweep, Trial

RECORD_FILE = "sweep.json"  # <sweep dir>/sweep.json: the trials, their settings, the metric
STOPPED_EARLY_FILE = "stopped_early.json"  # <trial run dir>/stopped_early.json: the scheduler stopped it

# Trial statuses, from the run directory.
NOT_STARTED, UNFINISHED, FINISHED, STOPPED_EARLY = "not started", "unfinished", "finished", "stopped early"


def read_record(root) -> dict | None:
    """The sweep directory's ``sweep.json``, or None."""
    path = pathlib.Path(root) / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(root, sweep: Sweep, trials: Sequence[Trial], overrides: Sequence[str]) -> None:
    """Writes ``sweep.json``: the sweep's trials, their settings and the metric."""
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
    return FINISHED if budget_reached(run, rows[-1]) and rows[-1]["iteration"] in saved else UNFINISHED


def budget_reached(run: config_lib.RunSection, row: dict) -> bool:
    """Whether a run whose last logged metrics row is ``row`` has reached its budget."""
    return run_dir_lib.stop_reason(run, row["iteration"], row.get("time", 0.0)) is not None


def mark_if_stopped_early(run: config_lib.RunSection, why: str) -> None:
    """Writes ``stopped_early.json`` in the run directory of a trial that ended before its budget."""
    last = last_row(run.dir)
    if not last or not budget_reached(run, last):
        note = {"by": why, "iteration": last.get("iteration", 0), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        (pathlib.Path(run.dir) / STOPPED_EARLY_FILE).write_text(json.dumps(note) + "\n")


def last_row(run_dir) -> dict:
    """The last row of a run directory's metrics log; empty when it has none (or no readable one)."""
    try:
        rows = run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
    except (FileNotFoundError, ValueError):
        return {}
    return rows[-1] if rows else {}
