"""benchmarks/lever_ablation.py's table (issue 46): seeds pooled, each row's Elo against the 32x4 reference agent
and its difference from its reference row, from the ``ablation.json`` files a run leaves (no training here); and
that reference agent warm-starts every self-play row."""

import json

import numpy as np
import pytest
from conftest import load_benchmark

from dabjax.evaluation import elo, pretrained
from dabjax.training import config as config_lib


@pytest.fixture(scope="module")
def ablation():
    return load_benchmark("lever_ablation")


def write_run(out, row, seed, minimum, wins, draws, losses):
    run = out / row / f"seed{seed}"
    run.mkdir(parents=True)
    by_move = {"12": minimum, "13": 1.0}
    (run / "ablation.json").write_text(json.dumps({
        "trained": {"minutes": 1.0},
        "set": {"min": minimum, "mean": (minimum + 1.0) / 2, "by_move": by_move},
        "head_to_head": {"wins": wins, "draws": draws, "losses": losses, "games": wins + draws + losses}}))


def rating(wins, draws, losses):
    games, points = elo.tables_from_results(["a", "b"], [("a", "b", wins, draws, losses)])
    return elo.fit_elo(["a", "b"], games, points, anchor="b")


def test_the_table_pools_seeds_and_compares_each_row_with_its_reference(ablation, tmp_path):
    write_run(tmp_path, "baseline", 0, 0.80, 40, 20, 40)
    write_run(tmp_path, "baseline", 1, 0.82, 30, 40, 30)
    write_run(tmp_path, "dense", 0, 0.90, 60, 20, 20)
    write_run(tmp_path, "capacity-32x4", 0, 0.70, 20, 20, 60)
    write_run(tmp_path, "capacity-64x4", 0, 0.60, 10, 20, 70)
    lines = ablation.table(tmp_path, ["baseline", "dense", "capacity-32x8", "capacity-32x4", "capacity-64x4"])
    rows = {line.split(" | ")[0][2:]: line for line in lines.splitlines()[2:]}
    assert set(rows) == {"baseline", "dense", "capacity-32x4", "capacity-64x4"}  # nothing ran for capacity-32x8
    # The baseline's seeds pooled: 70-60-70, level with the opponent; the shares' mean and range.
    assert "| 2 | 0.810 (0.800-0.820) / 0.905 (0.900-0.910) | n/a | 70-60-70 (0.50), +0 Elo" in rows["baseline"]
    dense, base = rating(60, 20, 20), rating(70, 60, 70)
    delta = dense.ratings[0] - base.ratings[0]
    half = np.hypot((dense.ci_high[0] - dense.ci_low[0]) / 2, (base.ci_high[0] - base.ci_low[0]) / 2)
    assert rows["dense"].endswith(f"| {delta:+.0f} [{delta - half:+.0f}, {delta + half:+.0f}] (baseline) |")
    assert delta > 100  # 0.70 against 0.50
    # A capacity row is compared with the shipped size, not with the self-play baseline.
    assert rows["capacity-64x4"].endswith("(capacity-32x4) |") and rows["capacity-32x4"].endswith("|  |")


def test_the_command_refuses_unknown_rows_and_odd_games(ablation, capsys):
    with pytest.raises(SystemExit):
        ablation.main(["--rows", "baseline,wider", "--table-only"])
    assert "unknown ['wider']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ablation.main(["--games", "3", "--table-only"])
    assert "--games must be even" in capsys.readouterr().err


def test_the_reference_agent_warm_starts_every_self_play_row(ablation):
    """The ablation's warm start and opponent is the 32x4 agent shipped before the 32x8 one (kept in benchmarks/):
    each self-play row's network (configs/4x4.yaml without its heads, plus the row's levers) can start from it."""
    assert ablation.OPPONENT == f"ckpt:{ablation.REFERENCE_AGENT}"
    for name, (overrides, how) in ablation.ROWS.items():
        if how != "selfplay":
            continue
        config = config_lib.load_config("4x4", [*ablation.PLAIN, *overrides])
        loaded = pretrained.load_to_continue(str(ablation.REFERENCE_AGENT), config.network, 4, 4)
        assert (loaded.network_config.width, loaded.network_config.blocks) == (32, 4), name
        assert not loaded.network_config.dense_heads
