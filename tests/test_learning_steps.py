"""benchmarks/learning_steps.py --tiny: the trainer's compiled learning loop timed and costed by batch size, with
Adam as the trainer builds it and flattened (optax.flatten)."""

import json

import jax
import numpy as np
import optax
import pytest
from conftest import load_benchmark

from dabjax.training import learner


def test_every_batch_and_optimiser_is_timed_and_costed(tmp_path):
    learning_steps = load_benchmark("learning_steps")
    path = tmp_path / "steps.json"
    assert learning_steps.main(["--tiny", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [(row["batch"], row["optimiser"]) for row in rows] == [(4, "adam"), (4, "flatten"), (16, "adam"),
                                                                  (16, "flatten")]
    for row in rows:
        assert row["steps_per_s"] > 0 and row["step_flops"] > 0 and row["step_bytes"] > 0
        assert row["samples_per_s"] == pytest.approx(row["steps_per_s"] * row["batch"])


def test_the_flattened_optimiser_makes_the_same_updates():
    params = {"a": {"kernel": np.arange(6.0).reshape(2, 3), "bias": np.ones(3)}, "b": np.full(4, -2.0)}
    grads = jax.tree_util.tree_map(lambda x: np.sin(x) + 0.5, params)
    results = []
    for flatten in (False, True):
        optimizer = learner.make_optimizer(1e-2, 0.05, 10, flatten=flatten)
        state = optimizer.init(params)
        updated = params
        for _ in range(3):
            updates, state = optimizer.update(grads, state, updated)
            updated = optax.apply_updates(updated, updates)
        results.append(updated)
    for a, b in zip(jax.tree_util.tree_leaves(results[0]), jax.tree_util.tree_leaves(results[1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
