"""Solver-labelled position sets and the accuracy of an agent by move number (BoxesZero, Appendix E.3).

A *labelled set* holds, for a board and a range of move numbers (lines drawn so far), up to ``N`` distinct
positions per move number with their exact labels:

* ``value``: the best net margin over the remaining boxes for the side to move;
* ``margin``: the score so far, the mover's boxes minus the opponent's;
* ``best_result``: the moves that keep the best final result (win > draw > loss of ``margin + value``)
  reachable: the paper's "winning moves" (every legal move when the position is lost);
* ``best_margin``: the moves that keep the best final margin (``value``);
* ``move_values``: every move's exact value (optional for large boards, where it costs more to compute).

Positions are reached as in the paper: games from the empty board where each move is the greedy opening
policy's (``dabjax.game.policies.greedy``: fourth sides, then first/second sides, third sides last)
or, with probability ``random_rate``, a uniformly random line; positions are de-duplicated under the board's
symmetries (and the score so far). Labels come from the whole-board table (``dabjax.solvers.retrograde``) on
boards of at most ``TABLE_LABEL_MAX_LINES`` lines and from the position solver
(``dabjax.solvers.position_solver``) above; a position the solver does not finish within its budget is
dropped, never labelled with a guess.

Files are ``.npz`` with ``format_version``, the board size and the generation settings (JSON): ``save`` and
``load``. The command line is ``dabjax.cli.label``:
``python -m dabjax.cli.label build --board 3x3 --moves 0-23 --per-move 200 --out data/3x3.npz``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import time
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game import policies
from dabjax.game.geometry import BoardGeometry, board_geometry
from dabjax.game.host_agent import mover_margins
from dabjax.solvers import parallel_labels, retrograde

FORMAT_VERSION = 1
# 3x3, 2x4, 1xN: the 16 MiB table builds in seconds; larger boards use search. Exact play and the analysis board
# use the table up to the same size (dabjax.evaluation.exact_play).
TABLE_LABEL_MAX_LINES = 24

Agent = env_lib.Agent

# The per-position arrays of a ``LabelledSet`` (and of its file), in file order.
ARRAY_FIELDS = (
    "move_numbers", "lines", "box_owner", "scores", "current_player", "margin", "value",
    "best_result", "best_margin", "move_values",
)


@dataclasses.dataclass(frozen=True)
class LabelledSet:
    """Labelled positions of one board. ``N`` positions, ``L`` lines, ``B`` boxes.

    Attributes:
      rows, cols: the board, in boxes.
      move_numbers: int32 ``[N]``, lines drawn before the position (the paper's "game step").
      lines: bool ``[N, L]``; box_owner: int8 ``[N, B]`` (-1 unclaimed); scores: int32 ``[N, 2]``;
      current_player: int32 ``[N]``: the position as an environment ``State`` (see ``to_states``).
      margin: int32 ``[N]``, the mover's boxes minus the opponent's so far.
      value: int8 ``[N]``, best net margin over the remaining boxes for the mover.
      best_result, best_margin: bool ``[N, L]``, the optimal moves (see the module docstring).
      move_values: int8 ``[N, L]``, every move's exact value (``retrograde.ILLEGAL`` for drawn lines), or
        None when the set was built without them.
      settings: how the set was generated (JSON-serialisable).
    """

    rows: int
    cols: int
    move_numbers: np.ndarray
    lines: np.ndarray
    box_owner: np.ndarray
    scores: np.ndarray
    current_player: np.ndarray
    margin: np.ndarray
    value: np.ndarray
    best_result: np.ndarray
    best_margin: np.ndarray
    move_values: np.ndarray | None
    settings: dict

    @property
    def geometry(self) -> BoardGeometry:
        return board_geometry(self.rows, self.cols)

    def __len__(self) -> int:
        return int(self.move_numbers.shape[0])


# --- reaching positions ---------------------------------------------------------------------------------


def canonical_keys(geometry: BoardGeometry, lines: np.ndarray) -> list[bytes]:
    """``N`` keys, equal exactly for positions (bool ``[N, L]`` lines) that are images under a symmetry:
    the smallest of the packed images (any fixed total order of the images gives a canonical key)."""
    images = np.packbits(np.asarray(lines, bool)[:, geometry.sym_line_gather], axis=-1)  # [N, S, bytes]
    return [min(image.tobytes() for image in position) for position in images]


@functools.lru_cache(maxsize=None)
def _mixed_policy(geometry: BoardGeometry, random_rate: float) -> Callable:
    """jit(key, states) -> int32 ``[N]``: greedy, or with probability ``random_rate`` a random line."""

    def policy(key, states):
        k_greedy, k_random, k_coin = jax.random.split(key, 3)
        greedy = policies.greedy(geometry, k_greedy, states)
        uniform = policies.random_agent(geometry, k_random, states)
        coin = jax.random.uniform(k_coin, greedy.shape) < random_rate
        return jnp.where(coin, uniform, greedy)

    return jax.jit(policy)


@functools.lru_cache(maxsize=None)
def _batched_step(geometry: BoardGeometry) -> Callable:
    return jax.jit(jax.vmap(lambda s, a: env_lib.step(geometry, s, a)))


def play_trajectories(geometry: BoardGeometry, key: jax.Array, num_games: int, random_rate: float) -> env_lib.State:
    """Plays ``num_games`` whole games with the mixed policy; returns every position as a NumPy ``State``
    with leading axes ``[L, num_games]`` (index ``t`` = the position after ``t`` moves)."""
    policy = _mixed_policy(geometry, float(random_rate))
    step = _batched_step(geometry)
    states = env_lib.batch_init(geometry, num_games)
    history = []
    for _ in range(geometry.num_lines):
        history.append(env_lib.to_numpy(states))
        key, sub = jax.random.split(key)
        states = step(states, policy(sub, states))
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *history)


def per_move_counts(move_numbers: list[int], per_move: int | Mapping[int, int]) -> dict[int, int]:
    """``{move number: positions wanted}`` from one count for every move number or a count per move number
    (which must name exactly ``move_numbers``); raises ValueError for a count below 1 or a mismatch."""
    if isinstance(per_move, Mapping):
        counts = {int(n): int(c) for n, c in per_move.items()}
        if set(counts) != set(move_numbers):
            raise ValueError(f"per_move names move numbers {sorted(counts)}, the move numbers are "
                             f"{sorted(set(move_numbers))}")
    else:
        counts = {int(n): int(per_move) for n in move_numbers}
    for n, count in counts.items():
        if count < 1:
            raise ValueError(f"per_move={count} (move {n}) must be positive")
    return counts


def check_sampling(geometry: BoardGeometry, move_numbers: list[int], random_rate: float) -> None:
    """Raises ValueError naming a move number off ``geometry``'s board or a ``random_rate`` outside [0, 1]."""
    for n in move_numbers:
        if not 0 <= n < geometry.num_lines:
            raise ValueError(f"move number {n} is outside 0..{geometry.num_lines - 1} on a {geometry.name} board")
    if not 0 <= random_rate <= 1:
        raise ValueError(f"random_rate={random_rate} must be a share in [0, 1]")


def sample_positions(
    geometry: BoardGeometry,
    move_numbers: list[int],
    per_move: int | Mapping[int, int],
    *,
    seed: int = 0,
    random_rate: float = 0.2,
    games_per_batch: int = 256,
    max_batches: int | None = None,
) -> dict[str, np.ndarray]:
    """Up to ``per_move`` positions for each move number (one count, or a count per move number), distinct
    under symmetry and score so far.

    Returns NumPy arrays ``move_numbers, lines, box_owner, scores, current_player, margin`` (``[N, ...]``),
    grouped by move number in the order given. Fewer than asked are returned for a move number with fewer
    distinct positions (e.g. move 0 has one) reachable within ``max_batches`` batches of ``games_per_batch``
    games (default: 20 batches, more when a move number asks for more than a sixth of their 5,120 games).
    """
    check_sampling(geometry, move_numbers, random_rate)
    wanted = per_move_counts(move_numbers, per_move)
    if max_batches is None:
        max_batches = max(20, -(-6 * max(wanted.values(), default=0) // games_per_batch))
    key = jax.random.PRNGKey(seed)
    chosen: dict[int, dict] = {n: {} for n in move_numbers}
    for _ in range(max_batches):
        if all(len(chosen[n]) >= wanted[n] for n in move_numbers):
            break
        key, sub = jax.random.split(key)
        history = play_trajectories(geometry, sub, games_per_batch, random_rate)
        for n in move_numbers:
            if len(chosen[n]) >= wanted[n]:
                continue
            at_n = jax.tree_util.tree_map(lambda x: x[n], history)
            margins = mover_margins(at_n.scores, at_n.current_player)
            keys = canonical_keys(geometry, at_n.lines)
            for i in range(games_per_batch):
                identity = (keys[i], int(margins[i]))
                if identity not in chosen[n] and len(chosen[n]) < wanted[n]:
                    chosen[n][identity] = jax.tree_util.tree_map(lambda x: x[i], at_n)
    picked = [(n, s) for n in move_numbers for s in chosen[n].values()]
    return {
        "move_numbers": np.array([n for n, _ in picked], np.int32),
        "lines": np.array([s.lines for _, s in picked], bool).reshape(-1, geometry.num_lines),
        "box_owner": np.array([s.box_owner for _, s in picked], np.int8).reshape(-1, geometry.num_boxes),
        "scores": np.array([s.scores for _, s in picked], np.int32).reshape(-1, 2),
        "current_player": np.array([s.current_player for _, s in picked], np.int32),
        "margin": np.array([mover_margins(s.scores, s.current_player) for _, s in picked], np.int32),
    }


# --- labelling ------------------------------------------------------------------------------------------


def label_with_table(geometry: BoardGeometry, lines: np.ndarray, margin: np.ndarray, table: np.ndarray) -> dict:
    """Exact labels of positions (bool ``[N, L]``, margins int ``[N]``) from a whole-board table."""
    from dabjax.solvers.position_solver import best_result_moves

    values = retrograde.move_values(geometry, table, lines)  # [N, L]
    value = values.max(axis=-1)
    legal = ~np.asarray(lines, bool)
    return {
        "value": value.astype(np.int8),
        "best_margin": legal & (values == value[:, None]),
        "best_result": best_result_moves(values, legal, margin),
        "move_values": values,
    }


def build_set(
    geometry: BoardGeometry,
    move_numbers: list[int],
    per_move: int | Mapping[int, int],
    *,
    seed: int = 0,
    random_rate: float = 0.2,
    move_values: bool = True,
    time_limit: float = 60.0,
    cache_dir=None,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
    exclude: LabelledSet | None = None,
) -> LabelledSet:
    """Samples positions (``sample_positions``) and labels them exactly.

    Boards of at most ``TABLE_LABEL_MAX_LINES`` lines are labelled from the whole-board table (always with
    move values; ``cache_dir`` as in ``retrograde.solve_table``); larger ones by
    ``dabjax.solvers.position_solver.PositionSolver`` with ``time_limit`` seconds per position (positions it
    does not finish are dropped and counted in ``settings["unfinished"]``). The search runs in ``workers``
    processes (None: ``os.cpu_count()``; 1: in this process), each with its own solver
    (``dabjax.solvers.parallel_labels``): the same set as one process, sooner. ``progress`` receives a line of
    text per solved chunk of positions (search only). Sampled positions also in ``exclude`` (another set of
    the board, e.g. the one that measures) are dropped before labelling (``settings["excluded"]``).
    The resumable command with a progress bar is ``dabjax label build`` (``dabjax.runs.label_build``).
    """
    workers = default_workers(workers)
    start = time.perf_counter()
    positions, excluded = sample_excluding(geometry, move_numbers, per_move, seed=seed, random_rate=random_rate,
                                           exclude=exclude)
    use_table = geometry.num_lines <= TABLE_LABEL_MAX_LINES
    if use_table:
        labels = table_labels(geometry, positions, cache_dir)
    else:
        labels = parallel_labels.solve_parallel(
            geometry.rows, geometry.cols, positions["lines"], positions["margin"], positions["move_numbers"],
            workers=workers, move_values=move_values, time_limit=time_limit, progress=progress)
    settings = build_settings(geometry, move_numbers, per_move, seed=seed, random_rate=random_rate,
                              time_limit=time_limit, workers=workers, excluded=excluded)
    settings["build_seconds"] = round(time.perf_counter() - start, 1)
    return assemble(geometry, positions, labels, settings, move_values=move_values or use_table)


def table_labels(geometry: BoardGeometry, positions: dict[str, np.ndarray], cache_dir=None) -> dict[str, np.ndarray]:
    """``label_with_table`` of sampled ``positions`` from the board's whole table (``retrograde.solve_table``),
    with ``finished`` bool ``[N]`` (all True) as the solver's labels have it."""
    labels = label_with_table(geometry, positions["lines"], positions["margin"],
                              retrograde.solve_table(geometry, cache_dir))
    labels["finished"] = np.ones(len(positions["move_numbers"]), bool)
    return labels


def default_workers(workers: int | None) -> int:
    """The solver processes of a build: ``os.cpu_count()`` for None; ValueError below 1."""
    workers = (os.cpu_count() or 1) if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers={workers} must be at least 1")
    return workers


def sample_excluding(geometry: BoardGeometry, move_numbers: list[int], per_move: int | Mapping[int, int], *,
                     seed: int, random_rate: float, exclude: LabelledSet | None
                     ) -> tuple[dict[str, np.ndarray], dict | None]:
    """``(positions, excluded)``: ``sample_positions`` without the positions also in ``exclude`` (``not_in``),
    and ``{"positions": dropped}`` (None without ``exclude``)."""
    positions = sample_positions(geometry, move_numbers, per_move, seed=seed, random_rate=random_rate)
    if exclude is None:
        return positions, None
    keep = not_in(geometry, positions["lines"], positions["margin"], exclude)
    return {name: value[keep] for name, value in positions.items()}, {"positions": int((~keep).sum())}


def build_settings(geometry: BoardGeometry, move_numbers: list[int], per_move: int | Mapping[int, int], *,
                   seed: int, random_rate: float, time_limit: float, workers: int,
                   excluded: dict | None = None) -> dict:
    """The ``settings`` of a set built by ``build_set`` (JSON-serialisable; ``assemble`` adds
    ``unfinished``)."""
    use_table = geometry.num_lines <= TABLE_LABEL_MAX_LINES
    counts = per_move_counts(move_numbers, per_move)
    settings = {
        "generator": "greedy opening policy mixed with uniformly random moves",
        "random_rate": float(random_rate),
        "seed": int(seed),
        "per_move": int(per_move) if not isinstance(per_move, Mapping) else {str(n): c for n, c in counts.items()},
        "move_numbers": [int(n) for n in move_numbers],
        "dedup": "board symmetries and score so far",
        "labeller": "retrograde table" if use_table else "alpha-beta position solver",
        "time_limit_per_position": None if use_table else float(time_limit),
        "workers": None if use_table else int(workers),
    }
    if excluded is not None:
        settings["excluded"] = excluded
    return settings


def assemble(geometry: BoardGeometry, positions: dict[str, np.ndarray], labels: dict[str, np.ndarray],
             settings: dict, *, move_values: bool) -> LabelledSet:
    """The labelled set of ``N`` sampled ``positions`` and their ``labels`` (``parallel_labels.empty_labels``
    with ``finished`` bool ``[N]``): unfinished positions dropped and counted in ``settings["unfinished"]``;
    ``move_values`` False leaves them out."""
    keep = np.asarray(labels["finished"], bool)
    arrays = {**positions, **{name: value for name, value in labels.items() if name != "finished"}}
    arrays = {name: value[keep] for name, value in arrays.items()}
    if not move_values:
        arrays["move_values"] = None
    settings = {**settings, "unfinished": int((~keep).sum())}
    return LabelledSet(rows=geometry.rows, cols=geometry.cols, settings=settings, **arrays)


# --- files ----------------------------------------------------------------------------------------------


def save(labelled: LabelledSet, path) -> None:
    """Writes a compressed ``.npz`` with ``format_version``, ``board`` and ``settings`` (JSON)."""
    arrays = {name: getattr(labelled, name) for name in ARRAY_FIELDS if getattr(labelled, name) is not None}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        format_version=np.int32(FORMAT_VERSION),
        board=np.array([labelled.rows, labelled.cols], np.int32),
        settings=np.array(json.dumps(labelled.settings)),
        **arrays,
    )


def load(path) -> LabelledSet:
    """Reads a set written by ``save``; raises FileNotFoundError naming a missing file, ValueError on another
    format version."""
    if not pathlib.Path(path).is_file():
        raise FileNotFoundError(f"no labelled set at {path}")
    with np.load(path, allow_pickle=False) as data:
        version = int(data["format_version"]) if "format_version" in data else None
        if version != FORMAT_VERSION:
            raise ValueError(f"{path}: labelled-set format version {version}, this code reads {FORMAT_VERSION}")
        rows, cols = (int(x) for x in data["board"])
        arrays = {name: (data[name] if name in data else None) for name in ARRAY_FIELDS}
        settings = json.loads(str(data["settings"]))
    return LabelledSet(rows=rows, cols=cols, settings=settings, **arrays)


# --- accuracy -------------------------------------------------------------------------------------------


def to_states(labelled: LabelledSet) -> env_lib.State:
    """The positions as a batched environment ``State`` (leading axis ``N``, JAX arrays)."""
    lines = jnp.asarray(labelled.lines)
    count = len(labelled)
    return env_lib.State(
        lines=lines,
        box_owner=jnp.asarray(labelled.box_owner, jnp.int8),
        scores=jnp.asarray(labelled.scores, jnp.int32),
        current_player=jnp.asarray(labelled.current_player, jnp.int32),
        num_moves=jnp.asarray(labelled.move_numbers, jnp.int32),
        terminated=jnp.zeros(count, jnp.bool_),
        truncated=jnp.zeros(count, jnp.bool_),
        legal_action_mask=~lines,
        rewards=jnp.zeros((count, 2), jnp.float32),
    )


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """Per move number (``M`` of them): float64 ``[M]`` shares, and the mean loss of final margin (boxes)
    over the positions where the agent's move is not a best-margin move (NaN when there are none or the set
    has no move values). Illegal moves count as misses and are excluded from the margin loss."""

    move_numbers: np.ndarray
    count: np.ndarray
    best_result: np.ndarray
    best_margin: np.ndarray
    mean_margin_loss: np.ndarray
    illegal: np.ndarray

    def format(self) -> str:
        rows = ["move  count  best-result  best-margin  mean loss  illegal"]
        for i, n in enumerate(self.move_numbers):
            rows.append(f"{n:4d}  {self.count[i]:5d}  {self.best_result[i]:11.3f}  {self.best_margin[i]:11.3f}  "
                        f"{self.mean_margin_loss[i]:9.2f}  {self.illegal[i]:7d}")
        return "\n".join(rows)


def subset(labelled: LabelledSet, keep: np.ndarray) -> LabelledSet:
    """The positions where ``keep`` (bool ``[N]``) is True, labels and settings unchanged."""
    keep = np.asarray(keep, bool)
    if keep.shape != (len(labelled),):
        raise ValueError(f"keep must be bool [{len(labelled)}], got shape {keep.shape}")
    arrays = {name: (getattr(labelled, name)[keep] if getattr(labelled, name) is not None else None)
              for name in ARRAY_FIELDS}
    return dataclasses.replace(labelled, **arrays)


def identities(geometry: BoardGeometry, lines: np.ndarray, margin: np.ndarray) -> list[tuple[int, bytes, int]]:
    """``N`` identities ``(move number, canonical key, margin)`` of positions (bool ``[N, L]`` lines, the mover's
    margin so far ``[N]``): equal exactly for the same position up to the board's symmetries and the score so
    far (the dedup of ``sample_positions``)."""
    lines = np.asarray(lines, bool)
    keys = canonical_keys(geometry, lines)
    return [(int(n), key, int(m)) for n, key, m in zip(lines.sum(-1), keys, np.asarray(margin))]


def position_identities(labelled: LabelledSet) -> list[tuple[int, bytes, int]]:
    """The ``identities`` of a labelled set's ``N`` positions."""
    return identities(labelled.geometry, labelled.lines, labelled.margin)


def not_in(geometry: BoardGeometry, lines: np.ndarray, margin: np.ndarray, other: LabelledSet) -> np.ndarray:
    """bool ``[N]``: which of ``N`` positions (bool ``[N, L]`` lines, the mover's margin so far ``[N]``) are not
    in ``other`` (the same ``identities``: up to the board's symmetries and the score so far). Raises ValueError
    when ``other`` is of another board."""
    if (other.rows, other.cols) != (geometry.rows, geometry.cols):
        raise ValueError(f"the positions are {geometry.name}, the other set {other.rows}x{other.cols}")
    excluded = set(position_identities(other))
    return np.array([identity not in excluded for identity in identities(geometry, lines, margin)], bool)


def without(labelled: LabelledSet, other: LabelledSet) -> tuple[LabelledSet, int]:
    """``(set, dropped)``: ``labelled`` without its positions that are also in ``other`` (``not_in``; e.g. a
    training set kept apart from the set that measures), and how many were dropped."""
    keep = not_in(labelled.geometry, labelled.lines, labelled.margin, other)
    return subset(labelled, keep), int((~keep).sum())


def merge(sets) -> LabelledSet:
    """One set of the positions of ``sets`` (labelled sets of one board, e.g. built in parts by move number or
    topped up with another seed), in order, each position once: a position already in an earlier part (same
    ``position_identities``) is dropped and counted in ``settings["duplicates_dropped"]``. Their settings are
    kept as ``settings["parts"]``, with the union of their move numbers and the sum of their build times.
    Raises ValueError for different boards or a mix with and without move values."""
    sets = list(sets)
    if not sets:
        raise ValueError("merge needs at least one labelled set")
    boards = {(s.rows, s.cols) for s in sets}
    if len(boards) > 1:
        raise ValueError(f"cannot merge labelled sets of different boards: {sorted(boards)}")
    with_values = {s.move_values is not None for s in sets}
    if len(with_values) > 1:
        raise ValueError("cannot merge labelled sets with and without every move's value")
    arrays = {
        name: (np.concatenate([getattr(s, name) for s in sets]) if getattr(sets[0], name) is not None else None)
        for name in ARRAY_FIELDS
    }
    settings = {
        "parts": [s.settings for s in sets],
        "move_numbers": sorted({int(n) for s in sets for n in s.settings.get("move_numbers", [])}),
        "unfinished": sum(int(s.settings.get("unfinished", 0)) for s in sets),
        "build_seconds": round(sum(float(s.settings.get("build_seconds", 0.0)) for s in sets), 1),
    }
    merged = LabelledSet(rows=sets[0].rows, cols=sets[0].cols, settings=settings, **arrays)
    seen: set = set()
    keep = np.zeros(len(merged), bool)
    for i, identity in enumerate(position_identities(merged)):
        keep[i] = identity not in seen
        seen.add(identity)
    settings["duplicates_dropped"] = int((~keep).sum())
    return subset(merged, keep)


def agent_moves(agent: Agent, labelled: LabelledSet, key: jax.Array, batch_size: int = 1024) -> np.ndarray:
    """int32 ``[N]``: the agent's move in every position, in batches of ``min(batch_size, N)``.

    The last batch is padded to the same size, so a jitted agent compiles once.
    """
    states = to_states(labelled)
    total = len(labelled)
    batch_size = max(1, min(batch_size, total))
    moves = []
    for start in range(0, total, batch_size):
        index = np.minimum(np.arange(start, start + batch_size), total - 1)  # pad with the last position
        batch = jax.tree_util.tree_map(lambda x: x[index], states)
        key, sub = jax.random.split(key)
        moves.append(np.asarray(agent(labelled.geometry, sub, batch), np.int32)[: total - start])
    return np.concatenate(moves) if moves else np.zeros(0, np.int32)


def accuracy_of_moves(labelled: LabelledSet, moves: np.ndarray) -> Accuracy:
    """Scores given moves (int ``[N]``) against the labels, per move number."""
    moves = np.asarray(moves, np.int64)
    index = np.arange(len(labelled))
    legal = (moves >= 0) & (moves < labelled.geometry.num_lines)
    safe = np.where(legal, moves, 0)
    legal &= ~labelled.lines[index, safe]
    hit_result = legal & labelled.best_result[index, safe]
    hit_margin = legal & labelled.best_margin[index, safe]
    if labelled.move_values is not None:
        loss = labelled.value.astype(np.float64) - labelled.move_values[index, safe]
    else:
        loss = np.full(len(labelled), np.nan)
    numbers = np.unique(labelled.move_numbers)
    fields = {name: [] for name in ("count", "best_result", "best_margin", "mean_margin_loss", "illegal")}
    for n in numbers:
        at = labelled.move_numbers == n
        misses = at & legal & ~hit_margin
        fields["count"].append(int(at.sum()))
        fields["best_result"].append(hit_result[at].mean())
        fields["best_margin"].append(hit_margin[at].mean())
        fields["mean_margin_loss"].append(loss[misses].mean() if misses.any() else np.nan)
        fields["illegal"].append(int((at & ~legal).sum()))
    return Accuracy(move_numbers=numbers, **{k: np.array(v) for k, v in fields.items()})


def accuracy_by_move_number(agent: Agent, labelled: LabelledSet, key: jax.Array, batch_size: int = 1024) -> Accuracy:
    """Per move number, the share of positions where ``agent`` (``fn(geometry, key, states) -> int32[N]``)
    plays a best-result move and a best-margin move, and its mean loss of final margin when it does not."""
    return accuracy_of_moves(labelled, agent_moves(agent, labelled, key, batch_size))
