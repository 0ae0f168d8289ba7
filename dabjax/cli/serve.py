"""``dabjax serve`` (``python evaluate.py serve`` in a clone): play an agent on a local web page.

The server owns the game (``dabjax.evaluation.game_session``: the env judges every move, the board is drawn as SVG);
the page in ``dabjax/cli/web/`` only shows what the server sends and posts clicks. This module is the HTTP part.
One game at a time, for one person on this machine (the server listens on 127.0.0.1 by default).

HTTP API (JSON; every answer is the game's ``view``, with ``error`` set when a request is refused: status 400 for
a bad request, 409 for what the game refuses):

* ``GET /api/state``: the current game.
* ``POST /api/new`` ``{"human_first": true}``: a new game, the human moving first or second.
* ``POST /api/move`` ``{"line": 7}``: the human draws a line (index or notation: ``"h 0 1"``); refused with the
  reason (409) when the line is drawn, off the board, or it is not the human's turn.
* ``POST /api/agent`` ``{"analyse": true}``: the agent plays one move; ``analyse`` also returns its search's
  top moves for that move (search agents only). The page calls it while the agent is to move, one move at a
  time, so each move is seen.
* ``POST /api/undo``: takes back the human's last move and the agent's replies to it (in set-up mode, the last
  line).
* ``POST /api/replay`` ``{"moves": "h 0 0; v 0 1"}``: the game of that move list (the notation the page
  prints, or line indices; a list works too); the human plays the side to move.
* ``POST /api/setup`` ``{"on": true}``: set-up mode, where clicks draw lines for whichever side is to move and
  the agent waits; switching it off hands the side to move to the human.
* ``POST /api/analyse`` ``{"seconds": 2}``: the analysis board: every legal line's exact value (the final
  margin it keeps, best-result lines marked) when the solver finishes within the budget, else the agent's
  search figures, saying which (also on a board the solver cannot take, saying so). The solve runs outside the
  game's lock: the server answers other requests meanwhile, and an answer for a position that has since changed
  is dropped (status 200, with ``error``).
* ``POST /api/clock`` ``{"seconds": 1}``: the agent from its next move on is the started spec on a clock of that
  many seconds a move (``SPEC@1s``; the started spec's own clock or ``+exact`` dropped); ``{"seconds": null}``:
  the started spec as it is. Refused (409) for an agent that takes no clock (the view's ``clock_refusal`` says
  why). The clock compiles outside the game's lock (seconds to minutes; the view's ``preparing_clock`` names it
  meanwhile), and the agent's moves wait for it. The view's ``clock_seconds`` is the clock playing (null: none).
"""

from __future__ import annotations

import functools
import http.server
import importlib.resources
import json
import sys
from typing import Callable

from dabjax.cli import UsageError, users_input
from dabjax.cli.faults import not_a_command
from dabjax.evaluation.game_session import ANALYSIS_SECONDS, GameSession, make_session
from dabjax.game.geometry import BoardGeometry

MAX_ANALYSIS_SECONDS = 120.0

STATIC_FILES = {  # URL path -> (file in dabjax/cli/web, content type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}


# --- HTTP -----------------------------------------------------------------------------------------------


def _web_file(name: str) -> bytes:
    return (importlib.resources.files("dabjax.cli") / "web" / name).read_bytes()


class GameRequestHandler(http.server.BaseHTTPRequestHandler):
    """The page and the HTTP API (module docstring) of one game, ``session``: ``make_handler`` binds it."""

    server_version = "dabjax"
    session: GameSession

    def log_message(self, format, *args):
        pass  # the terminal shows the URL, not a line per click

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/api/state":
            with self.session.lock:
                return self._send_json(200, self.session.view())
        if path in STATIC_FILES:
            name, content_type = STATIC_FILES[path]
            return self._send(200, _web_file(name), content_type)
        self._send_json(404, dict(error=f"no page at {path}"))

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        try:
            body = self._json_body()
        except ValueError as error:
            return self._send_json(400, dict(error=f"bad request: {error}"))
        if path == "/api/analyse":
            return self._analyse(body)
        if path == "/api/clock":
            return self._clock(body)
        action = self._actions(body).get(path)
        if action is None:
            return self._send_json(404, dict(error=f"no action at {path}"))
        if path == "/api/agent":
            with self.session.clock_lock:  # a clock being compiled plays the move, once it is ready
                return self._run(action)
        return self._run(action)

    def _run(self, action: Callable[[], dict]) -> None:
        """Answers with ``action()``'s view, run under the game's lock; a refusal with the reason."""
        with self.session.lock:
            try:
                return self._send_json(200, action())
            except KeyError as error:
                return self._send_json(400, dict(self.session.view(), error=f"bad request: missing {error}"))
            except ValueError as error:
                return self._send_json(409, dict(self.session.view(), error=f"Refused: {error}."))

    def _json_body(self) -> dict:
        """The request's JSON object (``{}`` without a body); ValueError when it is none."""
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not isinstance(body, dict):
            raise ValueError("the request body must be a JSON object")
        return body

    def _actions(self, body: dict) -> dict[str, Callable[[], dict]]:
        """The game's actions by path, each returning the view to answer with (run under the game's lock)."""
        session = self.session
        return {
            "/api/new": lambda: session.new_game(bool(body.get("human_first", True))),
            "/api/move": lambda: session.human_move(body["line"]),
            "/api/agent": lambda: session.agent_move(bool(body.get("analyse", False))),
            "/api/undo": session.undo,
            "/api/replay": lambda: session.replay(body["moves"]),
            "/api/setup": lambda: session.set_setup(bool(body.get("on", True))),
        }

    def _analyse(self, body: dict):
        """``/api/analyse``: the board's analysis, solved outside the game's lock."""
        session = self.session
        try:
            seconds = float(body.get("seconds", ANALYSIS_SECONDS))
        except (TypeError, ValueError):
            seconds = float("nan")
        if not 0 < seconds <= MAX_ANALYSIS_SECONDS:
            with session.lock:
                return self._send_json(400, dict(session.view(), error=(
                    f"Refused: seconds must be a number in (0, {MAX_ANALYSIS_SECONDS:g}], got "
                    f"{body.get('seconds')!r}.")))
        with session.lock:
            version, position = session.analysis_snapshot()
        try:
            analysis = session.analyse_board(position, seconds)  # the lock is free meanwhile
        except ValueError as error:  # answer with the reason: without an answer the page hears nothing
            with session.lock:
                return self._send_json(409, dict(session.view(), error=f"Refused: {error}."))
        with session.lock:
            return self._send_json(200, session.keep_board_analysis(version, analysis))

    def _clock(self, body: dict):
        """``/api/clock``: the agent on another clock, compiled outside the game's lock (under its clock lock)."""
        session = self.session
        seconds = body.get("seconds", "missing")
        if seconds is not None:
            try:
                seconds = float(seconds)
            except (TypeError, ValueError):
                seconds = float("nan")
        if seconds is not None and not 0 < seconds < float("inf"):
            got = repr(body["seconds"]) if "seconds" in body else "nothing"
            with session.lock:
                return self._send_json(400, dict(session.view(), error=(
                    f"Refused: seconds a move must be a number > 0 (or null: the agent as started), got {got}.")))
        with session.clock_lock:
            with session.lock:
                try:
                    spec = session.clock_spec(seconds)
                except ValueError as error:
                    return self._send_json(409, dict(session.view(), error=f"Refused: {error}."))
                session.preparing_clock = spec
            try:
                made, refusal = session.make_clock(spec), ""  # the lock is free meanwhile
            except ValueError as error:  # e.g. a network for another board: answered with the reason
                made, refusal = None, f"Refused: {error}."
            finally:
                with session.lock:
                    session.preparing_clock = ""  # whatever became of the compile
            with session.lock:
                if made is None:
                    return self._send_json(409, dict(session.view(), error=refusal))
                return self._send_json(200, session.use_agent(spec, *made))

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, data: dict) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")


def make_handler(session: GameSession) -> type[http.server.BaseHTTPRequestHandler]:
    """A request handler class bound to ``session``."""
    return type("Handler", (GameRequestHandler,), {"session": session})


def make_server(session: GameSession, host: str = "127.0.0.1", port: int = 8000) -> http.server.ThreadingHTTPServer:
    """The HTTP server of ``session`` (``port`` 0: any free port; ``server.server_address`` tells which)."""
    return http.server.ThreadingHTTPServer((host, port), make_handler(session))


def server_url(server: http.server.ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{'localhost' if host in ('0.0.0.0', '::') else host}:{port}/"


def serve(geometry: BoardGeometry, spec: str, host: str = "127.0.0.1", port: int = 8000, seed: int = 0,
          human_first: bool = True, open_browser: bool = False,
          write: Callable[[str], None] = functools.partial(print, flush=True)) -> None:
    """Runs the page for agent ``spec`` on ``geometry`` until interrupted (Ctrl-C). Prints the URL once the
    agent is compiled, so the first move is quick. A bad spec or a port it cannot listen on is a ``UsageError``."""
    with users_input():
        session = make_session(geometry, spec, seed, human_first=True)
    write(f"compiling {spec} for {geometry.name} ...")
    session.human_move(0)  # one human move and one agent reply on a scratch game compile both paths
    session.agent_move(analyse=session.policy is not None)
    session.new_game(human_first)
    try:
        server = make_server(session, host, port)
    except OSError as error:  # e.g. the port is taken
        raise UsageError(f"cannot listen on {host}:{port} ({error.strerror}); try another --port or --port 0") from None
    url = server_url(server)
    write(f"dabjax: {spec} on {geometry.name} at {url}  (Ctrl-C to stop)")
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        write("stopped")
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(not_a_command(__spec__.name))
