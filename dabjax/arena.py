"""Batched games between agents (the core of the arena; Elo and reports come with ``evaluate.py``).

An agent is any ``fn(geometry, key, states) -> int32 [N]`` (see ``dabjax.agents``). Games run in lockstep
for a fixed ``L`` moves, finished games being no-ops, so one compiled loop plays any number of games.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from dabjax import env as env_lib
from dabjax.agents import Agent
from dabjax.geometry import BoardGeometry


def play_games(
    geometry: BoardGeometry,
    player0: Agent,
    player1: Agent,
    key: jax.Array,
    states: env_lib.State,
    early_termination: bool = False,
) -> env_lib.State:
    """Plays the batch ``states`` (leading axis N) to the end; ``player0`` moves for player 0. Jit-able.

    Both agents are asked for a move in every game at every step and the mover's is kept: simple and fully
    batched; for expensive agents prefer fewer, larger batches.
    """

    def body(t, carry):
        states, key = carry
        key, key0, key1 = jax.random.split(key, 3)
        a0 = player0(geometry, key0, states)
        a1 = player1(geometry, key1, states)
        actions = jnp.where(states.current_player == 0, a0, a1).astype(jnp.int32)
        states = jax.vmap(lambda s, a: env_lib.step(geometry, s, a, early_termination))(states, actions)
        return states, key

    return jax.lax.fori_loop(0, geometry.num_lines, body, (states, key))[0]


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """Results from agent A's side over ``games`` games (half with A moving first)."""

    games: int
    wins: int
    draws: int
    losses: int
    mean_margin: float  # A's boxes minus B's, per game

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def score(self) -> float:
        """Wins plus half the draws, per game."""
        return (self.wins + 0.5 * self.draws) / self.games


@functools.lru_cache(maxsize=None)
def _compiled_match(geometry: BoardGeometry, agent_a: Agent, agent_b: Agent, num_games: int, early: bool):
    half = num_games // 2

    def run(key):
        key_a, key_b = jax.random.split(key)
        start = env_lib.batch_init(geometry, half)
        a_first = play_games(geometry, agent_a, agent_b, key_a, start, early)
        b_first = play_games(geometry, agent_b, agent_a, key_b, start, early)
        margin_a = jnp.concatenate([
            a_first.scores[:, 0] - a_first.scores[:, 1],
            b_first.scores[:, 1] - b_first.scores[:, 0],
        ])
        reward_a = jnp.concatenate([a_first.rewards[:, 0], b_first.rewards[:, 1]])
        return margin_a, reward_a

    return jax.jit(run)


def head_to_head(
    geometry: BoardGeometry,
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int = 1000,
    early_termination: bool = False,
) -> MatchResult:
    """``num_games`` games (rounded down to even), A first in half of them. Host-side summary."""
    if num_games < 2:
        raise ValueError(f"num_games must be at least 2, got {num_games}")
    margin, reward = _compiled_match(geometry, agent_a, agent_b, int(num_games), bool(early_termination))(key)
    margin, reward = np.asarray(margin), np.asarray(reward)
    return MatchResult(
        games=len(reward),
        wins=int((reward > 0).sum()),
        draws=int((reward == 0).sum()),
        losses=int((reward < 0).sum()),
        mean_margin=float(margin.mean()),
    )
