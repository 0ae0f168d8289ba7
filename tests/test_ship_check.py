"""benchmarks/ship_check.py, the shipping rule (issue 46): pooled best-result counts by move over several sets,
the moves where a candidate is weaker, the head-to-head Elo, and the verdict; a rerun reads what a run left
(no evaluation here: the outputs of ``dabjax evaluate`` are written by hand)."""

import json

import pytest
from conftest import load_benchmark

from dabjax.evaluation import elo

CANDIDATE, SHIPPED = "ckpt:runs/new:64", "pretrained:4x4:64"


@pytest.fixture(scope="module")
def ship_check():
    return load_benchmark("ship_check")


def write_accuracy(folder, shares: dict[str, dict[int, tuple[float, int]]]):
    folder.mkdir(parents=True)
    rows = [dict(agent=agent, move=move, positions=positions, best_result=share, best_margin=share,
                 mean_margin_loss=0.0, illegal=0)
            for agent, moves in shares.items() for move, (share, positions) in moves.items()]
    (folder / "accuracy.json").write_text(json.dumps(dict(set="s", rows=rows)))
    return folder / "accuracy.json"


def write_arena(folder, wins, draws, losses):
    folder.mkdir(parents=True)
    pair = dict(agent_a="ckpt:/abs/runs/new:64", agent_b=SHIPPED, games=wins + draws + losses, wins=wins,
                draws=draws, losses=losses)
    (folder / "arena.json").write_text(json.dumps(dict(pairs=[pair])))


def test_counts_are_pooled_by_move_over_the_sets(ship_check, tmp_path):
    first = write_accuracy(tmp_path / "a", {CANDIDATE: {12: (0.9, 200), 13: (1.0, 200)},
                                            SHIPPED: {12: (0.85, 200), 13: (0.995, 200)}})
    second = write_accuracy(tmp_path / "b", {CANDIDATE: {12: (0.875, 40), 13: (0.95, 40)},
                                             SHIPPED: {12: (0.9, 40), 13: (1.0, 40)}, "level2": {12: (0.1, 40)}})
    pooled = ship_check.pooled_by_move([first, second], [CANDIDATE, SHIPPED])
    assert pooled[CANDIDATE] == {12: (180 + 35, 240), 13: (200 + 38, 240)}
    assert pooled[SHIPPED] == {12: (170 + 36, 240), 13: (199 + 40, 240)}
    # Move 12: ahead pooled though behind on the second set; move 13: one position short.
    assert ship_check.weaker_moves(pooled, CANDIDATE, SHIPPED) == [13]
    assert "| 13 | 240 | 238 (0.992) | 239 (0.996) | -1 |" in ship_check.table(pooled, CANDIDATE, SHIPPED)
    with pytest.raises(ValueError, match="no accuracy rows for 'mcts:8'"):
        ship_check.pooled_by_move([first], [CANDIDATE, "mcts:8"])


def test_the_verdict_needs_both_halves_of_the_rule(ship_check):
    ahead = ship_check.head_to_head(164, 160, 76)
    games, points = elo.tables_from_results(["a", "b"], [("a", "b", 164, 160, 76)])
    fit = elo.fit_elo(["a", "b"], games, points, anchor="b")
    assert ahead["elo"] == pytest.approx(float(fit.ratings[0])) and ahead["low"] > 0
    assert ahead["score"] == pytest.approx((164 + 80) / 400)
    assert ship_check.verdict([], ahead) == (True, [])
    ships, reasons = ship_check.verdict([20], ahead)
    assert not ships and reasons == ["weaker at move 20"]
    level = ship_check.head_to_head(138, 109, 153)  # ahead on score would not be enough: the interval reaches 0
    ships, reasons = ship_check.verdict([], level)
    assert not ships and reasons[0].startswith("does not beat the shipped agent head to head")


def test_a_rerun_reads_the_outputs_left_and_writes_the_verdict(ship_check, tmp_path, capsys):
    out = tmp_path / "check"
    write_accuracy(out / "accuracy_0", {CANDIDATE: {12: (0.9, 200)}, SHIPPED: {12: (0.88, 200)}})
    write_accuracy(out / "accuracy_1", {CANDIDATE: {12: (0.9, 40)}, SHIPPED: {12: (0.875, 40)}})
    write_arena(out / "arena", 150, 150, 100)
    assert ship_check.main(["--board", "4x4", "--candidate", "ckpt:runs/new", "--shipped", "pretrained:4x4",
                            "--set", "4x4", "--set", "unseen.npz", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| 12 | 240 | 216 (0.900) | 211 (0.879) | +5 |" in printed
    assert "head to head: 150-150-100 (score 0.562)" in printed and printed.rstrip().endswith("verdict: ships")
    saved = json.loads((out / "ship_check.json").read_text())
    assert saved["ships"] and saved["by_move"]["12"] == dict(positions=240, candidate=216, shipped=211)
    assert not (out / "log.txt").exists()  # nothing was run again


@pytest.mark.parametrize("argv, message", [
    (["--games", "3"], "--games must be even"),
    (["--candidate", "pretrained:4x4:128"], "names its simulations"),
])
def test_the_command_refuses_odd_games_and_agents_with_their_own_simulations(ship_check, tmp_path, capsys, argv,
                                                                              message):
    base = {"--board": "4x4", "--candidate": "ckpt:runs/new", "--shipped": "pretrained:4x4", "--set": "4x4",
            "--out": str(tmp_path)}
    base.update(dict(zip(argv[::2], argv[1::2])))
    with pytest.raises(SystemExit):
        ship_check.main([item for pair in base.items() for item in pair])
    assert message in capsys.readouterr().err
