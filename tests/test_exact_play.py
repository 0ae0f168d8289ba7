"""Exact play where it is cheap (``dabjax.evaluation.exact_play``, the ``+exact`` agent suffix)."""

import itertools
import re

import jax
import numpy as np
import pytest

from dabjax.evaluation import agent_registry, arena, exact_play
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.game.host_agent import HostAgent
from dabjax.solvers import labelled, retrograde
from dabjax.solvers.position_solver import MAX_SOLVER_LINES, PositionSolver

G22 = board_geometry(2, 2)
G33 = board_geometry(3, 3)
G44 = board_geometry(4, 4)


class FirstLegalLine(HostAgent):
    """A deterministic fallback: the lowest undrawn line."""

    name = "first-legal"

    def __init__(self):
        self.calls = 0

    def act(self, geometry, rng, states, histories=None):
        self.calls += 1
        return np.argmax(~np.asarray(states.lines, bool), axis=1).astype(np.int32)


def states_of(geometry, lines: np.ndarray) -> env_lib.State:
    """Positions with the given drawn lines (bool ``[N, L]``), NumPy leaves; owners and scores do not matter to
    a best-margin move (values count future boxes only)."""
    count = lines.shape[0]
    return env_lib.State(
        lines=lines, box_owner=np.full((count, geometry.num_boxes), -1, np.int8), scores=np.zeros((count, 2), np.int32),
        current_player=np.zeros(count, np.int32), num_moves=lines.sum(1).astype(np.int32),
        terminated=lines.all(1), truncated=np.zeros(count, bool), legal_action_mask=~lines,
        rewards=np.zeros((count, 2), np.float32))


def every_2x2_position() -> np.ndarray:
    return np.array(list(itertools.product([False, True], repeat=G22.num_lines)))


@pytest.mark.parametrize("table_max_lines", [labelled.TABLE_LABEL_MAX_LINES, 0], ids=["table", "position-solver"])
def test_exact_moves_agree_with_the_table_at_every_2x2_position(table_max_lines):
    lines = every_2x2_position()
    fallback = FirstLegalLine()
    agent = exact_play.ExactAgent(fallback, 5.0, max_undrawn=None, table_max_lines=table_max_lines)
    moves = agent.act(G22, np.random.default_rng(0), states_of(G22, lines))
    _, optimal = retrograde.optimal_moves(G22, retrograde.solve_table(G22), lines)
    running = ~lines.all(1)
    assert optimal[np.flatnonzero(running), moves[running]].all()
    assert fallback.calls == 0
    expected = "table" if table_max_lines else "solver"
    assert {agent.last_sources[i] for i in np.flatnonzero(running)} == {expected}
    assert all(agent.last_sources[i] == "" for i in np.flatnonzero(~running))


def test_a_solve_out_of_time_falls_back_says_so_and_lowers_the_limit():
    rng = np.random.default_rng(1)
    lines = np.zeros((3, G44.num_lines), bool)
    lines[2, rng.permutation(G44.num_lines)[:36]] = True  # 4 undrawn lines
    fallback = FirstLegalLine()
    agent = exact_play.ExactAgent(fallback, 1e-9, max_undrawn=40)  # no budget at all: every solve times out
    moves = agent.act(G44, rng, states_of(G44, lines))
    assert agent.last_sources == ["timeout", "timeout", "timeout"]
    np.testing.assert_array_equal(moves, np.argmax(~lines, axis=1))  # the fallback's moves: lowest undrawn lines
    assert agent.max_undrawn == 39  # two timeouts on the empty board (40 undrawn), no solve there
    assert fallback.calls == 1  # one batched call for all three
    # A position above the limit is not even tried: straight to the fallback.
    agent.act(G44, rng, states_of(G44, lines[:1]))
    assert agent.last_sources == ["fallback"]
    assert agent.counts == {"timeout": 3, "fallback": 1}
    # With a budget, the small position is proved.
    solved = exact_play.ExactAgent(fallback, 5.0)
    solved.act(G44, rng, states_of(G44, lines[2:]))
    assert solved.last_sources == ["solver"]
    assert exact_play.ExactAgent(fallback).max_undrawn == "auto"
    assert exact_play.start_max_undrawn(G44) == 30 and exact_play.start_max_undrawn(board_geometry(5, 5)) == 38


def test_exact_spec_parsing_and_errors():
    assert agent_registry.parse_exact_spec("level1") is None
    assert agent_registry.parse_exact_spec("pretrained:5x5+exact") == ("pretrained:5x5", exact_play.DEFAULT_SECONDS)
    assert agent_registry.parse_exact_spec("ckpt:runs/a:64+exact:0.5") == ("ckpt:runs/a:64", 0.5)
    agent = agent_registry.make_agent("level2+exact:3", G33)
    assert isinstance(agent, exact_play.ExactAgent) and agent.seconds == 3.0 and agent.name == "level2+exact:3"
    for bad in ("+exact", "level1+exact:0", "level1+exact:soon", "level1+exactly"):
        with pytest.raises(ValueError, match="exact"):
            agent_registry.make_agent(bad, G33)
    with pytest.raises(ValueError, match="unknown agent"):
        agent_registry.make_agent("nobody+exact", G33)


def test_solver_agents_refuse_a_board_too_large_for_the_solver_naming_it_and_the_limit():
    too_large = board_geometry(8, 8)
    assert too_large.num_lines == 144 > MAX_SOLVER_LINES
    refusal = f"the position solver takes boards of at most {MAX_SOLVER_LINES} lines, and 8x8 has 144"
    for spec in ("level1+exact", "level2+exact:5", "solver"):
        with pytest.raises(ValueError, match=re.escape(f"agent {spec!r}: {refusal}")):
            agent_registry.make_agent(spec, too_large)
    with pytest.raises(ValueError, match=re.escape(refusal)):
        exact_play.analyse_position(too_large, np.zeros(too_large.num_lines, bool), 0, 1.0)
    largest = board_geometry(7, 8)  # 127 lines: taken
    assert largest.num_lines <= MAX_SOLVER_LINES
    assert isinstance(agent_registry.make_agent("level1+exact", largest), exact_play.ExactAgent)
    assert isinstance(agent_registry.make_agent("solver", largest), exact_play.ExactAgent)


def test_exact_over_a_jax_agent_plays_a_match_with_solved_and_fallback_moves():
    # The position solver on 3x3 (table switched off) for positions of at most 8 undrawn lines, level 1 (a jax
    # agent, on padded subsets) elsewhere.
    exact = exact_play.ExactAgent(agent_registry.make_agent("level1", G33), 5.0, name="level1+exact",
                                  max_undrawn=8, adaptive=False, table_max_lines=0)
    games = arena.play_match(G33, exact, agent_registry.make_agent("level1", G33), jax.random.PRNGKey(0), 8)
    assert games.scores.sum() == 8 * G33.num_boxes
    assert exact.counts["solver"] > 0 and exact.counts["fallback"] > 0 and exact.counts["timeout"] == 0


def test_analyse_position_gives_every_lines_final_margin_from_the_solver_as_the_table():
    table = retrograde.solve_table(G22)
    rng = np.random.default_rng(2)
    for lines in every_2x2_position()[rng.choice(4096, 40, replace=False)]:
        if lines.all():
            continue
        margin = int(rng.integers(-2, 3))
        solved = exact_play.analyse_position(G22, lines, margin, 5.0, table_max_lines=0)
        looked_up = exact_play.analyse_position(G22, lines, margin, 5.0)
        assert solved.finished and (solved.source, looked_up.source) == ("solver", "table")
        values = retrograde.move_values(G22, table, lines).astype(int)
        legal = ~lines
        np.testing.assert_array_equal(solved.final_margins[legal], margin + values[legal])
        for result in (solved, looked_up):
            np.testing.assert_array_equal(result.final_margins, solved.final_margins)
            np.testing.assert_array_equal(result.best_margin, legal & (values == values[legal].max()))
            signs = np.sign(margin + values)
            np.testing.assert_array_equal(result.best_result, legal & (signs == signs[legal].max()))
    late = np.ones(G44.num_lines, bool)
    late[:3] = False
    assert exact_play.analyse_position(G44, np.zeros(G44.num_lines, bool), 0, 1e-6).finished is False
    assert exact_play.analyse_position(G44, late, 0, 5.0).source == "solver"


class CountingSolver(PositionSolver):
    """A position solver that counts its solves."""

    def __init__(self, geometry):
        super().__init__(geometry, table_bits=10)
        self.solves = 0

    def solve(self, *args, **kwargs):
        self.solves += 1
        return super().solve(*args, **kwargs)


def test_analyse_position_with_its_own_solver_makes_no_shared_one(monkeypatch):
    def no_shared_solver(geometry):
        raise AssertionError("the shared 88 MB solver was made")

    monkeypatch.setattr(exact_play, "ready_solver", no_shared_solver)
    lines = np.zeros(G22.num_lines, bool)
    lines[[0, 2, 6]] = True  # three sides of box (0, 0)
    own = CountingSolver(G22)
    analysis = exact_play.analyse_position(G22, lines, 0, 5.0, own, table_max_lines=0)
    values = retrograde.move_values(G22, retrograde.solve_table(G22), lines).astype(int)
    assert analysis.finished and analysis.source == "solver" and own.solves == 1
    np.testing.assert_array_equal(analysis.final_margins[~lines], values[~lines])
    with pytest.raises(AssertionError, match="shared 88 MB solver"):  # without a solver of its own, it would
        exact_play.analyse_position(G22, lines, 0, 5.0, table_max_lines=0)
