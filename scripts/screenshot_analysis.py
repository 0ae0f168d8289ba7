"""A screenshot of the web page's analysis board on a 5x5 endgame (docs/images/analysis_5x5.png).

    python scripts/screenshot_analysis.py [--opponent pretrained:5x5] [--moves 36] [--out docs/images/analysis_5x5.png]

Plays a game of level 2 against itself on 5x5, starts ``evaluate.py serve`` against ``--opponent``, replays the
game's first ``--moves`` moves in the page, ticks the analysis board and saves the page once the exact values
are shown. Needs Debian's Chromium and Playwright (the ``test`` extra), as tests/test_serve_browser.py.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys

import jax

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dabjax.evaluation import agent_registry, arena  # noqa: E402
from dabjax.game import notation  # noqa: E402
from dabjax.game.geometry import board_geometry  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opponent", default="pretrained:5x5")
    parser.add_argument("--moves", type=int, default=36, help="moves of the game to replay before the analysis")
    parser.add_argument("--seconds", type=float, default=10.0, help="the analysis board's solver budget")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--out", default="docs/images/analysis_5x5.png")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    geometry = board_geometry(5, 5)
    level2 = agent_registry.make_agent("level2", geometry)
    games = arena.play_match(geometry, level2, level2, jax.random.PRNGKey(args.seed), 2, opening_moves=4)
    record = notation.moves_to_string(geometry, games.histories[0][: args.moves])
    process = subprocess.Popen(
        [sys.executable, "evaluate.py", "serve", "--board", "5x5", "--opponent", args.opponent, "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in process.stdout:
            match = re.search(r"(http://\S+)", line)
            if match:
                break
        else:
            raise SystemExit("the server printed no URL")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                                 args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 700, "height": 1150})
            page.set_default_timeout(int(1000 * (args.seconds + 60)))
            page.goto(match.group(1))
            page.wait_for_function("document.body.dataset.toMove === 'human'")
            page.fill("#analysis-seconds", str(args.seconds))
            page.fill("#replay-input", record)
            page.click("#replay")
            page.wait_for_function("(n) => Number(document.body.dataset.moves) === n", arg=args.moves)
            page.check("#analyse-board")
            page.wait_for_function("['exact', 'search', 'timeout'].includes(document.body.dataset.boardAnalysis)")
            kind = page.get_attribute("body", "data-board-analysis")
            out = ROOT / args.out
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
            browser.close()
        print(f"wrote {out} ({kind}: {record})")
    finally:
        process.terminate()
        process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
