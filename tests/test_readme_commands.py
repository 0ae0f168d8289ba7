"""The README's two commands (install and train; install and test) are what CI runs and what a fresh machine
needs: ``.ci/run`` holds command 2 verbatim, command 2 installs the browser the browser tests drive
(``scripts/install_browser.sh``), and those tests fail saying how to install it when it is missing."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
INSTALL_BROWSER = "bash scripts/install_browser.sh"


def readme_commands() -> list[str]:
    """The commands of the README's first ```bash block (its lines that are no comment, nor blank)."""
    block = re.search(r"^```bash\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_has_two_commands_and_ci_runs_the_second_verbatim():
    commands = readme_commands()
    assert len(commands) == 2, commands
    train, test = commands
    # Command 1 installs the package into a fresh virtual environment and runs a command that exists here: its
    # --help answers (what it runs is the project's, not the README's to pin).
    *install, run = [part.strip() for part in train.split("&&")]
    assert install[0].startswith("python3 -m venv ") and any(p.startswith("pip install") and " -e ." in f"{p} "
                                                             for p in install)
    program = run.split()
    assert program[0] == "python"
    helped = subprocess.run([sys.executable, *program[1:], "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr[-2000:]
    # Command 2 installs the browser first, then the test extra, then runs the suite (CI runs it verbatim).
    assert test.startswith(f"{INSTALL_BROWSER} && ") and '".[test]"' in test and "-m pytest" in test
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test in ci_lines
    assert not any("apt-get" in line for line in ci_lines)  # the browser comes from the command itself
    assert "export JAX_COMPILATION_CACHE_DIR=" in (ROOT / ".ci" / "run").read_text()


def fake_bin(tmp_path: pathlib.Path) -> pathlib.Path:
    """A PATH of its own for scripts/install_browser.sh: ``id`` and ``env``, and ``apt-get`` and ``sudo`` that
    log their arguments to ``$LOG`` (``apt-get install`` leaves a ``chromium`` behind) instead of installing
    (and ``chmod``, for that)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("id", "env", "chmod"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "apt-get").write_text(
        '#!/bin/sh\necho "apt-get $*" >> "$LOG"\n'
        'case "$*" in *install*) echo "#!/bin/sh" > "${0%/*}/chromium"; chmod +x "${0%/*}/chromium";; esac\n')
    (bin_dir / "sudo").write_text('#!/bin/sh\necho "sudo" >> "$LOG"\nexec "$@"\n')
    for tool in ("apt-get", "sudo"):
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def run_install_browser(bin_dir: pathlib.Path, log: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("bash"), "scripts/install_browser.sh"], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PATH=str(bin_dir), LOG=str(log)), timeout=60)


def test_install_browser_installs_debians_chromium_only_when_missing(tmp_path):
    bin_dir, log = fake_bin(tmp_path), tmp_path / "log"
    done = run_install_browser(bin_dir, log)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    apt_calls = [call for call in calls if call.startswith("apt-get")]
    assert apt_calls == ["apt-get update -q", "apt-get install -y -q chromium"]
    assert ("sudo" in calls) == (os.geteuid() != 0)  # sudo only when not root
    log.unlink()
    done = run_install_browser(bin_dir, log)  # chromium is on the PATH now: nothing to do
    assert done.returncode == 0 and not log.exists()
    (bin_dir / "chromium").unlink()
    (bin_dir / "apt-get").unlink()
    done = run_install_browser(bin_dir, log)
    assert done.returncode == 1 and "no apt-get to install it" in done.stderr


def test_the_browser_tests_fail_saying_how_to_install_chromium(monkeypatch):
    import test_serve_browser

    monkeypatch.setattr(test_serve_browser, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(pytest.fail.Exception) as failed:
        test_serve_browser.check_chromium_installed()
    assert "Chromium is not installed" in str(failed.value) and f"`{INSTALL_BROWSER}`" in str(failed.value)


def test_the_readmes_help_line_lists_every_command():
    from dabjax.cli import main as main_cli

    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("dabjax --help "))
    assert [name.strip() for name in line.split("#", 1)[1].split(",")] == list(main_cli.COMMANDS)


# The programs the README's commands run, as dabjax's command line: `python train.py` is `dabjax train`.
PROGRAMS = {("dabjax",): [], ("python", "train.py"): ["train"], ("python", "evaluate.py"): ["evaluate"]}


def readme_dabjax_commands() -> list[list[str]]:
    """Every command line of the README's ```bash blocks that runs dabjax, as ``dabjax``'s argv (``python train.py
    --config X`` -> ``["train", "--config", "X"]``); environment assignments before it are dropped."""
    text = (ROOT / "README.md").read_text()
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words = words[1:]
                for program, prefix in PROGRAMS.items():
                    if tuple(words[: len(program)]) == program:
                        found.append(prefix + words[len(program):])
    return found


def help_text(capsys, argv: list[str]) -> str | None:
    """What ``dabjax ARGV --help`` prints, or None when it fails (not a command, not a subcommand)."""
    from dabjax.cli import main as main_cli

    try:
        status = main_cli.main([*argv, "--help"])
    except SystemExit as exit:
        status = exit.code or 0
    out = capsys.readouterr().out
    return out if status == 0 and "usage:" in out else None


def test_the_readmes_commands_are_commands_with_the_options_their_help_lists(capsys):
    """Each ``dabjax ...`` / ``python train.py ...`` / ``python evaluate.py ...`` line of the README names a command
    (and subcommand) that exists, and every ``--option`` it passes is one that command's ``--help`` lists; the files
    it gives as ``--config`` or ``--sweep`` exist. What the README says about them is its own."""
    commands = readme_dabjax_commands()
    assert len(commands) >= 10 and ["train"] in commands, commands
    helps: dict[tuple[str, ...], str | None] = {}
    for argv in commands:
        if argv in (["--help"], []):
            continue
        words = [word for word in argv[1:2] if not word.startswith("-")]  # a subcommand, if the command has it
        key = tuple(argv[:1] + words)
        if key not in helps:
            helps[key] = help_text(capsys, list(key))
        if helps[key] is None:  # the second word was an argument (a run directory), not a subcommand
            key = tuple(argv[:1])
            helps[key] = helps.get(key) or help_text(capsys, list(key))
        assert helps[key] is not None, f"the README runs `dabjax {' '.join(argv)}`, which is no command"
        for option in (word.split("=")[0] for word in argv if word.startswith("--")):
            assert option in helps[key], f"`dabjax {' '.join(argv)}`: {option} is not in its --help"
        for flag in ("--config", "--sweep"):
            if flag in argv:
                path = argv[argv.index(flag) + 1]
                assert "/" not in path or (ROOT / path).is_file(), f"`dabjax {' '.join(argv)}`: no {path}"


# A duration ("~16 min", "26.4 minutes", "2 s a move", "9 hours") or a test count ("456 tests"): figures that go
# stale with the next change of the code or the machine. Measurements live in docs/results.md and docs/lab/; the
# README states durations only in its tracks' "*Time*" bullets, each of which links where its figures come from.
STALE_FIGURE = re.compile(r"\d[\d,.]*\s*(?:min|mins|minutes?|s|secs?|seconds?|h|hours?|tests?)\b")
README_MAX_LINES = 160  # a newcomer's two-minute read; the guide (docs/) holds the rest
TRACKS_HEADING = "## Start here"
TIME_BULLET = "- *Time*:"
FIGURE_SOURCES = ("docs/results.md", "docs/gpu.md", "docs/training.md")


def readme_bullets(lines: list[str]) -> list[tuple[list[int], str]]:
    """Every top-level ``- `` bullet of ``lines``: the indices of its lines (the bullet's and its indented
    continuation lines) and their text."""
    bullets: list[tuple[list[int], str]] = []
    current: tuple[list[int], str] | None = None
    for index, line in enumerate(lines):
        if line.startswith("- "):
            current = ([index], line)
            bullets.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current[0].append(index)
            bullets[-1] = current = (current[0], current[1] + "\n" + line)
        else:
            current = None
    return bullets


def test_the_readme_is_short_and_states_no_figure_that_goes_stale():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    start = next(i for i, line in enumerate(lines) if line.startswith(TRACKS_HEADING))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    timed = set()  # the lines of the tracks' *Time* bullets that name their source
    for indices, bullet in readme_bullets(lines[start:end]):
        if bullet.startswith(TIME_BULLET):
            assert any(source in bullet for source in FIGURE_SOURCES), \
                f"README.md: a '{TIME_BULLET}' bullet that links none of {FIGURE_SOURCES}: {bullet}"
            timed.update(start + index for index in indices)
    assert len([line for line in lines[start:end] if line.startswith(TIME_BULLET)]) >= 3, \
        "each of the README's three tracks says how long it takes, in a '- *Time*:' bullet"
    stale = [(index + 1, line) for index, line in enumerate(lines) if STALE_FIGURE.search(line) and index not in timed]
    assert not stale, f"README.md states durations or test counts outside its tracks' '{TIME_BULLET}' bullets " \
                      f"(move them to docs/results.md or docs/lab/): {stale}"


def test_the_readmes_links_name_files_that_exist():
    text = (ROOT / "README.md").read_text()
    targets = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in target}
    assert {"docs/configuration.md", "docs/results.md", "docs/lab/README.md"} <= targets
    missing = sorted(target for target in targets if not (ROOT / target).exists())
    assert not missing, f"README.md links to files that do not exist: {missing}"
