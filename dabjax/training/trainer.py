"""The trainer: the host loop around the pure iteration (``dabjax.training.iteration``), for one config.

The ``Trainer`` holds the static parts (board, network, optimiser, the jitted phases of the iteration) and runs one
iteration at a time (``Trainer.iteration``): it dispatches the iteration's phases jitted (self-play, the buffer,
the learning: one compiled loop, or a plan and a host loop of the same steps for a ResNet on the CPU), advances
the curriculum (``curriculum``) on the ratios self-play measured, keeps the clocks and assembles the metrics. The
evolving ``TrainerState`` is a pytree that checkpoints whole. Every jitted phase is traced once per run: the start
step, the stage and the iteration are traced values, never shapes. The device runs an iteration without waiting
for the host: the buffer and the training state are donated, the plan is made on the device, and the host reads
the iteration's figures once, at its end. The periodic evaluation is evaluation's (``dabjax.evaluation.periodic``).

File I/O, logging and progress bars are the run's (``dabjax.runs.train_boxeszero``) and the shell's.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game.geometry import board_geometry
from dabjax.search import heads, mcts, network
from dabjax.training import config as config_lib
from dabjax.training import curriculum, devices, learner, replay, selfplay, sizing
from dabjax.training import iteration as iteration_lib
from dabjax.training.config import TrainConfig
from dabjax.training.iteration import TrainerState

# The iteration metrics that are wall-clock measurements: they differ between any two runs, while everything else
# an iteration reports is fixed by the seed (sweep and resume tests compare runs without them).
TIMING_METRICS = frozenset({"games_per_s", "selfplay_seconds", "train_seconds", "iteration_seconds",
                            "dispatch_seconds", "ready_seconds"})


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

    ``laps``: the elapsed time at the end of each named phase (``lap``).
    """

    def __init__(self):
        self.began = time.perf_counter()
        self.dispatched = 0.0
        self.waited = 0.0
        self.laps: dict[str, float] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def lap(self, name: str) -> None:
        """Records the elapsed time as the end of phase ``name``."""
        self.laps[name] = self.elapsed()

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
    """The host loop around the pure iteration (``self.core``, an ``iteration.Iteration``) for one config: its
    static parts (board, network, optimiser, the jitted phases), and per iteration the clocks, the curriculum's
    advance and the metrics."""

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
        self.env = config.board.env()
        self.search_config = config.search
        self.model = network.PolicyValueNet(self.network_config)
        self.dense = config.network.dense_heads
        self.evaluator = mcts.network_evaluator(self.network_config, g)
        self.optimizer = learner.make_optimizer(
            config.train.lr, config.train.min_lr_fraction, config.train.restart_period
        )
        self.settings = self._self_play_settings()
        self.capacity = sizing.replay_capacity_per_iteration(config)
        self.exact_per_batch = config.exact_per_batch
        self.exact_samples = None if exact_samples is None else self.place(
            replay.with_dense_targets(exact_samples, self.dense))
        step = learner.make_train_step(g, self.model, self.optimizer, config.train.l2, **self._dense_weights())
        # The pure iteration (jit-able whole); this trainer runs its phases.
        self.core = iteration_lib.Iteration(config, g, self.settings, self.evaluator, step, self.exact_samples,
                                            self.mesh)
        self._jit_phases()

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
            env=self.env,
            search=self.search_config,
            num_games=config.selfplay.games,
            extraction=config.augmentation if nodes else None,
            sample_moves=config.selfplay.sample_moves,
            batch_sharding=self._batch_sharding if self.mesh.devices.size > 1 else None,
            dense_targets=self.dense,
        )

    def _jit_phases(self) -> None:
        """The iteration's phases, jitted: self-play, the buffer (donated: updated in place, never copied) and the
        learning (``train.loop``): the plan and its steps as one compiled call, or a jitted plan and a host loop
        of jitted steps (the training state donated either way)."""
        core = self.core
        self._play = jax.jit(core.play)
        self._collect = jax.jit(core.collect, donate_argnums=(0,))
        self.loop = learner.resolve_loop(self.config.train.loop, self.config.network.kind)
        if self.loop == "compiled":
            self._learn_compiled = jax.jit(core.learn, donate_argnums=(0,))
            self._learn = self._learn_compiled
        else:
            self._plan = jax.jit(core.plan)
            self._step = jax.jit(core.step, donate_argnums=(0,))
            self._learn = self._learn_on_host

    def _dense_weights(self) -> dict:
        """The dense heads' loss weights, as ``learner.make_train_step`` takes them."""
        targets = self.config.targets
        return dict(ownership_weight=targets.ownership_weight, margin_weight=targets.margin_weight)

    def _learn_on_host(self, train_state: learner.TrainState, buffer: replay.ReplayBuffer, plan_key: jax.Array,
                       exact_key: jax.Array | None, iteration: jax.Array
                       ) -> tuple[learner.TrainState, iteration_lib.Learned]:
        """``Iteration.learn`` with its steps driven from the host (``train.loop`` host): the plan is one jitted
        call, then the host reads its number of steps, nothing else, and calls one jitted step per step."""
        plan = self._plan(buffer, plan_key, exact_key, iteration)

        def run_steps(state, samples, weights, index, sym, active, fixed):
            return learner.run_steps_on_host(self._step, state, samples, weights, index, sym, int(active), fixed)

        return self.core.train(run_steps, train_state, buffer, plan)

    def _dispatched_phases(self, clock: IterationClock) -> iteration_lib.Phases:
        """The iteration's phases as this trainer runs them: each jitted phase dispatched through ``clock``, the
        host waiting for self-play to end to time it apart from the learning (``clock.laps["selfplay"]``)."""

        def play(*args) -> iteration_lib.Played:
            played = clock.dispatch(self._play, *args)
            clock.wait(played)
            clock.lap("selfplay")
            return played

        return iteration_lib.Phases(play=play, collect=functools.partial(clock.dispatch, self._collect),
                                    learn=functools.partial(clock.dispatch, self._learn))

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
            search=mcts.saved_fields(self.search_config, self.env),
            wall_time=float(state.wall_time),
            start_step=int(state.start_step),
            config=config_lib.to_dict(self.config),
        )

    # --- one iteration ---

    def iteration(self, state: TrainerState) -> tuple[TrainerState, dict]:
        """Self-play, buffer, training (``iteration.Iteration``) and curriculum; returns the new state and
        host-side metrics.

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
        state, figures = iteration_lib.run_phases(self._dispatched_phases(clock), state, state.key,
                                                  exact=self.exact_samples is not None)
        clock.wait(state.train_state)
        selfplay_seconds = clock.laps["selfplay"]
        train_seconds = clock.elapsed() - selfplay_seconds
        figures = clock.read(figures)
        mqr, nvr = float(figures.mqr), float(figures.nvr)

        before = curriculum.CurriculumState(start_step=start_step, last_advance=int(counters["last_advance"]))
        schedule, advanced = curriculum.advance(config.curriculum, before, iteration, mqr, nvr)
        seconds = clock.elapsed()
        metrics = dict(
            iteration=iteration + 1,
            start_step=start_step,
            stage=before.stage,
            next_start_step=schedule.start_step,
            advanced=bool(advanced),
            mqr=mqr,
            nvr=nvr,
            searched_positions=int(figures.searched_positions),
            node_samples=int(figures.node_samples),
            dropped=int(figures.dropped),
            buffer_size=int(figures.buffer_size),
            train_steps=int(figures.train_steps),
            games=config.selfplay.games,
            games_per_s=config.selfplay.games / selfplay_seconds,
            selfplay_seconds=selfplay_seconds,
            train_seconds=train_seconds,
            iteration_seconds=seconds,
            dispatch_seconds=clock.dispatched,
            ready_seconds=clock.waited,
            first_player_win_rate=float(figures.first_player_win_rate),
            samples_by_move=np.asarray(figures.samples_by_move).tolist(),
            **{name: float(value) for name, value in figures.losses.items()},
        )
        # The curriculum and the clock are the host's; the key and the iteration count, made outside the jitted
        # phases, are placed like the initial state with them, so no jitted phase sees a new input sharding and
        # retraces (jit outputs keep theirs).
        counters = self.place(dict(
            key=np.asarray(state.key), iteration=np.asarray(state.iteration),
            start_step=np.int32(schedule.start_step), last_advance=np.int32(schedule.last_advance),
            wall_time=np.float32(float(counters["wall_time"]) + seconds),
        ))
        return state.replace(**counters), metrics
