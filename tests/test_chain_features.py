"""Chain-structure features (dabjax.game.chain_features) against hand-made positions and a brute-force
reading of random ones."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.game import chain_features as cf
from dabjax.game.geometry import board_geometry

BOX = {name: i for i, name in enumerate(cf.BOX_FEATURES)}
LINE = {name: i for i, name in enumerate(cf.LINE_FEATURES)}
POSITION = {name: i for i, name in enumerate(cf.GLOBAL_FEATURES)}


@functools.lru_cache(maxsize=None)
def features_fn(rows: int, cols: int):
    geometry = board_geometry(rows, cols)
    return jax.jit(jax.vmap(lambda lines, claimed: cf.chain_features(geometry, lines, claimed)))


def features_of(geometry, lines, claimed=None):
    claimed = np.zeros(geometry.num_boxes, bool) if claimed is None else claimed
    out = features_fn(geometry.rows, geometry.cols)(jnp.asarray(lines)[None], jnp.asarray(claimed)[None])
    return jax.tree_util.tree_map(lambda x: np.asarray(x[0]), out)


def test_a_ring_of_four_boxes_is_one_long_loop_with_no_safe_line():
    geometry = board_geometry(2, 2)
    lines = np.zeros(geometry.num_lines, bool)
    lines[np.asarray(geometry.line_box_valid).sum(-1) == 1] = True  # the 8 edge lines
    features = features_of(geometry, lines)
    assert (features.box[:, BOX["valence2"]] == 1).all()
    assert (features.box[:, BOX["loop"]] == 1).all()
    assert (features.box[:, BOX["long_segment"]] == 1).all()
    assert np.allclose(features.box[:, BOX["segment_length"]], 4 * cf.LENGTH_SCALE)
    assert (features.box[:, BOX["segment_touches_ground"]] == 0).all()
    assert features.line[:, LINE["safe"]].sum() == 0
    assert features.line[:, LINE["opens_long"]].sum() == 4  # the four inner lines
    position = features.position
    assert position[POSITION["loops"]] == pytest.approx(cf.COUNT_SCALE)
    assert position[POSITION["long_segments"]] == pytest.approx(cf.COUNT_SCALE)
    assert position[POSITION["safe_lines"]] == 0
    assert position[POSITION["undrawn_odd"]] == 0 and position[POSITION["control_odd"]] == 1
    assert position[POSITION["safe_moves"]] == 0 and (features.box[:, BOX["settled_loop"]] == 1).all()


def test_a_row_of_three_boxes_is_a_long_chain_to_the_ground():
    geometry = board_geometry(3, 3)
    lines = np.zeros(geometry.num_lines, bool)
    for c in range(3):
        lines[geometry.h_line(0, c)] = lines[geometry.h_line(1, c)] = True
    features = features_of(geometry, lines)
    top = [0, 1, 2]
    assert (features.box[top, BOX["long_segment"]] == 1).all()
    assert (features.box[top, BOX["segment_touches_ground"]] == 1).all()
    assert (features.box[top, BOX["loop"]] == 0).all()
    assert (features.box[3:6, BOX["valence3"]] == 1).all() and (features.box[6:, BOX["valence4"]] == 1).all()
    # 18 undrawn lines: the 4 vertical sides of the chain open it, the other 14 are safe.
    assert features.line[:, LINE["opens_long"]].sum() == 4
    assert features.line[:, LINE["safe"]].sum() == 14
    # Settled: the safe lines played greedily leave no safe line, and every box in a segment or claimed-free.
    settled_lines, moves = jax.jit(lambda l: cf.settle(geometry, l, jnp.zeros(9, bool)))(jnp.asarray(lines))
    settled_lines = np.asarray(settled_lines)
    assert int(moves) == int((settled_lines & ~lines).sum()) > 0
    assert not np.asarray(cf.safe_lines(geometry, jnp.asarray(settled_lines), jnp.zeros(9, bool))).any()
    assert features.position[POSITION["safe_moves"]] == pytest.approx(int(moves) * cf.COUNT_SCALE)
    assert (features.box[top, BOX["settled_long_segment"]] == 1).all()


def brute_force(geometry, lines, claimed):
    """Valences, segment sizes (BFS over valence-2 boxes) and safe lines, the slow and obvious way."""
    box_lines = np.asarray(geometry.box_lines)
    valence = np.where(claimed, 0, (~lines[box_lines]).sum(-1))
    in_segment = valence == 2
    size = np.zeros(geometry.num_boxes, int)
    for start in range(geometry.num_boxes):
        if not in_segment[start]:
            continue
        seen, frontier = {start}, [start]
        while frontier:
            box = frontier.pop()
            for side, other in enumerate(geometry.box_neighbours[box]):
                if other >= 0 and not lines[box_lines[box, side]] and in_segment[other] and other not in seen:
                    seen.add(other)
                    frontier.append(other)
        size[start] = len(seen)
    safe = np.zeros(geometry.num_lines, bool)
    for line in np.flatnonzero(~lines):
        after = lines.copy()
        after[line] = True
        boxes = [b for b in geometry.line_boxes[line] if b >= 0]
        # Safe: drawing it completes no box and leaves no box with one undrawn side.
        safe[line] = all((~after[box_lines[b]]).sum() >= 2 for b in boxes)
    return valence, size, safe


@pytest.mark.parametrize("rows, cols", [(3, 3), (2, 4)])
def test_random_positions_agree_with_brute_force(rows, cols):
    geometry = board_geometry(rows, cols)
    rng = np.random.default_rng(rows * 10 + cols)
    batch_lines, batch_claimed = [], []
    for _ in range(64):
        lines = rng.random(geometry.num_lines) < rng.uniform(0.2, 0.8)
        complete = lines[np.asarray(geometry.box_lines)].all(-1)
        batch_lines.append(lines)
        batch_claimed.append(complete)
    out = features_fn(rows, cols)(jnp.asarray(np.stack(batch_lines)), jnp.asarray(np.stack(batch_claimed)))
    for i, (lines, claimed) in enumerate(zip(batch_lines, batch_claimed)):
        valence, size, safe = brute_force(geometry, lines, claimed)
        box = np.asarray(out.box[i])
        for v in range(1, 5):
            assert (box[:, BOX[f"valence{v}"]] == (valence == v)).all()
        assert np.allclose(box[:, BOX["segment_length"]], size * cf.LENGTH_SCALE)
        assert (box[:, BOX["long_segment"]] == (size >= cf.LONG_SEGMENT)).all()
        assert (np.asarray(out.line[i])[:, LINE["safe"]] == safe).all()
        assert np.asarray(out.position[i])[POSITION["safe_lines"]] == pytest.approx(safe.sum() * cf.COUNT_SCALE)
