"""benchmarks/network_bytes.py --tiny: the network's forward pass, a learning step and the search, costed and timed,
for this checkout and, alternately, another one (here a copy whose recipe searches without its prunings)."""

import json
import pathlib
import shutil

from conftest import load_benchmark

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_each_side_runs_its_own_checkout_and_costs_what_its_code_does(tmp_path, capsys):
    """``--against`` measures the other checkout's package, not this one's (nor the editable install's): a copy
    of this checkout whose 5x5 recipe searches without its two prunings costs the same forward pass and learning
    step as this one, and another search."""
    other = tmp_path / "other"
    shutil.copytree(ROOT / "dabjax", other / "dabjax", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "configs", other / "configs")
    (other / "data").symlink_to(ROOT / "data")  # the recipe's labelled set, read as is
    recipe = other / "configs" / "5x5.yaml"
    text = recipe.read_text()
    assert "endgame_pruning: true" in text and "chain_pruning: true" in text
    recipe.write_text(text.replace("endgame_pruning: true", "endgame_pruning: false")
                      .replace("chain_pruning: true", "chain_pruning: false"))
    network_bytes = load_benchmark("network_bytes")
    path = tmp_path / "bytes.json"
    assert network_bytes.main(["--tiny", "--against", str(other), "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    ours, theirs = report["sides"]["this checkout"], report["sides"][str(other)]
    for side in (ours, theirs):
        for part in ("forward", "learning", "search"):
            assert side[part]["flops"] > 0 and side[part]["bytes"] > 0 and side[part]["us"] > 0, (part, side)
        assert side["search_simulations_per_s"] > 0
    for part in ("forward", "learning"):
        assert ours[part]["bytes"] == theirs[part]["bytes"] and ours[part]["flops"] == theirs[part]["flops"], part
    assert (ours["search"]["flops"], ours["search"]["bytes"]) != (theirs["search"]["flops"], theirs["search"]["bytes"])
    out = capsys.readouterr().out
    assert "| this checkout |" in out and f"| {other} |" in out and f"this checkout / {other}:" in out
