"""Typed, validated configuration of TD(lambda) training (seed 003), loaded from YAML with overrides.

``load_td_config(path, overrides)`` layers the defaults below, the YAML file and ``key=value`` overrides;
OmegaConf checks every key and type against the dataclasses (a misspelt key fails naming it), then
``validate`` checks ranges. The ``run`` and ``board`` sections are the BoxesZero trainer's
(``dabjax.config``); a TD config file says ``mode: td`` so that ``train.py`` sends it here.
"""

from __future__ import annotations

import dataclasses
from typing import List, Sequence

from omegaconf import OmegaConf

from dabjax import config as config_lib
from dabjax.config import BoardSection, ConfigError, RunSection
from dabjax.geometry import MAX_SIDE

OPPONENTS = ("level0", "random", "level1", "level2", "self")
ACTIVATIONS = ("sigmoid", "tanh", "relu")
OPTIMIZERS = ("sgd", "adam")
EVAL_OPPONENTS = ("random", "level0", "level1", "level2", "greedy")


@dataclasses.dataclass
class ValueNetSection:
    """The value network: an MLP on the flattened observation, ``tanh`` output in [-1, 1]."""

    hidden: List[int] = dataclasses.field(default_factory=lambda: [64])  # seed 003: one layer of 9..37
    activation: str = "sigmoid"  # seed 003's squashing function


@dataclasses.dataclass
class TDSection:
    lam: float = 0.7  # lambda of TD(lambda): 0 = TD(0), 1 = Monte Carlo returns
    opponent: str = "level0"  # level0 (= random) / level1 / level2, or self (self-play)
    epsilon: float = 0.05  # the learner's exploratory random moves (seed 003 suggests noise)
    games: int = 256  # games per iteration, played in lockstep with fixed parameters


@dataclasses.dataclass
class TDTrainSection:
    optimizer: str = "adam"  # adam, or sgd with momentum (seed 003: lr 0.1, momentum 0.4)
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
    network: ValueNetSection = dataclasses.field(default_factory=ValueNetSection)
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
    if not config.network.hidden or any(h < 1 for h in config.network.hidden):
        raise ConfigError(f"network.hidden must be a non-empty list of positive widths, got {config.network.hidden!r}")
    _one_of("network.activation", config.network.activation, ACTIVATIONS)
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
    """Defaults <- YAML file ``path`` <- ``overrides`` (``key=value``), checked and validated."""
    layers = [config_lib.load_yaml(path)] if path is not None else []
    layers.append(config_lib.dotlist(overrides))
    return validate(config_lib.merge_structured(TDConfig, layers))


def to_dict(config: TDConfig) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(config))
