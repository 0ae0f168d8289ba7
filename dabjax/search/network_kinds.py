"""The registry of network kinds: what ``network.NetworkConfig.kind`` names, one entry a kind.

A kind is a function ``outputs(config, observation [N, H, W, P], dtype) -> KindOutputs`` called inside
``network.PolicyValueNet``'s compact ``__call__`` (so its layers' parameters sit under the network's, as the
saved agents hold them), and whether one set of its parameters plays every board size. ``PolicyValueNet`` adds the
value head (``value_hidden`` units and ``tanh``) on the kind's value features and the dense heads on its box
features; nothing else in dabjax branches on the kind. To add a kind: write its trunk (``trunks``), an outputs
function here, and an entry in ``NETWORK_KINDS`` (docs/network_kinds.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from dabjax.game.geometry import board_geometry
from dabjax.search.network_inputs import line_cells_of_grid
from dabjax.search.trunks import GraphTrunk, TransformerTrunk, kaiming, mlp_trunk, resnet_trunk


class KindOutputs(NamedTuple):
    """What a kind's trunk gives the heads: ``logits`` float32 ``[N, L]`` (OpenSpiel line order, not masked),
    ``value_features`` ``[N, F]`` (the value MLP's input), ``boxes`` ``[N, B, D]`` (the ownership head's per-box
    input) or None (the head then reads ``value_features``)."""

    logits: jax.Array
    value_features: jax.Array
    boxes: jax.Array | None


@dataclasses.dataclass(frozen=True)
class NetworkKind:
    """One network kind: its ``outputs`` function, whether one set of its parameters is meant to play every
    board size (``plays_any_board``), whether its parameters fit every board size at all (``any_board_parameters``:
    a ResNet's do, though trained on one board it plays that one only), and which of the ``network`` section's
    options apply to it (``uses``)."""

    outputs: Callable[[Any, jax.Array, jnp.dtype], KindOutputs]
    plays_any_board: bool
    any_board_parameters: bool
    uses: frozenset[str] = frozenset()


def _line_logits(line_states: jax.Array, dtype) -> jax.Array:
    """``[N, L, D] -> [N, L]`` float32: one shared dense unit a line."""
    return nn.Dense(1, kernel_init=kaiming, dtype=dtype)(line_states)[..., 0].astype(jnp.float32)


def resnet_outputs(config, observation: jax.Array, dtype) -> KindOutputs:
    """The paper's fully convolutional ResNet (``trunks.resnet_trunk``). Policy: a 3x3 then a 1x1 convolution to one
    logit per grid cell, read at the line cells. Value features: a 1x1 convolution, mean- and max-pooled."""
    batch, height, width, _ = observation.shape
    x = resnet_trunk(observation, width=config.width, blocks=config.blocks, input_planes=config.input_planes,
                     global_pooling=config.global_pooling, dtype=dtype)
    p = nn.relu(nn.Conv(max(config.width // 2, 1), (3, 3), kernel_init=kaiming, dtype=dtype)(x))
    p = nn.Conv(1, (1, 1), kernel_init=kaiming, dtype=dtype)(p).reshape(batch, height * width)
    logits = p[:, line_cells_of_grid(height, width)].astype(jnp.float32)
    v = nn.relu(nn.Conv(max(config.width // 4, 1), (1, 1), kernel_init=kaiming, dtype=dtype)(x))
    pooled = jnp.concatenate([v.mean(axis=(1, 2)), v.max(axis=(1, 2))], axis=-1)
    box_cells = board_geometry((height - 1) // 2, (width - 1) // 2).box_cells
    boxes = x.reshape(batch, height * width, -1)[:, box_cells[:, 0] * width + box_cells[:, 1]]  # [N, B, C]
    return KindOutputs(logits, pooled, boxes)


def mlp_outputs(config, observation: jax.Array, dtype) -> KindOutputs:
    """The dense network of the whole flattened grid (``trunks.mlp_trunk``): a dense policy head, one board size."""
    _, height, width, _ = observation.shape
    x = mlp_trunk(observation, width=config.width, blocks=config.blocks, input_planes=config.input_planes,
                  dtype=dtype)
    logits = nn.Dense(len(line_cells_of_grid(height, width)), kernel_init=kaiming, dtype=dtype)(x)
    return KindOutputs(logits.astype(jnp.float32), x, None)


def graph_outputs(config, observation: jax.Array, dtype, attention_heads: int = 0) -> KindOutputs:
    """The strings-and-coins graph network (``trunks.GraphTrunk``), with ``attention_heads`` > 0 global
    self-attention over its nodes after every round."""
    line_states, value_features, boxes = GraphTrunk(config.width, config.blocks, config.parity_plane, dtype,
                                                    attention_heads)(observation)
    return KindOutputs(_line_logits(line_states, dtype), value_features, boxes)


def graph_attention_outputs(config, observation: jax.Array, dtype) -> KindOutputs:
    """The graph network with ``attention_heads``-head self-attention over its boxes and ground after every round,
    biased by the nodes' relations (``attention``)."""
    return graph_outputs(config, observation, dtype, config.attention_heads)


def transformer_outputs(config, observation: jax.Array, dtype) -> KindOutputs:
    """The transformer over line, box and ground tokens (``trunks.TransformerTrunk``)."""
    line_states, value_features, boxes = TransformerTrunk(config.width, config.blocks, config.attention_heads,
                                                          config.parity_plane, dtype)(observation)
    return KindOutputs(_line_logits(line_states, dtype), value_features, boxes)


NETWORK_KINDS: dict[str, NetworkKind] = {
    "resnet": NetworkKind(resnet_outputs, plays_any_board=False, any_board_parameters=True,
                          uses=frozenset({"global_pooling"})),
    "mlp": NetworkKind(mlp_outputs, plays_any_board=False, any_board_parameters=False),
    "graph": NetworkKind(graph_outputs, plays_any_board=True, any_board_parameters=True),
    "graph_attention": NetworkKind(graph_attention_outputs, plays_any_board=True, any_board_parameters=True,
                                   uses=frozenset({"attention_heads"})),
    "transformer": NetworkKind(transformer_outputs, plays_any_board=True, any_board_parameters=True,
                               uses=frozenset({"attention_heads"})),
}
