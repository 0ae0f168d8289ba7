"""The graph network's layout (dabjax.search.trunks): gathers with fixed tables and dense layers that take their
inputs apart compute the message-passing function as its definition writes it, with the same parameters, so
every saved agent and checkpoint plays as before."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_network_kinds import random_observations

from dabjax.game.geometry import board_geometry
from dabjax.search import network, network_kinds, trunks
from dabjax.search.network_inputs import position_of


class GraphTrunk(nn.Module):
    """The strings-and-coins message passing written as its definition reads, from the trunk's own inputs:
    one-hot incidence matrices, features concatenated (and broadcast) before each ``nn.Dense``. Its class name
    gives it the trunk's parameter paths."""

    width: int
    blocks: int
    parity_plane: bool
    dtype: jnp.dtype = jnp.float32
    attention_heads: int = 0  # the trunk's field; the definition has no attention (the shipped agents have none)

    @nn.compact
    def __call__(self, observation):
        _, height, width, _ = observation.shape
        geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
        num_boxes = geometry.num_boxes
        undrawn = ~position_of(observation)[0]
        ends = np.where(geometry.line_boxes >= 0, geometry.line_boxes, num_boxes)
        end_of = np.zeros((2, geometry.num_lines, num_boxes + 1), np.float32)
        for side in range(2):
            end_of[side, np.arange(geometry.num_lines), ends[:, side]] = 1.0
        incidence = jnp.asarray(np.minimum(end_of.sum(0), 1.0))  # [L, B + 1]

        def line_ends(nodes):
            return jnp.einsum("lv,nvd->nld", end_of[0], nodes), jnp.einsum("lv,nvd->nld", end_of[1], nodes)

        # The inputs are the trunk's own (what changed is how the graph is read and the layers laid out).
        node_in, line_in, position_in = trunks.GraphTrunk.graph_inputs(self, observation)

        dense = functools.partial(nn.Dense, self.width, kernel_init=trunks.kaiming)
        position = nn.relu(dense()(position_in))
        nodes = nn.relu(nn.LayerNorm()(dense()(node_in) + position[:, None]))
        edges = nn.relu(nn.LayerNorm()(dense()(line_in)))
        live = undrawn.astype(jnp.float32)[..., None]
        degree = jnp.maximum(jnp.einsum("lv,nl->nv", incidence, undrawn.astype(jnp.float32)), 1.0)[..., None]
        for _ in range(self.blocks):
            a, b = line_ends(nodes)
            message = nn.relu(dense()(jnp.concatenate([a + b, a * b, edges], -1)))
            edges = nn.LayerNorm()(edges + dense()(message))
            gathered = jnp.einsum("lv,nld->nvd", incidence, message * live) / degree
            pooled = nodes[:, :num_boxes].mean(axis=1, keepdims=True)
            update = nn.relu(dense()(jnp.concatenate(
                [nodes, gathered, jnp.broadcast_to(pooled, nodes.shape),
                 jnp.broadcast_to(position[:, None], nodes.shape)], -1)))
            nodes = nn.LayerNorm()(nodes + dense()(update))
        a, b = line_ends(nodes)
        line_states = nn.relu(dense()(jnp.concatenate([edges, a + b, a * b], -1)))
        boxes = nodes[:, :num_boxes]
        value_features = jnp.concatenate([boxes.mean(1), boxes.max(1), nodes[:, num_boxes], position], -1)
        return line_states, value_features, boxes


@pytest.mark.parametrize("board", [(2, 3), (1, 1), (1, 3)])
def test_the_graph_trunk_computes_its_definition_with_the_same_parameters(board):
    """On boards whose rows and columns differ (a transposed table would show) and a 1x1 board (every line a ground
    line): the same parameter tree at initialisation, and the same line states, value features and box states from
    those parameters."""
    geometry = board_geometry(*board)
    observation = random_observations(geometry, jax.random.PRNGKey(3), batch=6)
    settings = dict(width=8, blocks=2, parity_plane=True)
    trunk = trunks.GraphTrunk(**settings)
    definition = GraphTrunk(**settings)
    params = trunk.init(jax.random.PRNGKey(1), observation)
    reference_params = definition.init(jax.random.PRNGKey(1), observation)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(reference_params)
    for ours, theirs in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(reference_params)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    for ours, theirs in zip(trunk.apply(params, observation), definition.apply(params, observation)):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_in_bfloat16_the_graph_trunk_stays_close_to_its_float32_definition():
    """The recipe computes in bfloat16 on recent GPUs: sums of gathered rows and of split products are taken in
    float32 and rounded once, so the outputs stay within bfloat16's precision of the float32 definition."""
    geometry = board_geometry(3, 3)
    observation = random_observations(geometry, jax.random.PRNGKey(8), batch=6)
    settings = dict(width=16, blocks=3, parity_plane=True)
    params = GraphTrunk(**settings).init(jax.random.PRNGKey(5), observation)
    ours = trunks.GraphTrunk(**settings, dtype=jnp.bfloat16).apply(params, observation)
    theirs = GraphTrunk(**settings).apply(params, observation)
    for a, b in zip(ours, theirs):
        assert a.dtype == jnp.bfloat16
        scale = float(np.abs(np.asarray(b)).max())
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b), atol=0.05 * scale)


def test_the_graph_trunks_gradient_is_its_definitions():
    """Learning sees the same function: the loss's gradient with respect to every parameter agrees."""
    geometry = board_geometry(2, 2)
    observation = random_observations(geometry, jax.random.PRNGKey(4), batch=5)
    settings = dict(width=8, blocks=2, parity_plane=True)
    params = trunks.GraphTrunk(**settings).init(jax.random.PRNGKey(2), observation)

    def loss(module, p):
        line_states, value_features, boxes = module.apply(p, observation)
        return jnp.sin(line_states).sum() + (value_features ** 2).sum() + jnp.cos(boxes).sum()

    ours = jax.grad(functools.partial(loss, trunks.GraphTrunk(**settings)))(params)
    theirs = jax.grad(functools.partial(loss, GraphTrunk(**settings)))(params)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_gather_sum_sums_the_tables_rows_and_its_gradient_is_the_transpose():
    values = jax.random.normal(jax.random.PRNGKey(0), (3, 5, 2))
    weights = jax.random.uniform(jax.random.PRNGKey(1), (3, 5)) > 0.3
    table = np.array([[0, 1], [4, 4], [2, 0]])
    expected = (values[:, table] * weights[:, table][..., None]).sum(2)
    np.testing.assert_allclose(np.asarray(trunks.gather_sum(values, table, weights)), np.asarray(expected), atol=1e-6)
    np.testing.assert_allclose(np.asarray(trunks.gather_sum(values, table)), np.asarray(values[:, table].sum(2)),
                               atol=1e-6)
    cotangent = jax.random.normal(jax.random.PRNGKey(2), (3, 3, 2))
    gradient = jax.grad(lambda v: (trunks.gather_sum(v, table, weights) * cotangent).sum())(values)
    counts = np.zeros((3, 5))
    for row, sources in enumerate(table):
        for source in sources:
            counts[row, source] += 1  # row 1 reads source 4 twice
    expected_gradient = np.einsum("ks,nkd->nsd", counts, np.asarray(cotangent)) * np.asarray(weights)[..., None]
    np.testing.assert_allclose(np.asarray(gradient), expected_gradient, atol=1e-5)


def test_dense_takes_its_inputs_apart_and_keeps_nn_denses_parameters():
    """``trunks.Dense(F)(x, y, pooled)`` is ``nn.Dense(F)`` of their concatenation, the per-position ``pooled``
    broadcast to every node, with the same parameters (path, shapes, values at initialisation)."""
    nodes, gathered = (jax.random.normal(jax.random.PRNGKey(k), (4, 7, 3)) for k in (0, 1))
    pooled = jax.random.normal(jax.random.PRNGKey(2), (4, 1, 5))
    concatenated = jnp.concatenate([nodes, gathered, jnp.broadcast_to(pooled, (4, 7, 5))], -1)
    flax_params = nn.Dense(6, kernel_init=trunks.kaiming).init(jax.random.PRNGKey(9), concatenated)
    expected = nn.Dense(6, kernel_init=trunks.kaiming).apply(flax_params, concatenated)
    for concatenate in (True, False):
        params = trunks.Dense(6).init(jax.random.PRNGKey(9), nodes, gathered, pooled, concatenate=concatenate)
        assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(flax_params)
        for ours, theirs in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(flax_params)):
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
        result = trunks.Dense(6).apply(params, nodes, gathered, pooled, concatenate=concatenate)
        np.testing.assert_allclose(np.asarray(result), np.asarray(expected), rtol=1e-5, atol=1e-5)

    class Both(nn.Module):  # an nn.Dense and a trunks.Dense in one scope count their names together
        @nn.compact
        def __call__(self, x):
            return trunks.Dense(2)(nn.Dense(3)(x), x)

    assert sorted(Both().init(jax.random.PRNGKey(0), nodes)["params"]) == ["Dense_0", "Dense_1"]


def test_a_shipped_graph_agent_plays_the_same_function(monkeypatch):
    """``pretrained:5x5``'s network, on random 5x5 positions: the policy logits and the value of the
    definition's layout and of the trunk's agree."""
    from dabjax.evaluation import pretrained

    source = pretrained.load_source("pretrained:5x5")
    geometry = board_geometry(5, 5)
    observation = random_observations(geometry, jax.random.PRNGKey(7), batch=8)
    ours = network.PolicyValueNet(source.network_config).apply(source.params, observation)
    monkeypatch.setattr(network_kinds, "GraphTrunk", GraphTrunk)  # the definition, under the trunk's name
    theirs = network.PolicyValueNet(source.network_config).apply(source.params, observation)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
