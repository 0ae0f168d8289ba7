"""Code and configs speak of the present: no measured figures, dates, commits, issue numbers or history.

Figures and their history live in docs/results.md and the lab notebook (docs/lab/); a comment says why, a
docstring gives shapes and units and, where a figure matters, links to the results page. This scan reads every
comment and string of ``dabjax/`` (docstrings included) and every comment of ``configs/`` and fails naming each
line that states a measurement, a date, a commit, an issue or how things used to be.
"""

import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Each pattern names what it finds; the patterns are narrow enough that the present tense never trips them.
HISTORY_PATTERNS = {
    "a date": r"\b20\d\d-\d\d-\d\d\b",
    "a commit": r"\bcommit [0-9a-f]{7,40}\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
    "an issue number": r"(?i)\bissue #?\d+|\bPR #?\d+|(?<![\w&#])#\d{2,5}\b(?![0-9a-f])",  # not a colour
    "a throughput": r"(?i)\b\d[\d,.]*\s?k?\s?(positions|games|steps|simulations|nodes|iterations)\s?/\s?s\b",
    "a speed-up": r"\b\d+(\.\d+)?\s?x (faster|slower|as fast)\b|\b\d+\.\d+x\b",
    "an Elo figure": r"[+-]\d+ Elo\b",
    "a measurement on a named device": r"\bone (NVIDIA )?(H100|H200|A100|T4)\b|\bon an? (H100|H200|A100)\b",
    "a measured time": r"(?i)\b(took|takes|ran in|in about|measured)\b[^.]*\b\d[\d.]* ?(ms|µs|s|seconds|minutes|min)\b",
    "history": (r"(?i)\bas before\b|\bold callers\b|\bformerly\b|\bpreviously\b|\blegacy\b|"
                r"\bthe (old|previous) (default|version|code|agent|recipe)\b|\bshipped before\b|"
                r"\b(was|were) (the default|added|renamed|replaced|moved)\b|\bearly checkpoints\b|"
                r"\bbefore (this|the) change\b|\buntil .{0,40} replaced\b"),
}
COMPILED = {what: re.compile(pattern) for what, pattern in HISTORY_PATTERNS.items()}


def python_texts(path: pathlib.Path):
    """``(line number, text)`` of every comment and string token of a Python file (docstrings included)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.STRING) or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line
        elif token.type == tokenize.NAME and "EARLY_CHECKPOINT" in token.string:
            yield token.start[0], token.string


def yaml_comments(path: pathlib.Path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#"):]


def findings(texts, where: str) -> list[str]:
    found = []
    for number, text in texts:
        for what, pattern in COMPILED.items():
            if pattern.search(text):
                found.append(f"{where}:{number}: {what}: {text.strip()[:100]}")
    return found


def scan_tree() -> list[str]:
    found = []
    for path in sorted((ROOT / "dabjax").rglob("*.py")):
        found += findings(python_texts(path), str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "configs").rglob("*.yaml")):
        found += findings(yaml_comments(path), str(path.relative_to(ROOT)))
    return found


def test_code_and_configs_speak_of_the_present():
    found = scan_tree()
    assert not found, "history or measured figures in code or configs (move them to docs/results.md or " \
                      "docs/lab/):\n" + "\n".join(found)


@pytest.mark.parametrize("text, what", [
    ("# 9.6 k positions/s with while loops", "a throughput"),
    ("# 0.52x on the GPU", "a speed-up"),
    ("# measured 2026-11-27", "a date"),
    ("# at commit c5236b8", "a commit"),
    ("# see issue 46", "an issue number"),
    ("# the random stream as before", "history"),
    ("# a re-export kept for old callers", "history"),
    ("# the 32x4 agent shipped before it", "history"),
    ("# a 0.52x slowdown", "a speed-up"),
    ("# +78 Elo head to head", "an Elo figure"),
    ("# on one H200 the recipe reached st 0", "a measurement on a named device"),
    ("# a search of 512 positions took 4.1 s", "a measured time"),
])
def test_the_scan_finds_each_kind(text, what):
    assert any(line.split(": ")[1] == what for line in findings([(1, text)], "x.py"))


@pytest.mark.parametrize("text", [
    "# Boxes already claimed no longer matter.",
    "# The search runs before the learner, every iteration.",
    "# A 0x9e3779b9 multiplier spreads the keys.",
    "# shape [B, 2 * L]; the value in [-1, 1]",
    "# (one line per move: at most L moves)",
    'DOT_COLOUR = "#222222"',
    "# A checkpoint is verified before it is trusted; made only then).",
    "# bfloat16 compute on A100/H100-class GPUs; 4x the batch of the CPU recipe",
    "# float32 on a T4, where bfloat16 is emulated",
])
def test_the_scan_passes_the_present_tense(text):
    assert findings([(1, text)], "x.py") == []
