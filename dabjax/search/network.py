"""The policy-value network (flax.linen), of three kinds.

Input: the environment's observation, float32 ``[N, 2R+1, 2C+1, 4]`` (from the side to move; the fourth
plane, the parity of the undrawn lines, is read only when ``parity_plane`` is on). Output: policy logits
``[N, L]`` in OpenSpiel line order (not masked) and the value ``[N]`` in ``[-1, 1]`` for the side to move.
No batch statistics anywhere, so the network is a pure function of its parameters; Kaiming (He)
initialisation throughout, as the paper.

``kind="resnet"`` (the paper's kind) is fully convolutional, so one set of parameters serves every board
size. Trunk: a 3x3 stem convolution to ``width`` channels, then ``blocks`` residual blocks (two 3x3
convolutions with layer normalisation). Policy head: a 3x3 then a 1x1 convolution to one logit per grid
cell; the logits of the cells where lines sit are read out. Value head: a 1x1 convolution, mean- and
max-pooling over the grid, an MLP and ``tanh``. With the paper's 5x5 setting (``width=160``, ``blocks=6``)
it has about 2.8 M parameters.

``kind="mlp"`` reads the whole flattened grid: a dense stem to ``width`` units, ``blocks`` residual blocks
of two dense layers with layer normalisation, a dense policy head and the same value MLP. Its parameters
fit one board size only; on small boards it costs far less per position than the convolutions (the figures:
docs/lab/training.md, "The MLP network").

``kind="graph"`` passes messages between the boxes along the undrawn lines (``trunks.GraphTrunk``); one set of
parameters plays every board size.

The trunks are in ``dabjax.search.trunks``, the dense heads and the conversion of parameters between networks with
and without them in ``dabjax.search.heads``, what the networks read from an observation in
``dabjax.search.network_inputs``.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search.heads import HEAD_PARAMS, DenseHeads
from dabjax.search.network_inputs import line_cells_of_grid
from dabjax.search.trunks import GraphTrunk, kaiming, mlp_trunk, resnet_trunk

KINDS = ("resnet", "mlp", "graph")
DTYPES = ("float32", "bfloat16", "auto")
BF16_MIN_COMPUTE_CAPABILITY = 8.0  # Ampere: GPUs before it (a T4 is 7.5) emulate bfloat16, slower than float32


def native_bfloat16(device: jax.Device | None = None) -> bool:
    """Whether ``device`` (default: the first) computes bfloat16 natively: an NVIDIA GPU of compute capability
    8.0 or newer (A100, H100, H200, RTX 30xx and later) or a TPU; never the CPU."""
    device = jax.devices()[0] if device is None else device
    if device.platform == "tpu":
        return True
    capability = getattr(device, "compute_capability", None)
    return device.platform == "gpu" and capability is not None and float(capability) >= BF16_MIN_COMPUTE_CAPABILITY


def compute_dtype(name: str) -> jnp.dtype:
    """The compute dtype a ``network.dtype`` setting names; ``"auto"`` is bfloat16 where the device runs it
    natively (``native_bfloat16``) and float32 elsewhere, so one config trains well on a CPU, a T4 and an H100."""
    if name == "auto":
        return jnp.dtype(jnp.bfloat16 if native_bfloat16() else jnp.float32)
    return jnp.dtype(name)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network kind and size: the ``network`` section of a training config (``dabjax.training.config``) and
    the one place its defaults live (a 32-wide, 3-block ResNet). Frozen, so hashable (a jit static
    argument); validated at construction, the message naming the config key.

    ``kind``: ``"resnet"``, ``"mlp"`` or ``"graph"`` (strings and coins: boxes and the ground as nodes,
    undrawn lines as edges; any board size); ``width``: channels (resnet), units (mlp) or node features (graph)
    of the trunk; ``blocks``: residual blocks (message-passing rounds for the graph); ``value_hidden``: units of
    the value MLP; ``dtype``: compute dtype (``"float32"``, ``"bfloat16"`` or ``"auto"``: ``compute_dtype``;
    parameters stay float32 and the outputs are cast to float32 before the search);
    ``parity_plane``: read the observation's parity plane (``False``: the paper's three planes only);
    ``chain_features``: add the chain-structure inputs of ``dabjax.game.chain_features`` (any kind);
    ``global_pooling``: KataGo's global pooling bias in every residual block (resnet only);
    ``dense_heads``: the auxiliary heads of ``heads.DenseHeads`` (every box's final owner and the final margin), which
    training can fit to every finished game (``targets.ownership_weight``, ``targets.margin_weight``);
    ``PolicyValueNet`` returns them only when asked."""

    kind: str = "resnet"
    width: int = 32
    blocks: int = 3
    value_hidden: int = 32
    dtype: str = "float32"
    parity_plane: bool = True
    chain_features: bool = False
    global_pooling: bool = False
    dense_heads: bool = False

    @property
    def input_planes(self) -> int:
        return env_lib.NUM_PLANES if self.parity_plane else env_lib.PAPER_PLANES

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"network.kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("width", "blocks", "value_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (0 if name == "blocks" else 1):
                raise ValueError(f"network.{name} must be a positive integer, got {value!r}")
        for name in ("parity_plane", "chain_features", "global_pooling", "dense_heads"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"network.{name} must be true or false, got {getattr(self, name)!r}")
        if self.global_pooling and self.kind != "resnet":
            raise ValueError("network.global_pooling is a ResNet option (the graph network always pools; "
                             f"an MLP sees the whole board); network.kind is {self.kind!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"network.dtype must be one of {DTYPES}, got {self.dtype!r}")


def same_parameters(a: NetworkConfig, b: NetworkConfig) -> bool:
    """Whether networks ``a`` and ``b`` have the same parameters: every setting equal but the compute dtype
    (parameters are float32 whatever the network computes in)."""
    return dataclasses.replace(a, dtype=b.dtype) == b


def warm_starts(source: NetworkConfig, target: NetworkConfig) -> bool:
    """Whether parameters of a ``source`` network can start training a ``target`` one: the same parameters
    (``same_parameters``) but perhaps for the dense heads, which ``target`` may add (they start fresh) or leave
    out (they are dropped; the trunk, policy and value carry over)."""
    return same_parameters(dataclasses.replace(source, dense_heads=target.dense_heads), target)


def config_from_saved(fields: dict) -> NetworkConfig:
    """The ``NetworkConfig`` stored in a checkpoint's metadata or an agent's description (``dataclasses.asdict``
    of it). Never the defaults: a missing field is an error naming it."""
    missing = [f.name for f in dataclasses.fields(NetworkConfig) if f.name not in fields]
    if missing:
        raise ValueError(f"saved network settings {fields!r} lack {missing}")
    return NetworkConfig(**fields)


def plays_any_board(config: NetworkConfig) -> bool:
    """Whether a trained network of this kind is meant to play boards it was not trained on: the graph
    network (its units are boxes and lines). A ResNet's parameters fit every board too, and warm-start
    another board's training (``run.init_from``), but a ResNet trained on one board plays only that one."""
    return config.kind == "graph"


class PolicyValueNet(nn.Module):
    """``(observation [N, H, W, 4]) -> (logits [N, L], value [N])``. Logits are not masked.

    With ``dense=True`` (a network with ``config.dense_heads`` only) it returns ``(logits, value, ownership
    logits [N, B], margin [N])`` (``heads.DenseHeads``); the default call, the search's and play's, is the same
    function with or without the heads: they are extra parameters under ``dense_heads``, read only when asked."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, observation: jax.Array, dense: bool = False):
        if dense and not self.config.dense_heads:
            raise ValueError("this network has no dense heads (network.dense_heads: false)")
        dtype = compute_dtype(self.config.dtype)
        batch, height, width, _ = observation.shape
        num_boxes = ((height - 1) // 2) * ((width - 1) // 2)
        heads = DenseHeads(num_boxes, self.config.value_hidden, dtype, name=HEAD_PARAMS)
        if self.config.kind == "graph":
            line_states, value_features, boxes = GraphTrunk(
                self.config.width, self.config.blocks, self.config.chain_features, self.config.parity_plane, dtype
            )(observation)
            logits = nn.Dense(1, kernel_init=kaiming, dtype=dtype)(line_states)[..., 0].astype(jnp.float32)
            value = self._value_head(value_features, dtype)
            return (logits, value, *heads(boxes, value_features)) if dense else (logits, value)
        trunk_settings = dict(width=self.config.width, blocks=self.config.blocks,
                              input_planes=self.config.input_planes, chain_features=self.config.chain_features,
                              dtype=dtype)
        if self.config.kind == "mlp":
            x = mlp_trunk(observation, **trunk_settings)
            num_lines = len(line_cells_of_grid(height, width))
            logits = nn.Dense(num_lines, kernel_init=kaiming, dtype=dtype)(x).astype(jnp.float32)
            value = self._value_head(x, dtype)
            return (logits, value, *heads(None, x)) if dense else (logits, value)

        x = resnet_trunk(observation, global_pooling=self.config.global_pooling, **trunk_settings)
        p = nn.relu(nn.Conv(max(self.config.width // 2, 1), (3, 3), kernel_init=kaiming, dtype=dtype)(x))
        p = nn.Conv(1, (1, 1), kernel_init=kaiming, dtype=dtype)(p).reshape(batch, height * width)
        logits = p[:, line_cells_of_grid(height, width)].astype(jnp.float32)

        v = nn.relu(nn.Conv(max(self.config.width // 4, 1), (1, 1), kernel_init=kaiming, dtype=dtype)(x))
        pooled = jnp.concatenate([v.mean(axis=(1, 2)), v.max(axis=(1, 2))], axis=-1)
        value = self._value_head(pooled, dtype)
        if not dense:
            return logits, value
        box_cells = board_geometry((height - 1) // 2, (width - 1) // 2).box_cells
        boxes = x.reshape(batch, height * width, -1)[:, box_cells[:, 0] * width + box_cells[:, 1]]  # [N, B, C]
        return (logits, value, *heads(boxes, pooled))

    def _value_head(self, features: jax.Array, dtype) -> jax.Array:
        """``[N, F] -> [N]`` in [-1, 1]: a hidden layer of ``value_hidden`` units, then ``tanh`` of one output."""
        v = nn.relu(nn.Dense(self.config.value_hidden, kernel_init=kaiming, dtype=dtype)(features))
        return jnp.tanh(nn.Dense(1, dtype=dtype)(v)[:, 0].astype(jnp.float32))


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Illegal moves get the most negative finite float (finite so that an all-illegal row stays NaN-free)."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def init_params(config: NetworkConfig, grid_shape: tuple[int, int], key: jax.Array):
    """Parameters for a board whose observation grid is ``grid_shape``; a ResNet's fit every board size, an
    MLP's that board's only."""
    dummy = jnp.zeros((1, *grid_shape, env_lib.NUM_PLANES), jnp.float32)
    return PolicyValueNet(config).init(key, dummy, dense=config.dense_heads)


def num_parameters(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))
