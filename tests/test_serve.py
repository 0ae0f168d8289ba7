"""The web page's server without a browser: the session judges moves through the env, refuses what is illegal
with the reason, shows a search agent's top moves (the very search behind its move), and speaks JSON over HTTP.
The browser itself: tests/test_serve_browser.py."""

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

from dabjax.cli import serve
from dabjax.evaluation import agent_registry
from dabjax.game import notation
from dabjax.game.geometry import board_geometry


def session_for(spec: str, rows: int = 2, cols: int = 2, human_first: bool = True, seed: int = 0):
    geometry = board_geometry(rows, cols)
    agent = agent_registry.make_agent(spec, geometry)
    return serve.GameSession(geometry, agent, spec, seed, serve.search_policy(spec, geometry), human_first)


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
        assert analysis["available"] and 1 <= len(analysis["moves"]) <= serve.TOP_MOVES
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
    assert serve.top_moves(policy, legal, count=3) == [(1, 0.4), (3, 0.4), (0, 0.1)]
    assert serve.top_moves(policy, legal) == [(1, 0.4), (3, 0.4), (0, 0.1)]  # shares of 0 are left out


def request(url: str, body: dict | bytes | None = None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


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
