"""The package as a user installs it: the wheel built from this clone, installed into a fresh virtual environment
outside the repository, runs ``dabjax`` from a folder with no clone in sight: the built-in configs listed, a smoke
run trained from the built-in config with its closing summary, an arena with the shipped ``pretrained:3x3``, a
clone path (``configs/3x3.yaml``) falling back to the built-in, ``dabjax serve --help``.

Offline and quick: the wheel is built with this environment's setuptools (no build isolation, no index), and the
fresh environment takes its dependencies (jax, flax, ...) from this one through a ``.pth`` line, which, unlike
this environment's own site directory, does not load the editable install's finder: ``import dabjax`` there is
the wheel's copy (asserted)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "dabjax", "configs", "data")  # what the wheel is built from
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")


def run(command: list[str], cwd, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """The wheel, built from a copy of the clone's sources (the clone's tree stays untouched)."""
    root = tmp_path_factory.mktemp("wheel")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / "source" / name, ignore=IGNORED)
        else:
            (root / "source").mkdir(exist_ok=True)
            shutil.copy(source, root / "source" / name)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(root / "dist"), str(root / "source")], cwd=root)
    (built,) = (root / "dist").glob("dabjax-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """A fresh virtual environment (from the base interpreter, outside the repository) with the wheel installed;
    ``{"bin": its bin folder, "env": the environment to run it with, "work": an empty folder to run from}``."""
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    run([base_python, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
         str(wheel)], cwd=root)
    site = pathlib.Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            cwd=root).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["DABJAX_AGENTS"] = str(root / "agents")  # the user's folder of agents (dabjax pretrained export)
    work = root / "work"
    work.mkdir()
    return {"bin": venv / "bin", "env": env, "work": work, "agents": root / "agents"}


def dabjax(installed, *args: str, timeout: float = 300) -> str:
    """Runs the installed ``dabjax`` console script from the empty work folder; its stdout."""
    return run([str(installed["bin"] / "dabjax"), *args], cwd=installed["work"], env=installed["env"],
               timeout=timeout).stdout


def test_the_wheel_holds_every_module_config_labelled_set_and_agent(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {path.relative_to(ROOT).as_posix() for path in (ROOT / "dabjax").rglob("*")
                if path.is_file() and "__pycache__" not in path.parts}
    expected |= {f"dabjax/configs/{path.relative_to(ROOT / 'configs').as_posix()}"
                 for path in (ROOT / "configs").rglob("*.yaml")}
    expected |= {f"dabjax/data/{path.name}" for path in (ROOT / "data").glob("*.npz")}
    assert expected - names == set()
    assert any(name.endswith(".dist-info/entry_points.txt") for name in names)
    (license_file,) = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert zipfile.ZipFile(wheel).read(license_file) == (ROOT / "LICENSE").read_bytes()
    # The README states the wheel's size; it stays true to within 0.3 MiB.
    stated = re.search(r"wheel is ([\d.]+)\s+MiB", (ROOT / "README.md").read_text())
    assert stated and abs(float(stated.group(1)) - wheel.stat().st_size / 2**20) < 0.3


def test_the_installed_command_lists_trains_plays_and_serves(installed):
    where = run([str(installed["bin"] / "python"), "-c", "import dabjax; print(dabjax.__file__)"],
                cwd=installed["work"], env=installed["env"]).stdout.strip()
    assert where.startswith(str(installed["bin"].parent)) and not where.startswith(str(ROOT)), where

    listing = dabjax(installed, "train", "--list-configs")
    assert re.search(r"^  smoke +A tiny end-to-end BoxesZero run", listing, re.M)
    assert re.search(r"^  3x3_ablation +The paper's ablation", listing, re.M) and "3x3, 4x4, 4x4_train, 5x5" in listing

    # A clone path where there is no clone: the built-in config, its labelled set by built-in name.
    printed = dabjax(installed, "train", "--config", "configs/3x3.yaml", "--print-config")
    assert re.search(r"^  labelled_set: 3x3$", printed, re.M)

    out = dabjax(installed, "train", "--config", "smoke")
    run_dir = installed["work"] / "runs" / "smoke"
    assert (run_dir / "config.yaml").is_file() and (run_dir / "checkpoints" / "3").is_dir()
    assert "last evaluation, iteration 2" in out and "win rate" in out
    assert "dabjax serve --board 2x2 --opponent ckpt:runs/smoke" in out
    assert "dabjax train --config runs/smoke/config.yaml run.iterations=6" in out

    # The export goes to the user's folder, never into site-packages, and plays by name.
    refused = subprocess.run([str(installed["bin"] / "dabjax"), "pretrained", "export", "runs/smoke",
                              "--replace-shipped"], cwd=installed["work"], env=installed["env"], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode == 2 and "--replace-shipped refused" in refused.stderr, refused.stderr
    assert "plays as pretrained:2x2" in dabjax(installed, "pretrained", "export", "runs/smoke")
    assert (installed["agents"] / "2x2" / "agent.json").is_file()
    arena = dabjax(installed, "evaluate", "arena", "--board", "2x2", "--agents", "pretrained:2x2:0,level1",
                   "--games", "2", "--openings", "1")
    assert re.search(r"pretrained:2x2:0 +level1 +2 ", arena), arena

    arena = dabjax(installed, "evaluate", "arena", "--board", "3x3", "--agents", "pretrained:3x3,level1",
                   "--games", "2", "--openings", "1")
    assert re.search(r"pretrained:3x3 +level1 +2 ", arena) and "Elo" in arena

    assert dabjax(installed, "serve", "--help").startswith("usage: dabjax serve")
    help_text = run([str(installed["bin"] / "python"), "-m", "dabjax.cli.train", "--help"], cwd=installed["work"],
                    env=installed["env"]).stdout
    assert help_text.startswith("usage: python -m dabjax.cli.train")
