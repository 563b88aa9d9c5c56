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


def _long_functions(root: Path, limit: int = 60) -> list[str]:
    """The functions under ``root`` longer than ``limit`` lines as ``ruff format`` writes them:
    the files are formatted without their ``# fmt: skip`` markers, so a squeezed line counts as
    the lines it stands for."""
    import shutil
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for path in root.rglob("*.py"):
            copy = Path(folder) / path.relative_to(root)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text(encoding="utf-8").replace("# fmt: skip", ""))
        project = SOURCE.parents[1] / "pyproject.toml"
        config = ["--config", str(project)] if project.is_file() else ["--line-length", "100"]
        formatter = [sys.executable, "-m", "ruff"] if shutil.which("ruff") is None else ["ruff"]
        subprocess.run([*formatter, "format", "-q", *config, folder], check=True)
        long = []
        for path in sorted(Path(folder).rglob("*.py")):
            functions = [
                node
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            long += [
                f"{path.relative_to(folder)}:{node.name} ({node.end_lineno - node.lineno + 1})"
                for node in functions
                if node.end_lineno - node.lineno + 1 > limit
            ]
    return long


def test_no_function_is_longer_than_60_lines():
    # over the whole package, counted as formatted: "# fmt: skip" does not shorten a function
    assert _long_functions(SOURCE) == []


def _fmt_skip_markers(root: Path) -> list[str]:
    return [
        f"{path.relative_to(SOURCE)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
    ]


def test_fmt_skip_is_kept_for_a_few_tables():
    # at most 40 in the package and 6 in the harness's core (experiments/)
    assert len(_fmt_skip_markers(SOURCE)) <= 40, _fmt_skip_markers(SOURCE)
    experiments = _fmt_skip_markers(SOURCE / "experiments")
    assert len(experiments) <= 6, experiments


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


def _engine_vocabulary() -> tuple[set[str], set[str]]:
    """(every registered engine's names, trainers' names and tasks; the class names of every
    engine's config module): what only an engine may switch on."""
    from gelus.experiments.config import plugins

    names = set()
    for plugin in plugins():
        names |= {plugin.name, *plugin.trainers, *plugin.tasks}
    classes = {plugin.config_type.__name__ for plugin in plugins()}
    for path in (SOURCE / "experiments" / "engines").rglob("config.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes |= {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        classes |= {  # aliases of unions: CNNConfig = A | B
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
    return names, classes


def engine_switches(source: str, names: set[str], classes: set[str]) -> list[str]:
    """Where ``source`` switches on an engine: compares with (or looks up by) an engine's or a
    task's name, compares an ``engine`` / ``task`` attribute with a constant, formats an engine's
    name into another's, or tests for a config type (isinstance, issubclass, type(x) is, match)."""
    tree = ast.parse(source)
    literals = {  # module-level NAME = ("a", "b") / (TypeA, TypeB)
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def constants(node) -> set:
        if isinstance(node, ast.Name) and node.id in literals:
            node = literals[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return set().union(*(constants(e) for e in node.elts)) if node.elts else set()
        return set()

    def types(node) -> set:
        if isinstance(node, ast.Name) and node.id in literals and node.id not in classes:
            node = literals[node.id]
        if isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            return {name} & classes
        if isinstance(node, ast.Tuple | ast.BinOp):
            parts = node.elts if isinstance(node, ast.Tuple) else [node.left, node.right]
            return set().union(*(types(e) for e in parts))
        return set()

    def named(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("engine", "task")

    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            hits = set().union(*(constants(o) for o in operands)) & names
            hits |= set().union(*(types(o) for o in operands))
            if any(named(o) for o in operands) and any(constants(o) for o in operands):
                hits.add("a constant")
            if hits:
                found.append(f"line {line}: compares with {', '.join(sorted(hits))}")
        elif isinstance(node, ast.Subscript) and constants(node.slice) & names:
            found.append(f"line {line}: looks up {', '.join(sorted(constants(node.slice)))}")
        elif isinstance(node, ast.JoinedStr) and any(
            isinstance(v, ast.FormattedValue) and named(v.value) for v in node.values
        ):
            found.append(f"line {line}: formats an engine's name")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and types(node.args[1])
        ):
            found.append(f"line {line}: {node.func.id} of {', '.join(sorted(types(node.args[1])))}")
        elif isinstance(node, ast.MatchClass) and types(node.cls):
            found.append(f"line {line}: matches {', '.join(sorted(types(node.cls)))}")
    return found


def test_no_module_outside_the_engines_switches_on_an_engine():
    # an engine answers for itself (gelus.experiments.engine.EnginePlugin): the harness names none
    names, classes = _engine_vocabulary()
    assert {"mlp", "transformer-stacked", "classify", "lm"} <= names
    assert {"MLPExperimentConfig", "CIFAR10AllConvConfig", "ViTExperimentConfig"} <= classes
    engines = SOURCE / "experiments" / "engines"
    switches = [
        f"{path.relative_to(SOURCE)} {where}"
        for path in sorted(SOURCE.rglob("*.py"))
        if engines not in path.parents
        for where in engine_switches(path.read_text(encoding="utf-8"), names, classes)
    ]
    assert switches == [], switches


def test_the_switch_finder_finds_each_kind_of_switch():
    names, classes = {"mlp", "transformer-stacked", "cnn", "lm"}, {"CNNConfig", "MLPConfig"}
    source = """
STACKED = ("mlp", "transformer-stacked")
ONE_RUN = (CNNConfig,)
a = job.engine in STACKED
b = config.task != "lm"
c = ENGINES["cnn"]
d = f"{config.engine}-stacked"
e = isinstance(config, ONE_RUN)
f = isinstance(config, MLPConfig | CNNConfig)
g = type(config) is config_module.MLPConfig
match config:
    case CNNConfig():
        pass
h = config.task == other_task  # two variables: not a switch
i = isinstance(config, plugin.config_type)
j = run(task="lm")
"""
    found = engine_switches(source, names, classes)
    assert [f.split(":")[0] for f in found] == [f"line {n}" for n in (4, 5, 6, 7, 8, 9, 10, 12)]
