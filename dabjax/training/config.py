"""Typed, validated training configuration: dataclasses, loaded from YAML with command-line overrides.

``load_config(path, overrides)`` builds a ``TrainConfig`` in layers: the defaults, the YAML file, then
``key=value`` overrides (``train.lr=3e-4``), with the preset of the chosen ``mode`` (``boxeszero`` or
``alphazero``) slotted in just before the layer that chooses it. OmegaConf checks every key and type against
the dataclasses, so a misspelt key or a value of the wrong type fails at start-up with a message naming it;
each section checks its own values when it is built, and ``validate`` then checks ranges and combinations.

A config file is a path or a built-in config's name (``load_config("5x5_cpu")``; ``dabjax.package_data``), and
``eval.labelled_set`` a ``.npz`` path or a built-in set's name (``5x5``). The loaded config names its labelled set
so that it resolves from anywhere (the built-in's name, else the file's absolute path): a run directory's
``config.yaml`` never depends on the folder it was started from or on where the package lives.

Each setting is declared once. The sections the core reads are the core's own frozen dataclasses, defaults
included: ``network`` is ``network.NetworkConfig``, ``search`` is ``mcts.SearchConfig`` (a search also takes the
environment, ``env_lib.Env``: the board and its rule, from the ``board`` section: ``board.env()``), and
``augmentation`` extends ``tree_nodes.ExtractionConfig`` (bands, max_nodes) with the trainer's two switches.
The other sections are the trainer's alone and are declared here.

Modes (the ablation switches stay free to override):

* ``boxeszero``: backward start-step curriculum, stage-1 Q targets then 0.75 z + 0.25 Q, endgame and
  chain-loop pruning, node-filtered augmentation in stage 1, symmetry augmentation.
* ``alphazero``: the paper's baseline: forward self-play from move 0, value target z only, no prunings,
  no node augmentation (symmetry augmentation kept).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dabjax import package_data
from dabjax.game import env as env_lib
from dabjax.game.geometry import MAX_SIDE
from dabjax.search import mcts, tree_nodes
from dabjax.search.network import NetworkConfig
from dabjax.training import learner

MODES = ("boxeszero", "alphazero")
SYMMETRY_MODES = ("all", "random", "none")


@dataclasses.dataclass
class BoardSection:
    rows: int = 3
    cols: int = 3
    early_termination: bool = False  # end once a player holds more than half the boxes (Li, Chi and Chang)

    def env(self) -> env_lib.Env:
        """The environment a run plays: this board's size and rule (what search, self-play and agents take)."""
        return env_lib.Env(self.rows, self.cols, self.early_termination)


@dataclasses.dataclass
class SelfPlaySection:
    games: int = 128  # games per iteration, played in lockstep
    sample_moves: int = 0  # PUCT/UCT: sample by visits for this many searched moves, then most visited
    # Games from the device's memory (dabjax.training.sizing): with a share > 0, on a device that reports its
    # memory (GPUs, TPUs), the games double from `games` up to `max_games` while the memory estimate stays
    # within this share of it, and the learning steps (and an explicit replay capacity) scale with them, keeping
    # the sample reuse. 0, or a CPU: `games` as written.
    memory_share: float = 0.0
    max_games: int = 16384


@dataclasses.dataclass
class CurriculumSection:
    backward: bool = True
    start_step: Optional[int] = None  # None: half the lines
    beta: int = 1  # steps st moves back at each advance
    max_iterations_per_step: int = 150  # mit
    mq_threshold: float = 0.85  # mqth
    nv_threshold: float = 0.75  # nvth
    mq_ratio_threshold: float = 0.75  # mqrth
    nv_ratio_threshold: float = 0.85  # nvrth
    revisit: float = 0.0  # share of games starting at a random step in [st, initial st] (0: the paper's)


@dataclasses.dataclass
class TargetsSection:
    z_weight_stage2: float = 0.75  # stage 2 value target: w z + (1 - w) Q
    # KataGo's dense targets (network.dense_heads: true): loss weights of every box's final owner (sigmoid
    # cross-entropy) and of the final margin over the boxes (squared error), from every finished game (and the
    # margin also from exact labels). 0: unused.
    ownership_weight: float = 0.0
    margin_weight: float = 0.0


@dataclasses.dataclass(frozen=True)
class AugmentationSection(tree_nodes.ExtractionConfig):
    """Which tree nodes become samples (``bands``, ``max_nodes``: ``tree_nodes.ExtractionConfig``, which this
    section is, so self-play takes it as it is), whether they do, and the symmetry augmentation."""

    nodes: bool = True  # node-filtered augmentation (stage 1 only)
    symmetries: str = "random"  # all: every symmetric copy each epoch; random: one random copy per use


@dataclasses.dataclass
class ReplaySection:
    iterations: int = 5  # D
    gamma: float = 0.98  # loss weight gamma ** age
    capacity_per_iteration: Optional[int] = None  # None: every root sample plus every kept node


@dataclasses.dataclass
class TrainSection:
    lr: float = 1e-3
    min_lr_fraction: float = 0.05  # SGDR: cosine from lr down to lr * this, then restart
    restart_period: int = 500  # optimiser steps per SGDR cycle
    l2: float = 1e-4  # lambda in lambda * ||theta||^2
    epochs: int = 2
    batch_size: int = 256
    max_steps_per_iteration: int = 200
    # Exact labels in every batch, as Leela Chess Zero rescores with tablebases: a labelled set (dabjax label
    # build; a .npz path or a built-in set's name) whose positions, with their exact result and best-result moves
    # as targets, fill exact_share of each training batch. Positions also in the set that measures the run
    # (eval.labelled_set, else the board's built-in set) are left out.
    exact_labels: Optional[str] = None
    exact_share: float = 0.25  # 0: the labels are not used (a sweep's baseline)
    # The loop over an iteration's optimiser steps: compiled (one dispatch, lax.fori_loop), host (a jitted step
    # per optimiser step) or auto (compiled, but host for a ResNet on the CPU: dabjax.training.learner.resolve_loop).
    loop: str = "auto"


@dataclasses.dataclass
class EvalSection:
    every: int = 10  # iterations; 0 = never
    games: int = 100  # per handcrafted opponent
    opponents: List[str] = dataclasses.field(default_factory=lambda: ["level1", "level2"])
    num_simulations: int = 32
    # A labelled set for accuracy by move number: a built-in set's name (3x3, 4x4, 5x5) or a .npz path.
    labelled_set: Optional[str] = None
    batch_size: int = 1024  # labelled positions per search call (smaller is faster on a CPU with many simulations)


@dataclasses.dataclass
class RunSection:
    dir: str = "runs/default"
    seed: int = 0
    iterations: int = 1000
    max_minutes: float = 0.0  # training-time budget (self-play + learning, not evaluation); 0 = none
    checkpoint_every: int = 5  # iterations between checkpoints
    # Minutes of wall time between checkpoints as well (whichever of the two comes first; 0: iterations only):
    # bounds what a kill without warning (a Colab disconnect) loses, however long an iteration takes.
    checkpoint_minutes: float = 5.0
    keep_checkpoints: int = 3
    # Whether a checkpoint holds the replay buffer. It is most of a checkpoint's size (about 9 GB at the 16,384
    # games the GPU recipe plays on an 80 GB card, against a few MB of network and optimiser); without it a
    # resume starts with an empty buffer, which the next replay.iterations iterations refill.
    checkpoint_replay: bool = True
    progress: bool = True
    # Warm start: a run or checkpoint directory, an agent folder (agent.json + params.msgpack: an export, or a
    # network trained on exact labels by dabjax pretrain), pretrained:RxC, or a shipped warm start
    # supervised:RxC (dabjax/pretrained/supervised/), whose
    # network (same settings; another board only for the size-independent kinds, graph and resnet) gives the
    # first parameters. A resume continues from the run's own checkpoints.
    init_from: Optional[str] = None


@dataclasses.dataclass
class TrainConfig:
    mode: str = "boxeszero"
    run: RunSection = dataclasses.field(default_factory=RunSection)
    board: BoardSection = dataclasses.field(default_factory=BoardSection)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    search: mcts.SearchConfig = dataclasses.field(default_factory=mcts.SearchConfig)
    selfplay: SelfPlaySection = dataclasses.field(default_factory=SelfPlaySection)
    curriculum: CurriculumSection = dataclasses.field(default_factory=CurriculumSection)
    targets: TargetsSection = dataclasses.field(default_factory=TargetsSection)
    augmentation: AugmentationSection = dataclasses.field(default_factory=AugmentationSection)
    replay: ReplaySection = dataclasses.field(default_factory=ReplaySection)
    train: TrainSection = dataclasses.field(default_factory=TrainSection)
    eval: EvalSection = dataclasses.field(default_factory=EvalSection)

    # --- derived views used by the core ---

    @property
    def num_lines(self) -> int:
        r, c = self.board.rows, self.board.cols
        return (r + 1) * c + r * (c + 1)

    @property
    def initial_start_step(self) -> int:
        if not self.curriculum.backward:
            return 0
        if self.curriculum.start_step is None:
            return self.num_lines // 2
        return self.curriculum.start_step

    @property
    def exact_per_batch(self) -> int:
        """Samples of each training batch drawn from ``train.exact_labels`` (0 without them)."""
        if self.train.exact_labels is None:
            return 0
        return round(self.train.exact_share * self.train.batch_size)


MODE_PRESETS: dict[str, dict[str, Any]] = {
    "boxeszero": {},
    "alphazero": {
        "curriculum": {"backward": False, "revisit": 0.0},
        "targets": {"z_weight_stage2": 1.0},
        "search": {"endgame_pruning": False, "chain_pruning": False},
        "augmentation": {"nodes": False},
    },
}


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key."""


# Keys of options dabjax does without, with the one value that describes every run it makes: a run directory's
# config.yaml lists every key of the config that wrote it, so those keys may hold that value and the run resumes.
REMOVED_KEYS = {"network.chain_features": False}


def without_removed_keys(layer):
    """``layer`` (a config layer) less the ``REMOVED_KEYS`` that hold their kept value; ConfigError naming a key
    of them that holds another."""
    if not isinstance(layer, DictConfig):
        return layer
    for key, kept in REMOVED_KEYS.items():
        section, _, name = key.rpartition(".")
        parent = OmegaConf.select(layer, section) if section else layer
        if not isinstance(parent, DictConfig) or name not in parent:
            continue
        if parent[name] != kept:
            raise ConfigError(f"config key {key!r}: dabjax has no {key} option (every run it makes has "
                              f"{name}: {str(kept).lower()}); remove the key")
        del parent[name]
    return layer


def positive(name: str, value, allow_zero: bool = False):
    """Raises ConfigError naming ``name`` unless ``value > 0`` (``>= 0`` with ``allow_zero``)."""
    if value is None or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def validate(config: TrainConfig) -> TrainConfig:
    """Checks ranges and combinations; raises ConfigError naming the key. Returns the config."""
    if config.mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}, got {config.mode!r}")
    for name in ("rows", "cols"):
        value = getattr(config.board, name)
        if not 1 <= value <= MAX_SIDE:
            raise ConfigError(f"board.{name} must be in 1..{MAX_SIDE} (boxes), got {value!r}")
    if config.augmentation.symmetries not in SYMMETRY_MODES:
        raise ConfigError(
            f"augmentation.symmetries must be one of {SYMMETRY_MODES}, got {config.augmentation.symmetries!r}"
        )
    positive("selfplay.games", config.selfplay.games)
    positive("selfplay.sample_moves", config.selfplay.sample_moves, allow_zero=True)
    if not 0 <= config.selfplay.memory_share < 1:
        raise ConfigError(f"selfplay.memory_share must be in [0, 1) (0: selfplay.games as written), got "
                          f"{config.selfplay.memory_share!r}")
    positive("selfplay.max_games", config.selfplay.max_games)
    positive("curriculum.beta", config.curriculum.beta)
    positive("curriculum.max_iterations_per_step", config.curriculum.max_iterations_per_step)
    start = config.curriculum.start_step
    if start is not None and not 0 <= start < config.num_lines:
        raise ConfigError(f"curriculum.start_step must be in 0..{config.num_lines - 1}, got {start!r}")
    for name in ("mq_threshold", "nv_threshold", "mq_ratio_threshold", "nv_ratio_threshold"):
        value = getattr(config.curriculum, name)
        if not 0 <= value <= 1:
            raise ConfigError(f"curriculum.{name} must be in [0, 1], got {value!r}")
    if not 0 <= config.curriculum.revisit < 1:
        raise ConfigError(f"curriculum.revisit must be in [0, 1), got {config.curriculum.revisit!r}")
    if config.curriculum.revisit > 0 and not config.curriculum.backward:
        raise ConfigError("curriculum.revisit needs curriculum.backward: true (there are no earlier start steps)")
    if not 0 <= config.targets.z_weight_stage2 <= 1:
        raise ConfigError(f"targets.z_weight_stage2 must be in [0, 1], got {config.targets.z_weight_stage2!r}")
    for name in ("ownership_weight", "margin_weight"):
        positive(f"targets.{name}", getattr(config.targets, name), allow_zero=True)
        if getattr(config.targets, name) > 0 and not config.network.dense_heads:
            raise ConfigError(f"targets.{name} > 0 trains the dense heads: set network.dense_heads: true")
    positive("replay.iterations", config.replay.iterations)
    if not 0 < config.replay.gamma <= 1:
        raise ConfigError(f"replay.gamma must be in (0, 1], got {config.replay.gamma!r}")
    if config.replay.capacity_per_iteration is not None:
        positive("replay.capacity_per_iteration", config.replay.capacity_per_iteration)
    positive("train.lr", config.train.lr)
    if not 0 <= config.train.min_lr_fraction <= 1:
        raise ConfigError(f"train.min_lr_fraction must be in [0, 1], got {config.train.min_lr_fraction!r}")
    positive("train.restart_period", config.train.restart_period)
    positive("train.l2", config.train.l2, allow_zero=True)
    positive("train.epochs", config.train.epochs)
    positive("train.batch_size", config.train.batch_size)
    positive("train.max_steps_per_iteration", config.train.max_steps_per_iteration)
    if config.train.loop not in learner.LOOPS:
        raise ConfigError(f"train.loop must be one of {learner.LOOPS}, got {config.train.loop!r}")
    if not 0 <= config.train.exact_share < 1:
        raise ConfigError(f"train.exact_share must be in [0, 1) (0: no exact labels), got {config.train.exact_share!r}")
    if (config.train.exact_labels is not None and config.train.exact_share > 0
            and not 1 <= config.exact_per_batch < config.train.batch_size):
        raise ConfigError(f"train.exact_share {config.train.exact_share!r} of train.batch_size "
                          f"{config.train.batch_size} leaves no exact label or no self-play sample in a batch")
    positive("eval.every", config.eval.every, allow_zero=True)
    positive("eval.games", config.eval.games)
    positive("eval.num_simulations", config.eval.num_simulations, allow_zero=True)
    positive("eval.batch_size", config.eval.batch_size)
    if config.eval.games % 2:
        raise ConfigError(f"eval.games must be even (each side moves first in half), got {config.eval.games}")
    validate_run(config.run)
    return config


def validate_run(run: RunSection) -> None:
    """The ``run`` section's checks (shared by every trainer's config)."""
    positive("run.iterations", run.iterations)
    positive("run.max_minutes", run.max_minutes, allow_zero=True)
    positive("run.checkpoint_every", run.checkpoint_every)
    positive("run.checkpoint_minutes", run.checkpoint_minutes, allow_zero=True)
    positive("run.keep_checkpoints", run.keep_checkpoints)
    if not run.dir:
        raise ConfigError("run.dir must be a directory path")


def config_path(name_or_path) -> pathlib.Path:
    """The config file a path or a built-in config's name (``5x5_cpu``) names; ConfigError listing the built-in
    configs when it is neither."""
    try:
        return package_data.config_file(name_or_path)
    except FileNotFoundError as error:
        raise ConfigError(str(error)) from None


def load_yaml(path) -> Any:
    """A YAML file as an OmegaConf layer; ConfigError naming the file if missing or malformed."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        return OmegaConf.load(path)
    except Exception as error:  # YAML syntax errors come in many types
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {error}") from None


def dotlist(overrides: Sequence[str]):
    """``key=value`` overrides as an OmegaConf layer; ConfigError for an item without ``=``."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. train.lr=3e-4)")
    return OmegaConf.from_dotlist(list(overrides))


def load_config(path=None, overrides: Sequence[str] = (), base: dict | None = None) -> TrainConfig:
    """Defaults <- ``base`` <- YAML file ``path`` (a path or a built-in config's name) <- ``overrides``
    (``key=value``). A removed option's key (``REMOVED_KEYS``) is left out where it holds its kept value.

    The chosen mode's preset goes in just before the last layer that names the mode: it overrides what
    earlier layers set, and the settings given with the mode (or after it) override the preset.
    ``eval.labelled_set`` and ``train.exact_labels`` come out as ``labelled_set_reference`` names them (ConfigError
    if there is no such set).
    """
    layers = [OmegaConf.create(base or {})]
    if path is not None:
        layers.append(load_yaml(config_path(path)))
    layers.append(dotlist(overrides))
    try:
        layers = [without_removed_keys(layer) for layer in layers]
        mode, mode_layer = TrainConfig.mode, 0
        for index, layer in enumerate(layers):
            if "mode" in layer:
                mode, mode_layer = layer["mode"], index
    except OmegaConfBaseException as error:
        raise _config_error(error) from None
    if mode not in MODE_PRESETS:
        raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
    ordered = layers[:mode_layer] + [OmegaConf.create(MODE_PRESETS[mode])] + layers[mode_layer:]
    config = validate(merge_structured(TrainConfig, ordered))
    if config.eval.labelled_set is not None:
        config.eval.labelled_set = labelled_set_reference(config.eval.labelled_set)
    if config.train.exact_labels is not None:
        config.train.exact_labels = labelled_set_reference(config.train.exact_labels, "train.exact_labels")
    return config


def labelled_set_reference(name_or_path: str, key: str = "eval.labelled_set") -> str:
    """A labelled set as a run's config keeps it (``key``: ``eval.labelled_set``, ``train.exact_labels``): a
    built-in set's name, else the file's absolute path (``package_data.labelled_set_reference``); ConfigError
    naming the key when there is no such set."""
    try:
        return package_data.labelled_set_reference(name_or_path)
    except FileNotFoundError as error:
        raise ConfigError(f"{key}: {error}") from None


def _config_error(error: OmegaConfBaseException) -> ConfigError:
    message = str(error).splitlines()[0]
    key = getattr(error, "full_key", None)
    return ConfigError(f"config key {key!r}: {message}" if key else f"config: {message}")


def merge_structured(schema: type, layers: Sequence[Any]):
    """``layers`` merged over the dataclass ``schema``'s defaults, as a ``schema`` instance. Unknown keys,
    values of the wrong type and values a section's own checks refuse raise ConfigError naming the key."""
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), *layers))
    except OmegaConfBaseException as error:
        raise _config_error(error) from None
    except ValueError as error:  # a section's construction-time check; its message names the key
        raise ConfigError(str(error)) from None


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(config))


def to_dict(config: TrainConfig) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(config))
