"""The summary of a sweep: its trials ranked by the sweep's metric in a table (``summary.txt``) and the metric over
training time per trial (``summary.png``), read from the sweep directory alone (``dabjax.runs.sweep_dir``).
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
from typing import Any

from dabjax.cli.faults import not_a_command
from dabjax.runs import run_dir as run_dir_lib
from dabjax.runs import sweep_dir
from dabjax.training import config as config_lib

SUMMARY_TEXT, SUMMARY_PLOT = "summary.txt", "summary.png"


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
    record = sweep_dir.read_record(root)
    if record is not None:
        entries = [(t["name"], t["params"]) for t in record["trials"]]
    elif root.is_dir():
        entries = [(p.name, {}) for p in sorted(root.iterdir()) if (p / run_dir_lib.METRICS_FILE).is_file()]
    else:
        raise FileNotFoundError(f"no sweep directory at {root}")
    if not entries:
        raise FileNotFoundError(
            f"no trials in {root}: neither {sweep_dir.RECORD_FILE} nor run directories with metrics")
    rows_by_trial, statuses = {}, {}
    for name, _ in entries:
        run_dir = root / name
        try:
            rows_by_trial[name] = run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
        except (FileNotFoundError, ValueError):
            rows_by_trial[name] = []
        statuses[name] = status_from_dir(run_dir)
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


def status_from_dir(run_dir: pathlib.Path) -> str:
    """``trial_status`` with the budget of the run directory's own config."""
    config_path = run_dir / run_dir_lib.CONFIG_FILE
    if not config_path.is_file():
        return sweep_dir.NOT_STARTED
    try:
        run = config_lib.load_config(str(config_path)).run
    except config_lib.ConfigError:
        return sweep_dir.UNFINISHED
    return sweep_dir.trial_status(dataclasses.replace(run, dir=str(run_dir)))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e-2 and value != 0 else f"{value:.3f}"
    return str(value)


if __name__ == "__main__":
    sys.exit(not_a_command(__spec__.name))
