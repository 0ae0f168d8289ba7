"""Generic MCTS with random rollouts cut off by a value network, no domain knowledge: Algorithm 5 of Cotarelo
et al., "Improving Monte Carlo Tree Search with Artificial Neural Networks without Heuristics" (2021).

The rollout from a leaf plays uniformly random lines, and before each move (the leaf itself included) asks
the value network about the position: once ``|v| >= threshold`` it stops and returns that value, else it
plays on to the end and returns the result (+1 / 0 / -1). Values are from the leaf's side to move
(``v`` of a position where the other player moves is negated). With a threshold above 1 (a ``tanh`` value
never reaches it) this is the plain rollout of ``search.rollout_evaluator``, move for move: the same key
gives the same random line order.

The evaluator plugs into the UCT search of ``dabjax.search.mcts`` with a uniform prior and no prunings
(``agents.pure_mcts_config``, pure MCTS's settings). The network is a TD value network
(``dabjax.baselines.td``) or the value head of a BoxesZero policy-value network (``load_value_network``
accepts either run directory).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dabjax.baselines import td
from dabjax.game import env as env_lib
from dabjax.game import playout
from dabjax.game.geometry import BoardGeometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.training import checkpoint


def cutoff_rollout(
    value_fn: td.ValueFn,
    env: env_lib.Env,
    params,
    key: jax.Array,
    states: env_lib.State,
    threshold: float,
) -> tuple[jax.Array, jax.Array]:
    """``(value float32 [N], random moves played int32 [N])`` of one cut-off rollout from each state.

    The batch stops as soon as every rollout has stopped (a ``while_loop``); the network sees the
    rollouts still running (all ``N`` positions, at static shape) once per move.
    """
    geometry = env.geometry
    num = states.lines.shape[0]
    keys = jax.random.split(key, num)  # per game, as ``search.rollout_evaluator`` splits them
    orders = jax.vmap(lambda k, s: playout.random_line_order(geometry, k, s.lines))(keys, states)  # [N, L]
    root_player = states.current_player
    step = jax.vmap(env.step)

    def cond(carry):
        t, _, done, _, _ = carry
        return (t <= geometry.num_lines) & ~done.all()

    def body(carry):
        t, current, done, value, moves = carry
        v = value_fn(params, current)
        v = jnp.where(current.current_player == root_player, v, -v)
        result = jnp.where(current.current_player == root_player, 1.0, -1.0) * jnp.sign(current.margin)
        confident = ~current.terminated & (jnp.abs(v) >= threshold)
        stop_now = ~done & (current.terminated | confident)
        value = jnp.where(stop_now, jnp.where(current.terminated, result, v), value)
        done = done | stop_now
        # Position t of each rollout is the state after its first t random lines (undrawn lines come first).
        line = orders[:, jnp.minimum(t, geometry.num_lines - 1)]
        advanced = step(current, line)
        current = jax.tree_util.tree_map(lambda old, new: jnp.where(_expand(done, old), old, new), current, advanced)
        moves = moves + (~done).astype(jnp.int32)
        return t + 1, current, done, value, moves

    init = (jnp.int32(0), states, jnp.zeros(num, bool), jnp.zeros(num, jnp.float32), jnp.zeros(num, jnp.int32))
    _, _, _, value, moves = jax.lax.while_loop(cond, body, init)
    return value.astype(jnp.float32), moves


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def cutoff_rollout_evaluator(value_fn: td.ValueFn, env: env_lib.Env, threshold: float) -> mcts.Evaluator:
    """A ``mcts.Evaluator``: uniform prior (zero logits) and the cut-off rollout's value."""

    def evaluate(params, key, states):
        value, _ = cutoff_rollout(value_fn, env, params, key, states, threshold)
        return jnp.zeros(states.lines.shape, jnp.float32), value

    return evaluate


def policyvalue_value_fn(network_config: network.NetworkConfig, geometry: BoardGeometry):
    """The value head of a BoxesZero/AlphaZero ``PolicyValueNet`` as ``(params, states) -> value [N]``."""
    evaluate = mcts.network_evaluator(network_config, geometry)
    return lambda params, states: evaluate(params, None, states)[1]


@functools.lru_cache(maxsize=None)
def compiled_mcts_net_policy(value_key, env: env_lib.Env, num_simulations: int, threshold: float):
    """jit ``(params, key, states) -> actions``: one compile per network kind, board and setting.

    ``value_key``: ``("td", ValueNetConfig)`` or ``("pv", NetworkConfig)``.
    """
    kind, net = value_key
    geometry = env.geometry
    value_fn = td.mlp_value_fn(net, geometry) if kind == "td" else policyvalue_value_fn(net, geometry)
    config = search_agents.pure_mcts_config(num_simulations)
    evaluator = cutoff_rollout_evaluator(value_fn, env, threshold)
    return jax.jit(
        lambda params, key, states: search_agents.search_agent(config, env, evaluator, params)(geometry, key, states)
    )


def load_value_network(path) -> tuple[tuple, object, int, int]:
    """``(value_key, params, rows, cols)`` of the network in a TD run or a BoxesZero/AlphaZero run
    (``path``: run directory = latest, or ``RUN/checkpoints/<iteration>``); see ``compiled_mcts_net_policy``."""
    params, meta, _ = checkpoint.read_checkpoint(path)
    if meta.get("method") == td.METHOD:
        net = td.ValueNetConfig(**meta["network"])
        return ("td", net), params, int(meta["rows"]), int(meta["cols"])
    return ("pv", network.config_from_saved(meta["network"])), params, int(meta["rows"]), int(meta["cols"])
