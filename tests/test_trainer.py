"""The trainer end to end on the smoke config: training, resuming (also after a kill), configs, sweeps."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import trace_counts

from dabjax.cli import sweep as sweep_lib
from dabjax.cli import train as train_cli
from dabjax.evaluation import pretrained
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.runs import train_boxeszero
from dabjax.search import mcts, network, tree_nodes
from dabjax.solvers import labelled
from dabjax.training import checkpoint, curriculum, learner, replay, supervised, sweep_file
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib
from dabjax.training.config import CurriculumSection

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")


def smoke(tmp_path, *overrides):
    return config_lib.load_config(SMOKE, [f"run.dir={tmp_path / 'run'}", *overrides])


def metrics_of(run_dir):
    return [json.loads(line) for line in (pathlib.Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def test_smoke_config_trains_end_to_end_and_resumes(tmp_path):
    config = smoke(tmp_path)
    last = train_boxeszero.train(config, quiet=True)
    run_dir = pathlib.Path(config.run.dir)
    lines = metrics_of(run_dir)
    assert [m["iteration"] for m in lines] == [1, 2, 3]
    assert last["iteration"] == 3 and np.isfinite(last["loss"])
    assert lines[0]["searched_positions"] > 0 and lines[0]["buffer_size"] > 0
    assert "eval/win_rate_vs_level1" in lines[1]  # eval.every = 2
    assert len(lines[0]["samples_by_move"]) == board_geometry(2, 2).num_lines
    assert (run_dir / "config.yaml").read_text() == config_lib.to_yaml(config)
    assert any((run_dir / "tb").iterdir())
    store = checkpoint.CheckpointStore(run_dir, keep=2)
    assert store.iterations() == [2, 3]  # last k kept
    store.close()
    # The same command with a larger budget resumes from iteration 3.
    more = smoke(tmp_path, "run.iterations=5")
    train_boxeszero.train(more, quiet=True)
    assert [m["iteration"] for m in metrics_of(run_dir)] == [1, 2, 3, 4, 5]
    played = checkpoint.load_for_play(run_dir)
    assert played.iteration == 5 and (played.rows, played.cols) == (2, 2)
    # Loading it for another board or network fails clearly, and leaves the run's config alone.
    before = (run_dir / "config.yaml").read_text()
    with pytest.raises(ValueError, match="is for a 2x2 board, but the config asks for 2x3"):
        train_boxeszero.train(smoke(tmp_path, "board.cols=3"), quiet=True)
    with pytest.raises(ValueError, match="has network"):
        train_boxeszero.train(smoke(tmp_path, "network.width=4"), quiet=True)
    assert (run_dir / "config.yaml").read_text() == before


def test_checkpoints_without_the_replay_buffer_resume_with_it_empty(tmp_path, capsys):
    """``run.checkpoint_replay: false`` leaves the buffer (most of a big run's checkpoint) out; the resume says so,
    starts with an empty buffer and trains on; the default keeps it, and a resume then starts with it full."""
    config = smoke(tmp_path, "run.iterations=2", "eval.every=0", "run.checkpoint_replay=false")
    train_boxeszero.train(config, quiet=True)
    run_dir = pathlib.Path(config.run.dir)
    store = checkpoint.CheckpointStore(run_dir, keep=2)
    assert store.read_meta(2)[train_boxeszero.REPLAY_SAVED] is False
    store.close()
    full = smoke(tmp_path / "full", "run.iterations=2", "eval.every=0")
    train_boxeszero.train(full, quiet=True)
    # Which checkpoint holds the buffer shows in what a resume restores (below): on this tiny board the buffer is
    # a few KB, less than the run-to-run spread of the compressed optimiser state, so sizes cannot tell.
    capsys.readouterr()
    for run, replay_saved in ((config, False), (full, True)):
        training = train_boxeszero.BoxesZeroTraining(smoke(pathlib.Path(run.run.dir).parent, "run.iterations=3"))
        store = checkpoint.CheckpointStore(run.run.dir, keep=2)
        resumed = training.restore(store, 2, training.init_state(new_run=False))
        store.close()
        assert int(resumed.iteration) == 2
        held = int((np.asarray(resumed.buffer.iteration) >= 0).sum())  # blocks written
        assert (held > 0) == replay_saved, (replay_saved, held)
    assert "holds no replay buffer" in capsys.readouterr().err
    # The same command with a larger budget goes on from there, even with other games (another card's: the
    # buffer's shape follows them, and no buffer is restored).
    train_boxeszero.train(smoke(tmp_path, "run.iterations=3", "eval.every=0", "run.checkpoint_replay=false",
                          f"selfplay.games={2 * config.selfplay.games}"), quiet=True)
    assert [m["iteration"] for m in metrics_of(run_dir)] == [1, 2, 3]
    assert metrics_of(run_dir)[-1]["buffer_size"] > 0


def test_a_graph_network_trains_and_warm_starts_another_board(tmp_path):
    graph = ["network.kind=graph", "network.width=8", "network.blocks=2", "run.iterations=1", "eval.every=0"]
    small = config_lib.load_config(SMOKE, [f"run.dir={tmp_path / 'small'}", *graph])
    train_boxeszero.train(small, quiet=True)
    source = checkpoint.load_for_play(small.run.dir)
    larger_overrides = [f"run.dir={tmp_path / 'larger'}", "board.cols=3", f"run.init_from={small.run.dir}", *graph]
    larger = config_lib.load_config(SMOKE, larger_overrides)
    training = train_boxeszero.BoxesZeroTraining(larger)
    started = training.init_state()
    for a, b in zip(jax.tree_util.tree_leaves(source.params), jax.tree_util.tree_leaves(started.train_state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the 2x2 network, now on 2x3
    train_boxeszero.train(larger, quiet=True)
    assert checkpoint.load_for_play(larger.run.dir).cols == 3
    # A resume reads its own checkpoint, never the warm start again: it works with the source gone.
    shutil.rmtree(small.run.dir)
    train_boxeszero.train(config_lib.load_config(SMOKE, [*larger_overrides, "run.iterations=2"]), quiet=True)
    assert checkpoint.load_for_play(larger.run.dir).iteration == 2
    # An MLP reads one board's grid; another network setting is another network: both refused by name.
    mlp_small = smoke(tmp_path, "run.iterations=1", "eval.every=0")
    train_boxeszero.train(mlp_small, quiet=True)
    with pytest.raises(config_lib.ConfigError, match="run.init_from .* plays one board size only"):
        train_boxeszero.BoxesZeroTraining(smoke(tmp_path / "x", "board.cols=3", f"run.init_from={mlp_small.run.dir}")
                                    ).init_state()
    with pytest.raises(config_lib.ConfigError, match="run.init_from .* holds a network"):
        train_boxeszero.BoxesZeroTraining(smoke(tmp_path / "y", "network.width=8", f"run.init_from={mlp_small.run.dir}")
                                    ).init_state()


def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    """Kill -9 in the middle of training; the restart loses nothing before the last checkpoint."""
    run_dir = tmp_path / "run"
    command = [sys.executable, str(ROOT / "train.py"), "--config", SMOKE, f"run.dir={run_dir}",
               "run.iterations=50", "eval.every=0", "--quiet"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    checkpoints = run_dir / "checkpoints"
    while time.time() < deadline:
        done = [p for p in checkpoints.glob("*") if p.name.isdigit()] if checkpoints.exists() else []
        if len(done) >= 1 and max(int(p.name) for p in done) >= 2:
            break
        assert process.poll() is None, process.stderr.read().decode()
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    store = checkpoint.CheckpointStore(run_dir, keep=2)
    saved = store.latest_iteration()
    store.close()
    assert saved is not None and saved >= 2
    logged = [m["iteration"] for m in metrics_of(run_dir)]
    assert logged[: saved] == list(range(1, saved + 1))
    resumed = subprocess.run(
        command[:-2] + [f"run.iterations={saved + 2}", "eval.every=0", "--quiet"],
        cwd=ROOT, env=env, capture_output=True, timeout=240,
    )
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert [m["iteration"] for m in metrics_of(run_dir)] == list(range(1, saved + 3))
    assert not list(checkpoints.glob("*.orbax-checkpoint-tmp*"))  # a save the kill cut short is removed
    assert all((path / checkpoint.MANIFEST_FILE).is_file() for path in checkpoints.glob("[0-9]*"))


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(config_lib.ConfigError, match="train.lrr"):
        smoke(tmp_path, "train.lrr=1")
    with pytest.raises(config_lib.ConfigError, match="search.num_simulations"):
        smoke(tmp_path, "search.num_simulations=-3")
    with pytest.raises(config_lib.ConfigError, match="curriculum.start_step"):
        smoke(tmp_path, "curriculum.start_step=99")
    with pytest.raises(config_lib.ConfigError, match="network.kind"):
        smoke(tmp_path, "network.kind=gnn")
    with pytest.raises(config_lib.ConfigError, match="curriculum.revisit"):
        smoke(tmp_path, "curriculum.revisit=1.0")
    with pytest.raises(config_lib.ConfigError, match="curriculum.revisit needs curriculum.backward"):
        smoke(tmp_path, "curriculum.revisit=0.5", "curriculum.backward=false")
    with pytest.raises(config_lib.ConfigError, match="does not exist"):
        config_lib.load_config(str(tmp_path / "missing.yaml"))
    assert train_cli.main(["--config", SMOKE, "selfplay.games=zero"]) == 2


def test_sections_are_the_core_settings_and_earlier_run_configs_load(tmp_path):
    config = config_lib.TrainConfig()
    # Declared once, defaults once: the sections the core reads are its own (frozen, hashable) settings.
    assert config.network == network.NetworkConfig() and config.search == mcts.SearchConfig()
    assert isinstance(config.augmentation, tree_nodes.ExtractionConfig)
    assert (config.search.num_simulations, config.network.width, config.network.blocks) == (32, 32, 3)
    assert config.augmentation.max_nodes == 4
    assert len({hash(config.network), hash(config.search), hash(config.augmentation)}) == 3
    # Search takes the board's early termination; the search section has no key of its own for it.
    assert config.board.env() == env_lib.Env(config.board.rows, config.board.cols)
    assert config_lib.load_config(None, ["board.early_termination=true"]).board.env().early_termination
    with pytest.raises(config_lib.ConfigError, match="search.early_termination"):
        smoke(tmp_path, "search.early_termination=true")
    # A config.yaml as run directories hold it from before (the augmentation keys in their old order, the
    # bands' offsets written as floats) loads as the same config; so does a config's own YAML.
    old = tmp_path / "config.yaml"
    old.write_text(
        "augmentation:\n  nodes: true\n  max_nodes: 4\n  bands: [[0.0, 0.15, 0.5], [3.0, 0.2, 0.6], [5.0, 0.21, 0.7],"
        " [10.0, 0.22, 0.8], [15.0, 0.23, 0.85]]\n  symmetries: random\n"
    )
    assert config_lib.load_config(str(old)) == config
    old.write_text(config_lib.to_yaml(smoke(tmp_path)))
    assert config_lib.load_config(str(old)) == smoke(tmp_path)


def test_the_removed_chain_features_fails_at_start_up_and_a_run_config_holding_it_off_resumes(tmp_path,
                                                                                               monkeypatch):
    """``network.chain_features``, an option dabjax does without: set in an override, a config file or a sweep it
    fails at start-up naming the key; a run directory written with it off (its config.yaml and checkpoints list
    ``chain_features: false``) loads as the same config and resumes from its own config.yaml."""
    removed = "config key 'network.chain_features': dabjax has no network.chain_features option"
    with pytest.raises(config_lib.ConfigError, match=re.escape(removed)):
        smoke(tmp_path, "network.chain_features=true")
    on = tmp_path / "chain.yaml"
    on.write_text("board: {rows: 2, cols: 2}\nnetwork: {kind: mlp, width: 16, chain_features: true}\n")
    with pytest.raises(config_lib.ConfigError, match=re.escape(removed)):
        config_lib.load_config(str(on))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: {SMOKE}\ngrid: {{network.chain_features: [true]}}\n")
    with pytest.raises(config_lib.ConfigError, match=re.escape(removed)):
        sweep_lib.run_sweep(str(sweep), None, [f"run.dir={tmp_path / 'sweep'}"], quiet=True)
    assert train_cli.main(["--config", SMOKE, f"run.dir={tmp_path / 'cli'}", "network.chain_features=true"]) == 2
    assert not (tmp_path / "cli").exists()

    written = trainer_lib.Trainer.meta

    def meta_listing_it_off(self, state):
        meta = written(self, state)
        meta["network"]["chain_features"] = False
        meta["config"]["network"]["chain_features"] = False
        return meta

    config = smoke(tmp_path, "run.iterations=1", "eval.every=0")
    with monkeypatch.context() as patch:
        patch.setattr(trainer_lib.Trainer, "meta", meta_listing_it_off)
        train_boxeszero.train(config, quiet=True)
    saved = pathlib.Path(config.run.dir) / "config.yaml"
    text = saved.read_text()
    assert "\nnetwork:\n" in text and "chain_features" not in text
    saved.write_text(text.replace("\nnetwork:\n", "\nnetwork:\n  chain_features: false\n"))
    assert config_lib.load_config(str(saved)) == config
    train_boxeszero.train(config_lib.load_config(str(saved), ["run.iterations=2"]), quiet=True)
    assert [m["iteration"] for m in metrics_of(config.run.dir)] == [1, 2]
    assert checkpoint.load_for_play(config.run.dir).network_config == config.network


def test_modes_set_their_components(tmp_path):
    az = smoke(tmp_path, "mode=alphazero")
    assert not az.curriculum.backward and az.initial_start_step == 0
    assert not az.search.endgame_pruning and not az.search.chain_pruning and not az.augmentation.nodes
    assert az.targets.z_weight_stage2 == 1.0
    # A BoxesZero file's revisiting (the smoke config's 0.5) does not carry over to mode=alphazero.
    assert smoke(tmp_path).curriculum.revisit == 0.5 and az.curriculum.revisit == 0.0
    ablation = smoke(tmp_path, "mode=alphazero", "search.chain_pruning=true")
    assert ablation.search.chain_pruning  # switches stay free to override
    bz = smoke(tmp_path)
    assert bz.curriculum.backward and bz.initial_start_step == 6


def test_every_shipped_config_loads_and_fits_its_warm_start():
    from dabjax.baselines import td_config
    for path in (ROOT / "configs").glob("*.yaml"):
        if train_cli.config_file_mode(path) == "td":
            assert td_config.load_td_config(str(path)).run.dir
        else:
            config = config_lib.load_config(str(path))
            assert config.mode in config_lib.MODES
            if config.run.init_from:  # a shipped warm start fits the config's network (heads aside)
                pretrained.load_to_continue(config.run.init_from, config.network, config.board.rows,
                                            config.board.cols)
    sweeps = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))
    assert sweeps
    for path in sweeps:  # every run of every shipped sweep validates (a bad one raises ConfigError)
        runs, base = sweep_file.sweep_runs(path)
        for _, overrides in runs:
            config_lib.load_config(base, overrides)
        assert len({name for name, _ in runs}) == len(runs)  # each run gets its own directory


def test_sweep_runs_each_config_in_its_own_directory(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"base: {SMOKE}\noverrides: [run.iterations=1, eval.every=0]\n"
        "grid: {search.chain_pruning: [true, false]}\n"
    )
    results = sweep_lib.run_sweep(str(sweep), None, [f"run.dir={tmp_path / 'sweep'}"], quiet=True)
    assert [name for name, _ in results] == ["chain_pruning=True", "chain_pruning=False"]
    for name, _ in results:
        assert (tmp_path / "sweep" / name / "metrics.jsonl").exists()
    assert "chain_pruning=False" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"base: {SMOKE}\ngrid: {{train.nope: [1]}}\n")
    with pytest.raises(config_lib.ConfigError, match="train.nope"):
        sweep_lib.run_sweep(str(bad), None, [f"run.dir={tmp_path / 'bad'}"], quiet=True)


def test_curriculum_advances_on_ratios_or_after_mit():
    config = CurriculumSection(max_iterations_per_step=3, mq_ratio_threshold=0.75, nv_ratio_threshold=0.85)
    state = curriculum.CurriculumState(start_step=5, last_advance=0)
    state, moved = curriculum.advance(config, state, 0, mqr=0.9, nvr=0.5)
    assert not moved and state.start_step == 5
    state, moved = curriculum.advance(config, state, 1, mqr=0.8, nvr=0.9)
    assert moved and state.start_step == 4 and state.last_advance == 2
    for iteration in (2, 3):
        state, moved = curriculum.advance(config, state, iteration, mqr=0.0, nvr=0.0)
        assert not moved
    state, moved = curriculum.advance(config, state, 4, mqr=0.0, nvr=0.0)  # 3 iterations at st = 4
    assert moved and state.start_step == 3
    done = curriculum.CurriculumState(start_step=0, last_advance=0)
    assert curriculum.advance(config, done, 9, 1.0, 1.0) == (done, False) and done.stage == 2


def test_replay_keeps_the_last_iterations_and_counts_drops():
    g = board_geometry(1, 1)
    buffer = replay.init_buffer(g, iterations=2, capacity_per_iteration=3)
    samples = replay.empty_samples(g, (5,))
    samples = samples.replace(value=jnp.arange(5, dtype=jnp.float32), valid=jnp.array([1, 0, 1, 1, 1], bool))
    buffer, dropped = replay.insert(buffer, samples, jnp.int32(0))
    assert int(dropped) == 1  # 4 valid, 3 slots: the last one in order is dropped
    assert np.asarray(buffer.samples.value[0]).tolist() == [0.0, 2.0, 3.0]
    buffer, _ = replay.insert(buffer, samples.replace(value=samples.value + 10), jnp.int32(1))
    buffer, _ = replay.insert(buffer, samples.replace(value=samples.value + 20), jnp.int32(2))
    assert sorted(np.asarray(buffer.iteration).tolist()) == [1, 2]  # iteration 0 replaced whole
    weights = np.asarray(replay.sample_weights(buffer, jnp.int32(2), 0.5))
    assert weights[np.asarray(buffer.iteration) == 2].max() == 1.0
    assert weights[np.asarray(buffer.iteration) == 1].max() == 0.5


def test_fixed_samples_join_every_batch_with_loss_weight_one():
    g = board_geometry(2, 2)
    config = network.NetworkConfig(kind="mlp", width=8, blocks=1, value_hidden=8)
    model = network.PolicyValueNet(config)
    optimizer = learner.make_optimizer(1e-3, 1.0, 1)
    state = learner.init_train_state(network.init_params(config, g.grid_shape, jax.random.PRNGKey(0)), optimizer)
    run = learner.make_train_steps(g, model, optimizer, 0.0)
    fixed, _ = supervised.samples_from_set(labelled.build_set(g, [2, 3, 4], 6, seed=3))
    count = int(fixed.valid.shape[0])
    index, sym = learner.fixed_plan(jax.random.PRNGKey(1), 2, 5, count, g.num_symmetries)
    assert index.shape == sym.shape == (2, 5)
    assert ((index >= 0) & (index < count)).all() and ((sym >= 0) & (sym < g.num_symmetries)).all()
    # The buffer's samples weigh 0 here, so the step's loss is the loss of the fixed samples' batch alone.
    buffer = replay.empty_samples(g, (10,)).replace(valid=jnp.ones(10, bool))
    zero = jnp.zeros(10, jnp.float32)
    plan = jnp.zeros((2, 3), jnp.int32)
    _, metrics = run(state, buffer, zero, plan, plan, 1, learner.FixedBatch(samples=fixed, index=index, sym=sym))
    alone = learner.make_batch(g, fixed, jnp.ones(count, jnp.float32), index[0], sym[0])
    _, expected = learner.loss_fn(state.params, model, alone, 0.0)
    assert metrics["loss"] == pytest.approx(float(expected["loss"]), rel=1e-5) and metrics["loss"] > 0
    _, without = run(state, buffer, zero, plan, plan, 1)
    assert without["loss"] == 0.0


def test_exact_labels_fill_a_share_of_every_batch_in_a_run(tmp_path, capsys):
    built = labelled.build_set(board_geometry(2, 2), [2, 3, 4, 5, 6], 10, seed=5)
    labels, measured = tmp_path / "labels.npz", tmp_path / "measured.npz"
    labelled.save(built, labels)
    labelled.save(labelled.subset(built, np.arange(len(built)) < 5), measured)
    config = smoke(tmp_path, f"train.exact_labels={labels}", "train.exact_share=0.5", f"eval.labelled_set={measured}",
                   "eval.every=0")
    assert config.train.exact_labels == str(labels.resolve()) and config.exact_per_batch == config.train.batch_size // 2
    written = tmp_path / "config.yaml"
    written.write_text(config_lib.to_yaml(config))
    assert config_lib.load_config(str(written)) == config  # a run directory's config names the same set
    with trace_counts.counting_traces() as traces:
        training = train_boxeszero.BoxesZeroTraining(config)
    # A built set holds each position once: exactly the 5 positions of the measured set are left out.
    assert int(training.trainer.exact_samples.valid.sum()) == len(built) - 5
    assert (f"exact labels: {len(built) - 5} positions of {labels.resolve()} (5 positions also in "
            f"{measured.resolve()} left out), 8 of every batch of 16") in capsys.readouterr().err
    state = training.init_state()
    for _ in range(2):
        state, metrics = training.iterate(state)
        assert np.isfinite(metrics["loss"]) and metrics["train_steps"] > 0
    assert traces and all(count == 1 for count in traces.values()), traces  # drawn every iteration, compiled once
    # train.exact_share=0 turns them off (a sweep's baseline): nothing is read.
    off = train_boxeszero.BoxesZeroTraining(smoke(tmp_path, f"train.exact_labels={labels}", "train.exact_share=0"))
    assert off.trainer.exact_samples is None and off.trainer.exact_per_batch == 0
    # What cannot serve fails at start-up, naming the key.
    with pytest.raises(config_lib.ConfigError, match="train.exact_share"):
        smoke(tmp_path, f"train.exact_labels={labels}", "train.exact_share=1.0")
    with pytest.raises(config_lib.ConfigError, match="train.exact_share 0.001 of train.batch_size"):
        smoke(tmp_path, f"train.exact_labels={labels}", "train.exact_share=0.001")
    with pytest.raises(config_lib.ConfigError, match="train.exact_labels"):
        smoke(tmp_path, f"train.exact_labels={tmp_path / 'missing.npz'}")
    with pytest.raises(config_lib.ConfigError, match="train.exact_labels '3x3': a 3x3 set, training is on 2x2"):
        train_boxeszero.BoxesZeroTraining(smoke(tmp_path, "train.exact_labels=3x3"))
    with pytest.raises(config_lib.ConfigError, match="train.exact_labels .*every training position is also in"):
        train_boxeszero.BoxesZeroTraining(smoke(tmp_path, f"train.exact_labels={labels}",
                                                f"eval.labelled_set={labels}"))
    with pytest.raises(config_lib.ConfigError, match="eval.labelled_set .*a 3x3 set"):
        train_boxeszero.BoxesZeroTraining(smoke(tmp_path, f"train.exact_labels={labels}", "eval.labelled_set=3x3"))
    with pytest.raises(ValueError, match="pass its samples"):
        trainer_lib.Trainer(config)


def test_a_checkpoint_of_the_removed_flat_optimizer_does_not_resume(tmp_path, monkeypatch):
    """A checkpoint written with ``train.flat_optimizer`` (removed: Adam's state as one vector) fails to resume
    naming the option and the way on; its network still starts a new run through ``run.init_from``."""
    written = trainer_lib.Trainer.meta

    def meta_of_a_flat_run(self, state):
        meta = written(self, state)
        meta["config"]["train"]["flat_optimizer"] = True
        return meta

    with monkeypatch.context() as patch:
        patch.setattr(trainer_lib.Trainer, "meta", meta_of_a_flat_run)
        train_boxeszero.train(smoke(tmp_path, "run.iterations=2", "eval.every=0"), quiet=True)
    where = (tmp_path / "run" / "checkpoints" / "2").absolute()
    with pytest.raises(config_lib.ConfigError, match=f"checkpoint {re.escape(str(where))} was written with "
                                                     f"train.flat_optimizer, which dabjax no longer has: "
                                                     f".*run.init_from={re.escape(str(where))}$"):
        train_boxeszero.train(smoke(tmp_path, "run.iterations=3", "eval.every=0"), quiet=True)
    fresh = config_lib.load_config(SMOKE, [f"run.dir={tmp_path / 'new'}", f"run.init_from={where}",
                                           "run.iterations=1", "eval.every=0"])
    assert train_boxeszero.train(fresh, quiet=True)["iteration"] == 1
