"""What ``dabjax train`` prints when a run stops (its budget spent, its iterations reached, Ctrl-C): the last
evaluation from the run's metrics log, where the run's files are, and the exact commands to play the agent in
the browser, evaluate it, resume the run and export the agent.

The commands name the run directory as the run's config does (relative to the folder the run was started from)
and use the ``dabjax`` command, which both ways of installing (``pip install -e .`` in a clone, or a wheel) put
on the PATH.
"""

from __future__ import annotations

import pathlib
import shlex

from dabjax.runs import run_dir as run_dir_lib
from dabjax.training.config import RunSection

ARENA_OPPONENTS = "level2,mcts:200"  # what "evaluate it" plays the agent against


def last_evaluation(rows: list[dict]) -> dict | None:
    """The last metrics row that holds an evaluation (``eval/...`` keys), or None."""
    return next((row for row in reversed(rows) if any(key.startswith("eval/") for key in row)), None)


def evaluation_lines(row: dict | None, labelled_set: str | None, eval_every: int) -> list[str]:
    """A few lines on an evaluation row: the best-result share (worst move number and mean) on the labelled set,
    and the win rates against the evaluation's opponents."""
    if row is None:
        when = f"every {eval_every} iterations" if eval_every else "never (eval.every = 0)"
        return [f"no evaluation yet (the run evaluates {when})"]
    minutes = f", {row['time'] / 60:.1f} min of training" if isinstance(row.get("time"), (int, float)) else ""
    lines = [f"last evaluation, iteration {row.get('iteration', '?')}{minutes}:"]
    if "eval/best_result_min" in row:
        lines.append(f"  best-result moves on the labelled set {labelled_set}: {row['eval/best_result_min']:.3f} at "
                     f"the weakest move number, {row['eval/best_result_mean']:.3f} on average")
    prefix = "eval/win_rate_vs_"
    rates = [f"{row[key]:.2f} vs {key[len(prefix):]}" for key in row if key.startswith(prefix)]
    if rates:
        lines.append("  win rate " + ", ".join(rates))
    return lines


def next_commands(run: RunSection, board: str, agent: str, labelled_set: str | None, exportable: bool,
                  last: dict) -> list[tuple[str, str]]:
    """``[(what, command)]``: play the agent (``agent``, e.g. ``ckpt:runs/x``) in the browser, evaluate it,
    resume the run (with a doubled budget when ``last``, its last metrics row, shows the budget spent) and export
    it (``exportable``: a BoxesZero run)."""
    run_dir = shlex.quote(run.dir)
    spec = shlex.quote(agent)
    commands = [
        ("play it in the browser", f"dabjax serve --board {board} --opponent {spec}"),
        ("evaluate it", f"dabjax evaluate arena --board {board} --agents {spec},{ARENA_OPPONENTS}"),
    ]
    if labelled_set is not None:
        commands.append(("", f"dabjax evaluate accuracy --set {shlex.quote(labelled_set)} --agents {spec}"))
    commands.append(("plot its curves", f"dabjax evaluate plots {run_dir}"))
    resume = f"dabjax train --config {shlex.quote(str(pathlib.Path(run.dir) / run_dir_lib.CONFIG_FILE))}"
    if last and run_dir_lib.stop_reason(run, last.get("iteration", 0), last.get("time", 0.0)) is not None:
        more = (f"run.max_minutes={2 * run.max_minutes:g}" if run.max_minutes and last.get("time", 0.0)
                >= run.max_minutes * 60 else f"run.iterations={2 * run.iterations}")
        commands.append(("train it on", f"{resume} {more}"))
    else:
        commands.append(("resume it", resume))
    if exportable:
        commands.append(("export it", f"dabjax pretrained export {run_dir} --out {shlex.quote(run.dir + '-agent')}"))
    return commands


def _rows(run_dir) -> list[dict]:
    try:
        return run_dir_lib.read_metrics(run_dir, skip_torn_tail=True)
    except (FileNotFoundError, ValueError):
        return []


def closing_summary(run: RunSection, board: str, agent: str, labelled_set: str | None = None, eval_every: int = 0,
                    exportable: bool = True) -> str:
    """The lines ``dabjax train`` prints when the run in ``run.dir`` stops (see the module's docstring)."""
    rows = _rows(run.dir)
    lines = evaluation_lines(last_evaluation(rows), labelled_set, eval_every)
    where = pathlib.Path(run.dir)
    absolute = "" if where.is_absolute() else f" ({where.absolute()})"
    lines.append(f"run directory {run.dir}{absolute}: {run_dir_lib.CONFIG_FILE}, {run_dir_lib.METRICS_FILE}, "
                 "tb/ (TensorBoard), checkpoints/")
    commands = next_commands(run, board, agent, labelled_set, exportable, rows[-1] if rows else {})
    width = max(len(what) for what, _ in commands)
    lines.append("next:")
    lines += [f"  {what.ljust(width)}  {command}" for what, command in commands]
    if exportable:
        lines.append(f"  {''.ljust(width)}  (then played as ckpt:{run.dir}-agent; with no --out, pretrained:{board})")
    return "\n".join(lines)
