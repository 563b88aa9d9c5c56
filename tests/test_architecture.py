"""The harness runs one way: no import cycle between its areas or between the modules of one area,
and the library never imports the harness. Read from the source (every import, lazy ones included)."""

import ast
from pathlib import Path

import gelus

SOURCE = Path(gelus.__file__).resolve().parent
AREAS = ("data", "experiments", "report", "plots", "bench")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in SOURCE.rglob("*.py"):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The gelus modules ``path`` imports anywhere in its body (``from a import b``: a.b if it is
    a module, else a)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            names = [n for n in names if n in modules][:1] or [node.module]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] == "gelus" and n in modules)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in AREAS else "library"


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_areas():
    areas: dict[str, set[str]] = {}
    for module, imported in _graph().items():
        if module == "gelus.cli":
            continue  # the command line loads the areas by name
        areas.setdefault(_area(module), set()).update(
            _area(i) for i in imported if _area(i) != _area(module)
        )
    assert _cycle(areas) is None, _cycle(areas)
    assert areas["library"] == set()  # the library never imports the harness
    assert "report" not in areas["experiments"] and "report" not in areas["plots"]


def test_no_area_imports_the_command_line():
    # the core raises its own errors (gelus.experiments.errors); only gelus.cli maps them to flags
    graph = _graph()
    importers = sorted(m for m, imported in graph.items() if "gelus.cli" in imported)
    importers.remove("gelus.__main__")  # `python -m gelus` is the command line
    assert importers == [], importers


def test_config_imports_no_activation_code():
    # activations are resolved once (activation_spec); a config holds their names
    imported = _graph()["gelus.experiments.config"]
    assert not {i for i in imported if i.startswith(("gelus.registry", "gelus.functional"))}
    assert "gelus.experiments.activation_spec" not in imported


def test_no_function_in_experiments_is_longer_than_60_lines():
    long = []
    for path in (SOURCE / "experiments").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == [], long


def test_no_import_cycle_between_modules():
    graph = _graph()
    # a package's __init__ re-exporting its modules is not a dependency of those modules
    edges = {
        m: {i for i in imported if not (i in m and _is_package(i))} for m, imported in graph.items()
    }
    assert _cycle(edges) is None, _cycle(edges)


def _is_package(name: str) -> bool:
    return (SOURCE.parent / Path(*name.split(".")) / "__init__.py").is_file()


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
