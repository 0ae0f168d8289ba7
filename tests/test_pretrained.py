"""Pretrained agents: every shipped one beats level 1 on its board; export and load round-trip; an export with no
--out goes to the user's folder of agents and plays by name, the shipped agents untouched; clear errors."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from dabjax.cli import pretrained as pretrained_cli
from dabjax.evaluation import agent_registry, arena, pretrained
from dabjax.game import env as env_lib
from dabjax.game import policies
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.search import heads, mcts, network
from dabjax.training import checkpoint

SHIPPED = pretrained.available(pretrained.shipped_folder())


def test_the_cpu_boards_ship_agents(capsys):
    assert {"3x3", "4x4", "5x5"} <= set(SHIPPED)
    assert pretrained_cli.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith("pretrained agents: ") and "pretrained:5x5" in listed[0]
    assert listed[1] == "warm starts (run.init_from): supervised:4x4, supervised:4x4-32x8"


@pytest.mark.parametrize("board", SHIPPED)
def test_shipped_agent_beats_level1(board):
    geometry = board_geometry(*parse_board_size(board))
    agent = agent_registry.make_agent(f"pretrained:{board}", geometry)
    result = arena.head_to_head(geometry, agent, policies.level1, jax.random.PRNGKey(0), num_games=40)
    assert result.win_rate >= 0.9, result


def test_export_then_load_gives_the_same_agent(tmp_path, capsys):
    geometry = board_geometry(2, 2)
    config = network.NetworkConfig(kind="mlp", width=8, blocks=1, value_hidden=8)
    params = network.init_params(config, geometry.grid_shape, jax.random.PRNGKey(3))
    run = tmp_path / "run"
    store = checkpoint.CheckpointStore(run)
    meta = dict(rows=2, cols=2, network=dataclasses.asdict(config),
                search=dataclasses.asdict(mcts.SearchConfig(num_simulations=8)), wall_time=90.0)
    store.save(7, params, {"step": np.int32(7)}, meta)
    store.close()
    out = tmp_path / "shipped" / "2x2"
    assert pretrained_cli.main(["export", str(run), "--sims", "4", "--out", str(out)]) == 0
    assert "iteration 7" in capsys.readouterr().out
    assert pretrained.available(out.parent) == ["2x2"]
    loaded = pretrained.load_pretrained("2x2", root=out.parent)
    assert (loaded.rows, loaded.cols, loaded.iteration) == (2, 2, 7)
    assert loaded.network_config == config and loaded.search_config.num_simulations == 4
    assert loaded.wall_time == pytest.approx(90.0)
    for got, want in zip(jax.tree_util.tree_leaves(loaded.params), jax.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    agent = agent_registry.checkpoint_agent(loaded, geometry)
    states = env_lib.batch_init(geometry, 3)
    moves = np.asarray(agent(geometry, jax.random.PRNGKey(0), states))
    assert moves.shape == (3,) and ((moves >= 0) & (moves < geometry.num_lines)).all()


def tiny_run(folder, rows: int, cols: int, iteration: int, seed: int = 3):
    """A run directory with one checkpoint (``iteration``) of a tiny MLP on the board; its parameters."""
    config = network.NetworkConfig(kind="mlp", width=8, blocks=1, value_hidden=8)
    params = network.init_params(config, board_geometry(rows, cols).grid_shape, jax.random.PRNGKey(seed))
    store = checkpoint.CheckpointStore(folder)
    meta = dict(rows=rows, cols=cols, network=dataclasses.asdict(config),
                search=dataclasses.asdict(mcts.SearchConfig(num_simulations=2)), wall_time=60.0)
    store.save(iteration, params, {"step": np.int32(iteration)}, meta)
    store.close()
    return params


def folder_bytes(folder) -> dict:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_export_with_no_out_goes_to_the_users_folder_and_plays_by_name(tmp_path, monkeypatch, capsys):
    """``dabjax pretrained export RUN`` never writes into the package: the 3x3 export lands in $DABJAX_AGENTS/3x3,
    the shipped 3x3 agent keeps its bytes, and ``pretrained:3x3`` is the export (the user's folder first) until
    the export is gone."""
    agents = tmp_path / "agents"
    monkeypatch.setenv(pretrained.AGENTS_VARIABLE, str(agents))
    assert pretrained.user_folder() == agents
    shipped_before = folder_bytes(pretrained.shipped_folder())
    assert "3x3/params.msgpack" in shipped_before
    params = tiny_run(tmp_path / "run", 3, 3, iteration=7)
    assert pretrained_cli.main(["export", str(tmp_path / "run")]) == 0
    assert f"wrote {agents / '3x3'}:" in capsys.readouterr().out
    assert folder_bytes(pretrained.shipped_folder()) == shipped_before
    assert pretrained.available(agents) == ["3x3"] and "3x3" in pretrained.available()
    geometry = board_geometry(3, 3)
    loaded, _ = agent_registry.load_network("pretrained:3x3", geometry)
    assert loaded.iteration == 7 and loaded.network_config.kind == "mlp"
    for got, want in zip(jax.tree_util.tree_leaves(loaded.params), jax.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    moves = np.asarray(agent_registry.make_agent("pretrained:3x3:0", geometry)(
        geometry, jax.random.PRNGKey(0), env_lib.batch_init(geometry, 2)))
    assert ((moves >= 0) & (moves < geometry.num_lines)).all()
    assert pretrained_cli.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[2] == f"yours, played before the shipped ones ({agents}): pretrained:3x3"
    for path in (agents / "3x3").iterdir():
        path.unlink()
    assert pretrained.agent_folder("3x3") == pretrained.shipped_folder() / "3x3"  # the shipped one again
    assert pretrained.load_pretrained("3x3").network_config.width != 8


def test_replacing_a_shipped_agent_takes_the_flag_and_a_clone(tmp_path, monkeypatch, capsys):
    """``--replace-shipped`` writes over the package's agent of the board, and only there; it is refused where the
    package is an installed one (site-packages), and beside ``--out``."""
    agents = tmp_path / "agents"
    monkeypatch.setenv(pretrained.AGENTS_VARIABLE, str(agents))
    tiny_run(tmp_path / "old", 2, 2, iteration=3, seed=1)
    tiny_run(tmp_path / "new", 2, 2, iteration=7, seed=2)
    clone = tmp_path / "clone" / "dabjax" / "pretrained"
    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "dabjax" / "pretrained"
    for shipped in (clone, installed):
        pretrained.save_agent_folder(shipped / "2x2", checkpoint.load_for_play(tmp_path / "old"), {"iteration": 3})
    monkeypatch.setattr(pretrained, "shipped_folder", lambda: clone)
    assert not pretrained.installed_in_site_packages(clone) and pretrained.installed_in_site_packages(installed)
    assert pretrained_cli.main(["export", str(tmp_path / "new"), "--replace-shipped"]) == 0
    assert f"wrote {clone / '2x2'} (replaced the agent there):" in capsys.readouterr().out
    assert pretrained.load_pretrained("2x2").iteration == 7 and not agents.exists()
    both = ["export", str(tmp_path / "new"), "--replace-shipped", "--out", str(tmp_path / "o")]
    assert pretrained_cli.main(both) == 2
    assert "give one" in capsys.readouterr().err and not (tmp_path / "o").exists()
    monkeypatch.setattr(pretrained, "shipped_folder", lambda: installed)
    before = folder_bytes(installed)
    assert pretrained_cli.main(["export", str(tmp_path / "new"), "--replace-shipped"]) == 2
    assert "--replace-shipped refused" in capsys.readouterr().err
    assert folder_bytes(installed) == before and pretrained.load_pretrained("2x2").iteration == 3
    assert pretrained_cli.main(["export", str(tmp_path / "new")]) == 0  # without the flag: the user's folder
    assert folder_bytes(installed) == before and pretrained.load_pretrained("2x2").iteration == 7
    assert pretrained.load_pretrained("2x2", root=installed).iteration == 3


def test_errors_name_what_exists():
    with pytest.raises(ValueError, match="no pretrained agent for board '7x7'.*exist for: .*3x3"):
        agent_registry.make_agent("pretrained:7x7", board_geometry(7, 7))
    with pytest.raises(ValueError, match="plays the 3x3 board, not 2x2"):
        agent_registry.make_agent("pretrained:3x3", board_geometry(2, 2))
    with pytest.raises(ValueError, match="write pretrained:RxC"):
        agent_registry.make_agent("pretrained:", board_geometry(3, 3))


def test_load_source_reads_every_kind_of_name(tmp_path):
    """``run.init_from`` and the value bench's ``--trained`` take the same names."""
    shipped = pretrained.load_source("pretrained:5x5:128")
    assert (shipped.rows, shipped.cols) == (5, 5)
    warm = pretrained.load_source("supervised:4x4")
    assert (warm.rows, warm.cols) == (4, 4) and warm.network_config.kind == "graph"
    folder = tmp_path / "agent"
    pretrained.save_agent_folder(folder, warm, {"note": "copy"})
    copied = pretrained.load_source(str(folder))
    assert copied.network_config == warm.network_config
    for got, want in zip(jax.tree_util.tree_leaves(copied.params), jax.tree_util.tree_leaves(warm.params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match="no shipped warm start supervised:9x9"):
        pretrained.load_source("supervised:9x9")
    with pytest.raises(FileNotFoundError):
        pretrained.load_source(str(tmp_path / "missing"))


def test_warm_starts_add_or_drop_the_dense_heads_and_refuse_any_other_difference():
    """``run.init_from``: the shipped agents (trained with the dense heads) start a network with them, heads
    included, or one without them (their heads dropped); a network without heads (``supervised:4x4``) starts one
    with them (fresh heads); any other difference is refused, naming both networks."""
    shipped = pretrained.load_source("pretrained:4x4")
    assert shipped.network_config.dense_heads
    kept = pretrained.load_to_continue("pretrained:4x4", shipped.network_config, 4, 4)
    assert heads.HEAD_PARAMS in kept.params["params"]
    headless = dataclasses.replace(shipped.network_config, dense_heads=False)
    assert pretrained.load_to_continue("pretrained:4x4", headless, 4, 4).network_config.dense_heads
    warm = pretrained.load_source("supervised:4x4")
    with_heads = dataclasses.replace(warm.network_config, dense_heads=True)
    loaded = pretrained.load_to_continue("supervised:4x4", with_heads, 4, 4)
    assert not loaded.network_config.dense_heads  # the trunk's parameters; the trainer adds fresh heads
    wider = dataclasses.replace(with_heads, width=64)
    with pytest.raises(ValueError, match="the config's network section asks for"):
        pretrained.load_to_continue("supervised:4x4", wider, 4, 4)
