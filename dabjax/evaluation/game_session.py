"""The game behind ``dabjax serve``'s page: one game of a person against an agent, its take-backs, replays and
set-up mode, the agent's search figures for the page, the analysis board (exact values within a budget) and the
agent's clock (the started spec, or it on a clock of N seconds a move: ``SPEC@Ns``, ``dabjax.evaluation.clock``).

The session owns the game: the env judges every move (``dabjax.game.record.after_move`` plays it through
``dabjax.game.notation``) and the board is drawn as SVG (``dabjax.evaluation.render``). ``view()`` is what the page
gets; ``dabjax.cli.serve`` puts it behind HTTP (the command layer); the session itself is play's, beside the
arena. Callers hold ``session.lock`` around each call.
"""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.evaluation import agent_registry, arena, exact_play, render
from dabjax.game import notation
from dabjax.game import record as game_record
from dabjax.game.geometry import BoardGeometry
from dabjax.solvers.labelled import TABLE_LABEL_MAX_LINES
from dabjax.solvers.position_solver import PositionSolver, default_threads, solver_refusal

TOP_MOVES = 5  # candidate moves shown from the agent's search
ANALYSIS_SECONDS = 2.0  # the analysis board's default solver budget
HUMAN_NAME = "You"

def top_moves(policy: np.ndarray, legal: np.ndarray, count: int = TOP_MOVES) -> list[tuple[int, float]]:
    """The ``count`` legal lines of largest share (ties: lowest line first, as ``argmax``), with their shares;
    lines of share 0 are left out. ``policy`` float ``[L]``, ``legal`` bool ``[L]``."""
    shares = np.where(legal, np.asarray(policy, np.float64), 0.0)
    order = sorted(np.flatnonzero(shares > 0), key=lambda line: (-shares[line], line))
    return [(int(line), float(shares[line])) for line in order[:count]]


# --- the game -------------------------------------------------------------------------------------------


class GameSession:
    """The one game the page shows. Thread-safe: every request holds ``lock``, but the analysis board's solve
    runs without it (under ``solve_lock``, on a snapshot; ``analyse_board``), and so does a new clock's compile
    (under ``clock_lock``, which an agent's move takes before ``lock``: it waits for the clock; ``make_clock``).

    ``policy``: the agent's ``agent_registry.search_policy`` or None. ``agent_name`` is the spec of the agent
    playing now, ``started_spec`` the one the session was made with (the page's clock choice starts from it).
    """

    def __init__(self, geometry: BoardGeometry, agent, agent_name: str, seed: int = 0,
                 policy: agent_registry.SearchPolicy | None = None, human_first: bool = True):
        self.geometry = geometry
        self.agent = agent
        self.agent_name = agent_name
        self.started_spec = agent_name
        self.policy = policy
        self.lock = threading.Lock()
        self.solve_lock = threading.Lock()  # one analysis solve at a time (the solver's table is not shared)
        self.clock_lock = threading.Lock()  # one clock change at a time; agent moves wait for it
        self._agents = {agent_name: (agent, policy)}  # by spec: a clock chosen again is not compiled again
        self.preparing_clock = ""  # the spec whose clock is compiling, for the page's status
        self._solver = None  # the analysis board's own position solver, made on first use
        self._key = jax.random.PRNGKey(seed)
        self.version = 0  # counts changes (new games and moves), so the page can drop answers that arrive late
        self.setup = False
        self.message = ""  # the last action's sentence, kept for views that are not actions
        self.new_game(human_first)

    def _changed(self) -> None:
        """A new position: a new version, and the analysis of the old one is gone."""
        self.version += 1
        self.board_analysis: dict | None = None

    def new_game(self, human_first: bool = True) -> dict:
        self._changed()
        self.human_player = 0 if human_first else 1
        self.moves: list[int] = []
        self.position = game_record.start_position(self.geometry)
        self.analysis: dict | None = None
        first = HUMAN_NAME if human_first else self.agent_name
        return self.view(f"New game: {first} moves first.")

    def _set_moves(self, moves: list[int]) -> None:
        self.position = game_record.replay(self.geometry, moves)[-1]
        self.moves = [int(m) for m in moves]
        self.analysis = None
        self._changed()

    def undo(self) -> dict:
        """Takes back the human's last move and everything after it (set-up mode: the last line)."""
        if self.setup:
            if not self.moves:
                raise ValueError("nothing to take back")
            self._set_moves(self.moves[:-1])
            return self.view("Took back the last line.")
        drawers = self.position.drawer[self.moves] if self.moves else np.zeros(0, np.int8)
        mine = np.flatnonzero(drawers == self.human_player)
        if mine.size == 0:
            raise ValueError("nothing to take back: you have not moved yet")
        count = len(self.moves) - int(mine[-1])
        self._set_moves(self.moves[: int(mine[-1])])
        return self.view(f"Took back {count} move{'s' if count > 1 else ''}: your turn again.")

    def replay(self, record) -> dict:
        """The game of a move list (``"h 0 0; v 0 1"``, ``"0 1 2 5"``, or a list: ``notation.parse_move_list``)."""
        lines = notation.parse_move_list(self.geometry, record)
        game_record.replay(self.geometry, lines)  # raises ValueError naming the first illegal move
        self._set_moves(lines)
        if not self.game_over:
            self.human_player = int(self.position.state.current_player)
        return self.view(f"Replayed {len(lines)} moves" + ("." if self.game_over else ": your turn."))

    def set_setup(self, on: bool) -> dict:
        """Set-up mode on (clicks draw lines for both sides, the agent waits) or off (the human plays the side
        to move)."""
        self.setup = bool(on)
        self._changed()
        if on:
            return self.view("Set-up: click lines for both sides; switch set-up off to play from here.")
        if not self.game_over:
            self.human_player = int(self.position.state.current_player)
        return self.view("Set-up done: your turn.")

    @property
    def names(self) -> tuple[str, str]:
        """The players' names, player 0 first."""
        return (HUMAN_NAME, self.agent_name) if self.human_player == 0 else (self.agent_name, HUMAN_NAME)

    @property
    def game_over(self) -> bool:
        return bool(self.position.state.terminated)

    @property
    def to_move(self) -> str | None:
        """``"human"``, ``"agent"`` or None once the game is over."""
        if self.game_over:
            return None
        if self.setup:
            return "human"  # the human draws for both sides
        return "human" if int(self.position.state.current_player) == self.human_player else "agent"

    def _check_turn(self, mover: str) -> None:
        if self.game_over:
            raise ValueError("the game is over: start a new game")
        if self.setup and mover == "agent":
            raise ValueError("set-up mode: switch it off for the agent to play")
        if self.to_move != mover:
            raise ValueError(f"it is {self.agent_name}'s turn" if mover == "human" else "it is your turn")

    def _play(self, move, who: str) -> str:
        """Plays ``move`` (any notation) through the env; returns the sentence describing it."""
        before = self.position
        self.position = game_record.after_move(self.geometry, before, move)
        self.moves.append(int(self.position.last_move))
        self._changed()
        return notation.describe_move(self.geometry, before.state, self.position.state, who, self.position.last_move)

    def human_move(self, move) -> dict:
        """The human draws ``move`` (a line index or ``h R C`` / ``v R C``); ValueError says why not."""
        self._check_turn("human")
        who = notation.PLAYER_LABELS[int(self.position.state.current_player)] if self.setup else HUMAN_NAME
        message = self._play(move, who)
        self.analysis = None  # it was about the agent's previous move
        return self.view(message)

    def agent_move(self, analyse: bool = False) -> dict:
        """The agent plays one move; with ``analyse``, its search's top moves for it are kept for the view. An
        agent on a clock says how long the move took, against its budget."""
        self._check_turn("agent")
        self._key, key = jax.random.split(self._key)
        state = self.position.state
        _prepare(self.agent)  # a clock compiles before its first move, not on its clock
        start = time.perf_counter()
        line = arena.agent_move(self.geometry, self.agent, key, state, self.moves)
        seconds = time.perf_counter() - start
        recorded = getattr(self.agent, "move_seconds", None)  # a ClockAgent times the move itself, on its clock
        if recorded is not None and len(recorded):
            seconds = float(recorded[-1])
        self.analysis = self._analyse(key, state, line) if analyse else None
        message = self._play(line, self.agent_name)
        budget = self.clock_seconds
        if budget is not None:
            message += f" in {seconds:.2f} s of its {budget:g} s"
        return self.view(message)

    # the agent's clock: the started spec, or it with @Ns; the compile runs outside ``lock``

    @property
    def clock_seconds(self) -> float | None:
        """The seconds a move of the agent playing now; None when it plays on no clock."""
        spec = _read_spec(self.agent_name)
        return None if spec is None else spec.clock_seconds

    @property
    def clock_refusal(self) -> str:
        """Why the started agent takes no clock ("" when it takes one)."""
        spec = _read_spec(self.started_spec)
        if spec is not None and spec.kind in agent_registry.CLOCK_KINDS:
            return ""
        kinds = ", ".join(k + ":" for k in agent_registry.CLOCK_KINDS)
        return f"{self.started_spec} plays on no clock: clocks are for {kinds} agents"

    def clock_spec(self, seconds: float | None) -> str:
        """The spec of the agent on a clock of ``seconds`` a move: the started spec less its own clock or
        ``+exact`` (a clock solves by itself), with ``@Ns``; None: the started spec as it is. ValueError names
        a bad ``seconds`` or an agent that takes no clock."""
        if seconds is None:
            return self.started_spec
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
            raise ValueError(f"seconds a move must be a number > 0 (or null: as started), got {seconds!r}")
        if self.clock_refusal:
            raise ValueError(self.clock_refusal)
        base = agent_registry.parse_agent_spec(self.started_spec).without_exact
        return f"{base}{agent_registry.CLOCK_MARK}{seconds:g}s"

    def make_clock(self, spec: str) -> tuple:
        """``(agent, policy)`` of ``spec`` (``clock_spec``), compiled (call holding ``clock_lock``, not ``lock``:
        a clock's compile takes seconds to minutes, and the page's other requests are answered meanwhile). A
        spec made before is not made again."""
        if spec in self._agents:
            return self._agents[spec]
        agent = agent_registry.make_agent(spec, self.geometry)
        policy = shown_search(spec, self.geometry)
        _prepare(agent)
        if policy is not None:  # compiled now, not at the first move shown
            state = game_record.start_position(self.geometry).state
            batch = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], state)
            jax.block_until_ready(policy(jax.random.PRNGKey(0), batch))
        self._agents[spec] = (agent, policy)
        return agent, policy

    def use_agent(self, spec: str, agent, policy) -> dict:
        """The agent of ``spec`` plays from its next move on (call holding ``lock``); the game goes on."""
        self.agent, self.policy, self.agent_name = agent, policy, spec
        self.analysis = None  # an analysis belongs to the agent that searched it
        seconds = self.clock_seconds
        clock = f"on a clock of {seconds:g} s a move" if seconds is not None else "as started"
        compiled = getattr(agent, "compile_seconds", None)
        compiled = f" (its searches compiled in {compiled:.1f} s)" if compiled else ""
        return self.view(f"{spec} plays from its next move, {clock}{compiled}.")

    def _analyse(self, key, state, line: int) -> dict:
        name = notation.move_name(self.geometry, line)
        base = dict(move_number=len(self.moves) + 1, played=line, played_name=name)
        source = (getattr(self.agent, "last_sources", None) or [""])[0]
        clock = self.clock_seconds
        if clock is not None and source in ("table", "solver"):  # a ClockAgent's move keeps the proven result
            how = "read the whole-board table" if source == "table" else "proved the result with the solver"
            return dict(base, available=False, moves=[],
                        text=f"{self.agent_name} {how}: {name} keeps the best result (win, draw or loss), the "
                             f"network's favourite among the lines that do (move {len(self.moves) + 1}).")
        if clock is not None and source == "floor":  # the search's line was not shown to keep the proven draw
            return dict(base, available=False, moves=[],
                        text=f"{self.agent_name} proved with the solver that {name} keeps at least a draw; no "
                             f"winning line was proven within the move, and the search's favourite was not shown "
                             f"to keep the draw (move {len(self.moves) + 1}).")
        if source in ("table", "solver"):  # an ExactAgent's solved move
            return dict(base, available=False, moves=[],
                        text=f"{self.agent_name} solved the position exactly: {name} keeps the best margin "
                             f"(move {len(self.moves) + 1}).")
        if self.policy is None:
            return dict(base, available=False, moves=[],
                        text=f"{self.agent_name} does not search (or does not show its search): only its move "
                             f"{name} is shown.")
        if clock is not None:  # the move's search ran at the simulations its clock afforded
            records = getattr(self.agent, "records", None)
            simulations = f" at {records[-1].simulations} simulations" if records else ""
            return dict(base, available=True, moves=self._search_top_moves(key, state),
                        text=f"{self.agent_name} searched{simulations} within its {clock:g} s before its move "
                             f"{name} (move {len(self.moves) + 1}); shown: its network's search at the "
                             f"checkpoint's own setting, run apart:")
        return dict(base, available=True, moves=self._search_top_moves(key, state),
                    text=f"{self.agent_name}'s search before its move {name} (move {len(self.moves) + 1}):")

    def _search_top_moves(self, key, state) -> list[dict]:
        """The ``TOP_MOVES`` lines of largest share in the agent's search of ``state`` (one unbatched state),
        ``[{line, name, share}]``."""
        batch = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], state)
        policy = np.asarray(self.policy(key, batch))[0]
        return [dict(line=line, name=notation.move_name(self.geometry, line), share=share)
                for line, share in top_moves(policy, ~np.asarray(state.lines, bool))]

    # the analysis board: snapshot under the lock, solve without it, keep the answer if nothing moved

    def analysis_snapshot(self) -> tuple[int, game_record.Position]:
        return self.version, self.position

    def analyse_board(self, position: game_record.Position, seconds: float) -> dict:
        """The analysis of ``position`` (call without holding ``lock``): exact values within ``seconds``,
        else the agent's search figures, saying which. ``kind``: ``exact``, ``search``, ``over``, or, when the
        agent does not search, ``timeout`` (the budget ran out) or ``unsolvable`` (a board the solver cannot
        take)."""
        state = position.state
        to_move = notation.PLAYER_LABELS[int(state.current_player)]
        if bool(state.terminated):
            return dict(kind="over", moves=[], text="The game is over.")
        refusal = solver_refusal(self.geometry)
        if refusal is not None:
            return self._search_instead(state, "unsolvable", f"No exact values ({refusal})")
        with self.solve_lock:
            if self._solver is None and self.geometry.num_lines > TABLE_LABEL_MAX_LINES:
                self._solver = PositionSolver(self.geometry, threads=default_threads())
            result = exact_play.analyse_position(self.geometry, state.lines, int(state.margin), seconds,
                                                 self._solver)
        if result.finished:
            legal = np.flatnonzero(~np.asarray(state.lines, bool))
            order = sorted(legal, key=lambda line: (-int(result.final_margins[line]), line))
            moves = [dict(line=int(line), name=notation.move_name(self.geometry, line),
                          margin=int(result.final_margins[line]), best=bool(result.best_result[line]))
                     for line in order]
            how = "the whole-board table" if result.source == "table" else f"the solver, {result.seconds:.2f} s"
            return dict(kind="exact", moves=moves, seconds=result.seconds,
                        text=f"Exact ({how}): the final margin each line keeps for {to_move} under perfect "
                             f"play; green lines keep the best result.")
        return self._search_instead(state, "timeout", f"The solver did not finish within {seconds:g} s")

    def _search_instead(self, state, kind: str, reason: str) -> dict:
        """The analysis without exact values: the agent's search shares (kind ``search``), or, when the agent
        does not search, nothing but ``reason`` (the sentence saying why there are no exact values) as ``kind``."""
        if self.policy is None:
            return dict(kind=kind, moves=[], text=f"{reason}, and {self.agent_name} does not search.")
        return dict(kind="search", moves=self._search_top_moves(jax.random.PRNGKey(0), state),
                    text=f"{reason}: {self.agent_name}'s search instead (its shares of the moves, not exact).")

    def keep_board_analysis(self, version: int, analysis: dict) -> dict:
        """Keeps ``analysis`` if the position is still the one analysed (call holding ``lock``)."""
        if version == self.version:
            self.board_analysis = analysis
            return self.view()
        return self.view(error="The position changed during the analysis: ask again.")

    def status(self) -> str:
        scores = [int(s) for s in self.position.state.scores]
        mine, theirs = scores[self.human_player], scores[1 - self.human_player]
        if self.game_over:
            verdict = "You win" if mine > theirs else ("You lose" if mine < theirs else "Draw")
            return f"{verdict} {mine} - {theirs}."
        label = notation.PLAYER_LABELS[int(self.position.state.current_player)]
        if self.to_move == "human":
            return f"Your turn ({label})."
        return f"{self.agent_name} ({label}) to move."

    def view(self, message: str | None = None, error: str = "") -> dict:
        """Everything the page shows, as JSON-ready data. ``message`` describes the last action; without one
        (a state request, an analysis) the last action's message is shown again."""
        if message is None:
            message = self.message
        self.message = message
        state = self.position.state
        analysis, board = self.analysis, self.board_analysis
        shares = {m["line"]: m["share"] for m in analysis["moves"]} if analysis else None
        exact = None
        if board is not None and board["kind"] == "exact":
            shares, exact = None, {m["line"]: (m["margin"], m["best"]) for m in board["moves"]}
        elif board is not None and board["kind"] == "search":
            shares = {m["line"]: m["share"] for m in board["moves"]}
        svg = render.board_svg(self.geometry, self.position, self.names, shares, interactive=True, captions=False,
                               exact=exact)
        scores = [int(s) for s in state.scores]
        players = [dict(label=notation.PLAYER_LABELS[p], name=self.names[p], score=scores[p],
                        colour=render.PLAYER_COLOURS[p], human=p == self.human_player) for p in (0, 1)]
        result = None
        if self.game_over:
            margin = scores[self.human_player] - scores[1 - self.human_player]
            result = "win" if margin > 0 else ("loss" if margin < 0 else "draw")
        return dict(version=self.version, board=self.geometry.name, agent=self.agent_name,
                    human_player=self.human_player,
                    players=players, current_player=int(state.current_player), to_move=self.to_move,
                    game_over=self.game_over, result=result, status=self.status(), moves=list(self.moves),
                    move_names=[notation.move_name(self.geometry, m) for m in self.moves],
                    drawers=[int(player) for player in self.position.drawer[self.moves]],
                    message=message, error=error, analysis=analysis, searches=self.policy is not None, svg=svg,
                    setup=self.setup, board_analysis=board, record=notation.moves_to_string(self.geometry, self.moves),
                    started_agent=self.started_spec, clock_seconds=self.clock_seconds,
                    clock_refusal=self.clock_refusal, preparing_clock=self.preparing_clock)


def shown_search(spec: str, geometry: BoardGeometry) -> agent_registry.SearchPolicy | None:
    """The search the page shows for agent ``spec`` (``agent_registry.search_policy``). An agent on a clock shows
    its network's search at the checkpoint's own setting, that of the spec less its clock: the searches behind
    its moves vary with the time left, and the spec less the clock shares its compiled search with it
    (``search_policy`` caches by spec)."""
    parsed = agent_registry.parse_agent_spec(spec)
    return agent_registry.search_policy(parsed.without_exact if parsed.clock_seconds else spec, geometry)


def _read_spec(name: str) -> agent_registry.AgentSpec | None:
    """The spec ``name`` read (``agent_registry.parse_agent_spec``); None when the agent's name is no spec (a
    session made around an agent of its own)."""
    try:
        return agent_registry.parse_agent_spec(name)
    except ValueError:
        return None


def _prepare(agent) -> None:
    """Compiles an agent on a clock (``ClockAgent.prepare``, idempotent); other agents have nothing to do."""
    prepare = getattr(agent, "prepare", None)
    if callable(prepare):
        prepare()


def make_session(geometry: BoardGeometry, spec: str, seed: int = 0, human_first: bool = True) -> GameSession:
    """The game of agent ``spec`` (any spec ``dabjax arena`` takes: ``agent_registry.make_agent``) on
    ``geometry``, with its search for the page (``shown_search``), the agent named by its spec."""
    spec = spec.strip()
    agent = agent_registry.make_agent(spec, geometry)
    return GameSession(geometry, agent, spec, seed, shown_search(spec, geometry), human_first)

