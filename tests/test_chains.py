"""Bit boards, component analysis and the forced-capture rule against plain host references, on many random
positions of several boards (one-word and multi-word bit boards, square and not)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import batched, states_from_lines

from dabjax.game import chains, forced
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry

BOARDS = [(1, 1), (1, 4), (2, 3), (3, 3), (4, 7), (5, 5), (6, 6), (9, 9)]  # 6x6 and 9x9: 2 and 3 words


def ring_lines(geometry, top, left, height, width):
    """The lines joining the border boxes of a block of boxes, in a cycle: a loop when all else is drawn."""
    ring = ([(top, left + c) for c in range(width)] + [(top + r, left + width - 1) for r in range(1, height)]
            + [(top + height - 1, left + c) for c in range(width - 2, -1, -1)]
            + [(top + r, left) for r in range(height - 2, 0, -1)])
    boxes = [r * geometry.cols + c for r, c in ring]
    pairs = zip(boxes, boxes[1:] + boxes[:1])
    return [(set(geometry.box_lines[a]) & set(geometry.box_lines[b])).pop() for a, b in pairs]


def simple_endgame_lines(geometry, rng, count):
    """bool ``[count, L]``: positions near simple endgames: on some, the ring of a random block of boxes
    undrawn first (a loop); then lines undrawn one by one (random order) while no box gets a third undrawn
    side; then the last side of any box left with one drawn (a simple endgame); on half of them, one or two
    of the undrawn lines drawn again (capturable boxes)."""
    boxes_of = [[b for b in geometry.line_boxes[line] if b >= 0] for line in range(geometry.num_lines)]
    out = np.ones((count, geometry.num_lines), bool)
    for row in out:
        undrawn = np.zeros(geometry.num_boxes, int)
        order = list(rng.permutation(geometry.num_lines))
        if min(geometry.rows, geometry.cols) >= 2 and rng.random() < 0.5:
            height, width = rng.integers(2, geometry.rows + 1), rng.integers(2, geometry.cols + 1)
            top, left = rng.integers(0, geometry.rows - height + 1), rng.integers(0, geometry.cols - width + 1)
            order = ring_lines(geometry, top, left, height, width) + order
        for line in order:
            if row[line] and all(undrawn[b] < 2 for b in boxes_of[line]):
                row[line] = False
                undrawn[boxes_of[line]] += 1
        while (undrawn == 1).any():
            box = np.flatnonzero(undrawn == 1)[0]
            line = next(line for line in geometry.box_lines[box] if not row[line])
            row[line] = True
            undrawn[boxes_of[line]] -= 1
        open_lines = np.flatnonzero(~row)
        redraw = rng.integers(0, 3) * (rng.random() < 0.5)
        if redraw and len(open_lines):
            row[rng.choice(open_lines, size=min(redraw, len(open_lines)), replace=False)] = True
    return out


def random_lines(geometry, seed, count=768):
    """Uniformly random densities, and as many positions near simple endgames (loops included)."""
    rng = np.random.default_rng(seed)
    dense = rng.random((count, geometry.num_lines)) < rng.random((count, 1))
    return np.concatenate([dense, simple_endgame_lines(geometry, rng, count)])


# --- host references ----------------------------------------------------------------------------------


def undrawn_side_counts(geometry, lines):
    return (~lines[geometry.box_lines]).sum(-1)


def reference_components(geometry, lines):
    """(label [B], chain lengths sorted, loop lengths sorted, is simple endgame) by breadth-first search."""
    sides = undrawn_side_counts(geometry, lines)
    unclaimed = sides > 0
    label = -np.ones(geometry.num_boxes, int)
    chain_lengths, loop_lengths = [], []
    for start in range(geometry.num_boxes):
        if not unclaimed[start] or label[start] >= 0:
            continue
        members, frontier, ground = [start], [start], False
        label[start] = start
        while frontier:
            box = frontier.pop()
            for side, line in enumerate(geometry.box_lines[box]):
                if lines[line]:
                    continue
                other = geometry.box_neighbours[box, side]
                if other < 0:
                    ground = True
                elif label[other] < 0:
                    label[other] = start
                    members.append(other)
                    frontier.append(other)
        (chain_lengths if ground else loop_lengths).append(len(members))
    simple = bool(unclaimed.any() and (sides[unclaimed] == 2).all())
    return label, sorted(chain_lengths), sorted(loop_lengths), simple


def reference_capture_choice(geometry, lines):
    """(has_capture, forced, take, mask [L]) by walking each capturable box's chain (forced module docstring)."""
    sides = undrawn_side_counts(geometry, lines)

    def other_side(box, entry_line):
        """The undrawn side of a two-sided box other than ``entry_line``, and the box across it (-1: edge)."""
        for side, line in enumerate(geometry.box_lines[box]):
            if not lines[line] and line != entry_line:
                return line, geometry.box_neighbours[box, side]
        raise AssertionError("not two-sided")

    forced_boxes, options = [], set()
    capturable = [b for b in range(geometry.num_boxes) if sides[b] == 1]
    for box in capturable:
        side = next(s for s, line in enumerate(geometry.box_lines[box]) if not lines[line])
        take, second = geometry.box_lines[box, side], geometry.box_neighbours[box, side]
        if second < 0 or sides[second] != 2:
            forced_boxes.append(box)
            continue
        handout, third = other_side(second, take)
        goes_on = False
        if third >= 0 and sides[third] == 2:
            _, fourth = other_side(third, handout)
            goes_on = not (fourth >= 0 and sides[fourth] == 1)
        if goes_on:
            forced_boxes.append(box)
        else:
            options.update([take, handout])
    mask = np.zeros(geometry.num_lines, bool)
    if not capturable:
        return False, False, None, mask
    chosen = min(forced_boxes) if forced_boxes else min(capturable)
    take = next(line for line in geometry.box_lines[chosen] if not lines[line])
    if forced_boxes:
        mask[take] = True
    else:
        mask[sorted(options)] = True
    return True, bool(forced_boxes), take, mask


# --- bit boards ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rows,cols", BOARDS)
def test_bit_boards_match_the_geometry_tables(rows, cols):
    g = board_geometry(rows, cols)
    lines = random_lines(g, seed=rows * 10 + cols, count=64)
    states = states_from_lines(g, lines)
    flags = np.random.default_rng(0).random((len(lines), g.num_boxes)) < 0.5

    def evaluate(state, flags):
        sets = chains.box_sets(g, state)
        board = chains.pack(g, flags)
        one, two = chains.side_classes(sets.undrawn)
        return (chains.unpack(g, board), jnp.stack([chains.unpack(g, chains.across(g, board, d)) for d in range(4)]),
                jnp.stack([chains.unpack(g, plane) for plane in sets.undrawn]), chains.unpack(g, sets.unclaimed),
                chains.lines_of_sides(g, sets.undrawn), chains.unpack(g, one), chains.unpack(g, two),
                chains.unpack(g, chains.lowest_bit(board)), chains.count_bits(board))

    unpacked, neighbours_in, undrawn, unclaimed, undrawn_lines, one, two, lowest, count = jax.jit(
        jax.vmap(evaluate))(states, jnp.asarray(flags))
    assert chains.bit_tables(g).words == -(-g.num_boxes // 32)
    np.testing.assert_array_equal(unpacked, flags)
    neighbour = g.box_neighbours  # [B, 4]
    expected = np.where(neighbour >= 0, flags[:, np.maximum(neighbour, 0)], False)  # [N, B, 4]
    np.testing.assert_array_equal(np.moveaxis(np.asarray(neighbours_in), 1, 2), expected)
    np.testing.assert_array_equal(np.moveaxis(np.asarray(undrawn), 1, 2), ~lines[:, g.box_lines])
    np.testing.assert_array_equal(unclaimed, np.asarray(states.box_owner) < 0)
    np.testing.assert_array_equal(undrawn_lines, ~lines)
    counts = (~lines[:, g.box_lines]).sum(-1)
    np.testing.assert_array_equal(one, counts == 1)
    np.testing.assert_array_equal(two, counts == 2)
    lowest, some = np.asarray(lowest), flags.any(1)
    assert (lowest.sum(1) == some).all()
    np.testing.assert_array_equal(lowest.argmax(1)[some], flags.argmax(1)[some])
    np.testing.assert_array_equal(count, flags.sum(1))


# --- components ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def analyser(rows, cols):
    g = board_geometry(rows, cols)
    return batched(jax.jit(jax.vmap(lambda s: chains.analyse(g, s))), 512)


@pytest.mark.parametrize("rows,cols", BOARDS)
def test_component_analysis_equals_breadth_first_search(rows, cols):
    g = board_geometry(rows, cols)
    lines = random_lines(g, seed=rows * 10 + cols)
    comps = analyser(rows, cols)(states_from_lines(g, lines))
    simple_seen = loops_seen = 0
    for i, position in enumerate(lines):
        label, chain_lengths, loop_lengths, simple = reference_components(g, position)
        np.testing.assert_array_equal(comps.label[i], label)
        assert bool(comps.is_simple_endgame[i]) == simple
        if not simple:
            continue
        simple_seen += 1
        loops_seen += bool(loop_lengths)
        # The bit-board walk's lengths, and the labels' own sizes, against the search.
        chains_at = np.asarray(comps.chain_lengths[i])
        assert chains_at[: len(chain_lengths)].tolist() == chain_lengths and not chains_at[len(chain_lengths):].any()
        loops_at = np.asarray(comps.loop_lengths[i])
        assert loops_at[: len(loop_lengths)].tolist() == loop_lengths and not loops_at[len(loop_lengths):].any()
        assert int(comps.num_chains[i]) == len(chain_lengths) and int(comps.num_loops[i]) == len(loop_lengths)
        sizes = comps.size[i]
        assert sorted(sizes[comps.is_chain[i]].tolist()) == chain_lengths
        assert sorted(sizes[comps.is_loop[i]].tolist()) == loop_lengths
        long_chains = [a for a in chain_lengths if a >= 3]
        assert comps.long_chain_lengths[i][: len(long_chains)].tolist() == long_chains
        assert comps.num_short_chains[i].tolist() == [chain_lengths.count(1), chain_lengths.count(2)]
    assert simple_seen >= 100 and (loops_seen >= 20 or min(rows, cols) < 2)


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 3)])
def test_box_valences_count_each_unclaimed_boxs_undrawn_sides(rows, cols):
    """What the strings-and-coins networks read of each box: its undrawn sides, 0 once it is claimed (claimed
    here: a random share of the boxes, whatever their sides, so the two inputs are read apart)."""
    g = board_geometry(rows, cols)
    lines = random_lines(g, seed=rows * 10 + cols, count=64)
    claimed = np.random.default_rng(1).random((len(lines), g.num_boxes)) < 0.3
    valences = np.asarray(jax.jit(jax.vmap(lambda l, c: chains.box_valences(g, l, c)))(lines, claimed))
    for position, owned, valence in zip(lines, claimed, valences):
        np.testing.assert_array_equal(valence, np.where(owned, 0, undrawn_side_counts(g, position)))
    assert valences.dtype == np.int32 and set(np.unique(valences)) == {0, 1, 2, 3, 4}


# --- the forced-capture rule --------------------------------------------------------------------------


@pytest.mark.parametrize("rows,cols", BOARDS)
def test_capture_choice_equals_walking_each_chain(rows, cols):
    g = board_geometry(rows, cols)
    lines = random_lines(g, seed=100 + rows * 10 + cols)
    states = states_from_lines(g, lines)
    choice = batched(jax.jit(jax.vmap(lambda s: forced.capture_choice(g, s))), 512)(states)
    running = ~np.asarray(states.terminated)
    kinds = set()
    for i, position in enumerate(lines):
        has_capture, is_forced, take, mask = reference_capture_choice(g, position)
        has_capture &= bool(running[i])
        assert bool(choice.has_capture[i]) == has_capture
        if has_capture:
            assert bool(choice.forced[i]) == is_forced
            assert int(choice.take[i]) == take
            np.testing.assert_array_equal(choice.mask[i], mask)
            kinds.add(is_forced)
    assert kinds == {True, False} or g.num_boxes == 1  # on one box every capture is forced


@pytest.mark.parametrize("rows,cols", [(2, 3), (3, 3), (5, 5), (6, 6)])
@pytest.mark.parametrize("early", [False, True])
def test_forced_moves_equal_stepping_each_capture(rows, cols, early):
    """The bit-board macro step (one state rebuilt at the end) against ``env.step`` of each forced capture."""
    g = board_geometry(rows, cols)
    lines = random_lines(g, seed=200 + rows * 10 + cols, count=256)
    states = states_from_lines(g, lines)

    def stepped(state):
        def cond(carry):
            state, count = carry
            choice = forced.capture_choice(g, state)
            return forced.is_forced(choice) & (count < g.num_boxes)

        def body(carry):
            state, count = carry
            return env_lib.step(g, state, forced.capture_choice(g, state).take, early), count + 1

        state, count = jax.lax.while_loop(cond, body, (state, jnp.int32(0)))
        return state, count, forced.capture_choice(g, state)

    def macro(state):
        return forced.play_forced_moves_with_choice(env_lib.Env.of(g, early), state)

    want = jax.jit(jax.vmap(stepped))(states)
    got = jax.jit(jax.vmap(macro))(states)
    for a, b in zip(jax.tree_util.tree_leaves(want[:2]), jax.tree_util.tree_leaves(got[:2])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    has_capture = np.asarray(want[2].has_capture)
    np.testing.assert_array_equal(has_capture, np.asarray(got[2].has_capture))
    for field in ("forced", "take", "mask"):
        np.testing.assert_array_equal(np.asarray(getattr(want[2], field))[has_capture],
                                      np.asarray(getattr(got[2], field))[has_capture])
    assert np.asarray(want[1]).max() >= 3
