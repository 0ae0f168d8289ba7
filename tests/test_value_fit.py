"""The fit bench (benchmarks/value_fit.py): its arms, its class shares and a whole run at the test size."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.search import network

value_fit = load_benchmark("value_fit")


def test_arms_parse_into_network_configs_and_wrong_ones_are_named():
    config = value_fit.arm_config("transformer:64x4+h8", 32)
    assert (config.kind, config.width, config.blocks, config.attention_heads) == ("transformer", 64, 4, 8)
    assert config.parity_plane and config.value_hidden == 32
    assert not value_fit.arm_config("graph:32x8+paper", 64).parity_plane
    for spec, message in [("graph:32", "KIND:WIDTHxBLOCKS"), ("gnn:32x8", "'gnn' is not one of"),
                          ("graph:32x8+pool", "KIND:WIDTHxBLOCKS"),
                          ("graph:32x8+chain", "KIND:WIDTHxBLOCKS")]:
        with pytest.raises(ValueError, match=message):
            value_fit.arm_config(spec, 64)


def test_target_heads_are_arm_options_of_the_graph_kinds_only():
    config = value_fit.arm_config("graph:16x4+lines+control", 32)
    assert (config.kind, config.width, config.blocks) == ("graph", 16, 4)
    assert value_fit.arm_targets("graph:16x4+lines+control") == (1.0, 1.0)
    assert value_fit.arm_targets("graph_attention:16x4+h4+control") == (0.0, 1.0)
    assert value_fit.arm_targets("graph:16x4") == (0.0, 0.0)
    with pytest.raises(ValueError, match="graph kinds only"):
        value_fit.arm_config("transformer:8x1+h2+lines", 32)
    with pytest.raises(SystemExit):  # a target arm outside the targets loop is refused at start-up
        value_fit.main(["--tiny", "--arm", "graph:8x1+lines"])
    with pytest.raises(SystemExit):  # and so is a kind the targets loop does not build
        value_fit.main(["--tiny", "--targets", "--arm", "transformer:8x1+h2"])


@pytest.fixture(scope="module")
def tiny_train():
    train_sets, _ = value_fit.tiny_sets()
    return train_sets[0]


def test_exact_targets_hold_every_lines_result_and_the_control_outcome(tiny_train, tmp_path):
    from dabjax.solvers import nimstring

    cache = tmp_path / "targets.npz"
    targets = value_fit.exact_targets(tiny_train, cache=str(cache), progress=False)
    legal = ~tiny_train.lines
    np.testing.assert_array_equal(targets.line_known, legal)  # the table labels every move
    # A line's result is the class of the final margin after it: the best of them is the position's own class.
    best = np.where(legal, targets.line_result, -2).max(-1)
    np.testing.assert_array_equal(best, np.sign(tiny_train.margin + tiny_train.value))
    assert set(np.unique(targets.line_result[legal])) <= {-1.0, 0.0, 1.0}
    assert targets.control_known.all()  # 2x2 nimstring always finishes
    for i in range(0, len(tiny_train), 17):
        wins = nimstring.solve_nimstring(tiny_train.geometry, tiny_train.lines[i]).wins
        assert targets.control[i] == (1.0 if wins else -1.0)
    # Without the set's move values the position solver gives the same line results; the cache keeps them.
    solved = value_fit.exact_targets(dataclasses.replace(tiny_train, move_values=None), progress=False)
    np.testing.assert_array_equal(solved.line_result, targets.line_result)
    np.testing.assert_array_equal(solved.line_known, targets.line_known)
    cached = value_fit.exact_targets(dataclasses.replace(tiny_train, move_values=None), cache=str(cache),
                                     progress=False)
    np.testing.assert_array_equal(cached.control, targets.control)


def test_the_targets_network_plays_as_the_plain_network_and_its_heads_train_the_trunk(tiny_train):
    from dabjax.training import supervised

    geometry = tiny_train.geometry
    config = value_fit.arm_config("graph:8x2+lines+control", 16)
    model = value_fit.TargetsNet(config, True, True)
    observation = value_fit.observations_of_set(tiny_train)[:32]
    params = model.init(jax.random.PRNGKey(3), observation)
    assert {"line_result", "line_result_hidden", "control", "control_hidden"} <= set(params["params"])
    playing = value_fit.playing_params(config, params, geometry)
    logits, value, lines, control = model.apply(params, observation)
    plain_logits, plain_value = network.PolicyValueNet(config).apply(playing, observation)
    np.testing.assert_allclose(plain_logits, logits, rtol=1e-6)
    np.testing.assert_allclose(plain_value, value, rtol=1e-6)
    assert lines.shape == logits.shape and control.shape == value.shape
    samples, _ = supervised.samples_from_set(tiny_train)
    targets = value_fit.exact_targets(tiny_train, progress=False)
    fits = [value_fit.fit_with_targets(geometry, config, samples, targets, jax.random.PRNGKey(0), steps=30,
                                       lines_weight=w, control_weight=w, chunk=10) for w in (0.0, 1.0)]
    for fit in fits:
        assert fit.steps == 30 and np.isfinite(fit.loss)
        network.PolicyValueNet(config).apply(fit.params, observation)  # the playing network's parameters
    # The same seed and batches: the heads' gradients alone move the trunk elsewhere.
    trunk = [fit.params["params"]["GraphTrunk_0"] for fit in fits]
    assert any(not np.allclose(a, b) for a, b in zip(jax.tree_util.tree_leaves(trunk[0]),
                                                       jax.tree_util.tree_leaves(trunk[1])))


def test_a_tiny_targets_run_trains_the_plain_and_the_headed_arm_by_one_loop(tmp_path):
    cache = tmp_path / "targets.npz"
    results = value_fit.main(["--tiny", "--targets", "--targets-cache", str(cache), "--arm", "graph:8x1",
                              "--arm", "graph:8x1+lines+control", "--seeds", "0", "--simulations", "0"])
    rows = results["arms"]
    assert [row["arm"] for row in rows] == ["graph:8x1", "graph:8x1+lines+control"]
    assert cache.exists()  # labelled once, for the arm with heads
    for row in rows:
        assert row["steps"] == 2 and row["parameters"] == rows[0]["parameters"]  # the heads are not measured
        values = np.asarray(row["class"], float)
        assert np.all((values[~np.isnan(values)] >= 0) & (values[~np.isnan(values)] <= 1))


def test_the_result_class_of_a_value_and_its_share_by_move():
    value = np.array([0.9, 0.2, -0.5, -0.2, 0.5, 0.34])
    final = np.array([3, 0, -1, 2, -2, 1])  # the exact final margins: win, draw, loss, win, loss, win
    moves = np.array([1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(value_fit.result_class(value), [1, 0, -1, 0, 1, 1])
    shares = value_fit.class_share_by_move(value, final, moves, np.array([1, 2, 3]))
    np.testing.assert_allclose(shares[:2], [1.0, 1 / 3])
    assert np.isnan(shares[2])


def test_a_tiny_bench_trains_measures_and_judges_every_arm(tmp_path):
    out = tmp_path / "fit.json"
    results = value_fit.main(["--tiny", "--arm", "transformer:8x1+h2", "--seeds", "0", "1", "--simulations", "4",
                              "--json", str(out)])
    assert json.loads(out.read_text())["summary"]["lines"] == results["summary"]["lines"]
    rows = results["arms"]
    assert [(row["arm"], row["seed"]) for row in rows] == [("transformer:8x1+h2", 0), ("transformer:8x1+h2", 1)]
    config = network.NetworkConfig(**rows[0]["config"])
    assert config.kind == "transformer" and rows[0]["steps"] == 2
    # Two seeds train two networks: their held-out figures are measured, not copied.
    assert rows[0]["class"] != rows[1]["class"] or rows[0]["raw"] != rows[1]["raw"]
    for row in rows:
        for name in ("class", "train_class", "raw", "search"):
            values = np.asarray(row[name], float)
            assert values.shape == (len(results["moves"]),)
            assert np.all((values[~np.isnan(values)] >= 0) & (values[~np.isnan(values)] <= 1))
        assert row["parameters"] == network.num_parameters(
            network.init_params(config, (5, 5), jax.random.PRNGKey(0)))
        assert row["flops_per_position"] > 0 and row["us_per_position"] > 0
    assert results["summary"]["lines"][-1].startswith(("verdict: GO", "verdict: NO-GO"))
    assert set(results["summary"]["arms"]) == {"transformer:8x1+h2"}


def test_cost_only_prices_each_arm_without_training():
    costs = value_fit.main(["--tiny", "--cost-only", "--arm", "graph:8x1", "--arm", "transformer:8x2+h2"])["costs"]
    graph, transformer = costs["graph:8x1"], costs["transformer:8x2+h2"]
    assert graph["parameters"] < transformer["parameters"]  # two blocks of attention against one round
    assert all(c["flops_per_position"] > 0 and c["bytes_per_position"] > 0 for c in (graph, transformer))
