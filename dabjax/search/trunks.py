"""The trunks of the network kinds (``network_kinds``): the layers between the observation ``[N, H, W, P]`` and the
policy, value and dense heads of ``network.PolicyValueNet``.

``resnet_trunk`` and ``mlp_trunk`` are functions called inside ``PolicyValueNet``'s compact ``__call__``: their
layers are created in its scope, so their parameters sit directly under the network's (``Conv_0``,
``ResidualBlock_0``, ``DenseBlock_0``, ...) as the saved agents and checkpoints hold them. ``GraphTrunk`` is a
module of its own (``GraphTrunk_0``), and so is ``TransformerTrunk`` (``TransformerTrunk_0``)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chains
from dabjax.game.geometry import board_geometry
from dabjax.search import attention
from dabjax.search.network_inputs import position_of

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


def resnet_trunk(observation: jax.Array, *, width: int, blocks: int, input_planes: int, global_pooling: bool,
                 dtype: jnp.dtype) -> jax.Array:
    """``[N, H, W, P] -> [N, H, W, width]``: a 3x3 stem convolution of the first ``input_planes`` planes with layer
    normalisation, then ``blocks`` of ``ResidualBlock``. Fully convolutional: one set of parameters serves every
    board size."""
    planes = observation[..., :input_planes]
    x = nn.Conv(width, (3, 3), kernel_init=kaiming, dtype=dtype)(planes.astype(dtype))
    x = nn.relu(nn.LayerNorm(dtype=dtype)(x))
    for _ in range(blocks):
        x = ResidualBlock(width, dtype, global_pooling)(x)
    return x


def mlp_trunk(observation: jax.Array, *, width: int, blocks: int, input_planes: int, dtype: jnp.dtype) -> jax.Array:
    """``[N, H, W, P] -> [N, width]``: the flattened first ``input_planes`` planes through a dense stem with layer
    normalisation, then ``blocks`` of ``DenseBlock``. Its first layer fits one board size."""
    batch = observation.shape[0]
    flat = observation[..., :input_planes].reshape(batch, -1).astype(dtype)
    x = nn.relu(nn.LayerNorm(dtype=dtype)(nn.Dense(width, kernel_init=kaiming, dtype=dtype)(flat)))
    for _ in range(blocks):
        x = DenseBlock(width, dtype)(x)
    return x


class Dense(nn.Module):
    """``nn.Dense`` of the concatenation of its inputs' last axes, without building it where they differ in shape.

    ``Dense(F)(x_1, ..., x_k)`` computes ``nn.Dense(F)(concatenate([x_1, ..., x_k], -1))``, the ``x_i`` broadcast
    against each other, with the same parameters: the class name, so the path (``Dense_<n>``, counted with
    ``nn.Dense``'s), the kernel ``[sum F_i, F]``, the bias ``[F]`` and their initialisation (float32). Consecutive
    inputs of one shape are concatenated and multiplied together; an input of another shape, such as one vector a
    position ``[N, 1, F_i]`` beside node states ``[N, V, F_j]``, is multiplied alone and added, so it is never
    copied to every node. ``concatenate=False``: every input multiplied alone (no concatenation written).

    ``dtype`` is the compute dtype (float32 unless given; ``nn.Dense`` infers it from the inputs): inputs and
    parameters are cast to it, the products of the groups summed in float32 and rounded once, as one product."""

    features: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, *inputs: jax.Array, concatenate: bool = True) -> jax.Array:
        sizes = [x.shape[-1] for x in inputs]
        kernel = self.param("kernel", kaiming, (sum(sizes), self.features), jnp.float32).astype(self.dtype)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32).astype(self.dtype)
        groups, row = [], 0  # (concatenated inputs, their kernel rows)
        for x, size in zip(inputs, sizes):
            if concatenate and groups and groups[-1][0][-1].shape[:-1] == x.shape[:-1]:
                groups[-1][0].append(x)
                groups[-1][1][1] = row + size
            else:
                groups.append(([x], [row, row + size]))
            row += size
        y = None
        for parts, (first, last) in groups:
            x = parts[0] if len(parts) == 1 else jnp.concatenate(parts, -1)
            product = jnp.dot(x.astype(self.dtype), kernel[first:last], preferred_element_type=jnp.float32)
            y = product if y is None else y + product
        return y.astype(self.dtype) + bias


def gather_sum(values: jax.Array, table: np.ndarray, weights: jax.Array | None = None) -> jax.Array:
    """``[N, S, D] -> [N, K, D]``: row ``k`` is the sum of the rows ``table[k]`` (int ``[K, M]``, in ``[0, S)``) of
    ``values``, each times its weight (``weights [N, S]``, if given), summed in float32 and returned in
    ``values``' dtype. ``M`` gathers added: XLA fuses them with each other and with their consumer, so no
    ``[N, K, M, D]`` array and no transposed copy is written."""
    table = np.asarray(table)
    if table.ndim != 2 or table.min(initial=0) < 0 or table.max(initial=0) >= values.shape[1]:
        raise ValueError(f"gather_sum: table must be int [K, M] in [0, {values.shape[1]}), got {table!r}")
    if table.shape[1] == 1 and weights is None:  # one row each: a gather, nothing to sum
        return jnp.take(values, jnp.asarray(table[:, 0]), axis=1, mode="clip")
    total = None
    for column in table.T:
        rows = jnp.take(values, jnp.asarray(column), axis=1, mode="clip").astype(jnp.float32)
        if weights is not None:
            rows = rows * jnp.take(weights, jnp.asarray(column), axis=1, mode="clip")[..., None].astype(jnp.float32)
        total = rows if total is None else total + rows
    return total.astype(values.dtype)


def strings_and_coins_inputs(observation: jax.Array, parity_plane: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """What a strings-and-coins network's nodes, lines and position start from: ``(node inputs [N, B + 1, Fv] (the
    boxes, then the ground), line inputs [N, L, Fl], position inputs [N, Fp])``, float32. A box reads whether it is
    claimed and its valence (undrawn sides, one-hot); a line whether it is undrawn and whether it is an undrawn edge
    line; the ground a flag of its own; the position its score so far (and, with ``parity_plane``, the parity of
    the undrawn lines)."""
    _, grid_height, grid_width, _ = observation.shape
    geometry = board_geometry((grid_height - 1) // 2, (grid_width - 1) // 2)
    lines, claimed, score, parity = position_of(observation)
    undrawn = ~lines
    valence = jax.vmap(functools.partial(chains.box_valences, geometry))(lines, claimed)  # [N, B]
    box_in = [claimed[..., None], jax.nn.one_hot(valence, 5)]
    on_edge = ~jnp.asarray(geometry.line_box_valid.all(-1))[None, :, None]
    line_in = [undrawn[..., None], on_edge & undrawn[..., None]]
    position_in = [score[:, None]] + ([parity[:, None]] if parity_plane else [])
    box_in = jnp.concatenate([x.astype(jnp.float32) for x in box_in], -1)  # [N, B, Fb]
    batch = box_in.shape[0]
    ground_in = jnp.zeros((batch, 1, box_in.shape[-1] + 1), jnp.float32).at[..., -1].set(1.0)
    node_in = jnp.concatenate([jnp.pad(box_in, ((0, 0), (0, 0), (0, 1))), ground_in], axis=1)  # [N, B+1, F]
    line_in = jnp.concatenate([x.astype(jnp.float32) for x in line_in], -1)
    position_in = jnp.concatenate([x.astype(jnp.float32) for x in position_in], -1)
    return node_in, line_in, position_in


class GraphTrunk(nn.Module):
    """The strings-and-coins graph network: ``(observation [N, H, W, P]) -> (line states [N, L, D], value
    features [N, F], box states [N, B, D])``.

    Nodes are the ``B`` boxes and one ground node (the edge of the board); every line is an edge between
    its two boxes, or a box and the ground. Messages pass along undrawn lines only, so chains and loops are
    paths and cycles of the graph. Each of ``blocks`` rounds computes every line's message from its two
    ends (symmetrically: their sum and product) and its own state, averages the messages of each node's
    undrawn lines, and updates the node from it, its own state, the mean of all nodes (global pooling, so
    distant chains meet every round) and the position's features. Nothing depends on the board size: one
    set of parameters plays every board.

    The graph's reads are gathers with fixed tables (``gather_sum``) and its dense layers take their inputs
    apart (``Dense``): per position, what moves through memory is the nodes' and lines' states, not copies of
    them."""

    width: int
    blocks: int
    parity_plane: bool
    dtype: jnp.dtype = jnp.float32
    attention_heads: int = 0  # > 0: an ``attention.AttentionBlock`` over the nodes after every round

    def graph_inputs(self, observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """What the graph's nodes, lines and position start from (``strings_and_coins_inputs``). A subclass may add
        inputs."""
        return strings_and_coins_inputs(observation, self.parity_plane)

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        _, grid_height, grid_width, _ = observation.shape
        geometry = board_geometry((grid_height - 1) // 2, (grid_width - 1) // 2)
        num_boxes = geometry.num_boxes
        undrawn = ~position_of(observation)[0]
        ends = np.where(geometry.line_boxes >= 0, geometry.line_boxes, num_boxes)  # [L, 2], B = ground
        node_lines = (geometry.box_lines, np.flatnonzero(~geometry.line_box_valid.all(-1))[None])  # [B, 4], [1, E]

        def line_ends(nodes):  # [N, B + 1, D] -> the states at each line's two ends, [N, L, D] each
            return gather_sum(nodes, ends[:, :1]), gather_sum(nodes, ends[:, 1:])

        def node_sums(values, weights):  # [N, L, D], [N, L] -> each node's weighted sum over its lines, [N, B + 1, D]
            return jnp.concatenate([gather_sum(values, table, weights) for table in node_lines], axis=1)

        node_in, line_in, position_in = self.graph_inputs(observation)
        dense = functools.partial(Dense, self.width, dtype=self.dtype)
        norm = functools.partial(nn.LayerNorm, dtype=self.dtype)
        position = nn.relu(dense()(position_in.astype(self.dtype)))[:, None]  # [N, 1, D]
        nodes = nn.relu(norm()(dense()(node_in.astype(self.dtype)) + position))  # [N, B + 1, D]
        edges = nn.relu(norm()(dense()(line_in.astype(self.dtype))))  # [N, L, D]
        # 1 / the node's undrawn lines (at least one): the messages' sum at a node becomes their mean
        inverse_degree = 1.0 / jnp.maximum(node_sums(undrawn[..., None].astype(jnp.float32), None), 1.0)
        if self.attention_heads:  # the nodes are the tokens from the lines' on: boxes, then the ground
            relations = attention.token_relations(geometry)
            node_relation = relations.relation[geometry.num_lines:, geometry.num_lines:]
            node_link = attention.link_states(relations, undrawn, geometry.num_lines)
        for _ in range(self.blocks):
            a, b = line_ends(nodes)
            message = nn.relu(dense()(a + b, a * b, edges))  # [N, L, D]
            edges = norm()(edges + dense()(message))
            gathered = node_sums(message, undrawn) * inverse_degree.astype(self.dtype)  # [N, B + 1, D]
            # The boxes' mean [N, 1, D], as all nodes' sum less the ground's: a slice of the boxes would be an array
            # of its own for XLA's CPU fusions.
            pooled = ((nodes.sum(1, keepdims=True, dtype=jnp.float32) - nodes[:, num_boxes:].astype(jnp.float32))
                      / num_boxes).astype(self.dtype)
            update = nn.relu(dense()(nodes, gathered, pooled, position, concatenate=False))
            nodes = norm()(nodes + dense()(update))
            if self.attention_heads:
                nodes = attention.AttentionBlock(self.width, self.attention_heads, self.dtype)(
                    nodes, node_relation, node_link)
        a, b = line_ends(nodes)
        line_states = nn.relu(dense()(edges, a + b, a * b))
        boxes = nodes[:, :num_boxes]
        value_features = jnp.concatenate([boxes.mean(1), boxes.max(1), nodes[:, num_boxes], position[:, 0]], -1)
        return line_states, value_features, boxes



class TransformerTrunk(nn.Module):
    """A transformer over the board's tokens: ``(observation [N, H, W, P]) -> (line states [N, L, D], value
    features [N, F], box states [N, B, D])``.

    The tokens are the lines, the boxes and the ground (``attention``), each embedded from what the graph network
    reads (``strings_and_coins_inputs``) plus the position's own inputs, then ``blocks`` of
    ``attention.AttentionBlock`` with ``heads`` heads, biased by the pairs' relations and strings-and-coins links;
    no token has an absolute position, so one set of parameters serves every board size. The value reads the
    boxes' mean and maximum, the ground token and the position."""

    width: int
    blocks: int
    heads: int
    parity_plane: bool
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        _, grid_height, grid_width, _ = observation.shape
        geometry = board_geometry((grid_height - 1) // 2, (grid_width - 1) // 2)
        num_lines, num_boxes = geometry.num_lines, geometry.num_boxes
        relations = attention.token_relations(geometry)
        link = attention.link_states(relations, ~position_of(observation)[0])
        node_in, line_in, position_in = strings_and_coins_inputs(observation, self.parity_plane)
        dense = functools.partial(nn.Dense, self.width, kernel_init=kaiming, dtype=self.dtype)
        position = nn.relu(dense()(position_in.astype(self.dtype)))[:, None]  # [N, 1, D]
        tokens = jnp.concatenate([dense()(line_in.astype(self.dtype)), dense()(node_in.astype(self.dtype))], 1)
        tokens = tokens + dense()(position)  # [N, T, D]
        for _ in range(self.blocks):
            tokens = attention.AttentionBlock(self.width, self.heads, self.dtype)(tokens, relations.relation, link)
        tokens = nn.LayerNorm(dtype=self.dtype)(tokens)
        lines, boxes = tokens[:, :num_lines], tokens[:, num_lines:num_lines + num_boxes]
        value_features = jnp.concatenate([boxes.mean(1), boxes.max(1), tokens[:, -1], position[:, 0]], -1)
        return lines, value_features, boxes
