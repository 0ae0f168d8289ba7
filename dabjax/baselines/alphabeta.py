"""Depth-limited alpha-beta (negamax) with the chain rules and a score heuristic: the MiniMax baseline of
BoxesZero (Niu et al., 2025, section 6.1.1) and of El Kaddouri, Rys and Gao, "Multi Agent Reinforcement
Learning With Dots And Boxes" (2024, section 5), as a host-side agent.

A node's value is the mover's net margin over the boxes still unclaimed (as in ``dabjax.solvers.position_solver``). The
search is the exact solver's, cut at a depth:

* **Chain rules** (``move_ordering.chain_rule``): forced captures are played without branching, and at the last
  two boxes of a capturable chain only "take" and "decline both" are searched. These moves cost no depth.
* **Exact leaves**: a finished board, and a simple endgame (only chains and loops left) valued by the
  endgame recursion.
* **Score heuristic** at the depth limit: the boxes won along the path are already counted by negamax, so a
  cut-off leaf adds 0 for the boxes still unclaimed (El Kaddouri et al.: "boxes of the maximising player minus the
  minimising player's").
* Move ordering as the solver's (``move_ordering.ordered_moves``): safe lines first, then sacrifices by
  the number of boxes handed over.
* **Iterative deepening** under a node budget per move: depths 1, 2, ... up to ``depth``; when the budget
  runs out the move of the deepest finished iteration is played (so a big board never stalls). On a clock
  (``seconds``, the ``alphabeta:DEPTH@Ns`` spec) each depth gets ``CLOCK_SAFETY`` of the nodes the time left
  affords at the previous depth's node rate, so a move ends close to its budget, not past it. (The previous
  depth's rate, not the move's so far: deeper iterations reach more endgame leaves, whose values cost time but
  no nodes, so a node costs more with every depth.)

At the root every move's value is found exactly (a window just below the best so far), and the agent picks
uniformly at random among the moves of the best value.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from dabjax.game.geometry import BoardGeometry
from dabjax.game.host_agent import HostAgent
from dabjax.solvers import board_kernels, board_keys, endgame_values, move_ordering

DEFAULT_MAX_NODES = 2_000_000  # per move; about a second of search
_INFINITY = 1 << 20
_NODES, _LIMIT, _ABORTED = 0, 1, 2
# On a clock, the share of the time left that a depth plans its nodes for: an aborted depth stops at its node
# limit, and the node rate it meets is a little lower than its predecessor's.
CLOCK_SAFETY = 0.8


@njit(cache=False)  # self-recursive: numba cannot cache it (see dabjax.solvers.position_solver)
def _negamax(move, depth, remaining, alpha, beta, lines, valence, keys, line_boxes, box_lines, sym_bits, memo,
             stats):
    """Fail-soft depth-limited negamax; with ``move >= 0`` the mover's value of drawing ``move`` first."""
    if move >= 0:
        gained = board_keys.draw(move, lines, valence, keys, line_boxes, sym_bits)
        if gained > 0:
            value = gained + _negamax(-1, depth, remaining - gained, alpha - gained, beta - gained, lines,
                                      valence, keys, line_boxes, box_lines, sym_bits, memo, stats)
        else:
            value = -_negamax(-1, depth, remaining, -beta, -alpha, lines, valence, keys, line_boxes, box_lines,
                              sym_bits, memo, stats)
        board_keys.undraw(move, lines, valence, keys, line_boxes, sym_bits)
        return value
    if remaining == 0 or stats[_ABORTED] != 0:
        return 0
    if stats[_NODES] >= stats[_LIMIT]:
        stats[_ABORTED] = 1
        return 0
    stats[_NODES] += 1
    forced, pair_take, pair_decline, simple = move_ordering.chain_rule(lines, valence, line_boxes, box_lines)
    if forced >= 0:
        return _negamax(forced, depth, remaining, alpha, beta, lines, valence, keys, line_boxes, box_lines,
                        sym_bits, memo, stats)
    if pair_take >= 0:
        best = _negamax(pair_take, depth, remaining, alpha, beta, lines, valence, keys, line_boxes, box_lines,
                        sym_bits, memo, stats)
        if best < beta:
            value = _negamax(pair_decline, depth, remaining, max(alpha, best), beta, lines, valence, keys,
                             line_boxes, box_lines, sym_bits, memo, stats)
            best = max(best, value)
        return best
    if simple:
        return -endgame_values.simple_endgame_value(lines, valence, line_boxes, box_lines, memo)
    if depth <= 0:
        return 0  # the score heuristic: boxes won so far are counted along the path
    moves = move_ordering.ordered_moves(lines, valence, line_boxes, box_lines, -1)
    best = -_INFINITY
    for i in range(moves.shape[0]):
        value = _negamax(moves[i], depth - 1, remaining, alpha, beta, lines, valence, keys, line_boxes,
                         box_lines, sym_bits, memo, stats)
        if value > best:
            best = value
            if value > alpha:
                alpha = value
                if alpha >= beta:
                    break
    return best


class AlphaBetaAgent(HostAgent):
    """``alphabeta:DEPTH``: depth-limited alpha-beta with chain rules (see the module docstring).

    Args:
      depth: plies searched beyond the root's move (forced captures are free), at least 1.
      max_nodes: node budget per move for the iterative deepening (on a clock: of its first depth only).
      seconds: the wall time of a move (None: no clock, the node budget alone).
    """

    def __init__(self, depth: int, max_nodes: int = DEFAULT_MAX_NODES, seconds: float | None = None):
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"alpha-beta depth must be a positive integer, got {depth!r}")
        if seconds is not None and not float(seconds) > 0:
            raise ValueError(f"alpha-beta seconds a move must be > 0, got {seconds!r}")
        self.depth = depth
        self.max_nodes = int(max_nodes)
        self.seconds = None if seconds is None else float(seconds)
        self.name = f"alphabeta:{depth}" if seconds is None else f"alphabeta:{depth}@{self.seconds:g}s"
        self._move_seconds: list[float] = []
        self._memo = endgame_values.new_memo()

    def move_values(self, geometry: BoardGeometry, lines: np.ndarray, depth: int, stats: np.ndarray):
        """int64 ``[L]``: every undrawn line's depth-limited value (others ``-_INFINITY``), exact at the
        root; None if the node budget in ``stats`` ran out."""
        line_boxes, box_lines = board_kernels.kernel_tables(geometry)[:2]
        drawn = np.asarray(lines).astype(np.uint8)
        valence = (4 - drawn[geometry.box_lines].sum(axis=1)).astype(np.int64)
        remaining = int((valence > 0).sum())
        keys = np.zeros((0, 2), np.uint64)  # no symmetry keys: no transposition table here
        sym_bits = np.zeros((0, geometry.num_lines, 2), np.uint64)
        values = np.full(geometry.num_lines, -_INFINITY, np.int64)
        forced, take, decline, _ = move_ordering.chain_rule(drawn, valence, line_boxes, box_lines)
        if forced >= 0:
            candidates = np.array([forced])
        elif take >= 0:
            candidates = np.array([take, decline])
        else:
            candidates = move_ordering.ordered_moves(drawn, valence, line_boxes, box_lines, -1)
        best = -_INFINITY
        for move in candidates:
            value = _negamax(int(move), depth - 1, remaining, best - 1, _INFINITY, drawn, valence, keys,
                             line_boxes, box_lines, sym_bits, self._memo, stats)
            if stats[_ABORTED]:
                return None
            values[move] = value
            best = max(best, value)
        return values

    def choose(self, geometry: BoardGeometry, lines: np.ndarray, rng: np.random.Generator) -> int:
        """The move for one position (bool ``[L]`` drawn lines): best value of the deepest finished depth."""
        start = time.perf_counter()
        stats = np.array([0, self.max_nodes, 0], np.int64)
        chosen = None
        depth_start, nodes_before = start, 0
        for depth in range(1, self.depth + 1):
            if self.seconds is not None and depth > 1:
                now = time.perf_counter()
                if now - start >= self.seconds:
                    break
                rate = (stats[_NODES] - nodes_before) / max(now - depth_start, 1e-6)  # the previous depth's
                stats[_LIMIT] = stats[_NODES] + int(CLOCK_SAFETY * rate * (self.seconds - (now - start)))
                depth_start, nodes_before = now, int(stats[_NODES])
            values = self.move_values(geometry, lines, depth, stats)
            if values is None:
                break
            chosen = values
        if chosen is None:  # not even depth 1 within budget: any legal line
            move = int(rng.choice(np.flatnonzero(~np.asarray(lines, bool))))
        else:
            move = int(rng.choice(np.flatnonzero(chosen == chosen.max())))
        self._move_seconds.append(time.perf_counter() - start)
        return move

    @property
    def move_seconds(self) -> np.ndarray:
        """float ``[moves]``: the wall time of every move so far (numba's compile in the first one)."""
        return np.array(self._move_seconds, float)

    def act(self, geometry, rng, states, histories=None) -> np.ndarray:
        return np.array(
            [self.choose(geometry, states.lines[i], rng) if not states.terminated[i] else 0
             for i in range(states.lines.shape[0])],
            np.int32,
        )
