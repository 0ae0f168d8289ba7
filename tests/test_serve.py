"""The web page's server without a browser: the session judges moves through the env, refuses what is illegal
with the reason, shows a search agent's top moves (the very search behind its move), and speaks JSON over HTTP.
The browser itself: tests/test_serve_browser.py."""

import contextlib
import io
import json
import re
import shlex
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from conftest import summary_commands

from dabjax.cli import evaluate, serve
from dabjax.cli import main as main_cli
from dabjax.evaluation import arena, game_session
from dabjax.game import notation
from dabjax.game.geometry import board_geometry
from dabjax.solvers.position_solver import MAX_SOLVER_LINES


def session_for(spec: str, rows: int = 2, cols: int = 2, human_first: bool = True, seed: int = 0):
    return serve.make_session(board_geometry(rows, cols), spec, seed, human_first)


def assert_view_matches_env(session, view):
    state = notation.state_from_moves(session.geometry, view["moves"])
    assert [p["score"] for p in view["players"]] == np.asarray(state.scores).tolist()
    assert view["game_over"] == bool(state.terminated)
    if not view["game_over"]:
        mover = "human" if int(state.current_player) == session.human_player else "agent"
        assert view["to_move"] == mover and view["current_player"] == int(state.current_player)


def test_session_plays_a_game_and_refuses_illegal_moves():
    session = session_for("level1")
    view = session.view()
    assert view["to_move"] == "human" and view["status"] == "Your turn (A)." and view["moves"] == []
    with pytest.raises(ValueError, match="it is your turn"):
        session.agent_move()
    with pytest.raises(ValueError, match="'h 9 9': horizontal line .* is off a 2x2 board"):
        session.human_move("h 9 9")
    view = session.human_move("h 0 0")
    assert view["moves"] == [0] and view["message"] == "You drew h 0 0 (line 0)"
    with pytest.raises(ValueError, match="it is level1's turn"):
        session.human_move(1)
    rng = np.random.default_rng(0)
    while not view["game_over"]:
        if view["to_move"] == "agent":
            view = session.agent_move(analyse=True)
            assert view["analysis"]["available"] is False
            assert "level1 does not search" in view["analysis"]["text"]
        else:
            with pytest.raises(ValueError, match="that line is already drawn"):
                session.human_move(view["moves"][0])
            legal = np.flatnonzero(~np.isin(np.arange(12), view["moves"]))
            view = session.human_move(int(rng.choice(legal)))
            assert view["analysis"] is None
        assert_view_matches_env(session, view)
    scores = [p["score"] for p in view["players"]]
    verdict = {"win": "You win", "loss": "You lose", "draw": "Draw"}[view["result"]]
    assert view["status"] == f"{verdict} {scores[0]} - {scores[1]}." and view["to_move"] is None
    with pytest.raises(ValueError, match="the game is over: start a new game"):
        session.human_move(0)
    view = session.new_game(human_first=False)
    assert view["to_move"] == "agent" and view["human_player"] == 1 and view["status"] == "level1 (A) to move."
    assert [p["name"] for p in view["players"]] == ["level1", "You"]


def test_search_agents_show_the_search_behind_their_move():
    session = session_for("mcts:40", rows=2, cols=3, human_first=False)
    for _ in range(3):
        view = session.agent_move(analyse=True)
        analysis = view["analysis"]
        assert analysis["available"] and 1 <= len(analysis["moves"]) <= game_session.TOP_MOVES
        shares = [m["share"] for m in analysis["moves"]]
        assert shares == sorted(shares, reverse=True) and sum(shares) <= 1 + 1e-6
        # pure MCTS plays its most visited move: the search repeated with the move's key ranks it first
        assert analysis["moves"][0]["line"] == analysis["played"] == view["moves"][-1]
        assert f'class="share" data-line="{analysis["played"]}"' in view["svg"]
        while view["to_move"] == "human":
            view = session.human_move(int(np.flatnonzero(~np.isin(np.arange(17), view["moves"]))[0]))
        if view["game_over"]:
            break


def test_checkpoint_agents_show_their_policy_or_search(tiny_run):
    raw = session_for(f"ckpt:{tiny_run}/checkpoints/1:0", human_first=False)
    analysis = raw.agent_move(analyse=True)["analysis"]
    assert analysis["moves"][0]["line"] == analysis["played"]  # the raw policy plays its argmax
    searched = session_for(f"ckpt:{tiny_run}/checkpoints/1:4", human_first=False)  # Gumbel, 4 simulations
    analysis = searched.agent_move(analyse=True)["analysis"]
    assert analysis["available"] and analysis["played"] in [m["line"] for m in analysis["moves"]]


def test_top_moves_ranks_legal_lines():
    policy = np.array([0.1, 0.4, 0.0, 0.4, 0.1, 0.0])
    legal = np.array([True, True, True, True, False, True])
    assert game_session.top_moves(policy, legal, count=3) == [(1, 0.4), (3, 0.4), (0, 0.1)]
    assert game_session.top_moves(policy, legal) == [(1, 0.4), (3, 0.4), (0, 0.1)]  # shares of 0 are left out


def request(url: str, body: dict | bytes | None = None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()



@contextlib.contextmanager
def serving(session):
    """The session's server on a free port, in a thread, for the block: yields its URL."""
    server = serve.make_server(session, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield serve.server_url(server)
    finally:
        server.shutdown()
        server.server_close()

def test_http_api_and_static_page():
    session = session_for("level1")
    server = serve.make_server(session, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = serve.server_url(server)
    try:
        status, kind, body = request(url)
        assert status == 200 and kind.startswith("text/html") and b'<script src="app.js">' in body
        for name, kind_prefix in (("app.js", "text/javascript"), ("style.css", "text/css")):
            status, kind, body = request(url + name)
            assert status == 200 and kind.startswith(kind_prefix) and len(body) > 500
        status, _, body = request(url + "api/state")
        assert status == 200 and json.loads(body)["to_move"] == "human"
        status, _, body = request(url + "api/move", {"line": "h 0 0"})
        assert status == 200 and json.loads(body)["moves"] == [0]
        status, _, body = request(url + "api/agent", {"analyse": False})
        view = json.loads(body)
        assert status == 200 and len(view["moves"]) == 2
        status, _, body = request(url + "api/move", {"line": 0})
        view = json.loads(body)
        refusal = "it is level1's turn" if view["to_move"] == "agent" else "that line is already drawn"
        assert status == 409 and refusal in view["error"] and len(view["moves"]) == 2
        assert request(url + "api/move", b"{not json")[0] == 400
        status, _, body = request(url + "api/move", {"lines": 3})
        assert status == 400 and "missing 'line'" in json.loads(body)["error"]
        assert request(url + "api/nothing", {})[0] == 404 and request(url + "secret.txt")[0] == 404
        status, _, body = request(url + "api/new", {"human_first": False})
        assert status == 200 and json.loads(body)["to_move"] == "agent"
    finally:
        server.shutdown()
        server.server_close()


def test_take_back_replay_and_set_up():
    session = session_for("level1")
    with pytest.raises(ValueError, match="nothing to take back"):
        session.undo()
    view = session.human_move("h 0 0")
    while view["to_move"] == "agent":
        view = session.agent_move()
    view = session.undo()  # the human's move and the agent's replies
    assert view["moves"] == [] and view["to_move"] == "human" and "your turn again" in view["message"]
    view = session.replay("h 0 0; v 0 1\nh 2 1")
    lines = [notation.parse_move(session.geometry, m) for m in ("h 0 0", "v 0 1", "h 2 1")]
    assert view["moves"] == lines and view["record"] == "h 0 0; v 0 1; h 2 1"
    assert view["to_move"] == "human" and view["human_player"] == 1  # the human plays the side to move
    assert_view_matches_env(session, view)
    with pytest.raises(ValueError, match="move #1 of the record"):
        session.replay("h 0 0; h 0 0")
    assert session.view()["moves"] == lines  # a refused record leaves the game as it was
    view = session.set_setup(True)
    for line in ("v 1 0", "v 1 1"):  # both sides, no agent reply
        view = session.human_move(line)
        assert view["to_move"] == "human" and view["setup"] is True
    with pytest.raises(ValueError, match="set-up mode"):
        session.agent_move()
    view = session.undo()  # set-up takes back one line
    assert len(view["moves"]) == 4
    view = session.set_setup(False)
    state = notation.state_from_moves(session.geometry, view["moves"])
    assert view["human_player"] == int(state.current_player) and view["to_move"] == "human"


def test_replay_reads_move_lists_as_dabjax_solve_does():
    """Space-separated line indices, semicolons, named moves or a list: the page's replay reads them as
    ``notation.state_from_moves`` (``dabjax solve --moves``) does."""
    session = session_for("level1")
    named = "; ".join(notation.move_name(session.geometry, line) for line in (0, 1, 2, 5))
    for record in ("0 1 2 5", "0;1;2;5", named, [0, 1, "h 1 0", "h 2 1"]):
        view = session.replay(record)
        solved_lines = np.asarray(notation.state_from_moves(session.geometry, record).lines)
        assert view["moves"] == [0, 1, 2, 5] == np.flatnonzero(solved_lines).tolist(), record
        assert view["record"] == named
    with pytest.raises(ValueError, match=r"move #1 of the list: move 'q' is not understood"):
        session.replay("0; q")
    assert session.view()["moves"] == [0, 1, 2, 5]  # a refused record leaves the game as it was


def test_analysis_board_shows_exact_values_from_the_table():
    from dabjax.solvers import retrograde

    session = session_for("level1")
    session.replay("h 0 0; v 0 0; v 0 1")  # A closed no box: B to move, 0 - 0
    version, position = session.analysis_snapshot()
    view = session.keep_board_analysis(version, session.analyse_board(position, 1.0))
    board = view["board_analysis"]
    assert board["kind"] == "exact" and "whole-board table" in board["text"]
    lines = np.asarray(position.state.lines)
    values = retrograde.move_values(session.geometry, retrograde.solve_table(session.geometry), lines)
    expected = {int(line): int(values[line]) for line in np.flatnonzero(~lines)}  # margin so far 0
    assert {m["line"]: m["margin"] for m in board["moves"]} == expected
    best = np.sign(max(expected.values()))
    assert {m["line"] for m in board["moves"] if m["best"]} == {k for k, v in expected.items() if np.sign(v) == best}
    assert view["svg"].count('class="exact"') == len(expected)
    session.human_move(board["moves"][0]["line"])
    assert session.view()["board_analysis"] is None  # a new position: the old analysis is gone


def test_analysis_out_of_budget_falls_back_and_the_server_answers_meanwhile():
    search = session_for("mcts:8", rows=4, cols=4)
    analysis = search.analyse_board(search.position, 0.01)  # the empty 4x4 board: far beyond 10 ms
    assert analysis["kind"] == "search" and "did not finish within 0.01 s" in analysis["text"]
    assert analysis["moves"] and all(0 < m["share"] <= 1 for m in analysis["moves"])
    session = session_for("level1", rows=4, cols=4)
    assert session.analyse_board(session.position, 0.01)["kind"] == "timeout"
    server = serve.make_server(session, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = serve.server_url(server)
    try:
        answers = {}
        solving = threading.Thread(target=lambda: answers.update(analyse=request(url + "api/analyse",
                                                                                {"seconds": 3})))
        solving.start()
        deadline = time.monotonic() + 60
        while not session.solve_lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the solve has begun
        status, _, body = request(url + "api/move", {"line": "h 0 0"})  # while the solver runs
        assert status == 200 and json.loads(body)["moves"] == [0]
        assert solving.is_alive(), "the move was answered only after the solve"
        solving.join()
        view = json.loads(answers["analyse"][2])
        assert "position changed during the analysis" in view["error"] and view["board_analysis"] is None
        assert request(url + "api/analyse", {"seconds": -1})[0] == 400
    finally:
        server.shutdown()
        server.server_close()


def test_analysis_of_a_board_too_large_for_the_solver_says_so():
    session = session_for("level1", rows=8, cols=8)  # 144 lines: more than the position solver takes
    assert session.geometry.num_lines > MAX_SOLVER_LINES
    with serving(session) as url:
        status, _, body = request(url + "api/analyse", {"seconds": 1})
    view = json.loads(body)
    board = view["board_analysis"]
    assert status == 200 and not view["error"] and board["kind"] == "unsolvable" and board["moves"] == []
    assert f"at most {MAX_SOLVER_LINES} lines, and 8x8 has 144" in board["text"]
    assert board["text"].endswith("level1 does not search.")


def test_an_analysis_that_fails_is_answered_with_the_reason(monkeypatch):
    session = session_for("level1")

    def out_of_order(position, seconds):
        raise ValueError("the solver is out of order")

    monkeypatch.setattr(session, "analyse_board", out_of_order)
    with serving(session) as url:
        status, kind, body = request(url + "api/analyse", {"seconds": 1})
    view = json.loads(body)
    assert status == 409 and kind == "application/json" and view["error"] == "Refused: the solver is out of order."
    assert view["board_analysis"] is None and view["moves"] == []  # the game's view, as for any refusal


# --- every agent the arena takes, served: the closing summary's commands in their order ----------------------


def test_the_closing_summarys_commands_train_export_and_serve_the_agent(tmp_path, monkeypatch, capsys):
    """What ``python train.py`` suggests when it stops, in its order: train (the smoke config), export the agent
    (``dabjax pretrained export``), play the export in the browser (``dabjax serve``, in-process on 127.0.0.1)
    with one move over HTTP; the export also plays in the terminal (``dabjax play``) and with ``+exact``."""
    monkeypatch.chdir(tmp_path)
    assert main_cli.main(["train", "--config", "smoke", "run.dir=runs/s", "run.iterations=1"]) == 0
    out = capsys.readouterr().out
    commands = summary_commands(out)
    export = shlex.split(commands["export it"])
    assert export[0] == "dabjax" and export[-3:] == ["runs/s", "--out", "runs/s-agent"]
    assert main_cli.main(export[1:]) == 0
    exported = re.search(r"\(then played as (\S+);", out).group(1)
    assert exported == "ckpt:runs/s-agent"
    serve_argv = shlex.split(commands["play it in the browser"])
    assert serve_argv[:2] == ["dabjax", "serve"] and serve_argv[serve_argv.index("--opponent") + 1] == "ckpt:runs/s"
    serve_argv[serve_argv.index("--opponent") + 1] = exported
    args = evaluate.build_parser("dabjax").parse_args(serve_argv[1:])
    assert (args.command, args.board, args.host) == ("serve", "2x2", "127.0.0.1")
    session = serve.make_session(board_geometry(*map(int, args.board.split("x"))), args.opponent, args.seed,
                                 human_first=args.first == "human")
    with serving(session) as url:
        assert url.startswith("http://127.0.0.1:")
        status, _, body = request(url + "api/move", {"line": "h 0 0"})
        assert status == 200 and json.loads(body)["to_move"] == "agent"
        status, _, body = request(url + "api/agent", {"analyse": True})
    view = json.loads(body)
    assert status == 200 and not view["error"] and len(view["moves"]) == 2 and view["agent"] == exported
    assert view["searches"] and view["analysis"]["available"] and view["analysis"]["moves"]  # its search, shown
    for spec in (f"{exported}:0", f"{exported}+exact:0.5"):  # the raw policy; the solver where it proves a move
        assert session_for(spec, human_first=False).agent_move(analyse=True)["moves"], spec
    monkeypatch.setattr("sys.stdin", io.StringIO("quit\n"))
    assert main_cli.main(["play", "--board", "2x2", "--opponent", f"{exported}+exact", "--first", "agent"]) == 0
    assert f"{exported}+exact drew " in capsys.readouterr().out


# --- the page's clock: the started spec on N seconds a move ---------------------------------------------------


def test_the_page_puts_the_agent_on_a_clock_and_back():
    """``/api/clock``: the started spec with ``@Ns`` plays from the agent's next move (a legal one, timed against
    its clock); null brings back the started spec; bad seconds are a bad request. Alpha-beta's clock compiles
    nothing, so the test stays quick (a network's clock compiles its searches first: tens of seconds)."""
    session = session_for("alphabeta:2", human_first=False)
    view = session.view()
    assert view["started_agent"] == "alphabeta:2" and view["clock_seconds"] is None and not view["clock_refusal"]
    with serving(session) as url:
        status, _, body = request(url + "api/clock", {"seconds": 0.2})
        view = json.loads(body)
        assert status == 200 and not view["error"] and not view["preparing_clock"]
        assert view["agent"] == "alphabeta:2@0.2s" and view["clock_seconds"] == 0.2
        assert view["started_agent"] == "alphabeta:2" and "plays from its next move" in view["message"]
        assert session.agent.seconds == 0.2  # the agent now plays on the clock
        status, _, body = request(url + "api/agent", {"analyse": True})
        view = json.loads(body)
        assert status == 200 and not view["error"] and len(view["moves"]) == 1
        assert re.search(r"^alphabeta:2@0.2s drew .* in \d+\.\d\d s of its 0.2 s$", view["message"])
        assert_view_matches_env(session, view)  # the env played it: a legal move
        for bad in ({"seconds": -1}, {"seconds": "soon"}, {}):
            status, _, body = request(url + "api/clock", bad)
            assert status == 400 and "seconds a move must be a number > 0" in json.loads(body)["error"], bad
        status, _, body = request(url + "api/clock", {"seconds": None})  # as started
        view = json.loads(body)
        assert status == 200 and view["agent"] == "alphabeta:2" and view["clock_seconds"] is None
        assert session.agent.seconds is None and len(view["moves"]) == 1  # the game went on


def test_a_move_that_keeps_a_proven_draw_is_explained_as_such(monkeypatch):
    """A clock agent's move from its draw floor (source "floor"): the analysis says the solver proved it keeps at
    least a draw and that the win was open, not that the search chose it."""
    session = session_for("alphabeta:2@0.2s", human_first=False)
    real_move = arena.agent_move

    def floor_move(geometry, agent, key, state, moves):
        line = real_move(geometry, agent, key, state, moves)
        agent.last_sources = ["floor"]
        return line

    monkeypatch.setattr(arena, "agent_move", floor_move)
    view = session.agent_move(analyse=True)
    name = notation.move_name(session.geometry, view["analysis"]["played"])
    assert not view["analysis"]["available"] and not view["analysis"]["moves"]
    assert view["analysis"]["text"].startswith(f"alphabeta:2@0.2s proved with the solver that {name} keeps at least "
                                               "a draw; no winning line was proven")


def test_the_clock_replaces_a_clock_or_exact_and_is_refused_for_agents_without_one():
    exact = session_for("alphabeta:2+exact:0.5")
    assert exact.clock_spec(1) == "alphabeta:2@1s" and exact.clock_spec(None) == "alphabeta:2+exact:0.5"
    assert session_for("alphabeta:2@3s").clock_spec(0.5) == "alphabeta:2@0.5s"
    session = session_for("random")
    assert "random plays on no clock: clocks are for ckpt:, pretrained:, alphabeta: agents" == \
        session.view()["clock_refusal"]
    with serving(session) as url:
        status, _, body = request(url + "api/clock", {"seconds": 1})
    view = json.loads(body)
    assert status == 409 and "random plays on no clock" in view["error"] and view["agent"] == "random"
