"""What a user installs: the library without the harness's dependencies, and a wheel that works.

``pip install gelus`` brings torch and numpy only; the harness's modules (tqdm, matplotlib, scipy)
come with ``gelus[harness]``. The library must import and compute without them, and a harness
command run without them says in one line which extra to install. A subprocess stands in for an
environment without the extra: a meta-path finder refuses those modules as if they were absent.
"""

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gelus.cli import HARNESS_EXTRA, HARNESS_NEEDS, explain

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
