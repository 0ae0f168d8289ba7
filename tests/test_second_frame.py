"""benchmarks/second_frame.py --tiny: positions with their last two moves, labelled exactly, and two arms of the
value bench, the second reading the two moves as two more inputs on every line."""

import json

from conftest import load_benchmark


def test_both_arms_train_and_are_measured_and_only_the_second_reads_the_moves(tmp_path, capsys):
    second_frame = load_benchmark("second_frame")
    path = tmp_path / "frame.json"
    assert second_frame.main(["--tiny", "--seeds", "0", "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    assert report["board"] == "2x2" and report["training_positions"] > 0 and report["measured_positions"] > 0
    arms = {row["arm"]: row for row in report["rows"]}
    assert set(arms) == {"plain", "last two moves"}
    assert arms["last two moves"]["line_inputs"] == arms["plain"]["line_inputs"] + 2
    for row in arms.values():
        assert set(row["measured"]) == {"4", "5"} and set(row["trained"]) == {"3", "4", "5", "6"}
        for share in [*row["measured"].values(), *row["trained"].values()]:
            assert 0.0 <= share <= 1.0 or share != share  # NaN: no won or lost position at that move
    assert "mean balanced sign accuracy" in capsys.readouterr().out


def test_the_last_two_moves_are_the_lines_that_led_to_each_position():
    second_frame = load_benchmark("second_frame")
    from dabjax.game.geometry import board_geometry

    geometry = board_geometry(2, 2)
    data = second_frame.sample_with_history(geometry, [2, 5], 20, seed=3, avoid=set())
    assert len(data["move_numbers"]) > 0
    for lines, move, last in zip(data["lines"], data["move_numbers"], data["last_moves"]):
        assert lines.sum() == move
        assert last[0] != last[1] and lines[last].all()  # both drawn, two different lines


def test_the_frames_mark_the_last_two_moves_and_move_with_the_board_symmetries():
    """Plane 4 is 1 exactly at the last move's line cell, plane 5 at the move before's; under a symmetry the frames
    are the symmetric image's, as the lines are."""
    second_frame = load_benchmark("second_frame")
    import jax.numpy as jnp
    import numpy as np

    from dabjax.game.geometry import board_geometry

    geometry = board_geometry(2, 3)
    lines = np.zeros((2, geometry.num_lines), bool)
    lines[0, [0, 5, 9]] = lines[1, [3, 4]] = True
    data = dict(lines=lines, claimed=np.zeros((2, geometry.num_boxes), bool), margin=np.array([0, 1], np.int32),
                last_moves=np.array([[9, 5], [4, 3]], np.int32))
    cell_line = geometry.cell_line.reshape(geometry.grid_shape)
    plain = np.asarray(second_frame.observations(geometry, {k: jnp.asarray(v) for k, v in data.items()}, None))
    assert plain.shape == (2, *geometry.grid_shape, 6)
    for i, (last, before) in enumerate(data["last_moves"]):
        np.testing.assert_array_equal(plain[i, ..., 4], (cell_line == last).astype(np.float32))
        np.testing.assert_array_equal(plain[i, ..., 5], (cell_line == before).astype(np.float32))
    for sym in range(1, geometry.num_symmetries):
        moved = np.asarray(second_frame.observations(geometry, {k: jnp.asarray(v) for k, v in data.items()},
                                                     jnp.full(2, sym)))
        gather = geometry.sym_line_gather[sym]
        for i, (last, before) in enumerate(data["last_moves"]):
            # the image's line j is the original's line gather[j]: the last move sits where gather[j] == last
            np.testing.assert_array_equal(moved[i, ..., 4], np.isin(cell_line, np.flatnonzero(gather == last)))
            np.testing.assert_array_equal(moved[i, ..., 5], np.isin(cell_line, np.flatnonzero(gather == before)))
            np.testing.assert_array_equal(moved[i, ..., 0], np.isin(cell_line, np.flatnonzero(lines[i][gather])))
