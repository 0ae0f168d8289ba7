"""What the policy-value networks read from an observation ``[N, H, W, >= 4]`` (``H = 2R+1``, ``W = 2C+1``):
the position it encodes, the chain-structure features of ``dabjax.game.chain_features`` and where the line
cells sit on the grid. Pure functions, no parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chain_features
from dabjax.game.geometry import board_geometry


def line_cells_of_grid(height: int, width: int) -> np.ndarray:
    """int32 ``[L]``: flat grid indices of the line cells, in OpenSpiel line order, from the grid shape."""
    if height % 2 == 0 or width % 2 == 0:
        raise ValueError(f"observation grid must be (2R+1) x (2C+1), got {height} x {width}")
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    return (geometry.line_cells[:, 0] * width + geometry.line_cells[:, 1]).astype(np.int32)


def position_of(observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """What an observation ``[N, H, W, >= 4]`` says: ``(lines bool [N, L], claimed bool [N, B],
    score plane float32 [N], parity float32 [N])``."""
    batch, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    flat = observation.reshape(batch, height * width, observation.shape[-1])
    line_cells = jnp.asarray(geometry.line_cells[:, 0] * width + geometry.line_cells[:, 1])
    box_cells = jnp.asarray(geometry.box_cells[:, 0] * width + geometry.box_cells[:, 1])
    lines = flat[:, line_cells, 0] > 0.5
    claimed = flat[:, box_cells, 1] > 0.5
    return lines, claimed, flat[:, 0, 2], flat[:, 0, 3]


def observed_chain_features(observation: jax.Array) -> chain_features.ChainFeatures:
    """``chain_features`` of every position of an observation batch ``[N, H, W, >= 4]`` (fields ``[N, ...]``)."""
    _, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    lines, claimed, _, _ = position_of(observation)
    return jax.vmap(lambda l, c: chain_features.chain_features(geometry, l, c))(lines, claimed)


def chain_feature_planes(observation: jax.Array) -> jax.Array:
    """float32 ``[N, H, W, F]``: ``observed_chain_features`` painted on the grid (box features at box cells,
    line features at line cells, position features everywhere)."""
    batch, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    features = observed_chain_features(observation)

    def paint(values, cells):  # values [N, K, F] -> [N, H * W, F], zero off ``cells`` (-1 reads a zero row)
        padded = jnp.concatenate([values, jnp.zeros_like(values[:, :1])], axis=1)
        return padded[:, jnp.asarray(cells.reshape(-1))]

    planes = [paint(features.box, geometry.cell_box), paint(features.line, geometry.cell_line),
              jnp.broadcast_to(features.position[:, None, :], (batch, height * width, features.position.shape[-1]))]
    return jnp.concatenate(planes, axis=-1).reshape(batch, height, width, -1)
