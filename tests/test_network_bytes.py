"""benchmarks/network_bytes.py --tiny: the network's forward pass, a learning step and the search, costed and timed,
for this checkout and, alternately, another one (here the same files, so the cost analyses agree)."""

import json
import pathlib

from conftest import load_benchmark

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_both_checkouts_are_costed_and_timed_and_the_same_code_costs_the_same(tmp_path, capsys):
    network_bytes = load_benchmark("network_bytes")
    path = tmp_path / "bytes.json"
    assert network_bytes.main(["--tiny", "--against", str(ROOT), "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    ours, theirs = report["sides"]["this checkout"], report["sides"][str(ROOT)]
    for side in (ours, theirs):
        for part in ("forward", "learning", "search"):
            assert side[part]["flops"] > 0 and side[part]["bytes"] > 0 and side[part]["us"] > 0, (part, side)
        assert side["search_simulations_per_s"] > 0
    for part in ("forward", "learning", "search"):
        assert ours[part]["bytes"] == theirs[part]["bytes"] and ours[part]["flops"] == theirs[part]["flops"], part
    out = capsys.readouterr().out
    assert "| this checkout |" in out and f"this checkout / {ROOT}:" in out
