"""A warm start on disk (``dabjax pretrain``): a network fitted to exact labels, saved as an agent folder that a
run's ``run.init_from`` starts from and that plays as ``ckpt:FOLDER`` (``dabjax.training.supervised`` fits it).

The labels are a labelled set's positions, or on boards small enough for the exact table (up to
``labelled.TABLE_LABEL_MAX_LINES`` lines) every position of ``TABLE_GAMES`` games played from it; either way the
positions of a set to leave out (``training_labels``) are dropped, so the set that measures a run stays unseen.
"""

from __future__ import annotations

import pathlib
from typing import Callable, Sequence

import jax

from dabjax.evaluation import pretrained
from dabjax.game.geometry import BoardGeometry
from dabjax.search import network
from dabjax.solvers import labelled, retrograde
from dabjax.training import checkpoint, replay, supervised
from dabjax.training import config as config_lib

TABLE_GAMES = 6144  # labels from the exact table: every position of this many games (3x3: ~147,000 positions)


def label_samples(geometry: BoardGeometry, train_set: labelled.LabelledSet | None,
                  excluded: labelled.LabelledSet | None, key: jax.Array) -> tuple[replay.Samples, int]:
    """The samples to fit and how many positions of ``excluded`` were left out: ``train_set``'s positions, or
    (``train_set`` None) those of ``TABLE_GAMES`` games of ``key`` from ``geometry``'s exact table (solved here:
    seconds on 3x3). ValueError when leaving ``excluded`` out leaves nothing."""
    if train_set is not None:
        return supervised.samples_from_set(train_set, excluded)
    table = retrograde.solve_table(geometry)
    return supervised.leave_out(geometry, supervised.samples_from_table(geometry, table, key, TABLE_GAMES), excluded)


def fit(geometry: BoardGeometry, config: config_lib.TrainConfig, samples: replay.Samples, key: jax.Array, *,
        steps: int | None, minutes: float | None, params=None, final_lr_fraction: float = 1.0,
        on_chunk: Callable[[int, float, float], None] | None = None) -> supervised.FitResult:
    """The config's network fitted to ``samples`` with its ``train`` section's learning rate, L2 and batch size,
    for ``steps`` steps or ``minutes`` of wall time, from ``params`` (a trained network to fine-tune) or a fresh
    one; ``on_chunk(steps, seconds, loss)`` after each compiled chunk of steps. ``final_lr_fraction`` < 1 anneals
    the rate along a cosine to that share of it by the end of the budget (``supervised.fit``). A network with
    dense heads also learns the labels' final margin, weighted by ``targets.margin_weight``."""
    return supervised.fit(geometry, config.network, samples, key, steps=steps, minutes=minutes, lr=config.train.lr,
                          l2=config.train.l2, batch_size=config.train.batch_size, params=params, on_chunk=on_chunk,
                          margin_weight=config.targets.margin_weight, final_lr_fraction=final_lr_fraction)


def save(out, geometry: BoardGeometry, config: config_lib.TrainConfig, fitted: supervised.FitResult, *,
         source: str, init: str | None, config_name: str, overrides: Sequence[str],
         final_lr_fraction: float = 1.0) -> int:
    """Writes the fitted network to the agent folder ``out`` (``agent.json`` with where it came from,
    ``params.msgpack``) with the config's search; returns its number of parameters."""
    agent = checkpoint.PlayableCheckpoint(geometry.rows, geometry.cols, config.network, config.search,
                                          fitted.params, 0, 0.0, {}, config.board.early_termination)
    record = {"method": "supervised, exact labels", "trained_on": source, "board": geometry.name,
              "init": init or "fresh",
              "steps": fitted.steps, "ms_per_step": round(1000 * fitted.seconds_per_step, 2),
              "final_loss": round(fitted.loss, 4), "config": str(config_name), "overrides": list(overrides),
              "train": {"lr": config.train.lr, "l2": config.train.l2, "batch_size": config.train.batch_size,
                        "final_lr_fraction": final_lr_fraction, "margin_weight": config.targets.margin_weight}}
    pretrained.save_agent_folder(pathlib.Path(out), agent, record)
    return network.num_parameters(fitted.params)
