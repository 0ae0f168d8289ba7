"""Handcrafted agents as batched, jit-able policies.

Every agent has the signature ``agent(geometry, key, states) -> actions``: ``states`` is a batched ``State``
(leading axis ``N``), ``actions`` int32 ``[N]``. Ties are broken uniformly at random. At a terminal state
the action is arbitrary (stepping a terminal state is a no-op).

* ``random_agent`` (level 0, seed 003): a uniformly random legal line.
* ``level1`` (seed 003): completes a box when it can, else random.
* ``level2`` (seed 003): completes a box when it can; else draws a line that gives the opponent no box
  (no box gets its third side); else random.
* ``greedy`` (BoxesZero's opening policy, section 4.2.1): fourth sides first, then first or second sides,
  third sides last. It chooses from the same classes of moves as ``level2``, so the two play alike; both
  names are kept because the papers name them separately.

Search agents (built by a factory, since they carry parameters and a configuration):

* ``search_agent``: an evaluator (the network) inside the mctx search of ``dabjax.search``; plays the
  search's move (greedy) or samples from its policy target.
* ``mcts_agent``: pure MCTS with uniformly random rollouts and no network or domain knowledge (UCB1
  selection), the baseline of seeds 001 and 002.
"""

from __future__ import annotations

from typing import Callable

import functools

import jax
import jax.numpy as jnp

from dabjax import env as env_lib
from dabjax import search as search_lib
from dabjax.geometry import BoardGeometry

Agent = Callable[[BoardGeometry, jax.Array, env_lib.State], jax.Array]

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


def search_agent(
    config: search_lib.SearchConfig,
    evaluator: search_lib.Evaluator,
    params,
    sample: bool = False,
) -> Agent:
    """An agent that searches every move.

    Greedy play takes Gumbel MuZero's chosen move, or PUCT's most visited move; ``sample`` draws the move
    from the policy target instead.
    """

    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        key_search, key_sample = jax.random.split(key)
        output = search_lib.run_search(config, geometry, evaluator, params, key_search, states)
        if not sample:
            if config.algorithm != "gumbel":
                return jnp.argmax(output.policy_target, axis=-1).astype(jnp.int32)
            return output.action
        logits = jnp.log(jnp.maximum(output.policy_target, 1e-12))
        return jax.random.categorical(key_sample, logits, axis=-1).astype(jnp.int32)

    return agent


def mcts_agent(geometry: BoardGeometry, num_simulations: int = 1000, uct_c: float = 2.0) -> Agent:
    """Pure MCTS: UCB1 selection, one random rollout per leaf, no pruning, most visited move."""
    config = search_lib.SearchConfig(
        algorithm="uct",
        num_simulations=num_simulations,
        c_puct=uct_c,
        endgame_pruning=False,
        chain_pruning=False,
    )
    return _rollout_agent(config, geometry)


@functools.lru_cache(maxsize=None)  # One agent object per setting, so compiled matches are reused.
def _rollout_agent(config: search_lib.SearchConfig, geometry: BoardGeometry) -> Agent:
    return search_agent(config, search_lib.rollout_evaluator(geometry, config.early_termination), None)
