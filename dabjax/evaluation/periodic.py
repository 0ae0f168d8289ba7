"""Periodic evaluation during training, compiled once: matches against the handcrafted agents and accuracy on a
labelled set. The trainer's parameters are arguments, so one compile serves a whole run.

It lives with evaluation, above training: the trainer knows nothing of it, the command's loop
(``dabjax.runs.train_boxeszero``) calls it every ``eval.every`` iterations.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import match, policies
from dabjax.search import agents as search_agents
from dabjax.search import network
from dabjax.solvers import labelled
from dabjax.training.config import TrainConfig
from dabjax.training.trainer import Trainer


class PeriodicEvaluation:
    """Periodic evaluation during training, compiled once: matches against handcrafted agents (search at
    ``eval.num_simulations``, no Gumbel noise; the raw policy at 0) and accuracy on a labelled set.

    ``labelled_set``: the set ``eval.labelled_set`` names, loaded by the caller (``labelled.load``; file I/O
    is the shell's), or None when the config names none.
    """

    def __init__(self, trainer: Trainer, labelled_set: labelled.LabelledSet | None = None):
        config = trainer.config
        self.trainer = trainer
        self.geometry = g = trainer.geometry
        self.config = config.eval
        if labelled_set is None and config.eval.labelled_set is not None:
            raise ValueError(f"eval.labelled_set is {config.eval.labelled_set!r}: pass that set (labelled.load)")
        if labelled_set is not None and config.eval.labelled_set is None:
            raise ValueError("a labelled set was passed, but eval.labelled_set names none")
        self.labelled = labelled_set
        if labelled_set is not None and (labelled_set.rows, labelled_set.cols) != (g.rows, g.cols):
            raise ValueError(
                f"eval.labelled_set {config.eval.labelled_set!r} is for a {labelled_set.rows}x"
                f"{labelled_set.cols} board, training is on {g.rows}x{g.cols}"
            )
        sims = config.eval.num_simulations
        search_config = dataclasses.replace(trainer.search_config, num_simulations=max(sims, 1), gumbel_scale=0.0)
        evaluator = trainer.evaluator

        def agent_for(params):
            if sims == 0:
                def raw_policy(geometry, key, states):
                    logits, _ = evaluator(params, key, states)
                    return jnp.argmax(network.mask_logits(logits, states.legal_action_mask), -1).astype(jnp.int32)

                return raw_policy
            return search_agents.search_agent(search_config, trainer.env, evaluator, params)

        games, env = config.eval.games, trainer.env

        def match_against(opponent):
            # Each side moves first in half the games; the search is asked only where it moves.
            return jax.jit(lambda params, key: match.play_both_sides(env, agent_for(params), opponent, key, games)[0])

        self._matches = {name: match_against(policies.HANDCRAFTED_AGENTS[name]) for name in config.eval.opponents}
        self._moves = jax.jit(lambda params, key, states: agent_for(params)(g, key, states))

    def __call__(self, params, key) -> dict:
        results = {}
        for name, play in self._matches.items():
            key, sub = jax.random.split(key)
            reward = np.asarray(play(params, sub))
            results[f"eval/win_rate_vs_{name}"] = float((reward > 0).mean())
            results[f"eval/score_vs_{name}"] = float(((reward > 0) + 0.5 * (reward == 0)).mean())
        if self.labelled is not None:
            moves_agent = lambda geometry, k, states: self._moves(params, k, states)
            accuracy = labelled.accuracy_by_move_number(moves_agent, self.labelled, key, self.config.batch_size)
            results["eval/best_result_by_move"] = [float(x) for x in accuracy.best_result]
            results["eval/best_margin_by_move"] = [float(x) for x in accuracy.best_margin]
            results["eval/best_result_min"] = float(np.min(accuracy.best_result))
            results["eval/best_result_mean"] = float(np.mean(accuracy.best_result))
        return results


def validate_eval_opponents(config: TrainConfig) -> None:
    """Unknown opponent names fail at start-up."""
    for name in config.eval.opponents:
        if name not in policies.HANDCRAFTED_AGENTS:
            raise ValueError(f"eval.opponents: unknown agent {name!r}; known: {sorted(policies.HANDCRAFTED_AGENTS)}")
