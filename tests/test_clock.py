"""Agents on a clock (``SPEC@Ns``, ``dabjax.evaluation.clock``): the spec, the proven moves, the search on the rest,
and moves within their budget. Tiny boards and a tiny network, so that the ladder compiles little."""

from __future__ import annotations

import collections
import json
import time

import jax
import numpy as np
import pytest
from conftest import states_from_lines

from dabjax.baselines.alphabeta import AlphaBetaAgent
from dabjax.evaluation import agent_registry, arena, clock, exact_play
from dabjax.game import env as env_lib
from dabjax.game import forced
from dabjax.game.geometry import board_geometry
from dabjax.solvers import position_solver, retrograde

SECONDS = 0.05  # a move's budget in these tests: a short ladder (few compiles), still far above a tiny search


@pytest.fixture(scope="module")
def loaded_2x3(tiny_run):
    """The tiny run's graph network (trained "on 2x2"), on 2x3: 17 lines, a table to check against."""
    return agent_registry.load_network(f"ckpt:{tiny_run}", board_geometry(2, 3))[0]


@pytest.fixture(scope="module")
def clock_2x3(loaded_2x3):
    """A clock agent on 2x3 that proves with the position solver (not the table), prepared once."""
    geometry = board_geometry(2, 3)
    agent = clock.ClockAgent(loaded_2x3, geometry, SECONDS, "tiny@0.05s", table_max_lines=0, ladder_rungs=2,
                             solver=position_solver.PositionSolver(geometry, table_bits=12))
    agent.prepare()
    return agent


def random_states(geometry, count: int, seed: int):
    rng = np.random.default_rng(seed)
    lines = np.zeros((count, geometry.num_lines), bool)
    for i, drawn in enumerate(rng.integers(0, geometry.num_lines - 1, size=count)):
        lines[i, rng.permutation(geometry.num_lines)[:drawn]] = True
    return env_lib.to_numpy(states_from_lines(geometry, lines, seed))


def test_clock_specs_parse_and_bad_ones_name_the_spec():
    spec = agent_registry.parse_agent_spec("pretrained:5x5:64@2s")
    assert (spec.kind, spec.argument, spec.clock_seconds, spec.without_exact) == ("pretrained", "5x5:64", 2.0,
                                                                                   "pretrained:5x5:64")
    assert agent_registry.parse_agent_spec("ckpt:runs/a@b@0.5").clock_seconds == 0.5  # the last @ is the clock's
    assert agent_registry.parse_agent_spec("ckpt:runs/a@b@0.5").argument == "runs/a@b"
    for bad, message in [("pretrained:5x5@0s", "seconds a move > 0"), ("pretrained:5x5@fast", "e.g."),
                         ("pretrained:5x5+exact:2@2s", "drop \\+exact")]:
        with pytest.raises(ValueError, match=message):
            agent_registry.parse_agent_spec(bad)
    with pytest.raises(ValueError, match="'level2@1s'.*does not play on a clock"):
        agent_registry.make_agent("level2@1s", board_geometry(2, 2))
    agent = agent_registry.make_agent("alphabeta:3@0.25s", board_geometry(2, 2))
    assert isinstance(agent, AlphaBetaAgent) and agent.seconds == 0.25 and agent.name == "alphabeta:3@0.25s"


def test_the_ladder_doubles_the_least_simulations_and_fits_the_budget(clock_2x3):
    rungs = sorted(clock_2x3.search_seconds)
    assert rungs[0] == clock_2x3.least_simulations == 4  # the tiny run's own count
    assert len(rungs) == 2 and all(r % 4 == 0 and (r // 4) & (r // 4 - 1) == 0 for r in rungs)
    assert clock_2x3.compile_seconds > 0
    # The largest rung fits the planned budget (as timed from the least), with room for one more only past the top.
    assert clock_2x3._simulations_for(clock.PLANNED_SHARE * SECONDS) == rungs[-1]
    assert clock_2x3._simulations_for(0.0) == rungs[0]


def test_a_least_count_at_the_ladders_top_is_still_timed(loaded_2x3, clock_2x3, monkeypatch):
    """A first rung with no doubling under the ladder's top (e.g. a spec's own large count) is the whole ladder,
    timed, and a move plays on it."""
    monkeypatch.setattr(clock, "MOST_SIMULATIONS", clock_2x3.least_simulations)
    geometry = board_geometry(2, 3)
    agent = clock.ClockAgent(loaded_2x3, geometry, SECONDS, "tiny@0.05s", table_max_lines=0, ladder_rungs=2,
                             solver=clock_2x3.solver)
    agent.prepare()
    assert list(agent.search_seconds) == [clock_2x3.least_simulations]
    states = random_states(geometry, 2, seed=3)
    moves = agent.act(geometry, None, states)
    assert all(not states.lines[i, m] for i, m in enumerate(moves))


def test_a_move_with_no_time_for_a_proof_skips_it_and_counts_no_timeout(clock_2x3, monkeypatch):
    """Where the ladder's first rung alone fills the planned time, the move does not try its proof: a proof of no
    seconds would count as a timeout and lower the reach for want of time, not of proving."""
    geometry = board_geometry(2, 3)
    monkeypatch.setattr(clock_2x3, "search_seconds", {clock_2x3.least_simulations: SECONDS})
    monkeypatch.setattr(clock_2x3, "_follow", lambda simulations, seconds: None)  # the rung's time stays
    monkeypatch.setattr(clock_2x3, "_timeouts", collections.Counter())
    monkeypatch.setattr(clock_2x3, "reach", 99)  # within reach: the solver's share is the largest
    first = len(clock_2x3.records)
    clock_2x3.act(geometry, None, random_states(geometry, 4, seed=11))
    assert len(clock_2x3.records) > first and not clock_2x3._timeouts
    assert all(r.solver_seconds == 0.0 and r.proven_result is None for r in clock_2x3.records[first:])


def test_proven_moves_keep_the_best_result_and_are_the_networks_favourites(clock_2x3):
    geometry = board_geometry(2, 3)
    states = random_states(geometry, 24, seed=5)
    table = exact_play.table(geometry)
    clock_2x3.reach = 99  # every position within reach: the solver answers all of them
    first = len(clock_2x3.records)
    moves = clock_2x3.act(geometry, np.random.default_rng(0), states)
    logits, _ = jax.device_get(clock.compiled_forward(clock_2x3.loaded.network_config, geometry)(
        clock_2x3.loaded.params, jax.tree_util.tree_map(np.asarray, states)))
    values = retrograde.move_values(geometry, table, states.lines)
    running = ~states.terminated
    for i in np.flatnonzero(running):
        legal = ~states.lines[i]
        best = position_solver.best_result_moves(values[i], legal, int(states.margin[i]))
        assert best[moves[i]], i
        record = clock_2x3.records[first + list(np.flatnonzero(running)).index(i)]
        result = np.sign(int(states.margin[i]) + values[i][legal].max())
        assert record.proven_result == result
        if result >= 0:  # the network's favourite among the lines that keep the result
            assert record.source == "solver"
            assert moves[i] == np.flatnonzero(best)[np.argmax(logits[i][best])]
    assert clock_2x3.last_sources.count("") == (~running).sum()


def test_refuted_lines_leave_the_search_and_no_move_compiles_on_the_clock(clock_2x3, loaded_2x3):
    geometry = board_geometry(2, 3)
    states = random_states(geometry, 6, seed=9)
    compiled = [clock._compiled_search(loaded_2x3.network_config, clock_2x3._config(s), clock_2x3.env)
                for s in clock_2x3.search_seconds]
    sizes = [c._cache_size() for c in compiled]
    clock_2x3.reach = -99  # nothing within the solver's reach: every move searched
    clock_2x3.act(geometry, np.random.default_rng(1), states)
    assert [c._cache_size() for c in compiled] == sizes
    assert {r.source for r in clock_2x3.records[-6:] if r.undrawn} <= {"search", "tree"}
    candidates = random_states(geometry, 20, seed=3)
    for i in range(20):  # a position with a choice: three lines or more worth searching
        one = jax.tree_util.tree_map(lambda x: np.asarray(x)[i:i + 1], candidates)
        searchable = np.flatnonzero(np.asarray(forced.searchable_mask(
            geometry, jax.tree_util.tree_map(lambda x: x[0], one))))
        if searchable.size >= 3:
            break
    assert searchable.size >= 3
    for kept in searchable[:3]:  # a root mask holding one searchable line: the search plays it
        mask = np.zeros((1, geometry.num_lines), bool)
        mask[0, kept] = True
        assert clock_2x3._timed_search(clock_2x3.least_simulations, jax.tree_util.tree_map(np.asarray, one),
                                       mask)[0] == kept


def test_a_root_the_tree_proves_plays_a_move_that_keeps_its_result(clock_2x3):
    """Late 2x3 positions, searched (no solver): the search's proven bounds settle many roots, and there the move
    keeps the exact result."""
    geometry = board_geometry(2, 3)
    rng = np.random.default_rng(4)
    lines = np.zeros((24, geometry.num_lines), bool)
    for row in lines:
        row[rng.permutation(geometry.num_lines)[:rng.integers(8, 11)]] = True
    states = env_lib.to_numpy(states_from_lines(geometry, lines, 4))
    clock_2x3.reach = -99
    moves = clock_2x3.act(geometry, np.random.default_rng(0), states)
    records = clock_2x3.records[-len(lines):]
    values = retrograde.move_values(geometry, exact_play.table(geometry), states.lines)
    tree = [i for i, r in enumerate(records) if r.source == "tree"]
    assert len(tree) >= 4
    for i in tree:
        keeps = position_solver.best_result_moves(values[i], ~states.lines[i], int(states.margin[i]))
        assert keeps[moves[i]]


def test_root_proofs_that_never_finish_beyond_the_reach_are_given_up(clock_2x3, monkeypatch):
    """Beyond the reach, an undrawn count whose proofs timed out ``GIVE_UP_TIMEOUTS`` times without one proof, and
    every count above it, get no root proof; the counts below it still do, and when the reach rises past its highest,
    the counts above it are tried afresh (not when it only comes back to it)."""
    geometry = board_geometry(2, 3)
    monkeypatch.setattr(clock_2x3, "reach", 5)
    monkeypatch.setattr(clock_2x3, "highest_reach", 5)
    monkeypatch.setattr(clock_2x3, "_timeouts", collections.Counter({8: clock.GIVE_UP_TIMEOUTS}))
    monkeypatch.setattr(clock_2x3, "_proved", collections.Counter())
    rng = np.random.default_rng(3)
    lines = np.zeros((6, geometry.num_lines), bool)
    for i, undrawn in enumerate((9, 8, 9, 6, 7, 6)):  # a proof within the reach may raise it: given up first
        lines[i, rng.permutation(geometry.num_lines)[:geometry.num_lines - undrawn]] = True
    states = env_lib.to_numpy(states_from_lines(geometry, lines, 3))
    first = len(clock_2x3.records)
    clock_2x3.act(geometry, np.random.default_rng(0), states)
    assert len(clock_2x3.records) - first == 6
    for record in clock_2x3.records[first:]:
        tried = record.solver_seconds > 0
        assert tried == (record.undrawn < 8), record
    if clock_2x3.reach > 5:  # a quick proof beyond the reach raised it: the counts above it are tried afresh
        assert not clock_2x3._given_up(9) and clock_2x3._timeouts[8] == 0
    monkeypatch.setattr(clock_2x3, "reach", 5)
    monkeypatch.setattr(clock_2x3, "_timeouts", collections.Counter({8: clock.GIVE_UP_TIMEOUTS}))
    monkeypatch.setattr(clock_2x3, "_proved", collections.Counter({8: 1}))  # one proof there: tried
    assert clock_2x3._given_up(9) is False

    class QuickProof:  # a proof that finished at once: it raises the reach to its count
        result, seconds, move = 1, 0.0, 0

    monkeypatch.setattr(clock_2x3.solver, "prove_result", lambda *args, **kwargs: QuickProof())
    monkeypatch.setattr(clock_2x3, "highest_reach", 7)  # the reach was at 7 before it fell to 5
    monkeypatch.setattr(clock_2x3, "_timeouts", collections.Counter({9: clock.GIVE_UP_TIMEOUTS}))
    monkeypatch.setattr(clock_2x3, "_proved", collections.Counter())
    monkeypatch.setattr(clock_2x3, "_skipped", collections.Counter())
    skips = [clock_2x3._skips_proof(9) for _ in range(2 * clock.RETRY_EVERY)]
    assert skips.count(False) == 2 and not skips[clock.RETRY_EVERY - 1]  # given up, yet tried now and then
    order = np.arange(geometry.num_lines)
    clock_2x3._prove(lines[0], 0, order, 0.0, 7, 1.0)
    assert clock_2x3.reach == 7 and clock_2x3._given_up(9)  # back to its highest: still given up
    clock_2x3._prove(lines[0], 0, order, 0.0, 8, 1.0)
    assert clock_2x3.reach == clock_2x3.highest_reach == 8 and not clock_2x3._given_up(9)  # past it: tried afresh


def test_promising_leaves_are_proven_within_the_move_and_the_final_search_knows_them(clock_2x3, monkeypatch):
    """Beyond the root's reach, a first search's most visited leaves within it are proven (exactly: the table
    agrees) and the final search is given them; without ``leaf_proofs`` a move is one search."""
    geometry = board_geometry(2, 3)
    table = exact_play.table(geometry)
    rng = np.random.default_rng(5)
    lines = np.zeros((12, geometry.num_lines), bool)
    for row in lines:
        row[rng.permutation(geometry.num_lines)[:rng.integers(7, 9)]] = True
    states = env_lib.to_numpy(states_from_lines(geometry, lines, 5))
    monkeypatch.setattr(clock, "solver_share", lambda undrawn, reach: 0.0)  # no proof at the root
    clock_2x3.reach = 8  # leaves a line or two below the roots
    one = jax.tree_util.tree_map(lambda x: np.asarray(x)[:1], states)
    frontier = clock_2x3._timed_search(max(clock_2x3.search_seconds), one, np.ones((1, geometry.num_lines), bool),
                                       max_undrawn=clock_2x3.reach)[3]
    known, count = clock_2x3._prove_leaves(frontier, time.perf_counter() + 1.0)
    assert count > 0 and int(np.asarray(known.valid).sum()) == count
    rows = np.flatnonzero(np.asarray(known.valid))
    future = table[retrograde.position_keys(np.asarray(known.lines)[rows])].astype(np.int64)
    np.testing.assert_array_equal(np.asarray(known.result)[rows], np.sign(np.asarray(known.margin)[rows] + future))
    # A first move stages these NumPy states' arrays (small eager compiles, not the search's): outside the timing.
    clock_2x3.act(geometry, np.random.default_rng(0), jax.tree_util.tree_map(lambda x: x[:1], states))
    searches = []  # (the move's index, simulations, the known results it is given) of each search
    timed_search = clock_2x3._timed_search

    def spy(simulations, state, root_mask, known=None, max_undrawn=0):
        searches.append((len(clock_2x3.records), simulations, known))
        return timed_search(simulations, state, root_mask, known, max_undrawn)

    monkeypatch.setattr(clock_2x3, "_timed_search", spy)
    first = len(clock_2x3.records)
    clock_2x3.act(geometry, np.random.default_rng(0), states)
    records = clock_2x3.records[first:]
    proven = sum(r.leaves_proven for r in records)
    assert proven > 0 and f"{sum(r.leaves_proven for r in clock_2x3.records)} leaves proven" in clock_2x3.summary()
    given = [int(np.asarray(k.valid).sum()) for _, _, k in searches if k is not None]
    assert sum(given) == proven  # every proven leaf reaches a final search, and nothing else does
    # One search a move, and a second where leaves were proven, or, without them, where it affords more
    # simulations than the first.
    for index, record in enumerate(records, start=first):
        move_searches = [(simulations, known) for at, simulations, known in searches if at == index]
        assert 1 <= len(move_searches) <= 2
        if record.leaves_proven:
            assert len(move_searches) == 2 and move_searches[1][1] is not None
        elif len(move_searches) == 2:
            assert move_searches[1][1] is None and move_searches[1][0] > move_searches[0][0]
    assert {r.source for r in records} <= {"search", "tree"}
    assert max(r.seconds for r in records) <= 1.5 * SECONDS
    clock_2x3.leaf_proofs = False
    try:
        searches.clear()
        first = len(clock_2x3.records)
        clock_2x3.act(geometry, np.random.default_rng(0), states)
        assert len(searches) == len(clock_2x3.records) - first  # one search a move
        assert all(known is None for _, _, known in searches)
        assert all(r.leaves_proven == 0 and r.leaf_seconds == 0 for r in clock_2x3.records[first:])
    finally:
        clock_2x3.leaf_proofs = True


def test_a_draw_floor_is_kept_whatever_the_search_plays(clock_2x3, monkeypatch):
    """A proof that found a line keeping a draw but did not settle the win: the search's move is played where it
    keeps the draw too, else the proof's line (source "floor")."""
    geometry = board_geometry(2, 3)
    table = exact_play.table(geometry)
    states = random_states(geometry, 40, seed=11)
    values = retrograde.move_values(geometry, table, states.lines).astype(int)
    cases = 0
    for i in np.flatnonzero(~states.terminated):
        legal = ~states.lines[i]
        margin = int(states.margin[i])
        keeps = legal & (np.sign(margin + values[i]) >= 0)
        gives_up = legal & ~keeps
        if not (keeps.sum() >= 2 and gives_up.any()):
            continue
        floor_move, other_keeper = np.flatnonzero(keeps)[:2]
        one = jax.tree_util.tree_map(lambda x: np.asarray(x)[i:i + 1], states)
        proof = position_solver.ResultProof(None, -1, np.zeros(geometry.num_lines, bool), margin, 0, 0.0, None, 0,
                                            int(floor_move))
        monkeypatch.setattr(clock_2x3.solver, "prove_result", lambda *args, **kwargs: proof)
        monkeypatch.setattr(clock_2x3, "reach", 99)
        monkeypatch.setattr(clock_2x3, "seconds", 5.0)  # the look's time is the budget's rest: not a loaded machine's
        for searched, played, source in ((int(np.flatnonzero(gives_up)[0]), floor_move, "floor"),
                                         (int(other_keeper), other_keeper, "search")):
            monkeypatch.setattr(clock_2x3, "_search", lambda *args, searched=searched: searched)
            assert clock_2x3.act(geometry, np.random.default_rng(0), one)[0] == played
            assert clock_2x3.records[-1].source == source and clock_2x3.records[-1].floor == 0
        cases += 1
    assert cases >= 3


def test_moves_stay_within_the_budget_in_a_match(clock_2x3):
    geometry = board_geometry(2, 3)
    clock_2x3.reach = clock.START_REACH.get(geometry.num_lines, clock.DEFAULT_START_REACH)
    first = len(clock_2x3.records)
    games = arena.play_match(geometry, clock_2x3, agent_registry.make_agent("level2", geometry),
                             jax.random.PRNGKey(0), 2)
    assert games.scores.sum(1).tolist() == [6, 6]
    seconds = clock_2x3.move_seconds[first:]
    assert seconds.size > 0 and seconds.max() <= 1.5 * SECONDS  # tests run beside others: a loose bound
    assert "slowest" in clock_2x3.summary() and "compiled in" in clock_2x3.summary()


def test_a_small_board_reads_the_table(tiny_run):
    geometry = board_geometry(2, 2)
    agent = agent_registry.make_agent(f"ckpt:{tiny_run}@{SECONDS}s", geometry)
    assert isinstance(agent, clock.ClockAgent) and agent.name == f"ckpt:{tiny_run}@{SECONDS}s"
    states = random_states(geometry, 12, seed=2)
    moves = agent.act(geometry, np.random.default_rng(0), states)
    values = retrograde.move_values(geometry, exact_play.table(geometry), states.lines)
    for i in np.flatnonzero(~states.terminated):
        assert position_solver.best_result_moves(values[i], ~states.lines[i], int(states.margin[i]))[moves[i]]
    assert set(agent.counts) == {"table"}


def test_alphabeta_on_a_clock_deepens_within_its_time():
    geometry = board_geometry(3, 3)
    agent = AlphaBetaAgent(12, seconds=0.1)
    lines = np.zeros(24, bool)
    agent.choose(geometry, lines, np.random.default_rng(0))  # numba compiles here
    start = time.perf_counter()
    move = agent.choose(geometry, lines, np.random.default_rng(0))
    assert not lines[move] and time.perf_counter() - start <= 0.25


def test_the_clock_benchmark_times_proofs_against_exact_values_and_counts_proofs_in_play():
    from conftest import load_benchmark
    clock_play = load_benchmark("clock_play")
    args = clock_play.argparse.Namespace(board="2x3", moves="3-4", per_move=3, limit=1.0, network=None, seed=0,
                                         threads=1)
    rows = clock_play.solve_times(args)["rows"]
    assert [r["move"] for r in rows] == [3, 4] and all(r["positions"] == 3 for r in rows)
    assert all(r["class_within_limit"] == r["margin_within_limit"] == 1.0 for r in rows)  # tiny: all finish
    assert all(r["class_nodes"] > 0 for r in rows)
    assert clock_play._proofs_by_undrawn([[40, 0.1, True], [40, 0.4, False]]) == {40: [2, 1, 0.1]}


def test_the_clock_benchmark_match_goes_on_from_its_log(tmp_path):
    """``clock_play.py match --log``: every finished pair of games is one line; a rerun plays only the pairs the log
    lacks and reports over all of them; a log of other settings is refused."""
    from conftest import load_benchmark
    clock_play = load_benchmark("clock_play")
    log = tmp_path / "games.jsonl"

    def run(games, opponent="greedy"):
        args = clock_play.argparse.Namespace(board="2x2", agent="alphabeta:3@0.05s", opponent=opponent, games=games,
                                             opening=1, seed=3, log=str(log))
        return clock_play.match(args)

    first = run(4)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["pair"] for r in rows] == [0, 1] and first["games"] == 4
    assert all("commit" in r for r in rows)  # the code that played them (None outside a git checkout)
    assert first["wins"] + first["draws"] + first["losses"] == 4
    # each pair holds its own moves only: two games, at least one move each, at most all 11 after the opening
    assert all(2 <= len(r["moves"]["alphabeta:3@0.05s"]["seconds"]) <= 22 for r in rows)
    second = run(6)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["pair"] for r in rows] == [0, 1, 2] and second["games"] == 6
    margins = [m for r in rows for m in r["margins"]]
    assert second["wins"] == sum(m > 0 for m in margins) and second["losses"] == sum(m < 0 for m in margins)
    with pytest.raises(SystemExit, match="another --log"):
        run(6, opponent="random")
    log.write_text(log.read_text() + '{"settings": {"board": "2x2", "ag')  # killed while writing a pair
    third = run(8)
    assert [json.loads(line)["pair"] for line in log.read_text().splitlines()] == [0, 1, 2, 3]
    assert third["games"] == 8
