"""Exact values and moves of simple endgames (only chains and loops left), inside jit.

``v(G)`` is the controller's net margin over the remaining boxes with optimal play from the start of a
simple endgame ``G``; the player to move (the opener) ends with ``margin - v(G)``. Its defining recursion
(Berlekamp 2000; Niu et al. 2025), with ``r = v(G - C)``:

    open a 1- or 2-chain (a 2-chain by its middle line):  a - r
    open a chain of length a >= 3:                         a - 2 + |2 - r|
    open a loop of length a >= 4:                          a - 4 + |4 - r|

and ``v(G)`` is the minimum over the components ``C``. The recursion itself is computed in one place, the
numba kernels of ``dabjax.solvers.endgame_values`` (the solvers' leaves, and ``endgame_value`` on the host).
Inside jit we use two facts, each checked by the test suite against it on every multiset of components up to
30 boxes (tests/endgame_checks.py):

* the 1- and 2-chains only count by parity (the paper's Theorem 5): with ``k`` 1-chains and ``n``
  2-chains and ``r`` the value of the rest, ``v(G)`` is ``r - 1`` (k and n odd), ``1 - r`` (k odd),
  ``2 - r`` (n odd) or ``r`` (``with_short_chains``);
* some optimal opening of the rest always opens a shortest long chain or a shortest loop, so the positions
  that matter are "the long chains from the i-th shortest on, the loops from the j-th shortest on", an
  ``(num_long_chains + 1) x (num_loops + 1)`` table (``value_table``, unrolled: at most
  ``(B // 3 + 1) x (B // 4 + 1)`` entries of elementwise arithmetic, no loop).

It is exact, not the paper's closed form for the rest (Theorem 3; ``paper_closed_form_value`` in
tests/endgame_checks.py shows where that differs).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chains as chains_lib
from dabjax.game import env as env_lib
from dabjax.game import loops
from dabjax.game.geometry import BoardGeometry

_INFINITY = 1 << 20  # Larger than any margin; an int32 "no option".


def _where(condition, if_true, if_false):
    """``if_true if condition else if_false`` for Python ints, ``jnp.where`` for arrays."""
    if isinstance(condition, (bool, np.bool_)):
        return if_true if condition else if_false
    return jnp.where(condition, if_true, if_false)


def open_chain_value(length, rest):
    """The controller's net margin when the opener opens a chain of ``length`` and ``v(G - C) = rest``."""
    return _where(length >= 3, length - 2 + abs(2 - rest), length - rest)


def open_loop_value(length, rest):
    """The controller's net margin when the opener opens a loop of ``length`` and ``v(G - C) = rest``."""
    return length - 4 + abs(4 - rest)


# --- inside jit: the sorted-components dynamic programme ---------------------------------------------


def value_table(
    chain_lengths: jax.Array, num_chains: jax.Array, loop_lengths: jax.Array, num_loops: jax.Array
) -> jax.Array:
    """int32 ``[Kc + 1, Kl + 1]``: ``V[i, j] = v(chains[i:] + loops[j:])`` for sorted, zero-padded inputs.

    ``chain_lengths`` int32 ``[Kc]`` and ``loop_lengths`` int32 ``[Kl]`` ascending, the first
    ``num_chains`` / ``num_loops`` entries valid. Entries beyond the counts are 0 (the empty game). Fully
    unrolled (``(Kc + 1) x (Kl + 1)`` entries of a few elementwise operations each): one fused kernel
    rather than a loop, on any backend.
    """
    num_chain_slots, num_loop_slots = chain_lengths.shape[0], loop_lengths.shape[0]
    rows = []
    below = None  # V[i + 1, :]
    for i in range(num_chain_slots, -1, -1):
        has_chain = i < num_chains if i < num_chain_slots else False
        right = jnp.int32(0)  # V[i, j + 1]
        row = [None] * (num_loop_slots + 1)
        for j in range(num_loop_slots, -1, -1):
            has_loop = j < num_loops if j < num_loop_slots else False
            options = []
            if has_chain is not False:
                options.append(jnp.where(has_chain, open_chain_value(chain_lengths[i], below[j]), _INFINITY))
            if has_loop is not False:
                options.append(jnp.where(has_loop, open_loop_value(loop_lengths[j], right), _INFINITY))
            if options:
                best = functools.reduce(jnp.minimum, options)
                right = jnp.where(best < _INFINITY, best, 0).astype(jnp.int32)
            row[j] = right
        rows.append(jnp.stack(row))
        below = row
    return jnp.stack(rows[::-1])  # rows[i] = V[i, :]


def with_short_chains(ones, twos, rest):
    """``v(G)`` from ``rest``, the value of ``G`` without its 1- and 2-chains, and how many of them it has
    (``ones``, ``twos``; Python ints or arrays): the paper's Theorem 5."""
    odd_ones, odd_twos = ones % 2 == 1, twos % 2 == 1
    return _where(odd_ones & odd_twos, rest - 1, _where(odd_ones, 1 - rest, _where(odd_twos, 2 - rest, rest)))


def _shortest_chain(lengths: chains_lib.ChainsAndLoops) -> jax.Array:
    """int32 ``[]``: the length of a shortest chain (meaningless without chains)."""
    ones, twos = lengths.num_short_chains[0], lengths.num_short_chains[1]
    return jnp.where(ones > 0, 1, jnp.where(twos > 0, 2, lengths.long_chain_lengths[0]))


def components_value(lengths: chains_lib.ChainsAndLoops) -> tuple[jax.Array, jax.Array]:
    """``(v(G), opens_chain)`` for a simple endgame: int32 ``[]`` and whether opening the shortest chain
    (rather than the shortest loop) is optimal. Meaningless when ``lengths.is_simple_endgame`` is False.
    """
    loop_lengths = lengths.loop_lengths
    table = value_table(lengths.long_chain_lengths, lengths.num_long_chains, loop_lengths, lengths.num_loops)
    ones, twos = lengths.num_short_chains[0], lengths.num_short_chains[1]
    value = with_short_chains(ones, twos, table[0, 0])
    shortest = _shortest_chain(lengths)
    # v(G - shortest chain): a 1- or 2-chain changes a parity; a long one (then there are no short ones)
    # leaves the long chains from the second on. v(G - shortest loop): the loops from the second on.
    after_chain = jnp.where(
        shortest == 1,
        with_short_chains(ones - 1, twos, table[0, 0]),
        jnp.where(shortest == 2, with_short_chains(ones, twos - 1, table[0, 0]), table[1, 0]),
    )
    after_loop = with_short_chains(ones, twos, table[0, 1])
    by_chain = jnp.where(lengths.num_chains > 0, open_chain_value(shortest, after_chain), _INFINITY)
    by_loop = jnp.where(lengths.num_loops > 0, open_loop_value(loop_lengths[0], after_loop), _INFINITY)
    return value.astype(jnp.int32), by_chain <= by_loop


def simple_endgame_margin(
    geometry: BoardGeometry, state: env_lib.State, components: chains_lib.Components | None = None
) -> tuple[jax.Array, jax.Array]:
    """``(is_simple_endgame, final_margin)``: bool ``[]`` and int32 ``[]``.

    ``final_margin`` is the exact final score of the player to move minus the opponent's (whole game) under
    optimal play, valid where ``is_simple_endgame``. A terminal state counts as solved with its final margin.
    Needs only the chain and loop lengths (``chains.chains_and_loops``), taken from ``components`` if given.
    """
    lengths = chains_lib.chains_and_loops(geometry, state) if components is None else components
    value, _ = components_value(lengths)
    solved = lengths.is_simple_endgame & ~state.terminated
    margin = jnp.where(solved, state.margin - value, state.margin)
    return solved | state.terminated, margin.astype(jnp.int32)


def simple_endgame_margin_on_lanes(
    geometry: BoardGeometry, states: env_lib.State, lanes: int | None = None
) -> tuple[jax.Array, jax.Array]:
    """``simple_endgame_margin`` on a batch of ``N`` states (bool ``[N]``, int32 ``[N]``), the analysis run
    only on the running simple endgames (``chains.is_simple_endgame``, a cheap test on bit boards), gathered
    into ``lanes`` slots (``loops.on_lanes``; None: the whole batch). Elsewhere nothing is left to analyse:
    solved where terminal, the margin as it stands."""
    needs = jax.vmap(functools.partial(chains_lib.is_simple_endgame, geometry))(states) & ~states.terminated
    analyse = jax.vmap(functools.partial(simple_endgame_margin, geometry))
    otherwise = (states.terminated, states.margin.astype(jnp.int32))
    return loops.on_lanes(analyse, needs, states, otherwise, states.lines.shape[0] if lanes is None else lanes)


def opener_move(
    geometry: BoardGeometry, state: env_lib.State, components: chains_lib.Components | None = None
) -> jax.Array:
    """int32 ``[]``: an optimal move of the player to move in a simple endgame.

    Opens a shortest chain or a shortest loop, as the exact value prefers (Theorems 1 and 4 of the paper
    follow from this); a 2-chain by its middle line; any line of a longer chain or loop (they are
    equivalent). Meaningless outside a simple endgame.
    """
    if components is None:
        components = chains_lib.analyse(geometry, state, only_simple_endgames=True)
    _, opens_chain = components_value(components)
    target = jnp.where(opens_chain, _shortest_chain(components), components.loop_lengths[0])
    kind = jnp.where(opens_chain, components.is_chain, components.is_loop)
    chosen = jnp.argmax(kind & (components.size == target))  # lowest label of that kind and length
    beside = jnp.asarray(geometry.line_boxes)
    valid = jnp.asarray(geometry.line_box_valid)
    box_label = components.label[jnp.maximum(beside, 0)]  # [L, 2]
    in_component = valid & (box_label == chosen)
    candidate = ~state.lines & in_component.any(-1)
    interior = in_component.all(-1)  # both boxes in the component: a 2-chain's middle line
    preference = candidate.astype(jnp.int32) * 2 + (candidate & interior).astype(jnp.int32)
    return jnp.argmax(preference).astype(jnp.int32)


__all__ = [
    "components_value",
    "open_chain_value",
    "open_loop_value",
    "opener_move",
    "simple_endgame_margin",
    "simple_endgame_margin_on_lanes",
    "value_table",
    "with_short_chains",
]
