"""Checkpoints of a training run, with orbax: resume-or-start, last-k kept, loadable for play.

Layout: ``RUN/checkpoints/<iteration>/`` holds three orbax items:

* ``params``: the network's flax variables (enough to play);
* ``trainer``: the rest of the trainer state (optimiser state, replay buffer, curriculum, PRNG key, ...);
* ``meta``: JSON: format version, board size, mode, network and search settings, iteration, wall time
  spent training, and the whole resolved config.

Orbax writes each checkpoint into a temporary directory and renames it when complete, so a run killed in
the middle of a save leaves the previous checkpoint intact (the unfinished one is ignored and removed).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import jax
import orbax.checkpoint as ocp

from dabjax import network, search

FORMAT_VERSION = 1
CHECKPOINT_DIR = "checkpoints"


@dataclasses.dataclass(frozen=True)
class PlayableCheckpoint:
    """What an agent needs from a checkpoint."""

    rows: int
    cols: int
    network_config: network.NetworkConfig
    search_config: search.SearchConfig
    params: Any
    iteration: int
    wall_time: float
    meta: dict


def checkpoint_root(run_dir) -> pathlib.Path:
    return pathlib.Path(run_dir) / CHECKPOINT_DIR


def _manager(directory: pathlib.Path, keep: int | None = None, read_only: bool = False) -> ocp.CheckpointManager:
    # Readers open with create=False rather than read_only=True, which only adds absl warnings.
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        create=not read_only,
        cleanup_tmp_directories=not read_only,
        enable_async_checkpointing=False,  # a save returns only when it is on disk
    )
    return ocp.CheckpointManager(directory, options=options, item_names=("params", "trainer", "meta"))


class CheckpointStore:
    """Saves and restores one run's checkpoints (the last ``keep`` are kept)."""

    def __init__(self, run_dir, keep: int = 3):
        self.directory = checkpoint_root(run_dir).absolute()
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
        raise ValueError(f"checkpoint {where}: format version {found!r}, this dabjax reads {FORMAT_VERSION}")
    return meta


def check_compatible(meta: dict, rows: int, cols: int, network_config: network.NetworkConfig, where) -> None:
    """Raises ValueError when a checkpoint was made for another board or network."""
    if (meta["rows"], meta["cols"]) != (rows, cols):
        raise ValueError(
            f"checkpoint {where} is for a {meta['rows']}x{meta['cols']} board, but the config asks for "
            f"{rows}x{cols}; use another run directory"
        )
    saved = network.config_from_saved(meta["network"])
    if saved != network_config:
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


def list_checkpoints(run_dir) -> list[tuple[int, pathlib.Path, float]]:
    """``[(iteration, path, wall_time seconds)]`` of a run, oldest first."""
    root, _ = _resolve(run_dir)
    manager = _manager(root, read_only=True)
    found = []
    for iteration in sorted(manager.all_steps()):
        meta = manager.restore(iteration, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        found.append((iteration, root / str(iteration), float(meta.get("wall_time", 0.0))))
    manager.close()
    return found


def read_checkpoint(path) -> tuple[Any, dict, int]:
    """``(params, meta, iteration)`` of any dabjax checkpoint (BoxesZero, AlphaZero or TD): ``path`` is a
    run directory (its latest checkpoint) or ``RUN/checkpoints/<iteration>``. Raises FileNotFoundError
    naming the path, ValueError for another format version."""
    root, iteration = _resolve(path)
    manager = _manager(root, read_only=True)
    try:
        if iteration is None:
            iteration = manager.latest_step()
            if iteration is None:
                raise FileNotFoundError(f"no checkpoint in {str(root)!r}")
        elif iteration not in manager.all_steps():
            raise FileNotFoundError(f"no checkpoint {iteration} in {str(root)!r}")
        restored = manager.restore(
            iteration,
            args=ocp.args.Composite(params=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()),
        )
    finally:
        manager.close()
    return restored["params"], _checked_meta(restored["meta"], root / str(iteration)), int(iteration)


def load_for_play(path) -> PlayableCheckpoint:
    """The parameters and settings of a checkpoint: ``path`` is a run dir (latest) or ``.../checkpoints/N``."""
    params, meta, iteration = read_checkpoint(path)
    method = meta.get("method", "boxeszero")
    if method == "td":
        raise ValueError(f"{str(path)!r} is a TD run; use td:PATH")
    if method != "boxeszero" or "search" not in meta:
        raise ValueError(f"{str(path)!r} holds a {method!r} checkpoint, not a BoxesZero/AlphaZero one")
    return PlayableCheckpoint(
        rows=int(meta["rows"]),
        cols=int(meta["cols"]),
        network_config=network.config_from_saved(meta["network"]),
        search_config=search.SearchConfig(**meta["search"]),
        params=params,
        iteration=iteration,
        wall_time=float(meta.get("wall_time", 0.0)),
        meta=meta,
    )
