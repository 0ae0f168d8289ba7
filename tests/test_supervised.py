"""Supervised training on exact labels (dabjax.training.supervised) and its command, ``dabjax pretrain``."""

import dataclasses
import json
import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.cli import pretrain as pretrain_cli
from dabjax.evaluation import pretrained
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.runs import train_boxeszero
from dabjax.search import network
from dabjax.search.heads import HEAD_PARAMS
from dabjax.solvers import labelled, retrograde
from dabjax.training import config as config_lib
from dabjax.training import replay, supervised

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
NET = network.NetworkConfig(kind="mlp", width=64, blocks=1, value_hidden=16)


@pytest.fixture(scope="module")
def table_samples():
    geometry = board_geometry(2, 2)
    table = retrograde.solve_table(geometry)
    return geometry, table, supervised.samples_from_table(geometry, table, jax.random.PRNGKey(0), games=256)


def fitted_shares(geometry, params, samples):
    """(value-sign share over decided positions, raw-policy best-move share) of a network on its samples."""
    observations = jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(
        samples.positions.lines, samples.positions.claimed, samples.positions.margin)
    logits, value = network.PolicyValueNet(NET).apply(params, observations)
    moves = jnp.argmax(network.mask_logits(logits, ~samples.positions.lines), -1)
    decided = np.asarray(samples.value) != 0
    sign = np.mean(np.sign(np.asarray(value))[decided] == np.asarray(samples.value)[decided])
    best = np.asarray(jnp.take_along_axis(samples.policy, moves[:, None], 1))[:, 0] > 0
    return float(sign), float(best.mean())


def test_table_samples_carry_the_exact_labels(table_samples):
    geometry, table, samples = table_samples
    lines = np.asarray(samples.positions.lines)
    assert lines.shape[1] == geometry.num_lines and (~lines).any(-1).all()  # no finished position
    values = retrograde.move_values(geometry, table, lines)
    final = np.asarray(samples.positions.margin) + values.max(-1)
    np.testing.assert_array_equal(np.asarray(samples.value), np.sign(final))
    policy = np.asarray(samples.policy)
    np.testing.assert_allclose(policy.sum(-1), 1.0, rtol=1e-6)
    # The policy target is uniform over exactly the moves that keep the best result (no drawn line among them).
    finals = np.asarray(samples.positions.margin)[:, None] + values
    keeps_result = (np.sign(finals) == np.sign(final)[:, None]) & ~lines
    np.testing.assert_array_equal(policy > 0, keeps_result)
    np.testing.assert_allclose(policy[keeps_result], np.repeat(1.0 / keeps_result.sum(-1), keeps_result.sum(-1)),
                               rtol=1e-6)


def test_fit_learns_the_exact_labels_of_2x2(table_samples):
    geometry, _, samples = table_samples
    before = network.init_params(NET, geometry.grid_shape, jax.random.PRNGKey(3))
    fitted = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(3), steps=400, lr=3e-3, batch_size=128)
    assert fitted.steps == 400 and np.isfinite(fitted.loss)
    sign_before, best_before = fitted_shares(geometry, before, samples)
    sign_after, best_after = fitted_shares(geometry, fitted.params, samples)
    assert sign_after >= 0.9 and sign_after > sign_before + 0.1, (sign_before, sign_after)
    # The best-move share starts near 0.66 (most 2x2 moves keep the result) and ends near 0.9.
    assert best_after >= 0.85 and best_after > best_before + 0.15, (best_before, best_after)
    # A time budget: whole chunks until it is spent; a single step keeps its (compile step's) loss.
    timed = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(4), minutes=1e-6, chunk=5)
    assert timed.steps == 5 and np.isfinite(timed.loss)
    one = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(4), steps=1)
    assert one.steps == 1 and one.loss > 0
    with pytest.raises(ValueError, match="either steps or minutes"):
        supervised.fit(geometry, NET, samples, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="positive"):
        supervised.fit(geometry, NET, samples, jax.random.PRNGKey(0), steps=0)


def test_fit_anneals_the_rate_over_its_budget(table_samples):
    """``final_lr_fraction`` sets the rate before each chunk on a cosine from ``lr`` to that share of it; 1 keeps it."""
    geometry, _, samples = table_samples
    annealed = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(8), steps=300, chunk=100, lr=2e-3,
                              final_lr_fraction=0.0)
    # The third chunk starts after 2/3 of the steps: 2e-3 * (1 + cos(2 pi / 3)) / 2 = 5e-4.
    assert annealed.steps == 300 and annealed.final_lr == pytest.approx(5e-4, rel=1e-5)
    floor = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(8), steps=300, chunk=100, lr=2e-3,
                           final_lr_fraction=0.5)
    assert floor.final_lr == pytest.approx(2e-3 * (0.5 + 0.5 * 0.25), rel=1e-5)
    constant = supervised.fit(geometry, NET, samples, jax.random.PRNGKey(8), steps=300, chunk=100, lr=2e-3)
    assert constant.final_lr == pytest.approx(2e-3)
    # The rate reaches the optimiser: the same steps at a lower rate move the parameters less.
    moved = {name: sum(float(jnp.sum(jnp.abs(a - b))) for a, b in zip(
        jax.tree_util.tree_leaves(fit.params),
        jax.tree_util.tree_leaves(network.init_params(NET, geometry.grid_shape, jax.random.split(
            jax.random.PRNGKey(8))[0]))))
        for name, fit in (("annealed", annealed), ("constant", constant))}
    assert moved["annealed"] < moved["constant"], moved
    with pytest.raises(ValueError, match="final_lr_fraction"):
        supervised.fit(geometry, NET, samples, jax.random.PRNGKey(0), steps=1, final_lr_fraction=1.5)


def test_fit_trains_the_margin_head_on_the_labels_margin_only_when_weighted(table_samples):
    """A network with dense heads learns the labels' final margin under best play with ``margin_weight`` > 0,
    and leaves the head untrained at 0; a weight without the heads is refused."""
    geometry, table, samples = table_samples
    heads = dataclasses.replace(NET, dense_heads=True)
    observations = jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(
        samples.positions.lines, samples.positions.claimed, samples.positions.margin)
    target = np.asarray(replay.with_dense_targets(samples, True).dense.margin)
    errors = {}
    for weight in (0.0, 1.0):
        fitted = supervised.fit(geometry, heads, samples, jax.random.PRNGKey(5), steps=300, lr=3e-3, batch_size=128,
                                margin_weight=weight)
        _, _, _, margin = network.PolicyValueNet(heads).apply(fitted.params, observations, dense=True)
        errors[weight] = float(np.mean(np.abs(np.asarray(margin) - target)))
    # 2x2 final margins over the 4 boxes are in {-1, -0.5, 0, 0.5, 1}: 0.22 after 300 steps, the untrained
    # head off by 1.19.
    assert errors[1.0] < 0.3 and errors[1.0] < errors[0.0] / 3, errors
    # A network without the heads fine-tunes as the trunk of one with them (fresh heads on its trunk).
    plain = network.init_params(NET, geometry.grid_shape, jax.random.PRNGKey(6))
    tuned = supervised.fit(geometry, heads, samples, jax.random.PRNGKey(7), steps=1, params=plain, margin_weight=1.0)
    assert HEAD_PARAMS in tuned.params["params"] and np.isfinite(tuned.loss)
    with pytest.raises(ValueError, match="dense_heads"):
        supervised.fit(geometry, NET, samples, jax.random.PRNGKey(0), steps=1, margin_weight=1.0)


def test_set_samples_leave_out_the_measured_positions():
    geometry = board_geometry(2, 2)
    built = labelled.build_set(geometry, [3, 4, 5], 12, seed=7)
    half = labelled.subset(built, np.arange(len(built)) % 2 == 0)
    samples, dropped = supervised.samples_from_set(built, exclude=half)
    assert len(half) <= dropped < len(built) and int(samples.valid.shape[0]) == len(built) - dropped
    kept = set(labelled.identities(geometry, samples.positions.lines, samples.positions.margin))
    assert kept.isdisjoint(labelled.position_identities(half))
    everything, none_dropped = supervised.samples_from_set(built)
    assert none_dropped == 0
    np.testing.assert_array_equal(np.asarray(everything.value), np.sign(built.margin.astype(np.int32) + built.value))
    np.testing.assert_array_equal(np.asarray(everything.policy) > 0, built.best_result)
    with pytest.raises(ValueError, match="every training position is also in the 2x2 set to leave out"):
        supervised.samples_from_set(built, exclude=built)
    with pytest.raises(ValueError, match="the set to leave out 3x3"):
        supervised.samples_from_set(built, exclude=labelled.load(ROOT / "data" / "3x3.npz"))


def test_pretrain_writes_a_warm_start_that_a_run_starts_from(tmp_path, capsys):
    out = tmp_path / "warm"
    assert pretrain_cli.main(["--config", SMOKE, "--steps", "30", "--out", str(out), "network.kind=graph"]) == 0
    description = json.loads((out / pretrained.AGENT_FILE).read_text())
    assert description["source"]["method"] == "supervised, exact labels" and description["source"]["steps"] == 30
    assert "exact 2x2 table" in description["source"]["trained_on"]
    warm = pretrained.load_agent_folder(out)
    assert warm.network_config.kind == "graph" and (warm.rows, warm.cols) == (2, 2)
    assert "run.init_from=" in capsys.readouterr().err
    # A graph network warm-starts a run on another board from it, unchanged.
    config = config_lib.load_config(SMOKE, [f"run.dir={tmp_path / 'run'}", "network.kind=graph", "board.cols=3",
                                            f"run.init_from={out}"])
    started = train_boxeszero.BoxesZeroTraining(config).init_state()
    chex.assert_trees_all_equal(warm.params, started.train_state.params)
    # --init fine-tunes it: one Adam step (lr 1e-3) moves every parameter by about 1e-3, no more.
    tuned = tmp_path / "tuned"
    assert pretrain_cli.main(["--config", SMOKE, "--steps", "1", "--init", str(out), "--out", str(tuned),
                          "network.kind=graph"]) == 0
    assert json.loads((tuned / pretrained.AGENT_FILE).read_text())["source"]["init"] == str(out)
    changes = jax.tree_util.tree_map(lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()),
                                     pretrained.load_agent_folder(tuned).params, warm.params)
    assert 0.0 < max(jax.tree_util.tree_leaves(changes)) < 5e-3
    with pytest.raises(SystemExit):  # another network than the config's
        pretrain_cli.main(["--config", SMOKE, "--steps", "1", "--init", str(out), "--out", str(tuned)])
    assert f"--init {out}: it holds a network" in capsys.readouterr().err


def test_pretrain_trains_on_a_labelled_set_without_the_excluded_positions(tmp_path, capsys):
    geometry = board_geometry(2, 2)
    built = labelled.build_set(geometry, [2, 3, 4, 5], 10, seed=11)
    labelled.save(built, tmp_path / "train.npz")
    labelled.save(labelled.subset(built, np.arange(len(built)) < 5), tmp_path / "measured.npz")
    out = tmp_path / "warm"
    assert pretrain_cli.main(["--config", SMOKE, "network.width=8", "--labels", str(tmp_path / "train.npz"),
                          "--exclude", str(tmp_path / "measured.npz"), "--steps", "3", "--out", str(out)]) == 0
    source = json.loads((out / pretrained.AGENT_FILE).read_text())["source"]
    # A built set holds each position once: exactly the 5 positions of the measured set are left out.
    assert f"(5 positions also in {tmp_path / 'measured.npz'} left out)" in source["trained_on"]
    assert pretrained.load_agent_folder(out).network_config.width == 8  # the override, given before --labels
    assert "dabjax train --config " + SMOKE + " network.width=8 run.init_from=" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pretrain_cli.main(["--config", SMOKE, "--labels", str(tmp_path / "train.npz"), "--exclude",
                       str(tmp_path / "train.npz"), "--steps", "3", "--out", str(out)])
    assert "--exclude none keeps them" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a set of another board than the labels': an --exclude error
        pretrain_cli.main(["--config", SMOKE, "--labels", str(tmp_path / "train.npz"), "--exclude", "3x3", "--steps",
                       "3", "--out", str(out)])
    assert "--exclude 3x3: a 3x3 set; the labels are 2x2" in capsys.readouterr().err
    # With dense heads, the labels' margin trains the margin head at targets.margin_weight.
    assert pretrain_cli.main(["--config", SMOKE, "network.width=8", "network.dense_heads=true",
                              "targets.margin_weight=0.5", "--labels", str(tmp_path / "train.npz"),
                              "--exclude", "none", "--steps", "1", "--out", str(out)]) == 0
    source = json.loads((out / pretrained.AGENT_FILE).read_text())["source"]
    assert "(nothing left out)" in source["trained_on"] and source["train"]["margin_weight"] == 0.5
    assert pretrained.load_agent_folder(out).network_config.dense_heads


def test_pretrain_refuses_what_cannot_work(tmp_path, capsys):
    def refused(*argv):
        with pytest.raises(SystemExit):
            pretrain_cli.main([*argv, "--out", str(tmp_path / "x")])
        return capsys.readouterr().err

    assert "plays one board size only" in refused("--config", SMOKE, "--board", "3x3", "--steps", "1")
    assert "no exact table" in refused("--config", SMOKE, "--board", "4x4", "--steps", "1", "network.kind=graph")
    assert "not 2x2" in refused("--config", SMOKE, "--labels", "3x3", "--steps", "1")
    assert "network.widht" in refused("--config", SMOKE, "--steps", "1", "network.widht=3")
    assert "must be positive" in refused("--config", SMOKE, "--steps", "0")
    assert "--final-lr-fraction" in refused("--config", SMOKE, "--steps", "1", "--final-lr-fraction", "-0.1")
    assert "--exclude nothing.npz" in refused("--config", SMOKE, "--steps", "1", "--exclude", "nothing.npz")
    assert not (tmp_path / "x").exists()


def test_the_shipped_warm_start_starts_a_run_on_any_board(tmp_path):
    warm = pretrained.load_warm_start("4x4")
    assert warm.network_config.kind == "graph" and (warm.rows, warm.cols) == (4, 4)
    assert "4x4" in pretrained.available_warm_starts() and "supervised" not in pretrained.available()
    net = warm.network_config
    overrides = [f"run.dir={tmp_path / 'run'}", f"network.kind={net.kind}", f"network.width={net.width}",
                 f"network.blocks={net.blocks}", f"network.value_hidden={net.value_hidden}"]
    started = train_boxeszero.BoxesZeroTraining(
        config_lib.load_config(SMOKE, [*overrides, "run.init_from=supervised:4x4"])).init_state()
    chex.assert_trees_all_equal(warm.params, started.train_state.params)  # 4x4's network, on the 2x2 smoke board
    with pytest.raises(config_lib.ConfigError, match="no shipped warm start supervised:9x9; there are: supervised:4x4"):
        train_boxeszero.BoxesZeroTraining(
            config_lib.load_config(SMOKE, [*overrides, "run.init_from=supervised:9x9"])).init_state()
