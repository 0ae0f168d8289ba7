"""Agents on a clock: ``SPEC@Ns`` plays every move in at most N seconds of wall time, and uses them.

An agent sized in simulations leaves most of a tournament's clock unused, and its user cannot know what a second
buys on their machine. ``ClockAgent`` spends a move's ``seconds`` in up to three phases:

1. **The solver first**, where it can finish. ``PositionSolver.prove_result`` proves the result class (win, draw
   or loss), not the margin, by null windows at the class boundaries: the network's value is its first guess and
   the network's policy orders the lines it tries, so the move it finds is the network's favourite among those
   that keep the proven result. Where draws are possible it asks the draw boundary first: a proof that runs out of
   time on the win still holds a line that keeps the draw (``ResultProof.floor``), and the move is then the
   search's if a short look shows it keeps the draw too, else that line (``"floor"``). The solver's share of the
   budget depends on how far the game is: the undrawn lines ``u`` against the agent's *reach*, the most undrawn
   lines at which proofs finish in time (a floor counts as finished: its time bought a line that keeps a draw);
   whatever the share, the search's first rung still fits after it. The reach starts at
   the board's ``START_REACH`` and follows the machine: two more timeouts than proofs at ``u <= reach`` lower it
   to ``u - 1``; a proof at ``u > reach`` in under a quarter of its share raises it to ``u``. Beyond the reach, a
   count of undrawn lines where ``GIVE_UP_TIMEOUTS`` proofs timed out and none finished is given up, with every
   count above it, until the reach rises past its highest: those moves search with the whole budget (a reach that
   falls and rises again, as it does at the edge of what finishes, does not try them afresh). Every
   ``RETRY_EVERY``-th move at a given-up count still tries a proof, so that a give-up is never for good: one that
   finishes quickly raises the reach past its highest. Boards of at most
   ``TABLE_LABEL_MAX_LINES`` lines read the whole-board table instead: every move is exact.
2. **Search for the rest**: the network's search at the most simulations the time left affords. The simulation
   counts form a ladder (the checkpoint's own count, the largest doubling of it that the budget affords, timed,
   and a few halvings of that), compiled and timed before the first move (``prepare``; ``compile_seconds``), so
   a search never compiles on the clock. A proof that found no keeping move in time still helps: the lines it
   refuted (proven to give up the result) are left out of the search's root (``mcts.run_search``'s
   ``root_mask``). Inside the tree the search keeps proven bounds (``search.proofs``): the endgame evaluator's
   exact leaves prove nodes above them, and a root the tree proves plays a move that keeps its result.
3. **Proofs of promising leaves**, where the root is beyond the solver's reach but its tree is not: a first search
   (``LEAF_SPLIT`` of the time left) finds the most visited unproven positions within the reach
   (``mcts.proof_frontier``), the solver proves what it can of them in the next share, and the final search, with
   the rest, treats those as solved (``mcts.KnownResults``): exact leaves whose bounds it backs up.

A move plans for ``PLANNED_SHARE`` of its budget (the solver's rounds and the search's time vary a little); the
arena reports each clock agent's slowest move (``move_seconds``). ``last_sources`` and ``counts`` say where each
move came from: ``"table"``, ``"solver"`` (a proven keeping move), ``"tree"`` (the search proved its root) or
``"search"``, or ``"floor"`` (the proof's line that keeps a draw, where the search's would give it up).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.evaluation import exact_play
from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry
from dabjax.game.host_agent import HostAgent, mover_margins
from dabjax.search import mcts, network
from dabjax.solvers import retrograde
from dabjax.solvers.labelled import TABLE_LABEL_MAX_LINES
from dabjax.solvers.position_solver import PositionSolver, best_result_moves, solver_refusal

PLANNED_SHARE = 0.85  # of a move's budget: the rest absorbs the solver's last round and the search's variation
# A search is planned at this many times its ladder time: one search's wall time varies by a third and more from
# call to call and from position to position, and a search cannot stop early.
SEARCH_SAFETY = 1.25
MOST_SIMULATIONS = 1 << 15  # the ladder's top, whatever the budget affords
LADDER_RUNGS = 5  # simulation counts compiled: each is a compile (seconds) before the first move
# Where the solver's reach starts, by the board's number of lines: the most undrawn lines at which result proofs
# finish within a 1-2 s share on two cores (docs/results.md, "Play on a clock"); other boards start at the
# default. The reach then follows the machine.
START_REACH = {40: 32, 60: 40}
DEFAULT_START_REACH = 30
# The solver's share of a move's budget by how far beyond the reach the position is (undrawn lines - reach):
# at or within the reach most of it, a little beyond some, far beyond nothing (a proof there never finishes).
SOLVER_SHARES = ((0, 0.95), (4, 0.4), (8, 0.1))
# Beyond the reach, an undrawn count whose root proofs timed out this often without one finishing is given up, and so
# is every count above it, until the reach rises past its highest: the solver's share there goes to the search.
GIVE_UP_TIMEOUTS = 8
# A given-up count still tries a root proof at every this-many-th move there (a few percent of its tries before).
RETRY_EVERY = 16
# Proofs of promising leaves: after a first search, the solver proves the most visited unproven positions of its
# tree within the reach (``mcts.proof_frontier``), and a second search treats those proven as solved
# (``mcts.KnownResults``). Further than ``LEAF_DEPTH`` lines beyond the reach, a tree of the simulations a move
# affords rarely holds such leaves, and the first search's time would be lost: one search there. The search time
# left after the root's proof splits into the first search, the leaves' proofs and the final search by
# ``LEAF_SPLIT``.
LEAVES = 8  # leaves proven at most, a move (a fixed shape: the searches compile once)
LEAF_DEPTH = 6
LEAF_SPLIT = (0.3, 0.3)  # the first search's and the leaves' shares of the time left; the final search the rest
# Where a proof found a line that keeps a draw but did not settle the win, the search's move is played if a look of
# this many nodes shows it keeps the draw too (a few milliseconds: the proof's table makes most looks short).
FLOOR_LOOK_NODES = 1 << 16


def solver_share(undrawn: int, reach: int) -> float:
    """The share of a move's budget the solver gets at ``undrawn`` lines, for the agent's ``reach``."""
    for beyond, share in SOLVER_SHARES:
        if undrawn - reach <= beyond:
            return share
    return 0.0


@dataclasses.dataclass
class MoveRecord:
    """One move on the clock: where it came from, its wall time, and the solver's part of it."""

    source: str  # "table", "solver", "tree", "search" or "floor"
    seconds: float
    undrawn: int
    simulations: int = 0  # of the search; 0 without one
    proven_result: int | None = None  # the result class the solver proved; None when it did not
    solver_seconds: float = 0.0
    leaves_proven: int = 0  # promising leaves of a first search the solver proved (``_search``)
    floor: int | None = None  # a class the solver proved a line keeps, where it did not prove the result
    refuted: int = 0  # root lines the solver proved to give the result up (left out of the search)
    leaf_seconds: float = 0.0  # the solver's time on them


@functools.lru_cache(maxsize=None)
def compiled_forward(network_config: network.NetworkConfig, geometry: BoardGeometry):
    """jit ``(params, states [N]) -> (masked logits [N, L], value [N])``."""
    evaluator = mcts.network_evaluator(network_config, geometry)

    def forward(params, states):
        logits, value = evaluator(params, None, states)
        return network.mask_logits(logits, ~states.lines), value

    return jax.jit(forward)


@functools.lru_cache(maxsize=None)
def _compiled_search(network_config: network.NetworkConfig, search_config: mcts.SearchConfig, env: env_lib.Env):
    """jit ``(params, key, states [N], root_mask [N, L], known (mcts.KnownResults [LEAVES]), max_undrawn [])
    -> (actions [N], the root proven in the tree [N], the tree's proof frontier (mcts.Frontier [N, LEAVES]))``:
    the search's move, and its promising leaves within ``max_undrawn`` undrawn lines."""
    evaluator = mcts.network_evaluator(network_config, env.geometry)
    search = mcts.search_function(search_config)

    def act(params, key, states, root_mask, known, max_undrawn):
        output = search(search_config, env, evaluator, params, key, states, root_mask, known)
        frontier = mcts.proof_frontier(output.tree, LEAVES, max_undrawn)
        return output.action, output.root_proven & ~output.root_solved, frontier

    return jax.jit(act)


class ClockAgent(HostAgent):
    """A network agent that plays each move within ``seconds`` (see the module docstring).

    Args:
      loaded: the network (``dabjax.training.checkpoint.PlayableCheckpoint``, e.g. from ``load_network``).
      geometry: the board it plays.
      seconds: the wall-time budget of one move (> 0).
      name: how the agent is called in tables (its spec).
      least_simulations: the ladder's first rung (default: the checkpoint's own simulations).
      solver: the position solver (default: the board's shared one; None on boards it does not take).
      table_max_lines: boards of at most this many lines read the whole-board table (0: always the solver).
      ladder_rungs: the most simulation counts compiled (at least 1; each is a compile before the first move).
      leaf_proofs: prove the promising leaves of a first search and search again with them solved (the module
        docstring); False: one search with all the time left.
    """

    def __init__(self, loaded, geometry: BoardGeometry, seconds: float, name: str = "clock", *,
                 least_simulations: int | None = None, solver: PositionSolver | None = None,
                 table_max_lines: int = TABLE_LABEL_MAX_LINES, ladder_rungs: int = LADDER_RUNGS,
                 leaf_proofs: bool = True):
        if not float(seconds) > 0:
            raise ValueError(f"{name}: a clock takes seconds a move > 0, got {seconds!r}")
        if int(ladder_rungs) < 1:
            raise ValueError(f"{name}: ladder_rungs must be at least 1, got {ladder_rungs!r}")
        self.ladder_rungs = int(ladder_rungs)
        self.leaf_proofs = bool(leaf_proofs)
        self.loaded, self.geometry, self.seconds, self.name = loaded, geometry, float(seconds), name
        self.env = env_lib.Env.of(geometry, loaded.early_termination)  # the rule it was trained with
        self.least_simulations = int(least_simulations or loaded.search_config.num_simulations)
        self.table_max_lines = int(table_max_lines)
        self.uses_table = geometry.num_lines <= self.table_max_lines
        self.solver = solver
        self.reach = START_REACH.get(geometry.num_lines, DEFAULT_START_REACH)
        self.highest_reach = self.reach  # give-ups are lifted only when the reach rises past this
        self._skipped: collections.Counter = collections.Counter()  # root proofs skipped, by undrawn lines
        self._proved: collections.Counter = collections.Counter()  # by undrawn lines
        self._timeouts: collections.Counter = collections.Counter()
        self.search_seconds: dict[int, float] = {}  # simulations -> seconds of one search (batch 1)
        self.compile_seconds: float | None = None
        self.records: list[MoveRecord] = []
        self._everything = np.ones((1, geometry.num_lines), bool)  # a root mask that leaves every move in
        self._nothing_known = mcts.no_known_results(LEAVES, geometry.num_lines)
        self.last_sources: list[str] = []
        self.counts: collections.Counter = collections.Counter()

    # --- before the first move ---------------------------------------------------------------------------

    def _config(self, simulations: int) -> mcts.SearchConfig:
        return dataclasses.replace(self.loaded.search_config, num_simulations=int(simulations), gumbel_scale=0.0,
                                   proofs=True)

    def _timed_search(self, simulations: int, state, root_mask, known=None, max_undrawn: int = 0
                      ) -> tuple[int, bool, float, mcts.Frontier]:
        """``(move, whether the tree proved the root, seconds, the tree's proof frontier within max_undrawn
        undrawn lines)`` of one search (``known``: positions proven beforehand, ``mcts.KnownResults``)."""
        search = _compiled_search(self.loaded.network_config, self._config(simulations), self.env)
        known = self._nothing_known if known is None else known
        start = time.perf_counter()
        action, proven, frontier = jax.device_get(search(self.loaded.params, jax.random.PRNGKey(0), state,
                                                         root_mask, known, np.int32(max_undrawn)))
        return int(action[0]), bool(proven[0]), time.perf_counter() - start, frontier

    def prepare(self) -> None:
        """Compiles (and times) everything a move runs, before the first move: the network's forward pass, the
        solver's kernels, and the search at every rung of the ladder the budget affords. Idempotent."""
        if self.compile_seconds is not None:
            return
        start = time.perf_counter()
        state = env_lib.batch_init(self.geometry, 1)
        jax.block_until_ready(compiled_forward(self.loaded.network_config, self.geometry)(self.loaded.params, state))
        if self.uses_table:  # every move is the table's: no search to compile
            exact_play.table(self.geometry)
            self.compile_seconds = time.perf_counter() - start
            return
        if solver_refusal(self.geometry) is None:
            if self.solver is None:
                self.solver = exact_play.ready_solver(self.geometry)
            exact_play.compile_solver_kernels(self.geometry)  # numba compiles on a first search: not on the clock
            if self.solver.threads > 1:
                self.solver._thread_solvers()  # the other threads' solvers and their pool, made once
        for simulations in self._ladder(state):
            self._time(simulations, state)
        self.compile_seconds = time.perf_counter() - start

    def _ladder(self, state) -> list[int]:
        """The simulation counts to compile: the least, the largest doubling of it whose search fits the planned
        budget (``SEARCH_SAFETY`` times its time), and the ``ladder_rungs - 2`` halvings below that. The top is
        first guessed from the least's time, then timed, and moved up or down until it fits and its double does
        not: a search's time per simulation falls as it grows, so the least's alone underrates what the budget
        affords."""
        least, planned = self.least_simulations, PLANNED_SHARE * self.seconds / SEARCH_SAFETY
        least_seconds = self._time(least, state)  # the first rung, timed whatever the ladder above it
        top = least
        while 2 * top <= MOST_SIMULATIONS and least_seconds * 2 * top / least <= planned:
            top *= 2
        while top > least and self._time(top, state) > planned:
            top //= 2
        while 2 * top <= MOST_SIMULATIONS and self._time(top, state) * 2 <= planned and self._time(
                2 * top, state) <= planned:
            top *= 2
        rungs, rung = [], top
        while rung > least and len(rungs) < self.ladder_rungs - 1:
            rungs.append(rung)
            rung //= 2
        for simulations in [s for s in self.search_seconds if s not in rungs and s != least]:
            del self.search_seconds[simulations]  # timed on the way, not kept: a search never picks it
        return sorted(rungs)

    def _time(self, simulations: int, state) -> float:
        """The seconds of one search at ``simulations`` (batch 1), compiled and timed once (the median of three:
        the best of a few underrates what a move will see)."""
        if simulations not in self.search_seconds:
            self._timed_search(simulations, state, self._everything)  # compiles
            self.search_seconds[simulations] = float(np.median(
                [self._timed_search(simulations, state, self._everything)[2] for _ in range(3)]))
        return self.search_seconds[simulations]

    # --- one move ----------------------------------------------------------------------------------------

    def _simulations_for(self, seconds_left: float) -> int:
        """The ladder's largest rung whose search fits ``seconds_left``, ``SEARCH_SAFETY`` times its time (its
        first rung if none does)."""
        fitting = [s for s, t in self.search_seconds.items() if SEARCH_SAFETY * t <= seconds_left]
        return max(fitting) if fitting else min(self.search_seconds)

    def _prove(self, lines, margin: int, order, value: float, undrawn: int, seconds: float):
        """The solver's proof within ``seconds``, the reach updated from how it went."""
        proof = self.solver.prove_result(lines, margin, order=order, guess=int(np.sign(value)), time_limit=seconds)
        if proof.result is None and proof.floor is None:  # a draw proven kept counts as a proof: time well spent
            self._timeouts[undrawn] += 1
            if undrawn <= self.reach and self._timeouts[undrawn] >= self._proved[undrawn] + 2:
                self.reach = undrawn - 1
        else:
            self._proved[undrawn] += 1
            if undrawn > self.reach and proof.seconds < seconds / 4:
                self.reach = undrawn
                if undrawn > self.highest_reach:
                    self.highest_reach = undrawn
                    for beyond in [u for u in self._timeouts if u > undrawn]:
                        del self._timeouts[beyond]  # timed out on a smaller share, further beyond: tried afresh
        return proof

    def _given_up(self, undrawn: int) -> bool:
        """Whether root proofs at ``undrawn`` lines are not tried: beyond the reach, some count from the reach up to
        ``undrawn`` saw ``GIVE_UP_TIMEOUTS`` timeouts and no proof (since the reach last rose past its highest)."""
        return any(self._timeouts[u] >= GIVE_UP_TIMEOUTS and self._proved[u] == 0
                   for u in range(self.reach + 1, undrawn + 1))

    def _skips_proof(self, undrawn: int) -> bool:
        """Whether this move at ``undrawn`` lines skips its root proof: the count is given up (``_given_up``), and
        this is not one of its every ``RETRY_EVERY``-th moves, which try anyway."""
        if not self._given_up(undrawn):
            return False
        self._skipped[undrawn] += 1
        return self._skipped[undrawn] % RETRY_EVERY != 0

    def _move(self, state) -> int:
        """The move of one running game (``state``: batch 1, NumPy leaves) within the budget, which counts from
        the network's first look at the position."""
        start = time.perf_counter()
        lines = np.asarray(state.lines[0], bool)
        margin = int(mover_margins(state.scores, state.current_player)[0])
        state = jax.tree_util.tree_map(jnp.asarray, state)
        logits, value = jax.device_get(compiled_forward(self.loaded.network_config, self.geometry)(
            self.loaded.params, state))
        logits, value = np.asarray(logits[0]), float(value[0])
        undrawn = int((~lines).sum())
        order = np.argsort(-logits, kind="stable")
        record = MoveRecord("search", 0.0, undrawn)
        root_mask = np.ones((1, lines.size), bool)
        if self.uses_table:
            values = retrograde.move_values(self.geometry, exact_play.table(self.geometry), lines)
            keeps = best_result_moves(values, ~lines, margin)
            record.source, move = "table", int(next(m for m in order if keeps[m]))
        else:
            move = -1
            share = 0.0
            if self.solver is not None and not self._skips_proof(undrawn):
                share = solver_share(undrawn, self.reach)
            floor, floor_move = None, -1
            seconds = 0.0  # the proof's time; none left for it: not tried, not counted as a timeout
            if share > 0:
                # Whatever the share, the ladder's first rung still fits after a proof that runs out.
                planned = PLANNED_SHARE * self.seconds
                seconds = min(share * planned, planned - SEARCH_SAFETY * min(self.search_seconds.values()))
            if seconds > 0:
                proof = self._prove(lines, margin, order, value, undrawn, seconds)
                record.proven_result, record.solver_seconds = proof.result, proof.seconds
                if proof.move >= 0:
                    record.source, move = "solver", proof.move
                root_mask = ~proof.refuted[None]
                record.refuted = int(proof.refuted.sum())
                floor, floor_move = proof.floor, proof.floor_move
                if move < 0 and floor_move >= 0:
                    record.floor = floor
            if move < 0:
                move = self._search(state, root_mask, undrawn, start, record)
                if floor_move >= 0 and move != floor_move:
                    move = self._keep_floor(lines, margin, move, floor, floor_move, start, record)
        record.seconds = time.perf_counter() - start
        self.records.append(record)
        return move

    def _search(self, state, root_mask, undrawn: int, start: float, record: MoveRecord) -> int:
        """The search's move with the planned time left (counted from ``start``). Where promising leaves may be
        in reach (``leaf_proofs``, a solver, at most ``LEAF_DEPTH`` lines beyond the reach, time for two searches
        of the ladder's first rung, and a root not proven lost), a first search finds them, the solver proves what
        it can of them, and the final search treats those as solved (where it proves none, the final search runs
        only if it affords more simulations than the first)."""
        planned = PLANNED_SHARE * self.seconds
        total = planned - (time.perf_counter() - start)
        first_share, leaf_share = LEAF_SPLIT
        least_seconds = min(self.search_seconds.values())
        fits = least_seconds <= first_share * total and least_seconds <= (1 - first_share - leaf_share) * total
        # A root proven lost keeps its result whatever is played: proofs below it cannot change the move's class.
        leaves = (self.leaf_proofs and self.solver is not None and undrawn - self.reach <= LEAF_DEPTH
                  and record.proven_result != -1 and fits)
        if not leaves:
            return self._final_search(state, root_mask, None, planned - (time.perf_counter() - start), record)
        first_simulations = self._simulations_for(first_share * total)
        first_move, proven, seconds, frontier = self._timed_search(first_simulations, state, root_mask,
                                                                   max_undrawn=self.reach)
        self._follow(first_simulations, seconds)
        record.source, record.simulations = ("tree" if proven else "search"), first_simulations
        if proven:
            return first_move
        # The leaves' deadline counts from the move's start: a first search that ran over takes from them.
        deadline = start + (planned - total) + (first_share + leaf_share) * total
        began = time.perf_counter()
        known, record.leaves_proven = self._prove_leaves(frontier, deadline)
        record.leaf_seconds = time.perf_counter() - began
        left = planned - (time.perf_counter() - start)
        if least_seconds > left:  # no time left: the first move stands
            return first_move
        if known is None:  # nothing proven: a search without the first's tree, only if it affords more
            if self._simulations_for(left) <= first_simulations:
                return first_move
            return self._final_search(state, root_mask, None, left, record)
        return self._final_search(state, root_mask, known, left, record)

    def _keep_floor(self, lines, margin: int, move: int, floor: int, floor_move: int, start: float,
                    record: MoveRecord) -> int:
        """The search's ``move`` where a short look shows it keeps the proven ``floor`` (a draw), else
        ``floor_move``, the line the proof showed to keep it: where no winning line was proven, the search may know
        one among those that keep a draw, but a line not shown to keep the draw is never played."""
        # The look may use the budget's unplanned rest, halved: a search that ran over leaves it less.
        left = min(self.seconds - (time.perf_counter() - start), (1 - PLANNED_SHARE) * self.seconds / 2)
        keeps = self.solver.keeps_result(lines, margin, move, floor, max_nodes=FLOOR_LOOK_NODES,
                                         time_limit=max(left, 0.0))
        if keeps:
            return move
        record.source = "floor"
        return floor_move

    def _final_search(self, state, root_mask, known, seconds_left: float, record: MoveRecord) -> int:
        """The move of a search at the most simulations ``seconds_left`` affords (``known``: proven positions)."""
        record.simulations = self._simulations_for(seconds_left)
        move, proven, seconds, _ = self._timed_search(record.simulations, state, root_mask, known)
        record.source = "tree" if proven else "search"
        self._follow(record.simulations, seconds)
        return move

    def _follow(self, simulations: int, seconds: float) -> None:
        """The ladder's time of a search follows the machine: up quickly (an overrun must not repeat), down
        slowly."""
        rate = 0.5 if seconds > self.search_seconds[simulations] else 0.2
        self.search_seconds[simulations] = (1 - rate) * self.search_seconds[simulations] + rate * seconds

    def _prove_leaves(self, frontier: mcts.Frontier, deadline: float) -> tuple[mcts.KnownResults | None, int]:
        """``(known results, how many)``: the solver's proofs of the frontier's positions (most visited first),
        each within the time left before ``deadline`` (``time.perf_counter``'s)."""
        lines, margin, result, valid = (np.zeros((LEAVES, self.geometry.num_lines), bool), np.zeros(LEAVES, np.int32),
                                        np.zeros(LEAVES, np.float32), np.zeros(LEAVES, bool))
        for i in np.flatnonzero(np.asarray(frontier.valid[0])):
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            leaf_lines, leaf_margin = np.asarray(frontier.lines[0, i], bool), int(frontier.margin[0, i])
            if (valid & (margin == leaf_margin) & (lines == leaf_lines).all(-1)).any():
                continue  # a transposition of a leaf proven already
            proof = self.solver.prove_result(leaf_lines, leaf_margin,
                                             order=np.argsort(-np.asarray(frontier.prior_logits[0, i]), kind="stable"),
                                             guess=int(np.sign(frontier.value[0, i])), time_limit=left,
                                             keeping_move=False)
            if proof.result is not None:
                lines[i], margin[i], result[i], valid[i] = leaf_lines, leaf_margin, proof.result, True
        if not valid.any():
            return None, 0
        return mcts.KnownResults(lines=lines, margin=margin, result=result, valid=valid), int(valid.sum())

    def act(self, geometry, rng, states, histories=None) -> np.ndarray:
        if geometry != self.geometry:
            raise ValueError(f"{self.name} was made for {self.geometry.name}, not {geometry.name}")
        self.prepare()
        running = ~np.asarray(states.terminated, bool)
        moves = np.zeros(running.shape[0], np.int32)
        sources = [""] * running.shape[0]
        for i in np.flatnonzero(running):  # one game after another: each has the whole clock
            moves[i] = self._move(jax.tree_util.tree_map(lambda x: np.asarray(x)[i:i + 1], states))
            sources[i] = self.records[-1].source
        self.last_sources = sources
        self.counts.update(s for s in sources if s)
        return moves

    # --- what happened -----------------------------------------------------------------------------------

    @property
    def move_seconds(self) -> np.ndarray:
        """float ``[moves]``: the wall time of every move so far (compiling before the first one apart)."""
        return np.array([r.seconds for r in self.records], float)

    def summary(self) -> str:
        """One line: moves by source, the slowest move against the budget, the ladder, the compile time."""
        times = self.move_seconds
        sources = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        if self.leaf_proofs and not self.uses_table:
            leaves = sum(r.leaves_proven for r in self.records)
            sources += f"; {leaves} leaves proven in {sum(r.leaves_proven > 0 for r in self.records)} moves"
        slowest = f"slowest {times.max():.3f} s of {self.seconds:g} s" if times.size else "no moves"
        ladder = "/".join(str(s) for s in sorted(self.search_seconds))
        return (f"{self.name}: {len(times)} moves ({sources}); {slowest}; simulations {ladder}; solver reach "
                f"{self.reach} undrawn lines; compiled in {self.compile_seconds or 0:.1f} s before the first move")
