"""The handcrafted policies, batched and jit-able: levels 0-2 and BoxesZero's greedy opening policy.

They sit in the game, the bottom floor, because every floor uses them: the labelled sets (solvers) draw their
positions with ``greedy``, self-play (training) opens its games with it, and the TD baseline and the periodic
evaluation play against the levels.

Every agent has the signature ``agent(geometry, key, states) -> actions``: ``states`` is a batched ``State``
(leading axis ``N``), ``actions`` int32 ``[N]``. Ties are broken uniformly at random. At a terminal state
the action is arbitrary (stepping a terminal state is a no-op).

* ``random_agent`` (level 0 of Kabir, "Artificial Intelligence on 'Dots & Boxes' Game", 2004): a uniformly
  random legal line.
* ``level1`` (Kabir's level 1): completes a box when it can, else random.
* ``level2`` (Kabir's level 2): completes a box when it can; else draws a line that gives the opponent no box
  (no box gets its third side); else random.
* ``greedy`` (BoxesZero's opening policy, section 4.2.1): fourth sides first, then first or second sides,
  third sides last. It chooses from the same classes of moves as ``level2``, so the two play alike; both
  names are kept because the papers name them separately.


The agents that search (network-guided search, pure MCTS) live in ``dabjax.search.agents``.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry

Agent = env_lib.Agent

# Move classes, best first.
COMPLETES_BOX = 0  # draws the fourth side of a box
SAFE = 1  # draws a first or second side of every box it touches
GIVES_BOX = 2  # draws the third side of some box (the opponent can take it)


def box_side_counts(geometry: BoardGeometry, lines: jax.Array) -> jax.Array:
    """int32 ``[..., B]``: drawn sides of each box."""
    return lines[..., jnp.asarray(geometry.box_lines)].sum(-1, dtype=jnp.int32)


def move_classes(geometry: BoardGeometry, lines: jax.Array) -> jax.Array:
    """int32 ``[L]``: for one board, the class of drawing each line (``COMPLETES_BOX``/``SAFE``/``GIVES_BOX``).

    A line that completes one box and gives another counts as completing (the mover keeps the turn).
    """
    counts = box_side_counts(geometry, lines)
    beside = jnp.asarray(geometry.line_boxes)
    valid = jnp.asarray(geometry.line_box_valid)
    before = jnp.where(valid, counts[jnp.maximum(beside, 0)], 0)  # [L, 2] sides drawn before the move
    completes = (valid & (before == 3)).any(-1)
    gives = (valid & (before == 2)).any(-1)
    return jnp.where(completes, COMPLETES_BOX, jnp.where(gives, GIVES_BOX, SAFE)).astype(jnp.int32)


def choose_best(key: jax.Array, scores: jax.Array, legal: jax.Array) -> jax.Array:
    """int32 ``[]``: a uniformly random legal index among those of highest ``scores`` (float32 ``[L]``)."""
    noise = jax.random.uniform(key, scores.shape, jnp.float32)  # in [0, 1): breaks ties only
    return jnp.argmax(jnp.where(legal, scores + noise, -jnp.inf)).astype(jnp.int32)


def _batched(single: Callable[[BoardGeometry, jax.Array, env_lib.State], jax.Array]) -> Agent:
    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        keys = jax.random.split(key, states.lines.shape[0])
        return jax.vmap(lambda k, s: single(geometry, k, s))(keys, states)

    agent.__name__ = single.__name__.lstrip("_")
    agent.__doc__ = single.__doc__
    return agent


def _random_agent(geometry: BoardGeometry, key: jax.Array, state: env_lib.State) -> jax.Array:
    """Level 0: a uniformly random legal line."""
    return choose_best(key, jnp.zeros(geometry.num_lines, jnp.float32), ~state.lines)


def _level1(geometry: BoardGeometry, key: jax.Array, state: env_lib.State) -> jax.Array:
    """Level 1: complete a box when possible, else a random line."""
    classes = move_classes(geometry, state.lines)
    return choose_best(key, (classes == COMPLETES_BOX).astype(jnp.float32), ~state.lines)


def _level2(geometry: BoardGeometry, key: jax.Array, state: env_lib.State) -> jax.Array:
    """Level 2: complete a box; else a line giving no box away; else a random line."""
    classes = move_classes(geometry, state.lines)
    return choose_best(key, -classes.astype(jnp.float32), ~state.lines)


random_agent = _batched(_random_agent)
level1 = _batched(_level1)
level2 = _batched(_level2)
greedy = _batched(_level2)
greedy.__name__ = "greedy"
greedy.__doc__ = "BoxesZero's greedy opening policy: fourth sides, then first/second sides, then third sides."

HANDCRAFTED_AGENTS: dict[str, Agent] = {
    "random": random_agent,
    "level0": random_agent,
    "level1": level1,
    "level2": level2,
    "greedy": greedy,
}
