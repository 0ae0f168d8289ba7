"""The trunks of the three network kinds (``network.NetworkConfig.kind``): the layers between the observation
``[N, H, W, P]`` and the policy, value and dense heads of ``network.PolicyValueNet``.

``resnet_trunk`` and ``mlp_trunk`` are functions called inside ``PolicyValueNet``'s compact ``__call__``: their
layers are created in its scope, so their parameters sit directly under the network's (``Conv_0``,
``ResidualBlock_0``, ``DenseBlock_0``, ...) as the saved agents and checkpoints hold them. ``GraphTrunk`` is a
module of its own (``GraphTrunk_0``)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chain_features
from dabjax.game.geometry import board_geometry
from dabjax.search.network_inputs import chain_feature_planes, observed_chain_features, position_of

kaiming = nn.initializers.kaiming_normal()


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with layer normalisation; with ``global_pooling``, KataGo's global pooling
    bias (Wu, "Accelerating Self-Play Learning in Go", 2019): the mean and max over the grid of the first
    convolution's output set a per-channel bias of the second, so distant parts of the board meet in
    every block instead of after ``H / 2`` of them."""

    width: int
    dtype: jnp.dtype = jnp.float32
    global_pooling: bool = False

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        if self.global_pooling:
            pooled = jnp.concatenate([y.mean(axis=(1, 2)), y.max(axis=(1, 2))], axis=-1)
            y = y + nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(pooled)[:, None, None, :]
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


class DenseBlock(nn.Module):
    """The MLP's residual block: two dense layers with layer normalisation, ``[N, width] -> [N, width]``."""

    width: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


def resnet_trunk(observation: jax.Array, *, width: int, blocks: int, input_planes: int, chain_features: bool,
                 global_pooling: bool, dtype: jnp.dtype) -> jax.Array:
    """``[N, H, W, P] -> [N, H, W, width]``: a 3x3 stem convolution of the first ``input_planes`` planes (and the
    ``chain_feature_planes`` with ``chain_features``) with layer normalisation, then ``blocks`` of
    ``ResidualBlock``. Fully convolutional: one set of parameters serves every board size."""
    extra = chain_feature_planes(observation) if chain_features else None
    planes = observation[..., :input_planes]
    if extra is not None:
        planes = jnp.concatenate([planes, extra], -1)
    x = nn.Conv(width, (3, 3), kernel_init=kaiming, dtype=dtype)(planes.astype(dtype))
    x = nn.relu(nn.LayerNorm(dtype=dtype)(x))
    for _ in range(blocks):
        x = ResidualBlock(width, dtype, global_pooling)(x)
    return x


def mlp_trunk(observation: jax.Array, *, width: int, blocks: int, input_planes: int, chain_features: bool,
              dtype: jnp.dtype) -> jax.Array:
    """``[N, H, W, P] -> [N, width]``: the flattened first ``input_planes`` planes (and, with ``chain_features``,
    the features themselves, not painted on a mostly empty grid: ``B*Fb + L*Fl + G`` more inputs) through a
    dense stem with layer normalisation, then ``blocks`` of ``DenseBlock``. Its first layer fits one board size."""
    batch = observation.shape[0]
    flat = [observation[..., :input_planes].reshape(batch, -1)]
    if chain_features:
        features = observed_chain_features(observation)
        flat += [features.box.reshape(batch, -1), features.line.reshape(batch, -1), features.position]
    flat = jnp.concatenate(flat, -1).astype(dtype)
    x = nn.relu(nn.LayerNorm(dtype=dtype)(nn.Dense(width, kernel_init=kaiming, dtype=dtype)(flat)))
    for _ in range(blocks):
        x = DenseBlock(width, dtype)(x)
    return x


class GraphTrunk(nn.Module):
    """The strings-and-coins graph network: ``(observation [N, H, W, P]) -> (line states [N, L, D], value
    features [N, F], box states [N, B, D])``.

    Nodes are the ``B`` boxes and one ground node (the edge of the board); every line is an edge between
    its two boxes, or a box and the ground. Messages pass along undrawn lines only, so chains and loops are
    paths and cycles of the graph. Each of ``blocks`` rounds computes every line's message from its two
    ends (symmetrically: their sum and product) and its own state, averages the messages of each node's
    undrawn lines, and updates the node from it, its own state, the mean of all nodes (global pooling, so
    distant chains meet every round) and the position's features. Nothing depends on the board size: one
    set of parameters plays every board."""

    width: int
    blocks: int
    chain_features: bool
    parity_plane: bool
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        _, height, width, _ = observation.shape
        geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
        num_boxes = geometry.num_boxes
        lines, claimed, score, parity = position_of(observation)
        undrawn = ~lines
        ends = np.where(geometry.line_boxes >= 0, geometry.line_boxes, num_boxes)  # [L, 2], B = ground
        # One-hot [2, L, B + 1] tables: reading a line's two ends and summing over a node's lines are then
        # matrix products, whose gradients are matrix products too (a gather's is a scatter, slow on CPUs).
        end_of = np.zeros((2, geometry.num_lines, num_boxes + 1), np.float32)
        for side in range(2):
            end_of[side, np.arange(geometry.num_lines), ends[:, side]] = 1.0
        incidence = jnp.asarray(np.minimum(end_of.sum(0), 1.0), self.dtype)  # [L, B + 1]: line l touches node v
        end_of = jnp.asarray(end_of, self.dtype)

        def line_ends(nodes):  # [N, B + 1, D] -> the states at each line's two ends, [N, L, D] each
            return jnp.einsum("lv,nvd->nld", end_of[0], nodes), jnp.einsum("lv,nvd->nld", end_of[1], nodes)

        valence = jax.vmap(functools.partial(chain_features.box_valences, geometry))(lines, claimed)  # [N, B]
        box_in = [claimed[..., None], jax.nn.one_hot(valence, 5)]
        on_edge = ~jnp.asarray(geometry.line_box_valid.all(-1))[None, :, None]
        line_in = [undrawn[..., None], on_edge & undrawn[..., None]]
        position_in = [score[:, None]] + ([parity[:, None]] if self.parity_plane else [])
        if self.chain_features:
            features = observed_chain_features(observation)
            box_in.append(features.box)
            line_in.append(features.line)
            position_in.append(features.position)
        box_in = jnp.concatenate([x.astype(jnp.float32) for x in box_in], -1)  # [N, B, Fb]
        batch = box_in.shape[0]
        ground_in = jnp.zeros((batch, 1, box_in.shape[-1] + 1), jnp.float32).at[..., -1].set(1.0)
        node_in = jnp.concatenate([jnp.pad(box_in, ((0, 0), (0, 0), (0, 1))), ground_in], axis=1)  # [N, B+1, F]
        line_in = jnp.concatenate([x.astype(jnp.float32) for x in line_in], -1)
        position_in = jnp.concatenate([x.astype(jnp.float32) for x in position_in], -1)

        dense = functools.partial(nn.Dense, self.width, kernel_init=kaiming, dtype=self.dtype)
        norm = functools.partial(nn.LayerNorm, dtype=self.dtype)
        position = nn.relu(dense()(position_in.astype(self.dtype)))  # [N, D]
        nodes = nn.relu(norm()(dense()(node_in.astype(self.dtype)) + position[:, None]))  # [N, B + 1, D]
        edges = nn.relu(norm()(dense()(line_in.astype(self.dtype))))  # [N, L, D]
        live = undrawn.astype(self.dtype)[..., None]  # [N, L, 1]
        degree = jnp.maximum(jnp.einsum("lv,nl->nv", incidence.astype(jnp.float32), undrawn.astype(jnp.float32)),
                             1.0)[..., None]
        for _ in range(self.blocks):
            a, b = line_ends(nodes)
            message = nn.relu(dense()(jnp.concatenate([a + b, a * b, edges], -1)))  # [N, L, D]
            edges = norm()(edges + dense()(message))
            gathered = jnp.einsum("lv,nld->nvd", incidence, message * live) / degree.astype(self.dtype)
            pooled = nodes[:, :num_boxes].mean(axis=1, keepdims=True)
            update = nn.relu(dense()(jnp.concatenate(
                [nodes, gathered, jnp.broadcast_to(pooled, nodes.shape), jnp.broadcast_to(position[:, None],
                                                                                     nodes.shape)], -1)))
            nodes = norm()(nodes + dense()(update))
        a, b = line_ends(nodes)
        line_states = nn.relu(dense()(jnp.concatenate([edges, a + b, a * b], -1)))
        boxes = nodes[:, :num_boxes]
        value_features = jnp.concatenate([boxes.mean(1), boxes.max(1), nodes[:, num_boxes], position], -1)
        return line_states, value_features, boxes
