"""Exact play where it is cheap: the solver's move when it proves the position in time, another agent's otherwise.

Strong Dots-and-Boxes programs play the endgame perfectly: once a position is small enough they solve it.
``ExactAgent(fallback, seconds)`` does that for any agent (the ``+exact[:SECONDS]`` suffix of an agent spec,
``dabjax.evaluation.agent_registry``; the ``solver`` agent is ``ExactAgent`` over ``alphabeta:4``):

* boards of at most ``TABLE_LABEL_MAX_LINES`` lines (the labelled sets' limit, ``dabjax.solvers.labelled``) are
  answered from the whole-board table (``dabjax.solvers.retrograde``): every position, instantly;
* larger boards (up to ``MAX_SOLVER_LINES`` lines) by the position solver (``dabjax.solvers.position_solver``),
  one position at a time with a wall-time budget of ``seconds``; a position it does not prove in time is played
  by ``fallback``, as is every position that does not qualify (below). Its transposition table persists between
  calls, so the positions of one game get cheaper as the game goes on;
* the move is drawn uniformly among the best-margin moves (they keep the best final margin, hence the best
  result);
* a batch never waits on hopeless solves: a position qualifies when it has at most ``max_undrawn`` undrawn
  lines, a limit meant to keep most solves within the budget: it starts at ``start_max_undrawn`` (on 5x5 from
  move 22, set from the solver's speed: docs/results.md, "Solver speed"; every other board at a default, 4x4 from
  move 10) and calibrates itself (``adaptive``): once timeouts at ``u`` undrawn lines outnumber the solves there
  by two, the limit drops to ``u - 1``; a solve at the limit in under a quarter of the budget raises it by one.
  The solver tries the qualifying positions with the fewest undrawn lines first; the fallback then plays all the
  rest in one batched call (jax agents on a batch padded to a power of two, so a match compiles a handful of
  shapes).

After each ``act``, ``last_sources`` says where each move came from (``"table"``, ``"solver"``, ``"timeout"``
for a fallback move after an unfinished solve, ``"fallback"``, or ``""`` for finished games) and ``counts``
adds them up over the agent's life.

``analyse_position`` gives every legal line's exact value within a budget (the analysis board of
``dabjax serve``, and ``dabjax solve``).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time

import jax
import numpy as np

from dabjax.evaluation.arena import jitted_agent
from dabjax.game.geometry import BoardGeometry
from dabjax.game.host_agent import HostAgent, is_host_agent
from dabjax.solvers import position_solver, retrograde
from dabjax.solvers.labelled import TABLE_LABEL_MAX_LINES
from dabjax.solvers.position_solver import PositionSolver, best_result_moves, default_solver, solver_refusal

DEFAULT_SECONDS = 2.0  # the wall-time budget of one solve, when a spec says only +exact
# Where the adaptive limit starts, by the board's number of lines: the most undrawn lines at which the solver
# proves most positions within the default budget. Set from the solver's speed on 5x5 only (38 undrawn lines,
# move 22; the figures with their commands: docs/results.md, "Solver speed"). Every other board starts at the
# default (4x4: move 10). The limit then follows the machine.
START_MAX_UNDRAWN = {60: 38}
DEFAULT_START_MAX_UNDRAWN = 30


def start_max_undrawn(geometry: BoardGeometry) -> int:
    return START_MAX_UNDRAWN.get(geometry.num_lines, DEFAULT_START_MAX_UNDRAWN)


@functools.lru_cache(maxsize=4)
def table(geometry: BoardGeometry) -> np.ndarray:
    """The whole-board table of a board of at most ``TABLE_LABEL_MAX_LINES`` lines, solved once per process."""
    return retrograde.solve_table(geometry)


@functools.lru_cache(maxsize=None)
def compile_solver_kernels(geometry: BoardGeometry) -> None:
    """Compiles the position solver's kernels for any solver of the board (``position_solver.compile_kernels``):
    numba compiles on a first search (seconds), which would otherwise eat the first solve's budget."""
    position_solver.compile_kernels(geometry)


@functools.lru_cache(maxsize=4)
def ready_solver(geometry: BoardGeometry) -> PositionSolver:
    """The board's shared position solver (``default_solver``, a 134 MB table), its kernels compiled."""
    compile_solver_kernels(geometry)
    return default_solver(geometry)


def _padded_to_power_of_two(states, count: int):
    """``states`` (NumPy leaves, batch ``count``) repeated at the end up to the next power of two."""
    size = 1 << max(0, int(count - 1).bit_length())
    index = np.concatenate([np.arange(count), np.zeros(size - count, np.int64)])
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[index], states)


class ExactAgent(HostAgent):
    """Solver moves where the solver proves the position within ``seconds``, ``fallback``'s moves elsewhere.

    Args:
      fallback: any agent (jax or host) for the positions the solver does not prove.
      seconds: wall-time budget of one solve (> 0).
      name: how the agent is called in tables (its spec).
      max_undrawn: solve only positions with at most this many undrawn lines; ``"auto"`` (default):
        ``start_max_undrawn`` of the board; None: every position.
      adaptive: let the limit follow the timeouts and fast solves (see the module docstring).
      table_max_lines: boards of at most this many lines use the whole-board table (0: always the solver).
    """

    def __init__(self, fallback, seconds: float = DEFAULT_SECONDS, name: str = "exact", *,
                 max_undrawn: int | str | None = "auto", adaptive: bool = True,
                 table_max_lines: int = TABLE_LABEL_MAX_LINES):
        if not float(seconds) > 0:
            raise ValueError(f"{name}: the solver's time budget must be > 0 seconds, got {seconds!r}")
        self.fallback = fallback
        self.seconds = float(seconds)
        self.name = name
        self.max_undrawn = max_undrawn  # "auto" until the first board is seen
        self.adaptive = bool(adaptive) and max_undrawn is not None
        self._solved: collections.Counter = collections.Counter()  # by undrawn lines
        self._timeouts: collections.Counter = collections.Counter()
        self.table_max_lines = int(table_max_lines)
        self.needs_history = bool(getattr(fallback, "needs_history", False))
        self.last_sources: list[str] = []
        self.counts: collections.Counter = collections.Counter()

    def _solver_moves(self, geometry, rng, lines, running) -> tuple[np.ndarray, list[str]]:
        """Moves (-1 where none) and their sources, for the running positions the solver proves."""
        moves = np.full(lines.shape[0], -1, np.int32)
        sources = ["" if not r else "fallback" for r in running]
        if geometry.num_lines <= self.table_max_lines:
            _, optimal = retrograde.optimal_moves(geometry, table(geometry), lines)
            for i in np.flatnonzero(running):
                moves[i] = rng.choice(np.flatnonzero(optimal[i]))
                sources[i] = "table"
            return moves, sources
        solver = ready_solver(geometry)
        if self.max_undrawn == "auto":
            self.max_undrawn = start_max_undrawn(geometry)
        undrawn = (~lines).sum(axis=1)
        for i in sorted(np.flatnonzero(running), key=lambda j: undrawn[j]):
            u = int(undrawn[i])
            if self.max_undrawn is not None and u > self.max_undrawn:
                continue
            solution = solver.solve(lines[i], result_moves=False, time_limit=self.seconds)
            if solution.finished:
                moves[i] = rng.choice(np.flatnonzero(solution.best_margin_moves & ~lines[i]))
                sources[i] = "solver"
                self._solved[u] += 1
                if self.adaptive and u == self.max_undrawn and solution.seconds < self.seconds / 4:
                    self.max_undrawn += 1
            else:
                sources[i] = "timeout"
                self._timeouts[u] += 1
                if self.adaptive and self._timeouts[u] >= self._solved[u] + 2:
                    self.max_undrawn = min(self.max_undrawn, u - 1)
        return moves, sources

    def _fallback_moves(self, geometry, rng, states, rows, histories) -> np.ndarray:
        subset = jax.tree_util.tree_map(lambda x: np.asarray(x)[rows], states)
        if is_host_agent(self.fallback):
            chosen = None if histories is None else [histories[i] for i in rows]
            return np.asarray(self.fallback.act(geometry, rng, subset, chosen), np.int32)
        key = jax.random.PRNGKey(int(rng.integers(2**31 - 1)))
        padded = _padded_to_power_of_two(subset, rows.size)
        return np.asarray(jitted_agent(self.fallback, geometry)(key, padded), np.int32)[: rows.size]

    def act(self, geometry, rng, states, histories=None) -> np.ndarray:
        lines = np.asarray(states.lines, bool)
        running = ~np.asarray(states.terminated, bool)
        moves, sources = self._solver_moves(geometry, rng, lines, running)
        rest = np.flatnonzero(running & (moves < 0))
        if rest.size:
            moves[rest] = self._fallback_moves(geometry, rng, states, rest, histories)
        moves[moves < 0] = 0  # finished games: any index (the environment ignores it)
        self.last_sources = sources
        self.counts.update(s for s in sources if s)
        return moves


# --- every line's exact value, for the analysis board -----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PositionAnalysis:
    """Every legal line's exact value in one position, or the news that the budget ran out. ``L`` lines.

    finished: False when the solver did not prove every move within the budget (the arrays are then None).
    final_margins: int32 ``[L]``, the final margin (mover's boxes minus the opponent's, the score so far
      included) that each legal line keeps under perfect play; 0 for drawn lines.
    best_result: bool ``[L]``, the legal lines that keep the best result (win > draw > loss).
    best_margin: bool ``[L]``, the legal lines that keep the best final margin.
    source: ``"table"`` or ``"solver"``; seconds: wall time spent.
    """

    finished: bool
    final_margins: np.ndarray | None
    best_result: np.ndarray | None
    best_margin: np.ndarray | None
    source: str
    seconds: float


def analyse_position(geometry: BoardGeometry, lines, margin: int, seconds: float,
                     solver: PositionSolver | None = None,
                     table_max_lines: int = TABLE_LABEL_MAX_LINES) -> PositionAnalysis:
    """Every legal line's exact value for the side to move (``lines`` bool ``[L]``, ``margin`` its score so far
    minus the opponent's) from the whole-board table, or from ``solver`` (default: the board's shared one,
    ``ready_solver``, made only then) within ``seconds`` of wall time; ``finished`` False when that runs out.
    ValueError naming the board and the limit on a board the solver cannot take (``solver_refusal``)."""
    start = time.perf_counter()
    lines = np.asarray(lines, bool)
    legal = ~lines
    if geometry.num_lines <= table_max_lines:
        values, source = retrograde.move_values(geometry, table(geometry), lines), "table"
    else:
        refusal = solver_refusal(geometry)
        if refusal is not None:
            raise ValueError(refusal)
        if solver is None:
            solver = ready_solver(geometry)
        else:
            compile_solver_kernels(geometry)  # outside the budget
        solution = solver.solve(lines, margin, move_values=True, time_limit=seconds)
        if not solution.finished:
            return PositionAnalysis(False, None, None, None, "solver", time.perf_counter() - start)
        values, source = solution.move_values, "solver"
    values = values.astype(np.int32)
    best = np.where(legal, values, np.iinfo(np.int32).min).max() if legal.any() else 0
    return PositionAnalysis(True, np.where(legal, margin + values, 0), best_result_moves(values, legal, margin),
                            legal & (values == best), source, time.perf_counter() - start)
