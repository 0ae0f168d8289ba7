"""The run-directory loop (``dabjax.runs.run_dir``) with a fake trainer: resuming, the metrics log, Ctrl-C, the
progress bar over the binding budget and the line that says why a run stopped."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from dabjax.runs import run_dir
from dabjax.training import checkpoint
from dabjax.training.config import RunSection

WEIGHTS = 4096  # random floats in the fake parameters: an array file of 16 KiB
INITIAL_WEIGHTS = np.random.default_rng(0).standard_normal(WEIGHTS).astype(np.float32)


class CountingTraining(run_dir.ResumableTraining):
    """A trainer without a network: its state is the iteration, the training seconds and weights that move by
    1 an iteration (metric ``w``: how far they moved). Each iteration counts ``seconds_per_iteration`` of
    training; ``interrupt_at`` raises KeyboardInterrupt in that iteration."""

    title = "counting"

    def __init__(self, seconds_per_iteration: float = 1.0, eval_every: int = 0, interrupt_at: int | None = None):
        self.seconds_per_iteration = seconds_per_iteration
        self.eval_every = eval_every
        self.interrupt_at = interrupt_at

    def init_state(self, new_run: bool = True) -> dict:
        return {"iteration": 0, "seconds": 0.0, "w": INITIAL_WEIGHTS}

    def restore(self, store: checkpoint.CheckpointStore, iteration: int, fresh: dict) -> dict:
        meta = store.read_meta(iteration)
        if meta.get("method") != "counting":
            raise ValueError(f"checkpoint {store.directory / str(iteration)} is not a counting run")
        params, trainer, meta = store.restore(iteration, {"w": fresh["w"]}, {"iteration": np.array(0, np.int32)})
        return {"iteration": int(trainer["iteration"]), "seconds": float(meta["wall_time"]),
                "w": np.asarray(params["w"])}

    def save(self, store: checkpoint.CheckpointStore, state: dict) -> None:
        meta = {"method": "counting", "wall_time": state["seconds"]}
        store.save(state["iteration"], {"w": state["w"]}, {"iteration": np.int32(state["iteration"])}, meta)

    def progress(self, state: dict) -> tuple[int, float]:
        return state["iteration"], state["seconds"]

    def iterate(self, state: dict) -> tuple[dict, dict]:
        iteration = state["iteration"] + 1
        if iteration == self.interrupt_at:
            raise KeyboardInterrupt
        seconds = state["seconds"] + self.seconds_per_iteration
        return ({"iteration": iteration, "seconds": seconds, "w": state["w"] + 1},
                {"iteration": iteration, "time": seconds, "w": moved(state["w"] + 1)})

    def evaluate(self, state: dict, key) -> dict:
        return {"eval/w": moved(state["w"])}


def moved(weights) -> float:
    return round(float(np.mean(weights - INITIAL_WEIGHTS)), 3)


def run_section(path, **settings) -> RunSection:
    return RunSection(**{"dir": str(path), "checkpoint_every": 1, "keep_checkpoints": 3, "progress": False,
                         **settings})


def train(run: RunSection, training: CountingTraining | None = None, quiet: bool = False) -> dict:
    return run_dir.train_in_run_dir(run, "counting: true\n", training or CountingTraining(), quiet=quiet)


def logged(path) -> list[int]:
    return [row["iteration"] for row in run_dir.read_metrics(path)]


def test_a_run_resumes_where_its_last_checkpoint_left_it(tmp_path, capsys):
    path = tmp_path / "run"
    last = train(run_section(path, iterations=4, checkpoint_every=2, keep_checkpoints=2))
    assert last["iteration"] == 4 and logged(path) == [1, 2, 3, 4]
    assert "stopped: reached run.iterations (4); iteration 4, 0.1 min of training" in capsys.readouterr().out
    last = train(run_section(path, iterations=6, checkpoint_every=2, keep_checkpoints=2))
    assert last["w"] == 6.0  # the weights went on from the checkpoint's
    assert logged(path) == [1, 2, 3, 4, 5, 6]
    out = capsys.readouterr().out
    assert "resuming counting at iteration 4" in out and "dropped" not in out
    store = checkpoint.CheckpointStore(path)
    assert store.iterations() == [4, 6]
    store.close()
    assert train(run_section(path, iterations=6)) == {}
    assert ("stopped: reached run.iterations (6); nothing left to do (raise run.iterations or run.max_minutes "
            "to train on); iteration 6") in capsys.readouterr().out


def test_resume_drops_later_metrics_and_a_half_written_last_line(tmp_path, capsys):
    path = tmp_path / "run"
    train(run_section(path, iterations=3))
    with (path / run_dir.METRICS_FILE).open("a") as metrics:  # as a run killed after iteration 4 had begun 5
        metrics.write(json.dumps({"iteration": 4, "time": 99.0}) + "\n" + '{"iteration": 5, "ti')
    train(run_section(path, iterations=5))
    rows = run_dir.read_metrics(path)
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4, 5]
    assert rows[3]["time"] == 4.0  # redone, not the killed run's row
    assert "dropped the metrics of iteration 4 (after checkpoint 3; they are redone)" in capsys.readouterr().out


def test_ctrl_c_saves_the_state_and_the_run_goes_on_from_it(tmp_path, capsys):
    path = tmp_path / "run"
    train(run_section(path, iterations=10, checkpoint_every=100), CountingTraining(interrupt_at=3))
    out = capsys.readouterr().out
    assert "interrupted: saving a checkpoint" in out
    assert "stopped: interrupted (Ctrl-C), the state is saved; iteration 2" in out
    assert (path / "checkpoints" / "2").is_dir() and logged(path) == [1, 2]
    train(run_section(path, iterations=4, checkpoint_every=100))
    assert logged(path) == [1, 2, 3, 4] and "resuming counting at iteration 2" in capsys.readouterr().out


def test_evaluation_metrics_join_their_iteration(tmp_path):
    path = tmp_path / "run"
    train(run_section(path, iterations=4), CountingTraining(eval_every=2), quiet=True)
    assert [row.get("eval/w") for row in run_dir.read_metrics(path)] == [None, 2.0, None, 4.0]


def test_read_metrics_names_the_file_and_the_bad_line(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no metrics file at {tmp_path / 'metrics.jsonl'}"):
        run_dir.read_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 1}\n\n{not json\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:3: not JSON \(Expecting property name"):
        run_dir.read_metrics(tmp_path)
    (tmp_path / "other.jsonl").write_text('{"iteration": 1}\n\n{"iteration": 2}\n')
    assert [row["iteration"] for row in run_dir.read_metrics(tmp_path / "other.jsonl")] == [1, 2]


def test_the_share_of_the_budget_spent_is_that_of_the_budget_that_binds():
    timed = RunSection(iterations=1000, max_minutes=15)
    assert run_dir.budget_spent(timed, 100, 7.5 * 60) == 0.5  # the time binds: half the minutes spent
    assert run_dir.budget_spent(timed, 900, 60) == 0.9  # the iterations bind
    assert run_dir.budget_spent(timed, 1000, 60) == 1.0 and run_dir.budget_spent(timed, 10, 3600) == 1.0
    assert run_dir.budget_spent(RunSection(iterations=1000), 250, 3600) == 0.25  # no time budget
    assert run_dir.stop_reason(timed, 460, 15 * 60) == "the training-time budget run.max_minutes (15 min) is spent"
    assert run_dir.stop_reason(timed, 1000, 60) == "reached run.iterations (1000)"
    assert run_dir.stop_reason(timed, 999, 899.9) is None
    assert run_dir.progress_text(timed, 120, 234) == "iteration 120/1000, 3.9/15 min"


def test_the_bar_runs_over_the_time_budget_and_the_last_line_says_it_ended_the_run(tmp_path, capsys):
    path = tmp_path / "run"
    run = run_section(path, iterations=1000, max_minutes=1, checkpoint_every=100, progress=True)
    bar = run_dir.progress_bar(run, 0, 0.0, disable=True)
    assert bar.total == 1.0  # the bar's total is the binding budget, not run.iterations
    bar.close()
    train(run, CountingTraining(seconds_per_iteration=20))
    captured = capsys.readouterr()
    assert "iteration 3/1000, 1.0/1 min 100%" in captured.err  # after 3 of 1000 iterations, the budget is spent
    assert ("stopped: the training-time budget run.max_minutes (1 min) is spent; iteration 3, 1.0 min of "
            "training") in captured.out
    assert logged(path) == [1, 2, 3]
    assert pathlib.Path(path, "checkpoints", "3").is_dir()
