"""Pretrained agents: ``pretrained:RxC[:SIMS]`` in ``evaluate.py`` and the library.

They live in two places, both read by name:

* the user's folder (``user_folder()``: ``$DABJAX_AGENTS``, else ``$XDG_DATA_HOME/dabjax/agents``, else
  ``~/.local/share/dabjax/agents``), where ``dabjax pretrained export RUN`` writes;
* the package's folder ``dabjax/pretrained/`` (``shipped_folder()``), the agents shipped with dabjax.

The user's folder comes first: an agent exported for a board plays as ``pretrained:RxC`` in place of the shipped
one of that board (``dabjax pretrained list`` says which is whose); emptying its folder brings the shipped one back.

Each board with a pretrained agent has a folder ``<R>x<C>/`` in one of them holding

* ``params.msgpack``: the network parameters (``flax.serialization.msgpack_serialize`` of the parameter tree);
* ``agent.json``: ``format_version``, ``rows``, ``cols``, the ``network`` and ``search`` settings (as in a
  checkpoint's metadata) and ``source`` (how it was trained: config, training minutes, iteration, commit).

``load_pretrained("4x4")`` returns the same ``PlayableCheckpoint`` as a checkpoint loaded for play, so every
checkpoint agent's code path (search at the saved or a chosen number of simulations, the raw policy at 0)
serves pretrained agents too.

``dabjax/pretrained/supervised/<R>x<C>/`` holds, in the same format, the warm starts the built-in configs start
from (``run.init_from: supervised:4x4``): networks trained on exact labels only, before any self-play
(``dabjax pretrain`` makes others; its ``agent.json`` says how the shipped one was made). They are not listed as
pretrained agents.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import os
import pathlib
import site
import sysconfig

from flax import serialization

from dabjax.search import mcts, network
from dabjax.training import checkpoint
from dabjax.training.checkpoint import PlayableCheckpoint

FORMAT_VERSION = 2  # of agent.json; bumped with checkpoint.FORMAT_VERSION, for the same reason
PARAMS_FILE = "params.msgpack"
AGENT_FILE = "agent.json"
SUPERVISED = "supervised"  # the sub-folder of the shipped warm starts
AGENTS_VARIABLE = "DABJAX_AGENTS"  # the user's folder of agents, in place of ~/.local/share/dabjax/agents


def user_folder() -> pathlib.Path:
    """The user's folder of agents (``dabjax pretrained export`` writes there): ``$DABJAX_AGENTS``, else
    ``$XDG_DATA_HOME/dabjax/agents``, else ``~/.local/share/dabjax/agents``. It need not exist."""
    if os.environ.get(AGENTS_VARIABLE):
        return pathlib.Path(os.environ[AGENTS_VARIABLE]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or pathlib.Path.home() / ".local" / "share"
    return pathlib.Path(data) / "dabjax" / "agents"


def shipped_folder() -> pathlib.Path:
    """The package's folder of shipped agents (``dabjax/pretrained/``; in a clone, the clone's)."""
    return pathlib.Path(str(importlib.resources.files("dabjax") / "pretrained"))


def installed_in_site_packages(folder) -> bool:
    """Whether ``folder`` lies in an installed environment's site-packages (a wheel installed; not a clone, nor
    an editable install, whose files are the clone's): there its files are the installer's, not to be edited."""
    folder = pathlib.Path(folder).resolve()
    if {"site-packages", "dist-packages"} & set(folder.parts):
        return True
    roots = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    roots |= set(getattr(site, "getsitepackages", lambda: [])()) | {site.getusersitepackages()}
    return any(folder.is_relative_to(pathlib.Path(root).resolve()) for root in roots if root)


def _folder(root=None):
    return shipped_folder() if root is None else pathlib.Path(root)


def _boards(folder) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if entry.is_dir() and (entry / AGENT_FILE).is_file())


def available(root=None) -> list[str]:
    """The boards (``"3x3"``, ...) that have a pretrained agent, sorted: the user's and the shipped ones (``root``:
    those of that folder only)."""
    if root is not None:
        return _boards(pathlib.Path(root))
    return sorted(set(_boards(user_folder())) | set(_boards(shipped_folder())))


def agent_folder(board: str, root=None) -> pathlib.Path | None:
    """The folder ``pretrained:board`` loads: the user's (``user_folder()``) before the shipped one, or the one
    in ``root``; None where there is none."""
    for folder in ([pathlib.Path(root)] if root is not None else [user_folder(), shipped_folder()]):
        if board in _boards(folder):
            return folder / board
    return None


def load_pretrained(board: str, root=None) -> PlayableCheckpoint:
    """The pretrained agent of ``board`` (``"RxC"`` in boxes): the user's export (``user_folder()``) or else the
    shipped one, or the one in the folder ``root``. Raises ValueError naming the boards that have one."""
    board = board.strip().lower()
    folder = agent_folder(board, root)
    if folder is None:
        boards = available(root)
        known = ", ".join(boards) if boards else "none"
        raise ValueError(f"no pretrained agent for board {board!r}; pretrained agents exist for: {known}")
    return load_agent_folder(folder)


def available_warm_starts(root=None) -> list[str]:
    """The boards (``"4x4"``, ...) that have a shipped warm start (``supervised:RxC``), sorted."""
    return available(_folder(root) / SUPERVISED)


def load_warm_start(board: str, root=None) -> PlayableCheckpoint:
    """The shipped warm start ``supervised:RxC`` of ``board``: a network trained on exact labels only. Raises
    ValueError naming the boards that have one."""
    board = board.strip().lower()
    boards = available_warm_starts(root)
    if board not in boards:
        raise ValueError(f"no shipped warm start supervised:{board}; there are: "
                         + (", ".join(f"supervised:{b}" for b in boards) or "none"))
    return load_agent_folder(_folder(root) / SUPERVISED / board)


def load_playable(path) -> PlayableCheckpoint:
    """An agent folder (``load_agent_folder``: an export, a warm start) or else a run or checkpoint directory
    (``checkpoint.load_for_play``, whose errors name the path)."""
    if (pathlib.Path(path) / AGENT_FILE).is_file():
        return load_agent_folder(path)
    return checkpoint.load_for_play(path)


def load_source(source: str) -> PlayableCheckpoint:
    """The network named by ``source``: ``pretrained:RxC[:SIMS]`` (SIMS ignored), a shipped warm start
    ``supervised:RxC``, an agent folder (an export, ``dabjax pretrain``'s) or a run or checkpoint directory.
    What ``run.init_from`` and the value bench's ``--trained`` take. Raises ValueError or FileNotFoundError
    naming the problem."""
    if source.startswith("pretrained:"):
        return load_pretrained(source[len("pretrained:"):].partition(":")[0])
    if source.startswith("supervised:"):
        return load_warm_start(source[len("supervised:"):])
    return load_playable(source)


def load_to_continue(source: str, network_config, rows: int, cols: int) -> PlayableCheckpoint:
    """``load_source(source)`` for training on the ``rows`` x ``cols`` board with ``network_config`` (a warm
    start, a fine-tune). Raises ValueError when it cannot serve: another network (but for the dense heads, which a
    network may add or leave out: ``network.warm_starts``), or another board for an MLP (its first layer reads one
    board's grid; the graph and ResNet parameters fit any board)."""
    loaded = load_source(source)
    if not network.warm_starts(loaded.network_config, network_config):
        raise ValueError(f"it holds a network {loaded.network_config}, the config's network section asks for "
                         f"{network_config}")
    if (loaded.rows, loaded.cols) != (rows, cols) and not network.fits_any_board(network_config):
        raise ValueError(f"it is a {loaded.rows}x{loaded.cols} MLP; an MLP plays one board size only (the graph "
                         "and resnet kinds play any)")
    return loaded


def load_agent_folder(entry) -> PlayableCheckpoint:
    """An agent saved in the pretrained format (``agent.json`` and ``params.msgpack`` in the folder ``entry``:
    a shipped agent, an export, or a network trained on exact labels by ``dabjax pretrain``). Raises
    FileNotFoundError or ValueError naming the folder."""
    entry = pathlib.Path(entry) if not hasattr(entry, "joinpath") else entry
    if not (entry / AGENT_FILE).is_file():
        raise FileNotFoundError(f"{str(entry)!r} holds no {AGENT_FILE}")
    board = entry.name
    description = json.loads((entry / AGENT_FILE).read_text())
    if description.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"pretrained agent {board}: format version {description.get('format_version')!r}, this dabjax reads "
            f"{FORMAT_VERSION} (its settings are not this dabjax's: play it with the dabjax that wrote it)"
        )
    params = serialization.msgpack_restore((entry / PARAMS_FILE).read_bytes())
    source = description.get("source", {})
    return checkpoint.playable(params, description, source.get("iteration", 0),
                               float(source.get("training_minutes", 0.0)) * 60)


def describe(checkpoint: PlayableCheckpoint, source: dict) -> tuple[bytes, str]:
    """``(params.msgpack bytes, agent.json text)`` for a loaded checkpoint; ``source`` records its training."""
    description = {
        "format_version": FORMAT_VERSION,
        "rows": checkpoint.rows,
        "cols": checkpoint.cols,
        "network": dataclasses.asdict(checkpoint.network_config),
        "search": mcts.saved_fields(checkpoint.search_config, checkpoint.env),
        "source": source,
    }
    return serialization.msgpack_serialize(checkpoint.params), json.dumps(description, indent=2) + "\n"


def save_agent_folder(folder, checkpoint: PlayableCheckpoint, source: dict) -> int:
    """Writes ``checkpoint`` as an agent folder (``describe``; created if missing) that ``load_agent_folder``
    reads; returns the size of its parameters in bytes."""
    folder = pathlib.Path(folder)
    params_bytes, description = describe(checkpoint, source)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PARAMS_FILE).write_bytes(params_bytes)
    (folder / AGENT_FILE).write_text(description)
    return len(params_bytes)
