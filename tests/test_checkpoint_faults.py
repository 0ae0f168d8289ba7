"""Damaged and unfinished checkpoints: verification against the manifest, the fallback of resume to the newest
intact checkpoint (the damaged one kept aside), the errors of loading for play, and the clean-up of unfinished
saves. The run directories are written by ``CountingTraining`` (tests/test_run_dir.py), a trainer without a
network, through the same store and loop as the real trainers."""

from __future__ import annotations

import os
import pathlib
import re
import shutil

import pytest
from test_run_dir import logged, run_section, train

from dabjax.cli import evaluate
from dabjax.evaluation import agent_registry
from dabjax.game.geometry import board_geometry
from dabjax.training import checkpoint


@pytest.fixture(scope="module")
def pristine_run(tmp_path_factory) -> pathlib.Path:
    """A counting run of 3 iterations with a checkpoint after each (1, 2, 3)."""
    path = tmp_path_factory.mktemp("pristine") / "run"
    train(run_section(path, iterations=3), quiet=True)
    return path


@pytest.fixture
def run(pristine_run, tmp_path) -> pathlib.Path:
    """A copy of the pristine run, to damage."""
    return pathlib.Path(shutil.copytree(pristine_run, tmp_path / "run"))


def array_files(step_dir: pathlib.Path, item: str = "params") -> list[pathlib.Path]:
    return sorted((step_dir / item / "ocdbt.process_0" / "d").iterdir(), key=lambda path: path.stat().st_size)


def truncate_array_file(step_dir):
    largest = array_files(step_dir)[-1]
    size = largest.stat().st_size
    largest.write_bytes(largest.read_bytes()[: size // 2])
    return rf"params/ocdbt\.process_0/d/\w+ has {size // 2} bytes, {size} when saved \(cut short\?\)"


def remove_item_metadata(step_dir):
    (step_dir / "params" / "_METADATA").unlink()
    return r"params/_METADATA is missing"


def remove_meta(step_dir):
    (step_dir / "meta" / "metadata").unlink()
    return r"meta/metadata is missing"


def garbage_in_array_files(step_dir):
    for path in array_files(step_dir) + array_files(step_dir, "trainer"):
        path.write_bytes(os.urandom(path.stat().st_size))
    return (r"params/ocdbt\.process_0/d/\w+ differs from what was saved \(its SHA-256 has changed\) "
            r"\(and 3 more damaged files\)")


def garbage_in_every_file(step_dir):  # the disk fault: the manifest is garbage too
    for path in step_dir.rglob("*"):
        if path.is_file():
            path.write_bytes(b"\xd7\x00" + os.urandom(path.stat().st_size - 2))  # not UTF-8 from the first byte
    return (r"its manifest dabjax-manifest\.json is unreadable \(UnicodeDecodeError: 'utf-8' codec can't decode byte "
            r"0xd7 in position 0: invalid continuation byte\)")


def garbage_without_a_manifest(step_dir):  # a checkpoint of an older dabjax: a trial restore finds it
    (step_dir / checkpoint.MANIFEST_FILE).unlink()
    garbage_in_every_file(step_dir)
    return r"orbax cannot read it \(\w+Error: .*"


DAMAGES = [truncate_array_file, remove_item_metadata, remove_meta, garbage_in_array_files, garbage_in_every_file,
           garbage_without_a_manifest]


def test_a_save_writes_a_manifest_that_verifies(pristine_run):
    step_dir = pristine_run / "checkpoints" / "3"
    assert (step_dir / checkpoint.MANIFEST_FILE).is_file()
    assert checkpoint.checkpoint_problem(step_dir) is None


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda damage: damage.__name__)
def test_resume_sets_a_damaged_newest_checkpoint_aside_and_goes_on_from_the_newest_intact_one(run, damage, capsys):
    problem = damage(run / "checkpoints" / "3")
    last = train(run_section(run, iterations=5))
    captured = capsys.readouterr()
    damaged = checkpoint.damaged_checkpoints(run)
    assert len(damaged) == 1 and re.fullmatch(r"3-\d{8}-\d{6}", damaged[0].name)
    expected = (rf"warning: checkpoint {re.escape(str(run / 'checkpoints' / '3'))} is damaged: {problem}; "
                rf"kept it aside as {re.escape(str(damaged[0]))}\n")
    assert re.search(expected, captured.err), captured.err
    assert "dropped the metrics of iteration 3 (after checkpoint 2; they are redone)" in captured.out
    assert "resuming counting at iteration 2 (the newest intact checkpoint)" in captured.out
    assert last["w"] == 5.0 and logged(run) == [1, 2, 3, 4, 5]  # nothing of checkpoint 2 lost, no row repeated
    assert any(damaged[0].rglob("*")), "the damaged checkpoint is kept, not deleted"
    store = checkpoint.CheckpointStore(run)
    assert store.iterations() == [3, 4, 5] and store.set_aside == []
    store.close()


def test_loading_a_damaged_checkpoint_names_it_and_what_is_wrong(run):
    root = run / "checkpoints"
    remove_item_metadata(root / "3")
    with pytest.raises(checkpoint.DamagedCheckpointError) as named:
        checkpoint.read_checkpoint(root / "3")
    assert str(named.value) == f"checkpoint {root / '3'} is damaged: params/_METADATA is missing"
    with pytest.raises(checkpoint.DamagedCheckpointError) as newest:
        checkpoint.read_checkpoint(run)
    assert str(newest.value) == (
        f"checkpoint {root / '3'} is damaged: params/_METADATA is missing. The newest intact one is {root / '2'}: "
        "name it to load it, or run train.py on the run, which sets damaged checkpoints aside"
    )
    assert checkpoint.read_checkpoint(root / "2")[2] == 2
    remove_item_metadata(root / "2")
    remove_item_metadata(root / "1")
    with pytest.raises(checkpoint.DamagedCheckpointError, match=f"No checkpoint in {re.escape(str(root))} is intact"):
        checkpoint.read_checkpoint(run)


def test_playing_reads_and_verifies_only_the_parameters_and_the_meta(run):
    garbage_in_array_files_of_the_trainer = array_files(run / "checkpoints" / "3", "trainer")
    for path in garbage_in_array_files_of_the_trainer:
        path.write_bytes(os.urandom(path.stat().st_size))
    params, meta, iteration = checkpoint.read_checkpoint(run)
    assert iteration == 3 and meta["method"] == "counting" and params["w"].shape == (4096,)
    problem = checkpoint.checkpoint_problem(run / "checkpoints" / "3")  # resuming reads the trainer item too
    assert problem is not None and problem.startswith("trainer/ocdbt.process_0/d/")


def test_listing_a_run_names_a_checkpoint_whose_meta_is_damaged(run):
    root = run / "checkpoints"
    assert [iteration for iteration, _, _ in checkpoint.list_checkpoints(run)] == [1, 2, 3]
    remove_meta(root / "2")
    with pytest.raises(checkpoint.DamagedCheckpointError) as listed:
        checkpoint.list_checkpoints(run)
    assert str(listed.value) == (f"checkpoint {root / '2'} is damaged: meta/metadata is missing. Move it out of "
                                 f"{root} (e.g. into {root / 'damaged'}) to go on without it")


def test_with_no_intact_checkpoint_left_resume_stops_and_says_how_to_start_afresh(run, capsys):
    for iteration in (1, 2, 3):
        remove_item_metadata(run / "checkpoints" / str(iteration))
    metrics = (run / "metrics.jsonl").read_text()
    for attempt in range(2):  # the next attempt does not start afresh over the run's metrics either
        with pytest.raises(ValueError) as stopped:
            train(run_section(run, iterations=5))
        damaged = ", ".join(path.name for path in checkpoint.damaged_checkpoints(run))
        root = run / "checkpoints"
        assert str(stopped.value) == (
            f"no intact checkpoint left in {root}; the damaged ones are kept in {root / 'damaged'} ({damaged}). "
            f"To start the run afresh, move {run} away or give another run.dir; a repaired one can go back to "
            f"{root}/<iteration>"
        )
        assert len(checkpoint.damaged_checkpoints(run)) == 3
        assert (run / "metrics.jsonl").read_text() == metrics
    assert capsys.readouterr().err.count("is damaged: params/_METADATA is missing") == 3
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"no checkpoint in '{root}' (damaged ones are kept in {root / 'damaged'})")):
        checkpoint.read_checkpoint(run)


def test_opening_a_run_removes_only_its_unfinished_saves(run, capsys):
    root = run / "checkpoints"
    shutil.copytree(root / "3", root / "4.orbax-checkpoint-tmp")  # a save cut short by a kill
    (root / "5.orbax-checkpoint-tmp-1700000000" / "params").mkdir(parents=True)  # older orbax's name
    not_ours = [root / "notes.orbax-checkpoint-tmp", run / "6.orbax-checkpoint-tmp", root / "damaged-by-hand"]
    for path in not_ours:
        path.mkdir()
    (root / "7.orbax-checkpoint-tmp").write_text("a file, not a save")
    not_ours.append(root / "7.orbax-checkpoint-tmp")
    train(run_section(run, iterations=4))
    err = capsys.readouterr().err
    for name in ("4.orbax-checkpoint-tmp", "5.orbax-checkpoint-tmp-1700000000"):
        assert not (root / name).exists()
        assert (f"warning: removed {root / name}, an unfinished checkpoint save (the run was stopped while "
                "saving)") in err
    assert all(path.exists() for path in not_ours)
    assert logged(run) == [1, 2, 3, 4] and (root / "4" / checkpoint.MANIFEST_FILE).is_file()


@pytest.fixture
def playable_run(tiny_run, tmp_path) -> pathlib.Path:
    """A copy, to damage, of a run with two 2x2 BoxesZero checkpoints (1, 2) of a tiny untrained network."""
    return pathlib.Path(shutil.copytree(tiny_run, tmp_path / "playable"))


def test_a_ckpt_agent_of_a_damaged_checkpoint_is_an_error_naming_it(playable_run, capsys):
    geometry = board_geometry(2, 2)
    root = playable_run / "checkpoints"
    truncate_array_file(root / "2")
    with pytest.raises(ValueError, match=(
        rf"agent 'ckpt:{re.escape(str(playable_run))}': checkpoint {re.escape(str(root / '2'))} is damaged: "
        rf"params/ocdbt\.process_0/d/\w+ has \d+ bytes, \d+ when saved \(cut short\?\)\. The newest intact one is "
        rf"{re.escape(str(root / '1'))}: name it to load it"
    )):
        agent_registry.make_agent(f"ckpt:{playable_run}", geometry)
    agent_registry.make_agent(f"ckpt:{root / '1'}:0", geometry)  # the intact one still loads
    code = evaluate.main(["arena", "--board", "2x2", "--agents", f"ckpt:{root / '2'},random", "--games", "2"])
    assert code == 2
    assert re.search(rf"error: agent 'ckpt:{re.escape(str(root / '2'))}': checkpoint {re.escape(str(root / '2'))} "
                     r"is damaged: params/ocdbt\.process_0/d/\w+ has", capsys.readouterr().err)
