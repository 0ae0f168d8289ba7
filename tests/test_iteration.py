"""The pure iteration (``dabjax.training.iteration``): jitted whole, it is the trainer's iteration, the curriculum
and the clocks aside."""

import pathlib

import jax
import numpy as np
import pytest

from dabjax.training import config as config_lib
from dabjax.training import iteration as iteration_lib
from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_pure_iteration_jitted_whole_is_the_trainers(tmp_path):
    # One advance after every iteration: the trainer's host moves st, the pure iteration leaves it.
    config = config_lib.load_config(str(ROOT / "configs" / "smoke.yaml"), [
        f"run.dir={tmp_path}", "eval.every=0", "curriculum.max_iterations_per_step=1"])
    trainer = trainer_lib.Trainer(config)
    # The trainer's iteration donates its state's buffer and training state: each side starts from its own.
    state = trainer.init_state()
    pure_state, figures = jax.jit(trainer.core)(state, state.key)
    shell_state, metrics = trainer.iteration(trainer.init_state())

    for name in ("train_state", "buffer", "key", "iteration"):
        pure = jax.tree_util.tree_leaves(getattr(pure_state, name))
        shell = jax.tree_util.tree_leaves(getattr(shell_state, name))
        assert len(pure) == len(shell)
        for a, b in zip(pure, shell):
            # One program or three: XLA may fuse the arithmetic differently, within float32 rounding.
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6, err_msg=name)
    assert int(pure_state.iteration) == metrics["iteration"] == 1
    assert int(pure_state.start_step) == metrics["start_step"] == 6  # the curriculum is the host's
    assert int(shell_state.start_step) == metrics["next_start_step"] == 5 and metrics["advanced"]
    assert int(shell_state.last_advance) == 1 and int(pure_state.last_advance) == 0

    figures = jax.device_get(figures)
    assert isinstance(figures, iteration_lib.IterationFigures)
    for name in ("searched_positions", "node_samples", "dropped", "buffer_size", "train_steps"):
        assert int(getattr(figures, name)) == metrics[name], name
    assert np.asarray(figures.samples_by_move).tolist() == metrics["samples_by_move"]
    for name in ("mqr", "nvr", "first_player_win_rate"):
        assert float(getattr(figures, name)) == pytest.approx(metrics[name]), name
    for name, value in figures.losses.items():
        assert float(value) == pytest.approx(metrics[name], rel=1e-5), name
