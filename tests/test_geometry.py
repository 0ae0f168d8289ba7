import numpy as np
import pytest

from dabjax.game.geometry import board_geometry, parse_board_size

SIZES = [(1, 1), (1, 5), (2, 3), (3, 3), (5, 5), (4, 7), (9, 9)]


@pytest.mark.parametrize("rows,cols", SIZES)
def test_counts_and_incidence(rows, cols):
    g = board_geometry(rows, cols)
    assert g.num_lines == (rows + 1) * cols + rows * (cols + 1)
    assert g.num_boxes == rows * cols
    assert g.grid_shape == (2 * rows + 1, 2 * cols + 1)
    # Every box has 4 distinct sides; each line borders 1 or 2 boxes and box_lines / line_boxes agree.
    assert all(len(set(b)) == 4 for b in g.box_lines.tolist())
    borders = g.line_box_valid.sum(1)
    assert set(borders.tolist()) <= {1, 2}
    assert borders.sum() == 4 * g.num_boxes
    for line in range(g.num_lines):
        for box in g.line_boxes[line][g.line_box_valid[line]]:
            assert line in g.box_lines[box]
    # Lines and boxes sit at their grid cells: lines at odd-sum cells, boxes at odd/odd.
    assert ((g.line_cells.sum(1) % 2) == 1).all()
    assert (g.cell_line[g.line_cells[:, 0], g.line_cells[:, 1]] == np.arange(g.num_lines)).all()
    assert (g.cell_box[g.box_cells[:, 0], g.box_cells[:, 1]] == np.arange(g.num_boxes)).all()
    # The four sides of a box are its grid neighbours.
    for box in range(g.num_boxes):
        i, j = g.box_cells[box]
        neighbours = {g.cell_line[i - 1, j], g.cell_line[i + 1, j], g.cell_line[i, j - 1], g.cell_line[i, j + 1]}
        assert neighbours == set(g.box_lines[box].tolist())


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 3), (4, 7)])
def test_numbering_matches_openspiel(rows, cols):
    import pyspiel  # the test extra installs OpenSpiel: imported, never skipped
    game = pyspiel.load_game("dots_and_boxes", {"num_rows": rows, "num_cols": cols})
    state = game.new_initial_state()
    g = board_geometry(rows, cols)
    assert game.num_distinct_actions() == g.num_lines
    for line in range(g.num_lines):
        # OpenSpiel writes "P1(h,r,c)"; ours is "h r c".
        name = state.action_to_string(0, line)
        assert name == "P1({})".format(g.line_name(line).replace(" ", ","))


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 3), (3, 4)])
def test_symmetries_are_board_automorphisms(rows, cols):
    g = board_geometry(rows, cols)
    assert g.num_symmetries == (8 if rows == cols else 4)
    assert g.sym_names[0] == "identity"
    seen = set()
    for k in range(g.num_symmetries):
        line_map, box_gather = g.sym_line_map[k], g.sym_box_gather[k]
        assert sorted(line_map.tolist()) == list(range(g.num_lines))
        assert (g.sym_line_map[k][g.sym_line_gather[k]] == np.arange(g.num_lines)).all()
        box_map = np.argsort(box_gather)
        # The sides of box b map onto the sides of its image box.
        for box in range(g.num_boxes):
            assert set(line_map[g.box_lines[box]].tolist()) == set(g.box_lines[box_map[box]].tolist())
        seen.add(tuple(line_map.tolist()))
    assert len(seen) == g.num_symmetries  # all distinct


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="0x3"):
        board_geometry(0, 3)
    with pytest.raises(ValueError, match="10x2"):
        board_geometry(10, 2)
    assert parse_board_size("3x4") == (3, 4)
    with pytest.raises(ValueError, match="RxC"):
        parse_board_size("3by4")
