"""Devices: a one-axis mesh over every local (or, after ``jax.distributed.initialize``, global) device.

Data parallelism the JAX way: arrays with a games or batch axis are sharded along the mesh's ``"data"``
axis, parameters, optimiser state and the replay buffer are replicated, and ``jit`` partitions the
computation (XLA's SPMD partitioner inserts the gradient all-reduce). Nothing else changes: the same
config runs on 1 or N devices and computes the same numbers up to floating-point summation order (random
numbers do not depend on the sharding: ``jax_threefry_partitionable`` is on by default).
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


def data_mesh(devices=None) -> Mesh:
    """A 1-D mesh named ``"data"`` over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.array(devices), (DATA_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh, the rest whole."""
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def step_batch_sharding(mesh: Mesh) -> NamedSharding:
    """For ``[steps, batch, ...]`` plans: the batch axis split, the steps whole."""
    return NamedSharding(mesh, PartitionSpec(None, DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def check_divisible(name: str, value: int, mesh: Mesh) -> None:
    """Batch sizes must split evenly over the devices; fail at start-up, not inside XLA."""
    count = mesh.devices.size
    if value % count:
        raise ValueError(f"{name} = {value} must be a multiple of the number of devices ({count})")


def put_global(tree, sharding: NamedSharding):
    """Places every leaf of ``tree`` (the same values on every process) with ``sharding``.

    Works with one or several processes: each process fills its own devices' shards from its copy.
    """

    def put(leaf):
        host = np.asarray(leaf)
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", host.dtype), jax.dtypes.prng_key):
            raise TypeError("typed PRNG keys are not supported here; use jax.random.PRNGKey (uint32 keys)")
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree_util.tree_map(put, tree)
