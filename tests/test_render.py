"""Pictures: who drew each line comes from replaying the record through the env; the SVG, the PNG and the GIF
show the lines in their drawer's colour, boxes in their owner's, the scores and the last move."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from dabjax.evaluation import render
from dabjax.game import notation, record
from dabjax.game.geometry import board_geometry

SVG = "{http://www.w3.org/2000/svg}"


def random_record(geometry, seed: int, length: int | None = None) -> list[int]:
    moves = np.random.default_rng(seed).permutation(geometry.num_lines).tolist()
    return moves[: geometry.num_lines if length is None else length]


def test_replay_knows_who_drew_each_line(play_prefix):
    g = board_geometry(1, 1)  # h 0 0 = 0, h 1 0 = 1, v 0 0 = 2, v 0 1 = 3
    positions = record.replay(g, ["v 0 0", 0, "h 1 0", 3])
    assert len(positions) == 5 and positions[0].last_move is None
    final = positions[-1]
    # A draws v 0 0, B h 0 0, A h 1 0, B v 0 1 and takes the box.
    assert final.drawer.tolist() == [1, 0, 0, 1] and final.last_move == 3
    assert final.state.box_owner.tolist() == [1] and final.state.scores.tolist() == [0, 1]
    # On a larger board, through captures (the capturer moves again): the drawer of move k is the env's player to
    # move after the first k moves, and every position is the env's.
    g = board_geometry(2, 3)
    moves = random_record(g, 3)
    positions = record.replay(g, moves)
    prefix = play_prefix(2, 3)
    padded = np.asarray(moves, np.int32)
    for k, line in enumerate(moves):
        before = prefix(padded, k)
        assert positions[k + 1].drawer[line] == int(before.current_player)
        np.testing.assert_array_equal(positions[k].state.lines, np.asarray(before.lines))
        np.testing.assert_array_equal(positions[k].state.box_owner, np.asarray(before.box_owner))
    assert (positions[-1].drawer >= 0).all() and bool(positions[-1].state.terminated)
    with pytest.raises(ValueError, match="move #2 of the record: move 0 .*already drawn"):
        record.replay(g, [0, 5, 0])


def svg_tree(text: str) -> ET.Element:
    return ET.fromstring(text)


def test_svg_shows_lines_boxes_scores_and_last_move():
    g = board_geometry(2, 3)
    moves = random_record(g, 3, length=14)
    position = record.replay(g, moves)[-1]
    state = position.state
    assert state.scores.sum() > 0, "the record should have claimed boxes"
    root = svg_tree(render.board_svg(g, position, names=("alice", "bob")))
    drawn = [e for e in root.iter(f"{SVG}line") if e.get("class") == "line drawn"]
    assert sorted(int(e.get("data-line")) for e in drawn) == sorted(moves)
    for element in drawn:
        drawer = int(position.drawer[int(element.get("data-line"))])
        assert element.get("data-drawer") == str(drawer) and element.get("stroke") == render.PLAYER_COLOURS[drawer]
    undrawn = [e for e in root.iter(f"{SVG}line") if e.get("class") == "line"]
    assert len(undrawn) == g.num_lines - len(moves)
    fills = [e.get("fill") for e in root.iter(f"{SVG}rect")]
    for player in (0, 1):
        assert fills.count(render.BOX_FILLS[player]) == int((state.box_owner == player).sum())
    halo = [e for e in root.iter(f"{SVG}line") if e.get("stroke") == render.LAST_MOVE_HALO]
    assert len(halo) == 1
    texts = [e.text for e in root.iter(f"{SVG}text")]
    assert f"A alice: {state.scores[0]}" in texts and f"B bob: {state.scores[1]}" in texts
    player = ("alice", "bob")[int(state.current_player)]
    assert any(t.startswith(f"{player} to move") and t.endswith(f"14/{g.num_lines} lines") for t in texts)
    assert not list(root.iter(f"{SVG}rect[@class='hit']"))  # pictures have no click targets


def test_svg_for_the_page_top_moves_and_result():
    g = board_geometry(1, 2)
    position = record.replay(g, [0, 1])[-1]
    root = svg_tree(render.board_svg(g, position, top_moves={3: 0.6, 4: 0.25}, interactive=True, captions=False))
    hits = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "hit"]
    assert sorted(int(e.get("data-line")) for e in hits) == list(range(g.num_lines))
    assert {e.get("data-name") for e in hits} == {notation.move_name(g, m) for m in range(g.num_lines)}
    shares = {int(e.get("data-line")): e.text for e in root.iter(f"{SVG}text") if e.get("class") == "share"}
    assert shares == {3: "60%", 4: "25%"}
    assert not any("to move" in (e.text or "") for e in root.iter(f"{SVG}text"))  # no captions
    final = record.replay(g, random_record(g, 0))[-1]
    scores = final.state.scores
    expected = (f"draw {scores[0]} - {scores[1]}" if scores[0] == scores[1] else
                f"{'AB'[int(scores[1] > scores[0])]} wins {scores.max()} - {scores.min()}")
    assert render.status_text(final) == expected


def colour(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])


def test_png_shows_the_same_picture(tmp_path):
    g = board_geometry(2, 2)
    moves = random_record(g, 5, length=9)
    position = record.replay(g, moves)[-1]
    scene = render.board_scene(g, position)
    scale = 2.0
    path = render.write_png(tmp_path / "board.png", scene, scale)
    image = np.asarray(Image.open(path).convert("RGB")).astype(int)
    assert image.shape == (int(scene.height * scale), int(scene.width * scale), 3)
    drawn = [s for s in scene.shapes if isinstance(s, render.Segment) and s.attrs[:1] == (("class", "line drawn"),)]
    assert len(drawn) == len(moves)
    for segment in drawn:
        # a quarter of the way along the line (away from dots and share labels): the drawer's colour
        x = 0.75 * segment.x1 + 0.25 * segment.x2
        y = 0.75 * segment.y1 + 0.25 * segment.y2
        pixel = image[int(round(y * scale)), int(round(x * scale))]
        assert np.abs(pixel - colour(segment.colour)).max() <= 8, (segment, pixel)
    boxes = [s for s in scene.shapes if isinstance(s, render.Rect) and s.fill in render.BOX_FILLS]
    assert len(boxes) == int((position.state.box_owner >= 0).sum()) > 0
    for rect in boxes:  # the fill shows near the box's corner (its letter is in the middle)
        corner = image[int((rect.y + 6) * scale), int((rect.x + 6) * scale)]
        assert np.abs(corner - colour(rect.fill)).max() <= 8


def test_gif_and_frames_of_a_game(tmp_path):
    g = board_geometry(1, 2)
    moves = random_record(g, 1)
    scenes = render.game_scenes(g, record.replay(g, moves), ("level1", "random"))
    gif = render.write_gif(tmp_path / "game.gif", scenes, seconds_per_move=0.5, final_seconds=2.0)
    with Image.open(gif) as image:
        assert image.n_frames == len(moves) + 1
        durations = []
        for frame in range(image.n_frames):
            image.seek(frame)
            durations.append(image.info["duration"])
        assert durations == [500] * len(moves) + [2000]
    frames = render.write_frames(tmp_path / "frames", scenes)
    assert [p.name for p in frames] == [f"move-{k:03d}.png" for k in range(len(moves) + 1)]
    assert all(Image.open(p).size == (int(scenes[0].width), int(scenes[0].height)) for p in frames)


def test_game_picture_displays_inline_in_notebooks():
    from IPython.core.formatters import DisplayFormatter

    g = board_geometry(2, 2)
    moves = random_record(g, 2)
    picture = render.GamePicture(g, [notation.move_name(g, m) for m in moves], names=("trained", "level2"))
    data, _ = DisplayFormatter().format(picture)
    assert data["image/svg+xml"].startswith("<svg") and "A trained:" in data["image/svg+xml"]
    assert "game over" in data["text/plain"]  # the text rendering, for terminals
    start = picture.at(0)
    assert start.position.last_move is None and "0/12 lines" in start.svg() and picture.upto == len(moves)
    with pytest.raises(ValueError, match="upto=13 must be in 0..12"):
        picture.at(13)
