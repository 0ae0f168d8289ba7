"""Agents that search: a network (or any evaluator) inside the mctx search, and pure MCTS.

Both are factories returning an ``Agent`` (``agent(geometry, key, states) -> actions``, ``states`` batched with
leading axis ``N``, ``actions`` int32 ``[N]``), since they carry parameters and a search configuration.

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
    evaluator: mcts.Evaluator,
    params,
    sample: bool = False,
) -> Agent:
    """An agent that searches every move.

    Greedy play takes the search's move (``SearchOutput.action``: Gumbel MuZero's chosen move, PUCT's or UCT's
    most visited); ``sample`` draws the move from the policy target instead.
    """
    search = mcts.search_function(config)

    def agent(geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        key_search, key_sample = jax.random.split(key)
        output = search(config, geometry, evaluator, params, key_search, states)
        if not sample:
            return output.action
        logits = jnp.log(jnp.maximum(output.policy_target, 1e-12))
        return jax.random.categorical(key_sample, logits, axis=-1).astype(jnp.int32)

    return agent


UCB1_C = 2.0  # pure MCTS's exploration constant c in Q + c sqrt(ln N / n)


def pure_mcts_config(
    num_simulations: int, uct_c: float = UCB1_C, early_termination: bool = False
) -> mcts.SearchConfig:
    """Pure MCTS's search settings: UCB1 with constant ``uct_c``, no prunings (nor domain knowledge). Also the
    search of the cut-off MCTS (``dabjax.baselines.mcts_net``), which changes only the leaf evaluation."""
    return mcts.SearchConfig(
        algorithm="uct",
        num_simulations=int(num_simulations),
        c_puct=uct_c,
        endgame_pruning=False,
        chain_pruning=False,
        early_termination=early_termination,
    )


def mcts_agent(geometry: BoardGeometry, num_simulations: int = 1000, uct_c: float = UCB1_C) -> Agent:
    """Pure MCTS: UCB1 selection, one random rollout per leaf, no pruning, most visited move."""
    return _rollout_agent(pure_mcts_config(num_simulations, uct_c), geometry)


@functools.lru_cache(maxsize=None)  # One agent object per setting, so compiled matches are reused.
def _rollout_agent(config: mcts.SearchConfig, geometry: BoardGeometry) -> Agent:
    return search_agent(config, mcts.rollout_evaluator(geometry, config.early_termination), None)
