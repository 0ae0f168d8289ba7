"""evaluate.py: help for every command, arena files, accuracy, training plots, and errors naming the problem."""

import json
import subprocess
import sys

import numpy as np
import pytest

from dabjax import labelled
from dabjax.cli import evaluate

COMMANDS = ("arena", "elo-curve", "accuracy", "plots", "play")


def test_help_documents_every_command(capsys):
    with pytest.raises(SystemExit):
        evaluate.main(["--help"])
    text = capsys.readouterr().out
    for command in COMMANDS:
        assert command in text
    for command in COMMANDS:
        with pytest.raises(SystemExit):
            evaluate.main([command, "--help"])
        assert "usage: evaluate.py " + command in capsys.readouterr().out


def test_entry_point_runs():
    done = subprocess.run([sys.executable, "evaluate.py", "--help"], capture_output=True, text=True, check=True)
    assert "elo-curve" in done.stdout


def test_arena_writes_json_and_csv(tmp_path, capsys):
    out = tmp_path / "arena"
    code = evaluate.main(["arena", "--agents", "random,greedy,level1", "--board", "2x2", "--games", "4",
                          "--openings", "1", "--out", str(out)])
    assert code == 0
    report = json.loads((out / "arena.json").read_text())
    assert {r["agent"] for r in report["elo"]} == {"random", "greedy", "level1"}
    assert len(report["pairs"]) == 3 and all(p["games"] == 4 for p in report["pairs"])
    assert next(r for r in report["elo"] if r["agent"] == "random")["elo"] == 0.0
    assert (out / "pairs.csv").read_text().startswith("agent_a,agent_b,games,wins,draws,losses")
    assert "Elo (anchor random = 0" in capsys.readouterr().out
    # one vs many, anchored on greedy
    code = evaluate.main(["arena", "--agents", "random,level1", "--vs", "greedy", "--anchor", "greedy",
                          "--board", "2x2", "--games", "2", "--out", str(out)])
    report = json.loads((out / "arena.json").read_text())
    assert code == 0 and [(p["agent_a"], p["agent_b"]) for p in report["pairs"]] == [
        ("greedy", "random"), ("greedy", "level1")]


@pytest.mark.parametrize("argv, message", [
    (["arena", "--agents", "random,wizard", "--board", "2x2"], "unknown agent 'wizard'"),
    (["arena", "--agents", "random,ckpt:/no/such/run", "--board", "2x2"], "/no/such/run"),
    (["arena", "--agents", "random,greedy", "--board", "2x2", "--games", "3"], "--games must be even"),
    (["arena", "--agents", "random,greedy", "--board", "3by3"], "board size '3by3'"),
    (["arena", "--agents", "random,greedy", "--anchor", "solver", "--board", "2x2"], "--anchor 'solver'"),
    (["play", "--board", "12x12"], "12x12 is not supported"),
    (["accuracy", "--agents", "greedy", "--board", "2x2"], "does not match the labelled set"),
    (["plots", "/no/such/run"], "no metrics file at /no/such/run"),
])
def test_errors_name_the_problem(argv, message, capsys):
    assert evaluate.main(argv) == 2
    assert message in capsys.readouterr().err


def test_accuracy_table_and_plot(tmp_path, capsys):
    small = labelled.load("data/3x3.npz")
    keep = np.flatnonzero(small.move_numbers >= 16)[::4]
    subset = labelled.LabelledSet(
        rows=3, cols=3, settings=small.settings,
        **{name: (getattr(small, name)[keep] if getattr(small, name) is not None else None)
           for name in labelled._ARRAY_FIELDS})
    path = tmp_path / "small.npz"
    labelled.save(subset, path)
    out = tmp_path / "acc"
    assert evaluate.main(["accuracy", "--set", str(path), "--agents", "solver,random", "--out", str(out)]) == 0
    report = json.loads((out / "accuracy.json").read_text())
    assert report["overall_best_result"]["solver"] == 1.0  # exact play is always a best-result move
    assert report["overall_best_result"]["random"] < 1.0
    assert (out / "accuracy.png").stat().st_size > 1000
    assert "best-result move share by move number" in capsys.readouterr().out


def test_training_plots_from_metrics(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [dict(iteration=i, time=60.0 * i, start_step=max(20 - 2 * i, 0), stage=1 if i < 8 else 2,
                 mqr=0.5 + 0.03 * i, nvr=0.4 + 0.02 * i, loss=3.0 - 0.1 * i, policy_loss=2.0 - 0.05 * i,
                 value_loss=1.0 - 0.05 * i, buffer_size=100 * i, games_per_s=5.0,
                 samples_by_move=[int(k >= 20 - 2 * i) * 10 for k in range(24)])
            for i in range(12)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert evaluate.main(["plots", str(run)]) == 0
    for name in ("losses.png", "start_step.png", "mqr_nvr.png", "samples_by_move.png"):
        assert (run / "plots" / name).stat().st_size > 1000
    (run / "metrics.jsonl").write_text("{not json\n")
    assert evaluate.main(["plots", str(run)]) == 2


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run directory with two 2x2 checkpoints written by the trainer's CheckpointStore."""
    import dataclasses

    import jax

    from dabjax import checkpoint, network, search
    from dabjax.geometry import board_geometry

    run = tmp_path_factory.mktemp("run")
    config = network.NetworkConfig(width=8, blocks=1, value_hidden=8)
    store = checkpoint.CheckpointStore(run)
    for iteration in (1, 2):
        params = network.init_params(config, board_geometry(2, 2).grid_shape, jax.random.PRNGKey(iteration))
        meta = dict(rows=2, cols=2, network=dataclasses.asdict(config),
                    search=dataclasses.asdict(search.SearchConfig(num_simulations=4)), wall_time=30.0 * iteration)
        store.save(iteration, params, {"step": np.int32(iteration)}, meta)
    store.close()
    return run


def test_elo_curve_and_checkpoint_agents(tiny_run, tmp_path, capsys):
    from dabjax import agent_registry
    from dabjax.geometry import board_geometry

    out = tmp_path / "curve"
    code = evaluate.main(["elo-curve", str(tiny_run), "--board", "2x2", "--anchors", "random,greedy",
                          "--games", "2", "--sims", "0", "--openings", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "elo_curve.json").read_text())
    curve = report["curves"][tiny_run.name]
    assert curve["iteration"] == [1, 2] and curve["wall_time"] == [30.0, 60.0]
    assert (out / "elo_curve.png").stat().st_size > 1000
    agent = agent_registry.make_agent(f"ckpt:{tiny_run}/checkpoints/2:2", board_geometry(2, 2))
    assert callable(agent)
    with pytest.raises(ValueError, match="2x2 board but the board is 3x3"):
        agent_registry.make_agent(f"ckpt:{tiny_run}", board_geometry(3, 3))
    assert evaluate.main(["arena", "--agents", f"random,ckpt:{tiny_run}/checkpoints/7", "--board", "2x2"]) == 2
    assert "checkpoints/7' does not exist" in capsys.readouterr().err
