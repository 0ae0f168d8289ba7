"""benchmarks/result_classes.py: a network's failures split by the exact result of the position, on 2x2."""

import jax
import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, network
from dabjax.solvers import labelled
from dabjax.training import checkpoint

GEOMETRY = board_geometry(2, 2)
NET = network.NetworkConfig(kind="graph", width=8, blocks=1, value_hidden=8, dense_heads=True)


@pytest.fixture(scope="module")
def result_classes():
    return load_benchmark("result_classes")


@pytest.fixture(scope="module")
def two_by_two():
    data = labelled.build_set(GEOMETRY, list(range(2, 12)), 8, seed=3)
    params = network.init_params(NET, GEOMETRY.grid_shape, jax.random.PRNGKey(0))
    agent = checkpoint.PlayableCheckpoint(2, 2, NET, mcts.SearchConfig(), params, 0, 0.0, {})
    return data, agent


def test_a_value_reads_as_win_draw_or_loss(result_classes):
    np.testing.assert_array_equal(result_classes.result_class(np.array([0.9, 0.34, 0.3, -0.3, -0.34])),
                                  [1, 1, 0, 0, -1])
    np.testing.assert_array_equal(result_classes.result_class(np.array([0.6, 0.4, -0.6]), 0.5), [1, 0, -1])


def test_next_positions_are_valued_for_the_mover(result_classes, two_by_two):
    data, agent = two_by_two
    model = network.PolicyValueNet(NET)
    states = labelled.to_states(data)
    values = result_classes.next_position_values(GEOMETRY, model, agent.params, states)
    legal = ~data.lines
    assert np.isneginf(values[~legal]).all() and np.isfinite(values[legal]).all()
    for i in range(0, len(data), 7):
        state = jax.tree_util.tree_map(lambda x: x[i], states)
        for line in np.flatnonzero(legal[i]):
            after = env_lib.step(GEOMETRY, state, line)
            mover = int(state.current_player)
            if bool(after.terminated):  # the game's result, from the mover's side
                scores = np.asarray(after.scores)
                expected = np.sign(scores[mover] - scores[1 - mover])
            else:
                own = float(model.apply(agent.params, env_lib.observe(GEOMETRY, after)[None])[1][0])
                expected = own if int(after.current_player) == mover else -own
            assert values[i, line] == pytest.approx(expected, abs=1e-5), (i, line)


def test_the_breakdown_splits_positions_by_their_exact_result(result_classes, two_by_two):
    data, agent = two_by_two
    figures = result_classes.breakdown(GEOMETRY, agent, data)
    final = np.sign(data.margin.astype(int) + data.value.astype(int))
    assert figures["positions"] == len(data)
    counts = {name: int((final == sign).sum()) for name, sign in result_classes.CLASSES.items()}
    assert {name: row["positions"] for name, row in figures["by_result"].items()} == counts
    assert counts["lost"] > 0 and counts["won"] > 0
    # In a lost position every legal move keeps the result, whatever the network plays.
    assert figures["by_result"]["lost"]["raw_policy"] == 1.0 and figures["by_result"]["lost"]["lookahead"] == 1.0
    for name in ("raw_policy", "lookahead", "value_class", "next_position_class", "margin_head_class",
                 "with_a_losing_move"):
        assert 0.0 <= figures[name] <= 1.0, name
    hard = (data.best_result & ~data.lines).sum(1) < (~data.lines).sum(1)
    assert figures["with_a_losing_move"] == pytest.approx(hard.mean())


def test_the_command_refuses_what_it_cannot_measure(result_classes, capsys):
    with pytest.raises(SystemExit):
        result_classes.main(["--agent", "level2", "--set", "data/3x3.npz"])
    assert "not a network agent" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        result_classes.main(["--agent", "pretrained:3x3", "--set", "data/3x3.npz", "--moves", "40"])
    assert "no position at --moves 40" in capsys.readouterr().err
