"""evaluate.py: help for every command, arena files, accuracy, training plots, and errors naming the problem."""

import json
import subprocess
import sys

import numpy as np
import pytest

from dabjax.cli import evaluate
from dabjax.evaluation import plots
from dabjax.solvers import labelled

COMMANDS = ("arena", "elo-curve", "accuracy", "plots", "play", "serve")


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


def test_arena_saves_games_as_gifs_and_frames(tmp_path, capsys):
    from PIL import Image

    from dabjax.game import notation
    from dabjax.game.geometry import board_geometry

    out = tmp_path / "arena"
    code = evaluate.main(["arena", "--agents", "level1,random", "--board", "1x2", "--games", "4", "--openings", "1",
                          "--out", str(out), "--save-games", "3"])
    assert code == 0
    folder = out / "games" / "level1-vs-random"
    record = json.loads((folder / "games.json").read_text())
    assert record["agent_a"] == "level1" and len(record["games"]) == 3
    geometry = board_geometry(1, 2)
    for number, game in enumerate(record["games"]):
        state = notation.state_from_moves(geometry, game["moves"])  # a whole legal game, scores as recorded
        assert bool(state.terminated) and np.asarray(state.scores).tolist() == game["scores"]
        assert game["players"] == (["level1", "random"] if number % 2 == 0 else ["random", "level1"])
        with Image.open(folder / game["file"]) as gif:
            assert game["file"] == f"game-{number}.gif" and gif.n_frames == len(game["moves"]) + 1
    assert "wrote 3 games of level1 vs random" in capsys.readouterr().out
    code = evaluate.main(["arena", "--agents", "greedy,level1", "--board", "1x2", "--games", "2", "--out", str(out),
                          "--save-games", "1", "--game-format", "frames"])
    assert code == 0
    frames = sorted((out / "games" / "greedy-vs-level1" / "game-0").glob("move-*.png"))
    assert len(frames) == geometry.num_lines + 1 and frames[0].name == "move-000.png"


@pytest.mark.parametrize("argv, message", [
    (["arena", "--agents", "random,wizard", "--board", "2x2"], "unknown agent 'wizard'"),
    (["arena", "--agents", "random,ckpt:/no/such/run", "--board", "2x2"], "/no/such/run"),
    (["arena", "--agents", "random,greedy", "--board", "2x2", "--games", "3"], "--games must be even"),
    (["arena", "--agents", "random,greedy", "--board", "3by3"], "board size '3by3'"),
    (["arena", "--agents", "random,greedy", "--anchor", "solver", "--board", "2x2"], "--anchor 'solver'"),
    (["play", "--board", "12x12"], "12x12 is not supported"),
    (["serve", "--board", "2x2", "--opponent", "wizard"], "unknown agent 'wizard'"),
    (["arena", "--agents", "random,greedy", "--board", "2x2", "--save-games", "2"], "--save-games needs --out"),
    (["accuracy", "--agents", "greedy", "--board", "2x2"], "does not match the labelled set"),
    (["plots", "/no/such/run"], "no metrics file at /no/such/run"),
])
def test_errors_name_the_problem(argv, message, capsys):
    assert evaluate.main(argv) == 2
    assert message in capsys.readouterr().err


def test_accuracy_table_and_plot(tmp_path, capsys):
    small = labelled.load("data/3x3.npz")
    keep = np.zeros(len(small), bool)
    keep[np.flatnonzero(small.move_numbers >= 16)[::4]] = True
    subset = labelled.subset(small, keep)
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
    rows[3]["eval/win_rate_vs_level1"] = 1.0  # a TD run's evaluation: nothing plot_evaluation draws
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert evaluate.main(["plots", str(run)]) == 0
    assert not (run / "plots" / "evaluation.png").exists()  # no evaluation it draws: no evaluation figure
    for i in (4, 8):  # the periodic evaluation's rows
        rows[i].update({"eval/best_result_min": 0.5 + 0.04 * i, "eval/best_result_mean": 0.7 + 0.02 * i,
                        "eval/score_vs_level2": 0.9})
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert evaluate.main(["plots", str(run)]) == 0
    assert (run / "plots" / "evaluation.png").stat().st_size > 1000
    assert plots.evaluation_keys(rows) == ["eval/best_result_min", "eval/best_result_mean", "eval/score_vs_level2"]
    minutes, shares = plots._over_minutes(rows, "eval/best_result_min")  # at the rows' training minutes
    np.testing.assert_allclose(minutes, [4.0, 8.0])
    np.testing.assert_allclose(shares, [0.66, 0.82])
    (run / "metrics.jsonl").write_text("{not json\n")
    assert evaluate.main(["plots", str(run)]) == 2


def test_elo_curve_and_checkpoint_agents(tiny_run, tmp_path, capsys):
    from dabjax.evaluation import agent_registry
    from dabjax.game.geometry import board_geometry

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


def test_arena_puts_the_agents_that_take_one_on_a_clock(tmp_path, monkeypatch, capsys):
    """``--seconds-per-move``: ``alphabeta:2`` plays as ``alphabeta:2@0.05s`` (and is rated, anchored and
    ``--vs``'d so); a spec with a clock of its own keeps it; ``random`` and an ``+exact`` spec play as they are,
    named; each clock agent is compiled before the match and its summary printed after it. Network clocks
    compile for tens of seconds: a stand-in alpha-beta with ``prepare`` and ``summary`` plays their part."""
    from dabjax.baselines.alphabeta import AlphaBetaAgent
    from dabjax.evaluation import agent_registry

    class Summarised(AlphaBetaAgent):
        prepared = False

        def prepare(self):
            self.prepared = True

        def summary(self):
            return f"{self.name}: prepared {self.prepared}; slowest move of {self.seconds:g} s"

    made = {}
    make_agent = agent_registry.make_agent

    def stand_in(spec, geometry):
        parsed = agent_registry.parse_agent_spec(spec)
        clocked = parsed.clock_seconds is not None
        made[spec] = Summarised(parsed.whole_number("DEPTH"), seconds=parsed.clock_seconds) if clocked else \
            make_agent(spec, geometry)
        return made[spec]

    monkeypatch.setattr(agent_registry, "make_agent", stand_in)
    out = tmp_path / "arena"
    code = evaluate.main(["arena", "--agents", "random,alphabeta:2+exact:0.5,alphabeta:3@0.1s", "--vs",
                          "alphabeta:2", "--anchor", "alphabeta:2", "--seconds-per-move", "0.05", "--board", "2x2",
                          "--games", "2", "--openings", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "played without a clock: random\n" in text
    assert "played without a clock, on their +exact budget (for a clock write SPEC@Ns instead): " \
           "alphabeta:2+exact:0.5\n" in text
    assert "preparing the clock of alphabeta:2@0.05s" in text and made["alphabeta:2@0.05s"].prepared
    assert "  alphabeta:2@0.05s: prepared True; slowest move of 0.05 s" in text
    assert "  alphabeta:3@0.1s: prepared True; slowest move of 0.1 s" in text  # its own clock kept
    report = json.loads((out / "arena.json").read_text())
    settings = report["settings"]
    assert settings["vs"] == settings["anchor"] == "alphabeta:2@0.05s" and settings["seconds_per_move"] == 0.05
    assert settings["agents"] == ["alphabeta:2@0.05s", "random", "alphabeta:2+exact:0.5", "alphabeta:3@0.1s"]
    assert next(r for r in report["elo"] if r["agent"] == "alphabeta:2@0.05s")["elo"] == 0.0
    assert set(report["clocks"]) == {"alphabeta:2@0.05s", "alphabeta:3@0.1s"}


@pytest.mark.parametrize("seconds", ["0", "-1", "soon", "inf"])
def test_arena_refuses_seconds_per_move_that_are_not_a_positive_number(seconds, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["arena", "--agents", "random,alphabeta:2", "--seconds-per-move", seconds])
    assert exit_info.value.code == 2
    assert f"--seconds-per-move: seconds a move must be a number > 0, e.g. 1 or 0.5, got '{seconds}'" in \
        capsys.readouterr().err
