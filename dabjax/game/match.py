"""Compiled matches between two jax agents: batched games in lockstep, each agent asked only where it moves.

An agent is any ``fn(geometry, key, states) -> int32 [N]`` (``dabjax.game.env.Agent``). A batch of games in
lockstep has, at every step, some games where A is to move and some where B is: asking both agents in every
game (and keeping the mover's answer) doubles the cost of an expensive agent such as a search. Here the
games are sorted by who moves and cut into ``chunks`` equal parts: a part where one agent alone moves asks
that agent alone (``lax.cond``), and only the one part where the sort changes agent asks both. A step then
costs about ``N + N / chunks`` agent moves instead of ``2 N``.

``play_both_sides`` is the match of the house (the arena's ``head_to_head``, the trainer's periodic evaluation,
the TD baseline's): half the games with A moving first, half with B, all in one batch, results from A's side.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dabjax.game import env as env_lib
from dabjax.game.env import Agent
from dabjax.game.geometry import BoardGeometry

MAX_CHUNKS = 4  # more parts save little (N / chunks) and run more, smaller agent calls one after another


def default_chunks(num_games: int) -> int:
    """The most parts, up to ``MAX_CHUNKS``, that split ``num_games`` evenly."""
    return next(c for c in range(MAX_CHUNKS, 0, -1) if num_games % c == 0)


def movers_moves(
    geometry: BoardGeometry,
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    states: env_lib.State,
    a_moves: jax.Array,
    chunks: int,
) -> jax.Array:
    """int32 ``[N]``: A's move where ``a_moves`` (bool ``[N]``) holds, else B's; each agent asked only in the
    parts of the sorted batch where it moves (module docstring). ``chunks`` (static) must divide ``N``."""
    num_games = a_moves.shape[0]
    if num_games % chunks:
        raise ValueError(f"chunks={chunks} must divide the {num_games} games")
    size = num_games // chunks
    order = jnp.argsort(~a_moves, stable=True)  # A's games first
    ordered = jax.tree_util.tree_map(lambda x: x[order].reshape((chunks, size) + x.shape[1:]), states)
    a_ordered = a_moves[order].reshape(chunks, size)
    nothing = jnp.zeros(size, jnp.int32)

    def part_moves(part):
        part_states, part_a, part_key = part
        key_a, key_b = jax.random.split(part_key)
        move_a = jax.lax.cond(part_a.any(), lambda: agent_a(geometry, key_a, part_states).astype(jnp.int32),
                              lambda: nothing)
        move_b = jax.lax.cond((~part_a).any(), lambda: agent_b(geometry, key_b, part_states).astype(jnp.int32),
                              lambda: nothing)
        return jnp.where(part_a, move_a, move_b)

    moves = jax.lax.map(part_moves, (ordered, a_ordered, jax.random.split(key, chunks)))
    return jnp.zeros(num_games, jnp.int32).at[order].set(moves.reshape(-1))


def play_seated(
    env: env_lib.Env,
    agent_a: Agent,
    agent_b: Agent,
    a_seat: jax.Array,
    key: jax.Array,
    states: env_lib.State,
    chunks: int | None = None,
) -> env_lib.State:
    """Plays the batch ``states`` (``N`` games) to the end in ``env``, A in seat ``a_seat`` (int32 ``[N]``: 0
    moves first) and B in the other. Jit-able; ``chunks`` (static) defaults to ``default_chunks(N)``."""
    geometry = env.geometry
    chunks = default_chunks(a_seat.shape[0]) if chunks is None else chunks
    step = jax.vmap(env.step)

    def body(t, carry):
        states, key = carry
        key, sub = jax.random.split(key)
        actions = movers_moves(geometry, agent_a, agent_b, sub, states, states.current_player == a_seat, chunks)
        return step(states, actions), key

    return jax.lax.fori_loop(0, geometry.num_lines, body, (states, key))[0]


def play_games(
    env: env_lib.Env,
    player0: Agent,
    player1: Agent,
    key: jax.Array,
    states: env_lib.State,
) -> env_lib.State:
    """Plays the batch ``states`` (leading axis ``N``) to the end in ``env``; ``player0`` moves for player 0.
    Jit-able."""
    a_seat = jnp.zeros(states.current_player.shape, jnp.int32)
    return play_seated(env, player0, player1, a_seat, key, states)


def play_both_sides(
    env: env_lib.Env,
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int,
) -> tuple[jax.Array, jax.Array]:
    """``(reward_a, margin_a)`` float32 / int32 ``[num_games]`` from A's side: ``num_games`` (even, static)
    games in ``env`` from the empty board, A moving first in the first half and B in the second. Jit-able."""
    if num_games < 2 or num_games % 2:
        raise ValueError(f"num_games must be even and at least 2 (each side moves first in half), got {num_games}")
    half = num_games // 2
    a_seat = jnp.concatenate([jnp.zeros(half, jnp.int32), jnp.ones(half, jnp.int32)])
    final = play_seated(env, agent_a, agent_b, a_seat, key, env_lib.batch_init(env.geometry, num_games))
    seat = a_seat[:, None]
    own = jnp.take_along_axis(final.scores, seat, axis=1)[:, 0]
    other = jnp.take_along_axis(final.scores, 1 - seat, axis=1)[:, 0]
    reward = jnp.take_along_axis(final.rewards, seat, axis=1)[:, 0]
    return reward, own - other
