"""The time-to-strength benchmark (benchmarks/time_to_strength.py) and the from-scratch GPU script
(scripts/gpu_scratch.sh) at the test size: a smoke run from scratch in two stages, its agents kept and carried
elsewhere as the GPU script sends them back, then scored there."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tarfile

import jax
import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.evaluation import pretrained
from dabjax.game.geometry import board_geometry
from dabjax.solvers import labelled

time_to_strength = load_benchmark("time_to_strength")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_stages_start_from_nothing_and_name_their_budget(tmp_path):
    command = time_to_strength.stage_command("4x4", tmp_path / "run", 2.5, ["network.width=16"])
    assert "run.init_from=null" in command and "train.exact_labels=null" in command
    assert "run.max_minutes=2.5" in command and command[-1] == "network.width=16"


def test_marks_must_increase(tmp_path):
    with pytest.raises(SystemExit):
        time_to_strength.main(["--config", "smoke", "--minutes", "2", "1", "--out", str(tmp_path)])


@pytest.mark.slow  # minutes: `python -m pytest -m slow` (docs/maintaining.md)
def test_the_gpu_script_keeps_agents_that_score_elsewhere(tmp_path):
    out = tmp_path / "gpu"
    environment = dict(os.environ, GPU_CHECK_MINUTES="0")
    result = subprocess.run(["bash", "scripts/gpu_scratch.sh", str(out), "--tiny"], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "top kernels" in (out / "profile.log").read_text()
    assert "searched positions/s" in (out / "scratch.log").read_text()
    elsewhere = tmp_path / "scored"
    with tarfile.open(out / "agents.tar") as archive:
        archive.extractall(elsewhere, filter="data")
    kept = json.loads((elsewhere / "strength.json").read_text())["points"]
    assert [p["mark"] for p in kept] == [0.01, 0.02] and all("elo" not in p for p in kept)
    first, second = kept
    assert first["iteration"] >= 1 and second["iteration"] >= first["iteration"] and second["minutes"] >= 0.02
    agent = pretrained.load_source(str(elsewhere / first["agent"]))
    assert (agent.rows, agent.cols) == (2, 2) and agent.network_config.kind == "mlp"
    if second["iteration"] > first["iteration"]:  # two points of one run: the network moved between them
        leaves = [jax.tree_util.tree_leaves(pretrained.load_source(str(elsewhere / p["agent"])).params)
                  for p in kept]
        assert any(not np.array_equal(a, b) for a, b in zip(*leaves))

    labelled.save(labelled.build_set(board_geometry(2, 2), list(range(0, 10)), 8, seed=3), tmp_path / "2x2.npz")
    scored = time_to_strength.main(["--config", "smoke", "--minutes", "0.01", "0.02", "--out", str(elsewhere),
                                    "--set", str(tmp_path / "2x2.npz"), "--games", "4", "--tiny"])
    assert [p["iteration"] for p in scored["points"]] == [first["iteration"], second["iteration"]]  # not retrained
    for point in scored["points"]:
        figures = point["sets"][str(tmp_path / "2x2.npz")]
        assert len(figures["shares"]) == 3 and all(0 <= s <= 1 for s in figures["shares"])
        assert point["elo_low"] <= point["elo"] <= point["elo_high"] and point["games"] == 4
    assert (elsewhere / "strength.png").stat().st_size > 0
