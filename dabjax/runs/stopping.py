"""Stopping on a signal: what a trainer does when its machine is taken away (docs/training.md, "Stopping,
preemption and faults").

Colab, spot instances, Slurm at its time limit and Ctrl-C all send SIGTERM or SIGINT and, after a grace period,
kill the process. ``StopSignals`` turns the first such signal into a request that the training loop reads between
iterations (``dabjax.runs.run_dir``): the iteration in flight finishes (its buffers are donated to the device, so
it cannot be abandoned halfway without losing the state), a checkpoint is saved, the metrics and TensorBoard files
are closed, and the loop raises ``StoppedBySignal``. The command then prints one line naming the signal, the
checkpoint saved and the command that resumes, and exits with ``128 + signal number`` (143 for SIGTERM, 130 for
SIGINT), the shells' convention.

A second signal stops at once (``os._exit``), without saving: a save it cuts short leaves orbax's temporary
directory, which the next run removes (``dabjax.training.checkpoint``), so the newest finished checkpoint stays
intact and the same command resumes from it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_status(signum: int) -> int:
    """The conventional exit status of a process stopped by signal ``signum``: 143 for SIGTERM, 130 for SIGINT."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class StoppedBySignal(Exception):
    """A run stopped on a signal after saving: ``iteration`` is the newest checkpoint's (None when nothing was
    saved yet), ``checkpoints`` their directory."""

    def __init__(self, signum: int, iteration: int | None, checkpoints):
        self.signum, self.iteration, self.checkpoints = int(signum), iteration, checkpoints
        super().__init__(self.describe())

    @property
    def exit_status(self) -> int:
        return exit_status(self.signum)

    def describe(self) -> str:
        saved = (f"checkpoint {self.iteration} is saved in {self.checkpoints}" if self.iteration is not None
                 else "no iteration was finished, nothing to save")
        return f"stopped by {signal_name(self.signum)}: {saved}"


class _HandlingStopSignals:
    """Installs ``self._handle`` for SIGTERM and SIGINT while active (only in the main thread, where Python runs
    signal handlers) and puts the previous handlers back on exit."""

    def _handle(self, signum, frame) -> None:
        """What a signal does: each subclass says (``StopSignals`` finishes the iteration, ``InterruptOnSignals``
        raises at once). The base only installs and restores it."""
        raise NotImplementedError(f"{type(self).__name__} must define what a stop signal does")

    def __enter__(self):
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


class StopSignals(_HandlingStopSignals):
    """While active (a context manager), SIGTERM and SIGINT ask the loop to stop (``requested``: the first
    signal's number, else None) instead of killing the process; a second one exits at once with its status,
    saying so through ``say_at_once``. The previous handlers come back on exit. Signals reach only the main
    thread: elsewhere (a Ray trial's thread) it installs nothing and never requests a stop."""

    def __init__(self, say_at_once: Callable[[str], None] | None = None):
        self.requested: int | None = None
        self._say = say_at_once or (lambda text: print(text, file=sys.stderr, flush=True))

    def _handle(self, signum, frame) -> None:
        if self.requested is None:
            self.requested = signum
            return
        self._say(f"second {signal_name(signum)}: stopping at once without saving; the newest finished checkpoint "
                  "is intact and the same command resumes from it")
        os._exit(exit_status(signum))



class InterruptOnSignals(_HandlingStopSignals):
    """While active, SIGTERM as well as SIGINT raise KeyboardInterrupt in the main thread (``signum``: which came),
    for work that stops cleanly on it and resumes from its files (``dabjax label build``'s chunks)."""

    def __init__(self):
        self.signum: int | None = None

    def _handle(self, signum, frame) -> None:
        self.signum = signum
        raise KeyboardInterrupt

