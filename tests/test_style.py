"""House style the machine can check: ``ruff check`` passes with the rules and line length of pyproject.toml, and
the packages stand in floors (dabjax/__init__.py), every import going down them and no two packages importing
each other."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the floors: every import goes down ---------------------------------------------------------------------

PACKAGE = ROOT / "dabjax"
# Bottom to top, as dabjax/__init__.py's docstring gives them. Each may import only from the floors below it.
FLOORS = ("game", "search", "solvers", "training", "baselines", "evaluation", "runs", "cli")
# The modules beside the packages: package_data (names of the built-in files) imports nothing of dabjax, the
# package root re-exports the game, ``python -m dabjax`` runs the command line.
RANKS = {"package_data": -1, **{name: 2 * i for i, name in enumerate(FLOORS)}, "__init__": 1,
         "__main__": 2 * len(FLOORS)}


def floor_of_module(name: str) -> str:
    """The floor of a dabjax module or attribute name (``dabjax.game.env`` -> ``game``; ``dabjax.init``, an
    attribute of the package root, -> ``__init__``)."""
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__"
    if (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file():
        return parts[1]
    return "__init__"


def floor_of_file(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def dabjax_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of dabjax in the file, at the top or inside a function or class
    (``from dabjax.game import env`` is ``dabjax.game.env``; relative imports are resolved)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = list(path.relative_to(ROOT).with_suffix("").parts[: -node.level])
                module = ".".join(package + ([module] if module else []))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "dabjax" or name.startswith("dabjax.")]


def package_imports() -> dict[tuple[str, str], list[str]]:
    """``(floor, floor imported) -> ["path:line module", ...]`` over every module of dabjax, floors apart."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = floor_of_file(path)
        for line, name in dabjax_imports(path):
            target = floor_of_module(name)
            if target != source:
                edges.setdefault((source, target), []).append(f"{path.relative_to(ROOT)}:{line} {name}")
    return edges


def test_the_floors_are_the_ones_the_package_documents():
    import dabjax

    assert " < ".join(FLOORS) in " ".join(dabjax.__doc__.split())
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    assert packages | modules == set(RANKS), "every package and top-level module has a floor"


def test_every_import_goes_down_the_floors():
    """An import from a higher floor, anywhere in a module (inside functions too), fails."""
    upward = [f"{where} ({source} -> {target})" for (source, target), sites in package_imports().items()
              if RANKS[target] > RANKS[source] for where in sites]
    assert not upward, "imports up the floors:\n" + "\n".join(upward)


def cycles_in(graph: dict[str, set[str]]) -> list[str]:
    """The cycles a depth-first walk of ``graph`` (name -> names it imports) meets, as ``a -> b -> a``."""
    state: dict[str, str] = {}
    cycles = []

    def visit(name, trail):
        state[name] = "open"
        for child in sorted(graph.get(name, ())):
            if state.get(child) == "open":  # on the path from the start: a cycle
                cycles.append(" -> ".join([*trail[trail.index(child):], child]))
            elif child not in state:
                visit(child, [*trail, child])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_no_two_packages_import_each_other():
    """No cycle in the graph of packages (what the floors rule out, checked on its own)."""
    graph: dict[str, set[str]] = {}
    for source, target in package_imports():
        graph.setdefault(source, set()).add(target)
    cycles = cycles_in(graph)
    assert not cycles, "package cycles:\n" + "\n".join(cycles)


def module_imports() -> dict[str, set[str]]:
    """``module -> modules of dabjax it imports`` (anywhere in it); a package is its ``__init__``, and ``from
    dabjax.cli import run_guarded`` imports ``dabjax.cli``."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        for _, imported in dabjax_imports(path):
            target = imported if imported in modules else imported.rpartition(".")[0]
            if target in modules and target != name:
                graph.setdefault(name, set()).add(target)
    return graph


def test_no_two_modules_import_each_other():
    """No cycle between modules either, inside a package too, lazy imports (inside functions, ``__main__``
    blocks) counted: what two modules both need lives in one of them, or in a third below both."""
    graph = module_imports()
    assert "dabjax.cli.faults" in graph["dabjax.cli"] and "dabjax.cli.faults" in graph["dabjax.cli.serve"]
    cycles = cycles_in(graph)
    assert not cycles, "module cycles:\n" + "\n".join(cycles)


# --- the command layer parses, prints and serves; it computes nothing on the device and trains nothing ----------

CLI = PACKAGE / "cli"
# What array programs and learning are written with: a cli module importing one of these is doing the floors'
# work (``jax`` itself stays: keys, device reads and jax.distributed are the shell's).
ARRAY_MODULES = ("jax.numpy", "jax.lax", "jax.nn", "jax.scipy", "optax", "flax", "mctx", "numba")
# jax's transformations: a jitted, vectorised or differentiated function belongs below the command layer.
TRANSFORMS = {"jit", "pmap", "vmap", "grad", "value_and_grad", "shard_map", "checkpoint", "remat", "custom_jvp",
              "custom_vjp"}
# The training machinery; a command reaches it only through a run (dabjax.runs).
TRAINING_MODULES = ("dabjax.training.learner", "dabjax.training.selfplay", "dabjax.training.supervised",
                    "dabjax.training.replay", "dabjax.training.trainer", "dabjax.training.curriculum",
                    "dabjax.training.iteration",
                    "dabjax.baselines.td")
RUN_BASE_CLASS = "ResumableTraining"  # dabjax.runs.run_dir: a training loop of its own


def logic_in_command_layer(source: str) -> list[str]:
    """``"line: what"`` for each place in ``source`` (a module's text) that computes or trains: an import of an
    array or learning library or of the training machinery, a jax transformation (``jax.jit``, ``@jit``,
    ``partial(jax.jit, ...)``, ``jax.vmap``, ...), a subclass of ``ResumableTraining``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            names = []
        for name in names:
            if any(name == m or name.startswith(f"{m}.") for m in ARRAY_MODULES + TRAINING_MODULES) or (
                    name.startswith("jax.") and name.split(".")[1] in TRANSFORMS):
                found.append(f"{node.lineno}: imports {name}")
        if (isinstance(node, ast.Attribute) and node.attr in TRANSFORMS and isinstance(node.value, ast.Name)
                and node.value.id == "jax"):
            found.append(f"{node.lineno}: jax.{node.attr}")
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base).split(".")[-1] == RUN_BASE_CLASS
                                                  for base in node.bases):
            found.append(f"{node.lineno}: class {node.name}({RUN_BASE_CLASS})")
    return found


def test_the_check_for_logic_in_the_command_layer_finds_it():
    snippet = """
import functools
import jax
import jax.numpy as jnp
from jax import jit
from dabjax.runs import run_dir
from dabjax.training import learner

@jax.jit
def double(x):
    return 2 * x

step = functools.partial(jax.jit, static_argnums=0)
batched = jax.vmap(double)

class MyTraining(run_dir.ResumableTraining):
    pass
"""
    found = sorted(line.split(": ", 1)[1] for line in logic_in_command_layer(snippet))
    assert found == sorted(["imports jax.numpy", "imports jax.jit", "imports dabjax.training.learner", "jax.jit",
                            "jax.jit", "jax.vmap", "class MyTraining(ResumableTraining)"]), found
    assert not logic_in_command_layer("import jax\nkey = jax.random.PRNGKey(0)\nprint(jax.process_index())\n")


def test_the_command_layer_defines_no_jitted_function_and_no_training():
    """cli/ parses arguments, prints and serves HTTP; what it runs is in the floors below (dabjax.runs for runs)."""
    found = [f"{path.relative_to(ROOT)}:{where}" for path in sorted(CLI.rglob("*.py"))
             for where in logic_in_command_layer(path.read_text())]
    assert not found, "logic in the command layer:\n" + "\n".join(found)
