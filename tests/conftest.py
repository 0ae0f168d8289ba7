"""Shared fixtures. Jitted functions are built once per board size and module (XLA compiles dominate)."""

from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib.util
import os
import pathlib
import re
import shutil
import sys
import tempfile

# pytest -n runs several processes: on a GPU none may take JAX's default 75% of the memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# XLA's compiles dominate the suite on 2 cores, and the tests' programs are tiny: compile them (and those of the
# processes the tests start, which inherit this) without LLVM's costly optimisations. Not level 0: XLA's CPU code
# at level 0 turns the Adam steps of the fit tests into NaNs. A user's XLA_FLAGS win.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true")
# The user's folder of agents (``pretrained:RxC`` before the shipped ones; ``dabjax pretrained export`` with no
# --out writes there): an empty one of this process, so that the tests neither read nor write the developer's.
os.environ["DABJAX_AGENTS"] = tempfile.mkdtemp(prefix="dabjax-agents-")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import mcts, network
from dabjax.training import checkpoint

atexit.register(shutil.rmtree, os.environ["DABJAX_AGENTS"], True)


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


def states_from_lines(geometry, lines: np.ndarray, seed: int = 0) -> env_lib.State:
    """A batch of States for bool ``lines [N, L]``: completed boxes get random owners, scores follow them,
    player to move at random. (Exact values depend only on the lines.)"""
    lines = np.asarray(lines, dtype=bool)
    rng = np.random.default_rng(seed)
    n = lines.shape[0]
    complete = lines[:, geometry.box_lines].all(-1)
    owner = np.where(complete, rng.integers(0, 2, size=complete.shape), -1).astype(np.int8)
    scores = np.stack([(owner == 0).sum(1), (owner == 1).sum(1)], axis=1).astype(np.int32)
    drawn = lines.sum(1).astype(np.int32)
    terminated = drawn == geometry.num_lines
    return env_lib.State(
        lines=jnp.asarray(lines),
        box_owner=jnp.asarray(owner),
        scores=jnp.asarray(scores),
        current_player=jnp.asarray(rng.integers(0, 2, size=n).astype(np.int32)),
        num_moves=jnp.asarray(drawn),
        terminated=jnp.asarray(terminated),
        truncated=jnp.zeros(n, bool),
        legal_action_mask=jnp.asarray(~lines | terminated[:, None]),
        rewards=jnp.zeros((n, 2), jnp.float32),
    )


def all_line_sets(num_lines: int) -> np.ndarray:
    """bool ``[2**L, L]``: every set of drawn lines, in table-index order."""
    keys = np.arange(1 << num_lines, dtype=np.int64)
    return ((keys[:, None] >> np.arange(num_lines)) & 1).astype(bool)


def batched(fn, batch_size: int = 1 << 14):
    """Applies jitted ``fn`` over a State batch in fixed-size chunks (one compile: the last is padded)."""

    def run(states):
        n = states.lines.shape[0]
        outputs = []
        for start in range(0, n, batch_size):
            chunk = jax.tree_util.tree_map(lambda x: x[start:start + batch_size], states)
            size = chunk.lines.shape[0]
            if size < batch_size:
                chunk = jax.tree_util.tree_map(
                    lambda x: np.concatenate([np.asarray(x), np.repeat(np.asarray(x)[:1], batch_size - size, 0)]),
                    chunk,
                )
            out = fn(chunk)
            outputs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:size], out))
        return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outputs)

    return run


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run directory with two 2x2 checkpoints written by the trainer's CheckpointStore (read it; copy it to
    change it: the fixture is shared by the whole session)."""
    run = tmp_path_factory.mktemp("tiny_run")
    config = network.NetworkConfig(width=8, blocks=1, value_hidden=8)
    store = checkpoint.CheckpointStore(run)
    for iteration in (1, 2):
        params = network.init_params(config, board_geometry(2, 2).grid_shape, jax.random.PRNGKey(iteration))
        meta = dict(rows=2, cols=2, network=dataclasses.asdict(config),
                    search=dataclasses.asdict(mcts.SearchConfig(num_simulations=4)), wall_time=30.0 * iteration)
        store.save(iteration, params, {"step": np.int32(iteration)}, meta)
    store.close()
    return run


def summary_commands(text: str) -> dict[str, str]:
    """``{what: command}`` from the ``next:`` block of a run's closing summary (``dabjax.runs.run_summary``); a
    command under the one before it gets its name with ``+`` (``evaluate it+``)."""
    block = text[text.rindex("next:"):].splitlines()[1:]
    commands, what = {}, ""
    for line in block:
        match = re.match(r"^  (.*?)\s{2,}(dabjax .*)$", line)
        if match:
            what = match.group(1).strip() or what + "+"
            commands[what] = match.group(2)
    return commands


def load_benchmark(name: str):
    """The script ``benchmarks/NAME.py`` as a module (benchmarks/ is not a package). It is registered in
    ``sys.modules`` under ``name``: dataclasses look their module up there."""
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
