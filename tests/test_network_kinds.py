"""The candidate networks of the value work: the strings-and-coins graph network, the attention kinds and the
ResNet's global pooling (dabjax.search.network)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.evaluation import agent_registry, pretrained
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import attention, mcts, network, network_inputs
from dabjax.training import checkpoint

MLP_CONFIG = network.NetworkConfig(kind="mlp", width=8, blocks=0, value_hidden=8)


def random_observations(geometry, key, batch: int = 4):
    """Observations of random legal-looking positions: random lines, boxes with four sides claimed."""
    lines = jax.random.bernoulli(key, 0.45, (batch, geometry.num_lines))
    claimed = lines[:, jnp.asarray(geometry.box_lines)].all(-1)
    margin = jnp.arange(batch, dtype=jnp.int32) - 1
    return jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(lines, claimed, margin)


@pytest.fixture(scope="module")
def graph_net():
    config = network.NetworkConfig(kind="graph", width=16, blocks=3, value_hidden=8)
    params = network.init_params(config, (7, 7), jax.random.PRNGKey(0))
    return config, params, jax.jit(network.PolicyValueNet(config).apply)


ANY_BOARD_KINDS = [
    network.NetworkConfig(kind="graph", width=16, blocks=3, value_hidden=8),
    network.NetworkConfig(kind="graph_attention", width=16, blocks=2, value_hidden=8, attention_heads=2),
    network.NetworkConfig(kind="transformer", width=16, blocks=2, value_hidden=8, attention_heads=2),
]


@pytest.fixture(scope="module", params=ANY_BOARD_KINDS, ids=lambda config: config.kind)
def any_board_net(request):
    """A network of a kind that plays every board, its parameters (made on 3x3) and its jitted apply."""
    config = request.param
    params = network.init_params(config, (7, 7), jax.random.PRNGKey(0))
    # Fresh parameters leave the relation biases at zero: give them values, so that the tests see them act.
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: jax.random.normal(jax.random.PRNGKey(len(path)), x.shape)
        if any(getattr(k, "key", None) in ("relation", "link") for k in path) else x, params)
    return config, params, jax.jit(network.PolicyValueNet(config).apply)


def transposed_lines(small, tall) -> np.ndarray:
    """int ``[L]``: for each line of ``small`` (R x C), the line of ``tall`` (C x R) at the transposed grid cell."""
    cells = small.line_cells
    return tall.cell_line[cells[:, 1], cells[:, 0]]


def test_any_board_kinds_play_every_board_and_transposing_it_is_a_symmetry(any_board_net):
    """One set of parameters plays 2x4 and 4x2 (and 4x4): the value of a 2x4 position is the value of its
    transpose on 4x2, line for line the same logits, and the value depends on the position."""
    config, params, apply = any_board_net
    wide, tall = board_geometry(2, 4), board_geometry(4, 2)
    obs = random_observations(wide, jax.random.PRNGKey(7), batch=6)
    logits, value = apply(params, obs)
    tall_logits, tall_value = apply(params, jnp.swapaxes(obs, 1, 2))
    np.testing.assert_allclose(np.asarray(tall_value), np.asarray(value), atol=2e-5)
    np.testing.assert_allclose(np.asarray(tall_logits)[:, transposed_lines(wide, tall)], np.asarray(logits),
                               atol=2e-4)
    assert float(np.std(np.asarray(value))) > 1e-4  # six positions, six values
    big = board_geometry(4, 4)
    big_logits, big_value = apply(params, random_observations(big, jax.random.PRNGKey(8)))
    assert big_logits.shape == (4, big.num_lines) and bool((jnp.abs(big_value) <= 1).all())


def test_any_board_kinds_are_equivariant_under_the_board_symmetries(any_board_net):
    config, params, apply = any_board_net
    geometry = board_geometry(3, 3)
    obs = random_observations(geometry, jax.random.PRNGKey(5))
    logits, value = apply(params, obs)
    for sym in range(1, geometry.num_symmetries):
        moved = jax.vmap(lambda o: env_lib.symmetric_observation(geometry, o, sym))(obs)
        moved_logits, moved_value = apply(params, moved)
        expected = env_lib.symmetric_lines(geometry, logits, sym)
        np.testing.assert_allclose(np.asarray(moved_logits), np.asarray(expected), atol=2e-4)
        np.testing.assert_allclose(np.asarray(moved_value), np.asarray(value), atol=2e-5)


def test_attention_sees_the_whole_board_in_one_layer():
    """A line drawn in one corner moves the logit of the line in the opposite corner after one attention block:
    one message-passing round reaches only the neighbouring boxes (and the mean of all)."""
    geometry = board_geometry(4, 4)
    config = network.NetworkConfig(kind="transformer", width=16, blocks=1, value_hidden=8, attention_heads=2)
    params = network.init_params(config, geometry.grid_shape, jax.random.PRNGKey(0))
    apply = jax.jit(network.PolicyValueNet(config).apply)
    empty = jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(
        jnp.zeros((1, geometry.num_lines), bool), jnp.zeros((1, geometry.num_boxes), bool), jnp.zeros(1, jnp.int32))
    first, last = 0, geometry.num_lines - 1  # the top-left and the bottom-right lines
    drawn = empty.at[0, geometry.line_cells[first, 0], geometry.line_cells[first, 1], 0].set(1.0)
    assert float(jnp.abs(apply(params, drawn)[0][0, last] - apply(params, empty)[0][0, last])) > 1e-6


def test_token_relations_are_the_strings_and_coins_graph():
    geometry = board_geometry(2, 3)
    relations = attention.token_relations(geometry)
    count = geometry.num_lines + geometry.num_boxes + 1
    assert relations.relation.shape == (count, count) and relations.relation.max() < attention.NUM_RELATIONS
    kinds = relations.link_kind
    assert (kinds == kinds.T).all()
    line_box = attention.LINK_KINDS.index("line-box")
    assert (kinds[:geometry.num_lines, geometry.num_lines:-1] == line_box).sum() == 4 * geometry.num_boxes
    box_box = attention.LINK_KINDS.index("box-box")
    inner = int(geometry.line_box_valid.all(-1).sum())  # lines between two boxes
    assert (kinds == box_box).sum() == 2 * inner
    # A corner box meets the ground through its two edge lines; drawing one leaves one string to the ground.
    corner = geometry.num_lines  # box 0
    edge_lines = set(relations.link_lines[corner, -1]) - {geometry.num_lines}
    assert edge_lines == {int(line) for line in geometry.box_lines[0] if not geometry.line_box_valid[line].all()}
    undrawn = jnp.ones((1, geometry.num_lines), bool)
    state = attention.link_states(relations, undrawn)[0, corner, -1]
    cut = attention.link_states(relations, undrawn.at[0, min(edge_lines)].set(False))[0, corner, -1]
    box_ground = attention.LINK_KINDS.index("box-ground") * attention.LINK_STATES
    assert (int(state), int(cut)) == (box_ground + 2, box_ground + 1)


def test_position_of_reads_back_what_the_observation_encodes():
    geometry = board_geometry(2, 4)
    key_lines, key_margin = jax.random.split(jax.random.PRNGKey(4))
    lines = jax.random.bernoulli(key_lines, 0.5, (6, geometry.num_lines))
    claimed = lines[:, jnp.asarray(geometry.box_lines)].all(-1)
    margin = jax.random.randint(key_margin, (6,), -4, 5)
    obs = jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(lines, claimed, margin)
    read_lines, read_claimed, score, parity = network_inputs.position_of(obs)
    assert bool((read_lines == lines).all()) and bool((read_claimed == claimed).all())
    np.testing.assert_allclose(np.asarray(score), np.asarray(margin) * env_lib.SCORE_PLANE_SCALE)
    np.testing.assert_array_equal(np.asarray(parity), np.asarray((~lines).sum(-1) % 2))


def test_global_pooling_lets_a_far_corner_reach_every_line():
    geometry = board_geometry(4, 4)
    obs = random_observations(geometry, jax.random.PRNGKey(3), batch=1)
    corner = obs.at[:, 0, 0, 0].add(1.0)
    moved = {}
    for pooling in (False, True):
        config = network.NetworkConfig(width=8, blocks=1, value_hidden=8, global_pooling=pooling)
        params = network.init_params(config, geometry.grid_shape, jax.random.PRNGKey(0))
        model = network.PolicyValueNet(config)
        moved[pooling] = int((model.apply(params, corner)[0] != model.apply(params, obs)[0]).sum())
    assert moved[False] < geometry.num_lines and moved[True] == geometry.num_lines


def test_the_trunk_options_are_validated_and_saved_settings_need_them():
    with pytest.raises(ValueError, match="network.parity_plane"):
        network.NetworkConfig(parity_plane="yes")
    with pytest.raises(ValueError, match="network.global_pooling"):
        network.NetworkConfig(kind="mlp", global_pooling=True)
    with pytest.raises(ValueError, match="multiple of network.attention_heads"):
        network.NetworkConfig(kind="transformer", width=10, attention_heads=4)
    with pytest.raises(ValueError, match="network.kind must be one of"):
        network.NetworkConfig(kind="gnn")
    # Saved before the attention kinds: no attention_heads, read as before.
    older = dataclasses.asdict(network.NetworkConfig(kind="graph", width=8))
    del older["attention_heads"]
    assert network.config_from_saved(older) == network.NetworkConfig(kind="graph", width=8)
    saved = dataclasses.asdict(network.NetworkConfig(kind="mlp", width=8))
    assert network.config_from_saved(saved) == network.NetworkConfig(kind="mlp", width=8)
    del saved["parity_plane"], saved["global_pooling"]
    with pytest.raises(ValueError, match="lack \\['parity_plane', 'global_pooling'\\]"):
        network.config_from_saved(saved)


@pytest.mark.parametrize("board", ["3x3", "5x5"])
def test_saved_settings_with_the_removed_chain_features_read_as_without_it(board):
    """The shipped agents (and checkpoints) hold ``chain_features: false``, an option dabjax does without: it reads
    as the same network as settings without the key; ``true`` (a network of inputs this dabjax cannot build) is a
    ValueError naming it, never a network silently without them."""
    saved = json.loads((pretrained.shipped_folder() / board / pretrained.AGENT_FILE).read_text())["network"]
    assert saved["chain_features"] is False
    without = {name: value for name, value in saved.items() if name != "chain_features"}
    config = network.config_from_saved(saved)
    assert config == network.config_from_saved(without) == network.NetworkConfig(**without)
    assert not hasattr(config, "chain_features") and "chain_features" not in dataclasses.asdict(config)
    with pytest.raises(ValueError, match=r"network\.chain_features=True: this dabjax has no network\.chain_features "
                                         r"option"):
        network.config_from_saved({**saved, "chain_features": True})
    # Checkpoint metadata holding it reads the same way (what play and resumes load).
    agent = checkpoint.playable({}, {"rows": 3, "cols": 3, "network": saved, "search": {}}, 0, 0.0)
    assert agent.network_config == config


def test_an_agent_folder_plays_by_ckpt_and_a_graph_network_plays_any_board(tmp_path, graph_net):
    config, params, _ = graph_net
    for name, net, net_params in [("graph", config, params), ("mlp", MLP_CONFIG, None)]:
        net_params = net_params if net_params is not None else network.init_params(net, (5, 5), jax.random.PRNGKey(0))
        agent = checkpoint.PlayableCheckpoint(2, 2, net, mcts.SearchConfig(num_simulations=4), net_params, 0, 0.0, {})
        params_bytes, description = pretrained.describe(agent, {"method": "test"})
        (tmp_path / name).mkdir()
        (tmp_path / name / pretrained.PARAMS_FILE).write_bytes(params_bytes)
        (tmp_path / name / pretrained.AGENT_FILE).write_text(description)
    for rows, cols in [(2, 2), (2, 3)]:  # trained "on 2x2", played on 2x2 and 2x3
        geometry = board_geometry(rows, cols)
        play = agent_registry.make_agent(f"ckpt:{tmp_path / 'graph'}:4", geometry)
        states = env_lib.batch_init(geometry, 3)
        moves = np.asarray(play(geometry, jax.random.PRNGKey(0), states))
        assert moves.shape == (3,) and ((0 <= moves) & (moves < geometry.num_lines)).all()
    agent_registry.make_agent(f"ckpt:{tmp_path / 'mlp'}", board_geometry(2, 2))
    with pytest.raises(ValueError, match="2x2 board but the board is 2x3"):
        agent_registry.make_agent(f"ckpt:{tmp_path / 'mlp'}", board_geometry(2, 3))
