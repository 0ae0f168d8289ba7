"""The policy-value network (flax.linen), of two kinds.

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
fit one board size only, and on small boards it is far cheaper per position than the convolutions: on the
3x3 board a 256x2 MLP trains 35x faster per step on a CPU than the 32x3 ResNet and learns exact labels
better per second (docs/training.md, "The MLP network").
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry

kaiming = nn.initializers.kaiming_normal()
KINDS = ("resnet", "mlp")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network kind and size: the ``network`` section of a training config (``dabjax.training.config``) and
    the one place its defaults live (a 32-wide, 3-block ResNet). Frozen, so hashable (a jit static
    argument); validated at construction, the message naming the config key.

    ``kind``: ``"resnet"`` or ``"mlp"``; ``width``: channels (resnet) or units (mlp) of the trunk; ``blocks``:
    residual blocks; ``value_hidden``: units of the value MLP; ``dtype``: compute dtype (``"float32"`` or
    ``"bfloat16"``; parameters stay float32); ``parity_plane``: read the observation's parity plane
    (``False``: the paper's three planes only)."""

    kind: str = "resnet"
    width: int = 32
    blocks: int = 3
    value_hidden: int = 32
    dtype: str = "float32"
    parity_plane: bool = True

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
        if not isinstance(self.parity_plane, bool):
            raise ValueError(f"network.parity_plane must be true or false, got {self.parity_plane!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"network.dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")


# Settings added after the first checkpoints were written, with the value those checkpoints' networks have:
# before the parity plane they read the paper's three planes, before the MLP they were ResNets.
SETTINGS_OF_EARLY_CHECKPOINTS = {"parity_plane": False, "kind": "resnet"}


def config_from_saved(fields: dict) -> NetworkConfig:
    """The ``NetworkConfig`` stored in a checkpoint's metadata (``dataclasses.asdict`` of it). Never the
    defaults: a field missing from the metadata is one that did not exist yet when it was written
    (``SETTINGS_OF_EARLY_CHECKPOINTS``), any other missing field is an error."""
    known = {**SETTINGS_OF_EARLY_CHECKPOINTS, **fields}
    missing = [f.name for f in dataclasses.fields(NetworkConfig) if f.name not in known]
    if missing:
        raise ValueError(f"saved network settings {fields!r} lack {missing}")
    return NetworkConfig(**known)


def line_cells_of_grid(height: int, width: int) -> np.ndarray:
    """int32 ``[L]``: flat grid indices of the line cells, in OpenSpiel line order, from the grid shape."""
    if height % 2 == 0 or width % 2 == 0:
        raise ValueError(f"observation grid must be (2R+1) x (2C+1), got {height} x {width}")
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    return (geometry.line_cells[:, 0] * width + geometry.line_cells[:, 1]).astype(np.int32)


class ResidualBlock(nn.Module):
    width: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


class DenseBlock(nn.Module):
    width: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


class PolicyValueNet(nn.Module):
    """``(observation [N, H, W, 4]) -> (logits [N, L], value [N])``. Logits are not masked."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array]:
        dtype = jnp.dtype(self.config.dtype)
        batch, height, width, _ = observation.shape
        observation = observation[..., : self.config.input_planes]
        if self.config.kind == "mlp":
            flat = observation.reshape(batch, -1).astype(dtype)
            x = nn.relu(nn.LayerNorm(dtype=dtype)(nn.Dense(self.config.width, kernel_init=kaiming, dtype=dtype)(flat)))
            for _ in range(self.config.blocks):
                x = DenseBlock(self.config.width, dtype)(x)
            num_lines = len(line_cells_of_grid(height, width))
            logits = nn.Dense(num_lines, kernel_init=kaiming, dtype=dtype)(x).astype(jnp.float32)
            return logits, self._value_head(x, dtype)

        x = nn.Conv(self.config.width, (3, 3), kernel_init=kaiming, dtype=dtype)(observation.astype(dtype))
        x = nn.relu(nn.LayerNorm(dtype=dtype)(x))
        for _ in range(self.config.blocks):
            x = ResidualBlock(self.config.width, dtype)(x)

        p = nn.relu(nn.Conv(max(self.config.width // 2, 1), (3, 3), kernel_init=kaiming, dtype=dtype)(x))
        p = nn.Conv(1, (1, 1), kernel_init=kaiming, dtype=dtype)(p).reshape(batch, height * width)
        logits = p[:, line_cells_of_grid(height, width)].astype(jnp.float32)

        v = nn.relu(nn.Conv(max(self.config.width // 4, 1), (1, 1), kernel_init=kaiming, dtype=dtype)(x))
        pooled = jnp.concatenate([v.mean(axis=(1, 2)), v.max(axis=(1, 2))], axis=-1)
        return logits, self._value_head(pooled, dtype)

    def _value_head(self, features: jax.Array, dtype) -> jax.Array:
        """``[N, F] -> [N]`` in [-1, 1]: a hidden layer of ``value_hidden`` units, then ``tanh``."""
        v = nn.relu(nn.Dense(self.config.value_hidden, kernel_init=kaiming, dtype=dtype)(features))
        return jnp.tanh(nn.Dense(1, dtype=dtype)(v)[:, 0].astype(jnp.float32))


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Illegal moves get the most negative finite float (finite so that an all-illegal row stays NaN-free)."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def init_params(config: NetworkConfig, grid_shape: tuple[int, int], key: jax.Array):
    """Parameters for a board whose observation grid is ``grid_shape``; a ResNet's fit every board size, an
    MLP's that board's only."""
    dummy = jnp.zeros((1, *grid_shape, env_lib.NUM_PLANES), jnp.float32)
    return PolicyValueNet(config).init(key, dummy)


def num_parameters(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))
