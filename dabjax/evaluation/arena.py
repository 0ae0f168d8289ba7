"""Batched games between agents: matches, round robins and one-vs-many pairings (Elo fits: ``dabjax.evaluation.elo``).

An agent is any ``fn(geometry, key, states) -> int32 [N]`` (``dabjax.game.env.Agent``; the handcrafted ones:
``dabjax.game.policies``). Two kinds exist:

* **jax agents** (handcrafted, search with a network or rollouts): pure functions, jitted once per agent,
  board and batch size, and asked only for the games where they are to move (``play_match`` pads those to a
  few batch sizes, ``agent_batch_size``; the compiled match sorts them: ``dabjax.game.match``);
* **host agents** (``dabjax.game.host_agent.HostAgent``: alpha-beta, the solver, OpenSpiel's MCTS bot):
  NumPy/numba/Python code that plays game by game and may need each game's move history. They are asked only
  for the games where they are to move.

``head_to_head`` is the fully compiled match of two jax agents (``dabjax.game.match.play_both_sides``: games
in lockstep for ``L`` moves, finished games being no-ops). ``play_match`` runs the step loop on the host, so it
takes both kinds, and adds random openings: each opening of ``opening_moves`` uniformly random lines is played
twice, once with A as player 0 and once with A as player 1 (the first player alternates from game to game, with
the same opening).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import match
from dabjax.game.env import Agent
from dabjax.game.geometry import BoardGeometry
from dabjax.game.host_agent import is_host_agent, rng_from_key


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """Results from agent A's side over ``games`` games (half with A moving first)."""

    games: int
    wins: int
    draws: int
    losses: int
    mean_margin: float  # A's boxes minus B's, per game

    @classmethod
    def from_games(cls, outcome_a: np.ndarray, margin_a: np.ndarray) -> "MatchResult":
        """The tally of ``N`` games: ``outcome_a`` ``[N]`` is positive for A's wins, 0 for draws and negative
        for A's losses (a reward or a margin); ``margin_a`` ``[N]`` is A's boxes minus B's."""
        outcome_a, margin_a = np.asarray(outcome_a), np.asarray(margin_a)
        return cls(
            games=len(outcome_a),
            wins=int((outcome_a > 0).sum()),
            draws=int((outcome_a == 0).sum()),
            losses=int((outcome_a < 0).sum()),
            mean_margin=float(margin_a.mean()),
        )

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def score(self) -> float:
        """Wins plus half the draws, per game."""
        return (self.wins + 0.5 * self.draws) / self.games


@functools.lru_cache(maxsize=None)
def _compiled_match(env: env_lib.Env, agent_a: Agent, agent_b: Agent, num_games: int):
    return jax.jit(lambda key: match.play_both_sides(env, agent_a, agent_b, key, num_games))


def head_to_head(
    board: BoardGeometry | env_lib.Env,
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int = 1000,
) -> MatchResult:
    """``num_games`` games (rounded down to even), A first in half of them. Host-side summary. ``board``: the
    environment, or a bare board under the standard rule (``env_lib.as_env``)."""
    if num_games < 2:
        raise ValueError(f"num_games must be at least 2, got {num_games}")
    num_games = int(num_games) // 2 * 2
    reward, margin = _compiled_match(env_lib.as_env(board), agent_a, agent_b, num_games)(key)
    return MatchResult.from_games(reward, margin)


# --- the host-driven match (jax and host agents) ---------------------------------------------------------


@functools.lru_cache(maxsize=None)
def jitted_agent(agent: Agent, geometry: BoardGeometry):
    """The agent jitted for one board; an agent marked ``is_jitted`` (it compiles itself, e.g. to share one
    compile between checkpoints whose parameters are arguments) is called as it is."""
    if getattr(agent, "is_jitted", False):
        return lambda key, states: agent(geometry, key, states)
    return jax.jit(lambda key, states: agent(geometry, key, states))


@functools.lru_cache(maxsize=None)
def _jitted_batch_step(env: env_lib.Env):
    return jax.jit(jax.vmap(env.step))


@dataclasses.dataclass(frozen=True)
class MatchGames:
    """The games of one match, seen from agent A. ``N`` games.

    a_player: int32 ``[N]``, the seat A took (0 moves first): 0, 1, 0, 1, ...
    scores: int32 ``[N, 2]``, final boxes of player 0 and player 1.
    histories: the lines drawn in each game, in order (the opening included).
    opening_moves: random lines that opened every game.
    """

    a_player: np.ndarray
    scores: np.ndarray
    histories: list[list[int]]
    opening_moves: int

    @property
    def margin_a(self) -> np.ndarray:
        """int32 ``[N]``: A's boxes minus B's."""
        own = np.take_along_axis(self.scores, self.a_player[:, None], axis=1)[:, 0]
        return 2 * own - self.scores.sum(axis=1)

    def summary(self) -> MatchResult:
        return MatchResult.from_games(self.margin_a, self.margin_a)


BATCH_SIZES_PER_MATCH = 4  # compiles of a jax agent per match at most: its batches are padded to these sizes


def agent_batch_size(count: int, num_games: int) -> int:
    """The batch a jax agent is called on for ``count`` of ``num_games`` games: ``count`` rounded up to a
    multiple of ``num_games / BATCH_SIZES_PER_MATCH`` (so at most that many sizes, each compiled once)."""
    quantum = -(-num_games // BATCH_SIZES_PER_MATCH)
    return min(num_games, -(-count // quantum) * quantum)


def agent_moves(geometry, agent, key, states, host_states, active, histories) -> np.ndarray:
    """int32 ``[count(active)]``: the agent's moves in the ``active`` games. Host agents see those games
    alone; jax agents see them padded to ``agent_batch_size`` with copies of the first (one search per game
    where the agent moves, not per game of the match)."""
    chosen = np.flatnonzero(active)
    if is_host_agent(agent):
        subset = jax.tree_util.tree_map(lambda x: x[active], host_states)
        return np.asarray(agent.act(geometry, rng_from_key(key), subset, [histories[i] for i in chosen]), np.int32)
    size = agent_batch_size(len(chosen), len(active))
    picked = jnp.asarray(np.concatenate([chosen, np.full(size - len(chosen), chosen[0])]))
    subset = jax.tree_util.tree_map(lambda x: x[picked], states)
    return np.asarray(jitted_agent(agent, geometry)(key, subset), np.int32)[: len(chosen)]


def agent_move(geometry: BoardGeometry, agent, key: jax.Array, state: env_lib.State, history) -> int:
    """The agent's move in one game (``state`` unbatched, ``history`` its lines so far): jax agents are called
    on a batch of one (one compile per agent and board), host agents with the history."""
    batch = jax.tree_util.tree_map(lambda x: np.asarray(x)[None], state)
    return int(agent_moves(geometry, agent, key, batch, batch, np.ones(1, bool), [list(history)])[0])


def random_openings(
    geometry: BoardGeometry, rng: np.random.Generator, num_openings: int, opening_moves: int
) -> np.ndarray:
    """int32 ``[num_openings, opening_moves]``: distinct uniformly random lines per opening (a random order
    of a random subset; whether they capture boxes is left to chance)."""
    if not 0 <= opening_moves < geometry.num_lines:
        raise ValueError(
            f"opening_moves={opening_moves} must be in 0..{geometry.num_lines - 1} on a {geometry.name} board"
        )
    return np.stack(
        [rng.permutation(geometry.num_lines)[:opening_moves] for _ in range(num_openings)]
    ).astype(np.int32).reshape(num_openings, opening_moves)


def play_match(
    board: BoardGeometry | env_lib.Env,
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int,
    opening_moves: int = 0,
) -> MatchGames:
    """``num_games`` (even) games of A against B, the first player alternating, step by step on the host.
    ``board``: the environment, or a bare board under the standard rule (``env_lib.as_env``).

    Game ``2k`` has A as player 0 and game ``2k + 1`` A as player 1, after the same random opening of
    ``opening_moves`` lines. Each agent is asked only in the games where it is to move (``agent_moves``).
    """
    if num_games < 2 or num_games % 2:
        raise ValueError(f"num_games must be even and at least 2 (the first player alternates), got {num_games}")
    env = env_lib.as_env(board)
    geometry = env.geometry
    key, key_openings = jax.random.split(key)
    openings = random_openings(geometry, rng_from_key(key_openings), num_games // 2, opening_moves)
    openings = np.repeat(openings, 2, axis=0)  # [N, opening_moves], the same opening for both seats
    a_player = np.tile(np.array([0, 1], np.int32), num_games // 2)
    step = _jitted_batch_step(env)
    states = env_lib.batch_init(geometry, num_games)
    for t in range(opening_moves):
        states = step(states, jnp.asarray(openings[:, t]))
    histories = [list(map(int, row)) for row in openings]
    for _ in range(geometry.num_lines - opening_moves):
        host_states = env_lib.to_numpy(states)
        running = ~host_states.terminated
        if not running.any():
            break
        a_to_move = host_states.current_player == a_player
        actions = np.zeros(num_games, np.int32)
        for agent, mask in ((agent_a, a_to_move), (agent_b, ~a_to_move)):
            active = mask & running
            if active.any():
                key, sub = jax.random.split(key)
                actions[active] = agent_moves(geometry, agent, sub, states, host_states, active, histories)
        for i in np.flatnonzero(running):
            histories[i].append(int(actions[i]))
        states = step(states, jnp.asarray(actions))
    scores = np.asarray(states.scores, np.int32)
    return MatchGames(a_player=a_player, scores=scores, histories=histories, opening_moves=opening_moves)


@dataclasses.dataclass(frozen=True)
class PairResult:
    """One pairing of a tournament: ``result`` is from ``name_a``'s side; ``games`` its games (move records, for
    pictures of them), when known."""

    name_a: str
    name_b: str
    result: MatchResult
    games: MatchGames | None = dataclasses.field(default=None, compare=False, repr=False)

    def as_row(self) -> dict:
        r = self.result
        return dict(agent_a=self.name_a, agent_b=self.name_b, games=r.games, wins=r.wins, draws=r.draws,
                    losses=r.losses, score=r.score, mean_margin=r.mean_margin)


def round_robin_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Every unordered pair of distinct agents, in order."""
    return list(itertools.combinations(names, 2))


def one_vs_many_pairs(focus: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """``focus`` against every other agent."""
    return [(focus, name) for name in names if name != focus]


def play_pairings(
    board: BoardGeometry | env_lib.Env,
    agents: dict[str, Agent],
    pairs: Sequence[tuple[str, str]],
    key: jax.Array,
    games_per_pair: int,
    opening_moves: int = 0,
    on_pair_done: Callable[[PairResult], None] | None = None,
) -> list[PairResult]:
    """Plays ``games_per_pair`` games for each ``(name_a, name_b)`` of ``pairs`` (see ``play_match``).

    ``on_pair_done`` is called after each pairing (progress bars, partial saves).
    """
    unknown = sorted({n for pair in pairs for n in pair} - set(agents))
    if unknown:
        raise ValueError(f"pairings name agents that were not given: {unknown}")
    results = []
    for index, (name_a, name_b) in enumerate(pairs):
        games = play_match(board, agents[name_a], agents[name_b], jax.random.fold_in(key, index),
                           games_per_pair, opening_moves)
        pair = PairResult(name_a, name_b, games.summary(), games)
        results.append(pair)
        if on_pair_done is not None:
            on_pair_done(pair)
    return results
