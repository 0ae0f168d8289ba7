"""The fit bench (benchmarks/value_fit.py): its arms, its class shares and a whole run at the test size."""

from __future__ import annotations

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
