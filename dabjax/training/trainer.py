"""One training iteration of BoxesZero (or its AlphaZero baseline), composed of jitted pieces.

An iteration: backward self-play from the current start step (``selfplay``), value and policy targets
(stage 1: the root Q; stage 2: ``w z + (1 - w) Q``; AlphaZero: ``z``), node-filtered augmentation in
stage 1, the replay buffer (``replay``), the learning plan and its optimiser steps (``learner``: one compiled
loop, or a host loop for a ResNet on the CPU), and the curriculum (``curriculum``). The ``Trainer`` holds the
static parts (board, network, jitted functions); the evolving ``TrainerState`` is a pytree that checkpoints
whole. Every jitted function is traced once per run: the start step, the stage and the iteration are traced
values, never shapes. The device runs an iteration without waiting for the host: the buffer and the training
state are donated, the plan is made on the device, and the host reads the iteration's figures once, at its end.
The periodic evaluation is evaluation's (``dabjax.evaluation.periodic``).

File I/O, logging and progress bars are the run's (``dabjax.runs.train_boxeszero``) and the shell's.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time

import chex
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game.geometry import board_geometry
from dabjax.search import heads, mcts, network
from dabjax.training import config as config_lib
from dabjax.training import curriculum, devices, learner, replay, selfplay, sizing
from dabjax.training.config import TrainConfig

# The iteration metrics that are wall-clock measurements: they differ between any two runs, while everything else
# an iteration reports is fixed by the seed (sweep and resume tests compare runs without them).
TIMING_METRICS = frozenset({"games_per_s", "selfplay_seconds", "train_seconds", "iteration_seconds",
                            "dispatch_seconds", "ready_seconds"})


@chex.dataclass(frozen=True)
class TrainerState:
    """Everything that evolves during training (saved in checkpoints)."""

    train_state: learner.TrainState
    buffer: replay.ReplayBuffer
    key: jax.Array
    iteration: jax.Array  # int32 [], iterations completed
    start_step: jax.Array  # int32 [], st
    last_advance: jax.Array  # int32 [], iteration of the last st advance
    wall_time: jax.Array  # float32 [], seconds spent training (over all resumptions)


def iteration_summary(record: selfplay.SelfPlayRecord, samples: replay.Samples, num_lines: int) -> dict:
    """Small replicated figures of one iteration (computed on the devices, so multi-process safe):
    samples added per move number, tree-node samples, and first-player wins in self-play."""
    by_move = jnp.zeros(num_lines + 1, jnp.int32).at[jnp.where(samples.valid, samples.move_number, num_lines)].add(1)
    scores = record.final_scores
    return dict(
        samples_by_move=by_move[:num_lines],
        node_samples=(samples.valid & samples.from_node).sum(),
        first_player_win_rate=(scores[:, 0] > scores[:, 1]).mean(),
    )


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


class IterationClock:
    """Wall time of one iteration in seconds, split three ways.

    * ``dispatched``: inside the calls that launch compiled work. JAX dispatches asynchronously, so a launch
      returns before the device is done and this is host work (tracing, argument handling), unless the program
      makes the host wait while it launches: XLA's GPU runtime runs a ``while`` loop whose trip count it cannot
      know when compiling, or a ``cond``, by copying the predicate to the host at every turn, inside the launch.
      A dispatch time near the iteration's time is the signature of such round trips (``dabjax.game.loops``).
    * ``waited``: blocked on results (``block_until_ready`` and reads): the device's time the host could not
      hide.
    * the rest: Python between the two (the curriculum, the metrics).
    """

    def __init__(self):
        self.began = time.perf_counter()
        self.dispatched = 0.0
        self.waited = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def dispatch(self, fn, *args):
        """``fn(*args)``, its time counted as dispatch."""
        began = time.perf_counter()
        result = fn(*args)
        self.dispatched += time.perf_counter() - began
        return result

    def wait(self, tree) -> None:
        waiting = time.perf_counter()
        jax.block_until_ready(tree)
        self.waited += time.perf_counter() - waiting

    def read(self, tree):
        """``tree`` on the host, in one transfer (the wait counts as waiting)."""
        waiting = time.perf_counter()
        values = jax.device_get(tree)
        self.waited += time.perf_counter() - waiting
        return values


class Trainer:
    """The static half of training for one config: board, network, optimiser and jitted functions."""

    def __init__(self, config: TrainConfig, mesh: jax.sharding.Mesh | None = None,
                 exact_samples: replay.Samples | None = None):
        """``exact_samples``: the training samples of ``train.exact_labels`` (``supervised.samples_from_set``;
        reading the file is the caller's), when the config names them. The games come from the device's memory
        where ``selfplay.memory_share`` asks (``sizing.sized_to_device``): ``self.config`` is the config as
        run, ``self.requested_games`` the games the config wrote."""
        self.requested_games = config.selfplay.games
        config = sizing.sized_to_device(config)
        self.config = config
        self.geometry = g = board_geometry(config.board.rows, config.board.cols)
        if (exact_samples is None) != (config.exact_per_batch == 0):
            raise ValueError(f"train.exact_labels is {config.train.exact_labels!r} (share "
                             f"{config.train.exact_share}): pass its samples (supervised.samples_from_set) exactly "
                             "when the config mixes them in")
        self.mesh = devices.data_mesh() if mesh is None else mesh
        self._check_batches_split_over_devices()
        sizing.check_memory(config)
        self._batch_sharding = devices.batch_sharding(self.mesh)
        self._replicated = devices.replicated(self.mesh)
        self.network_config = config.network
        self.search_config = config.search_config()
        self.model = network.PolicyValueNet(self.network_config)
        self.dense = config.network.dense_heads
        self.evaluator = mcts.network_evaluator(self.network_config, g)
        self.optimizer = learner.make_optimizer(
            config.train.lr, config.train.min_lr_fraction, config.train.restart_period
        )
        self.settings = self._self_play_settings()
        self.capacity = sizing.replay_capacity_per_iteration(config)
        # How many times each jitted function was traced (compiled): once per run, as the start step, stage
        # and iteration are traced values; tests check it.
        self.traces: collections.Counter[str] = collections.Counter()
        self._jit_self_play_and_buffer()
        self.exact_per_batch = config.exact_per_batch
        self.exact_samples = None if exact_samples is None else self.place(
            replay.with_dense_targets(exact_samples, self.dense))
        self._jit_learning()

    def _check_batches_split_over_devices(self) -> None:
        """Raises ValueError unless the games and the batches split evenly over the mesh's devices."""
        config = self.config
        devices.check_divisible("selfplay.games", config.selfplay.games, self.mesh)
        devices.check_divisible("train.batch_size", config.train.batch_size, self.mesh)
        if config.exact_per_batch:  # the buffer's part of each batch is split over the devices
            devices.check_divisible("train.batch_size minus its exact labels (train.exact_share)",
                                    config.train.batch_size - config.exact_per_batch, self.mesh)

    def _self_play_settings(self) -> selfplay.SelfPlaySettings:
        """The static settings of ``selfplay.self_play``: node augmentation only where searches keep nodes."""
        config = self.config
        nodes = sizing.node_slots_per_search(config) > 0
        return selfplay.SelfPlaySettings(
            geometry=self.geometry,
            search=self.search_config,
            num_games=config.selfplay.games,
            extraction=config.augmentation if nodes else None,
            sample_moves=config.selfplay.sample_moves,
            batch_sharding=self._batch_sharding if self.mesh.devices.size > 1 else None,
            dense_targets=self.dense,
        )

    def _jit_self_play_and_buffer(self) -> None:
        """The jitted self-play, sample building, buffer insertion, iteration summary and curriculum ratios."""
        config = self.config
        self._self_play = self._counted_jit("self_play", self._play)
        self._build_samples = self._counted_jit("build_samples", build_samples)
        # The replay buffer and the training state are donated: updated in place, never copied.
        self._insert = self._counted_jit("insert", replay.insert, donate_argnums=(0,))
        self._summary = self._counted_jit(
            "summary", functools.partial(iteration_summary, num_lines=self.geometry.num_lines),
            out_shardings=self._replicated
        )
        self._ratios = self._counted_jit(
            "ratios",
            functools.partial(
                selfplay.advancement_ratios,
                mq_threshold=config.curriculum.mq_threshold,
                nv_threshold=config.curriculum.nv_threshold,
            ),
        )

    def _jit_learning(self) -> None:
        """The jitted learning plan and optimiser steps: one compiled call, or a plan and a host loop of steps
        (``train.loop``); with exact labels, the plan of their part of every batch."""
        config, g = self.config, self.geometry
        if self.exact_samples is not None:
            self._exact_plan = self._counted_jit("exact_plan", functools.partial(
                learner.fixed_plan, steps=config.train.max_steps_per_iteration, per_batch=self.exact_per_batch,
                count=int(self.exact_samples.valid.shape[0]),
                num_symmetries=1 if config.augmentation.symmetries == "none" else g.num_symmetries,
            ))
        self.loop = learner.resolve_loop(config.train.loop, config.network.kind)
        if self.loop == "compiled":  # the plan is made inside the one call
            step = learner.make_train_step(g, self.model, self.optimizer, config.train.l2, **self._dense_weights())
            self._learn_compiled = self._counted_jit(
                "learn", functools.partial(self._learn_in_one_call, step), donate_argnums=(0,))
        else:
            self._plan = self._counted_jit("plan", self._make_plan)
            self._train_steps = learner.make_train_steps(
                g, self.model, self.optimizer, config.train.l2, loop="host", donate=True, **self._dense_weights())

    def _dense_weights(self) -> dict:
        """The dense heads' loss weights, as ``learner.make_train_step`` takes them."""
        targets = self.config.targets
        return dict(ownership_weight=targets.ownership_weight, margin_weight=targets.margin_weight)

    def _counted_jit(self, name: str, fn, **jit_options):
        """``jax.jit(fn, **jit_options)``, counting its traces in ``self.traces[name]``."""

        def traced(*args):
            self.traces[name] += 1  # Python runs here only while JAX traces
            return fn(*args)

        return jax.jit(traced, **jit_options)

    def _play(self, params, key: jax.Array, start_step: jax.Array) -> selfplay.SelfPlayRecord:
        """One iteration's self-play from the curriculum's ``start_step`` (some games revisiting later ones)."""
        revisit = self.config.curriculum.revisit
        if revisit > 0:  # without it (the paper's), every game starts at st and the key is not split
            key, key_start = jax.random.split(key)
            start_step = curriculum.game_start_steps(
                key_start, start_step, self.config.initial_start_step, self.config.selfplay.games, revisit
            )
        return selfplay.self_play(self.settings, self.evaluator, params, key, start_step)

    def _make_plan(self, buffer: replay.ReplayBuffer, plan_key: jax.Array, exact_key: jax.Array | None,
                   iteration: jax.Array) -> LearningPlan:
        """One iteration's learning plan, made on the device (``learner.epoch_plan``, ``learner.fixed_plan``)."""
        config = self.config
        valid = buffer.samples.valid.reshape(-1)
        num_valid = valid.sum(dtype=jnp.int32)
        from_buffer = config.train.batch_size - self.exact_per_batch  # the rest of a batch: exact labels
        index, sym, active = learner.epoch_plan(
            plan_key, valid, num_valid, self.geometry.num_symmetries, config.augmentation.symmetries,
            config.train.epochs, from_buffer, config.train.max_steps_per_iteration,
        )
        if self.mesh.devices.size > 1:
            # Each batch is split over the devices; the loss (a mean over the whole batch) and so the update
            # are the same as on one device.
            index, sym = jax.lax.with_sharding_constraint((index, sym), devices.step_batch_sharding(self.mesh))
        fixed_index, fixed_sym = self._exact_plan(exact_key) if exact_key is not None else (None, None)
        return LearningPlan(weights=replay.sample_weights(buffer, iteration, config.replay.gamma), index=index,
                            sym=sym, active=active, num_valid=num_valid, fixed_index=fixed_index, fixed_sym=fixed_sym)

    def _fixed(self, plan: LearningPlan):
        """The exact labels' part of every batch, as ``learner.make_train_step`` takes it (or None)."""
        return None if plan.fixed_index is None else (self.exact_samples, plan.fixed_index, plan.fixed_sym)

    def _learn_in_one_call(self, step, train_state: learner.TrainState, buffer: replay.ReplayBuffer,
                           plan_key: jax.Array, exact_key: jax.Array | None, iteration: jax.Array):
        """The plan and all its optimiser steps as one compiled call (``train.loop`` compiled)."""
        plan = self._make_plan(buffer, plan_key, exact_key, iteration)
        train_state, losses = learner.run_steps(
            step, train_state, buffer.samples, plan.weights, plan.index, plan.sym, plan.active, self._fixed(plan))
        return train_state, losses, plan.active, plan.num_valid

    def _learn(self, train_state, buffer, plan_key, exact_key, iteration):
        """``(train state, mean losses, active steps, buffer size)``, all on the device. The training state is
        donated. The host loop (``train.loop`` host) reads the number of steps, nothing else."""
        if self.loop == "compiled":
            return self._learn_compiled(train_state, buffer, plan_key, exact_key, iteration)
        plan = self._plan(buffer, plan_key, exact_key, iteration)
        train_state, losses = self._train_steps(
            train_state, buffer.samples, plan.weights, plan.index, plan.sym, int(plan.active), self._fixed(plan))
        return train_state, losses, plan.active, plan.num_valid

    # --- state ---

    def init_state(self, seed: int | None = None, params=None) -> TrainerState:
        """A fresh state; ``params`` (a warm start, e.g. another board's network of a size-independent
        kind) replaces the random initial parameters and must have their structure, but for the dense heads:
        a warm start without them (a network trained before them) keeps the fresh heads, and one with them for a
        network without drops its own (``heads.with_heads_of``)."""
        key = jax.random.PRNGKey(self.config.run.seed if seed is None else seed)
        key, init_key = jax.random.split(key)
        initial = network.init_params(self.network_config, self.geometry.grid_shape, init_key)
        if params is not None:
            params = heads.with_heads_of(params, initial)
            shapes = [jax.tree_util.tree_map(jnp.shape, tree) for tree in (params, initial)]
            if shapes[0] != shapes[1]:
                raise ValueError("warm-start parameters do not fit this network on this board")
        params = initial if params is None else params
        start = self.config.initial_start_step
        state = TrainerState(
            train_state=learner.init_train_state(params, self.optimizer),
            buffer=replay.init_buffer(self.geometry, self.config.replay.iterations, self.capacity, self.dense),
            key=key,
            iteration=jnp.int32(0),
            start_step=jnp.int32(start),
            last_advance=jnp.int32(0),
            wall_time=jnp.float32(0.0),
        )
        return self.place(state)

    def place(self, tree):
        """Puts a (fresh or restored) state, or host values, on the mesh: everything replicated."""
        return devices.put_global(tree, self._replicated)

    def meta(self, state: TrainerState) -> dict:
        """What a checkpoint records beside the arrays (JSON)."""
        return dict(
            rows=self.geometry.rows,
            cols=self.geometry.cols,
            mode=self.config.mode,
            network=dataclasses.asdict(self.network_config),
            search=dataclasses.asdict(self.search_config),
            wall_time=float(state.wall_time),
            start_step=int(state.start_step),
            config=config_lib.to_dict(self.config),
        )

    # --- one iteration ---

    def iteration(self, state: TrainerState) -> tuple[TrainerState, dict]:
        """Self-play, buffer, training and curriculum; returns the new state and host-side metrics.

        Everything is dispatched at once; the host waits twice (once after self-play, to time the phases, and
        once at the end) and reads the iteration's figures back in one transfer. Whether the device waits on
        the host inside a launch depends on the backend's command buffers (``dabjax.game.loops``);
        ``dispatch_seconds`` and ``ready_seconds`` (``IterationClock``) tell the two apart. ``state``'s
        buffer and training state are donated: use the returned state only.
        """
        config = self.config
        clock = IterationClock()
        counters = jax.device_get(dict(iteration=state.iteration, start_step=state.start_step,
                                       last_advance=state.last_advance, wall_time=state.wall_time))
        iteration, start_step = int(counters["iteration"]), int(counters["start_step"])
        stage = 2 if start_step == 0 else 1
        key, play_key, plan_key = jax.random.split(state.key, 3)
        exact_key = None
        if self.exact_samples is not None:
            key, exact_key = jax.random.split(key)

        record = clock.dispatch(self._self_play, state.train_state.params, play_key, state.start_step)
        ratios = clock.dispatch(self._ratios, record, state.start_step)
        clock.wait(ratios)
        selfplay_seconds = clock.elapsed()

        z_weight = config.targets.z_weight_stage2 if stage == 2 else 0.0
        include_nodes = stage == 1 and self.settings.extraction is not None
        samples = clock.dispatch(self._build_samples, record, jnp.float32(z_weight), jnp.bool_(include_nodes))
        summary = clock.dispatch(self._summary, record, samples)
        buffer, dropped = clock.dispatch(self._insert, state.buffer, samples, state.iteration)
        train_state, losses, active, num_valid = clock.dispatch(
            self._learn, state.train_state, buffer, plan_key, exact_key, state.iteration)
        clock.wait(train_state)
        train_seconds = clock.elapsed() - selfplay_seconds
        figures = clock.read(dict(ratios=ratios, dropped=dropped, losses=losses, active=active,
                                  num_valid=num_valid, summary=summary))
        mqr, nvr, searched = (float(x) for x in figures["ratios"])

        schedule = curriculum.CurriculumState(start_step=start_step, last_advance=int(counters["last_advance"]))
        schedule, advanced = curriculum.advance(config.curriculum, schedule, iteration, mqr, nvr)
        seconds = clock.elapsed()
        summary = figures["summary"]
        metrics = dict(
            iteration=iteration + 1,
            start_step=start_step,
            stage=stage,
            next_start_step=schedule.start_step,
            advanced=bool(advanced),
            mqr=mqr,
            nvr=nvr,
            searched_positions=int(searched),
            node_samples=int(summary["node_samples"]),
            dropped=int(figures["dropped"]),
            buffer_size=int(figures["num_valid"]),
            train_steps=int(figures["active"]),
            games=config.selfplay.games,
            games_per_s=config.selfplay.games / selfplay_seconds,
            selfplay_seconds=selfplay_seconds,
            train_seconds=train_seconds,
            iteration_seconds=seconds,
            dispatch_seconds=clock.dispatched,
            ready_seconds=clock.waited,
            first_player_win_rate=float(summary["first_player_win_rate"]),
            samples_by_move=np.asarray(summary["samples_by_move"]).tolist(),
            **{name: float(value) for name, value in figures["losses"].items()},
        )
        # Host-made values are placed like the initial state, so no jitted function sees a new input
        # sharding and retraces; jit outputs keep theirs.
        counters = self.place(dict(
            key=np.asarray(key), iteration=np.int32(iteration + 1), start_step=np.int32(schedule.start_step),
            last_advance=np.int32(schedule.last_advance),
            wall_time=np.float32(float(counters["wall_time"]) + seconds),
        ))
        new_state = TrainerState(train_state=train_state, buffer=buffer, **counters)
        return new_state, metrics
