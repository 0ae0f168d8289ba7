"""One writer per run directory (``dabjax.runs.run_lock``): a second trainer on a run directory in use stops at
start-up naming the pid and host that hold it; a lock left by a killed process is taken over with a warning; a
lock naming another host is refused with the way to remove it."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest

from dabjax.runs import run_dir, run_lock
from dabjax.training.config import RunSection

RUN_LOCK_FILE = pathlib.Path(run_lock.__file__)
# A process that takes the lock of the run directory argv[1] and holds it until killed. It loads run_lock.py (the
# standard library only) by its path: importing the dabjax package would import JAX, seconds of start-up.
HOLDER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("run_lock", sys.argv[2])
run_lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_lock)
with run_lock.hold(sys.argv[1], print):
    print("holding", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
    """A live process holding the lock of ``tmp_path / "run"`` (with flock); yields ``(process, run dir)``."""
    run = tmp_path / "run"
    run.mkdir()
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(run), str(RUN_LOCK_FILE)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "holding"
        yield process, run
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def write_lock(run: pathlib.Path, pid: int, host: str | None = None) -> None:
    (run / run_lock.LOCK_FILE).write_text(json.dumps(dict(pid=pid, host=host or socket.gethostname(),
                                                          started="2024-01-01T00:00:00+00:00")))


def test_a_second_writer_is_refused_naming_the_pid_and_host(holder):
    process, run = holder
    holder_json = json.loads((run / run_lock.LOCK_FILE).read_text())
    assert holder_json["pid"] == process.pid and holder_json["host"] == socket.gethostname()
    warnings = []
    message = f"in use by process {process.pid} on host {socket.gethostname()}"
    with pytest.raises(run_lock.RunDirInUse, match=message):
        run_lock.acquire(run, warnings.append)
    assert warnings == [] and (run / run_lock.LOCK_FILE).is_file()
    # the trainer's loop is refused before it writes anything, and the exit of the holder frees the directory
    with pytest.raises(ValueError, match=message):
        run_dir.train_in_run_dir(RunSection(dir=str(run), iterations=1), "", training=None)
    assert sorted(path.name for path in run.iterdir()) == [run_lock.LOCK_FILE]


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_warning(holder):
    process, run = holder
    os.kill(process.pid, signal.SIGKILL)  # kill -9: no clean-up, the lock file stays
    process.wait(timeout=30)
    assert json.loads((run / run_lock.LOCK_FILE).read_text())["pid"] == process.pid
    warnings = []
    with run_lock.hold(run, warnings.append) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()
        with pytest.raises(run_lock.RunDirInUse, match=f"process {os.getpid()} on host"):  # held: even by us
            run_lock.acquire(run, print)
    assert len(warnings) == 1 and f"process {process.pid} on host {socket.gethostname()}" in warnings[0]
    assert "which no longer runs" in warnings[0]
    assert not path.exists()  # released at the end of the block


def test_a_lock_file_naming_a_live_process_is_refused_and_a_dead_one_taken_over(tmp_path):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        write_lock(tmp_path, sleeper.pid)  # no flock: the live pid alone says the run is in use
        with pytest.raises(run_lock.RunDirInUse, match=f"process {sleeper.pid} on host {socket.gethostname()}"):
            run_lock.acquire(tmp_path, print)
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)
    warnings = []
    with run_lock.hold(tmp_path, warnings.append):
        pass
    assert len(warnings) == 1 and f"process {sleeper.pid}" in warnings[0]
    assert not (tmp_path / run_lock.LOCK_FILE).exists()


def test_a_lock_of_another_host_is_refused_with_how_to_remove_it(tmp_path):
    write_lock(tmp_path, 12345, host="other-node-7")
    with pytest.raises(run_lock.RunDirInUse) as refused:
        run_lock.acquire(tmp_path, print)
    message = str(refused.value)
    assert "process 12345 on host other-node-7" in message
    assert f"remove {tmp_path / run_lock.LOCK_FILE}" in message and "no longer running on other-node-7" in message


def test_train_py_refuses_a_run_directory_in_use(holder, capsys):
    from dabjax.cli import train as train_cli

    process, run = holder
    code = train_cli.main(["--config", "smoke", f"run.dir={run}"])
    error = capsys.readouterr().err
    assert code == 2 and f"run directory {run} is in use by process {process.pid}" in error
    assert not (run / "config.yaml").exists() and not (run / "checkpoints").exists()
