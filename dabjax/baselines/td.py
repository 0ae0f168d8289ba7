"""Temporal-difference learning for Dots-and-Boxes (Kabir, "Artificial Intelligence on 'Dots & Boxes' Game",
2004), batched and jitted.

A value network ``V(s)`` (an MLP on the flattened observation, ``tanh`` output) estimates the result of
position ``s`` (+1 win, -1 loss, 0 draw) for the **player to move** there. The TD player looks one move
ahead: for every legal line it steps the game and scores the successor for the mover, ``V(s')`` when the
mover moves again (a capture), ``-V(s')`` when the turn passes, the real result when the game is over, and
draws the best line (ties at random; with probability ``epsilon`` a random line while training).

Training (``make_iteration``): ``td.games`` games in lockstep, the learner in each seat for half of them,
against a level 0/1/2 agent (``dabjax.game.policies``) or itself, with the parameters fixed during play. Every
position of every game is a sample, its target the TD(lambda) return (forward view, ``lambda_returns``)
seen from its side to move: along a game, values are taken from the learner's side, each position's
successor value is ``V`` of the next position (or the final result at the end), and

    G_t = (1 - lambda) * b_{t+1} + lambda * G_{t+1},      G_{T-1} = z,

with ``b_{t+1}`` the next position's value and ``z`` the result. The update is the semi-gradient of
``mean (V(s_t) - stop_gradient(G_t))^2``: with offline updates, the forward view equals TD(lambda) with
accumulating eligibility traces (``tests/test_td.py`` checks that). Games without early termination last
exactly ``L`` moves, so every shape is static.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from dabjax.baselines.td_config import ACTIVATIONS, TDConfig, ValueNetConfig, to_dict
from dabjax.game import env as env_lib
from dabjax.game import match, policies
from dabjax.game.geometry import BoardGeometry, board_geometry
from dabjax.search import mcts
from dabjax.training import checkpoint as checkpoint_lib

ValueFn = Callable[[object, env_lib.State], jax.Array]  # (params, states [N]) -> float32 [N], mover's view
METHOD = "td"  # ``meta["method"]`` of a TD checkpoint

_ACTIVATION_FUNCTIONS = {name: getattr(nn, name) for name in ACTIVATIONS}  # flax.linen's, by config name


class ValueMLP(nn.Module):
    """``(features float32 [N, D]) -> value float32 [N]`` in [-1, 1]."""

    config: ValueNetConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        activation = _ACTIVATION_FUNCTIONS[self.config.activation]
        for width in self.config.hidden:
            x = activation(nn.Dense(width)(x))
        return jnp.tanh(nn.Dense(1)(x)[:, 0]).astype(jnp.float32)


def features(geometry: BoardGeometry, states: env_lib.State) -> jax.Array:
    """float32 ``[N, H * W * 3]``: the paper's three planes of the observation (``env.observe``), from each
    side to move, flattened."""
    observations = jax.vmap(lambda s: env_lib.observe(geometry, s))(states)[..., : env_lib.PAPER_PLANES]
    return observations.reshape(observations.shape[0], -1)


def init_params(net: ValueNetConfig, geometry: BoardGeometry, key: jax.Array):
    return ValueMLP(net).init(key, features(geometry, env_lib.batch_init(geometry, 1)))


def mlp_value_fn(net: ValueNetConfig, geometry: BoardGeometry) -> ValueFn:
    """The TD network as ``(params, states [N]) -> value [N]`` for the side to move."""
    model = ValueMLP(net)
    return lambda params, states: model.apply(params, features(geometry, states))


# --- the TD player --------------------------------------------------------------------------------------


def successor_values(value_fn: ValueFn, env: env_lib.Env, params, states: env_lib.State) -> jax.Array:
    """float32 ``[N, L]``: each line's successor scored for the mover (see the module docstring).

    Drawn lines are scored like any other (an illegal step ends the game lost); mask them with ``~lines``.
    """
    num, num_lines = states.lines.shape
    step_all = lambda s: jax.vmap(lambda a: env.step(s, a))(jnp.arange(num_lines, dtype=jnp.int32))
    successors = jax.vmap(step_all)(states)  # State [N, L]
    flat = jax.tree_util.tree_map(lambda x: x.reshape((num * num_lines,) + x.shape[2:]), successors)
    values = value_fn(params, flat).reshape(num, num_lines)
    mover = states.current_player[:, None]  # [N, 1]
    result = jnp.take_along_axis(successors.rewards, mover[..., None], axis=-1)[..., 0]  # [N, L]
    same = successors.current_player == mover
    return jnp.where(successors.terminated, result, jnp.where(same, values, -values)).astype(jnp.float32)


def td_actions(
    value_fn: ValueFn,
    env: env_lib.Env,
    params,
    key: jax.Array,
    states: env_lib.State,
    epsilon: float | jax.Array = 0.0,
) -> jax.Array:
    """int32 ``[N]``: the best successor's line (random tie-break), or with probability ``epsilon`` a random
    legal line."""
    num = states.lines.shape[0]
    key_tie, key_explore, key_random = jax.random.split(key, 3)
    scores = successor_values(value_fn, env, params, states)
    # Ties at random, with noise far below value differences (``agents.choose_best``'s is for classes).
    best = jax.vmap(mcts.masked_argmax)(jax.random.split(key_tie, num), scores, ~states.lines)
    explore = jax.random.uniform(key_explore, (num,)) < epsilon
    return jnp.where(explore, policies.random_agent(env.geometry, key_random, states), best).astype(jnp.int32)


def td_agent(value_fn: ValueFn, env: env_lib.Env, params) -> env_lib.Agent:
    """The greedy TD player (no exploration) as an agent ``fn(geometry, key, states) -> int32 [N]`` on ``env``'s
    board (the ``geometry`` it is called with)."""

    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        del geometry  # env's
        return td_actions(value_fn, env, params, key, states, 0.0)

    return agent


# --- TD(lambda) targets ---------------------------------------------------------------------------------


def lambda_returns(next_values: jax.Array, lam: float | jax.Array) -> jax.Array:
    """float32 ``[T, ...]``: TD(lambda) returns ``G_t = (1 - lam) b_{t+1} + lam G_{t+1}``, ``G_{T-1} = b_T``.

    ``next_values[t]`` is ``b_{t+1}``, the value of the position after position ``t`` (the final result
    for the last one and for every position after the end), all from one player's side, no discount.
    """
    next_values = jnp.asarray(next_values, jnp.float32)

    def back(g_next, b_next):
        g = (1.0 - lam) * b_next + lam * g_next
        return g, g

    _, returns = jax.lax.scan(back, next_values[-1], next_values, reverse=True)
    return returns


@struct.dataclass
class GameRecord:
    """The positions of ``N`` games, ``T = L`` moves each (time-major).

    features: float32 ``[T, N, D]``, position ``t`` from its side to move; to_learner: float32 ``[T, N]``,
    +1 where the learner is to move, -1 where the opponent is; live: bool ``[T, N]``, the game is not over;
    outcome: float32 ``[N]``, the result for the learner (+1 / 0 / -1); margin: int32 ``[N]``, the learner's
    boxes minus the opponent's.
    """

    features: jax.Array
    to_learner: jax.Array
    live: jax.Array
    outcome: jax.Array
    margin: jax.Array


def play_training_games(
    value_fn: ValueFn,
    env: env_lib.Env,
    params,
    key: jax.Array,
    num_games: int,
    opponent: str,
    epsilon: float,
) -> GameRecord:
    """Plays ``num_games`` (even) games, the learner as player 0 in the first half, and records them.

    ``opponent``: a name of ``agents.HANDCRAFTED_AGENTS`` or ``"self"`` (the same epsilon-greedy player).
    """
    geometry = env.geometry
    learner_seat = (jnp.arange(num_games) >= num_games // 2).astype(jnp.int32)
    opponent_agent = None if opponent == "self" else policies.HANDCRAFTED_AGENTS[opponent]

    def body(carry, key):
        states = carry
        key_learner, key_opponent = jax.random.split(key)
        learner_moves = td_actions(value_fn, env, params, key_learner, states, epsilon)
        if opponent_agent is None:
            actions = learner_moves
        else:
            actions = jnp.where(
                states.current_player == learner_seat,
                learner_moves,
                opponent_agent(geometry, key_opponent, states),
            )
        to_learner = jnp.where(states.current_player == learner_seat, 1.0, -1.0).astype(jnp.float32)
        record = (features(geometry, states), to_learner, ~states.terminated)
        states = jax.vmap(env.step)(states, actions)
        return states, record

    keys = jax.random.split(key, geometry.num_lines)
    final, (feats, to_learner, live) = jax.lax.scan(body, env_lib.batch_init(geometry, num_games), keys)
    own = jnp.take_along_axis(final.scores, learner_seat[:, None], axis=1)[:, 0]
    margin = 2 * own - final.scores.sum(-1)
    return GameRecord(feats, to_learner, live, jnp.sign(margin).astype(jnp.float32), margin.astype(jnp.int32))


def td_targets(values: jax.Array, record: GameRecord, lam: float | jax.Array) -> jax.Array:
    """float32 ``[T, N]``: the TD(lambda) target of each position from its side to move.

    ``values`` float32 ``[T, N]``: the network's value of each recorded position (side to move).
    """
    learner_view = values * record.to_learner
    bootstrap = jnp.where(record.live, learner_view, record.outcome[None, :])  # b_t; over = the result
    next_values = jnp.concatenate([bootstrap[1:], record.outcome[None, :]], axis=0)  # b_{t+1}
    return lambda_returns(next_values, lam) * record.to_learner


# --- training -------------------------------------------------------------------------------------------


@struct.dataclass
class TDState:
    params: dict
    opt_state: optax.OptState
    key: jax.Array
    iteration: jax.Array  # int32 []


def make_optimizer(config: TDConfig) -> optax.GradientTransformation:
    if config.train.optimizer == "sgd":
        return optax.sgd(config.train.lr, momentum=config.train.momentum or None)
    return optax.adam(config.train.lr)


def init_state(config: TDConfig) -> TDState:
    geometry = board_geometry(config.board.rows, config.board.cols)
    key_init, key_run = jax.random.split(jax.random.PRNGKey(config.run.seed))
    params = init_params(config.network, geometry, key_init)
    return TDState(params, make_optimizer(config).init(params), key_run, jnp.int32(0))


def make_iteration(config: TDConfig):
    """jit ``(TDState) -> (TDState, metrics)``: one batch of games, then ``train.updates_per_iteration``
    gradient steps on their TD(lambda) targets. Metrics: ``loss``, ``train_win_rate``, ``train_margin``,
    ``mean_abs_value`` (float32 scalars)."""
    env = config.board.env()
    geometry = env.geometry
    value_fn = mlp_value_fn(config.network, geometry)
    model = ValueMLP(config.network)
    optimizer = make_optimizer(config)
    lam = float(config.td.lam)

    def loss_fn(params, record: GameRecord):
        num_steps, num_games, dim = record.features.shape
        values = model.apply(params, record.features.reshape(num_steps * num_games, dim)).reshape(num_steps, num_games)
        targets = jax.lax.stop_gradient(td_targets(values, record, lam))
        weights = record.live.astype(jnp.float32)
        loss = (weights * (values - targets) ** 2).sum() / jnp.maximum(weights.sum(), 1.0)
        return loss, jnp.abs(values).mean()

    def iteration(state: TDState):
        key, key_play = jax.random.split(state.key)
        record = play_training_games(
            value_fn, env, state.params, key_play, config.td.games, config.td.opponent, config.td.epsilon
        )

        def update(carry, _):
            params, opt_state = carry
            (loss, mean_abs), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, record)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (loss, mean_abs)

        (params, opt_state), (losses, mean_abs) = jax.lax.scan(
            update, (state.params, state.opt_state), None, length=config.train.updates_per_iteration
        )
        metrics = {
            "loss": losses[0],
            "mean_abs_value": mean_abs[0],
            "train_win_rate": (record.outcome > 0).mean(),
            "train_margin": record.margin.mean(dtype=jnp.float32),
        }
        return TDState(params, opt_state, key, state.iteration + 1), metrics

    return jax.jit(iteration)


@functools.lru_cache(maxsize=None)
def compiled_match(net: ValueNetConfig, env: env_lib.Env, opponent: str, num_games: int):
    """jit ``(params, key) -> (reward [num_games], margin [num_games])`` from the TD player's side, against
    the handcrafted ``opponent``, the TD player first in the first half. Parameters are arguments, so one
    compile serves a whole run."""
    value_fn = mlp_value_fn(net, env.geometry)
    other = policies.HANDCRAFTED_AGENTS[opponent]

    def run(params, key):
        reward, margin = match.play_both_sides(env, td_agent(value_fn, env, params), other, key, num_games)
        return jnp.sign(margin), margin

    return jax.jit(run)


def meta(config: TDConfig) -> dict:
    """The JSON ``meta`` item of a TD checkpoint (``dabjax.training.checkpoint.CheckpointStore``)."""
    return {
        "method": METHOD,
        "rows": config.board.rows,
        "cols": config.board.cols,
        "early_termination": config.board.early_termination,
        "network": {"hidden": list(config.network.hidden), "activation": config.network.activation},
        "config": to_dict(config),
    }


@dataclasses.dataclass(frozen=True)
class TDCheckpoint:
    rows: int
    cols: int
    net: ValueNetConfig
    early_termination: bool
    params: dict
    iteration: int
    meta: dict

    @property
    def env(self) -> env_lib.Env:
        """The environment it was trained in: its board and rule."""
        return env_lib.Env(self.rows, self.cols, self.early_termination)


def load_td_checkpoint(path) -> TDCheckpoint:
    """A TD run's checkpoint; ValueError when ``path`` holds another kind of checkpoint."""
    params, meta_, iteration = checkpoint_lib.read_checkpoint(path)
    if meta_.get("method") != METHOD:
        raise ValueError(f"{str(path)!r} is not a TD checkpoint (method {meta_.get('method', 'boxeszero')!r})")
    net = ValueNetConfig(**meta_["network"])
    return TDCheckpoint(
        int(meta_["rows"]), int(meta_["cols"]), net, bool(meta_["early_termination"]), params, iteration, meta_
    )
