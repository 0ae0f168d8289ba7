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


def test_no_two_packages_import_each_other():
    """No cycle in the graph of packages (what the floors rule out, checked on its own)."""
    graph: dict[str, set[str]] = {}
    for source, target in package_imports():
        graph.setdefault(source, set()).add(target)
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
    assert not cycles, "package cycles:\n" + "\n".join(cycles)
