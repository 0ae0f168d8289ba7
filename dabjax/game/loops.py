"""How the data-dependent loops of the hot path are compiled, and how a GPU runs them without the host.

Several loops of a search stop when the data says so: the forced-capture settle, the chain walk, the label
propagation, the tree descent. Each is a ``lax.while_loop`` (``repeat_while``), which stops as soon as every
element of the batch is done.

XLA's GPU runtime runs a ``while`` loop from the host: it copies the condition back and waits at every turn.
What takes the host out is XLA's command buffers (CUDA graphs) for loops and conditionals,
``--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL``: a ``while`` loop becomes a graph with a conditional node
that the device repeats by itself; measured in docs/results.md, "GPU self-play throughput". A host callback keeps
the loops around it out of command buffers, so none may be in the hot path (``host_waits`` finds them).

Importing ``dabjax`` adds that flag to ``XLA_FLAGS`` only where it works (``enable_command_buffers``): on an
NVIDIA GPU whose driver, CUDA runtime and jaxlib run conditional nodes correctly (``command_buffer_decision``
says why not elsewhere, in one logged line); without a GPU it touches nothing. ``DABJAX_COMMAND_BUFFERS=0`` or
``1`` forces them off or on. The import sets it, rather than each entry point, because XLA reads ``XLA_FLAGS``
once, when the first backend starts, and the import is the one step that comes before the first computation
on every way in: the ``dabjax`` commands, library code, notebooks, the benchmarks and the processes they start
(which inherit ``XLA_FLAGS``). With the guard, that import changes nothing on a machine where the flag would
hang or crash. The versions come from files and package metadata, without starting a backend.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np

COMMAND_BUFFERS_VARIABLE = "DABJAX_COMMAND_BUFFERS"  # "0": leave XLA_FLAGS as it is; "1": add the flag
COMMAND_BUFFER_OPTION = "--xla_gpu_enable_command_buffer"  # XLA's option, whatever value a user gives it
COMMAND_BUFFER_FLAG = f"{COMMAND_BUFFER_OPTION}=+WHILE,+CONDITIONAL"  # on top of XLA's default types


def repeat_while(cond, body, init, steps_per_turn: int):
    """``jax.lax.while_loop(cond, body, init)``, taking up to ``steps_per_turn`` guarded steps per turn of the
    loop: the same result in fewer turns. A turn of a batched loop costs a reduction of ``cond`` over the
    batch and a launch per kernel, more than a cheap step on bit boards."""
    return jax.lax.while_loop(cond, functools.partial(_turn, cond, body, steps_per_turn), init)


def _turn(cond, body, steps_per_turn: int, carry):
    """``steps_per_turn`` steps of ``body``, each taken only where ``cond`` still holds."""
    for _ in range(steps_per_turn):
        going, stepped = cond(carry), body(carry)
        carry = jax.tree_util.tree_map(lambda new, old: jnp.where(going, new, old), stepped, carry)
    return carry


def lanes_for(batch: int, share: float) -> int:
    """The lanes ``on_lanes`` gathers for a ``share`` of a batch of ``batch`` (at least one; the batch itself
    where the share is 1 or more)."""
    return max(1, min(batch, int(np.ceil(batch * share))))


def on_lanes(fn, needs: jax.Array, inputs, otherwise, lanes: int):
    """``fn`` on the elements of a batch that need it, gathered into ``lanes`` slots: element by element,
    ``fn(inputs)`` where ``needs`` holds and ``otherwise`` elsewhere.

    ``fn`` maps a batch ``[K, ...]`` (pytree) to a batch ``[K, ...]`` element by element (a vmapped function of
    one element), for any ``K``; ``needs`` is bool ``[N]``, ``inputs`` and ``otherwise`` batches of ``N`` (
    ``otherwise`` shaped like ``fn``'s output). A vmapped loop runs as many steps as its slowest element, and
    the elements that need no step still take lanes: here the batch decides, once (a ``lax.switch`` on how many
    need it), between nothing (none does: ``otherwise``), ``fn`` on the ``lanes`` gathered elements that need
    it (scattered back into ``otherwise``), and ``fn`` on the whole batch where more need it than ``lanes``
    holds. The result is the same either way; only the work differs. ``lanes >= N``: the whole batch, no
    switch. Under an outer ``vmap`` the switch becomes a select: all three branches run, with the same result."""
    needs = jnp.asarray(needs, bool)
    batch = needs.shape[0]

    def whole(inputs):
        return jax.tree_util.tree_map(lambda new, old: jnp.where(_row_mask(needs, new), new, old), fn(inputs),
                                      otherwise)

    if lanes >= batch:
        return whole(inputs)

    def none(_):
        return otherwise

    def gathered(inputs):
        (index,) = jnp.nonzero(needs, size=lanes, fill_value=batch)  # index N: an empty lane, dropped below
        # An empty lane repeats the first element that needs the work: it costs no more than its neighbours.
        source = jnp.where(index < batch, index, index[0])
        lane_inputs = jax.tree_util.tree_map(lambda x: jnp.take(x, source, axis=0), inputs)
        return jax.tree_util.tree_map(lambda old, new: old.at[index].set(new, mode="drop"), otherwise,
                                      fn(lane_inputs))

    count = needs.sum(dtype=jnp.int32)
    branch = jnp.where(count == 0, 0, jnp.where(count <= lanes, 1, 2))
    return jax.lax.switch(branch, (none, gathered, whole), inputs)


def _row_mask(rows: jax.Array, like: jax.Array) -> jax.Array:
    """``rows`` bool ``[N]`` shaped to broadcast against ``like`` ``[N, ...]``."""
    return rows.reshape(rows.shape + (1,) * (like.ndim - 1))


def repeat_on_lanes(cond, body, init, steps_per_turn: int, lanes: int):
    """``jax.vmap(lambda x: repeat_while(cond, body, x, steps_per_turn))(init)`` for a batch ``init`` (pytree,
    leading axis ``N``; ``cond`` and ``body`` act on one element): the loop's first turn on the whole batch,
    without a loop (most elements that step at all are done in it), then the loop on the elements still going,
    gathered into ``lanes`` slots (``on_lanes``). The same result, element by element; the tail of a batch
    whose few elements loop long runs on ``lanes`` elements instead of ``N``."""
    first = jax.vmap(functools.partial(_turn, cond, body, steps_per_turn))(init)
    loop = jax.vmap(lambda x: repeat_while(cond, body, x, steps_per_turn))
    return on_lanes(loop, jax.vmap(cond)(first), first, first, lanes)


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


# --- command buffers only where the driver, the CUDA runtime and jaxlib run them ------------------------------

# CUDA graphs' conditional nodes, which +WHILE,+CONDITIONAL records, came with CUDA 12.3 and 12.4, in the driver
# (r550 ships CUDA 12.4) and in the runtime; the later release is asked of both.
CONDITIONAL_NODES_DRIVER = 550
CONDITIONAL_NODES_RUNTIME = (12, 4)
# Drivers before r570 (CUDA 12.8) hang on a conditional node whose body graph is empty; XLA works around that
# only in some of its releases, so an older driver keeps the loops on the host.
EMPTY_BODY_FIXED_DRIVER = 570
# XLA crashed on the second run of a while loop recorded as a command buffer ("graph_exec_ is nullptr for top
# level cuda command buffer": a conditional node's nested buffer without its parent). The fix landed as the 0.8
# series of jaxlib ended, so 0.9 is asked: the first release sure to hold it.
SECOND_RUN_FIXED_JAXLIB = (0, 9)

CUDA_RUNTIME_PACKAGES = ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")
CUDA_PLUGIN_RUNTIMES = (("jax-cuda13-plugin", "13.0"),)  # a plugin whose CUDA major alone proves enough
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"

logger = logging.getLogger(__name__)


def leading_numbers(version: str | None, count: int) -> tuple[int, ...] | None:
    """The first ``count`` dot-separated integers of ``version`` (``"12.8.90"``, 2 -> ``(12, 8)``); None where
    it has fewer or is None."""
    found = re.match(r"\D*" + r"\.".join([r"(\d+)"] * count), version or "")
    return tuple(int(part) for part in found.groups()) if found else None


def command_buffer_decision(driver_version: str | None, runtime_version: str | None,
                            jaxlib_version: str | None) -> tuple[bool, str]:
    """Whether XLA's command buffers for while loops and conditionals should be on, and one line saying why
    not: ``driver_version`` the NVIDIA driver's (``"570.86.15"``; None without a GPU), ``runtime_version`` the
    CUDA runtime's (``"12.8.90"``; None where unknown), ``jaxlib_version`` jaxlib's. The reason is empty when
    on, and ``"no NVIDIA driver"`` without one, where the flag has nothing to do."""
    driver = leading_numbers(driver_version, 1)
    if driver is None:
        return False, "no NVIDIA driver"
    runtime = leading_numbers(runtime_version, 2)
    if runtime is None:
        return False, "the CUDA runtime's version is unknown (no jax-cuda plugin or nvidia-cuda-runtime wheel)"
    if driver[0] < CONDITIONAL_NODES_DRIVER or runtime < CONDITIONAL_NODES_RUNTIME:
        return False, (f"CUDA driver {driver_version} with runtime {runtime_version} lacks CUDA graphs' conditional "
                       f"nodes (driver r{CONDITIONAL_NODES_DRIVER} and runtime "
                       f"{'.'.join(map(str, CONDITIONAL_NODES_RUNTIME))} or newer)")
    if driver[0] < EMPTY_BODY_FIXED_DRIVER:
        return False, (f"CUDA driver {driver_version} predates r{EMPTY_BODY_FIXED_DRIVER}, which fixed a hang of "
                       "conditional nodes with empty bodies")
    jaxlib = leading_numbers(jaxlib_version, 2)
    if jaxlib is None or jaxlib < SECOND_RUN_FIXED_JAXLIB:
        return False, (f"jaxlib {jaxlib_version} is older than {'.'.join(map(str, SECOND_RUN_FIXED_JAXLIB))}, whose "
                       "XLA fixed a crash on a command-buffer while loop's second run")
    return True, ""


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def nvidia_driver_version() -> str | None:
    """The NVIDIA driver's version (``"570.86.15"``) from ``/proc/driver/nvidia/version``, else from
    ``nvidia-smi`` (WSL, say); None without either, as on a machine with no NVIDIA GPU."""
    try:
        with open(NVIDIA_DRIVER_FILE) as file:
            found = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)", file.read())
        if found:
            return found.group(1)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        result = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.split()
    return lines[0] if result.returncode == 0 and lines else None


def installed_versions() -> tuple[str | None, str | None, str | None]:
    """``(driver, CUDA runtime, jaxlib)`` versions for ``command_buffer_decision``, read from files and package
    metadata: no JAX backend starts and no CUDA library loads. The runtime is the nvidia-cuda-runtime wheel's
    version, else the CUDA major that a jax-cuda13 plugin implies; None where neither is installed."""
    runtime = next(filter(None, map(package_version, CUDA_RUNTIME_PACKAGES)), None)
    if runtime is None:
        runtime = next((major for plugin, major in CUDA_PLUGIN_RUNTIMES if package_version(plugin)), None)
    return nvidia_driver_version(), runtime, package_version("jaxlib")


def enable_command_buffers(environ=None, versions=installed_versions) -> bool:
    """Adds ``COMMAND_BUFFER_FLAG`` to ``environ["XLA_FLAGS"]`` (default ``os.environ``), so that XLA's GPU
    backend runs while loops and conditionals as CUDA graphs, without the host; True if it added it. It adds it
    where ``command_buffer_decision(*versions())`` says so, or where ``DABJAX_COMMAND_BUFFERS`` is ``1``; never
    where that is ``0`` or where ``XLA_FLAGS`` already sets command buffers (the user's choice stands). On a GPU
    where the decision is off it logs the one line why. XLA reads ``XLA_FLAGS`` once, when the first backend
    starts: ``import dabjax`` calls this, so import it before the first JAX computation of the process."""
    environ = os.environ if environ is None else environ
    forced = environ.get(COMMAND_BUFFERS_VARIABLE)
    flags = environ.get("XLA_FLAGS", "")
    if forced == "0" or COMMAND_BUFFER_OPTION in flags:
        return False
    if forced != "1":
        driver, runtime, jaxlib = versions()
        on, reason = command_buffer_decision(driver, runtime, jaxlib)
        if not on:
            if driver is not None:  # without a GPU the flag would do nothing: nothing to say
                logger.warning("dabjax: XLA command buffers off, while loops run from the host: %s "
                               "(%s=1 forces them on)", reason, COMMAND_BUFFERS_VARIABLE)
            return False
    environ["XLA_FLAGS"] = f"{flags} {COMMAND_BUFFER_FLAG}".strip()
    return True
