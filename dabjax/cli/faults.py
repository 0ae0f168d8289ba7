"""Faults a training run meets on real machines, each said in one line with its remedy and its own exit status
(docs/cli.md, "Exit statuses"); the traceback only with ``--debug`` or ``DABJAX_DEBUG=1``.

* disk full: ``ENOSPC`` from Python, or orbax/tensorstore's ``RESOURCE_EXHAUSTED ... Failed to write``;
* permission denied on the run directory (``EACCES``, ``EPERM``);
* a read-only file system (``EROFS``);
* the device out of memory (XLA's ``RESOURCE_EXHAUSTED: Out of memory``).

Any other failure of a command (no mistake in what the user gave: those are ``error: ...`` and status 2,
``dabjax.cli.run_guarded``) is one line too, ``UNEXPECTED``, naming the error and the flag that shows where it
happened.

Checkpoints are written atomically (``dabjax.training.checkpoint``), so a save a fault cuts short leaves the
newest finished checkpoint intact: the remedy for a disk fault is to fix it and run the same command, which
resumes from there.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys

DEBUG_VARIABLE = "DABJAX_DEBUG"

# Exit statuses (besides 0, 1: a sweep with trials left, 2: a configuration error, 128 + signal: a signal).
DISK_FULL = 3
PERMISSION_DENIED = 4
READ_ONLY = 5
DEVICE_OUT_OF_MEMORY = 6
UNEXPECTED = 70  # sysexits.h's EX_SOFTWARE: a failure of the program, not of the machine or the user


@dataclasses.dataclass(frozen=True)
class Fault:
    """A recognised fault: its cause in a few words and its exit status."""

    cause: str
    status: int


def debug_requested(flag: bool = False) -> bool:
    """Whether tracebacks are wanted: ``--debug`` (``flag``) or ``DABJAX_DEBUG`` set to anything but ``0``/empty."""
    return flag or os.environ.get(DEBUG_VARIABLE, "0") not in ("", "0")


def _chain(error: BaseException):
    """``error`` and the exceptions it was raised from or during (a fault in a save on exit hides the first)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def classify(error: BaseException) -> Fault | None:
    """The fault ``error`` (or one in its chain) is, or None for any other error."""
    for link in _chain(error):
        number = getattr(link, "errno", None) if isinstance(link, OSError) else None
        text = str(link)
        if number == errno.ENOSPC or ("RESOURCE_EXHAUSTED" in text and "Failed to write" in text) \
                or "No space left on device" in text:
            return Fault("the disk is full", DISK_FULL)
        if number == errno.EROFS or "Read-only file system" in text:
            return Fault("the run directory is on a read-only file system", READ_ONLY)
        if number in (errno.EACCES, errno.EPERM) or "Permission denied" in text:
            return Fault("permission denied", PERMISSION_DENIED)
        if "RESOURCE_EXHAUSTED" in text and "out of memory" in text.lower():
            return Fault("the device is out of memory", DEVICE_OUT_OF_MEMORY)
    return None


def newest_checkpoint(run_dir) -> int | None:
    """The newest finished checkpoint of a run directory (what the same command resumes from), if any."""
    from dabjax.training import checkpoint  # here: the command layer's error path needs no orbax to start

    iterations = checkpoint.saved_iterations(checkpoint.checkpoint_root(run_dir))
    return iterations[-1] if iterations else None


def remedy(fault: Fault, run_dir, command: str, games: int | None = None, memory_hint: str = "") -> str:
    """What to do about ``fault`` on the run in ``run_dir``; ``command`` is the one that resumes."""
    newest = newest_checkpoint(run_dir) if run_dir is not None else None
    resumes = (f"the same command resumes from checkpoint {newest}: {command}" if newest is not None
               else f"then run the same command: {command}")
    if fault.status == DISK_FULL:
        return f"free space on the disk of {run_dir}; {resumes}"
    if fault.status in (PERMISSION_DENIED, READ_ONLY):
        return (f"give run.dir a directory this user can write (or fix the permissions of {run_dir}); "
                f"{resumes}")
    smaller = f" (now {games})" if games is not None else ""
    return (f"use a smaller selfplay.games{smaller}{memory_hint} (dabjax.training.trainer.estimate_memory gives "
            f"the memory a config needs); {resumes}")


def one_line(prog: str, fault: Fault, error: BaseException, advice: str) -> str:
    """``prog: CAUSE (the error's first line): ADVICE``."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if len(first) > 200:
        first = first[:200] + "..."
    return f"{prog}: {fault.cause} ({type(error).__name__}: {first}): {advice}"


UNEXPECTED_ADVICE = f"not a mistake in the arguments or the config; --debug (or {DEBUG_VARIABLE}=1) shows its traceback"


def report_failure(prog: str, error: BaseException, debug: bool) -> int:
    """``report`` for a command with no remedy of its own: a recognised fault says its cause and status, anything
    else is ``UNEXPECTED``."""
    fault = classify(error)
    if fault is None:
        return report(prog, error, Fault("unexpected error", UNEXPECTED), UNEXPECTED_ADVICE, debug)
    return report(prog, error, fault, "fix it, then run the same command again", debug)


def not_a_command(module: str) -> int:
    """What ``python -m`` on a module of ``dabjax.cli`` that is no command does: says so on stderr (naming the
    ``dabjax`` command) and returns exit status 2, so that a guessed command never silently does nothing."""
    print(f"{module} is not a command; run 'dabjax --help' for the commands", file=sys.stderr)
    return 2


def report(prog: str, error: BaseException, fault: Fault, advice: str, debug: bool) -> int:
    """Prints the fault's line on stderr (after the traceback with ``debug``); returns its exit status."""
    if debug:
        import traceback

        traceback.print_exception(error)
    print(one_line(prog, fault, error, advice), file=sys.stderr, flush=True)
    return fault.status


if __name__ == "__main__":
    sys.exit(not_a_command(__spec__.name))
