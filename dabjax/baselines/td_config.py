"""Typed, validated configuration of TD(lambda) training (Kabir, "Artificial Intelligence on 'Dots & Boxes'
Game", 2004), loaded from YAML with overrides.

``load_td_config(path, overrides)`` layers the defaults below, the YAML file and ``key=value`` overrides;
OmegaConf checks every key and type against the dataclasses (a misspelt key fails naming it), the
``network`` section checks itself when built, then ``validate`` checks ranges. The ``network`` section is
the value network's own settings (``ValueNetConfig``, which ``dabjax.baselines.td`` builds the network
from); the ``run`` and ``board`` sections are the BoxesZero trainer's (``dabjax.training.config``); a TD
config file says ``mode: td`` so that ``train.py`` sends it here.
"""

from __future__ import annotations

import dataclasses
from typing import List, Sequence

from omegaconf import OmegaConf

from dabjax.game.geometry import MAX_SIDE
from dabjax.training import config as config_lib
from dabjax.training.config import BoardSection, ConfigError, RunSection

OPPONENTS = ("level0", "random", "level1", "level2", "self")
ACTIVATIONS = ("sigmoid", "tanh", "relu")
OPTIMIZERS = ("sgd", "adam")
EVAL_OPPONENTS = ("random", "level0", "level1", "level2", "greedy")


@dataclasses.dataclass(frozen=True)
class ValueNetConfig:
    """The value network, an MLP on the flattened observation with a ``tanh`` output in [-1, 1]: ``hidden``,
    the widths of its hidden layers; ``activation``, theirs. The ``network`` section of a TD config and the
    one place its defaults live; frozen, so hashable (a jit static argument), and validated at construction.
    """

    hidden: tuple[int, ...] = (64,)  # Kabir (2004): one hidden layer of 9 to 37 units
    activation: str = "sigmoid"  # Kabir's squashing function

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(self.hidden))  # checkpoint metadata gives a list
        if not self.hidden or any(not isinstance(h, int) or h < 1 for h in self.hidden):
            raise ValueError(f"network.hidden must be a non-empty list of positive widths, got {list(self.hidden)!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"network.activation must be one of {ACTIVATIONS}, got {self.activation!r}")


@dataclasses.dataclass
class TDSection:
    lam: float = 0.7  # lambda of TD(lambda): 0 = TD(0), 1 = Monte Carlo returns
    opponent: str = "level0"  # level0 (= random) / level1 / level2, or self (self-play)
    epsilon: float = 0.05  # the learner's exploratory random moves (Kabir suggests noise)
    games: int = 256  # games per iteration, played in lockstep with fixed parameters


@dataclasses.dataclass
class TDTrainSection:
    optimizer: str = "adam"  # adam, or sgd with momentum (Kabir: lr 0.1, momentum 0.4)
    lr: float = 3e-3
    momentum: float = 0.4  # sgd only
    updates_per_iteration: int = 1  # gradient steps on each batch of games


@dataclasses.dataclass
class TDEvalSection:
    every: int = 20  # iterations; 0 = never
    games: int = 200  # per opponent, each side first in half
    opponents: List[str] = dataclasses.field(default_factory=lambda: ["level0", "level1", "level2"])


@dataclasses.dataclass
class TDConfig:
    mode: str = "td"
    run: RunSection = dataclasses.field(default_factory=lambda: RunSection(dir="runs/td", checkpoint_every=50))
    board: BoardSection = dataclasses.field(default_factory=BoardSection)
    network: ValueNetConfig = dataclasses.field(default_factory=ValueNetConfig)
    td: TDSection = dataclasses.field(default_factory=TDSection)
    train: TDTrainSection = dataclasses.field(default_factory=TDTrainSection)
    eval: TDEvalSection = dataclasses.field(default_factory=TDEvalSection)


def _in_unit(name: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise ConfigError(f"{name} must be in [0, 1], got {value!r}")


def _one_of(name: str, value, choices) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {choices}, got {value!r}")


def validate(config: TDConfig) -> TDConfig:
    """Checks ranges; raises ConfigError naming the key. Returns the config."""
    positive = config_lib.positive  # the BoxesZero config's range check (same messages)
    _one_of("mode", config.mode, ("td",))
    for name in ("rows", "cols"):
        value = getattr(config.board, name)
        if not 1 <= value <= MAX_SIDE:
            raise ConfigError(f"board.{name} must be in 1..{MAX_SIDE} (boxes), got {value!r}")
    _in_unit("td.lam", config.td.lam)
    _in_unit("td.epsilon", config.td.epsilon)
    _one_of("td.opponent", config.td.opponent, OPPONENTS)
    positive("td.games", config.td.games)
    if config.td.games % 2:
        raise ConfigError(f"td.games must be even (the learner takes each seat in half), got {config.td.games}")
    _one_of("train.optimizer", config.train.optimizer, OPTIMIZERS)
    positive("train.lr", config.train.lr)
    _in_unit("train.momentum", config.train.momentum)
    positive("train.updates_per_iteration", config.train.updates_per_iteration)
    positive("eval.every", config.eval.every, allow_zero=True)
    positive("eval.games", config.eval.games)
    if config.eval.games % 2:
        raise ConfigError(f"eval.games must be even (each side moves first in half), got {config.eval.games}")
    for opponent in config.eval.opponents:
        _one_of("eval.opponents", opponent, EVAL_OPPONENTS)
    config_lib.validate_run(config.run)
    return config


def load_td_config(path=None, overrides: Sequence[str] = ()) -> TDConfig:
    """Defaults <- YAML file ``path`` (a path or a built-in config's name) <- ``overrides`` (``key=value``), checked
    and validated."""
    layers = [config_lib.load_yaml(config_lib.config_path(path))] if path is not None else []
    layers.append(config_lib.dotlist(overrides))
    return validate(config_lib.merge_structured(TDConfig, layers))


def to_dict(config: TDConfig) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(config))
