"""``python train.py --config configs/td_3x3.yaml``: TD(lambda) training (Kabir 2004). The run around
``dabjax.baselines.td``; ``train.py`` (``dabjax.cli.train.main``) sends configs with ``mode: td`` here.

    python train.py --config configs/td_3x3.yaml                       # against level 0
    python train.py --config configs/td_3x3.yaml td.opponent=level2 td.lam=0.9 run.dir=runs/td-l2

Run directory (``dabjax.runs.run_dir``, as the BoxesZero trainer's): ``config.yaml`` (the resolved config; a
changed config on resume keeps the old one as ``config.<time>.yaml``), ``metrics.jsonl`` (one JSON object per
iteration: ``iteration``, ``games``, ``time`` (training seconds), ``loss``, ``mean_abs_value``,
``train_win_rate``, ``train_margin``, ``games_per_s``, and every ``eval.every`` iterations
``eval/win_rate_vs_<opponent>`` and ``eval/margin_vs_<opponent>``), ``tb/`` and ``checkpoints/<iteration>/``
(``dabjax.training.checkpoint``'s orbax layout: ``params`` = the MLP's flax variables, ``trainer`` =
optimiser state, PRNG key and iteration, ``meta`` = JSON with ``method: td``, board, network, the whole config
and the training seconds). The same command on an existing run directory resumes from its newest intact
checkpoint (a damaged one is set aside, as for BoxesZero runs); SIGTERM and Ctrl-C save before exiting
(``dabjax.runs.stopping``).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.baselines import td
from dabjax.baselines.td_config import TDConfig
from dabjax.runs import run_dir as run_dir_lib
from dabjax.training import checkpoint
from dabjax.training import config as config_lib


class TimedTDState(NamedTuple):
    """The TD learner's state and the training seconds spent on it (saved in the checkpoint's meta)."""

    learner: td.TDState
    wall_time: float


def _trainer_item(learner: td.TDState) -> dict:
    """The checkpoint's ``trainer`` item: everything but the parameters (their own item)."""
    return {"opt_state": learner.opt_state, "key": learner.key, "iteration": learner.iteration}


class TDTraining(run_dir_lib.ResumableTraining):
    """TD(lambda) learning (``dabjax.baselines.td``) in the run-directory loop."""

    def __init__(self, config: TDConfig):
        self.config = config
        self.iteration_fn = td.make_iteration(config)
        self.eval_every = config.eval.every
        self.title = (f"TD({config.td.lam}) against {config.td.opponent} on "
                      f"{config.board.rows}x{config.board.cols}")

    def init_state(self, new_run: bool = True) -> TimedTDState:
        return TimedTDState(td.init_state(self.config), 0.0)

    def restore(self, store: checkpoint.CheckpointStore, iteration: int, fresh: TimedTDState) -> TimedTDState:
        meta = store.read_meta(iteration)
        where = store.directory / str(iteration)
        if meta.get("method") != td.METHOD:
            raise ValueError(f"checkpoint {where} is not a TD run (method {meta.get('method', 'boxeszero')!r})")
        expected = td.meta(self.config)
        for key in ("rows", "cols", "network"):
            if meta[key] != expected[key]:
                raise ValueError(
                    f"checkpoint {where} has {key} {meta[key]!r}, but the config asks for {expected[key]!r}; "
                    "use another run directory"
                )
        params, restored, meta = store.restore(iteration, fresh.learner.params, _trainer_item(fresh.learner))
        state = td.TDState(params, restored["opt_state"], restored["key"], jnp.int32(restored["iteration"]))
        return TimedTDState(state, float(meta.get("wall_time", 0.0)))

    def save(self, store: checkpoint.CheckpointStore, state: TimedTDState) -> None:
        meta = dict(td.meta(self.config), wall_time=state.wall_time)
        store.save(int(state.learner.iteration), state.learner.params, _trainer_item(state.learner), meta)

    def progress(self, state: TimedTDState) -> tuple[int, float]:
        return int(state.learner.iteration), state.wall_time

    def iterate(self, state: TimedTDState) -> tuple[TimedTDState, dict]:
        began = time.perf_counter()
        learner, out = self.iteration_fn(state.learner)
        out = {k: float(v) for k, v in jax.device_get(out).items()}  # waits for the device
        seconds = time.perf_counter() - began
        wall_time = state.wall_time + seconds
        iteration = int(learner.iteration)
        games = self.config.td.games
        metrics = dict(iteration=iteration, games=iteration * games, time=wall_time,
                       games_per_s=games / max(seconds, 1e-9), **out)
        return TimedTDState(learner, wall_time), metrics

    def evaluate(self, state: TimedTDState, key: jax.Array) -> dict:
        config = self.config
        env = config.board.env()
        net = config.network
        out = {}
        for opponent, sub in zip(config.eval.opponents, jax.random.split(key, len(config.eval.opponents))):
            match = td.compiled_match(net, env, opponent, config.eval.games)
            reward, margin = match(state.learner.params, sub)
            out[f"eval/win_rate_vs_{opponent}"] = float((np.asarray(reward) > 0).mean())
            out[f"eval/margin_vs_{opponent}"] = float(np.asarray(margin).mean())
        return out

    def postfix(self, metrics: dict) -> dict[str, str]:
        return dict(loss=f"{metrics['loss']:.3f}", win=f"{metrics['train_win_rate']:.2f}")


def train(config: TDConfig, quiet: bool = False) -> dict:
    """Trains (or resumes) one TD run to ``run.iterations`` or ``run.max_minutes``; returns its last metrics."""
    return run_dir_lib.train_in_run_dir(config.run, config_lib.to_yaml(config), TDTraining(config), quiet=quiet)
