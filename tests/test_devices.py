"""Scale-out: one iteration on 4 (simulated CPU) devices equals the 1-device result (exact labels in every batch
included); one trace per shape."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

ONE_ITERATION = r"""
import json, sys
import jax, numpy as np
from dabjax.game.geometry import board_geometry
from dabjax.solvers import labelled
from dabjax.training import config as C, supervised, trainer as T
# Exact labels join every batch (train.exact_labels): 4 of 16, the other 12 from the buffer split over devices.
labels = sys.argv[1] + ".labels.npz"
built = labelled.build_set(board_geometry(2, 2), [2, 3, 4], 6, seed=3)
labelled.save(built, labels)
cfg = C.load_config("configs/smoke.yaml", ["selfplay.games=8", "train.batch_size=16", "eval.every=0",
                                           f"train.exact_labels={labels}", "train.exact_share=0.25"])
trainer = T.Trainer(cfg, exact_samples=supervised.samples_from_set(built)[0])
state, metrics = trainer.iteration(trainer.init_state())
leaves = jax.tree_util.tree_leaves(state.train_state.params)
np.save(sys.argv[1], np.concatenate([np.ravel(np.asarray(x)) for x in leaves]))
print(json.dumps({"devices": jax.device_count(), "loss": metrics["loss"], "mqr": metrics["mqr"],
                  "buffer_size": metrics["buffer_size"], "searched": metrics["searched_positions"],
                  "train_steps": metrics["train_steps"], "lr": cfg.train.lr}))
"""


def run_on(devices: int, out: pathlib.Path) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", ONE_ITERATION, str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_four_devices_equal_one_device(tmp_path):
    one = run_on(1, tmp_path / "one.npy")
    four = run_on(4, tmp_path / "four.npy")
    assert one["devices"] == 1 and four["devices"] == 4
    assert one["buffer_size"] == four["buffer_size"] and one["searched"] == four["searched"]
    assert four["mqr"] == pytest.approx(one["mqr"])
    assert four["loss"] == pytest.approx(one["loss"], rel=1e-4)
    # Adam divides by sqrt(second moment): a near-zero gradient summed in another order can move a weight
    # by up to ~lr per step (Adam's step bound); the rest agree to float32 rounding.
    step_bound = 1.01 * one["train_steps"] * one["lr"]
    params_four, params_one = np.load(tmp_path / "four.npy"), np.load(tmp_path / "one.npy")
    np.testing.assert_allclose(params_four, params_one, atol=step_bound)
    assert np.mean(np.abs(params_four - params_one) < 1e-5) > 0.99


def test_jitted_functions_are_traced_once_as_st_moves(tmp_path):
    import trace_counts

    from dabjax.training import config as config_lib
    from dabjax.training import trainer as trainer_lib
    config = config_lib.load_config(
        str(ROOT / "configs" / "smoke.yaml"),
        # The ResNet here (the smoke config's network is the CPU default's kind, an MLP): both kinds train.
        [f"run.dir={tmp_path}", "curriculum.max_iterations_per_step=1", "eval.every=0", "network.kind=resnet",
         "network.width=8"],
    )
    with trace_counts.counting_traces() as traces:
        trainer = trainer_lib.Trainer(config)
    state = trainer.init_state()
    steps = []
    for _ in range(3):
        steps.append(int(state.start_step))
        state, _ = trainer.iteration(state)
    assert steps == [6, 5, 4]  # st moved every iteration
    # A ResNet on the CPU learns in the host loop: its plan is one jitted call and its steps another (the
    # compiled loop's plan and steps are one, "learn").
    assert trainer.loop == "host"
    assert traces == {"play": 1, "collect": 1, "plan": 1, "step": 1}


def test_batch_sizes_must_split_over_devices():
    import jax
    from jax.sharding import Mesh

    from dabjax.training import devices
    mesh = Mesh(np.array(jax.devices() * 1), ("data",))
    devices.check_divisible("selfplay.games", 8, mesh)
    fake = type("FakeMesh", (), {"devices": np.zeros(3)})()
    with pytest.raises(ValueError, match="selfplay.games = 8 must be a multiple of the number of devices \\(3\\)"):
        devices.check_divisible("selfplay.games", 8, fake)


def test_memory_estimate_and_early_failure():
    from dabjax.training import config as config_lib
    from dabjax.training import sizing
    small = config_lib.load_config(str(ROOT / "configs" / "3x3.yaml"))
    big = config_lib.load_config(str(ROOT / "configs" / "5x5_resnet.yaml"))
    small_total = sizing.estimate_memory(small)["total"]
    big_estimate = sizing.estimate_memory(big)
    assert small_total < 200 * 2**20 < big_estimate["total"]
    doubled_batch = config_lib.load_config(str(ROOT / "configs" / "5x5_resnet.yaml"), ["train.batch_size=2048"])
    doubled = sizing.estimate_memory(doubled_batch)
    assert doubled["training_activations"] == 2 * big_estimate["training_activations"]

    class SmallDevice:  # a device that reports 1 GiB, as a GPU's memory_stats() does
        device_kind = "test GPU"

        def memory_stats(self):
            return {"bytes_limit": 2**30}

    sizing.check_memory(small, SmallDevice())  # fits
    with pytest.raises(ValueError, match=r"needs about .* GiB per device, more than the 1.0 GiB of test GPU"):
        sizing.check_memory(big, SmallDevice())


class DeviceWithMemory:  # a device that reports its memory, as a GPU's memory_stats() does
    device_kind = "test GPU"

    def __init__(self, gib: float):
        self.limit = int(gib * 2**30)

    def memory_stats(self):
        return {"bytes_limit": self.limit}


def test_the_games_fill_the_share_of_device_memory_with_the_same_sample_reuse():
    from dabjax.training import config as config_lib
    from dabjax.training import sizing
    recipe = config_lib.load_config("5x5", ["selfplay.memory_share=0.25"])
    base = recipe.selfplay.games

    def reuse(config):  # optimiser samples drawn per sample added, when the step cap binds
        return (config.train.max_steps_per_iteration * config.train.batch_size
                / sizing.replay_capacity_per_iteration(config))

    for gib, expected in ((80, 16384), (16, 4096), (1, base)):  # an H100, a T4, a card too small to grow
        sized = sizing.sized_to_device(recipe, DeviceWithMemory(gib))
        games = sized.selfplay.games
        assert games == expected
        if games > base:  # grown only as far as the share holds
            assert sizing.estimate_memory(sized)["total"] <= 0.25 * gib * 2**30
        if games < recipe.selfplay.max_games:  # the next doubling would not fit
            doubled = sizing.scaled_to_games(recipe, 2 * games)
            assert sizing.estimate_memory(doubled)["total"] > 0.25 * gib * 2**30
        assert reuse(sized) == pytest.approx(reuse(recipe))
        assert sized.train.batch_size == recipe.train.batch_size
        # At most as many games per start step of the curriculum as the config as written.
        per_step = sized.curriculum.max_iterations_per_step * games
        assert per_step <= max(games, recipe.curriculum.max_iterations_per_step * base)
        assert sized.curriculum.max_iterations_per_step >= 1
    assert sizing.scaled_to_games(recipe, 8 * base).curriculum.max_iterations_per_step == 1  # 6 / 8, at least 1
    assert sizing.scaled_to_games(recipe, 2 * base).curriculum.max_iterations_per_step == 3
    assert sizing.scaled_to_games(recipe, 4 * base).curriculum.max_iterations_per_step == 1  # 6 / 4, rounded down
    capped = config_lib.load_config("5x5", ["selfplay.memory_share=0.9", "selfplay.max_games=8192"])
    assert sizing.sized_to_device(capped, DeviceWithMemory(80)).selfplay.games == 8192
    explicit = config_lib.load_config("5x5", ["replay.capacity_per_iteration=1000"])
    assert sizing.scaled_to_games(explicit, 4 * base).replay.capacity_per_iteration == 4000
    # No share, or a device that reports no memory (the CPU backend): the games as written.
    unshared = config_lib.load_config("5x5", ["selfplay.memory_share=0"])
    assert sizing.sized_to_device(unshared, DeviceWithMemory(80)).selfplay.games == base
    assert sizing.sized_to_device(recipe).selfplay.games == base  # this machine's CPU
    with pytest.raises(config_lib.ConfigError, match="selfplay.memory_share"):
        config_lib.load_config("5x5", ["selfplay.memory_share=1.5"])


def test_the_trainer_runs_the_games_the_device_memory_gives(monkeypatch):
    import jax

    from dabjax.training import config as config_lib
    from dabjax.training import sizing
    from dabjax.training import trainer as trainer_lib
    config = config_lib.load_config(str(ROOT / "configs" / "smoke.yaml"), ["selfplay.memory_share=0.5",
                                                                          "selfplay.max_games=32"])
    monkeypatch.setattr(sizing, "device_memory", lambda device=None: 2**30)
    trainer = trainer_lib.Trainer(config)
    assert trainer.requested_games == config.selfplay.games == 8 and trainer.config.selfplay.games == 32
    assert trainer.settings.num_games == 32
    assert trainer.config.train.max_steps_per_iteration == 4 * config.train.max_steps_per_iteration
    trainer.place = lambda tree: tree  # placing reads arrays to the host: not under eval_shape
    buffer = jax.eval_shape(trainer.init_state).buffer
    assert buffer.samples.valid.shape[1] == sizing.replay_capacity_per_iteration(trainer.config)


@pytest.mark.slow  # minutes: `python -m pytest -m slow` (docs/maintaining.md)
def test_two_processes_train_like_one(tmp_path):
    """jax.distributed with two local CPU processes (gloo collectives): the same figures as one process."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    common = [sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / "configs" / "smoke.yaml"),
              "run.iterations=1", "eval.every=0", "--quiet"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    workers = [
        subprocess.Popen(common + [f"run.dir={tmp_path / 'two'}", "--coordinator", f"127.0.0.1:{port}",
                                   "--num-processes", "2", "--process-id", str(i)],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-2000:]
    single = subprocess.run(common + [f"run.dir={tmp_path / 'one'}"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-2000:]
    two = json.loads((tmp_path / "two" / "metrics.jsonl").read_text().splitlines()[0])
    one = json.loads((tmp_path / "one" / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("searched_positions", "buffer_size", "node_samples"):
        assert two[key] == one[key], key
    assert two["mqr"] == pytest.approx(one["mqr"]) and two["loss"] == pytest.approx(one["loss"], rel=1e-4)
    assert (tmp_path / "two" / "checkpoints" / "1").is_dir()  # written once, by the processes together
