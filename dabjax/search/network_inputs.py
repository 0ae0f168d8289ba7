"""What the policy-value networks read from an observation ``[N, H, W, >= 4]`` (``H = 2R+1``, ``W = 2C+1``):
the position it encodes and where the line cells sit on the grid. Pure functions, no parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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

