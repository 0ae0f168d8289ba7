"""The ``dabjax`` command and its command layer: the dispatcher, every ``python -m dabjax.cli.X``, built-in configs,
sweeps and labelled sets by name, a run's self-contained config, the closing summary (its commands run as
printed), ``dabjax solve`` against the retrograde table, and the layering (no import cycle in ``dabjax/cli``,
nothing outside it imports it)."""

import ast
import contextlib
import importlib.resources
import io
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import summary_commands

from dabjax import package_data
from dabjax.cli import faults, solve
from dabjax.cli import main as main_cli
from dabjax.cli import train as train_cli
from dabjax.evaluation import pretrained
from dabjax.game import notation
from dabjax.game.geometry import board_geometry
from dabjax.runs import run_dir as run_dir_lib
from dabjax.solvers import labelled, retrograde
from dabjax.training import config as config_lib
from dabjax.training import sweep_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLI = ROOT / "dabjax" / "cli"
# Command modules run their main under python -m; library modules say they are no command (exit 2).
COMMAND_MODULES = ["dabjax", "dabjax.cli.main", "dabjax.cli.train", "dabjax.cli.evaluate", "dabjax.cli.label",
                   "dabjax.cli.pretrain", "dabjax.cli.pretrained", "dabjax.cli.solve", "dabjax.cli.sweep",
                   "dabjax.cli.demo"]
NOT_CHECKED = {"__init__"}


# --- the dispatcher and python -m -----------------------------------------------------------------------------


def test_the_dispatcher_runs_each_command_and_refuses_unknown_ones(capsys):
    assert main_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^  {name} +\S", out, re.M) for name in main_cli.COMMANDS)
    assert main_cli.main([]) == 2 and "usage: dabjax COMMAND" in capsys.readouterr().err
    assert main_cli.main(["trian"]) == 2 and "unknown command 'trian'" in capsys.readouterr().err
    for argv, usage in ((["serve", "--help"], "usage: dabjax serve"), (["train", "--help"], "usage: dabjax train"),
                        (["evaluate", "arena", "--help"], "usage: dabjax evaluate arena"),
                        (["label", "--help"], "usage: dabjax label")):
        with pytest.raises(SystemExit) as exit:
            main_cli.main(argv)
        assert exit.value.code == 0 and capsys.readouterr().out.startswith(usage)
    assert main_cli.main(["label", "info", "3x3"]) == 0  # a built-in set by name
    assert f"3x3: {len(labelled.load(ROOT / 'data' / '3x3.npz'))} positions" in capsys.readouterr().out


RUN_EACH = """
import contextlib, io, json, runpy, sys, warnings
warnings.simplefilter("ignore")  # runpy's note that the module was already imported
results = {}
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code or 0
    results[module] = [code, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""


def test_every_python_m_module_runs_or_says_it_is_no_command(tmp_path):
    """Nothing exits 0 having done nothing: `python -m dabjax.cli.train --help` prints its help, and a module that
    is no command exits 2 naming `dabjax --help`. One interpreter runs them all (runpy), to import jax once."""
    library = [f"dabjax.cli.{path.stem}" for path in sorted(CLI.glob("*.py")) if path.stem not in NOT_CHECKED
               and f"dabjax.cli.{path.stem}" not in COMMAND_MODULES]
    assert "dabjax.cli.faults" in library and "dabjax.cli.play" in library
    done = subprocess.run([sys.executable, "-c", RUN_EACH, *COMMAND_MODULES, *library], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    for module in COMMAND_MODULES:
        code, out, _ = results[module]
        assert code == 0 and out.startswith("usage:"), (module, results[module])
    assert "usage: python -m dabjax.cli.train" in results["dabjax.cli.train"][1]
    assert "usage: python -m dabjax COMMAND" in results["dabjax"][1]
    for module in library:
        code, out, err = results[module]
        assert code == 2 and not out and f"{module} is not a command" in err, (module, results[module])


# --- built-in configs, sweeps and labelled sets ---------------------------------------------------------------


def test_built_ins_are_the_clones_files_and_list_with_their_purpose(capsys):
    configs, sweeps, sets = package_data.builtin_configs(), package_data.builtin_sweeps(), package_data.builtin_sets()
    assert list(configs) == sorted(p.stem for p in (ROOT / "configs").glob("*.yaml"))
    assert list(sweeps) == sorted(p.stem for p in (ROOT / "configs" / "sweeps").glob("*.yaml"))
    assert list(sets) == sorted(p.stem for p in (ROOT / "data").glob("*.npz"))
    assert train_cli.main(["--list-configs"]) == 0
    out = capsys.readouterr().out
    for name, path in {**configs, **sweeps}.items():
        first = path.read_text().splitlines()[0].lstrip("# ")
        purpose = package_data.purpose(path)
        assert first.startswith(purpose.removesuffix("...")[:40]) and 0 < len(purpose) <= 100
        assert re.search(rf"^  {re.escape(name)} +{re.escape(purpose)}$", out, re.M), name
    assert "built-in labelled sets" in out and ", ".join(sets) in out
    with pytest.raises(SystemExit):
        train_cli.main(["--list-configs", "--config", "smoke"])


def test_configs_sweeps_and_sets_resolve_by_name_and_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ or data/ here: the clone paths fall back to the built-ins
    by_name = config_lib.load_config("5x5_cpu")
    assert by_name == config_lib.load_config("configs/5x5_cpu.yaml") == config_lib.load_config("5x5_cpu.yaml")
    assert by_name.eval.labelled_set == "5x5" and by_name.board.rows == 5
    for text in ("5x5", "5x5.npz", "data/5x5.npz", str(ROOT / "data" / "5x5.npz")):
        assert config_lib.labelled_set_reference(text) == "5x5"
    own = tmp_path / "sets" / "mine.npz"
    own.parent.mkdir()
    shutil.copy(ROOT / "data" / "3x3.npz", own)
    assert config_lib.labelled_set_reference("sets/mine.npz") == str(own.resolve())
    (tmp_path / "data").mkdir()  # a file that exists wins over the built-in of its name
    shutil.copy(ROOT / "data" / "4x4.npz", tmp_path / "data" / "3x3.npz")
    assert config_lib.labelled_set_reference("data/3x3.npz") == str((tmp_path / "data" / "3x3.npz").resolve())
    for missing in ("nope", "elsewhere/5x5.npz", "/abs/data/5x5.npz"):  # only bare names and clone paths fall back
        with pytest.raises(config_lib.ConfigError, match=r"eval.labelled_set: .*built-in: 3x3, 4x4, 4x4_train, 5x5"):
            config_lib.load_config("smoke", [f"eval.labelled_set={missing}"])
    with pytest.raises(config_lib.ConfigError, match=r"config file 'nope' does not exist.*smoke"):
        config_lib.load_config("nope")
    assert config_lib.load_config("smoke").board.rows == 2
    assert sweep_file.load_sweep("3x3_ablation").trials == sweep_file.load_sweep(
        ROOT / "configs" / "sweeps" / "3x3_ablation.yaml").trials
    with pytest.raises(config_lib.ConfigError, match="sweep file 'nope' does not exist"):
        sweep_file.load_sweep("nope")
    assert train_cli.main(["--config", "nope", "--print-config"]) == 2


def test_a_sweeps_base_is_looked_for_beside_the_sweep_file_then_as_a_built_in_name(tmp_path, monkeypatch):
    """Not in the current folder first: a file of the same name there shadows neither."""
    sweeps, elsewhere = tmp_path / "sweeps", tmp_path / "elsewhere"
    sweeps.mkdir()
    elsewhere.mkdir()
    shutil.copy(ROOT / "configs" / "smoke.yaml", sweeps / "base.yaml")  # 2x2
    shutil.copy(ROOT / "configs" / "3x3.yaml", elsewhere / "base.yaml")
    shutil.copy(ROOT / "configs" / "smoke.yaml", elsewhere / "3x3.yaml")  # not the built-in 3x3
    shutil.copy(ROOT / "configs" / "smoke.yaml", elsewhere / "only_here.yaml")
    monkeypatch.chdir(elsewhere)

    def base_of(base):
        (sweeps / "sweep.yaml").write_text(f"base: {base}\nruns: [{{name: a, overrides: []}}]\n")
        return sweep_file.load_sweep(sweeps / "sweep.yaml").base

    assert base_of("base.yaml") == str((sweeps / "base.yaml").resolve())
    assert config_lib.load_config(base_of("base.yaml")).board.rows == 2
    assert base_of("3x3.yaml") == base_of("3x3") == str(package_data.builtin_configs()["3x3"].resolve())
    assert config_lib.load_config(base_of("3x3.yaml")).board.rows == 3
    assert base_of(elsewhere / "base.yaml") == str((elsewhere / "base.yaml").resolve())  # an absolute path: itself
    assert base_of("only_here.yaml") == "only_here.yaml"  # last, a path from the current folder
    (sweeps / "bad.yaml").write_text("runs: [{name: a}]\n")
    with pytest.raises(config_lib.ConfigError, match=rf"sweep file '{re.escape(str(sweeps / 'bad.yaml'))}': "
                                                     r"run #0 needs 'overrides'"):
        sweep_file.load_sweep(sweeps / "bad.yaml")


def test_built_ins_fall_back_to_the_clones_folders_when_the_packages_are_not_installed(tmp_path, monkeypatch):
    """An editable install made before pyproject.toml mapped dabjax.configs and dabjax.data (or a clone run
    without installing) has no such packages: the clone's configs/ and data/ serve instead."""
    def not_installed(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(importlib.resources, "files", not_installed)
    assert package_data.builtin_configs()["3x3"] == ROOT / "configs" / "3x3.yaml"
    assert package_data.config_file("3x3") == ROOT / "configs" / "3x3.yaml"
    assert package_data.builtin_sweeps()["3x3_ablation"] == ROOT / "configs" / "sweeps" / "3x3_ablation.yaml"
    assert package_data.builtin_sets()["5x5"] == ROOT / "data" / "5x5.npz"
    monkeypatch.setattr(package_data, "CLONE_ROOT", tmp_path)  # an install outside a clone
    with pytest.raises(FileNotFoundError, match=r"dabjax\.configs is not installed.*pip install -e \.") as error:
        package_data.builtin_configs()
    assert "\n" not in str(error.value)


# --- a run: its saved config and its closing summary -----------------------------------------------------------


@pytest.fixture(scope="module")
def summarised_run(tmp_path_factory):
    """A smoke run (2 iterations, evaluated at 2) on a 2x2 labelled set of its own given by a relative path,
    started from its folder by `dabjax train`; ``(folder, exit status, what it printed)``."""
    root = tmp_path_factory.mktemp("summary")
    geometry = board_geometry(2, 2)
    labelled.save(labelled.build_set(geometry, list(range(2, 10)), 4, seed=0), root / "sets" / "2x2.npz")
    out, previous = io.StringIO(), os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out):
            code = main_cli.main(["train", "--config", "smoke", "run.dir=runs/s", "run.iterations=2", "eval.every=2",
                                  "eval.labelled_set=sets/2x2.npz"])
    finally:
        os.chdir(previous)
    return root, code, out.getvalue()


def test_the_closing_summary_reports_the_last_evaluation_and_where_things_are(summarised_run):
    root, code, out = summarised_run
    assert code == 0
    last = run_dir_lib.read_metrics(root / "runs" / "s")[-1]
    assert f"last evaluation, iteration 2, {last['time'] / 60:.1f} min of training:" in out
    assert (f"best-result moves on the labelled set {(root / 'sets' / '2x2.npz').resolve()}: "
            f"{last['eval/best_result_min']:.3f} "
            f"at the weakest move number, {last['eval/best_result_mean']:.3f} on average") in out
    assert f"win rate {last['eval/win_rate_vs_level1']:.2f} vs level1" in out
    assert f"run directory runs/s ({root / 'runs' / 's'}): config.yaml, metrics.jsonl" in out
    commands = summary_commands(out)
    assert commands["play it in the browser"] == "dabjax serve --board 2x2 --opponent ckpt:runs/s"
    assert commands["evaluate it"].startswith("dabjax evaluate arena --board 2x2 --agents ckpt:runs/s,")
    own_set = (root / "sets" / "2x2.npz").resolve()
    assert commands["evaluate it+"] == f"dabjax evaluate accuracy --set {own_set} --agents ckpt:runs/s"
    assert commands["train it on"] == "dabjax train --config runs/s/config.yaml run.iterations=4"
    # The saved config names its labelled set by absolute path: it resumes from any folder.
    saved = config_lib.load_config(str(root / "runs" / "s" / "config.yaml"))
    assert saved.eval.labelled_set == str(own_set)


def test_the_printed_commands_resume_and_export_the_run(summarised_run, capsys):
    root, _, out = summarised_run
    commands = summary_commands(out)
    previous = os.getcwd()
    os.chdir(root)
    try:
        for what in ("train it on", "export it"):
            argv = shlex.split(commands[what])
            assert argv[0] == "dabjax" and main_cli.main(argv[1:]) == 0, what
    finally:
        os.chdir(previous)
    assert [row["iteration"] for row in run_dir_lib.read_metrics(root / "runs" / "s")] == [1, 2, 3, 4]
    resumed = capsys.readouterr().out
    assert "resuming boxeszero on 2x2 at iteration 2" in resumed and "last evaluation, iteration 4" in resumed
    agent = json.loads((root / "runs" / "s-agent" / pretrained.AGENT_FILE).read_text())
    assert agent["source"]["iteration"] == 4


def test_a_run_without_evaluations_says_so(tmp_path, capsys):
    assert train_cli.main(["--config", "smoke", f"run.dir={tmp_path / 'r'}", "run.iterations=1", "eval.every=5"]) == 0
    out = capsys.readouterr().out
    assert "no evaluation yet (the run evaluates every 5 iterations)" in out
    assert f"run directory {tmp_path / 'r'}: config.yaml" in out  # an absolute run.dir is not repeated
    resume = f"dabjax train --config {tmp_path / 'r' / 'config.yaml'} run.iterations=2"
    assert summary_commands(out)["train it on"] == resume


# --- the user's mistakes and the program's failures ------------------------------------------------------------


def test_a_bad_override_is_the_users_mistake_naming_the_key(tmp_path, capsys):
    assert train_cli.main(["--config", "smoke", f"run.dir={tmp_path / 'r'}", "train.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("train.py: error: config key 'train.lrr'") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def fail_in_training(monkeypatch):
    """Makes the BoxesZero run raise the ValueError a bug deep in training would."""
    def broken(config, quiet=False):
        raise ValueError("an array of the wrong shape, deep in training")

    monkeypatch.setattr(train_cli, "train", broken)


@pytest.mark.parametrize("debug_argv, debug_variable", [([], None), (["--debug"], None), ([], "1")])
def test_an_error_inside_training_is_a_failure_not_a_usage_error(debug_argv, debug_variable, tmp_path, capsys,
                                                                  monkeypatch):
    fail_in_training(monkeypatch)
    if debug_variable is None:
        monkeypatch.delenv(faults.DEBUG_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(faults.DEBUG_VARIABLE, debug_variable)
    status = train_cli.main(["--config", "smoke", f"run.dir={tmp_path / 'r'}", *debug_argv])
    err = capsys.readouterr().err
    assert status == faults.UNEXPECTED != 2
    last = err.splitlines()[-1]
    assert last.startswith("train.py: unexpected error (ValueError: an array of the wrong shape, deep in training)")
    assert "--debug" in last and "error: " not in last.split("(")[0]
    if debug_argv or debug_variable:
        assert err.startswith("Traceback") and 'in broken\n    raise ValueError("an array' in err
    else:
        assert err.count("\n") == 1


def test_dabjax_debug_before_any_command_shows_the_traceback(tmp_path, capsys, monkeypatch):
    fail_in_training(monkeypatch)
    monkeypatch.delenv(faults.DEBUG_VARIABLE, raising=False)
    argv = ["train", "--config", "smoke", f"run.dir={tmp_path / 'r'}"]
    assert main_cli.main(["--debug", *argv]) == faults.UNEXPECTED
    assert "Traceback" in capsys.readouterr().err
    assert faults.DEBUG_VARIABLE not in os.environ  # set for the command only
    assert main_cli.main(argv) == faults.UNEXPECTED
    assert "Traceback" not in capsys.readouterr().err


def test_evaluate_tells_a_bad_agent_from_a_failure_while_playing(capsys, monkeypatch):
    from dabjax.cli import evaluate
    from dabjax.evaluation import arena

    monkeypatch.delenv(faults.DEBUG_VARIABLE, raising=False)
    argv = ["arena", "--agents", "random,greedy", "--board", "2x2", "--games", "2"]
    assert evaluate.main([*argv[:2], "random,wizard", *argv[3:]]) == 2
    assert capsys.readouterr().err.startswith("error: unknown agent 'wizard'")

    def broken(*args, **kwargs):
        raise ValueError("scores out of range")

    monkeypatch.setattr(arena, "play_pairings", broken)
    assert evaluate.main(argv) == faults.UNEXPECTED
    err = capsys.readouterr().err  # after the progress bar's lines
    assert err.splitlines()[-1].startswith("evaluate.py: unexpected error (ValueError: scores out of range)")
    assert "Traceback" not in err
    for debug_argv in ([*argv, "--debug"], ["--debug", *argv]):  # after the command's name or before it
        assert evaluate.main(debug_argv) == faults.UNEXPECTED
        assert "Traceback" in capsys.readouterr().err


# --- dabjax solve ---------------------------------------------------------------------------------------------


def solved_margins(text: str) -> dict[int, int]:
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"\(line +(\d+)\) +([+-]\d+)", text)}


def test_solve_gives_the_tables_values(capsys):
    geometry = board_geometry(2, 2)
    table = retrograde.solve_table(geometry)
    assert solve.main(["--board", "2x2"]) == 0
    out = capsys.readouterr().out
    empty = np.zeros(geometry.num_lines, bool)
    assert f"A to move {solve.result_text(int(table[0]))} with perfect play" in out
    assert solved_margins(out) == dict(enumerate(retrograde.move_values(geometry, table, empty).astype(int).tolist()))
    moves = "h 0 0; v 0 0; h 1 0; v 0 1"  # A closes nothing, B draws the box's last line and moves again
    state = notation.state_from_moves(geometry, moves)
    assert solve.main(["--board", "2x2", "--moves", moves]) == 0
    out = capsys.readouterr().out
    mover = int(state.current_player)
    margin = int(state.scores[mover] - state.scores[1 - mover])
    values = retrograde.move_values(geometry, table, np.asarray(state.lines))
    legal = ~np.asarray(state.lines)
    assert margin == 1 and solved_margins(out) == {int(l): margin + int(values[l]) for l in np.flatnonzero(legal)}
    assert f"{notation.PLAYER_LABELS[mover]} to move" in out
    best = [line for line in solved_margins(out) if solved_margins(out)[line] == max(solved_margins(out).values())]
    assert all(re.search(rf"\(line +{line}\) +[+-]\d+ \*!", out) for line in best)
    everything = " ".join(str(line) for line in range(geometry.num_lines))
    assert solve.main(["--board", "2x2", "--moves", everything]) == 0
    assert "the game is over" in capsys.readouterr().out
    assert solve.main(["--board", "2x2", "--moves", "h 0 0; h 0 0"]) == 2
    assert "move #1 of the list" in capsys.readouterr().err


def test_solve_refuses_a_budget_that_is_not_a_positive_number(capsys):
    for seconds in ("0", "-1", "nan"):
        assert solve.main(["--board", "2x2", "--seconds", seconds]) == 2
        assert f"error: --seconds must be > 0, got {float(seconds)}" in capsys.readouterr().err


def test_solve_on_threads_gives_one_threads_answer(capsys, monkeypatch):
    """A 4x4 position (40 lines: the position solver, not a table) on two threads, every position on both at
    once: the same report as on one thread; a thread count below 1 is refused."""
    from dabjax.solvers import position_solver

    monkeypatch.setattr(position_solver, "_SEQUENTIAL_NODES", 0)
    moves = " ".join(str(line) for line in (0, 2, 5, 9, 11, 14, 18, 20, 23, 27, 30, 33, 36, 38, 39, 1, 7, 25))
    reports = []
    for threads in ("1", "2"):
        assert solve.main(["--board", "4x4", "--moves", moves, "--threads", threads, "--seconds", "60"]) == 0
        reports.append(re.sub(r"solver, [0-9.]+ s", "solver", capsys.readouterr().out))
    assert reports[0] == reports[1] and len(solved_margins(reports[0])) == 40 - 18
    assert solve.main(["--board", "4x4", "--threads", "0"]) == 2
    assert "--threads must be at least 1, got 0" in capsys.readouterr().err


# --- the layering ---------------------------------------------------------------------------------------------


def imported_modules(path: pathlib.Path) -> set[str]:
    """The dabjax modules a file imports (``from dabjax.cli import x`` counts as ``dabjax.cli.x``), anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("dabjax")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dabjax"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    return found


def test_the_command_layer_has_no_import_cycle_and_nothing_below_imports_it():
    package = ROOT / "dabjax"
    for path in package.rglob("*.py"):
        if CLI not in path.parents and path.name != "__main__.py":
            assert not {m for m in imported_modules(path) if m.startswith("dabjax.cli")}, path
    modules = {f"dabjax.cli.{path.stem}": path for path in CLI.glob("*.py") if path.stem != "__init__"}
    graph = {name: {m for m in imported_modules(path) if m in modules and m != name} for name, path in modules.items()}
    state: dict[str, str] = {}

    def visit(name, trail):
        state[name] = "open"
        for child in graph[name]:
            assert state.get(child) != "open", f"import cycle: {' -> '.join([*trail, name, child])}"
            if child not in state:
                visit(child, [*trail, name])
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])
    assert "dabjax.cli.train" not in graph["dabjax.cli.sweep"]  # the old lazy cycle
