"""docs/configuration.md against the typed configs: every key of the BoxesZero/AlphaZero config
(``dabjax.training.config.TrainConfig``) and of the TD config (``dabjax.baselines.td_config.TDConfig``) is listed
with its type and default, and the reference names no key that does not exist. Reads the dataclasses only (no
jax computation)."""

import dataclasses
import pathlib
import re
import types
import typing

import pytest

from dabjax.baselines.td_config import TDConfig
from dabjax.training.config import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "configuration.md"
TD_HEADING = "## TD(lambda)"  # the reference's TD part starts at this heading; the BoxesZero part is above it
ROW = re.compile(r"^\| `([\w.]+)` \| ([^|]+?) \| `([^`]*)` \| (.*\S.*) \|$")


def type_name(hint) -> str:
    """A field's type as the reference writes it: ``int``, ``str or null``, ``list of str``,
    ``list of [int, float, float]``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [arg for arg in args if arg is not type(None)]
        return f"{type_name(inner)} or null"
    if origin in (list, tuple):
        if origin is tuple and args[-1] is not Ellipsis:
            return "[" + ", ".join(type_name(arg) for arg in args) + "]"
        return f"list of {type_name(args[0])}"
    return hint.__name__


def yaml_value(value) -> str:
    """A default as a YAML flow value: ``null``, ``true``, ``runs/default``, ``[level1, level2]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(item) for item in value) + "]"
    return str(value)


def typed_keys(config) -> dict[str, tuple[str, str]]:
    """``{"section.key": (type, default)}`` of a config instance built with its defaults (top-level keys such as
    ``mode`` without a section)."""
    keys = {}
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            section_hints = typing.get_type_hints(type(value))
            for inner in dataclasses.fields(value):
                keys[f"{field.name}.{inner.name}"] = (type_name(section_hints[inner.name]),
                                                      yaml_value(getattr(value, inner.name)))
        else:
            keys[field.name] = (type_name(hints[field.name]), yaml_value(value))
    return keys


def documented_keys(text: str) -> dict[str, tuple[str, str]]:
    """``{"section.key": (type, default)}`` of the reference rows in ``text``; a key listed twice fails."""
    keys = {}
    for line in text.splitlines():
        row = ROW.match(line)
        assert row or not line.startswith("| `"), f"docs/configuration.md: a key's row not of the table's form: {line}"
        if row:
            key, type_text, default, _meaning = row.groups()
            assert key not in keys, f"docs/configuration.md lists {key} twice in one part"
            keys[key] = (type_text.strip(), default)
    return keys


def reference_parts() -> tuple[dict, dict]:
    """The documented keys of the BoxesZero part and of the TD part."""
    text = REFERENCE.read_text()
    assert TD_HEADING in text, f"docs/configuration.md has no '{TD_HEADING}' heading"
    boxeszero, td = text.split(TD_HEADING, 1)
    return documented_keys(boxeszero), documented_keys(td)


def row(key: str, type_and_default: tuple[str, str]) -> str:
    return f"| `{key}` | {type_and_default[0]} | `{type_and_default[1]}` | ... |"


def compare(name: str, typed: dict, documented: dict, fallback: dict | None = None) -> list[str]:
    """What is wrong in the reference of one config: keys missing (with the row to add), keys of another type or
    default, keys that do not exist. A key missing from ``documented`` may be in ``fallback`` (the TD config's
    shared ``run`` and ``board`` keys stand in the BoxesZero part) with the same type and default."""
    problems = []
    missing = [key for key in typed if key not in documented and key not in (fallback or {})]
    if missing:
        problems.append(f"{name}: keys of the typed config missing from docs/configuration.md: {missing}; add\n"
                        + "\n".join(row(key, typed[key]) for key in missing))
    for key, expected in typed.items():
        found = documented.get(key, (fallback or {}).get(key))
        if found is not None and found != expected:
            problems.append(f"{name}: {key} is documented as {found} (type, default) but is {expected}")
    unknown = sorted(set(documented) - set(typed))
    if unknown:
        problems.append(f"{name}: docs/configuration.md names keys that do not exist: {unknown}")
    return problems


def test_the_reference_lists_every_key_of_the_boxeszero_config_with_its_type_and_default():
    boxeszero, _ = reference_parts()
    problems = compare("TrainConfig", typed_keys(TrainConfig()), boxeszero)
    assert not problems, "\n".join(problems)


def test_the_reference_lists_every_key_of_the_td_config_with_its_type_and_default():
    boxeszero, td = reference_parts()
    shared = {key: value for key, value in boxeszero.items() if key.split(".")[0] in ("run", "board")}
    problems = compare("TDConfig", typed_keys(TDConfig()), td, fallback=shared)
    assert not problems, "\n".join(problems)


def test_the_comparison_finds_a_missing_a_wrong_and_an_unknown_key():
    typed = {"train.lr": ("float", "0.001"), "train.epochs": ("int", "2")}
    documented = {"train.lr": ("float", "0.01"), "train.lrr": ("float", "0.001")}
    problems = "\n".join(compare("TrainConfig", typed, documented))
    assert "missing from docs/configuration.md: ['train.epochs']" in problems
    assert "| `train.epochs` | int | `2` | ... |" in problems
    assert "train.lr is documented as ('float', '0.01')" in problems
    assert "names keys that do not exist: ['train.lrr']" in problems


@pytest.mark.parametrize("hint, name", [(int, "int"), (typing.Optional[str], "str or null"),
                                        (typing.List[str], "list of str"), (tuple[int, ...], "list of int"),
                                        (tuple[tuple[int, float, float], ...], "list of [int, float, float]")])
def test_types_read_as_the_reference_writes_them(hint, name):
    assert type_name(hint) == name
