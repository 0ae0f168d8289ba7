"""The arena: seat alternation, shared openings, bookkeeping, host agents; every agent name on 2x2."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.evaluation import agent_registry, arena
from dabjax.game import env as env_lib
from dabjax.game import notation
from dabjax.game.geometry import board_geometry
from dabjax.game.host_agent import HostAgent
from dabjax.search import network
from dabjax.solvers import retrograde

G = board_geometry(2, 2)


def lowest_line(geometry, key, states):
    """A jax agent: the undrawn line of lowest index."""
    return jnp.argmax(~states.lines, axis=-1).astype(jnp.int32)


class HighestLine(HostAgent):
    """A host agent that wants histories: the undrawn line of highest index (checked against the history)."""

    name = "highest"
    needs_history = True

    def act(self, geometry, rng, states, histories):
        for lines, history in zip(states.lines, histories):
            assert sorted(history) == list(np.flatnonzero(lines))  # the history is the game's
        return np.array([np.flatnonzero(~l)[-1] for l in states.lines], np.int32)


def replay(geometry, history):
    """(player to move before each move, final state) by replaying a history with the notation helpers."""
    state = env_lib.init(geometry)
    movers = []
    for line in history:
        movers.append(int(state.current_player))
        state = notation.play_move(geometry, state, line)
    return movers, state


def test_alternation_openings_and_bookkeeping():
    games = arena.play_match(G, lowest_line, HighestLine(), jax.random.PRNGKey(3), 8, opening_moves=3)
    np.testing.assert_array_equal(games.a_player, [0, 1] * 4)
    for k in range(0, 8, 2):  # the same opening in both seats of a pair
        assert games.histories[k][:3] == games.histories[k + 1][:3]
    for i, history in enumerate(games.histories):
        assert len(history) == G.num_lines and len(set(history)) == G.num_lines
        movers, final = replay(G, history)
        np.testing.assert_array_equal(np.asarray(final.scores), games.scores[i])
        for t in range(3, G.num_lines):
            undrawn = sorted(set(range(G.num_lines)) - set(history[:t]))
            expected = undrawn[0] if movers[t] == games.a_player[i] else undrawn[-1]
            assert history[t] == expected
    summary = games.summary()
    assert summary.wins + summary.draws + summary.losses == summary.games == 8
    margin = games.margin_a
    assert summary.mean_margin == pytest.approx(margin.mean())
    assert summary.wins == (margin > 0).sum() and summary.losses == (margin < 0).sum()
    # A's margin from its seat: player 0's boxes minus player 1's, negated when A is player 1.
    np.testing.assert_array_equal(margin, (games.scores[:, 0] - games.scores[:, 1]) * (1 - 2 * games.a_player))


def test_pairings_and_errors():
    assert arena.round_robin_pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert arena.one_vs_many_pairs("b", ["a", "b", "c"]) == [("b", "a"), ("b", "c")]
    with pytest.raises(ValueError, match="even"):
        arena.play_match(G, lowest_line, lowest_line, jax.random.PRNGKey(0), 3)
    with pytest.raises(ValueError, match="opening_moves=12"):
        arena.play_match(G, lowest_line, lowest_line, jax.random.PRNGKey(0), 2, opening_moves=12)
    with pytest.raises(ValueError, match="nobody"):
        arena.play_pairings(G, {"a": lowest_line}, [("a", "nobody")], jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="move history"):
        HighestLine()(G, jax.random.PRNGKey(0), env_lib.batch_init(G, 1))


SPECS = ["random", "level1", "level2", "greedy", "mcts:8", "alphabeta:2", "solver", "openspiel-mcts:10"]


def test_every_agent_name_plays_legal_games_on_2x2():
    agents = agent_registry.make_agents(SPECS, G)
    results = arena.play_pairings(G, agents, arena.one_vs_many_pairs("random", SPECS), jax.random.PRNGKey(1),
                                  2, opening_moves=1)
    assert [(p.name_a, p.name_b) for p in results] == [("random", s) for s in SPECS[1:]]
    for pair in results:
        r = pair.result
        assert r.games == 2 and r.wins + r.draws + r.losses == 2
        assert abs(r.mean_margin) <= G.num_boxes


@pytest.fixture(scope="module")
def fake_checkpoint():
    """A PlayableCheckpoint-like object with freshly initialised parameters (the trainer's format aside)."""
    from dabjax.search import mcts
    config = network.NetworkConfig(width=8, blocks=1, value_hidden=8)
    params = network.init_params(config, G.grid_shape, jax.random.PRNGKey(0))
    return types.SimpleNamespace(rows=2, cols=2, network_config=config, params=params, iteration=3,
                                 wall_time=1.0, search_config=mcts.SearchConfig(num_simulations=4),
                                 early_termination=False)


def test_checkpoint_agents_raw_policy_and_search(fake_checkpoint):
    states = env_lib.batch_init(G, 4)
    raw = agent_registry.checkpoint_agent(fake_checkpoint, G, 0)
    model = network.PolicyValueNet(fake_checkpoint.network_config)
    logits, _ = model.apply(fake_checkpoint.params, jax.vmap(lambda s: env_lib.observe(G, s))(states))
    np.testing.assert_array_equal(np.asarray(raw(G, jax.random.PRNGKey(0), states)), np.argmax(logits, -1))
    searched = agent_registry.checkpoint_agent(fake_checkpoint, G, None)
    games = arena.play_match(G, raw, searched, jax.random.PRNGKey(2), 2)
    assert games.summary().games == 2
    wrong = types.SimpleNamespace(**{**vars(fake_checkpoint), "rows": 3, "cols": 3})
    with pytest.raises(ValueError, match="3x3 board but the board is 2x2"):
        agent_registry.checkpoint_agent(wrong, G, 0)


@pytest.mark.parametrize("spec, message", [
    ("bogus", "unknown agent 'bogus'"),
    ("mcts:0", "SIMS"),
    ("alphabeta:x", "DEPTH"),
    ("openspiel-mcts:", "SIMS"),
    ("greedy:3", "unknown agent"),
])
def test_bad_agent_names(spec, message):
    with pytest.raises(ValueError, match=message):
        agent_registry.make_agent(spec, G)
    with pytest.raises(ValueError, match="more than once"):
        agent_registry.make_agents("random,random", G)


def test_deep_alphabeta_and_solver_play_optimal_moves():
    table = retrograde.solve_table(G)
    rng = np.random.default_rng(0)
    lines = rng.random((40, G.num_lines)) < rng.random((40, 1)) * 0.8
    lines[:, 0] = False
    deep = agent_registry.make_agent(f"alphabeta:{G.num_lines}", G)
    solver = agent_registry.make_agent("solver", G)
    _, optimal = retrograde.optimal_moves(G, table, lines)
    states = env_lib.State(
        lines=lines, box_owner=-np.ones((40, G.num_boxes), np.int8), scores=np.zeros((40, 2), np.int32),
        current_player=np.zeros(40, np.int32), num_moves=lines.sum(1).astype(np.int32),
        terminated=np.zeros(40, bool), truncated=np.zeros(40, bool), legal_action_mask=~lines,
        rewards=np.zeros((40, 2), np.float32))
    for agent in (deep, solver):
        moves = agent.act(G, rng, states, None)
        assert optimal[np.arange(40), moves].all()
