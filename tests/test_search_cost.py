"""benchmarks/search_cost.py --tiny: every part of a search timed and costed, and the trip counts of the search's
data-dependent loops (mean per game at most the batch's maximum)."""

import json
import re

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    search_cost = load_benchmark("search_cost")
    path = tmp_path_factory.mktemp("search_cost") / "cost.json"
    search_cost.main(["--tiny", "--repeats", "1", "--json", str(path)])
    return search_cost, json.loads(path.read_text())


def test_every_part_has_a_positive_time_and_cost(tiny_report):
    search_cost, report = tiny_report
    (batch,) = report
    assert batch["games"] == 8 and batch["board"] == "2x2" and batch["simulations"] == 4
    assert [row["part"] for row in batch["parts"]] == list(search_cost.PARTS)
    for row in batch["parts"]:
        assert row["us_per_game_simulation"] > 0, row
        assert row["flops_per_position"] > 0, row
        assert row["bytes_per_position"] > 0, row


def test_the_loops_that_every_simulation_runs_are_counted(tiny_report):
    _, (batch,) = tiny_report
    loops = {row["loop"]: row for row in batch["loops"]}
    # The label propagation runs for exact play (forced.exact_value), not in the search's simulations.
    assert {"tree descent", "forced-capture settle", "chain walk"} <= set(loops)
    for row in loops.values():
        assert row["runs"] >= batch["simulations"], row
        assert 0 <= row["mean_steps"] <= row["lane_steps"] <= row["max_steps"], row
        assert row["busy"] == pytest.approx(row["mean_steps"] / row["lane_steps"] if row["lane_steps"] else 1.0)
    # Every descent takes at least one step: from the root, on every lane.
    assert loops["tree descent"]["mean_steps"] >= 1
    assert loops["tree descent"]["lane_steps"] == loops["tree descent"]["max_steps"]
    # The settle and the chain walk run on lanes: the share of games that needed them is counted.
    for loop in ("forced-capture settle", "chain walk"):
        assert 0 <= loops[loop]["needing"] <= loops[loop]["needing_max"] <= 1, loops[loop]


def test_the_markdown_table_lists_every_part_and_loop(tiny_report):
    search_cost, (batch,) = tiny_report
    setting = search_cost.recipe(True, "random")
    table = search_cost.markdown(batch["games"], setting, batch["parts"], batch["loops"])
    for part in search_cost.PARTS:
        assert re.search(rf"^\| {re.escape(part)} \| \d", table, re.MULTILINE), part
    for row in batch["loops"]:
        assert f"| {row['loop']} | {row['runs']} |" in table
