"""One training iteration of BoxesZero (or its AlphaZero baseline), composed of jitted pieces.

An iteration: backward self-play from the current start step (``selfplay``), value and policy targets
(stage 1: the root Q; stage 2: ``w z + (1 - w) Q``; AlphaZero: ``z``), node-filtered augmentation in
stage 1, the replay buffer (``replay``), a jitted run of optimiser steps (``learner``), and the curriculum
(``curriculum``). The ``Trainer`` holds the static parts (board, network, jitted functions); the evolving
``TrainerState`` is a pytree that checkpoints whole. Every jitted function is traced once per run: the start
step, the stage and the iteration are traced values, never shapes.

File I/O, logging and progress bars are the shell's (``dabjax.cli.train``).
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

from dabjax.baselines import handcrafted
from dabjax.evaluation import arena
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.solvers import labelled
from dabjax.training import config as config_lib
from dabjax.training import curriculum, devices, learner, replay, selfplay
from dabjax.training.config import TrainConfig


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
    Node samples (value target: the node's Q) are kept only when ``include_nodes``.
    """
    flat = lambda tree, lead: jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[lead:]), tree)
    roots = replay.Samples(
        positions=flat(record.positions, 2),
        policy=flat(record.policy, 2),
        value=flat(z_weight * record.z + (1.0 - z_weight) * record.root_q, 2),
        move_number=flat(record.move_number, 2),
        from_node=jnp.zeros(record.searched.size, bool),
        valid=flat(record.searched, 2),
    )
    if record.nodes is None:
        return roots
    nodes = replay.samples_of_nodes(flat(record.nodes, 3), include_nodes)
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), roots, nodes)


def estimate_memory(config: TrainConfig) -> dict[str, int]:
    """Bytes the main device buffers need, from the config alone (per device for the sharded parts).

    * ``search_trees``: mctx's trees of one batched search: ``games x (simulations + 1)`` nodes, each with
      ``6 x L`` float32/int32 child fields, 5 node fields and a State (lines, owners, scalars);
    * ``selfplay_records``: ``L`` rounds x games x (position + policy + targets), and the tree-node slots;
    * ``replay_buffer``: ``D x M`` samples (replicated);
    * ``training_activations``: about ``batch x H x W x width x 4 bytes x (4 blocks + 6)`` for backprop
      (an MLP has no ``H x W``: one vector per position);
    * ``inference_activations``: the same forward pass over all games at once, without backprop.
    XLA adds workspace on top; treat the total as a lower bound (within ~2x in our measurements).
    """
    g = board_geometry(config.board.rows, config.board.cols)
    n_devices = max(1, jax.device_count())
    games = config.selfplay.games // n_devices
    lines, boxes = g.num_lines, g.num_boxes
    height, width = g.grid_shape
    nodes = config.search.num_simulations + 1
    state_bytes = 2 * lines + boxes + 4 * 6
    position_bytes = lines + boxes + 4
    node_slots = config.augmentation.max_nodes if config.augmentation.nodes else 0
    capacity = config.replay.capacity_per_iteration or config.selfplay.games * lines * (1 + node_slots)
    sample_bytes = position_bytes + 4 * lines + 4 + 4 + 2
    channels = config.network.width * (4 * config.network.blocks + 6)
    # Activations per position: a ResNet's every grid cell, a graph network's every line and node, an MLP's one vector.
    cells = {"resnet": height * width, "graph": lines + boxes + 1}.get(config.network.kind, 1)
    estimate = dict(
        search_trees=games * nodes * (6 * lines * 4 + 5 * 4 + state_bytes),
        selfplay_records=lines * games * (1 + node_slots) * (position_bytes + 4 * lines + 16),
        replay_buffer=config.replay.iterations * capacity * sample_bytes,
        training_activations=(config.train.batch_size // n_devices) * cells * channels * 4,
        inference_activations=games * cells * channels * 4 // 2,
    )
    estimate["total"] = sum(estimate.values())
    return estimate


def check_memory(config: TrainConfig, device: jax.Device | None = None) -> None:
    """Fails early, with the estimate's parts, when it exceeds the device's memory (where JAX reports it:
    GPUs and TPUs; the CPU backend reports no limit)."""
    device = device or jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    limit = (stats or {}).get("bytes_limit")
    if not limit:
        return
    estimate = estimate_memory(config)
    if estimate["total"] > limit:
        parts = ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in estimate.items() if k != "total")
        raise ValueError(
            f"this config needs about {estimate['total'] / 2**30:.1f} GiB per device, more than the "
            f"{limit / 2**30:.1f} GiB of {device.device_kind}: {parts}. Reduce selfplay.games, "
            "search.num_simulations, replay.capacity_per_iteration or train.batch_size"
        )


class Trainer:
    """The static half of training for one config: board, network, optimiser and jitted functions."""

    def __init__(self, config: TrainConfig, mesh: jax.sharding.Mesh | None = None,
                 exact_samples: replay.Samples | None = None):
        """``exact_samples``: the training samples of ``train.exact_labels`` (``supervised.samples_from_set``;
        reading the file is the caller's), when the config names them."""
        self.config = config
        self.geometry = g = board_geometry(config.board.rows, config.board.cols)
        if (exact_samples is None) != (config.exact_per_batch == 0):
            raise ValueError(f"train.exact_labels is {config.train.exact_labels!r} (share "
                             f"{config.train.exact_share}): pass its samples (supervised.samples_from_set) exactly "
                             "when the config mixes them in")
        self.mesh = devices.data_mesh() if mesh is None else mesh
        devices.check_divisible("selfplay.games", config.selfplay.games, self.mesh)
        devices.check_divisible("train.batch_size", config.train.batch_size, self.mesh)
        if config.exact_per_batch:  # the buffer's part of each batch is split over the devices
            devices.check_divisible("train.batch_size minus its exact labels (train.exact_share)",
                                    config.train.batch_size - config.exact_per_batch, self.mesh)
        check_memory(config)
        self._batch_sharding = devices.batch_sharding(self.mesh)
        self._replicated = devices.replicated(self.mesh)
        self.network_config = config.network
        self.search_config = config.search_config()
        self.model = network.PolicyValueNet(self.network_config)
        self.evaluator = mcts.network_evaluator(self.network_config, g)
        self.optimizer = learner.make_optimizer(
            config.train.lr, config.train.min_lr_fraction, config.train.restart_period
        )
        nodes = config.augmentation.nodes and config.curriculum.backward
        self.settings = selfplay.SelfPlaySettings(
            geometry=g,
            search=self.search_config,
            num_games=config.selfplay.games,
            extraction=config.augmentation if nodes else None,
            sample_moves=config.selfplay.sample_moves,
            batch_sharding=self._batch_sharding if self.mesh.devices.size > 1 else None,
        )
        node_slots = config.augmentation.max_nodes if nodes else 0
        self.capacity = config.replay.capacity_per_iteration or (
            config.selfplay.games * g.num_lines * (1 + node_slots)
        )
        # How many times each jitted function was traced (compiled): once per run, as the start step, stage
        # and iteration are traced values; tests check it.
        self.traces: collections.Counter[str] = collections.Counter()
        self._self_play = self._counted_jit("self_play", self._play)
        self._build_samples = self._counted_jit("build_samples", build_samples)
        self._insert = self._counted_jit("insert", replay.insert)
        self._summary = self._counted_jit(
            "summary", functools.partial(iteration_summary, num_lines=g.num_lines), out_shardings=self._replicated
        )
        self._train_steps = learner.make_train_steps(g, self.model, self.optimizer, config.train.l2)
        self.exact_per_batch = config.exact_per_batch
        self.exact_samples = None if exact_samples is None else self.place(exact_samples)
        if self.exact_samples is not None:
            self._exact_plan = self._counted_jit("exact_plan", functools.partial(
                learner.fixed_plan, steps=config.train.max_steps_per_iteration, per_batch=self.exact_per_batch,
                count=int(exact_samples.valid.shape[0]),
                num_symmetries=1 if config.augmentation.symmetries == "none" else g.num_symmetries,
            ), out_shardings=self._replicated)
        self._ratios = self._counted_jit(
            "ratios",
            functools.partial(
                selfplay.advancement_ratios,
                mq_threshold=config.curriculum.mq_threshold,
                nv_threshold=config.curriculum.nv_threshold,
            ),
        )

    def _counted_jit(self, name: str, fn, **jit_options):
        """``jax.jit(fn, **jit_options)``, counting its traces in ``self.traces[name]``."""

        def traced(*args):
            self.traces[name] += 1  # Python runs here only while JAX traces
            return fn(*args)

        return jax.jit(traced, **jit_options)

    def _play(self, params, key: jax.Array, start_step: jax.Array) -> selfplay.SelfPlayRecord:
        """One iteration's self-play from the curriculum's ``start_step`` (some games revisiting later ones)."""
        revisit = self.config.curriculum.revisit
        if revisit > 0:  # without it (the paper's), every game from st and the random stream as before
            key, key_start = jax.random.split(key)
            start_step = curriculum.game_start_steps(
                key_start, start_step, self.config.initial_start_step, self.config.selfplay.games, revisit
            )
        return selfplay.self_play(self.settings, self.evaluator, params, key, start_step)

    # --- state ---

    def init_state(self, seed: int | None = None, params=None) -> TrainerState:
        """A fresh state; ``params`` (a warm start, e.g. another board's network of a size-independent
        kind) replaces the random initial parameters and must have their structure."""
        key = jax.random.PRNGKey(self.config.run.seed if seed is None else seed)
        key, init_key = jax.random.split(key)
        initial = network.init_params(self.network_config, self.geometry.grid_shape, init_key)
        if params is not None:
            shapes = [jax.tree_util.tree_map(jnp.shape, tree) for tree in (params, initial)]
            if shapes[0] != shapes[1]:
                raise ValueError("warm-start parameters do not fit this network on this board")
        params = initial if params is None else params
        start = self.config.initial_start_step
        state = TrainerState(
            train_state=learner.init_train_state(params, self.optimizer),
            buffer=replay.init_buffer(self.geometry, self.config.replay.iterations, self.capacity),
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
        """Self-play, buffer, training and curriculum; returns the new state and host-side metrics."""
        config, g = self.config, self.geometry
        began = time.perf_counter()
        key, play_key, plan_key = jax.random.split(state.key, 3)
        iteration = int(state.iteration)
        start_step = int(state.start_step)
        stage = 2 if start_step == 0 else 1
        params = state.train_state.params

        record = self._self_play(params, play_key, state.start_step)
        mqr, nvr, searched = (float(x) for x in self._ratios(record, state.start_step))
        selfplay_seconds = time.perf_counter() - began

        z_weight = config.targets.z_weight_stage2 if stage == 2 else 0.0
        include_nodes = stage == 1 and self.settings.extraction is not None
        samples = self._build_samples(record, jnp.float32(z_weight), jnp.bool_(include_nodes))
        buffer, dropped = self._insert(state.buffer, samples, state.iteration)

        train_began = time.perf_counter()
        weights = replay.sample_weights(buffer, state.iteration, config.replay.gamma).reshape(-1)
        flat_samples = replay.flat(buffer)
        num_valid = int(replay.size(buffer))
        from_buffer = config.train.batch_size - self.exact_per_batch  # the rest of a batch: exact labels
        index, sym, active = learner.epoch_plan(
            plan_key, flat_samples.valid, num_valid, g.num_symmetries, config.augmentation.symmetries,
            config.train.epochs, from_buffer, config.train.max_steps_per_iteration,
        )
        exact = None
        if self.exact_samples is not None:
            key, exact_key = jax.random.split(key)
            exact = (self.exact_samples, *self._exact_plan(exact_key))
        # Each batch is split over the devices; the loss (a mean over the whole batch) and so the update
        # are the same as on one device.
        index, sym = devices.put_global((np.asarray(index), np.asarray(sym)), devices.step_batch_sharding(self.mesh))
        train_state, losses = self._train_steps(state.train_state, flat_samples, weights, index, sym, active, exact)
        losses = {k: float(v) for k, v in losses.items()}
        train_seconds = time.perf_counter() - train_began

        schedule = curriculum.CurriculumState(start_step=start_step, last_advance=int(state.last_advance))
        schedule, advanced = curriculum.advance(config.curriculum, schedule, iteration, mqr, nvr)
        seconds = time.perf_counter() - began

        summary = self._summary(record, samples)
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
            dropped=int(dropped),
            buffer_size=num_valid,
            train_steps=int(active),
            games_per_s=config.selfplay.games / selfplay_seconds,
            selfplay_seconds=selfplay_seconds,
            train_seconds=train_seconds,
            iteration_seconds=seconds,
            first_player_win_rate=float(summary["first_player_win_rate"]),
            samples_by_move=np.asarray(summary["samples_by_move"]).tolist(),
            **losses,
        )
        # Host-made values are placed like the initial state, so no jitted function sees a new input
        # sharding and retraces; jit outputs keep theirs.
        counters = self.place(dict(
            key=np.asarray(key), iteration=np.int32(iteration + 1), start_step=np.int32(schedule.start_step),
            last_advance=np.int32(schedule.last_advance), wall_time=np.float32(float(state.wall_time) + seconds),
        ))
        new_state = TrainerState(train_state=train_state, buffer=buffer, **counters)
        return new_state, metrics


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
            return search_agents.search_agent(search_config, evaluator, params)

        half = config.eval.games // 2
        early = config.board.early_termination

        def match(params, key, opponent):
            mine = agent_for(params)
            start = env_lib.batch_init(g, half)
            key_a, key_b = jax.random.split(key)
            first = arena.play_games(g, mine, opponent, key_a, start, early)
            second = arena.play_games(g, opponent, mine, key_b, start, early)
            return jnp.concatenate([first.rewards[:, 0], second.rewards[:, 1]])

        self._matches = {
            name: jax.jit(functools.partial(match, opponent=handcrafted.HANDCRAFTED_AGENTS[name]))
            for name in config.eval.opponents
        }
        self._moves = jax.jit(lambda params, key, states: agent_for(params)(g, key, states))

    def __call__(self, params, key) -> dict:
        results = {}
        for name, match in self._matches.items():
            key, sub = jax.random.split(key)
            reward = np.asarray(match(params, sub))
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
        if name not in handcrafted.HANDCRAFTED_AGENTS:
            raise ValueError(f"eval.opponents: unknown agent {name!r}; known: {sorted(handcrafted.HANDCRAFTED_AGENTS)}")
