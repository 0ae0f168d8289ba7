"""Agents that search: a network (or any evaluator) inside the mctx search, and pure MCTS.

Both are factories returning an ``Agent`` (``agent(geometry, key, states) -> actions``, ``states`` batched with
leading axis ``N``, ``actions`` int32 ``[N]``), since they carry parameters, a search configuration and the
environment (``env_lib.Env``: the board and its rule) they search.

* ``search_agent``: an evaluator (the network) inside the search of ``dabjax.search.mcts``; plays the
  search's move (``SearchOutput.action``) or samples from its policy target.
* ``mcts_agent``: pure MCTS with uniformly random rollouts and no network or domain knowledge (UCB1
  selection, the search settings of ``pure_mcts_config``), the baseline of Buzzard and Ciere (2014) and of
  Zhuang et al. (2015).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dabjax.game import env as env_lib
from dabjax.game.env import Agent
from dabjax.game.geometry import BoardGeometry
from dabjax.search import mcts


def search_agent(
    config: mcts.SearchConfig,
    env: env_lib.Env,
    evaluator: mcts.Evaluator,
    params,
    sample: bool = False,
) -> Agent:
    """An agent that searches every move.

    Greedy play takes the search's move (``SearchOutput.action``: Gumbel MuZero's chosen move, PUCT's or UCT's
    most visited); ``sample`` draws the move from the policy target instead. The agent plays ``env``'s board:
    the ``geometry`` it is called with is that board's.
    """
    search = mcts.search_function(config)

    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        del geometry  # env's
        key_search, key_sample = jax.random.split(key)
        output = search(config, env, evaluator, params, key_search, states)
        if not sample:
            return output.action
        logits = jnp.log(jnp.maximum(output.policy_target, 1e-12))
        return jax.random.categorical(key_sample, logits, axis=-1).astype(jnp.int32)

    return agent


UCB1_C = 2.0  # pure MCTS's exploration constant c in Q + c sqrt(ln N / n)


def pure_mcts_config(num_simulations: int, uct_c: float = UCB1_C) -> mcts.SearchConfig:
    """Pure MCTS's search settings: UCB1 with constant ``uct_c``, no prunings (nor domain knowledge). Also the
    search of the cut-off MCTS (``dabjax.baselines.mcts_net``), which changes only the leaf evaluation."""
    return mcts.SearchConfig(
        algorithm="uct",
        num_simulations=int(num_simulations),
        c_puct=uct_c,
        endgame_pruning=False,
        chain_pruning=False,
    )


def mcts_agent(geometry: BoardGeometry, num_simulations: int = 1000, uct_c: float = UCB1_C) -> Agent:
    """Pure MCTS: UCB1 selection, one random rollout per leaf, no pruning, most visited move."""
    return _rollout_agent(pure_mcts_config(num_simulations, uct_c), env_lib.Env.of(geometry))


@functools.lru_cache(maxsize=None)  # One agent object per setting, so compiled matches are reused.
def _rollout_agent(config: mcts.SearchConfig, env: env_lib.Env) -> Agent:
    return search_agent(config, env, mcts.rollout_evaluator(env), None)
