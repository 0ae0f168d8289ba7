"""Supervised training on exact labels: a warm start for self-play, before any game is played.

Leela Chess Zero rescores late positions with tablebases; here a solver-labelled set (``dabjax.solvers.labelled``)
or, on boards up to 3x3, the exact retrograde table gives every position its exact result and its best-result
moves. The value target is the sign of the final result for the side to move (what self-play's ``z`` is), the
policy target is uniform over the best-result moves. The learner is the trainer's (``dabjax.training.learner``:
the same loss, masked logits and L2, the same batches built from compact positions with a random board symmetry
each), at a constant learning rate or one annealed over the budget (``fit``). The network it leaves is any run's
``run.init_from``: the graph network plays every board size, so labels of one board warm-start runs on another.
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dabjax.game.geometry import BoardGeometry
from dabjax.search import heads, network
from dabjax.search.tree_nodes import Positions
from dabjax.solvers import labelled
from dabjax.training import learner, replay


def exact_samples(lines: np.ndarray, claimed: np.ndarray, margin: np.ndarray, final: np.ndarray,
                  best: np.ndarray) -> replay.Samples:
    """Training samples of ``N`` exactly labelled positions: ``lines`` bool ``[N, L]``, ``claimed`` bool
    ``[N, B]``, the mover's ``margin`` so far and ``final`` margin under best play (boxes, ``[N]``), ``best`` bool
    ``[N, L]`` the best-result moves. Value target ``sign(final)``, policy uniform over ``best``; dense targets
    (``replay.DenseTargets``, for a network with dense heads): the margin ``final`` over the number of boxes, and no
    ownership (a label knows the final margin under best play, not which boxes each side ends with)."""
    best = np.asarray(best, np.float32)
    count = int(best.shape[0])
    num_boxes = int(np.shape(claimed)[-1])
    return replay.Samples(
        positions=Positions(lines=jnp.asarray(lines, jnp.bool_), claimed=jnp.asarray(claimed, jnp.bool_),
                            margin=jnp.asarray(margin, jnp.int32)),
        policy=jnp.asarray(best / np.maximum(best.sum(-1, keepdims=True), 1.0)),
        value=jnp.asarray(np.sign(final), jnp.float32),
        move_number=jnp.asarray(np.asarray(lines).sum(-1), jnp.int32),
        from_node=jnp.zeros(count, jnp.bool_),
        valid=jnp.ones(count, jnp.bool_),
        dense=replay.unknown_dense_targets(num_boxes, (count,)).replace(
            margin=jnp.asarray(np.asarray(final, np.float32) / num_boxes), margin_known=jnp.ones(count, jnp.bool_)),
    )


def leave_out(geometry: BoardGeometry, samples: replay.Samples, exclude: labelled.LabelledSet | None
              ) -> tuple[replay.Samples, int]:
    """``(samples, dropped)``: the samples whose position is not in ``exclude`` (the same position up to the
    board's symmetries and the score so far: a measured set stays unseen), and how many were dropped. Raises
    ValueError when the boards differ or nothing is left."""
    if exclude is None:
        return samples, 0
    if (exclude.rows, exclude.cols) != (geometry.rows, geometry.cols):
        raise ValueError(f"the training labels are {geometry.name}, the set to leave out {exclude.rows}x{exclude.cols}")
    keep = labelled.not_in(geometry, samples.positions.lines, samples.positions.margin, exclude)
    if not keep.any():
        raise ValueError(f"every training position is also in the {exclude.rows}x{exclude.cols} set to leave out")
    return jax.tree_util.tree_map(lambda x: x[keep], samples), int((~keep).sum())


def samples_from_set(train_set: labelled.LabelledSet, exclude: labelled.LabelledSet | None = None
                     ) -> tuple[replay.Samples, int]:
    """``(samples, dropped)``: the positions of ``train_set`` as training samples, without those also in
    ``exclude`` (``leave_out``), and how many were dropped."""
    final = train_set.margin.astype(np.int32) + train_set.value.astype(np.int32)
    samples = exact_samples(train_set.lines, train_set.box_owner >= 0, train_set.margin, final,
                            train_set.best_result)
    return leave_out(train_set.geometry, samples, exclude)


def samples_from_table(geometry: BoardGeometry, table: np.ndarray, key: jax.Array, games: int,
                       random_rate: float = 0.3) -> replay.Samples:
    """Every non-terminal position of ``games`` games of the labelled sets' opening policy with ``random_rate``
    random moves (``labelled.play_trajectories``), labelled from the exact ``table`` of a small board."""
    history = labelled.play_trajectories(geometry, key, games, random_rate)
    flat = jax.tree_util.tree_map(lambda x: np.asarray(x).reshape(-1, *x.shape[2:]), history)
    keep = (~flat.lines).any(-1)
    lines, margin = flat.lines[keep], np.asarray(flat.margin)[keep]
    labels = labelled.label_with_table(geometry, lines, margin, table)
    return exact_samples(lines, flat.box_owner[keep] >= 0, margin, margin + labels["value"].astype(np.int32),
                         labels["best_result"])


def with_learning_rate(opt_state, rate: float):
    """``opt_state`` of an ``optax.inject_hyperparams`` optimiser with its learning rate set to ``rate``."""
    return opt_state._replace(hyperparams={**opt_state.hyperparams,
                                           "learning_rate": jnp.asarray(rate, jnp.float32)})


class FitResult(NamedTuple):
    params: dict
    steps: int
    seconds_per_step: float  # wall time of the steps after the first (which includes the compile)
    loss: float  # the mean loss of the last chunk of steps
    final_lr: float  # the learning rate of the last chunk (``lr`` unless annealed)


def fit(geometry: BoardGeometry, config: network.NetworkConfig, samples: replay.Samples, key: jax.Array, *,
        steps: int | None = None, minutes: float | None = None, params=None, lr: float = 1e-3, l2: float = 0.0,
        batch_size: int = 256, chunk: int = 100, margin_weight: float = 0.0, final_lr_fraction: float = 1.0,
        on_chunk: Callable[[int, float, float], None] | None = None) -> FitResult:
    """Trains ``config``'s network (from ``params``, or freshly initialised from ``key``) on ``samples`` with
    Adam at ``lr``, constant unless annealed (below) (``params`` without the dense heads that ``config`` has:
    fresh heads on its trunk):
    ``steps`` optimiser steps, or as many as ``minutes`` of wall time allow (the
    first step's compile not counted), in chunks of ``chunk`` steps, each drawing its batches from a fresh
    random order of the samples (``learner.epoch_plan``) with a random symmetry per sample. ``on_chunk(steps
    so far, seconds so far, loss)`` follows every chunk (a progress bar; the time budget is checked between
    chunks, so it may run over by one chunk). ``margin_weight`` > 0 (a network with ``dense_heads``) also trains
    the final-margin head on the labels' margin under best play (``learner.loss_fn``); the labels know no final
    owners, so the ownership head is left as it is. ``final_lr_fraction`` < 1 anneals the rate along a cosine
    from ``lr`` to ``lr * final_lr_fraction`` over the budget (the share of ``steps`` taken, or of ``minutes``
    spent), set anew before each chunk; 1 keeps it constant. Raises ValueError without a positive budget, for a
    margin weight without the heads, or for a fraction outside [0, 1]."""
    if (steps is None) == (minutes is None):
        raise ValueError("give either steps or minutes")
    if (steps is not None and steps < 1) or (minutes is not None and not minutes > 0):
        raise ValueError(f"the budget must be positive: steps={steps}, minutes={minutes}")
    if margin_weight < 0 or (margin_weight > 0 and not config.dense_heads):
        raise ValueError(f"margin_weight {margin_weight!r} needs to be >= 0, and > 0 needs network.dense_heads")
    if not 0 <= final_lr_fraction <= 1:
        raise ValueError(f"final_lr_fraction must be in [0, 1], got {final_lr_fraction!r}")
    init_key, key = jax.random.split(key)
    fresh = network.init_params(config, geometry.grid_shape, init_key)
    # A network saved without dense heads (an older agent) fine-tunes as the trunk of one with them, and one saved
    # with them as a network without (its heads dropped).
    params = fresh if params is None else heads.with_heads_of(params, fresh)
    # The rate is a hyperparameter in the optimiser's state, so the annealing sets it between chunks without
    # a recompile (the budget in minutes has no step count to write a schedule for).
    optimizer = optax.inject_hyperparams(optax.adam)(learning_rate=lr)
    state = learner.init_train_state(params, optimizer)
    run = learner.make_train_steps(geometry, network.PolicyValueNet(config), optimizer, l2,
                                   margin_weight=margin_weight)
    samples = replay.with_dense_targets(samples, config.dense_heads)
    count = int(samples.valid.shape[0])
    weights = jnp.ones(count, jnp.float32)
    epochs = math.ceil(chunk * batch_size / count) + 1
    limit = float("inf") if minutes is None else 60.0 * minutes
    taken, began, loss = 0, None, float("nan")
    while (taken < steps) if steps is not None else (began is None or time.perf_counter() - began < limit):
        key, plan_key = jax.random.split(key)
        index, sym, _ = learner.epoch_plan(plan_key, samples.valid, count, geometry.num_symmetries, "random",
                                           epochs, batch_size, chunk)
        active = chunk if steps is None else min(chunk, steps - taken)
        if steps is not None:
            spent = taken / steps
        else:
            spent = 0.0 if began is None else (time.perf_counter() - began) / limit
        rate = learner.cosine_rate(lr, final_lr_fraction, min(spent, 1.0))
        state = state.replace(opt_state=with_learning_rate(state.opt_state, rate))
        if began is None:  # the compile: one step, not timed
            state, metrics = run(state, samples, weights, index, sym, 1)
            jax.block_until_ready(state.params)
            began, taken, active = time.perf_counter(), 1, active - 1
            index, sym = index[1:], sym[1:]
        if active > 0:
            state, metrics = run(state, samples, weights, index, sym, active)
            taken += active
        loss = float(metrics["loss"])
        if on_chunk is not None:
            on_chunk(taken, time.perf_counter() - began, loss)
    seconds = time.perf_counter() - began
    return FitResult(state.params, taken, seconds / max(taken - 1, 1), loss, float(rate))
