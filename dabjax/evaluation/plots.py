"""PNG figures (matplotlib, Agg backend): Elo curves over training (BoxesZero's Figures 8, 10, 13), accuracy by
move number (Tables 3, 4 as curves), and training metrics (losses, start step, mqr / nvr, replay samples by
move number and iteration as a heat map: Figure 11; the periodic evaluation's best-result share and scores over
training time), and one metric over training time for several runs (a sweep's summary).

Every function takes plain data and an output path, writes one PNG and returns its path.
"""

from __future__ import annotations

import pathlib
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DPI = 120


def _save(figure, path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path


def plot_elo_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path, anchors=None) -> pathlib.Path:
    """Elo over iterations and over wall-clock hours, one line per run.

    ``curves[label]`` has equal-length sequences ``iteration``, ``wall_time`` (seconds), ``elo``, ``ci_low``,
    ``ci_high``; ``anchors`` (name -> Elo) are drawn as horizontal reference lines.
    """
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, curve in curves.items():
        elo = np.asarray(curve["elo"], float)
        low, high = np.asarray(curve["ci_low"], float), np.asarray(curve["ci_high"], float)
        for axis, x in ((axes[0], np.asarray(curve["iteration"], float)),
                        (axes[1], np.asarray(curve["wall_time"], float) / 3600.0)):
            axis.plot(x, elo, marker="o", label=label)
            axis.fill_between(x, low, high, alpha=0.2)
    for axis, xlabel in zip(axes, ("iteration", "wall-clock time (h)")):
        for name, rating in (anchors or {}).items():
            axis.axhline(rating, color="grey", linestyle=":", linewidth=1)
            axis.annotate(name, (axis.get_xlim()[0], rating), fontsize=7, color="grey", va="bottom")
        axis.set_xlabel(xlabel)
        axis.set_ylabel("Elo (95% CI)")
        axis.grid(alpha=0.3)
        axis.legend()
    axes[0].set_title("Elo over training iterations")
    axes[1].set_title("Elo over wall-clock time")
    return _save(figure, path)


def plot_accuracy(
    move_numbers: Mapping[str, Sequence[int]], shares: Mapping[str, Sequence[float]], path,
    ylabel: str = "best-result move share",
) -> pathlib.Path:
    """One line per agent: the share of positions (per move number) where it plays an optimal move."""
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for name, values in shares.items():
        axis.plot(move_numbers[name], values, marker="o", label=name)
    axis.set_xlabel("move number (lines drawn)")
    axis.set_ylabel(ylabel)
    axis.set_ylim(-0.02, 1.02)
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title("Accuracy by move number")
    return _save(figure, path)


def _series(metrics: Sequence[Mapping], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(iteration, value) over the rows that have ``key`` (float64 arrays)."""
    rows = [m for m in metrics if m.get(key) is not None]
    return (np.array([m["iteration"] for m in rows], float), np.array([m[key] for m in rows], float))


def _plot_series(metrics: Sequence[Mapping], keys: Sequence[str], ylabel: str, title: str, path) -> pathlib.Path:
    """The metrics ``keys`` against the iteration, one line each (absent keys skipped)."""
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for key in keys:
        x, y = _series(metrics, key)
        if len(x):
            axis.plot(x, y, label=key)
    axis.set_xlabel("iteration")
    axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title(title)
    return _save(figure, path)


def _over_minutes(metrics: Sequence[Mapping], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(training minutes, value) over the rows that have ``key`` (the rows' ``time`` is in seconds)."""
    rows = [m for m in metrics if m.get(key) is not None]
    return (np.array([m.get("time", 0.0) for m in rows], float) / 60.0, np.array([m[key] for m in rows], float))


def plot_metric_over_time(runs: Mapping[str, Sequence[Mapping]], key: str, path, title: str = "") -> pathlib.Path:
    """One line per run: the metric ``key`` against training time in minutes (the rows' ``time``, seconds);
    ``runs[label]`` are a run's metrics rows (rows without ``key`` skipped, runs without it left out)."""
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for label, rows in runs.items():
        minutes, values = _over_minutes(rows, key)
        if len(minutes):
            axis.plot(minutes, values, marker="o", markersize=3, label=label)
    axis.set_xlabel("training time (min)")
    axis.set_ylabel(key)
    axis.grid(alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=7, ncol=2 if len(runs) > 8 else 1)
    axis.set_title(title or f"{key} over training time")
    return _save(figure, path)


def plot_losses(metrics: Sequence[Mapping], path) -> pathlib.Path:
    return _plot_series(metrics, ("loss", "policy_loss", "value_loss"), "loss", "Training losses", path)


def plot_start_step(metrics: Sequence[Mapping], path) -> pathlib.Path:
    """The backward curriculum's start step ``st`` (and the stage) over wall-clock hours."""
    rows = [m for m in metrics if m.get("start_step") is not None]
    hours = np.array([m.get("time", 0.0) for m in rows], float) / 3600.0
    figure, axis = plt.subplots(figsize=(8, 4.2))
    axis.step(hours, [m["start_step"] for m in rows], where="post", label="start step st")
    stage_two = [h for h, m in zip(hours, rows) if m.get("stage") == 2]
    if stage_two:
        axis.axvline(stage_two[0], color="grey", linestyle=":", label="stage 2 begins")
    axis.set_xlabel("wall-clock time (h)")
    axis.set_ylabel("start step")
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title("Backward training: start step over time")
    return _save(figure, path)


def plot_mqr_nvr(metrics: Sequence[Mapping], path) -> pathlib.Path:
    return _plot_series(metrics, ("mqr", "nvr"), "rate", "mqr and nvr (promotion criteria)", path)


def plot_samples_heatmap(metrics: Sequence[Mapping], path) -> pathlib.Path:
    """Replay samples added per move number (rows) and iteration (columns): the paper's Figure 11."""
    rows = [m for m in metrics if m.get("samples_by_move") is not None]
    if not rows:
        raise ValueError("no metrics row has 'samples_by_move': nothing to draw")
    counts = np.array([m["samples_by_move"] for m in rows], float).T  # [L, iterations]
    iterations = [m["iteration"] for m in rows]
    figure, axis = plt.subplots(figsize=(9, 4.8))
    image = axis.imshow(counts, aspect="auto", origin="lower", cmap="viridis", interpolation="nearest",
                        extent=(iterations[0] - 0.5, iterations[-1] + 0.5, -0.5, counts.shape[0] - 0.5))
    figure.colorbar(image, ax=axis, label="samples added")
    axis.set_xlabel("iteration")
    axis.set_ylabel("move number")
    axis.set_title("Replay data by move number and iteration")
    return _save(figure, path)


def evaluation_keys(metrics: Sequence[Mapping]) -> list[str]:
    """The periodic evaluation's keys that ``plot_evaluation`` draws and some row has: the labelled set's
    best-result share (weakest move number, mean) and the score against each opponent."""
    present = {key for m in metrics for key, value in m.items() if value is not None}
    keys = [key for key in ("eval/best_result_min", "eval/best_result_mean") if key in present]
    return keys + sorted(key for key in present if key.startswith("eval/score_vs_"))


def plot_evaluation(metrics: Sequence[Mapping], path) -> pathlib.Path:
    """The periodic evaluation (``evaluation_keys``) against training minutes. Raises ValueError when no row
    has any of them."""
    keys = evaluation_keys(metrics)
    if not keys:
        raise ValueError("no metrics row has a best-result share or a score: nothing to draw")
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for key in keys:
        axis.plot(*_over_minutes(metrics, key), marker="o", markersize=3, label=key.removeprefix("eval/"))
    axis.set_xlabel("training time (min)")
    axis.set_ylabel("share")
    axis.set_ylim(0.0, 1.02)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title("Periodic evaluation: labelled set and games")
    return _save(figure, path)


def plot_training(metrics: Sequence[Mapping], out_dir) -> list[pathlib.Path]:
    """All training figures of a run's metrics rows into ``out_dir``; returns the files written."""
    out_dir = pathlib.Path(out_dir)
    if not metrics:
        raise ValueError("no metrics rows: nothing to plot")
    paths = [
        plot_losses(metrics, out_dir / "losses.png"),
        plot_start_step(metrics, out_dir / "start_step.png"),
        plot_mqr_nvr(metrics, out_dir / "mqr_nvr.png"),
    ]
    if any(m.get("samples_by_move") is not None for m in metrics):
        paths.append(plot_samples_heatmap(metrics, out_dir / "samples_by_move.png"))
    if evaluation_keys(metrics):
        paths.append(plot_evaluation(metrics, out_dir / "evaluation.png"))
    return paths
