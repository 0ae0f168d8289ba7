"""One training iteration of BoxesZero (or its AlphaZero baseline) as a pure function of the training state.

``Iteration(...)(state, key) -> (state, figures)``: backward self-play from the current start step
(``selfplay``), value and policy targets (stage 1: the root Q; stage 2: ``w z + (1 - w) Q``; AlphaZero: ``z``),
node-filtered augmentation in stage 1, the replay buffer (``replay``), and the learning plan and its optimiser
steps (``learner``). Pure and jit-able as a whole: the start step, the stage and the iteration are traced values,
never shapes. It leaves the curriculum's advance to the host (``dabjax.training.trainer``): the advance compares
the figures' ratios with the thresholds on the host, in double precision, and moves ``start_step`` and
``last_advance``; ``wall_time`` is the host's clock.

An iteration is three phases, each pure: ``play`` (self-play and the curriculum's ratios), ``collect`` (the
samples into the buffer) and ``learn`` (the plan and all its steps as one compiled loop). ``run_phases`` composes
them, for the pure iteration and for the trainer, which dispatches each phase jitted on its own (to time
self-play apart from learning), and for a ResNet on the CPU swaps ``learn`` for the plan and a host loop of the
same steps (``learner.run_steps_on_host``).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp

from dabjax.game.geometry import BoardGeometry
from dabjax.search import mcts
from dabjax.training import curriculum, devices, learner, replay, selfplay
from dabjax.training.config import TrainConfig


@chex.dataclass(frozen=True)
class TrainerState:
    """Everything that evolves during training (saved in checkpoints)."""

    train_state: learner.TrainState
    buffer: replay.ReplayBuffer
    key: jax.Array  # uint32 [2], the key the next iteration draws from
    iteration: jax.Array  # int32 [], iterations completed
    start_step: jax.Array  # int32 [], st
    last_advance: jax.Array  # int32 [], iteration of the last st advance
    wall_time: jax.Array  # float32 [], seconds spent training (over all resumptions)


class IterationKeys(NamedTuple):
    """One iteration's randomness, uint32 ``[2]`` each: ``next`` goes to the next iteration; ``play`` is
    self-play's, ``plan`` the learning plan's, ``exact`` the exact labels' plan (None without them)."""

    next: jax.Array
    play: jax.Array
    plan: jax.Array
    exact: jax.Array | None


def iteration_keys(key: jax.Array, exact: bool) -> IterationKeys:
    """The keys of the iteration given ``key``; ``exact``: with a key for the exact labels' plan."""
    key, play_key, plan_key = jax.random.split(key, 3)
    exact_key = None
    if exact:
        key, exact_key = jax.random.split(key)
    return IterationKeys(next=key, play=play_key, plan=plan_key, exact=exact_key)


class Played(NamedTuple):
    """What ``play`` returns: the games' ``record`` and the curriculum's ratios over the searched positions of the
    games that start at ``st`` (``selfplay.advancement_ratios``): ``mqr``, ``nvr`` float32 ``[]`` in [0, 1] and
    ``searched_positions`` int32 ``[]``, the positions they count."""

    record: selfplay.SelfPlayRecord
    mqr: jax.Array
    nvr: jax.Array
    searched_positions: jax.Array


class Collected(NamedTuple):
    """What ``collect`` counts of the samples it adds (``L`` lines): ``node_samples`` int32 ``[]`` from tree
    nodes; ``dropped`` int32 ``[]`` over the block's capacity; ``samples_by_move`` int32 ``[L]`` per move number;
    ``first_player_win_rate`` float32 ``[]``, the share of self-play games the first player won."""

    node_samples: jax.Array
    dropped: jax.Array
    samples_by_move: jax.Array
    first_player_win_rate: jax.Array


class Learned(NamedTuple):
    """What ``learn`` reports: ``losses`` (``learner.Metrics``, float32 ``[]`` each: the means over the steps),
    ``train_steps`` int32 ``[]`` optimiser steps taken, ``buffer_size`` int32 ``[]`` valid samples in the buffer."""

    losses: learner.Metrics
    train_steps: jax.Array
    buffer_size: jax.Array


class IterationFigures(NamedTuple):
    """One iteration's figures, on the devices (``Played``, ``Collected`` and ``Learned`` describe them; small and
    replicated, so every process reads them whole)."""

    mqr: jax.Array
    nvr: jax.Array
    searched_positions: jax.Array
    node_samples: jax.Array
    dropped: jax.Array
    buffer_size: jax.Array
    train_steps: jax.Array
    first_player_win_rate: jax.Array
    samples_by_move: jax.Array
    losses: learner.Metrics


@chex.dataclass(frozen=True)
class LearningPlan:
    """One iteration's learning, planned on the device: the loss weights float32 ``[D, M]`` of the buffer's
    samples, the batches ``index, sym`` int32 ``[max_steps, bs]`` (indices into the flat ``[D * M]`` buffer),
    ``active`` int32 ``[]`` steps to take, ``num_valid`` int32 ``[]`` samples in the buffer, and the exact
    labels' ``fixed_index, fixed_sym`` int32 ``[max_steps, k]`` (None without them)."""

    weights: jax.Array
    index: jax.Array
    sym: jax.Array
    active: jax.Array
    num_valid: jax.Array
    fixed_index: jax.Array | None = None
    fixed_sym: jax.Array | None = None


class Phases(NamedTuple):
    """An iteration's phases, as ``run_phases`` calls them: an ``Iteration``'s pure ones, or the trainer's
    dispatches of their jitted forms (``Iteration``'s methods of the same names give the signatures)."""

    play: Callable[..., Played]
    collect: Callable[..., tuple[replay.ReplayBuffer, Collected]]
    learn: Callable[..., tuple[learner.TrainState, Learned]]


def run_phases(phases: Phases, state: TrainerState, key: jax.Array, exact: bool
               ) -> tuple[TrainerState, IterationFigures]:
    """The iteration of ``state`` drawing from ``key``, its phases run by ``phases``; ``exact``: the config mixes
    exact labels into the batches. The state comes back with the curriculum as it was: the host advances it."""
    keys = iteration_keys(key, exact)
    played = phases.play(state.train_state.params, keys.play, state.start_step)
    buffer, collected = phases.collect(state.buffer, played.record, state.start_step, state.iteration)
    train_state, learned = phases.learn(state.train_state, buffer, keys.plan, keys.exact, state.iteration)
    figures = IterationFigures(
        mqr=played.mqr, nvr=played.nvr, searched_positions=played.searched_positions,
        node_samples=collected.node_samples, dropped=collected.dropped, buffer_size=learned.buffer_size,
        train_steps=learned.train_steps, first_player_win_rate=collected.first_player_win_rate,
        samples_by_move=collected.samples_by_move, losses=learned.losses,
    )
    state = state.replace(train_state=train_state, buffer=buffer, key=keys.next, iteration=state.iteration + 1)
    return state, figures


def build_samples(
    record: selfplay.SelfPlayRecord, z_weight: jax.Array, include_nodes: jax.Array
) -> replay.Samples:
    """Flat samples from one iteration: the searched positions first, then the extracted tree nodes.

    Root value target: ``z_weight * z + (1 - z_weight) * Q`` (stage 1 passes ``z_weight = 0``).
    Node samples (value target: the node's Q) are kept only when ``include_nodes``. The record's dense targets
    (``record.dense``) go with the roots; the nodes' are unknown (``replay.samples_of_nodes``).
    """
    flat = lambda tree, lead: jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[lead:]), tree)
    roots = replay.Samples(
        positions=flat(record.positions, 2),
        policy=flat(record.policy, 2),
        value=flat(z_weight * record.z + (1.0 - z_weight) * record.root_q, 2),
        move_number=flat(record.move_number, 2),
        from_node=jnp.zeros(record.searched.size, bool),
        valid=flat(record.searched, 2),
        dense=None if record.dense is None else flat(record.dense, 2),
    )
    if record.nodes is None:
        return roots
    nodes = replay.samples_of_nodes(flat(record.nodes, 3), include_nodes, dense=record.dense is not None)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), roots, nodes)


class Iteration:
    """The pure iteration of one config: ``self(state, key) -> (state, figures)``, and its phases.

    The static parts: the ``config`` as run, its board ``geometry``, the self-play ``settings`` and ``evaluator``,
    the optimiser ``step`` (``learner.make_train_step``), the exact labels' samples placed on the devices
    (``exact_samples``, None without them) and the ``mesh`` the batches split over."""

    def __init__(self, config: TrainConfig, geometry: BoardGeometry, settings: selfplay.SelfPlaySettings,
                 evaluator: mcts.Evaluator, step, exact_samples: replay.Samples | None, mesh: jax.sharding.Mesh):
        self.config = config
        self.geometry = geometry
        self.settings = settings
        self.evaluator = evaluator
        self.step = step
        self.exact_samples = exact_samples
        self.mesh = mesh

    @property
    def phases(self) -> Phases:
        return Phases(play=self.play, collect=self.collect, learn=self.learn)

    def __call__(self, state: TrainerState, key: jax.Array) -> tuple[TrainerState, IterationFigures]:
        """Self-play, buffer and training from ``state``, drawing from ``key`` (a run passes ``state.key``: the
        returned state holds the key its next iteration draws from). Pure; jit-able; the curriculum stays."""
        return run_phases(self.phases, state, key, exact=self.exact_samples is not None)

    def self_play(self, params, key: jax.Array, start_step: jax.Array) -> selfplay.SelfPlayRecord:
        """One iteration's self-play from the curriculum's ``start_step`` (some games revisiting later ones)."""
        config = self.config
        revisit = config.curriculum.revisit
        if revisit > 0:  # without it (the paper's), every game starts at st and the key is not split
            key, key_start = jax.random.split(key)
            start_step = curriculum.game_start_steps(
                key_start, start_step, config.initial_start_step, config.selfplay.games, revisit
            )
        return selfplay.self_play(self.settings, self.evaluator, params, key, start_step)

    def play(self, params, key: jax.Array, start_step: jax.Array) -> Played:
        """The self-play of parameters ``params`` from ``start_step`` (int32 ``[]``) and the curriculum's ratios."""
        record = self.self_play(params, key, start_step)
        curriculum_settings = self.config.curriculum
        mqr, nvr, searched = selfplay.advancement_ratios(
            record, start_step, mq_threshold=curriculum_settings.mq_threshold,
            nv_threshold=curriculum_settings.nv_threshold)
        return Played(record=record, mqr=mqr, nvr=nvr, searched_positions=searched)

    def collect(self, buffer: replay.ReplayBuffer, record: selfplay.SelfPlayRecord, start_step: jax.Array,
                iteration: jax.Array) -> tuple[replay.ReplayBuffer, Collected]:
        """The samples of ``record`` written to ``buffer`` as iteration ``iteration`` (int32 ``[]``): value targets
        mixing in ``z`` in stage 2 (``start_step`` 0), tree nodes kept in stage 1 only."""
        stage2 = start_step == 0
        z_weight = jnp.where(stage2, jnp.float32(self.config.targets.z_weight_stage2), jnp.float32(0.0))
        samples = build_samples(record, z_weight, ~stage2)
        num_lines = self.geometry.num_lines
        by_move = jnp.zeros(num_lines + 1, jnp.int32).at[
            jnp.where(samples.valid, samples.move_number, num_lines)].add(1)
        scores = record.final_scores
        # Replicated, so that every process reads them whole (the games may be split over the devices).
        by_move, node_samples, first_player_win_rate = jax.lax.with_sharding_constraint(
            (by_move[:num_lines], (samples.valid & samples.from_node).sum(), (scores[:, 0] > scores[:, 1]).mean()),
            devices.replicated(self.mesh))
        buffer, dropped = replay.insert(buffer, samples, iteration)
        return buffer, Collected(node_samples=node_samples, dropped=dropped, samples_by_move=by_move,
                                 first_player_win_rate=first_player_win_rate)

    def plan(self, buffer: replay.ReplayBuffer, plan_key: jax.Array, exact_key: jax.Array | None,
             iteration: jax.Array) -> LearningPlan:
        """One iteration's learning plan (``learner.epoch_plan``, and ``learner.fixed_plan`` for the exact labels'
        part of every batch, drawn with ``exact_key``)."""
        config, g = self.config, self.geometry
        valid = buffer.samples.valid.reshape(-1)
        num_valid = valid.sum(dtype=jnp.int32)
        exact_per_batch = config.exact_per_batch
        from_buffer = config.train.batch_size - exact_per_batch  # the rest of a batch: exact labels
        index, sym, active = learner.epoch_plan(
            plan_key, valid, num_valid, g.num_symmetries, config.augmentation.symmetries,
            config.train.epochs, from_buffer, config.train.max_steps_per_iteration,
        )
        if self.mesh.devices.size > 1:
            # Each batch is split over the devices; the loss (a mean over the whole batch) and so the update
            # are the same as on one device.
            index, sym = jax.lax.with_sharding_constraint((index, sym), devices.step_batch_sharding(self.mesh))
        fixed_index = fixed_sym = None
        if exact_key is not None:
            fixed_index, fixed_sym = learner.fixed_plan(
                exact_key, steps=config.train.max_steps_per_iteration, per_batch=exact_per_batch,
                count=int(self.exact_samples.valid.shape[0]),
                num_symmetries=1 if config.augmentation.symmetries == "none" else g.num_symmetries,
            )
        return LearningPlan(weights=replay.sample_weights(buffer, iteration, config.replay.gamma), index=index,
                            sym=sym, active=active, num_valid=num_valid, fixed_index=fixed_index, fixed_sym=fixed_sym)

    def fixed(self, plan: LearningPlan) -> learner.FixedBatch | None:
        """The exact labels' part of every batch of ``plan`` (None without them)."""
        if plan.fixed_index is None:
            return None
        return learner.FixedBatch(samples=self.exact_samples, index=plan.fixed_index, sym=plan.fixed_sym)

    def learn(self, train_state: learner.TrainState, buffer: replay.ReplayBuffer, plan_key: jax.Array,
              exact_key: jax.Array | None, iteration: jax.Array) -> tuple[learner.TrainState, Learned]:
        """The plan of iteration ``iteration`` (int32 ``[]``) and all its optimiser steps, as one compiled loop
        (``learner.run_steps``)."""
        run_steps = functools.partial(learner.run_steps, self.step)
        return self.train(run_steps, train_state, buffer, self.plan(buffer, plan_key, exact_key, iteration))

    def train(self, run_steps, train_state: learner.TrainState, buffer: replay.ReplayBuffer, plan: LearningPlan
              ) -> tuple[learner.TrainState, Learned]:
        """The optimiser steps of ``plan`` on ``buffer``, run by ``run_steps`` (``learner.run_steps``'s signature,
        its ``step`` bound: the compiled loop, or the same steps driven from the host)."""
        train_state, losses = run_steps(train_state, buffer.samples, plan.weights, plan.index, plan.sym, plan.active,
                                        self.fixed(plan))
        return train_state, Learned(losses=losses, train_steps=plan.active, buffer_size=plan.num_valid)
