"""The policy-value network (flax.linen): fully convolutional, so one definition serves every board size.

Input: the environment's observation, float32 ``[N, 2R+1, 2C+1, 4]`` (from the side to move; the fourth
plane, the parity of the undrawn lines, is read only when ``parity_plane`` is on).
Trunk: a 3x3 stem convolution to ``width`` channels, then ``blocks`` residual blocks (two 3x3 convolutions
with layer normalisation; no batch statistics, so the network is a pure function of its parameters).
Kaiming (He) initialisation throughout, as the paper.
Policy head: a 3x3 then a 1x1 convolution to one logit per grid cell; the logits of the cells where lines
sit are read out in OpenSpiel line order: ``[N, L]``. Value head: a 1x1 convolution, mean- and max-pooling
over the grid, an MLP and ``tanh``: ``[N]`` in ``[-1, 1]`` for the side to move.

With the paper's 5x5 setting (``width=160``, ``blocks=6``) the network has about 2.8 M parameters.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax import env as env_lib
from dabjax.geometry import board_geometry

kaiming = nn.initializers.kaiming_normal()


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network size. ``width``: channels of the trunk; ``blocks``: residual blocks; ``value_hidden``: units
    of the value MLP; ``dtype``: compute dtype (``"float32"`` or ``"bfloat16"``; parameters stay float32);
    ``parity_plane``: read the observation's parity plane (``False``: the paper's three planes only)."""

    width: int = 64
    blocks: int = 4
    value_hidden: int = 64
    dtype: str = "float32"
    parity_plane: bool = True

    @property
    def input_planes(self) -> int:
        return env_lib.NUM_PLANES if self.parity_plane else env_lib.PAPER_PLANES

    def __post_init__(self):
        for name in ("width", "blocks", "value_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (0 if name == "blocks" else 1):
                raise ValueError(f"network.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.parity_plane, bool):
            raise ValueError(f"network.parity_plane must be true or false, got {self.parity_plane!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"network.dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")


def config_from_saved(fields: dict) -> NetworkConfig:
    """The ``NetworkConfig`` stored in a checkpoint's metadata. Checkpoints written before the parity plane
    existed have no ``parity_plane`` field: their networks read the paper's three planes."""
    return NetworkConfig(**{"parity_plane": False, **fields})


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


class PolicyValueNet(nn.Module):
    """``(observation [N, H, W, 3]) -> (logits [N, L], value [N])``. Logits are not masked."""

    config: NetworkConfig = NetworkConfig()

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array]:
        dtype = jnp.dtype(self.config.dtype)
        batch, height, width, _ = observation.shape
        observation = observation[..., : self.config.input_planes]
        x = nn.Conv(self.config.width, (3, 3), kernel_init=kaiming, dtype=dtype)(observation.astype(dtype))
        x = nn.relu(nn.LayerNorm(dtype=dtype)(x))
        for _ in range(self.config.blocks):
            x = ResidualBlock(self.config.width, dtype)(x)

        p = nn.relu(nn.Conv(max(self.config.width // 2, 1), (3, 3), kernel_init=kaiming, dtype=dtype)(x))
        p = nn.Conv(1, (1, 1), kernel_init=kaiming, dtype=dtype)(p).reshape(batch, height * width)
        logits = p[:, line_cells_of_grid(height, width)].astype(jnp.float32)

        v = nn.relu(nn.Conv(max(self.config.width // 4, 1), (1, 1), kernel_init=kaiming, dtype=dtype)(x))
        pooled = jnp.concatenate([v.mean(axis=(1, 2)), v.max(axis=(1, 2))], axis=-1)
        v = nn.relu(nn.Dense(self.config.value_hidden, kernel_init=kaiming, dtype=dtype)(pooled))
        value = jnp.tanh(nn.Dense(1, dtype=dtype)(v)[:, 0].astype(jnp.float32))
        return logits, value


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Illegal moves get the most negative finite float (finite so that an all-illegal row stays NaN-free)."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def init_params(config: NetworkConfig, grid_shape: tuple[int, int], key: jax.Array):
    """Parameters for a board whose observation grid is ``grid_shape``; they fit every board size."""
    dummy = jnp.zeros((1, *grid_shape, env_lib.NUM_PLANES), jnp.float32)
    return PolicyValueNet(config).init(key, dummy)


def num_parameters(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))
