"""Scale-out: one iteration on 4 (simulated CPU) devices equals the 1-device result; one trace per shape."""

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
from dabjax import config as C, trainer as T
cfg = C.load_config("configs/smoke.yaml", ["selfplay.games=8", "train.batch_size=16", "eval.every=0"])
trainer = T.Trainer(cfg)
state, metrics = trainer.iteration(trainer.init_state())
leaves = jax.tree_util.tree_leaves(state.train_state.params)
np.save(sys.argv[1], np.concatenate([np.ravel(np.asarray(x)) for x in leaves]))
print(json.dumps({"devices": jax.device_count(), "loss": metrics["loss"], "mqr": metrics["mqr"],
                  "buffer_size": metrics["buffer_size"], "searched": metrics["searched_positions"]}))
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
    # by up to ~lr; the rest agree to float32 rounding.
    four, one = np.load(tmp_path / "four.npy"), np.load(tmp_path / "one.npy")
    np.testing.assert_allclose(four, one, atol=1e-3)
    assert np.mean(np.abs(four - one) < 1e-5) > 0.99


def test_jitted_functions_are_traced_once_as_st_moves(tmp_path):
    from dabjax import config as config_lib
    from dabjax import trainer as trainer_lib

    config = config_lib.load_config(
        str(ROOT / "configs" / "smoke.yaml"),
        [f"run.dir={tmp_path}", "curriculum.max_iterations_per_step=1", "eval.every=0"],
    )
    trainer = trainer_lib.Trainer(config)
    state = trainer.init_state()
    steps = []
    for _ in range(3):
        steps.append(int(state.start_step))
        state, _ = trainer.iteration(state)
    assert steps == [6, 5, 4]  # st moved every iteration
    assert trainer._self_play._cache_size() == 1
    assert trainer._build_samples._cache_size() == 1
    assert trainer._insert._cache_size() == 1


def test_batch_sizes_must_split_over_devices():
    from jax.sharding import Mesh
    import jax
    from dabjax import devices

    mesh = Mesh(np.array(jax.devices() * 1), ("data",))
    devices.check_divisible("selfplay.games", 8, mesh)
    fake = type("FakeMesh", (), {"devices": np.zeros(3)})()
    with pytest.raises(ValueError, match="selfplay.games = 8 must be a multiple of the number of devices \\(3\\)"):
        devices.check_divisible("selfplay.games", 8, fake)
