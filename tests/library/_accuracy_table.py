"""docs/NUMERICS.md's accuracy table, read and measured: the one place the fp32 bounds are written.

``documented()`` parses the table; ``measure(row)`` computes the same cells on this machine's
instruction set (a cell is the maximum over its region of the value's error, in ulp of the fp32
result or, where the cell says ``abs``, absolute, and of the gradient's absolute error). The tests
check each measured cell against the documented one; ``tools/accuracy_table.py`` prints the
measured table (run it with ``ATEN_CPU_CAPABILITY=avx2`` too, on a machine with AVX-512).
"""

import math
import re
from pathlib import Path

import numpy as np
import torch

import gelus.functional as G
from gelus import _gelu
from gelus import _swish as swish_kernels
from gelus.conformance import grid  # noqa: F401  (re-exported: the grid `gelus check` measures)
from oracles import gelu_oracle, swish, swish_slope, tanh_form, tanh_slope

NUMERICS = Path(__file__).resolve().parents[2] / "docs" / "NUMERICS.md"
# the table's columns: (label, lower, upper); [3, 20] includes 20
REGIONS = (("x < −3", -math.inf, -3.0), ("[−3, 3)", -3.0, 3.0), ("[3, 20]", 3.0, math.inf))
FLT_MIN = float(np.finfo(np.float32).tiny)
# the tanh form's ulp are counted for x ≥ −10: below, fp32 σ(z) underflows (the table's note)
TANH_ULP_FROM = -10.0



def _kernels(approximate: str, accurate: bool = False):
    return (
        lambda t: _gelu.kernel_forward(t, approximate, accurate=accurate),
        lambda t: _gelu.kernel_backward(torch.ones_like(t), t, approximate, accurate=accurate),
    )


def _generalized(t):
    t = t.clone().requires_grad_()
    y = G.generalized_gelu(t, 0.0, 1.0)
    (g,) = torch.autograd.grad(y.sum(), t)
    return y.detach(), g


def _exact(x):
    return gelu_oracle(x)[0]


def _exact_slope(x):
    return gelu_oracle(x)[1]


# the table's row label -> (forward, backward or None if forward returns both, value, slope)
ROWS = {
    "exact, `accurate=True`, eager": (*_kernels("none", True), _exact, _exact_slope),
    "exact (default), eager / compiled": (*_kernels("none"), _exact, _exact_slope),
    "tanh form": (*_kernels("tanh"), tanh_form, tanh_slope),
    "sigmoid form (β = 1.702)": (*_kernels("sigmoid"), swish(1.702), swish_slope(1.702)),
    "SiLU (β = 1)": (
        swish_kernels.forward,
        lambda t: swish_kernels.backward(torch.ones_like(t), t),
        swish(1.0),
        swish_slope(1.0),
    ),
    "generalized (μ = 0, σ = 1), eager": (_generalized, None, _exact, _exact_slope),
}


def ulp(y: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|y − reference| in ulp of the fp32 number nearest the reference."""
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    return np.abs(y.astype(np.float64) - reference) / spacing


def documented() -> dict[str, dict[str, tuple[float, str, float | None]]]:
    """{row: {region: (value bound, "ulp" or "abs", gradient bound or None)}} from NUMERICS.md."""
    text = NUMERICS.read_text()
    section = text[text.index("\n## Accuracy\n") + 1 :]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    cells = {}
    for line in section.splitlines():
        parts = [part.strip() for part in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(parts) == 4 and parts[0] != "path" and "---" not in line:
            cells[parts[0]] = dict(zip((r[0] for r in REGIONS), map(_cell, parts[1:]), strict=True))
    return cells


def _cell(text: str) -> tuple[float, str, float | None]:
    """ "157 ulp / 5.8e-9" -> (157.0, "ulp", 5.8e-9); "1.2e-6 abs (1.7e7 ulp) / 3.1e-7" -> abs."""
    value, _, gradient = text.partition(" / ")
    match = re.match(r"([\d.e+-]+) (ulp|abs)", value.replace("−", "-"))
    if match is None:
        raise ValueError(f"docs/NUMERICS.md: unreadable accuracy cell {text!r}")
    bound = float(gradient.split()[0].replace("−", "-")) if gradient else None
    return float(match[1]), match[2], bound


def measure(row: str, x: np.ndarray) -> dict[str, tuple[float, float]]:
    """{region: (value error in the documented unit, gradient's absolute error)} on this machine."""
    forward, backward, value, slope = ROWS[row]
    units = {region: unit for region, (_, unit, _) in documented()[row].items()}
    t = torch.from_numpy(x)
    y, g = forward(t) if backward is None else (forward(t), backward(t))
    y, g = y.numpy().astype(np.float64), g.numpy().astype(np.float64)
    xd = x.astype(np.float64)
    reference, reference_slope = value(xd), slope(xd)
    counted = np.abs(reference) >= FLT_MIN  # ulp of a subnormal result say nothing
    if row == "tanh form":
        counted &= xd >= TANH_ULP_FROM
    cells = {}
    for region, low, high in REGIONS:
        inside = (xd >= low) & (xd < high)
        if units[region] == "abs":
            error = np.abs(y - reference)[inside]
        else:
            error = ulp(y, reference)[inside & counted]
        gradient = np.abs(g - reference_slope)[inside]
        cells[region] = (float(error.max()), float(gradient.max()))
    return cells
