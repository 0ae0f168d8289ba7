"""XLA's command buffers for while loops and conditionals only where the driver, the CUDA runtime and jaxlib run
them (dabjax.game.loops.command_buffer_decision), forced by DABJAX_COMMAND_BUFFERS; no GPU needed."""

import importlib.metadata
import logging
import os
import subprocess
import sys

import pytest

from dabjax.game import loops

NEW_JAXLIB = "0.10.2"


@pytest.mark.parametrize("driver, runtime, jaxlib, on, named", [
    ("535.183.01", "12.2.140", NEW_JAXLIB, False, "conditional nodes"),  # a Colab T4's kind of driver
    ("570.86.15", "12.2.140", NEW_JAXLIB, False, "conditional nodes"),  # a new driver cannot lift an old runtime
    ("550.54.15", "12.4.127", NEW_JAXLIB, False, "r570"),  # conditional nodes, but their empty-body hang
    ("570.86.15", "12.8.90", NEW_JAXLIB, True, ""),
    ("580.65.06", "13.0", "0.9.0", True, ""),
    ("570.86.15", "12.8.90", "0.8.1", False, "second run"),  # jaxlib before XLA's while-loop fix
    ("570.86.15", "12.8.90", None, False, "jaxlib None"),
    ("570.86.15", None, NEW_JAXLIB, False, "runtime's version is unknown"),
    (None, "12.8.90", NEW_JAXLIB, False, "no NVIDIA driver"),
])
def test_the_decision_follows_the_driver_runtime_and_jaxlib(driver, runtime, jaxlib, on, named):
    decided, reason = loops.command_buffer_decision(driver, runtime, jaxlib)
    assert decided == on and named in reason
    assert (reason == "") == on and "\n" not in reason


def versions_of(driver, runtime="12.8.90", jaxlib=NEW_JAXLIB):
    return lambda: (driver, runtime, jaxlib)


def test_the_flag_goes_in_only_where_the_decision_says_and_says_why_not(caplog):
    caplog.set_level(logging.WARNING, logger=loops.__name__)
    good = {"XLA_FLAGS": "--xla_dump_to=/tmp/dump"}
    assert loops.enable_command_buffers(good, versions_of("570.86.15"))
    assert good["XLA_FLAGS"] == f"--xla_dump_to=/tmp/dump {loops.COMMAND_BUFFER_FLAG}"
    assert not loops.enable_command_buffers(good, versions_of("570.86.15"))  # once
    assert good["XLA_FLAGS"].count("command_buffer") == 1
    assert caplog.records == []
    old_driver = {}
    assert not loops.enable_command_buffers(old_driver, versions_of("535.183.01", "12.2.140")) and old_driver == {}
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "conditional nodes" in line and f"{loops.COMMAND_BUFFERS_VARIABLE}=1" in line and "\n" not in line
    caplog.clear()
    no_gpu = {"XLA_FLAGS": "--xla_dump_to=/tmp/dump"}  # nothing changes and nothing is said
    assert not loops.enable_command_buffers(no_gpu, versions_of(None))
    assert no_gpu == {"XLA_FLAGS": "--xla_dump_to=/tmp/dump"} and caplog.records == []


def test_the_environment_forces_them_off_or_on_and_the_users_flags_stand(caplog):
    def unread():
        raise AssertionError("a forced choice reads no versions")

    forced_on = {loops.COMMAND_BUFFERS_VARIABLE: "1"}
    assert loops.enable_command_buffers(forced_on, unread) and forced_on["XLA_FLAGS"] == loops.COMMAND_BUFFER_FLAG
    forced_off = {loops.COMMAND_BUFFERS_VARIABLE: "0"}
    assert not loops.enable_command_buffers(forced_off, versions_of("570.86.15")) and "XLA_FLAGS" not in forced_off
    own = {"XLA_FLAGS": "--xla_gpu_enable_command_buffer=", loops.COMMAND_BUFFERS_VARIABLE: "1"}
    assert not loops.enable_command_buffers(own, unread) and own["XLA_FLAGS"] == "--xla_gpu_enable_command_buffer="
    assert caplog.records == []


def test_the_versions_are_read_without_starting_a_backend():
    code = ("import jax._src.xla_bridge as bridge; from dabjax.game import loops; "
            "driver, runtime, jaxlib = loops.installed_versions(); "
            "assert not bridge._backends, bridge._backends; print(jaxlib)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == importlib.metadata.version("jaxlib")


@pytest.mark.parametrize("line", [
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  (dvs-builder@U16)",
])
def test_the_driver_version_comes_from_the_kernel_modules_file(tmp_path, monkeypatch, line):
    version_file = tmp_path / "version"
    version_file.write_text(f"{line}\nGCC version:  gcc version 12.2.0\n")
    monkeypatch.setattr(loops, "NVIDIA_DRIVER_FILE", str(version_file))
    assert loops.nvidia_driver_version() == "535.104.05"
    monkeypatch.setattr(loops, "NVIDIA_DRIVER_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi either: no GPU
    assert loops.nvidia_driver_version() is None


def test_importing_dabjax_without_a_gpu_leaves_xla_flags_as_they_were():
    if loops.nvidia_driver_version() is not None:
        pytest.skip("this machine has an NVIDIA driver: the import may add the flag")
    env = {key: value for key, value in os.environ.items() if key != loops.COMMAND_BUFFERS_VARIABLE}
    env["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    code = "import os, dabjax; print(os.environ['XLA_FLAGS'])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "--xla_dump_to=/tmp/dump" and "command buffers" not in result.stderr
    forced = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(env, **{loops.COMMAND_BUFFERS_VARIABLE: "1"}))
    assert forced.stdout.strip() == f"--xla_dump_to=/tmp/dump {loops.COMMAND_BUFFER_FLAG}", forced.stderr[-2000:]
