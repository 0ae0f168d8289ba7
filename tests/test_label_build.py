"""The resumable ``dabjax label build``: stopped and rerun, it gives the set of one uninterrupted build."""

import json

import numpy as np
import pytest

from dabjax.cli import label as label_cli
from dabjax.game.geometry import board_geometry
from dabjax.runs import label_build
from dabjax.solvers import labelled, parallel_labels

GEOMETRY = board_geometry(2, 3)  # 17 lines: the search path once TABLE_LABEL_MAX_LINES is 0
MOVES = [4, 9, 13]
PER_MOVE = {4: 5, 9: 7, 13: 4}


@pytest.fixture
def search_path(monkeypatch):
    monkeypatch.setattr(labelled, "TABLE_LABEL_MAX_LINES", 0)


def _stop_after(monkeypatch, chunks: int):
    """Makes ``solve_chunks`` raise KeyboardInterrupt after yielding ``chunks`` chunks (a user's Ctrl-C)."""
    real = parallel_labels.solve_chunks

    def interrupted(*args, **kwargs):
        for i, item in enumerate(real(*args, **kwargs)):
            if i == chunks:
                raise KeyboardInterrupt
            yield item

    monkeypatch.setattr(parallel_labels, "solve_chunks", interrupted)
    return real


def test_a_stopped_build_goes_on_and_equals_one_build(search_path, monkeypatch, tmp_path):
    out = tmp_path / "set.npz"
    kwargs = dict(seed=3, workers=1, move_values=True, time_limit=30.0, progress_bar=False)
    real = _stop_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt, match="2 of .* chunks are saved"):
        label_build.build_resumable(GEOMETRY, MOVES, PER_MOVE, out, **kwargs)
    work = label_build.work_dir_for(out, None)
    assert len(list(work.glob("chunk_*.npz"))) == 2 and not out.exists()
    solved = []  # the chunks the second run solves: none of the saved ones again

    def counting(*args, **kwargs):
        for start, stop, chunk in real(*args, **kwargs):
            solved.append((start, stop))
            yield start, stop, chunk

    monkeypatch.setattr(parallel_labels, "solve_chunks", counting)
    built = label_build.build_resumable(GEOMETRY, MOVES, PER_MOVE, out, **kwargs)
    assert not work.exists() and out.is_file()
    bounds = parallel_labels.chunk_bounds(built.move_numbers, 1)
    assert len(solved) == len(bounds) - 2
    one = labelled.build_set(GEOMETRY, MOVES, PER_MOVE, seed=3, workers=1)
    loaded = labelled.load(out)
    for name in labelled.ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(one, name), err_msg=name)
    assert loaded.settings["per_move"] == {"4": 5, "9": 7, "13": 4} and loaded.settings["unfinished"] == 0
    assert np.unique(loaded.move_numbers, return_counts=True)[1].tolist() == [5, 7, 4]


def test_other_arguments_are_refused_naming_them(search_path, monkeypatch, tmp_path):
    out = tmp_path / "set.npz"
    _stop_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        label_build.build_resumable(GEOMETRY, MOVES, PER_MOVE, out, seed=3, workers=1, progress_bar=False)
    with pytest.raises(ValueError, match=r"seed: 3 there, 4 now.*remove"):
        label_build.build_resumable(GEOMETRY, MOVES, PER_MOVE, out, seed=4, workers=1, progress_bar=False)
    manifest = json.loads((tmp_path / "set.npz.parts" / "manifest.json").read_text())
    assert manifest["per_move"] == {"4": 5, "9": 7, "13": 4}


def test_chunks_stay_within_a_move_number():
    numbers = np.array([4] * 5 + [9] * 40 + [13] * 3)
    bounds = parallel_labels.chunk_bounds(numbers, 2)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(numbers)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(len(set(numbers[start:stop])) == 1 for start, stop in bounds)
    assert max(stop - start for start, stop in bounds) <= 16


def test_exclude_drops_the_positions_of_another_set(tmp_path):
    other = labelled.build_set(GEOMETRY, [5, 6], 6, seed=0)
    kept, excluded = labelled.sample_excluding(GEOMETRY, [5, 6], 6, seed=0, random_rate=0.2, exclude=other)
    assert excluded == {"positions": 12} and len(kept["move_numbers"]) == 0
    # The same sampler and seed draw other's 6 positions a move first: those 12 go, the 2 more a move stay.
    built = label_build.build_resumable(GEOMETRY, [5, 6], 8, tmp_path / "x.npz", seed=0, exclude=("other", other),
                                        progress_bar=False)
    assert len(built) == 2 * (8 - 6)
    assert not set(labelled.position_identities(built)) & set(labelled.position_identities(other))
    assert built.settings["excluded"] == {"set": "other", "positions": 2 * 6}


def test_per_move_text():
    assert label_cli.parse_per_move("200", [1, 2]) == 200
    assert label_cli.parse_per_move("18-19:10,20:5", [18, 19, 20]) == {18: 10, 19: 10, 20: 5}
    with pytest.raises(ValueError, match=r"move numbers \[18, 19\], --moves has \[18, 19, 20\]"):
        label_cli.parse_per_move("18-19:10", [18, 19, 20])
    with pytest.raises(ValueError, match="MOVES:COUNT"):
        label_cli.parse_per_move("18:x", [18])
    with pytest.raises(ValueError, match="must be positive"):
        labelled.per_move_counts([3], {3: 0})
