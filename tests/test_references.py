"""What the docs and docstrings name exists: files, modules and their functions.

A claim stated in one place and linked from others drifts when the thing it names moves; this
reads README.md, docs/*.md and every docstring and comment under src/ and tools/, and checks each
file path (``experiments/run.py``) and each ``module.name`` of this package
(``run.resolve_run``, ``gelus.experiments.driver.train_job``) against the source as it is. The
CHANGELOG is history and is not read.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "gelus"

# paths named as examples of what a user or another project has, not files of this repository
_FOREIGN_PREFIXES = (
    *("torch/", "triton/", "runtime/", "transformers/", "src/transformers/", "timm/"),
    *("runs/", "out_dir/", "/", "~", ".."),
)
_FOREIGN_FILES = {"report.md", "my_acts.py", "all_convnet.py", "SGDR_WRNs_gelu.py"}
# `cnn.dropout`, `train.epochs`, `run.done`, `plugin.trainers`: a config key or a variable's
# field in prose, not a module's name
_NOT_MODULES = {"cnn", "model", "train", "optim", "run", "config", "records"}
_NOT_MODULES |= {"plugin", "report", "aggregate", "spec", "job", "engine", "data", "args"}
_FILE_SUFFIXES = {"py", "md", "sh", "sqlite", "gz", "csv", "html", "json", "txt", "npz"}
_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|sh|toml|cfg))(?![\w/])")
_DOTTED = re.compile(r"`((?:gelus\.)?[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")


@cache
def _repository_files() -> tuple[str, ...]:
    skip = {".git", "__pycache__", ".venv", "node_modules", "runs"}
    files = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not skip & set(parts) and not parts[0].startswith(".venv"):
            files.append(path.relative_to(ROOT).as_posix())
    return tuple(files)


def _path_exists(reference: str) -> bool:
    if reference.startswith(_FOREIGN_PREFIXES) or reference in _FOREIGN_FILES:
        return True
    reference = reference.removeprefix("./")
    return any(f == reference or f.endswith("/" + reference) for f in _repository_files())


@cache
def _modules() -> dict[str, list[Path]]:
    """Module basename (and dotted name under gelus) -> its source files."""
    modules: dict[str, list[Path]] = {}
    for path in SOURCE.rglob("*.py"):
        dotted = ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts)
        dotted = dotted.removesuffix(".__init__")
        for name in {dotted, dotted.rsplit(".", 1)[-1]}:
            modules.setdefault(name, []).append(path)
    return modules


@cache
def _defined(path: Path) -> frozenset[str]:
    """Names a module defines at its top level and in its classes (as ``Class.name`` too)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names |= _names_of(node)
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                names |= {f"{node.name}.{n}" for n in _names_of(member)}
    return frozenset(names)


def _names_of(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def _dotted_exists(reference: str) -> bool | None:
    """True / False for a name of this package's modules; None when it names none of them."""
    parts = reference.split(".")
    if parts[0] != "gelus" and importlib.util.find_spec(parts[0]) is not None:
        return None  # another package's name (timm.layers), though gelus has a module of that name
    if any(m == reference or m.endswith("." + reference) for m in _modules()):
        return None  # a module itself
    if parts[-1] in _FILE_SUFFIXES or parts[0] in _NOT_MODULES:
        return None
    for split in range(len(parts) - 1, 0, -1):
        module, attribute = ".".join(parts[:split]), ".".join(parts[split:])
        if module in _modules() and (module.startswith("gelus") or "." not in module):
            if module == "gelus" or (module == "functional" and attribute.startswith("F")):
                return None  # the package root re-exports; torch's F.* is not ours
            return any(_attribute_in(attribute, p) for p in _modules()[module])
    return None


def _attribute_in(attribute: str, path: Path) -> bool:
    head = attribute.split(".")
    defined = _defined(path)
    if head[0] not in defined:
        return False
    if len(head) > 1 and any(name.startswith(head[0] + ".") for name in defined):  # a class
        return ".".join(head[:2]) in defined
    return True


def _texts() -> list[tuple[str, str]]:
    """(where, text) of every doc page, docstring and comment that can name things."""
    texts = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in _docs()]
    for path in [*SOURCE.rglob("*.py"), *(ROOT / "tools").glob("*.py")]:
        where = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, documented) and (doc := ast.get_docstring(node, clean=False)):
                texts.append((f"{where}:{getattr(node, 'name', '<module>')}", doc))
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                texts.append((f"{where}:{token.start[0]}", token.string))
    return texts


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_file_named_in_docs_and_docstrings_exists():
    missing = sorted(
        f"{where}: {reference}"
        for where, text in _texts()
        for reference in _PATH.findall(text)
        if not _path_exists(reference)
    )
    assert missing == [], "\n".join(missing)


def test_every_function_named_in_docs_and_docstrings_exists():
    missing = sorted(
        f"{where}: {reference}"
        for where, text in _texts()
        for reference in _DOTTED.findall(text)
        if _dotted_exists(reference) is False
    )
    assert missing == [], "\n".join(missing)


def test_the_checks_catch_a_name_that_does_not_exist():
    # the oracle of the two tests above: a moved file and a renamed function are caught
    assert not _path_exists("experiments/no_such_module.py")
    assert _path_exists("experiments/run.py") or _path_exists("run.py")
    assert _dotted_exists("driver.no_such_function") is False
    assert _dotted_exists("numpy.mean") is None
