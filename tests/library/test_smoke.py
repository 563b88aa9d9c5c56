import subprocess
import sys

import torch

import gelus


def test_import_is_light():
    code = "import sys, gelus; heavy = {'matplotlib', 'scipy', 'gelus.data', 'gelus.experiments'}; print(sorted(heavy & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_help_runs():
    out = subprocess.run([sys.executable, "-m", "gelus", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "COMMAND" in out.stdout


def test_gelu_module_matches_definition():
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    expected = x * 0.5 * (1 + torch.erf(x / 2**0.5))
    torch.testing.assert_close(gelus.get_activation("gelu")(x), expected)
