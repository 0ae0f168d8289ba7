"""Checkpoints of a training run, with orbax: resume-or-start, last-k kept, verified, loadable for play.

Layout: ``RUN/checkpoints/<iteration>/`` holds three orbax items:

* ``params``: the network's flax variables (enough to play);
* ``trainer``: the rest of the trainer state (optimiser state, replay buffer, curriculum, PRNG key, ...);
* ``meta``: JSON: format version, board size, mode, network and search settings, iteration, wall time
  spent training, and the whole resolved config;

and ``dabjax-manifest.json``, written once orbax has finished the save: the size and SHA-256 of every file.

Orbax writes each checkpoint into a temporary directory (``<iteration>.orbax-checkpoint-tmp``) and renames it
when complete, so a run killed in the middle of a save leaves the previous checkpoint intact; opening a
``CheckpointStore`` removes such unfinished saves. A checkpoint is *verified* before it is trusted: its files
against its manifest (sizes and checksums of the items about to be read), or, for a checkpoint without a
manifest (saved by an older dabjax, or by a run killed between the save and its manifest), a trial restore.
Opening a store sets a damaged newest checkpoint aside, in ``checkpoints/damaged/<iteration>-<time>/`` (out of
orbax's sight, never deleted), until the newest is intact; loading one for play is an error naming it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import time
from typing import Any

import jax
import orbax.checkpoint as ocp

from dabjax.game import env as env_lib
from dabjax.search import mcts, network

# Bumped when the settings saved with a checkpoint lose a key or change meaning: a checkpoint of another version
# fails to load, naming both versions, instead of playing with settings this dabjax reads differently.
FORMAT_VERSION = 2
CHECKPOINT_DIR = "checkpoints"
DAMAGED_DIR = "damaged"  # RUN/checkpoints/damaged/<iteration>-<time>/: damaged checkpoints, kept aside
MANIFEST_FILE = "dabjax-manifest.json"
MANIFEST_VERSION = 1
ITEMS = ("params", "trainer", "meta")  # every item: what resuming reads
PLAY_ITEMS = ("params", "meta")  # what playing reads
UNFINISHED_SAVE = re.compile(r"\d+\.orbax-checkpoint-tmp(-\d+)?")  # orbax's temporary name for a step's save


@dataclasses.dataclass(frozen=True)
class PlayableCheckpoint:
    """What an agent needs from a checkpoint: its network, its search, and the rule it was trained with (an
    agent plays by it: ``env``)."""

    rows: int
    cols: int
    network_config: network.NetworkConfig
    search_config: mcts.SearchConfig
    params: Any
    iteration: int
    wall_time: float
    meta: dict
    early_termination: bool = False  # the majority rule of the board it was trained on

    @property
    def env(self) -> env_lib.Env:
        """The environment it was trained in: its board and rule."""
        return env_lib.Env(self.rows, self.cols, self.early_termination)


class DamagedCheckpointError(ValueError):
    """A checkpoint whose files are not what its save wrote (or that orbax cannot read)."""

    def __init__(self, path: pathlib.Path, problem: str, advice: str = ""):
        self.path, self.problem = pathlib.Path(path), problem
        super().__init__(f"checkpoint {path} is damaged: {problem}" + (f". {advice}" if advice else ""))


@dataclasses.dataclass(frozen=True)
class SetAside:
    """A damaged checkpoint moved out of orbax's sight when a store was opened."""

    iteration: int
    path: pathlib.Path  # where it was
    kept_as: pathlib.Path  # where it is now
    problem: str


def checkpoint_root(run_dir) -> pathlib.Path:
    return pathlib.Path(run_dir) / CHECKPOINT_DIR


def saved_iterations(root: pathlib.Path) -> list[int]:
    """The iterations of the finished checkpoints in ``root`` (orbax's step directories), oldest first."""
    if not root.is_dir():
        return []
    return sorted(int(entry.name) for entry in root.iterdir() if entry.name.isdigit() and entry.is_dir())


# --- verification -----------------------------------------------------------------------------------------


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _files(step_dir: pathlib.Path) -> list[str]:
    """The checkpoint's files, relative to its directory (the manifest excluded)."""
    found = (path.relative_to(step_dir).as_posix() for path in step_dir.rglob("*") if path.is_file())
    return sorted(name for name in found if not name.startswith(MANIFEST_FILE))


def write_manifest(step_dir) -> None:
    """Writes the manifest of a finished checkpoint: every file's size and SHA-256 (written to a temporary
    file and renamed, so a manifest is whole or absent)."""
    step_dir = pathlib.Path(step_dir)
    files = {name: {"bytes": (step_dir / name).stat().st_size, "sha256": _sha256(step_dir / name)}
             for name in _files(step_dir)}
    temporary = step_dir / (MANIFEST_FILE + ".tmp")
    temporary.write_text(json.dumps({"version": MANIFEST_VERSION, "files": files}, indent=1))
    os.replace(temporary, step_dir / MANIFEST_FILE)


def _of_items(name: str, items) -> bool:
    """Whether a checkpoint file belongs to ``items`` (top-level files belong to every item)."""
    return "/" not in name or name.split("/", 1)[0] in items


def _manifest_problems(step_dir: pathlib.Path, listed: dict, items) -> list[str]:
    problems = []
    for name, expected in sorted(listed.items()):
        if not _of_items(name, items):
            continue
        path = step_dir / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif (size := path.stat().st_size) != expected["bytes"]:
            cut = " (cut short?)" if size < expected["bytes"] else ""
            problems.append(f"{name} has {size} bytes, {expected['bytes']} when saved{cut}")
        elif _sha256(path) != expected["sha256"]:
            problems.append(f"{name} differs from what was saved (its SHA-256 has changed)")
    missing_items = [item for item in items if not any(name.startswith(item + "/") for name in listed)]
    if missing_items:
        problems.append(f"the manifest lists no files of {', '.join(missing_items)}")
    return problems


def _restore_items(step_dir: pathlib.Path, **args) -> dict:
    """Restores the named items of one checkpoint directory (e.g. ``params=ocp.args.StandardRestore()``)."""
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        return checkpointer.restore(step_dir, args=ocp.args.Composite(**args))


def _unreadable(error: Exception) -> str:
    return f"orbax cannot read it ({type(error).__name__}: {error})"


def _untargeted(item: str):
    return ocp.args.JsonRestore() if item == "meta" else ocp.args.StandardRestore()


def checkpoint_problem(step_dir, items=ITEMS) -> str | None:
    """What is wrong with the files of ``items`` in a checkpoint directory, or None when they are intact.

    With a manifest: a file missing, of another size, or with another checksum than when it was saved (cost:
    reading the items' files once). Without one: a restore of the items must succeed.
    """
    step_dir = pathlib.Path(step_dir)
    manifest = step_dir / MANIFEST_FILE
    if manifest.is_file():
        try:
            listed = json.loads(manifest.read_bytes().decode("utf-8"))["files"]
            problems = _manifest_problems(step_dir, listed, items)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
            return f"its manifest {MANIFEST_FILE} is unreadable ({type(error).__name__}: {error})"
        if problems:
            more = f" (and {len(problems) - 1} more damaged files)" if len(problems) > 1 else ""
            return problems[0] + more
        return None
    try:
        _restore_items(step_dir, **{item: _untargeted(item) for item in items})
    except Exception as error:  # any failure to read it: the reason is in the message
        return _unreadable(error)
    return None


def verify_checkpoint(step_dir, items=ITEMS, advice: str = "") -> None:
    """Raises DamagedCheckpointError naming the directory and what is wrong, unless ``items`` are intact."""
    problem = checkpoint_problem(step_dir, items)
    if problem is not None:
        raise DamagedCheckpointError(pathlib.Path(step_dir), problem, advice)


def set_aside(step_dir: pathlib.Path) -> pathlib.Path:
    """Moves a damaged checkpoint directory to ``damaged/<iteration>-<time>`` beside it; returns the new path."""
    damaged = step_dir.parent / DAMAGED_DIR
    damaged.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = damaged / f"{step_dir.name}-{stamp}", 1
    while target.exists():
        n += 1
        target = damaged / f"{step_dir.name}-{stamp}-{n}"
    step_dir.rename(target)
    return target


def damaged_checkpoints(run_dir) -> list[pathlib.Path]:
    """The checkpoints of a run that were set aside as damaged."""
    damaged = checkpoint_root(run_dir) / DAMAGED_DIR
    return sorted(damaged.iterdir()) if damaged.is_dir() else []


def remove_unfinished_saves(root: pathlib.Path) -> list[pathlib.Path]:
    """Removes orbax's temporary directories of saves that never finished (``<iteration>.orbax-checkpoint-tmp``,
    directly in ``root``); returns their paths."""
    if not root.is_dir():
        return []
    unfinished = [entry for entry in sorted(root.iterdir())
                  if UNFINISHED_SAVE.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink()]
    for entry in unfinished:
        shutil.rmtree(entry)
    return unfinished


def _primary() -> bool:
    return jax.process_index() == 0


def _wait_for_every_process(what: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(what)


# --- the store of a training run --------------------------------------------------------------------------


def _manager(directory: pathlib.Path, keep: int | None = None) -> ocp.CheckpointManager:
    # The store removes unfinished saves itself (orbax would, in a background thread, at the first save).
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        create=True,
        cleanup_tmp_directories=False,
        enable_async_checkpointing=False,  # a save returns only when it is on disk
    )
    return ocp.CheckpointManager(directory, options=options, item_names=ITEMS)


class CheckpointStore:
    """Saves and restores one run's checkpoints (the last ``keep`` are kept).

    Opening it removes unfinished saves (``removed_unfinished``) and verifies the checkpoints newest first:
    each damaged one is moved to ``checkpoints/damaged/`` (``set_aside``) until the newest left is intact, so
    ``latest_iteration()`` is the newest intact checkpoint. Only process 0 removes and moves files.
    """

    def __init__(self, run_dir, keep: int = 3):
        self.directory = checkpoint_root(run_dir).absolute()
        primary = _primary()
        self.removed_unfinished = remove_unfinished_saves(self.directory) if primary else []
        self.set_aside: list[SetAside] = []
        for iteration in reversed(saved_iterations(self.directory)):
            step_dir = self.directory / str(iteration)
            problem = checkpoint_problem(step_dir)
            if problem is None:
                break
            kept_as = set_aside(step_dir) if primary else step_dir
            self.set_aside.append(SetAside(iteration, step_dir, kept_as, problem))
        _wait_for_every_process("dabjax: checkpoints verified")
        self._manager = _manager(self.directory, keep=keep)

    def latest_iteration(self) -> int | None:
        return self._manager.latest_step()

    def iterations(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, iteration: int, params, trainer_state, meta: dict) -> None:
        meta = dict(meta, format_version=FORMAT_VERSION, iteration=int(iteration))
        self._manager.save(
            int(iteration),
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                trainer=ocp.args.StandardSave(trainer_state),
                meta=ocp.args.JsonSave(meta),
            ),
        )
        self._manager.wait_until_finished()
        if _primary():
            write_manifest(self.directory / str(int(iteration)))

    def read_meta(self, iteration: int) -> dict:
        restored = self._manager.restore(iteration, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return _checked_meta(restored["meta"], self.directory / str(iteration))

    def restore(self, iteration: int, params_target, trainer_target) -> tuple[Any, Any, dict]:
        """Restores into the structure (and shapes) of the targets; raises ValueError if they differ."""
        abstract = lambda tree: jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, tree)
        try:
            restored = self._manager.restore(
                iteration,
                args=ocp.args.Composite(
                    params=ocp.args.StandardRestore(abstract(params_target)),
                    trainer=ocp.args.StandardRestore(abstract(trainer_target)),
                    meta=ocp.args.JsonRestore(),
                ),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"checkpoint {self.directory / str(iteration)} does not match this configuration "
                f"(board, network or buffer size differ?): {error}"
            ) from None
        meta = _checked_meta(restored["meta"], self.directory / str(iteration))
        return restored["params"], restored["trainer"], meta

    def close(self) -> None:
        self._manager.close()


def _checked_meta(meta: dict, where) -> dict:
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        found = meta.get("format_version") if isinstance(meta, dict) else None
        raise ValueError(f"checkpoint {where}: format version {found!r}, this dabjax reads {FORMAT_VERSION} "
                         "(its settings are not this dabjax's: play or resume it with the dabjax that wrote it)")
    return meta


def check_compatible(meta: dict, rows: int, cols: int, network_config: network.NetworkConfig, where) -> None:
    """Raises ValueError when a checkpoint was made for another board or network."""
    if (meta["rows"], meta["cols"]) != (rows, cols):
        raise ValueError(
            f"checkpoint {where} is for a {meta['rows']}x{meta['cols']} board, but the config asks for "
            f"{rows}x{cols}; use another run directory"
        )
    saved = network.config_from_saved(meta["network"])
    if not network.same_parameters(saved, network_config):
        raise ValueError(
            f"checkpoint {where} has network {saved}, but the config asks for {network_config}; "
            "use another run directory"
        )


def _resolve(path) -> tuple[pathlib.Path, int | None]:
    """``(checkpoint root, iteration or None for the latest)`` from a run dir or a checkpoint dir."""
    path = pathlib.Path(path).absolute()
    if not path.exists():
        raise FileNotFoundError(f"checkpoint path {str(path)!r} does not exist")
    if (path / CHECKPOINT_DIR).is_dir():
        return path / CHECKPOINT_DIR, None
    if path.name.isdigit() and path.parent.is_dir():
        return path.parent, int(path.name)
    if path.name == CHECKPOINT_DIR:
        return path, None
    raise FileNotFoundError(
        f"{str(path)!r} is neither a run directory (with {CHECKPOINT_DIR}/) nor a checkpoint directory "
        f"({CHECKPOINT_DIR}/<iteration>)"
    )


def _newest_for_reading(root: pathlib.Path) -> tuple[int, dict]:
    """The newest checkpoint in ``root`` and its params and meta; DamagedCheckpointError when it is damaged,
    naming the newest intact one if there is one."""
    iterations = saved_iterations(root)
    if not iterations:
        set_aside = f" (damaged ones are kept in {root / DAMAGED_DIR})" if damaged_checkpoints(root.parent) else ""
        raise FileNotFoundError(f"no checkpoint in {str(root)!r}{set_aside}")
    try:
        return iterations[-1], read_items(root / str(iterations[-1]), PLAY_ITEMS)
    except DamagedCheckpointError as error:
        intact = next((i for i in reversed(iterations[:-1]) if checkpoint_problem(root / str(i), PLAY_ITEMS) is None),
                      None)
        if intact is None:
            advice = f"No checkpoint in {root} is intact"
        else:
            advice = (f"The newest intact one is {root / str(intact)}: name it to load it, or run train.py on the "
                      "run, which sets damaged checkpoints aside")
        raise DamagedCheckpointError(error.path, error.problem, advice) from None


def read_items(step_dir: pathlib.Path, items=PLAY_ITEMS) -> dict:
    """The named items of one checkpoint directory (untargeted restores), verified against its manifest first;
    DamagedCheckpointError naming the directory and what is wrong."""
    if (step_dir / MANIFEST_FILE).is_file():
        verify_checkpoint(step_dir, items)
    try:
        return _restore_items(step_dir, **{item: _untargeted(item) for item in items})
    except Exception as error:  # any failure to read it: the reason is in the message
        raise DamagedCheckpointError(step_dir, _unreadable(error)) from None


def list_checkpoints(run_dir) -> list[tuple[int, pathlib.Path, float]]:
    """``[(iteration, path, wall_time seconds)]`` of a run, oldest first; DamagedCheckpointError for a
    checkpoint whose meta is damaged."""
    root, _ = _resolve(run_dir)
    found = []
    for iteration in saved_iterations(root):
        step_dir = root / str(iteration)
        try:
            meta = read_items(step_dir, ("meta",))["meta"]
        except DamagedCheckpointError as error:
            advice = f"Move it out of {root} (e.g. into {root / DAMAGED_DIR}) to go on without it"
            raise DamagedCheckpointError(error.path, error.problem, advice) from None
        found.append((iteration, step_dir, float(meta.get("wall_time", 0.0))))
    return found


def read_checkpoint(path) -> tuple[Any, dict, int]:
    """``(params, meta, iteration)`` of any dabjax checkpoint (BoxesZero, AlphaZero or TD): ``path`` is a
    run directory (its newest checkpoint) or ``RUN/checkpoints/<iteration>``. Raises FileNotFoundError
    naming the path, DamagedCheckpointError (a ValueError) naming the damaged checkpoint and what is wrong,
    ValueError for another format version."""
    root, iteration = _resolve(path)
    if iteration is None:
        iteration, restored = _newest_for_reading(root)
    elif iteration not in saved_iterations(root):
        raise FileNotFoundError(f"no checkpoint {iteration} in {str(root)!r}")
    else:
        restored = read_items(root / str(iteration), PLAY_ITEMS)
    return restored["params"], _checked_meta(restored["meta"], root / str(iteration)), int(iteration)


def load_for_play(path) -> PlayableCheckpoint:
    """The parameters and settings of a checkpoint: ``path`` is a run dir (latest) or ``.../checkpoints/N``."""
    params, meta, iteration = read_checkpoint(path)
    method = meta.get("method", "boxeszero")
    if method == "td":
        raise ValueError(f"{str(path)!r} is a TD run; use td:PATH")
    if method != "boxeszero" or "search" not in meta:
        raise ValueError(f"{str(path)!r} holds a {method!r} checkpoint, not a BoxesZero/AlphaZero one")
    return playable(params, meta, iteration, float(meta.get("wall_time", 0.0)))


def playable(params, meta: dict, iteration: int, wall_time: float) -> PlayableCheckpoint:
    """A ``PlayableCheckpoint`` from parameters and the settings saved with them (``rows``, ``cols``,
    ``network``, ``search``: a checkpoint's metadata, or a pretrained agent's description)."""
    return PlayableCheckpoint(
        rows=int(meta["rows"]),
        cols=int(meta["cols"]),
        network_config=network.config_from_saved(meta["network"]),
        search_config=mcts.config_from_saved(meta["search"]),
        params=params,
        iteration=int(iteration),
        wall_time=float(wall_time),
        meta=meta,
        early_termination=mcts.rule_from_saved(meta["search"]),
    )
