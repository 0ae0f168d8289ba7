"""The policy-value network (flax.linen), of the kinds of ``network_kinds.NETWORK_KINDS``.

Input: the environment's observation, float32 ``[N, 2R+1, 2C+1, 4]`` (from the side to move; the fourth
plane, the parity of the undrawn lines, is read only when ``parity_plane`` is on). Output: policy logits
``[N, L]`` in OpenSpiel line order (not masked) and the value ``[N]`` in ``[-1, 1]`` for the side to move.
No batch statistics anywhere, so the network is a pure function of its parameters; Kaiming (He)
initialisation throughout, as the paper.

The kinds (``network_kinds``):

* ``"resnet"`` (the paper's kind) is fully convolutional: a 3x3 stem convolution to ``width`` channels, then
  ``blocks`` residual blocks; with the paper's 5x5 setting (``width=160``, ``blocks=6``) about 2.8 M parameters.
* ``"mlp"`` reads the whole flattened grid; its parameters fit one board size only, and on small boards it costs
  far less per position than the convolutions (docs/lab/training.md, "The MLP network").
* ``"graph"`` passes messages between the boxes along the undrawn lines (``trunks.GraphTrunk``).
* ``"graph_attention"``: the graph network with global self-attention over its nodes after every round.
* ``"transformer"``: attention over line, box and ground tokens, biased by their relations (``attention``).

The graph and attention kinds have no absolute positions: one set of parameters plays every board size. Each kind
gives logits, value features and per-box features; this module adds the value head (``value_hidden`` units,
``tanh``) and the dense heads (``heads.DenseHeads``).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.search.heads import HEAD_PARAMS, DenseHeads
from dabjax.search.network_kinds import NETWORK_KINDS
from dabjax.search.trunks import kaiming

KINDS = tuple(NETWORK_KINDS)
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

    ``kind``: a key of ``network_kinds.NETWORK_KINDS``: ``"resnet"``, ``"mlp"``, ``"graph"`` (strings and coins:
    boxes and the ground as nodes, undrawn lines as edges; any board size), ``"graph_attention"`` or
    ``"transformer"``; ``width``: channels (resnet), units (mlp), node features (graph) or token features of the
    trunk; ``blocks``: residual blocks (message-passing rounds for the graph, attention blocks for the
    transformer); ``attention_heads``: heads of each attention layer (the attention kinds; ``width`` a multiple of
    it); ``value_hidden``: units of
    the value MLP; ``dtype``: compute dtype (``"float32"``, ``"bfloat16"`` or ``"auto"``: ``compute_dtype``;
    parameters stay float32 and the outputs are cast to float32 before the search);
    ``parity_plane``: read the observation's parity plane (``False``: the paper's three planes only);
    ``global_pooling``: KataGo's global pooling bias in every residual block (resnet only);
    ``dense_heads``: the auxiliary heads of ``heads.DenseHeads`` (every box's final owner and the final margin), which
    training can fit to every finished game (``targets.ownership_weight``, ``targets.margin_weight``);
    ``PolicyValueNet`` returns them only when asked."""

    kind: str = "resnet"
    width: int = 32
    blocks: int = 3
    attention_heads: int = 4
    value_hidden: int = 32
    dtype: str = "float32"
    parity_plane: bool = True
    global_pooling: bool = False
    dense_heads: bool = False

    @property
    def input_planes(self) -> int:
        return env_lib.NUM_PLANES if self.parity_plane else env_lib.PAPER_PLANES

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"network.kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("width", "blocks", "value_hidden", "attention_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (0 if name == "blocks" else 1):
                raise ValueError(f"network.{name} must be a positive integer, got {value!r}")
        for name in ("parity_plane", "global_pooling", "dense_heads"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"network.{name} must be true or false, got {getattr(self, name)!r}")
        if self.global_pooling and "global_pooling" not in NETWORK_KINDS[self.kind].uses:
            raise ValueError("network.global_pooling is a ResNet option (the graph network always pools; "
                             f"an MLP sees the whole board); network.kind is {self.kind!r}")
        if "attention_heads" in NETWORK_KINDS[self.kind].uses and self.width % self.attention_heads:
            raise ValueError(f"network.width ({self.width}) must be a multiple of network.attention_heads "
                             f"({self.attention_heads}) for network.kind {self.kind!r}")
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


# Fields added after networks were saved without them, with the value that reads those networks as they were
# trained (a field only some kinds use, so any value fits the others).
ADDED_FIELDS = {"attention_heads": NetworkConfig.attention_heads}

# Options dabjax does without, with the one value that describes every network it builds: saved agents and
# checkpoints hold them (the shipped agents' ``chain_features: false``), and a network that needs another value
# cannot be built here.
REMOVED_FIELDS = {"chain_features": False}


def config_from_saved(fields: dict) -> NetworkConfig:
    """The ``NetworkConfig`` stored in a checkpoint's metadata or an agent's description (``dataclasses.asdict``
    of it). Never the defaults, but for ``ADDED_FIELDS``: a missing field is an error naming it. A removed option
    (``REMOVED_FIELDS``) is dropped where it holds the value kept; another value of it is a ValueError naming it."""
    for name, kept in REMOVED_FIELDS.items():
        if name in fields and fields[name] != kept:
            raise ValueError(f"saved network settings have network.{name}={fields[name]!r}: this dabjax has no "
                             f"network.{name} option and builds only networks with {name}={kept!r}")
    fields = {name: value for name, value in fields.items() if name not in REMOVED_FIELDS}
    fields = {**{name: value for name, value in ADDED_FIELDS.items() if name not in fields}, **fields}
    missing = [f.name for f in dataclasses.fields(NetworkConfig) if f.name not in fields]
    if missing:
        raise ValueError(f"saved network settings {fields!r} lack {missing}")
    return NetworkConfig(**fields)


def plays_any_board(config: NetworkConfig) -> bool:
    """Whether a trained network of this kind is meant to play boards it was not trained on: the graph and
    attention networks (their units are boxes and lines). A ResNet's parameters fit every board too, and
    warm-start another board's training (``run.init_from``), but a ResNet trained on one board plays only that
    one."""
    return NETWORK_KINDS[config.kind].plays_any_board


def fits_any_board(config: NetworkConfig) -> bool:
    """Whether this kind's parameters fit every board size at all (all but the MLP's, whose first layer reads one
    grid): what a warm start or a measurement on another board needs."""
    return NETWORK_KINDS[config.kind].any_board_parameters


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
        _, height, width, _ = observation.shape
        num_boxes = ((height - 1) // 2) * ((width - 1) // 2)
        heads = DenseHeads(num_boxes, self.config.value_hidden, dtype, name=HEAD_PARAMS)
        logits, value_features, boxes = NETWORK_KINDS[self.config.kind].outputs(self.config, observation, dtype)
        value = self._value_head(value_features, dtype)
        if not dense:
            return logits, value
        return logits, value, *heads(boxes, value_features)

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
