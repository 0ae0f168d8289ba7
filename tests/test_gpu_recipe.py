"""The one-GPU path on the CPU: the compiled learning loop equals the host loop, state is donated, the plan is
made on the device, bfloat16 only where a GPU runs it natively, the trainer bench and the GPU check's tiny mode."""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import trace_counts
from conftest import load_benchmark

from dabjax.game import loops
from dabjax.search import network
from dabjax.training import config as config_lib
from dabjax.training import learner
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def smoke_trainer(tmp_path, *overrides):
    config = config_lib.load_config(str(ROOT / "configs" / "smoke.yaml"),
                                    [f"run.dir={tmp_path}", "eval.every=0", *overrides])
    return trainer_lib.Trainer(config)


def test_compiled_and_host_loops_train_the_same_and_donate_the_state(tmp_path):
    results = {}
    for loop in ("compiled", "host"):
        with trace_counts.counting_traces() as traces:
            trainer = smoke_trainer(tmp_path, f"train.loop={loop}")
        assert trainer.loop == loop
        state = trainer.init_state()
        for _ in range(2):
            old = state
            state, metrics = trainer.iteration(state)
            # Donated: the buffer and the training state of the state passed in were updated in place.
            assert old.buffer.samples.valid.is_deleted() and old.train_state.step.is_deleted()
        assert metrics["train_steps"] == 4
        results[loop] = (metrics, jax.tree_util.tree_leaves(state.train_state.params))
        # One compile each, whatever the iteration: the plan and the steps are one call, or a plan and a step.
        assert traces and all(count == 1 for count in traces.values()), traces
        assert ("learn" in traces) == (loop == "compiled") and ("step" in traces) == (loop == "host")
    (compiled, compiled_params), (host, host_params) = results["compiled"], results["host"]
    assert compiled["loss"] == pytest.approx(host["loss"], rel=1e-5)
    assert compiled["buffer_size"] == host["buffer_size"] and compiled["mqr"] == host["mqr"]
    for a, b in zip(compiled_params, host_params):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_the_epoch_plan_is_made_on_the_device():
    valid = jnp.array([True, False, True, True, False, True])
    plan = jax.jit(lambda key, count: learner.epoch_plan(key, valid, count, 8, "all", 2, 4, 10))
    index, sym, active = plan(jax.random.PRNGKey(0), valid.sum())
    # 4 valid samples x 8 symmetries x 2 epochs = 64 draws: 16 steps of 4, capped at 10.
    assert int(active) == 10 and index.shape == sym.shape == (10, 4)
    assert set(np.asarray(index[:8]).ravel().tolist()) == {0, 2, 3, 5}
    first_epoch = np.asarray(index).ravel()[:32] * 8 + np.asarray(sym).ravel()[:32]
    assert len(set(first_epoch.tolist())) == 32  # every symmetric copy once per epoch
    _, _, none = plan(jax.random.PRNGKey(0), jnp.int32(0))
    assert int(none) == 0


def test_bfloat16_only_where_the_device_runs_it_natively():
    class Device:
        def __init__(self, platform, capability=None):
            self.platform, self.compute_capability = platform, capability

    assert not network.native_bfloat16(Device("cpu"))
    assert not network.native_bfloat16(Device("gpu", "7.5"))  # a T4
    assert network.native_bfloat16(Device("gpu", "8.0")) and network.native_bfloat16(Device("gpu", "9.0"))
    assert network.compute_dtype("auto") == jnp.float32  # this machine's CPU
    assert network.compute_dtype("bfloat16") == jnp.bfloat16
    auto = network.NetworkConfig(kind="graph", dtype="auto")
    assert network.same_parameters(auto, network.NetworkConfig(kind="graph"))  # a float32 warm start fits
    assert not network.same_parameters(auto, network.NetworkConfig(kind="graph", width=64))
    with pytest.raises(ValueError, match="network.dtype"):
        network.NetworkConfig(dtype="float16")
    # bfloat16 compute keeps float32 parameters and float32 outputs (what the search takes).
    config = network.NetworkConfig(kind="graph", width=8, blocks=1, value_hidden=8, dtype="bfloat16")
    params = network.init_params(config, (5, 5), jax.random.PRNGKey(0))
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(params)} == {jnp.dtype(jnp.float32)}
    logits, value = network.PolicyValueNet(config).apply(params, jnp.zeros((2, 5, 5, 4)))
    assert logits.dtype == value.dtype == jnp.float32


def test_the_gpu_recipe_and_its_loop_setting_load():
    config = config_lib.load_config("5x5")
    assert config.network.kind == "graph" and config.network.dtype == "auto" and config.run.max_minutes > 0
    assert config.run.init_from == "pretrained:5x5" and config.train.loop == "auto"
    assert config_lib.load_config("5x5_resnet").network.width == 160  # the paper's network, kept
    with pytest.raises(config_lib.ConfigError, match="train.loop"):
        config_lib.load_config("smoke", ["train.loop=fast"])
    # On the CPU the compiled loop wins but for a ResNet (XLA runs convolutions inside loops slowly there).
    assert learner.resolve_loop("auto", "graph") == learner.resolve_loop("auto", "mlp") == "compiled"
    assert learner.resolve_loop("auto", "resnet") == "host" and learner.resolve_loop("host", "graph") == "host"


def test_every_row_of_the_gpu_check_loads_its_config():
    """A mistyped override in a trainer row would only show on a lent GPU: every row's config and overrides load
    here (the baseline rows run another checkout's config and are left out)."""
    gpu_check = load_benchmark("gpu_check")
    for plan in (gpu_check.FULL, gpu_check.TINY):
        for label, config, overrides, _, environment in plan.trainer_rows:
            if ("baseline", "1") in environment:
                continue
            loaded = config_lib.load_config(config, list(overrides))
            if "4,096" in label:  # the same samples in larger steps: the square-root rate, the period in samples
                assert (loaded.train.batch_size, loaded.train.lr, loaded.train.restart_period) == (4096, 0.002, 125)


def test_the_iteration_clock_tells_a_blocking_launch_from_waiting_for_results():
    """A launch that blocks (as XLA's GPU runtime does for a while loop driven from the host) counts as dispatch;
    a result that is not ready yet counts as waiting."""

    class NotReady:  # a result the device needs 0.2 s more to finish
        def block_until_ready(self):
            time.sleep(0.2)
            return self

    clock = trainer_lib.IterationClock()
    result = clock.dispatch(lambda x: (time.sleep(0.2), x)[1], NotReady())
    assert 0.2 <= clock.dispatched and clock.waited == 0
    clock.wait(result)
    assert 0.2 <= clock.waited and clock.dispatched < 0.4
    assert clock.dispatched + clock.waited <= clock.elapsed()


def test_the_device_profile_is_the_union_of_intervals_and_its_gaps():
    profile = load_benchmark("device_profile")
    merged = profile.union([(5.0, 7.0), (0.0, 2.0), (1.0, 3.0), (7.0, 8.0), (12.0, 13.0)])
    assert merged == [(0.0, 3.0), (5.0, 8.0), (12.0, 13.0)]
    assert profile.largest_gaps(merged, 1) == ((4.0, 8.0),) and profile.largest_gaps([], 3) == ()
    process = dict(ph="M", name="process_name")
    thread = dict(ph="M", name="thread_name")
    events = [
        dict(process, pid=1, args=dict(name="/device:GPU:0")), dict(process, pid=2, args=dict(name="/host:CPU")),
        dict(thread, pid=1, tid=7, args=dict(name="Stream #7(Compute)")),
        dict(thread, pid=1, tid=8, args=dict(name="XLA Modules")),
        dict(thread, pid=2, tid=9, args=dict(name="tf_XLAPjRtCpuClient/1")),
        dict(ph="X", pid=1, tid=7, ts=10, dur=5), dict(ph="X", pid=1, tid=7, ts=30, dur=5),
        dict(ph="X", pid=1, tid=8, ts=0, dur=100),  # a module's span, waits included: not device work
        dict(ph="X", pid=2, tid=9, ts=0, dur=50),  # host threads, when a device timeline exists
    ]
    assert profile.device_intervals(events) == ([(10.0, 15.0), (30.0, 35.0)], "device streams")
    cpu_only = [e for e in events if e.get("pid") == 2]
    assert profile.device_intervals(cpu_only) == ([(0.0, 50.0)], "XLA's CPU execution threads")


def test_the_top_kernels_are_the_device_events_names_by_total_time():
    profile = load_benchmark("device_profile")
    process, thread = dict(ph="M", name="process_name"), dict(ph="M", name="thread_name")
    events = [
        dict(process, pid=1, args=dict(name="/device:GPU:0")),
        dict(thread, pid=1, tid=7, args=dict(name="Stream #7(Compute)")),
        dict(thread, pid=1, tid=8, args=dict(name="XLA Ops")),
        dict(ph="X", pid=1, tid=7, ts=0, dur=4, name="gemm"), dict(ph="X", pid=1, tid=7, ts=10, dur=4, name="gemm"),
        dict(ph="X", pid=1, tid=7, ts=20, dur=6, name="loop_fusion"),
        dict(ph="X", pid=1, tid=7, ts=30, dur=1, name="copy"),
        dict(ph="X", pid=1, tid=8, ts=0, dur=100, name="while"),  # a derived line: not a kernel
    ]
    kernels = profile.top_kernels(events)
    assert [(name, calls) for name, _, calls in kernels] == [("gemm", 2), ("loop_fusion", 1), ("copy", 1)]
    assert [seconds for _, seconds, _ in kernels] == pytest.approx([8e-6, 6e-6, 1e-6])
    assert [name for name, _, _ in profile.top_kernels(events, 1)] == ["gemm"]
    found = profile.DeviceProfile(wall_seconds=1e-4, busy_seconds=15e-6, gaps=(), events=4, source="device streams",
                                  kernels=kernels)
    assert profile.describe_kernels(found, 2) == ("top kernels (93% of the busy time): gemm 8 µs (2x), "
                                                  "loop_fusion 6 µs (1x)")


def test_trainer_bench_prints_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "benchmarks/trainer_throughput.py", "--config", "configs/smoke.yaml", "--iterations", "2",
         "--json", str(out), "train.loop=compiled", f"run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert all(title in lines[1] for title in ("pos/s", "steps/s", "dispatch s", "ready s", "smi"))
    assert lines[-3].split()[0] == "median" and lines[-3].split()[-1] == "n/a"  # no nvidia-smi on a CPU
    assert lines[-2].startswith("profiled iteration: device busy")
    assert lines[-1].startswith("profiled iteration: top kernels (")
    figures = json.loads(out.read_text())
    assert len(figures["rows"]) == 2 and figures["backend"] == "cpu"
    for row in figures["rows"]:
        assert row["positions_per_s"] > 0 and row["steps_per_s"] > 0
        assert row["dispatch_seconds"] + row["ready_seconds"] <= row["seconds"]  # two parts of the whole
    profiled = figures["profile"]  # the trace holds the compiled programs' work, and it fits the iteration
    assert profiled["events"] > 0 and profiled["source"] == "XLA's CPU execution threads"
    assert 0 < profiled["busy_seconds"] and 0 < profiled["busy_share"] <= 1
    assert [gap for gap, _ in profiled["gaps"]] == sorted((gap for gap, _ in profiled["gaps"]), reverse=True)
    kernels = profiled["kernels"]  # the compiled programs' thunks on the CPU backend, longest first
    assert kernels and all(seconds > 0 and calls >= 1 for _, seconds, calls in kernels)
    assert [seconds for _, seconds, _ in kernels] == sorted((seconds for _, seconds, _ in kernels), reverse=True)


@pytest.mark.slow  # minutes: `python -m pytest -m slow` (docs/maintaining.md)
def test_gpu_check_runs_in_its_tiny_mode(tmp_path):
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path), "--tiny"], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout
    for step in ("host loops", "environment", "search", "trainer", "profiler", "training", "accuracy", "learning",
                 "total"):
        assert any(line.startswith(step) for line in table.splitlines()), step
    assert any(line.startswith("profiler") and "top kernels" in line and "x)" in line for line in table.splitlines())
    assert "FAILED" not in table
    lines = table.splitlines()
    counted = next(line for line in lines if line.startswith("host loops") and "host callbacks" in line)
    assert re.search(r"self-play [1-9]\d* / 0, agent [1-9]\d* / 0, learning [1-9]\d* / 0$", counted), counted
    assert any("baseline" in line and line.endswith("skipped: no --baseline checkout") for line in lines)
    figures = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [row["label"] for row in figures["trainer"]] == ["default (smoke)", "no command buffers (smoke)",
                                                            "default, 4x the games"]
    assert [row["environment"] for row in figures["trainer"]] == [{}, {"DABJAX_COMMAND_BUFFERS": "0"}, {}]
    # Each row's process ran with dabjax's command buffers in XLA_FLAGS where the installed driver, runtime and
    # jaxlib run them (none without a GPU) or this process forced them, but the row that opts out.
    on = (loops.COMMAND_BUFFER_FLAG in os.environ.get("XLA_FLAGS", "")
          or loops.command_buffer_decision(*loops.installed_versions())[0])
    assert [loops.COMMAND_BUFFER_FLAG in row["xla_flags"] for row in figures["trainer"]] == [on, False, on]
    assert any(line.endswith("x") and "default, 4x the games / default (smoke): positions/s" in line
               for line in lines)
    by_move = figures["training"]["best_result_by_move"]
    assert len(by_move) == 24 and all(0 <= share <= 1 for share in by_move.values())
    assert figures["training"]["last_metrics"]["iteration"] == 2
    assert [row["batch"] for row in figures["learning"]["rows"]] == [4, 16]


@pytest.mark.slow  # minutes: `python -m pytest -m slow` (docs/maintaining.md)
def test_gpu_train_check_runs_dry_on_the_cpu(tmp_path):
    """scripts/gpu_train_check.sh, the short GPU lease's script, end to end on tiny sizes: a trainer row, the
    training, the export, and the files it promises in OUT."""
    out = tmp_path / "out"
    environment = dict(os.environ, CONFIG="configs/3x3.yaml", CHECK_ARGS="--tiny", ROWS_SECONDS="120",
                       WORK=str(tmp_path / "work"), BASELINE=str(tmp_path / "no-baseline"),
                       TRAIN_OVERRIDES="run.iterations=2 selfplay.games=8 search.num_simulations=4 "
                                       "train.max_steps_per_iteration=2 network.width=16 run.init_from=null")
    # run.iterations=2 ends the training; the minutes and the budget only leave room for a loaded machine.
    result = subprocess.run(["bash", "scripts/gpu_train_check.sh", str(out), "3", "900", "2"], cwd=ROOT,
                            env=environment, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    log = (out / "log.txt").read_text()
    for step in ("gpu_check: exit 0", "train: exit 0", "export: exit 0"):
        assert step in log, log[-3000:]
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        "agent.json", "gpu_check.json", "log.txt", "metrics.jsonl", "nvidia-smi.txt", "params.msgpack", "table.txt"]
    figures = json.loads((out / "gpu_check.json").read_text())
    assert [row["label"] for row in figures["trainer"]] == ["default (smoke)"]
    agent = json.loads((out / "agent" / "agent.json").read_text())
    assert (agent["rows"], agent["cols"], agent["search"]["num_simulations"]) == (3, 3, 64)
    assert len([line for line in (out / "metrics.jsonl").read_text().splitlines() if line]) == 2


def test_gpu_train_check_stops_with_the_training_s_error(tmp_path):
    """A training that fails at start-up (here a misspelt key; on a lease, a carried package too old) ends the
    script with the training's status and its error in the script's own output, and nothing is exported."""
    out = tmp_path / "out"
    environment = dict(os.environ, CONFIG="configs/3x3.yaml", WORK=str(tmp_path / "work"),
                       TRAIN_OVERRIDES="train.lrr=0.1")
    result = subprocess.run(["bash", "scripts/gpu_train_check.sh", str(out), "0.5", "300", "none"], cwd=ROOT,
                            env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the training failed (exit 2)" in result.stdout and "train.lrr" in result.stdout, result.stdout
    assert "train: exit 2" in (out / "log.txt").read_text()
    assert not (out / "agent").exists()


def test_gpu_detached_runs_a_command_past_one_call_and_waits_again(tmp_path):
    """scripts/gpu_detached.sh, which lets a device lease train past one call's limit: the first call starts the
    command in its own session and returns 75 while it runs; a later call waits for it and returns its status."""
    run_dir = tmp_path / "detached"
    script = ["bash", "scripts/gpu_detached.sh", str(run_dir)]
    nothing = subprocess.run([*script, "0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert nothing.returncode == 2 and "nothing was started" in nothing.stderr
    command = "sleep 3; echo made >$0/made.txt; echo done; exit 4"
    first = subprocess.run([*script, "0", "--", "bash", "-c", command, str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 75 and "still running" in first.stdout, first.stdout + first.stderr
    again = subprocess.run([*script, "0", "--", "bash", "-c", "exit 0"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 75 and "already started" in again.stdout  # one command a folder: never a second
    waited = subprocess.run([*script, "60"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert waited.returncode == 4, waited.stdout + waited.stderr
    assert "done" in waited.stdout and "ended with status 4" in waited.stdout
    assert (tmp_path / "made.txt").read_text() == "made\n"
