"""What a user installs: the library without the harness's dependencies, and a wheel that works.

``pip install gelus`` brings torch and numpy only; the harness's modules (tqdm, matplotlib, scipy)
come with ``gelus[harness]``. The library must import and compute without them, and a harness
command run without them says in one line which extra to install. A subprocess stands in for an
environment without the extra: a meta-path finder refuses those modules as if they were absent.
"""

import email.parser
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import gelus
from gelus.cli import HARNESS_EXTRA, HARNESS_NEEDS, explain, main

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
HARNESS_MODULES = sorted({name for names in HARNESS_NEEDS.values() for name in names})
# Run first in a subprocess: from then on, importing any harness module fails as if not installed.
WITHOUT_HARNESS = f"""
import sys

class _WithoutHarness:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {HARNESS_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _WithoutHarness())
"""
INSTALL_HINT = f"pip install 'gelus[{HARNESS_EXTRA}]'"


def _python(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_harness_modules_are_the_harness_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_requirement_name(r) for r in project["optional-dependencies"][HARNESS_EXTRA]}
    assert set(HARNESS_MODULES) <= names
    assert not names & {_requirement_name(r) for r in project["dependencies"]}


def test_the_library_imports_and_computes_without_the_harness_extra(tmp_path):
    code = WITHOUT_HARNESS + (
        "import torch\n"
        "import gelus, gelus.functional, gelus.modules, gelus.registry, gelus.init\n"
        "x = torch.linspace(-4, 4, 9, requires_grad=True)\n"
        "y = gelus.functional.gelu(x) + gelus.get_activation('gelu_new')(x)\n"
        "y.sum().backward()\n"
        "assert torch.isfinite(x.grad).all()\n"
        "print(round(gelus.init.calculate_gain('gelu'), 4))\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {HARNESS_MODULES!r}))\n"
    )
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["1.5335", "[]"]


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (["run", "mnist-classification", "--out", "runs"], "tqdm"),
        (["reproduce", "--quick", "--out", "runs"], "tqdm, matplotlib, scipy"),
    ],
)
def test_a_harness_command_without_the_extra_says_which_extra_in_one_line(tmp_path, argv, missing):
    code = WITHOUT_HARNESS + (
        f"sys.argv = ['gelus', *{argv!r}]\n"
        "import runpy\n"
        "runpy.run_module('gelus', run_name='__main__', alter_sys=True)\n"  # python -m gelus
    )
    result = _python(code, tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"gelus {argv[0]}: error: needs the harness extra: {INSTALL_HINT} (missing: {missing})\n"
    )
    assert not (tmp_path / "runs").exists()  # refused before it started


def test_a_harness_import_that_fails_anyway_is_explained_and_any_other_stays_a_bug():
    error = ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib.figure")
    assert explain(error) == (f"needs the harness extra: {INSTALL_HINT} (missing: matplotlib)", 2)
    assert explain(ModuleNotFoundError("No module named 'gelus.nothing'", name="gelus")) is None


# what the sdist and the wheel are built from (MANIFEST.in and pyproject.toml choose within it)
SOURCES = ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "src", "tests")


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The sdist, and the wheel built from it, as ``python -m build --no-isolation`` makes them."""
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*")
            shutil.copytree(source, tree / name, ignore=ignore)
        else:
            shutil.copy2(source, tree / name)
    out = tree / "dist"
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)]
    result = subprocess.run(build, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # setuptools' warnings, e.g. the license-as-table form that stops building in 2027
    assert "Deprecat" not in result.stdout + result.stderr
    (sdist,) = out.glob("gelus-*.tar.gz")
    (wheel,) = out.glob("gelus-*.whl")
    return sdist, wheel


def test_the_wheel_metadata_names_the_license_version_dependencies_and_command(dists):
    _, wheel = dists
    with zipfile.ZipFile(wheel) as archive:
        info = wheel.name.split("-py3")[0] + ".dist-info"
        metadata = email.parser.Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        names = archive.namelist()
    assert metadata["Metadata-Version"] == "2.4"  # PEP 639
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert f"{info}/licenses/LICENSE" in names
    assert not [c for c in metadata.get_all("Classifier") if c.startswith("License ::")]
    assert metadata["Version"] == gelus.__version__
    assert metadata.get_all("Project-URL") is None and metadata["Home-page"] is None
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requires = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(map(Requirement, requires), key=str) == sorted(
        map(Requirement, project["dependencies"]), key=str
    )
    (torch,) = [Requirement(r) for r in requires if _requirement_name(r) == "torch"]
    assert torch.specifier.contains("2.11.0") and torch.specifier.contains("2.15.0")
    assert not torch.specifier.contains("2.10.0")
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata.get_content_type() == "text/plain"  # the header; the README is the body
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert entry_points.split() == ["[console_scripts]", "gelus", "=", "gelus.cli:main"]


def test_the_sdist_ships_no_tests_and_twine_passes_both_strictly(dists):
    sdist, wheel = dists
    with tarfile.open(sdist) as archive:
        names = [name.partition("/")[2] for name in archive.getnames()]
    assert {"pyproject.toml", "README.md", "LICENSE", "src/gelus/__init__.py"} <= set(names)
    # all or nothing: setuptools alone would ship tests/test*.py without conftest.py or helpers
    assert not [name for name in names if name.startswith("tests")]
    check = [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)]
    result = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2


def test_gelus_version_names_gelus_torch_and_python(capsys):
    import torch

    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == (
        f"gelus {gelus.__version__} (torch {torch.__version__}, "
        f"Python {platform.python_version()})\n"
    )


@pytest.mark.slow
def test_a_wheel_from_a_clean_checkout_installs_and_works_in_a_fresh_venv(tmp_path):
    """The committed tree, cloned, builds a wheel that imports and computes outside the source tree.

    A clone (HEAD) rather than the work tree: what a user or CI checks out, with no build leftovers
    and no uncommitted or untracked file. The venv sees the system's site-packages so that torch is
    not downloaded again; the wheel is installed with --no-deps, and the import must come from the
    venv, not from this checkout.
    """
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no committed tree to build from")
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True, timeout=120)

    dist = tmp_path / "dist"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip_wheel, "-q", "-w", str(dist), str(checkout)], check=True, timeout=120)
    (wheel,) = dist.glob("gelus-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert "gelus/py.typed" in names
    assert {name.split("/")[0] for name in names} == {
        "gelus",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    assert not [n for n in names if Path(n).name.startswith("test_") or n.endswith("conftest.py")]
    requires = [
        line.removeprefix("Requires-Dist: ")
        for line in metadata.decode().splitlines()
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    ]
    assert sorted(map(_requirement_name, requires)) == ["numpy", "torch"]
    assert "<" not in next(r for r in requires if _requirement_name(r) == "torch")

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed"]
    subprocess.run([*install, str(wheel)], check=True, timeout=120)
    code = (
        "import gelus, torch\n"
        "from gelus import functional as F\n"
        "print(gelus.__file__)\n"
        "print(F.gelu(torch.tensor([1.0])).item())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = subprocess.run(
        [str(python), "-c", code], cwd=outside, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    where, value = result.stdout.split()
    assert Path(where).is_relative_to(venv)
    assert float(value) == pytest.approx(0.8413447460685429, rel=1e-6)  # Φ(1)
    cli = subprocess.run(
        [str(venv / "bin" / "gelus"), "--help"],
        cwd=outside,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr


def _requirement_name(requirement: str) -> str:
    return Requirement(requirement).name


def test_the_readme_opens_with_the_two_commands_and_ci_runs_its_test_command():
    readme = (ROOT / "README.md").read_text()
    opening = readme[: readme.index("## What the results say")]
    commands = [
        line.split("#")[0].strip() for line in opening.splitlines() if line.startswith("make ")
    ]
    assert commands == ["make reproduce", "make test"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == "make test"
    assert len(readme.splitlines()) < 150  # the detail lives in docs/
    # the install section: torch's CPU build before gelus, so pip pulls no CUDA packages
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme


def test_every_relative_link_of_the_readme_and_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path, _, anchor = target.partition("#")
            if "://" in target or not path:
                continue
            if not (page.parent / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and path.endswith(".md"):
                headings = re.findall(r"^#+ (.+)$", (page.parent / path).read_text(), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    missing.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not missing, missing


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
