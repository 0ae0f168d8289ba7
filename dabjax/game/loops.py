"""How the data-dependent loops of the hot path are compiled: with an early exit, or with a static trip count.

Several loops of a search stop when the data says so: the forced-capture settle, the chain walk, the label
propagation, the tree descent. There are two ways to compile such a loop, and the better one depends on the
backend:

* ``"while"``: ``lax.while_loop``, which stops as soon as every element of the batch is done. On a CPU this is
  the cheapest: the condition is read where the loop runs.
* ``"bounded"``: a loop of a trip count known when compiling (a ``lax.fori_loop`` with static bounds, a
  ``scan`` in the jaxpr), its worst case from the board, every step past the condition masked (a no-op). XLA's
  GPU runtime copies a ``while`` condition (and a ``cond`` predicate) back to the host and waits on every turn
  unless the trip count is known when compiling; a bounded loop is a plain sequence of launches that the device
  runs without the host.

Both styles give the same results: every step that the condition stops is a no-op in the bounded style. The
style is read when a function is traced (so a jitted function keeps the style it was traced with):
``DABJAX_LOOPS`` in the environment (``auto``, ``while`` or ``bounded``), or ``use_loop_style`` around the
tracing; ``auto`` (the default) is ``while`` on a CPU and ``bounded`` on any other backend.
"""

from __future__ import annotations

import contextlib
import os

import jax
import jax.numpy as jnp

LOOP_STYLES = ("auto", "while", "bounded")
ENVIRONMENT_VARIABLE = "DABJAX_LOOPS"
_override: list[str] = []  # the innermost ``use_loop_style``, if any


def _checked(style: str, where: str) -> str:
    if style not in LOOP_STYLES:
        raise ValueError(f"{where} must be one of {LOOP_STYLES}, got {style!r}")
    return style


def requested_style() -> str:
    """The style asked for: ``use_loop_style``'s, else ``DABJAX_LOOPS``'s, else ``"auto"``."""
    if _override:
        return _override[-1]
    return _checked(os.environ.get(ENVIRONMENT_VARIABLE, "auto"), ENVIRONMENT_VARIABLE)


def loop_style() -> str:
    """``"while"`` or ``"bounded"``: the style the loops traced now take (``auto`` resolved by the default
    backend)."""
    style = requested_style()
    if style == "auto":
        return "while" if jax.default_backend() == "cpu" else "bounded"
    return style


def bounded() -> bool:
    """The loops traced now have static trip counts and there is no branch on device data."""
    return loop_style() == "bounded"


@contextlib.contextmanager
def use_loop_style(style: str):
    """Trace the loops inside the block in ``style`` (tests and benchmarks compare the two in one process;
    jit a fresh function inside the block, as a function already compiled keeps its style)."""
    _override.append(_checked(style, "loop style"))
    try:
        yield
    finally:
        _override.pop()


def repeat_while(cond, body, init, steps_per_turn: int, max_steps: int):
    """``jax.lax.while_loop(cond, body, init)``, taking up to ``steps_per_turn`` guarded steps per turn of the
    loop: the same result in fewer turns. A turn of a batched loop costs a reduction of ``cond`` over the
    batch and a launch per kernel, more than a cheap step on bit boards. ``max_steps`` (static) bounds the
    steps ``cond`` allows; in the bounded style the loop runs the turns that many steps need, every step past
    ``cond`` a no-op (the same result, with a trip count known when compiling)."""

    def turn(carry):
        for _ in range(steps_per_turn):
            going, stepped = cond(carry), body(carry)
            carry = jax.tree_util.tree_map(lambda new, old: jnp.where(going, new, old), stepped, carry)
        return carry

    if bounded():
        # Not unrolled into a loop-free program: XLA fuses cheap work into every consumer, and across many
        # unrolled steps that duplication made a 3x3 search compile for minutes in tens of GiB on a CPU.
        return jax.lax.fori_loop(0, -(-max_steps // steps_per_turn), lambda _, carry: turn(carry), init)
    return jax.lax.while_loop(cond, turn, init)


# --- finding the loops and branches that make a device wait ------------------------------------------------

HOST_WAITING_PRIMITIVES = ("while", "cond")


def host_waits(jaxpr) -> list[tuple[str, str]]:
    """``(primitive, where)`` for every ``while`` and ``cond`` in a (closed) jaxpr and all the jaxprs inside it
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
