"""``evaluate.py serve`` in a real browser: headless Chromium (Debian's package, driven by Playwright) plays whole
games by clicks against level1 on 2x2. After every move the page's scores, turn, drawn lines and result must be
the environment's for the moves the page lists; clicks on a drawn line or after the end are refused with a
message. (Refusals while the agent is to move: tests/test_serve.py.)"""

import contextlib
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from playwright.sync_api import sync_playwright

from dabjax.evaluation.render import PLAYER_COLOURS
from dabjax.game import notation
from dabjax.game.geometry import board_geometry

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
INSTALL_BROWSER = "bash scripts/install_browser.sh"  # README command 2 runs it before the tests
# Without the networking switches Chromium keeps calling home (updates, sync, QUIC) on a machine with no network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The page marks its state on <body>: wait until the server has answered a move (more moves listed) and the agent
# has finished its replies.
SETTLED = ("(moves) => Number(document.body.dataset.moves) > moves && "
           "(document.body.dataset.toMove === 'human' || document.body.dataset.gameOver === 'true')")
NEW_GAME = "(version) => Number(document.body.dataset.version) > version && document.body.dataset.moves === '0'"
TIMEOUT_MS = 60_000


def check_chromium_installed() -> None:
    """Fails (no skip: the page must be played in a browser) saying how to install Chromium when it is missing."""
    if not pathlib.Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium is not installed (no 'chromium' on the PATH, nor {CHROMIUM}): this test plays the "
                    f"web page in it. Install it with `{INSTALL_BROWSER}` (Debian's package through apt-get; README "
                    "command 2 runs it first), or your system's Chromium package.", pytrace=False)


@contextlib.contextmanager
def started_server(opponent: str):
    """``python evaluate.py serve --board 2x2 --opponent OPPONENT --port 0``; yields the URL it prints."""
    process = subprocess.Popen(
        [sys.executable, "evaluate.py", "serve", "--board", "2x2", "--opponent", opponent, "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed = []
        for line in process.stdout:
            printed.append(line)
            match = re.search(r"(http://\S+)", line)
            if match:
                break
        assert match, "the server printed no URL:\n" + "".join(printed)
        assert f"{opponent} on 2x2" in line
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server_url():
    """``python evaluate.py serve --board 2x2 --opponent level1 --port 0``; yields the URL it prints."""
    check_chromium_installed()  # before the server starts: a missing browser fails fast
    with started_server("level1") as url:
        yield url


@pytest.fixture(scope="module")
def page(server_url):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 700, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        page.requested = []  # every URL the page asks for: it must work offline, from the server alone
        page.on("request", lambda request: page.requested.append(request.url))
        page.goto(server_url)
        page.server_url = server_url
        yield page
        browser.close()


def listed_moves(page) -> list[int]:
    text = page.get_attribute("#moves", "data-moves")
    return [int(m) for m in text.split(",")] if text else []


def check_page_against_env(page, geometry, human_player: int) -> list[int]:
    """Replays the moves the page lists through the env and compares everything the page shows; returns them."""
    moves = listed_moves(page)
    names = [notation.move_name(geometry, m) for m in moves]
    assert [item.split(" (")[0] for item in page.locator("#moves li").all_inner_texts()] == names
    state = notation.state_from_moves(geometry, moves)
    scores = np.asarray(state.scores).tolist()
    assert [int(page.inner_text(f"#score-{p}")) for p in (0, 1)] == scores
    # each drawn line in the drawer's colour: the env's player to move before that move
    drawers = {line: int(notation.state_from_moves(geometry, moves[:k]).current_player) for k, line in enumerate(moves)}
    shown = page.eval_on_selector_all("#board line.drawn",
                                      "lines => lines.map(e => [e.dataset.line, e.getAttribute('stroke')])")
    assert {int(line): stroke for line, stroke in shown} == {line: PLAYER_COLOURS[p] for line, p in drawers.items()}
    status = page.inner_text("#status")
    if bool(state.terminated):
        mine, theirs = scores[human_player], scores[1 - human_player]
        verdict = "You win" if mine > theirs else ("You lose" if mine < theirs else "Draw")
        assert status == f"{verdict} {mine} - {theirs}."
        assert page.get_attribute("body", "data-game-over") == "true"
    else:
        assert int(state.current_player) == human_player, "the page waits for the human only on the human's turn"
        assert status == f"Your turn ({'AB'[human_player]})."
        assert page.get_attribute("body", "data-to-move") == "human"
    return moves


def click_line(page, line: int) -> None:
    before = len(listed_moves(page))
    page.click(f'#board .hit[data-line="{line}"]')
    page.wait_for_function(SETTLED, arg=before)


def play_out(page, geometry, human_player: int, rng: np.random.Generator, refuse_once: bool) -> list[int]:
    """Clicks random legal lines until the game ends, checking the page after every reply."""
    moves = check_page_against_env(page, geometry, human_player)
    while page.get_attribute("body", "data-game-over") != "true":
        if refuse_once and moves:
            page.click(f'#board .hit[data-line="{moves[0]}"]')  # an already drawn line
            page.wait_for_function("document.getElementById('message').className === 'error'")
            assert "that line is already drawn" in page.inner_text("#message")
            assert listed_moves(page) == moves
            refuse_once = False
        legal = sorted(set(range(geometry.num_lines)) - set(moves))
        click_line(page, int(rng.choice(legal)))
        moves = check_page_against_env(page, geometry, human_player)
    return moves


def test_whole_games_by_clicks_against_level1(page):
    geometry = board_geometry(2, 2)
    page.wait_for_function("document.body.dataset.toMove === 'human'")
    version = int(page.get_attribute("body", "data-version"))
    page.click("#new-human")
    page.wait_for_function(NEW_GAME, arg=version)
    assert page.inner_text("#subtitle") == "2x2 against level1"
    assert page.inner_text("#name-0") == "You (you)" and page.inner_text("#name-1") == "level1"
    assert page.locator("#board .hit").count() == geometry.num_lines
    rng = np.random.default_rng(0)
    moves = play_out(page, geometry, 0, rng, refuse_once=True)
    assert len(moves) == geometry.num_lines
    page.click("#board .hit >> nth=0")  # the game is over
    page.wait_for_function("document.getElementById('message').textContent.includes('the game is over')")
    # level1 does not search: the panel says so instead of listing moves
    assert "level1 does not search" in page.inner_text("#analysis-text")
    # a new game with the agent first: it moves at once, the human is B
    version = int(page.get_attribute("body", "data-version"))
    page.click("#new-agent")
    page.wait_for_function(  # the new game, then the agent's first move
        "(version) => Number(document.body.dataset.version) > version + 1 && document.body.dataset.toMove === 'human'",
        arg=version)
    assert page.inner_text("#name-1") == "You (you)" and page.inner_text("#name-0") == "level1"
    moves = play_out(page, geometry, 1, rng, refuse_once=False)
    assert len(moves) == geometry.num_lines
    assert page.screenshot(full_page=True)[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.requested and all(url.startswith(page.server_url) for url in page.requested), page.requested


def test_take_back_set_up_replay_and_the_analysis_board(page):
    from dabjax.solvers import retrograde

    geometry = board_geometry(2, 2)
    table = retrograde.solve_table(geometry)
    version = int(page.get_attribute("body", "data-version"))
    page.click("#new-human")
    page.wait_for_function(NEW_GAME, arg=version)
    click_line(page, 5)
    assert len(listed_moves(page)) >= 2  # the human's line and the agent's reply
    page.click("#undo")
    page.wait_for_function("document.body.dataset.moves === '0'")
    assert "your turn again" in page.inner_text("#message")

    def shown_values():
        page.wait_for_function("document.body.dataset.boardAnalysis === 'exact'")
        labels = page.eval_on_selector_all(
            "#board text.exact", "items => items.map(e => [e.dataset.line, e.dataset.margin, e.dataset.best])")
        return {int(line): (int(margin), best == "true") for line, margin, best in labels}

    def table_values(moves):
        state = notation.state_from_moves(geometry, moves)
        lines = np.asarray(state.lines)
        values = retrograde.move_values(geometry, table, lines).astype(int) + int(state.margin)
        best = max(np.sign(values[~lines]))
        return {int(k): (int(values[k]), bool(np.sign(values[k]) == best)) for k in np.flatnonzero(~lines)}

    page.check("#analyse-board")
    assert shown_values() == table_values([])
    assert "Exact (the whole-board table)" in page.inner_text("#board-analysis-text")
    # set up a position: lines for both sides, the agent waits
    page.check("#setup")
    page.wait_for_function("document.body.dataset.setup === 'true' && document.body.dataset.boardAnalysis === 'exact'")
    for count, line in enumerate((0, 3, 4), start=1):
        page.click(f'#board .hit[data-line="{line}"]')
        page.wait_for_function("(n) => Number(document.body.dataset.moves) === n && "
                               "document.body.dataset.boardAnalysis === 'exact'", arg=count)
        assert shown_values() == table_values([0, 3, 4][:count])
    assert page.get_attribute("body", "data-to-move") == "human"
    page.uncheck("#setup")
    page.wait_for_function("document.getElementById('message').textContent.includes('Set-up done')")
    # replay a move list, then copy it
    page.fill("#replay-input", "h 0 1; v 1 2")
    page.click("#replay")
    page.wait_for_function("document.body.dataset.moves === '2'")
    moves = listed_moves(page)
    assert moves == [notation.parse_move(geometry, m) for m in ("h 0 1", "v 1 2")]
    assert page.inner_text("#record") == "h 0 1; v 1 2"
    assert shown_values() == table_values(moves)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=page.server_url)
    page.click("#copy")
    page.wait_for_function("document.getElementById('message').textContent.includes('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == "h 0 1; v 1 2"
    page.uncheck("#analyse-board")


def test_the_clock_choice(page):
    """The select of the agent's time a move: disabled, saying why, for an agent without a clock (level1); for
    alpha-beta it puts the agent on the clock chosen and back (alpha-beta's clock compiles nothing, so this stays
    quick)."""
    clock = page.locator("#clock")
    assert clock.locator("option").all_inner_texts() == ["as started", "0.5 s", "1 s", "2 s", "5 s"]
    page.wait_for_function("document.getElementById('clock').disabled")
    for where in ("#clock", "#clock-label"):
        assert page.get_attribute(where, "title").startswith("level1 plays on no clock")
    with started_server("alphabeta:2") as url:
        other = page.context.browser.new_page()
        try:
            other.goto(url)
            other.wait_for_function("document.body.dataset.toMove === 'human'")
            assert not other.locator("#clock").is_disabled() and other.input_value("#clock") == ""
            other.select_option("#clock", "0.5")
            other.wait_for_function("document.getElementById('subtitle').textContent === '2x2 against "
                                    "alphabeta:2@0.5s' && !document.getElementById('clock').disabled")
            assert "on a clock of 0.5 s a move" in other.inner_text("#message")
            other.click('#board .hit[data-line="0"]')
            other.wait_for_function(SETTLED, arg=0)
            # h 0 0 closes no box: the agent answered, and its move's time against its clock is the message
            assert re.fullmatch(r"alphabeta:2@0.5s drew .* in \d+\.\d\d s of its 0.5 s", other.inner_text("#message"))
            check_page_against_env(other, board_geometry(2, 2), 0)
            other.select_option("#clock", "")
            other.wait_for_function("document.getElementById('subtitle').textContent === '2x2 against alphabeta:2'")
            assert other.input_value("#clock") == ""
        finally:
            other.close()
