"""The files shipped inside the package, by name: the built-in configs and sweeps (package ``dabjax.configs``: the
clone's ``configs/``) and the solver-labelled position sets (package ``dabjax.data``: the clone's ``data/``).

A built-in's name is its file's stem: ``5x5_cpu`` is ``configs/5x5_cpu.yaml``, ``3x3_ablation`` is
``configs/sweeps/3x3_ablation.yaml`` and ``5x5`` is ``data/5x5.npz``. Where a file is asked for, a path that exists
wins; otherwise a name, or a clone path such as ``configs/5x5_cpu.yaml`` or ``data/5x5.npz`` given where no such
file is (an installed package, another folder), is the built-in file. Any other missing path is an error naming
the built-ins. This module reads the package through ``importlib.resources`` (or, when the install does not
provide the package, the clone's folder itself) and imports nothing of dabjax.
"""

from __future__ import annotations

import importlib.resources
import pathlib

CONFIGS_PACKAGE = "dabjax.configs"
SETS_PACKAGE = "dabjax.data"
SWEEPS_FOLDER = "sweeps"  # dabjax.configs/sweeps/*.yaml
# The folders the built-ins live in in a clone: a missing path under one of them falls back to the built-in.
CLONE_FOLDERS = {".yaml": ("configs", f"configs/{SWEEPS_FOLDER}"), ".npz": ("data",)}
# Where a package lives in the clone, for an install that does not provide it.
CLONE_ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_CLONE_FOLDERS = {CONFIGS_PACKAGE: "configs", SETS_PACKAGE: "data"}


def _folder(package: str) -> pathlib.Path:
    # pip unpacks a wheel, and an editable install maps the package onto the clone's folder: a real directory.
    try:
        return pathlib.Path(str(importlib.resources.files(package)))
    except ModuleNotFoundError:
        # An editable install made before pyproject.toml mapped these packages, or a clone run uninstalled.
        clone_folder = CLONE_ROOT / PACKAGE_CLONE_FOLDERS[package]
        if clone_folder.is_dir():
            return clone_folder
        raise FileNotFoundError(f"package {package} is not installed and there is no {clone_folder}: reinstall "
                                "dabjax (pip install -e . in a clone)") from None


def _by_stem(folder: pathlib.Path, suffix: str) -> dict[str, pathlib.Path]:
    return {path.stem: path for path in sorted(folder.glob(f"*{suffix}"))} if folder.is_dir() else {}


def builtin_configs() -> dict[str, pathlib.Path]:
    """``{name: path}`` of the built-in training configs, sorted by name."""
    return _by_stem(_folder(CONFIGS_PACKAGE), ".yaml")


def builtin_sweeps() -> dict[str, pathlib.Path]:
    """``{name: path}`` of the built-in sweep files, sorted by name."""
    return _by_stem(_folder(CONFIGS_PACKAGE) / SWEEPS_FOLDER, ".yaml")


def builtin_sets() -> dict[str, pathlib.Path]:
    """``{name: path}`` of the built-in labelled position sets, sorted by name."""
    return _by_stem(_folder(SETS_PACKAGE), ".npz")


def purpose(path, width: int = 100) -> str:
    """A YAML file's purpose in one line: the first sentence of its opening comment, cut to ``width`` characters
    at a word (empty when the file opens with no comment)."""
    words = []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        words += line.lstrip("#").split()
    text = " ".join(words)
    end = next((i + 1 for i, char in enumerate(text) if char == "." and text[i + 1:i + 2] in (" ", "")), len(text))
    text = text[:end]
    return text if len(text) <= width else text[:width - 3].rsplit(" ", 1)[0] + "..."


def _builtin_name(text: str, suffix: str) -> str | None:
    """The built-in name ``text`` stands for when it is no file: a bare name (with or without ``suffix``) or a
    relative path into the clone's folder for such files; None for any other path."""
    path = pathlib.PurePosixPath(text.replace("\\", "/"))
    if path.suffix not in ("", suffix) or path.is_absolute():
        return None
    folder = str(path.parent)
    return path.stem if folder == "." or folder in CLONE_FOLDERS[suffix] else None


def _resolve(text, builtins: dict[str, pathlib.Path], suffix: str, what: str) -> pathlib.Path:
    path = pathlib.Path(str(text)).expanduser()
    if path.is_file():
        return path
    name = _builtin_name(str(text), suffix)
    if name in builtins:
        return builtins[name]
    raise FileNotFoundError(f"{what} {str(text)!r} does not exist, nor is it a built-in one's name "
                            f"(built-in: {', '.join(builtins) or 'none'})")


def builtin_config(text) -> pathlib.Path | None:
    """The built-in config ``text`` names (``3x3``, ``3x3.yaml`` or the clone path ``configs/3x3.yaml``), None
    when it names none. No file of that path is looked for: ``config_file`` prefers one."""
    return builtin_configs().get(_builtin_name(str(text), ".yaml"))


def config_file(text) -> pathlib.Path:
    """The config file ``text`` names: a path, or a built-in config's name. FileNotFoundError otherwise."""
    return _resolve(text, builtin_configs(), ".yaml", "config file")


def sweep_file(text) -> pathlib.Path:
    """The sweep file ``text`` names: a path, or a built-in sweep's name. FileNotFoundError otherwise."""
    return _resolve(text, builtin_sweeps(), ".yaml", "sweep file")


def labelled_set_file(text) -> pathlib.Path:
    """The labelled set ``text`` names: a ``.npz`` path, or a built-in set's name (``5x5``). FileNotFoundError
    otherwise."""
    return _resolve(text, builtin_sets(), ".npz", "labelled set")


def labelled_set_reference(text) -> str:
    """How a run's saved config names the labelled set ``text`` so that it resolves from any folder and any
    install: the built-in's name when ``text`` is a built-in set (by name, by its clone path, or the very file),
    else the file's absolute path. FileNotFoundError when it is neither."""
    path = labelled_set_file(text)
    for name, builtin in builtin_sets().items():
        if builtin.exists() and path.resolve() == builtin.resolve():
            return name
    return str(path.resolve())
