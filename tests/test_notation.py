import numpy as np
import pytest

from dabjax.game import notation
from dabjax.game.geometry import board_geometry


def test_parse_move_forms():
    g = board_geometry(2, 3)
    assert notation.parse_move(g, "h 0 1") == 1
    assert notation.parse_move(g, "v 1 3") == g.v_line(1, 3) == 9 + 4 + 3
    assert notation.parse_move(g, "P2(v,0,0)") == 9
    assert notation.parse_move(g, " 5 ") == 5 and notation.parse_move(g, 16) == 16
    for line in range(g.num_lines):
        assert notation.parse_move(g, notation.move_name(g, line)) == line


@pytest.mark.parametrize(
    "move,reason",
    [("x 0 0", "not understood"), ("h 3 0", "off a 2x3 board"), ("v 0 4", "off a 2x3 board"),
     ("17", "outside 0..16"), ("-1", "outside"), ("", "not understood")],
)
def test_parse_move_errors_name_the_move(move, reason):
    g = board_geometry(2, 3)
    with pytest.raises(ValueError, match=reason) as info:
        notation.parse_move(g, move)
    assert repr(move) in str(info.value) or move.strip() in str(info.value)


def test_state_from_moves_refuses_illegal_moves_with_position():
    g = board_geometry(2, 2)
    with pytest.raises(ValueError, match=r"move #2 of the list.*'h 0 0'.*already drawn"):
        notation.state_from_moves(g, ["h 0 0", "v 0 0", "h 0 0"])
    with pytest.raises(ValueError, match=r"move #1 of the list.*not understood"):
        notation.state_from_moves(g, "h 0 0; q")
    s = notation.state_from_moves(g, "0 1 2")
    assert np.asarray(s.lines)[:3].all() and int(s.num_moves) == 3


def test_move_lists_read_the_same_in_every_form():
    """Line indices separated by spaces, commas or semicolons, named moves, a mix, or a list: one reading
    (``parse_move_list``) for ``state_from_moves`` (``dabjax solve --moves``) and the web page's replay."""
    g = board_geometry(2, 2)
    named = "; ".join(notation.move_name(g, line) for line in (0, 1, 2, 5))
    assert named == "h 0 0; h 0 1; h 1 0; h 2 1"
    for moves in ("0 1 2 5", "0;1;2;5", "0, 1, 2, 5", "0 1\n2; 5", named, "h 0 0; 1 2\nh 2 1", [0, "1", "h 1 0", 5]):
        assert notation.parse_move_list(g, moves) == [0, 1, 2, 5], moves
        assert np.flatnonzero(np.asarray(notation.state_from_moves(g, moves).lines)).tolist() == [0, 1, 2, 5], moves
    assert notation.parse_move_list(g, " ;\n ") == [] and notation.split_move_list("h 0 0;; 3") == ["h 0 0", "3"]
    with pytest.raises(ValueError, match=r"move #2 of the list: move 'q' is not understood"):
        notation.parse_move_list(g, "0 1; q")
    with pytest.raises(ValueError, match=r"move #1 of the list: move 12: line index outside 0..11"):
        notation.parse_move_list(g, "0 12 1")


def test_render_shows_lines_owners_and_status():
    g = board_geometry(1, 2)
    s = notation.state_from_moves(g, ["h 0 0", "h 1 0", "v 0 0", "v 0 1"])
    text = notation.render(g, s)
    assert text.splitlines()[:3] == ["+---+   +", "| B |", "+---+   +"]
    assert "A 0 - B 1, B to move, 4/7 lines drawn" in text
