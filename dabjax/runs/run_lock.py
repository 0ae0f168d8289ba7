"""One writer per run directory: the lock a trainer holds on its run directory while it runs.

The lock is the file ``RUN/.lock``, holding JSON ``{"pid": ..., "host": ..., "started": ...}`` (the process, its
host name and when it took the lock, ISO 8601 UTC). It is created atomically (``O_CREAT | O_EXCL``: of two
trainers starting together exactly one creates it) and, where ``fcntl`` exists, held with ``flock`` for the
writer's lifetime, so that the kernel releases it when the process dies, however it dies. It is removed when
the writer stops (``hold`` is a context manager).

A second writer finding the lock:

* refuses to start (``RunDirInUse``, naming the pid and host that hold it) when the holder is alive: its
  ``flock`` is held, or it names this host and a live process other than this one;
* takes it over with a warning when it is stale: it names this host, its ``flock`` is free and its process is no
  longer alive (killed with ``kill -9``, a power cut), or its process is this very one (a pid reused after a
  restart in a container);
* refuses when it names another host (a shared file system): that host's process cannot be checked from here,
  so the message names the host and says to remove the lock file if that run is dead.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import pathlib
import socket
import time
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: the O_EXCL file and the pid check alone
    fcntl = None

LOCK_FILE = ".lock"
# A lock file without its JSON yet: its creator is between creating and writing it (microseconds), or died
# there. Read it again this many times, this far apart, before calling it stale.
UNWRITTEN_RETRIES = 20
UNWRITTEN_WAIT_SECONDS = 0.05


class RunDirInUse(ValueError):
    """Another process writes to the run directory (the message names its pid and host, and what to do)."""


def lock_path(run_dir) -> pathlib.Path:
    return pathlib.Path(run_dir) / LOCK_FILE


def this_host() -> str:
    return socket.gethostname()


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only the existence and permission checks
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:  # Windows: os.kill(pid, 0) is no probe there; assume alive (refusing is the safe side)
        return True
    return True


def _try_flock(fd: int) -> bool:
    """Takes the exclusive ``flock`` on ``fd`` without waiting; False when another open file holds it. True
    without ``fcntl`` (nothing to take)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _read_holder(fd: int) -> dict | None:
    """The lock file's JSON (``pid``, ``host``, ``started``), or None while it is not (fully) written."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    try:
        holder = json.loads(b"".join(chunks).decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return None
    return holder


def _write_holder(fd: int) -> dict:
    """Writes this process as the holder into the lock file ``fd`` (replacing what it held); returns it."""
    holder = dict(pid=os.getpid(), host=this_host(),
                  started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(holder) + "\n").encode())
    os.fsync(fd)
    return holder


def _same_file(fd: int, path: pathlib.Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (its holder may have removed it meanwhile)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _describe(holder: dict) -> str:
    return (f"process {holder.get('pid')} on host {holder.get('host', '?')} "
            f"(running since {holder.get('started', '?')})")


def _refusal(path: pathlib.Path, holder: dict | None) -> RunDirInUse:
    run_dir = path.parent
    if holder is None:
        return RunDirInUse(f"run directory {run_dir} is in use: another process holds {path}; stop that run first "
                           "or give this one another run.dir")
    if holder.get("host") != this_host():
        return RunDirInUse(
            f"run directory {run_dir} is in use by {_describe(holder)}, according to {path}. A lock of another "
            f"host cannot be checked from here: if that run is no longer running on {holder.get('host')}, remove "
            f"{path} and start again; otherwise give this run another run.dir")
    return RunDirInUse(f"run directory {run_dir} is in use by {_describe(holder)}: stop that run first (kill "
                       f"{holder['pid']}) or give this one another run.dir")


def _stale(holder: dict | None, flocked: bool) -> bool:
    """Whether a lock whose ``flock`` we now hold (``flocked``) belongs to no live writer: one of this host whose
    process has died (or is this one: a reused pid), or one never written (its creator died first)."""
    if not flocked:
        return False
    if holder is None:
        return True
    if holder.get("host") != this_host():
        return False
    return holder["pid"] == os.getpid() or not process_alive(holder["pid"])


def acquire(run_dir, warn: Callable[[str], None]) -> int:
    """Takes the lock of ``run_dir`` (which must exist) for this process; returns the open lock file's descriptor
    (``release`` gives it back). A stale lock is taken over, saying so through ``warn``. Raises ``RunDirInUse``
    when another writer holds it."""
    path = lock_path(run_dir)
    unwritten_reads = 0
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        else:
            # Someone who opened the new file before this flock lets go at once (they find it unwritten).
            for _ in range(UNWRITTEN_RETRIES):
                if _try_flock(fd):
                    _write_holder(fd)
                    return fd
                time.sleep(UNWRITTEN_WAIT_SECONDS)
            holder = _read_holder(fd)
            os.close(fd)
            raise _refusal(path, holder)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:  # its holder removed it meanwhile: create it anew
            continue
        flocked = _try_flock(fd)
        if flocked and not _same_file(fd, path):  # removed (and maybe made anew) while we took the flock
            os.close(fd)
            continue
        holder = _read_holder(fd)
        if flocked and holder is None and unwritten_reads < UNWRITTEN_RETRIES:
            os.close(fd)  # its creator may be writing it right now: let it finish
            unwritten_reads += 1
            time.sleep(UNWRITTEN_WAIT_SECONDS)
            continue
        if not _stale(holder, flocked):
            os.close(fd)
            raise _refusal(path, holder)
        # Ours now: the flock keeps any other taker out while the file changes hands.
        held_by = ("an empty lock file (its writer died before writing it)" if holder is None
                   else f"{_describe(holder)}, which no longer runs (killed or crashed)")
        warn(f"took over the lock of run directory {path.parent} from {held_by}")
        _write_holder(fd)
        return fd


def release(run_dir, fd: int) -> None:
    """Gives the lock back: removes the lock file, then closes it (which drops the flock), so that whoever opens
    the old file meanwhile sees it removed and starts over."""
    path = lock_path(run_dir)
    with contextlib.suppress(FileNotFoundError):
        if _same_file(fd, path):
            path.unlink()
    os.close(fd)


@contextlib.contextmanager
def hold(run_dir, warn: Callable[[str], None]) -> Iterator[pathlib.Path]:
    """The lock of ``run_dir`` for the block (``acquire``, then ``release`` however the block ends); yields the
    lock file's path."""
    fd = acquire(run_dir, warn)
    try:
        yield lock_path(run_dir)
    finally:
        release(run_dir, fd)
