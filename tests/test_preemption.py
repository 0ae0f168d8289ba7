"""Preemption-safe runs (docs/training.md, "Stopping, preemption and faults"): a trainer stopped by SIGTERM or
SIGINT saves, says so in one line naming the checkpoint and the command that resumes, and exits 143 / 130; a
second signal stops at once and the run still resumes; a full disk is one line with its remedy. Each signal test
runs the real trainer in a subprocess on the 2x2 smoke config and checks the exit status and the line, that the
same command resumes from the saved iteration, and that metrics.jsonl then holds every iteration exactly once.

The signals are real ones: a patched iteration or save sends them to its own process at a known point (in the
middle of an iteration, in the middle of a save), and one test sends SIGINT from outside. The subprocesses share
a persistent JAX compilation cache, so only the first compiles."""

from __future__ import annotations

import errno
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from test_run_dir import CountingTraining, run_section

from dabjax.cli import faults
from dabjax.cli import label as label_cli
from dabjax.runs import run_dir, stopping
from dabjax.solvers import labelled, parallel_labels
from dabjax.training import checkpoint
from dabjax.training import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = ["--config", "smoke", "eval.every=0", "run.checkpoint_minutes=0", "--quiet"]

# Runs dabjax.cli.train.main(argv, prog="train.py") after a patch (the hook: Python run first, with os, signal,
# the trainer shells and checkpoint imported), as `python train.py ARGV` would.
RUNNER = """
import os, signal, sys, time
from dabjax.runs import train_boxeszero, train_td
from dabjax.cli.train import main
from dabjax.training import checkpoint
{hook}
sys.exit(main(sys.argv[1:], prog="train.py"))
"""


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """The subprocesses' environment: the CPU, and one compilation cache for all of them."""
    cache = tmp_path_factory.mktemp("jax_cache")
    return dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", XLA_FLAGS="--xla_force_host_platform_device_count=1")


def start(environment, argv: list[str], hook: str = "") -> subprocess.Popen:
    script = RUNNER.format(hook=textwrap.dedent(hook))
    return subprocess.Popen([sys.executable, "-c", script, *argv], cwd=ROOT, env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def run(environment, argv: list[str], hook: str = "") -> tuple[int, str, str]:
    return finish(start(environment, argv, hook))


def logged(path) -> list[int]:
    return [row["iteration"] for row in run_dir.read_metrics(path)]


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def resume_command(line: str) -> list[str]:
    """The arguments of the command the stop line names (after ``python train.py``)."""
    command = line.split("the same command resumes from it: ", 1)[1]
    assert command.startswith("python train.py ")
    import shlex

    return shlex.split(command)[2:]


def saved_iterations(path) -> list[int]:
    return checkpoint.saved_iterations(checkpoint.checkpoint_root(path))


def stop_line(environment, argv: list[str], hook: str, status: int = 143) -> str:
    """Runs ``argv`` after ``hook``, checks that it exits with ``status`` (143: SIGTERM), and returns the last line
    of its stderr (the stop line)."""
    returned, out, err = run(environment, argv, hook)
    assert returned == status, err
    return last_line(err)


def resumes_to_the_end(environment, argv: list[str], path, iterations: int) -> None:
    """``argv`` run again, without a hook, finishes: exit 0, and metrics.jsonl holds iterations 1 to
    ``iterations``, each once."""
    status, out, err = run(environment, argv)
    assert status == 0, err
    assert logged(path) == list(range(1, iterations + 1))


# A signal the process sends itself in the middle of iteration 3 (before its self-play), or of a save.
SIGTERM_IN_ITERATION_3 = """
real_iterate = train_boxeszero.BoxesZeroTraining.iterate
def iterate(self, state):
    if int(state.iteration) == 2:
        os.kill(os.getpid(), signal.SIGTERM)
    return real_iterate(self, state)
train_boxeszero.BoxesZeroTraining.iterate = iterate
"""


def test_sigterm_mid_iteration_finishes_it_saves_and_the_same_command_resumes(environment, tmp_path):
    path = tmp_path / "run"
    argv = [*SMOKE, f"run.dir={path}", "run.iterations=5", "run.checkpoint_every=100"]
    status, out, err = run(environment, argv, SIGTERM_IN_ITERATION_3)
    line = last_line(err)
    assert status == 143, err
    assert line.startswith(f"train.py: stopped by SIGTERM: checkpoint 3 is saved in {path / 'checkpoints'}"), err
    assert "Traceback" not in err and resume_command(line) == argv
    assert saved_iterations(path) == [3] and logged(path) == [1, 2, 3]
    assert not (path / ".lock").exists()
    status, out, err = run(environment, resume_command(line))
    assert status == 0, err
    assert logged(path) == [1, 2, 3, 4, 5] and saved_iterations(path) == [3, 5]


def test_sigterm_mid_save_lets_the_save_finish(environment, tmp_path):
    path = tmp_path / "run"
    argv = [*SMOKE, f"run.dir={path}", "run.iterations=4", "run.checkpoint_every=2"]
    hook = """
    real_save = train_boxeszero.BoxesZeroTraining.save
    def save(self, store, state):
        if int(state.iteration) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_save(self, store, state)
    train_boxeszero.BoxesZeroTraining.save = save
    """
    assert "stopped by SIGTERM: checkpoint 2 is saved" in stop_line(environment, argv, hook)
    assert saved_iterations(path) == [2] and logged(path) == [1, 2]
    assert checkpoint.checkpoint_problem(path / "checkpoints" / "2") is None  # whole, with its manifest
    resumes_to_the_end(environment, argv, path, 4)


def test_a_second_signal_stops_at_once_and_the_run_still_resumes(environment, tmp_path):
    path = tmp_path / "run"
    argv = [*SMOKE, f"run.dir={path}", "run.iterations=4", "run.checkpoint_every=1"]
    # Both signals come after orbax has written checkpoint 2 and before its manifest: the middle of a save.
    hook = """
    real_manifest = checkpoint.write_manifest
    def write_manifest(step_dir):
        if str(step_dir).endswith("/2"):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_manifest(step_dir)
    checkpoint.write_manifest = write_manifest
    """
    assert "second SIGTERM: stopping at once without saving" in stop_line(environment, argv, hook)
    assert logged(path) == [1, 2]
    resumes_to_the_end(environment, argv, path, 4)


def test_sigint_from_outside_saves_the_iteration_reached(environment, tmp_path):
    path = tmp_path / "run"
    argv = [*SMOKE, f"run.dir={path}", "run.iterations=1000", "run.checkpoint_every=1000"]
    slow = """
    real_iterate = train_boxeszero.BoxesZeroTraining.iterate
    def iterate(self, state):
        time.sleep(0.2)  # an iteration long enough for the signal to land in one
        return real_iterate(self, state)
    train_boxeszero.BoxesZeroTraining.iterate = iterate
    """
    process = start(environment, argv, slow)
    metrics = path / run_dir.METRICS_FILE
    deadline = time.monotonic() + 240
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 2):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    status, out, err = finish(process)
    assert status == 130, err
    done = logged(path)
    assert done == list(range(1, len(done) + 1)) and len(done) >= 2
    assert f"stopped by SIGINT: checkpoint {done[-1]} is saved" in last_line(err)
    assert saved_iterations(path) == [done[-1]]
    status, out, err = run(environment, [*resume_command(last_line(err)), f"run.iterations={done[-1] + 2}"])
    assert status == 0, err
    assert logged(path) == list(range(1, done[-1] + 3))


def test_a_full_disk_during_a_save_is_one_line_and_the_run_resumes(environment, tmp_path):
    path = tmp_path / "run"
    argv = [*SMOKE, f"run.dir={path}", "run.iterations=4", "run.checkpoint_every=1"]
    # A writer that fails as tensorstore does on a full disk, from the save of checkpoint 3 on.
    hook = """
    real_save = checkpoint.CheckpointStore.save
    def save(self, iteration, *args):
        if iteration >= 3:
            raise ValueError("RESOURCE_EXHAUSTED: Error writing local file '.../array_metadatas/process_0': "
                             "Failed to write; No space left on device [source locations='tensorstore/...']")
        return real_save(self, iteration, *args)
    checkpoint.CheckpointStore.save = save
    """
    status, out, err = run(environment, argv, hook)
    assert status == faults.DISK_FULL, err
    assert "Traceback" not in err
    line = last_line(err)
    assert line.startswith("train.py: the disk is full (ValueError: RESOURCE_EXHAUSTED"), err
    assert f"free space on the disk of {path}; the same command resumes from checkpoint 2: python train.py" in line
    assert saved_iterations(path) == [1, 2] and logged(path) == [1, 2, 3]
    resumes_to_the_end(environment, argv, path, 4)


def test_the_td_trainer_stops_on_sigterm_the_same_way(environment, tmp_path):
    path = tmp_path / "td"
    argv = ["--config", "td_2x2", f"run.dir={path}", "run.iterations=3", "run.checkpoint_every=100",
            "eval.every=0", "--quiet"]
    hook = """
    real_iterate = train_td.TDTraining.iterate
    def iterate(self, state):
        if int(state.learner.iteration) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_iterate(self, state)
    train_td.TDTraining.iterate = iterate
    """
    assert "stopped by SIGTERM: checkpoint 2 is saved" in stop_line(environment, argv, hook)
    resumes_to_the_end(environment, argv, path, 3)


# --- without a trainer process --------------------------------------------------------------------------------


def test_checkpoint_minutes_is_a_typed_validated_run_field():
    assert config_lib.RunSection().checkpoint_minutes == 5.0
    assert config_lib.load_config("smoke", ["run.checkpoint_minutes=0.5"]).run.checkpoint_minutes == 0.5
    with pytest.raises(config_lib.ConfigError, match="run.checkpoint_minutes must be >= 0"):
        config_lib.load_config("smoke", ["run.checkpoint_minutes=-1"])
    with pytest.raises(config_lib.ConfigError, match="checkpoint_minute"):
        config_lib.load_config("smoke", ["run.checkpoint_minute=5"])


def test_a_checkpoint_is_due_every_n_iterations_or_every_m_minutes():
    run = config_lib.RunSection(checkpoint_every=10, checkpoint_minutes=2.0)
    assert run_dir.checkpoint_due(run, 20, 0.0) and not run_dir.checkpoint_due(run, 21, 119.0)
    assert run_dir.checkpoint_due(run, 21, 120.0)
    assert not run_dir.checkpoint_due(config_lib.RunSection(checkpoint_every=10, checkpoint_minutes=0), 21, 1e9)


def test_the_loop_saves_on_the_clock_between_iteration_checkpoints(tmp_path, monkeypatch):
    clock = iter(range(0, 10_000, 40))  # each reading of the clock: 40 s later
    monkeypatch.setattr(run_dir, "wall_clock", lambda: float(next(clock)))
    path = tmp_path / "run"
    run = run_section(path, iterations=6, checkpoint_every=100, checkpoint_minutes=1.0, keep_checkpoints=10)
    run_dir.train_in_run_dir(run, "counting: true\n", CountingTraining(), quiet=True)
    assert saved_iterations(path) == [2, 4, 6]  # 80 s after each save, the next


def test_the_faults_are_told_apart_each_with_its_exit_status():
    statuses = {
        faults.classify(OSError(errno.ENOSPC, "No space left on device")): faults.DISK_FULL,
        faults.classify(ValueError("RESOURCE_EXHAUSTED: ... Failed to write")): faults.DISK_FULL,
        faults.classify(PermissionError(errno.EACCES, "Permission denied", "runs/x")): faults.PERMISSION_DENIED,
        faults.classify(OSError(errno.EROFS, "Read-only file system")): faults.READ_ONLY,
        faults.classify(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")):
            faults.DEVICE_OUT_OF_MEMORY,
    }
    assert all(fault is not None and fault.status == status for fault, status in statuses.items())
    assert len(set(statuses.values())) == 4 and faults.classify(ValueError("another")) is None
    try:  # a fault hidden behind another error (a save on exit after the first) is still found
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("while saving on exit")
    except RuntimeError as error:
        assert faults.classify(error).status == faults.DISK_FULL


def test_the_traceback_comes_only_with_debug(capsys, monkeypatch):
    monkeypatch.delenv(faults.DEBUG_VARIABLE, raising=False)
    assert not faults.debug_requested()
    monkeypatch.setenv(faults.DEBUG_VARIABLE, "1")
    assert faults.debug_requested()
    try:
        raise OSError(errno.EROFS, "Read-only file system")
    except OSError as error:
        fault = faults.classify(error)
        assert faults.report("train.py", error, fault, "advice", debug=False) == faults.READ_ONLY
        assert capsys.readouterr().err.count("\n") == 1
        faults.report("train.py", error, fault, "advice", debug=True)
        assert "Traceback" in capsys.readouterr().err


def test_a_permission_error_on_the_run_directory_is_one_line(tmp_path, capsys, monkeypatch):
    from dabjax.cli import train as train_cli

    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(pathlib.Path, "mkdir", refuse)
    status = train_cli.main([*SMOKE, f"run.dir={tmp_path / 'run'}"], prog="train.py")
    err = capsys.readouterr().err
    assert status == faults.PERMISSION_DENIED and err.count("\n") == 1
    assert err.startswith("train.py: permission denied (PermissionError:") and "give run.dir a directory" in err


def test_label_build_on_sigterm_says_what_is_saved_and_how_to_go_on(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(labelled, "TABLE_LABEL_MAX_LINES", 0)
    real = parallel_labels.solve_chunks

    def preempted(*args, **kwargs):  # the machine is taken away after two chunks
        for i, item in enumerate(real(*args, **kwargs)):
            if i == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            yield item

    monkeypatch.setattr(parallel_labels, "solve_chunks", preempted)
    argv = ["build", "--board", "2x3", "--moves", "4,9,13", "--per-move", "5", "--workers", "1", "--no-progress",
            "--out", str(tmp_path / "set.npz")]
    assert label_cli.main(argv) == stopping.exit_status(signal.SIGTERM) == 143
    err = capsys.readouterr().err
    assert "stopped by SIGTERM: 2 of " in err and "the same command goes on from there" in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is gone with the build
    monkeypatch.setattr(parallel_labels, "solve_chunks", real)
    assert label_cli.main(argv) == 0 and (tmp_path / "set.npz").is_file()
