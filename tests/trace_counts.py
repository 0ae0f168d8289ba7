"""Counting how often the jitted functions that some code builds are traced, a test's helper (``import trace_counts``
beside ``conftest``), not part of the package. JAX traces a jitted function again for every new shape, dtype or
sharding of its arguments (and compiles it again), so a count above one is a recompile."""

from __future__ import annotations

import collections
import contextlib

import jax
import pytest


@contextlib.contextmanager
def counting_traces():
    """Within the block, every ``jax.jit(fn, ...)`` made counts the traces of ``fn`` by its name
    (``fn.__name__``, or its ``func``'s for a ``functools.partial``), also after the block. Yields the counts
    (a ``collections.Counter``)."""
    counts: collections.Counter[str] = collections.Counter()
    jit = jax.jit

    def counting_jit(fn, *args, **kwargs):
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", repr(fn))

        def traced(*fn_args, **fn_kwargs):
            counts[name] += 1  # Python runs here only while JAX traces
            return fn(*fn_args, **fn_kwargs)

        return jit(traced, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jax, "jit", counting_jit)
        yield counts
