"""benchmarks/learning_steps.py --tiny: the trainer's compiled learning loop timed and costed by batch size."""

import json

import pytest
from conftest import load_benchmark


def test_every_batch_is_timed_and_costed(tmp_path):
    learning_steps = load_benchmark("learning_steps")
    path = tmp_path / "steps.json"
    assert learning_steps.main(["--tiny", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [row["batch"] for row in rows] == [4, 16]
    for row in rows:
        assert row["steps_per_s"] > 0 and row["step_flops"] > 0 and row["step_bytes"] > 0
        assert row["samples_per_s"] == pytest.approx(row["steps_per_s"] * row["batch"])

