"""Labelled position sets: sampling, exact labels, the .npz format, accuracy by move number, the command."""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.cli import label as label_cli
from dabjax.game import policies
from dabjax.game.geometry import board_geometry
from dabjax.solvers import labelled, parallel_labels, position_solver, retrograde

SHIPPED_3X3 = pathlib.Path(__file__).resolve().parents[1] / "data" / "3x3.npz"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("labelled_cache")


@pytest.fixture(scope="module")
def set_2x2(cache_dir):
    return labelled.build_set(board_geometry(2, 2), list(range(12)), 15, seed=1, cache_dir=cache_dir)


def test_positions_are_distinct_under_symmetry_and_reached(set_2x2):
    geometry = set_2x2.geometry
    assert set(set_2x2.move_numbers.tolist()) == set(range(12))
    np.testing.assert_array_equal(set_2x2.lines.sum(axis=1), set_2x2.move_numbers)
    keys = labelled.canonical_keys(geometry, set_2x2.lines)
    identities = list(zip(keys, set_2x2.margin.tolist()))
    assert len(set(identities)) == len(identities)
    assert (set_2x2.move_numbers == 0).sum() == 1  # one empty board
    assert (set_2x2.move_numbers == 1).sum() == 2  # 2x2 first moves: perimeter or interior
    # Claimed boxes agree with the lines, the scores with the owners, the margin with the scores.
    complete = set_2x2.lines[:, geometry.box_lines].all(-1)
    np.testing.assert_array_equal(set_2x2.box_owner >= 0, complete)
    for player in range(2):
        np.testing.assert_array_equal((set_2x2.box_owner == player).sum(-1), set_2x2.scores[:, player])
    own = set_2x2.scores[np.arange(len(set_2x2)), set_2x2.current_player]
    np.testing.assert_array_equal(set_2x2.margin, 2 * own - set_2x2.scores.sum(-1))


def test_labels_are_exact(set_2x2, cache_dir):
    geometry = set_2x2.geometry
    table = retrograde.solve_table(geometry, cache_dir)
    values = retrograde.move_values(geometry, table, set_2x2.lines)
    np.testing.assert_array_equal(set_2x2.move_values, values)
    np.testing.assert_array_equal(set_2x2.value, values.max(-1))
    legal = ~set_2x2.lines
    np.testing.assert_array_equal(set_2x2.best_margin, legal & (values == values.max(-1, keepdims=True)))
    final = set_2x2.margin[:, None] + values
    best_sign = np.where(legal, np.sign(final), -2).max(-1, keepdims=True)
    np.testing.assert_array_equal(set_2x2.best_result, legal & (np.sign(final) == best_sign))
    assert (set_2x2.best_margin <= set_2x2.best_result).all()


def test_solver_labels_equal_table_labels(cache_dir, monkeypatch):
    """The search path (used above 24 lines) gives the same labels as the table on a 3x3 set."""
    geometry = board_geometry(3, 3)
    by_table = labelled.build_set(geometry, [8, 14, 20], 10, seed=2, cache_dir=cache_dir)
    monkeypatch.setattr(labelled, "TABLE_LABEL_MAX_LINES", 0)
    by_search = labelled.build_set(geometry, [8, 14, 20], 10, seed=2)
    assert by_search.settings["labeller"] == "alpha-beta position solver"
    assert by_search.settings["unfinished"] == 0
    for name in ("lines", "value", "best_result", "best_margin", "move_values", "margin"):
        np.testing.assert_array_equal(getattr(by_search, name), getattr(by_table, name))


def test_workers_build_the_same_set_as_one_process(monkeypatch):
    """Solving in two worker processes gives the one-process set: same positions, labels and order."""
    monkeypatch.setattr(labelled, "TABLE_LABEL_MAX_LINES", 0)  # the search path, on a board small enough
    geometry = board_geometry(2, 3)
    lines = []
    one = labelled.build_set(geometry, [4, 9, 13], 6, seed=3, workers=1)
    two = labelled.build_set(geometry, [4, 9, 13], 6, seed=3, workers=2, progress=lines.append)
    assert len(one) == 18 and one.settings["unfinished"] == two.settings["unfinished"] == 0
    assert (one.settings["workers"], two.settings["workers"]) == (1, 2)
    for name in labelled.ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)
        assert getattr(two, name).dtype == getattr(one, name).dtype
    assert "18/18 solved" in lines[-1] and all(line.startswith("move ") for line in lines)  # move 4: or moves 4-9:
    with pytest.raises(ValueError, match="workers=0"):
        labelled.build_set(geometry, [4], 2, workers=0)


def test_worker_errors_name_the_positions():
    """A worker that fails surfaces in the parent as one error naming the positions, its cause chained."""
    wrong_board = np.zeros((2, 5), bool)  # 5 lines given for a 2x3 board (17)
    with pytest.raises(RuntimeError, match=r"positions (\d)\.\.\1 of 2 \(move numbers \[0\]\) failed in a worker "
                       r"process: ValueError: lines must be bool \[17\]"):
        parallel_labels.solve_parallel(2, 3, wrong_board, np.zeros(2, int), np.zeros(2, int), workers=2,
                                       move_values=False, time_limit=10.0)


def test_save_load_round_trip(set_2x2, tmp_path):
    path = tmp_path / "set.npz"
    labelled.save(set_2x2, path)
    loaded = labelled.load(path)
    assert (loaded.rows, loaded.cols) == (2, 2) and loaded.settings == set_2x2.settings
    for name in labelled.ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(set_2x2, name))
        assert getattr(loaded, name).dtype == getattr(set_2x2, name).dtype


def test_load_rejects_other_versions(set_2x2, tmp_path):
    path = tmp_path / "old.npz"
    np.savez(path, format_version=np.int32(labelled.FORMAT_VERSION + 1), board=np.array([2, 2]))
    with pytest.raises(ValueError, match="format version"):
        labelled.load(path)


def _oracle(table_moves):
    """A batched agent that plays the first move marked in ``table_moves`` (bool [N, L]) by position."""
    def agent(geometry, key, states):
        del geometry, key
        return jnp.argmax(jnp.asarray(table_moves)[: states.lines.shape[0]], axis=-1).astype(jnp.int32)
    return agent


def test_accuracy_of_perfect_and_known_agents(set_2x2):
    perfect = labelled.accuracy_by_move_number(_oracle(set_2x2.best_margin), set_2x2, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(perfect.best_margin, 1.0)
    np.testing.assert_array_equal(perfect.best_result, 1.0)
    assert np.isnan(perfect.mean_margin_loss).all()
    # The worst move everywhere: accuracy and loss by hand.
    worst_values = np.where(~set_2x2.lines, set_2x2.move_values, 127)
    worst = worst_values.argmin(-1)
    report = labelled.accuracy_of_moves(set_2x2, worst)
    for i, n in enumerate(report.move_numbers):
        at = set_2x2.move_numbers == n
        hit = set_2x2.best_margin[at, worst[at]]
        assert report.count[i] == at.sum()
        assert report.best_margin[i] == pytest.approx(hit.mean())
        assert report.best_result[i] == pytest.approx(set_2x2.best_result[at, worst[at]].mean())
        loss = (set_2x2.value[at] - worst_values[at, worst[at]])[~hit]
        if loss.size:
            assert report.mean_margin_loss[i] == pytest.approx(loss.mean()) and (loss > 0).all()
    # Illegal moves (a drawn line) are misses.
    drawn = np.where(set_2x2.lines.any(-1), set_2x2.lines.argmax(-1), 0)
    illegal = labelled.accuracy_of_moves(set_2x2, drawn)
    assert illegal.illegal[1:].sum() == (set_2x2.move_numbers > 0).sum()


def test_random_agent_is_worse_than_perfect(set_2x2):
    report = labelled.accuracy_by_move_number(policies.random_agent, set_2x2, jax.random.PRNGKey(3))
    assert report.illegal.sum() == 0
    assert report.best_margin.mean() < 1.0 and "best-result" in report.format()


def test_shipped_3x3_set_is_complete_and_exact(cache_dir):
    shipped = labelled.load(SHIPPED_3X3)
    geometry = shipped.geometry
    assert (shipped.rows, shipped.cols) == (3, 3)
    assert set(shipped.move_numbers.tolist()) == set(range(24))
    table = retrograde.solve_table(geometry, cache_dir)
    values = retrograde.move_values(geometry, table, shipped.lines)
    np.testing.assert_array_equal(shipped.move_values, values)
    np.testing.assert_array_equal(shipped.best_result,
                                  position_solver.best_result_moves(values, ~shipped.lines, shipped.margin))


def test_command_builds_a_set(tmp_path, capsys):
    out = tmp_path / "1x2.npz"
    argv = ["build", "--board", "1x2", "--moves", "0-6", "--per-move", "3", "--out", str(out), "--workers", "2"]
    assert label_cli.main(argv) == 0
    built = labelled.load(out)
    assert (built.rows, built.cols) == (1, 2) and set(built.move_numbers.tolist()) == set(range(7))
    assert label_cli.main(["info", str(out)]) == 0
    assert "1x2" in capsys.readouterr().out


def test_sets_built_in_parts_merge_into_one(tmp_path, capsys):
    parts = [tmp_path / "a.npz", tmp_path / "b.npz"]
    for path, moves in zip(parts, ["0-2", "3-6"]):
        argv = ["build", "--board", "1x2", "--moves", moves, "--per-move", "3", "--out", str(path)]
        assert label_cli.main(argv) == 0
    out = tmp_path / "merged.npz"
    assert label_cli.main(["merge", str(out), *map(str, parts)]) == 0
    merged, first, second = labelled.load(out), labelled.load(parts[0]), labelled.load(parts[1])
    assert len(merged) == len(first) + len(second) and merged.settings["move_numbers"] == list(range(7))
    np.testing.assert_array_equal(merged.lines, np.concatenate([first.lines, second.lines]))
    np.testing.assert_array_equal(merged.best_result, np.concatenate([first.best_result, second.best_result]))
    np.testing.assert_array_equal(merged.move_values, np.concatenate([first.move_values, second.move_values]))
    with pytest.raises(ValueError, match="different boards"):
        labelled.merge([first, dataclasses.replace(second, rows=2)])
    # A top-up that repeats positions (here: a mirror image of a whole part) adds only what is new.
    mirrored = dataclasses.replace(first, lines=first.lines[:, first.geometry.sym_line_gather[1]])
    topped_up = labelled.merge([merged, mirrored, second])
    assert len(topped_up) == len(merged) and topped_up.settings["duplicates_dropped"] == len(first) + len(second)
    assert merged.settings["duplicates_dropped"] == 0
    # --exclude keeps a training set apart from a measured one: here the mirror image of the first part.
    labelled.save(mirrored, tmp_path / "measured.npz")
    apart = tmp_path / "apart.npz"
    assert label_cli.main(["merge", str(apart), *map(str, parts), "--exclude", str(tmp_path / "measured.npz")]) == 0
    kept = labelled.load(apart)
    np.testing.assert_array_equal(kept.lines, second.lines)
    assert kept.settings["excluded"] == {"set": str(tmp_path / "measured.npz"), "dropped": len(first)}
    assert f"{len(first)} also in" in capsys.readouterr().out
    wrong_board = tmp_path / "wrong.npz"
    labelled.save(labelled.build_set(board_geometry(1, 1), [1], 2, seed=0), wrong_board)
    assert label_cli.main(["merge", str(apart), *map(str, parts), "--exclude", str(wrong_board)]) == 2
    assert "--exclude" in capsys.readouterr().err


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(ValueError, match="move number 12"):
        labelled.sample_positions(board_geometry(2, 2), [12], 5)
    with pytest.raises(ValueError, match="random_rate"):
        labelled.sample_positions(board_geometry(2, 2), [3], 5, random_rate=1.5)
    with pytest.raises(ValueError, match="--moves"):
        label_cli.parse_move_numbers("a-b")
    assert label_cli.parse_move_numbers("0-3,9") == [0, 1, 2, 3, 9]
    # On the command line the same mistakes are one line on stderr and exit code 2, not a traceback.
    out = str(tmp_path / "bad.npz")
    for argv, message in [
        (["build", "--board", "2x2", "--moves", "a-b", "--out", out], "--moves 'a-b'"),
        (["build", "--board", "2x2", "--moves", "12", "--out", out], "move number 12"),
        (["build", "--board", "2by2", "--moves", "3", "--out", out], "board size '2by2'"),
        (["info", str(tmp_path / "missing.npz")], "missing.npz"),
    ]:
        assert label_cli.main(argv) == 2
        assert message in capsys.readouterr().err
