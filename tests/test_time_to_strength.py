"""The time-to-strength benchmark (benchmarks/time_to_strength.py) at the test size: a smoke run from scratch in
stages, its agents kept, scored later, and resumed."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.evaluation import pretrained
from dabjax.game.geometry import board_geometry
from dabjax.solvers import labelled

time_to_strength = load_benchmark("time_to_strength")


def test_stages_start_from_nothing_and_name_their_budget(tmp_path):
    command = time_to_strength.stage_command("4x4", tmp_path / "run", 2.5, ["network.width=16"])
    assert "run.init_from=null" in command and "train.exact_labels=null" in command
    assert "run.max_minutes=2.5" in command and command[-1] == "network.width=16"


def test_a_run_in_stages_keeps_its_agents_then_scores_and_resumes(tmp_path):
    labelled.save(labelled.build_set(board_geometry(2, 2), list(range(0, 10)), 8, seed=3), tmp_path / "2x2.npz")
    out = tmp_path / "tts"
    common = ["--config", "smoke", "--out", str(out), "--set", str(tmp_path / "2x2.npz"), "--games", "4", "--tiny"]
    kept = time_to_strength.main(["--minutes", "0.01", "--no-score", *common])
    (point,) = kept["points"]
    assert "elo" not in point and point["iteration"] >= 1 and point["minutes"] >= 0.01
    agent = pretrained.load_source(point["agent"])
    assert (agent.rows, agent.cols) == (2, 2) and agent.network_config.kind == "mlp"

    scored = time_to_strength.main(["--minutes", "0.01", "1.0", *common])
    first, second = scored["points"]
    assert first["iteration"] == point["iteration"]  # kept, not retrained
    assert second["minutes"] >= 1.0 and second["iteration"] > first["iteration"]  # the run resumed past the mark
    for p in (first, second):
        figures = p["sets"][str(tmp_path / "2x2.npz")]
        assert len(figures["shares"]) == 3 and all(0 <= s <= 1 for s in figures["shares"])
        assert p["elo_low"] <= p["elo"] <= p["elo_high"] and p["games"] == 4
    # The two agents are the network at two points of one run: different parameters.
    leaves = [jax.tree_util.tree_leaves(pretrained.load_source(p["agent"]).params) for p in (first, second)]
    assert any(not np.array_equal(a, b) for a, b in zip(*leaves))
    assert json.loads((out / "strength.json").read_text())["points"][1]["elo"] == second["elo"]
    assert (out / "strength.png").stat().st_size > 0


def test_marks_must_increase(tmp_path):
    with pytest.raises(SystemExit):
        time_to_strength.main(["--config", "smoke", "--minutes", "2", "1", "--out", str(tmp_path)])
