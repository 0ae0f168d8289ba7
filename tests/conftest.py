"""Shared fixtures. Jitted functions are built once per board size and module (XLA compiles dominate)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax import env as env_lib
from dabjax.geometry import board_geometry


@functools.lru_cache(maxsize=None)
def jitted_play_prefix(rows: int, cols: int, early_termination: bool = False):
    """jit(moves int32[L], count int32[]) -> State after the first ``count`` moves of ``moves``.

    Static shapes: one compile per board size, whatever the prefix length.
    """
    geometry = board_geometry(rows, cols)

    def play(moves, count):
        def body(t, state):
            stepped = env_lib.step(geometry, state, moves[t], early_termination)
            return jax.tree_util.tree_map(lambda a, b: jnp.where(t < count, a, b), stepped, state)

        return jax.lax.fori_loop(0, geometry.num_lines, body, env_lib.init(geometry))

    return jax.jit(play)


@functools.lru_cache(maxsize=None)
def jitted_step(rows: int, cols: int, early_termination: bool = False):
    geometry = board_geometry(rows, cols)
    return jax.jit(lambda s, a: env_lib.step(geometry, s, a, early_termination))


def random_permutation(rng: np.random.Generator, num_lines: int) -> np.ndarray:
    return rng.permutation(num_lines).astype(np.int32)


def trees_equal(a, b) -> bool:
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    return tree_a == tree_b and all(
        np.asarray(x).shape == np.asarray(y).shape and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(leaves_a, leaves_b)
    )


@pytest.fixture(scope="session")
def play_prefix():
    return jitted_play_prefix


@pytest.fixture(scope="session")
def step_fn():
    return jitted_step
