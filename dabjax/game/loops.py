"""How the data-dependent loops of the hot path are compiled, and how a GPU runs them without the host.

Several loops of a search stop when the data says so: the forced-capture settle, the chain walk, the label
propagation, the tree descent. Each is a ``lax.while_loop`` (``repeat_while``), which stops as soon as every
element of the batch is done.

XLA's GPU runtime runs a ``while`` loop from the host: it copies the condition back and waits at every turn.
What takes the host out is XLA's command buffers (CUDA graphs) for loops and conditionals,
``--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL``: a ``while`` loop becomes a graph with a conditional node
that the device repeats by itself. Importing ``dabjax`` adds that flag to ``XLA_FLAGS`` (``enable_command_buffers``;
``DABJAX_COMMAND_BUFFERS=0`` leaves ``XLA_FLAGS`` alone); measured in docs/results.md, "GPU self-play
throughput". A host callback keeps the loops around it out of command buffers, so none may be in the hot path
(``host_waits`` finds them).
"""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp

COMMAND_BUFFERS_VARIABLE = "DABJAX_COMMAND_BUFFERS"  # "0": leave XLA_FLAGS as it is
COMMAND_BUFFER_OPTION = "--xla_gpu_enable_command_buffer"  # XLA's option, whatever value a user gives it
COMMAND_BUFFER_FLAG = f"{COMMAND_BUFFER_OPTION}=+WHILE,+CONDITIONAL"  # on top of XLA's default types


def repeat_while(cond, body, init, steps_per_turn: int):
    """``jax.lax.while_loop(cond, body, init)``, taking up to ``steps_per_turn`` guarded steps per turn of the
    loop: the same result in fewer turns. A turn of a batched loop costs a reduction of ``cond`` over the
    batch and a launch per kernel, more than a cheap step on bit boards."""

    def turn(carry):
        for _ in range(steps_per_turn):
            going, stepped = cond(carry), body(carry)
            carry = jax.tree_util.tree_map(lambda new, old: jnp.where(going, new, old), stepped, carry)
        return carry

    return jax.lax.while_loop(cond, turn, init)


# --- finding the loops and branches that make a device wait ------------------------------------------------

# A while or cond waits for the host unless XLA records it as a command buffer; a callback into Python always
# does, and keeps the loops around it out of command buffers.
HOST_CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "debug_callback")
HOST_WAITING_PRIMITIVES = ("while", "cond", *HOST_CALLBACK_PRIMITIVES)


def host_waits(jaxpr) -> list[tuple[str, str]]:
    """``(primitive, where)`` for every ``while``, ``cond`` and host callback (``HOST_CALLBACK_PRIMITIVES``) in a
    (closed) jaxpr and all the jaxprs inside it
    (jit calls, scans, custom derivatives, the branches themselves); ``where`` is the user frame that traced
    it, past this module's helpers (``file:line (function)``). A ``fori_loop`` with static bounds is a ``scan``,
    and a ``cond`` under ``vmap`` on a batched predicate a ``select``: neither is listed, as neither makes a GPU
    wait for the host.
    """
    from jax._src import source_info_util  # the frame that traced an equation: no public API gives it

    found = []

    def walk(inner):
        inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr holds its Jaxpr
        for eqn in inner.eqns:
            if eqn.primitive.name in HOST_WAITING_PRIMITIVES:
                frames = source_info_util.user_frames(eqn.source_info.traceback)
                found.append((eqn.primitive.name, traced_at(frames)))
            for value in eqn.params.values():
                for item in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(item, "eqns") or hasattr(getattr(item, "jaxpr", None), "eqns"):
                        walk(item)

    walk(jaxpr)
    return found


def traced_at(frames) -> str:
    """``file:line (function)`` of the innermost frame outside this module (the caller of ``repeat_while``)."""
    frames = list(frames)
    frame = next((f for f in frames if not f.file_name.endswith("dabjax/game/loops.py")), frames[0] if frames else None)
    return "unknown" if frame is None else f"{frame.file_name}:{frame.start_line} ({frame.function_name})"


def enable_command_buffers(environ=None) -> bool:
    """Adds ``COMMAND_BUFFER_FLAG`` to ``environ["XLA_FLAGS"]`` (default ``os.environ``), so that XLA's GPU
    backend runs while loops and conditionals as CUDA graphs, without the host; True if it added it. It does
    nothing where ``DABJAX_COMMAND_BUFFERS`` is ``0``, where ``XLA_FLAGS`` already sets command buffers (the
    user's choice stands) or where JAX is older than 0.6 (its XLA may not parse the ``+TYPE`` form). Other
    backends ignore the flag. XLA reads ``XLA_FLAGS`` once, when the first backend starts: ``import dabjax``
    calls this, so import it before the first JAX computation of the process."""
    environ = os.environ if environ is None else environ
    if environ.get(COMMAND_BUFFERS_VARIABLE, "1") == "0":
        return False
    flags = environ.get("XLA_FLAGS", "")
    version = re.match(r"(\d+)\.(\d+)", jax.__version__)
    if COMMAND_BUFFER_OPTION in flags or not version or tuple(map(int, version.groups())) < (0, 6):
        return False
    environ["XLA_FLAGS"] = f"{flags} {COMMAND_BUFFER_FLAG}".strip()
    return True
