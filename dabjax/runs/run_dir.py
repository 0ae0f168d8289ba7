"""A training run's directory and the resume/save loop, shared by both kinds of run (``dabjax.runs.train_boxeszero``
for BoxesZero and AlphaZero, ``dabjax.runs.train_td`` for TD learning) and read by ``evaluate.py plots``.

A run directory holds:

* ``config.yaml``: the resolved config; a run resumed with another config keeps the old one as
  ``config.<YYYYmmdd-HHMMSS>.yaml``;
* ``metrics.jsonl``: one JSON object per iteration (at least ``iteration``);
* ``tb/``: TensorBoard event files of the numeric metrics (when ``tensorboardX`` is installed);
* ``checkpoints/<iteration>/``: ``dabjax.training.checkpoint``'s orbax layout, the last k kept;
* ``.lock``: while a trainer runs in it, its pid and host (``dabjax.runs.run_lock``: a second trainer on the
  directory stops at start-up naming them).

``train_in_run_dir`` starts a run, or resumes it from its newest intact checkpoint; a run killed between
checkpoints loses only the iterations after the last one, and their metrics lines are dropped on resume so that
the log matches the state. Opening the run's checkpoints removes unfinished saves and sets a damaged newest
checkpoint aside (``dabjax.training.checkpoint``), with a warning naming it; when none is left intact, it stops
with an error rather than start afresh over the run's metrics. The progress bar advances by the share of the
binding budget spent (``run.iterations`` or ``run.max_minutes``), so that its remaining time is right, and the
last line says why the run stopped. SIGTERM and SIGINT (Ctrl-C) finish the iteration in flight, save a checkpoint and
close the logs before raising ``dabjax.runs.stopping.StoppedBySignal`` (a second signal exits at once); besides
every ``run.checkpoint_every`` iterations, a checkpoint is saved once ``run.checkpoint_minutes`` of wall time
have passed since the last, which bounds what a kill without warning loses. With several processes
(``jax.distributed``) only process 0 writes the config, the metrics and messages; every process saves its
checkpoint shards.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import pathlib
import sys
import time
from typing import Any, Callable

import jax
from tqdm import tqdm

from dabjax.runs import run_lock, stopping
from dabjax.training import checkpoint
from dabjax.training.config import ConfigError, RunSection

METRICS_FILE = "metrics.jsonl"
wall_clock = time.monotonic  # the wall time run.checkpoint_minutes counts (a test moves it on)
CONFIG_FILE = "config.yaml"


# --- metrics ----------------------------------------------------------------------------------------------


def _parse_metrics(text: str, where: pathlib.Path) -> list[dict]:
    """The JSON objects of the lines of ``text`` (blank lines skipped); ValueError naming ``where:line``."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}:{number}: not JSON ({error})") from None
    return rows


def read_metrics(path, skip_torn_tail: bool = False) -> list[dict]:
    """The rows of a run's ``metrics.jsonl``: ``path`` is the run directory or the file itself. With
    ``skip_torn_tail``, a last line without its newline (a write a kill cut short, which a resumed run drops) is
    left out.

    Raises FileNotFoundError naming the path when there is no such file, and ValueError naming the file and
    line number of a line that is not JSON.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no metrics file at {path}")
    text = path.read_text()
    return _parse_metrics(text[: text.rfind("\n") + 1] if skip_torn_tail else text, path)


class MetricsLog:
    """Appends one iteration's metrics to ``metrics.jsonl`` and its numbers to TensorBoard (``tb/``).

    Opening it drops the lines of iterations after ``resume_iteration`` (they are about to be redone; their
    iterations are in ``dropped_iterations``) and a last line cut short by a kill in the middle of a write.
    """

    def __init__(self, run_dir: pathlib.Path, resume_iteration: int):
        self.path = pathlib.Path(run_dir) / METRICS_FILE
        self.dropped_iterations = self._keep_until(resume_iteration)
        self._file = self.path.open("a")
        try:
            from tensorboardX import SummaryWriter

            self._tensorboard = SummaryWriter(str(pathlib.Path(run_dir) / "tb"))
        except ImportError:  # TensorBoard logging is optional; the JSONL log is not
            self._tensorboard = None

    def _keep_until(self, iteration: int) -> list[int]:
        """Keeps the rows up to ``iteration``; returns the iterations of the rows dropped."""
        if not self.path.exists():
            return []
        text = self.path.read_text()
        whole_lines = text[: text.rfind("\n") + 1]  # every write ends with a newline: a tail without one is torn
        rows = _parse_metrics(whole_lines, self.path)
        kept = [row for row in rows if row.get("iteration", 0) <= iteration]
        self.path.write_text("".join(json.dumps(row) + "\n" for row in kept))
        return [row.get("iteration", 0) for row in rows if row.get("iteration", 0) > iteration]

    def write(self, metrics: dict) -> None:
        """Appends ``metrics`` (a JSON-serialisable dict with an int ``iteration``) and flushes it to disk."""
        self._file.write(json.dumps(metrics) + "\n")
        self._file.flush()
        if self._tensorboard is not None:
            step = metrics["iteration"]
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "iteration":
                    self._tensorboard.add_scalar(key, value, step)
            self._tensorboard.flush()

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()


# --- config -----------------------------------------------------------------------------------------------


def write_config(run_dir: pathlib.Path, config_yaml: str, say: Callable[[str], None]) -> None:
    """Writes ``config.yaml``; a different one already there is kept as ``config.<time>.yaml`` (and ``say``
    tells its name), so that no earlier settings are silently lost."""
    path = pathlib.Path(run_dir) / CONFIG_FILE
    if path.exists() and path.read_text() != config_yaml:
        previous = path.with_name(f"config.{time.strftime('%Y%m%d-%H%M%S')}.yaml")
        path.rename(previous)
        say(f"config differs from the run's previous one; the old one is kept as {previous.name}")
    path.write_text(config_yaml)


# --- the resume/save loop ---------------------------------------------------------------------------------


class ResumableTraining(abc.ABC):
    """What ``train_in_run_dir`` needs from one method's trainer: its state, one iteration, its evaluation
    and its checkpoints. ``State`` is whatever the method carries from one iteration to the next."""

    title: str  # what is trained, for messages, e.g. "boxeszero on 3x3"
    eval_every: int  # iterations between evaluations; 0 = never

    @abc.abstractmethod
    def init_state(self, new_run: bool = True) -> Any:
        """The state of a new run; ``new_run`` False when a checkpoint is about to be restored into it (only
        its structure matters then: nothing it would start from, such as a warm start, is read)."""

    @abc.abstractmethod
    def restore(self, store: checkpoint.CheckpointStore, iteration: int, fresh) -> Any:
        """The state saved at ``iteration`` (``fresh`` gives the structure); ValueError if it belongs to another
        board, network or method."""

    @abc.abstractmethod
    def save(self, store: checkpoint.CheckpointStore, state) -> None:
        """Saves ``state`` as the checkpoint of its iteration."""

    @abc.abstractmethod
    def progress(self, state) -> tuple[int, float]:
        """``(iterations done, training seconds)``: the seconds count self-play and learning, summed over
        resumptions, not evaluation; ``run.max_minutes`` bounds them."""

    @abc.abstractmethod
    def iterate(self, state) -> tuple[Any, dict]:
        """One iteration: ``(next state, metrics)``; the metrics hold ``iteration`` and ``time`` (seconds)."""

    @abc.abstractmethod
    def evaluate(self, state, key: jax.Array) -> dict:
        """Evaluation metrics (``eval/...``) of the state's parameters."""

    def describe(self, state) -> str:
        """Where the run stands, for messages."""
        return f"iteration {self.progress(state)[0]}"

    def postfix(self, metrics: dict) -> dict[str, str]:
        """The progress bar's short fields after an iteration."""
        return {}

    def note(self, metrics: dict) -> str | None:
        """A message worth a line of its own after an iteration, if any."""
        return None


# --- budget and progress ----------------------------------------------------------------------------------


def budget_spent(run: RunSection, iterations: int, seconds: float) -> float:
    """The share of the run's binding budget spent, in [0, 1]: the larger of the shares of ``run.iterations``
    and (when set) of ``run.max_minutes`` of training time; the progress bar shows it, so that its remaining
    time is that of whichever budget ends the run."""
    spent = iterations / run.iterations
    if run.max_minutes:
        spent = max(spent, seconds / (run.max_minutes * 60))
    return min(spent, 1.0)


def stop_reason(run: RunSection, iterations: int, seconds: float) -> str | None:
    """Why a run at ``iterations`` after ``seconds`` of training stops, or None when it goes on."""
    if iterations >= run.iterations:
        return f"reached run.iterations ({run.iterations})"
    if run.max_minutes and seconds >= run.max_minutes * 60:
        return f"the training-time budget run.max_minutes ({run.max_minutes:g} min) is spent"
    return None


def progress_text(run: RunSection, iterations: int, seconds: float) -> str:
    """Where the run stands against its budgets, e.g. ``iteration 120/1000, 3.9/15 min``."""
    minutes = f"{seconds / 60:.1f}/{run.max_minutes:g} min" if run.max_minutes else f"{seconds / 60:.1f} min"
    return f"iteration {iterations}/{run.iterations}, {minutes}"


def progress_bar(run: RunSection, iterations: int, seconds: float, disable: bool) -> tqdm:
    """A bar over the binding budget (total 1, see ``budget_spent``), its description ``progress_text``."""
    return tqdm(
        total=1.0, initial=budget_spent(run, iterations, seconds), desc=progress_text(run, iterations, seconds),
        bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}", disable=disable,
        dynamic_ncols=True, smoothing=0.05,
    )


# --- opening a run's checkpoints --------------------------------------------------------------------------


def open_checkpoints(run: RunSection, warn: Callable[[str], None]) -> checkpoint.CheckpointStore:
    """The run's checkpoint store (unfinished saves removed, a damaged newest checkpoint set aside, each
    said through ``warn``). Raises ConfigError (a ValueError) when checkpoints were set aside and none is left
    intact: starting afresh would redo the run over its metrics, so it is for the user to decide."""
    store = checkpoint.CheckpointStore(run.dir, keep=run.keep_checkpoints)
    for path in store.removed_unfinished:
        warn(f"removed {path}, an unfinished checkpoint save (the run was stopped while saving)")
    for damaged in store.set_aside:
        warn(f"checkpoint {damaged.path} is damaged: {damaged.problem}; kept it aside as {damaged.kept_as}")
    damaged = checkpoint.damaged_checkpoints(run.dir)
    if store.latest_iteration() is None and damaged:
        store.close()
        raise ConfigError(
            f"no intact checkpoint left in {store.directory}; the damaged ones are kept in "
            f"{store.directory / checkpoint.DAMAGED_DIR} ({', '.join(path.name for path in damaged)}). To start "
            f"the run afresh, move {pathlib.Path(run.dir).absolute()} away or give another run.dir; a repaired "
            f"one can go back to {store.directory}/<iteration>"
        )
    return store


# --- the resume/save loop ---------------------------------------------------------------------------------


def _warn(text: str) -> None:
    tqdm.write(f"warning: {text}", file=sys.stderr)


def train_in_run_dir(
    run: RunSection, config_yaml: str, training: ResumableTraining, quiet: bool = False,
    report: Callable[[dict], None] | None = None,
) -> dict:
    """Trains (or resumes) the run in ``run.dir`` to ``run.iterations`` or ``run.max_minutes``, logging every
    iteration and saving every ``run.checkpoint_every`` iterations or ``run.checkpoint_minutes`` of wall time
    (whichever comes first) and on exit; returns the last metrics (empty when there was nothing left to do).
    ``report``, when given, is called with each iteration's metrics once they are logged and the iteration's
    checkpoint (if any) saved (process 0 only; the sweep launcher sends them to Ray Tune).

    The run directory is locked for the run (``dabjax.runs.run_lock``: one writer per run directory; with several
    processes, process 0 holds the lock for all of them). SIGTERM and SIGINT (``dabjax.runs.stopping``) finish the
    iteration in flight, save it and close the logs, then raise ``stopping.StoppedBySignal``; a second signal
    exits at once.

    Raises ``run_lock.RunDirInUse`` (a ValueError naming the pid and host) before writing anything when another
    process trains in ``run.dir``; ``ConfigError`` (a ValueError; before writing anything but the clean-up of
    ``checkpoints/``) when the newest intact checkpoint does not fit ``training``, or when no checkpoint is left
    intact: what the user gave (the config, ``run.dir``) will not do.
    """
    run_dir = pathlib.Path(run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with stopping.StopSignals(lambda text: _say_now(text)) as signals:
        if jax.process_index() != 0:  # process 0 holds the lock for every process of the run
            return _train_holding_lock(run, config_yaml, training, quiet, report, signals)
        with run_lock.hold(run_dir, _warn):
            return _train_holding_lock(run, config_yaml, training, quiet, report, signals)


def _say_now(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def checkpoint_due(run: RunSection, iteration: int, seconds_since_save: float) -> bool:
    """Whether the iteration just done is saved: every ``run.checkpoint_every`` iterations, or once
    ``run.checkpoint_minutes`` of wall time (evaluation included) have passed since the last save."""
    if iteration % run.checkpoint_every == 0:
        return True
    return bool(run.checkpoint_minutes) and seconds_since_save >= run.checkpoint_minutes * 60


@dataclasses.dataclass
class _OpenedRun:
    """A run ready to iterate: its checkpoint store, the iteration restored (None: a new run), its metrics log
    (process 0 only) and where it starts."""

    store: checkpoint.CheckpointStore
    latest: int | None
    log: MetricsLog | None
    start_iteration: int
    start_seconds: float


@dataclasses.dataclass
class _Reached:
    """Where the loop is: the state after its last iteration and that iteration's metrics (the save on exit
    reads the state even when an iteration fails)."""

    state: Any
    metrics: dict = dataclasses.field(default_factory=dict)


def _train_holding_lock(run: RunSection, config_yaml: str, training: ResumableTraining, quiet: bool,
                        report: Callable[[dict], None] | None, signals: stopping.StopSignals) -> dict:
    """``train_in_run_dir``'s loop, once the run directory is locked."""
    primary = jax.process_index() == 0  # several processes: only process 0 writes logs and messages
    quiet = quiet or not primary
    say: Callable[[str], None] = (lambda text: None) if quiet else tqdm.write
    warn: Callable[[str], None] = _warn if primary else (lambda text: None)  # even when quiet
    opened, reached = _open_run(run, config_yaml, training, primary, say, warn)
    bar = progress_bar(run, opened.start_iteration, opened.start_seconds, disable=quiet or not run.progress)
    try:
        reason = _iterate_until_stopped(run, training, reached, opened, report if primary else None, signals,
                                        bar, say)
    except KeyboardInterrupt:  # raised by the training itself (the signals are StopSignals')
        say("interrupted: saving a checkpoint")
        reason = "interrupted (Ctrl-C), the state is saved"
    finally:
        bar.close()
        saved = _save_and_close(training, opened, reached.state)
    if signals.requested is not None:
        raise stopping.StoppedBySignal(signals.requested, saved, opened.store.directory)
    final_iteration, final_seconds = training.progress(reached.state)
    if final_iteration == opened.start_iteration and stop_reason(run, final_iteration, final_seconds) is not None:
        reason += "; nothing left to do (raise run.iterations or run.max_minutes to train on)"
    say(f"stopped: {reason}; {training.describe(reached.state)}, {final_seconds / 60:.1f} min of training; "
        f"checkpoints in {opened.store.directory}")
    return reached.metrics


def _open_run(run: RunSection, config_yaml: str, training: ResumableTraining, primary: bool,
              say: Callable[[str], None], warn: Callable[[str], None]) -> tuple[_OpenedRun, _Reached]:
    """Opens the checkpoints, restores the newest intact one (or starts a new state), writes the config and
    opens the metrics log (``primary``: process 0), and says where the run starts. Raises ConfigError when the
    newest checkpoint does not fit ``training`` (the config's board, network or method is another)."""
    run_dir = pathlib.Path(run.dir)
    store = open_checkpoints(run, warn)
    latest = store.latest_iteration()
    fresh = training.init_state(new_run=latest is None)
    try:
        state = fresh if latest is None else training.restore(store, latest, fresh)
    except ValueError as error:
        store.close()
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(str(error)) from error  # the config given does not fit the run it resumes
    if primary:
        write_config(run_dir, config_yaml, say)
    start_iteration, start_seconds = training.progress(state)
    log = MetricsLog(run_dir, start_iteration) if primary else None
    if log is not None and log.dropped_iterations:
        first, last = min(log.dropped_iterations), max(log.dropped_iterations)
        which = f"iteration {first}" if first == last else f"iterations {first}-{last}"
        say(f"dropped the metrics of {which} (after checkpoint {start_iteration}; they are redone)")
    newest = " (the newest intact checkpoint)" if store.set_aside and latest is not None else ""
    say(
        f"{'resuming' if latest is not None else 'starting'} {training.title} at {training.describe(state)}{newest}; "
        f"run dir {run_dir}; backend {jax.default_backend()}"
    )
    return _OpenedRun(store, latest, log, start_iteration, start_seconds), _Reached(state)


def _iterate_until_stopped(run: RunSection, training: ResumableTraining, reached: _Reached, opened: _OpenedRun,
                           report: Callable[[dict], None] | None, signals: stopping.StopSignals, bar: tqdm,
                           say: Callable[[str], None]) -> str | None:
    """Iterates (evaluating, logging, saving when due and reporting each iteration, ``reached`` following)
    until a budget is spent or a signal asks to stop; returns why it stopped (None when a signal stopped it)."""
    eval_key = jax.random.PRNGKey(run.seed + 1)
    last_save = wall_clock()
    while True:
        iteration, seconds = training.progress(reached.state)
        reason = stop_reason(run, iteration, seconds)
        if reason is not None or signals.requested is not None:
            return reason
        reached.state, reached.metrics = training.iterate(reached.state)
        metrics = reached.metrics
        iteration = metrics["iteration"]
        # A stop was asked for during the iteration: its evaluation is skipped, to save within the grace period.
        if training.eval_every and iteration % training.eval_every == 0 and signals.requested is None:
            eval_key, sub = jax.random.split(eval_key)
            metrics.update(training.evaluate(reached.state, sub))
        if opened.log is not None:
            opened.log.write(metrics)
        if checkpoint_due(run, iteration, wall_clock() - last_save):
            training.save(opened.store, reached.state)
            last_save = wall_clock()
        if report is not None:  # after the save: a scheduler may stop the run on what it reports
            report(metrics)
        _show_progress(run, training, reached, bar, say)


def _show_progress(run: RunSection, training: ResumableTraining, reached: _Reached, bar: tqdm,
                   say: Callable[[str], None]) -> None:
    """The bar after an iteration: where the run stands, the training's short fields and its note, if any."""
    iteration, seconds = training.progress(reached.state)
    bar.set_description_str(progress_text(run, iteration, seconds), refresh=False)
    bar.set_postfix(training.postfix(reached.metrics), refresh=False)
    bar.update(budget_spent(run, iteration, seconds) - bar.n)
    note = training.note(reached.metrics)
    if note:
        say(note)


def _save_and_close(training: ResumableTraining, opened: _OpenedRun, state) -> int | None:
    """Saves ``state`` unless its iteration is saved already, closes the store and the log (even when the save
    fails: a full disk); returns the newest saved iteration."""
    final_iteration, _ = training.progress(state)
    try:
        if (opened.latest is None or final_iteration > opened.latest) \
                and opened.store.latest_iteration() != final_iteration:
            training.save(opened.store, state)
        return opened.store.latest_iteration()
    finally:
        opened.store.close()
        if opened.log is not None:
            opened.log.close()
