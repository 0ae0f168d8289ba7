"""One BoxesZero or AlphaZero run in its run directory: the run around ``dabjax.training.trainer`` that
``dabjax train`` (``dabjax.cli.train``), the sweeps (``dabjax.cli.sweep``) and the library (``train(config)``)
run. The run-directory loop (resume, checkpoints, metrics, progress bar) is ``dabjax.runs.run_dir``'s; the TD
trainer's counterpart is ``dabjax.runs.train_td``.
"""

from __future__ import annotations

import sys

from dabjax import package_data
from dabjax.evaluation import periodic, pretrained
from dabjax.game.geometry import board_geometry
from dabjax.runs import run_dir as run_dir_lib
from dabjax.runs import training_labels
from dabjax.solvers import labelled
from dabjax.training import checkpoint, replay, supervised
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib


def periodic_evaluation(trainer: trainer_lib.Trainer) -> periodic.PeriodicEvaluation:
    """The trainer's periodic evaluation, with the labelled set its config names (``eval.labelled_set``: a built-in
    set's name or a file) read from disk."""
    name = trainer.config.eval.labelled_set
    data = labelled.load(package_data.labelled_set_file(name)) if name is not None else None
    return periodic.PeriodicEvaluation(trainer, data)


def exact_label_samples(config: config_lib.TrainConfig) -> replay.Samples | None:
    """The training samples of ``train.exact_labels`` (None without), read from disk, without the positions of
    the set that measures the run (``eval.labelled_set``, else the board's built-in set). Raises ConfigError
    naming ``train.exact_labels`` when they cannot serve."""
    name = config.train.exact_labels
    if name is None or config.exact_per_batch == 0:
        return None
    geometry = board_geometry(config.board.rows, config.board.cols)
    try:
        excluded, excluded_name = training_labels.set_to_leave_out(config.eval.labelled_set, geometry)
    except (FileNotFoundError, ValueError) as error:
        raise config_lib.ConfigError(f"eval.labelled_set {config.eval.labelled_set!r}: {error}") from None
    try:
        data = labelled.load(package_data.labelled_set_file(name))
        if (data.rows, data.cols) != (geometry.rows, geometry.cols):
            raise ValueError(f"a {data.rows}x{data.cols} set, training is on {geometry.name}")
        samples, dropped = supervised.samples_from_set(data, excluded)
    except (FileNotFoundError, ValueError) as error:
        raise config_lib.ConfigError(f"train.exact_labels {name!r}: {error}") from None
    print(f"exact labels: {int(samples.valid.shape[0])} positions of {name} "
          f"({training_labels.left_out(dropped, excluded_name)}), {config.exact_per_batch} of every batch of "
          f"{config.train.batch_size}", file=sys.stderr)
    return samples


def warm_start_params(source: str, trainer: trainer_lib.Trainer):
    """The parameters of ``run.init_from`` (a run or checkpoint directory, an agent folder in the pretrained
    format, e.g. ``dabjax pretrain``'s, ``pretrained:RxC``, or a shipped warm start ``supervised:RxC``) for a
    fresh run. Raises
    ConfigError naming ``run.init_from`` when they cannot serve: another network setting, or another board for
    an MLP (its first layer reads one board's grid)."""
    wanted = trainer.network_config
    try:
        loaded = pretrained.load_to_continue(source, wanted, trainer.geometry.rows, trainer.geometry.cols)
    except (ValueError, FileNotFoundError) as error:
        raise config_lib.ConfigError(f"run.init_from {source!r}: {error}") from None
    print(f"warm start from {source} ({loaded.rows}x{loaded.cols}, iteration {loaded.iteration})", file=sys.stderr)
    return loaded.params


REPLAY_SAVED = "replay_saved"  # the checkpoint meta's key: whether its trainer item holds the replay buffer


class BoxesZeroTraining(run_dir_lib.ResumableTraining):
    """The BoxesZero / AlphaZero trainer (``dabjax.training.trainer``) in the run-directory loop."""

    def __init__(self, config: config_lib.TrainConfig):
        periodic.validate_eval_opponents(config)
        self.trainer = trainer_lib.Trainer(config, exact_samples=exact_label_samples(config))
        self.evaluation = periodic_evaluation(self.trainer) if config.eval.every else None
        self.eval_every = config.eval.every
        self.title = f"{config.mode} on {self.trainer.geometry.name}"

    def init_state(self, new_run: bool = True):
        source = self.trainer.config.run.init_from
        params = warm_start_params(source, self.trainer) if source and new_run else None  # resumes ignore it
        return self.trainer.init_state(params=params)

    def restore(self, store: checkpoint.CheckpointStore, iteration: int, fresh):
        meta = store.read_meta(iteration)
        checkpoint.check_compatible(
            meta, self.trainer.geometry.rows, self.trainer.geometry.cols,
            self.trainer.network_config, store.directory / str(iteration),
        )
        if meta.get("config", {}).get("train", {}).get("flat_optimizer", False):
            # train.flat_optimizer (removed) saved Adam's moments as one vector, not in the per-parameter layout.
            where = store.directory / str(iteration)
            raise config_lib.ConfigError(
                f"checkpoint {where} was written with train.flat_optimizer, which dabjax no longer has: resume it "
                f"with the dabjax that wrote it, or start a new run (another run.dir) from its network with "
                f"run.init_from={where}")
        trainer_target = fresh.replace(train_state=fresh.train_state.replace(params={}))
        with_replay = meta.get(REPLAY_SAVED, True)  # older checkpoints all hold it
        if not with_replay:
            trainer_target = trainer_target.replace(buffer=None)
        params, restored, _ = store.restore(iteration, fresh.train_state.params, trainer_target)
        if not with_replay:
            print(f"checkpoint {iteration} holds no replay buffer (run.checkpoint_replay: false): it starts empty "
                  f"and the next {self.trainer.config.replay.iterations} iterations refill it", file=sys.stderr)
            restored = restored.replace(buffer=fresh.buffer)
        return restored.replace(train_state=restored.train_state.replace(params=params))

    def save(self, store: checkpoint.CheckpointStore, state) -> None:
        # The parameters are their own checkpoint item (enough to play); the trainer item holds the rest, the
        # replay buffer only with run.checkpoint_replay (the meta says which, for the resume).
        trainer_part = state.replace(train_state=state.train_state.replace(params={}))
        with_replay = self.trainer.config.run.checkpoint_replay
        if not with_replay:
            trainer_part = trainer_part.replace(buffer=None)
        meta = {**self.trainer.meta(state), REPLAY_SAVED: with_replay}
        store.save(int(state.iteration), state.train_state.params, trainer_part, meta)

    def progress(self, state) -> tuple[int, float]:
        return int(state.iteration), float(state.wall_time)

    def iterate(self, state):
        state, metrics = self.trainer.iteration(state)
        metrics["time"] = float(state.wall_time)
        return state, metrics

    def evaluate(self, state, key) -> dict:
        return self.evaluation(state.train_state.params, key)

    def describe(self, state) -> str:
        return f"iteration {int(state.iteration)}, st={int(state.start_step)}"

    def postfix(self, metrics: dict) -> dict[str, str]:
        fields = dict(
            st=str(metrics["start_step"]), gps=f"{metrics['games_per_s']:.0f}", loss=f"{metrics['loss']:.3f}",
            mqr=f"{metrics['mqr']:.2f}", nvr=f"{metrics['nvr']:.2f}",
        )
        if "eval/best_result_min" in metrics:
            fields["acc"] = f"{metrics['eval/best_result_min']:.2f}"
        return fields

    def note(self, metrics: dict) -> str | None:
        if metrics.get("advanced"):
            return f"iteration {metrics['iteration']}: st {metrics['start_step']} -> {metrics['next_start_step']}"
        return None


def train(config: config_lib.TrainConfig, quiet: bool = False) -> dict:
    """Trains (or resumes) one run to ``run.iterations`` or ``run.max_minutes``; returns its last metrics."""
    training = BoxesZeroTraining(config)
    return run_dir_lib.train_in_run_dir(config.run, config_lib.to_yaml(config), training, quiet=quiet)
