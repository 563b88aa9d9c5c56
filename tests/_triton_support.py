"""Shared by the Triton kernel tests: the device, the kernels, and float64 oracles."""

import math
import os

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():  # conftest.py sets this before triton is imported; kept for
    os.environ.setdefault("TRITON_INTERPRET", "1")  # running one test file alone

triton = pytest.importorskip("triton", reason="the kernels need Triton (pip install triton)")
scipy_special = pytest.importorskip("scipy.special")
mpmath = pytest.importorskip("mpmath")

from gelus._triton import interpreting, load  # noqa: E402

__all__ = [
    "DEVICE", "FLOATS", "FORMS", "cdf", "mpmath", "mpmath_oracle", "on_device", "ops", "oracle",
    "pdf", "scipy_special", "triton_marks", "ulp_error",
]  # fmt: skip

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ops = load() if DEVICE == "cuda" or interpreting() else None
triton_marks = [
    pytest.mark.skipif(
        ops is None, reason="no CUDA and TRITON_INTERPRET is set to something other than 1"
    ),
    # The interpreter runs on numpy, which warns about the inf and nan arithmetic that the edge
    # cases exercise on purpose (in branches that tl.where discards).
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
]

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FORMS = ("none", "tanh", "sigmoid")
SQRT_2PI = math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------- float64 oracles (numpy, scipy)


def cdf(x):
    return 0.5 * scipy_special.erfc(-x / math.sqrt(2.0))


def pdf(x):
    return np.exp(-0.5 * x * x) / SQRT_2PI


def tanh_z(x):
    a = 2.0 * math.sqrt(2.0 / math.pi)
    return x * a * (1.0 + 0.044715 * x * x), a * (1.0 + 3 * 0.044715 * x * x)


def oracle(x, approximate="none"):
    """(value, slope) of GELU in the given form, float64."""
    with np.errstate(all="ignore"):
        if approximate == "none":
            return x * cdf(x), cdf(x) + x * pdf(x)
        if approximate == "tanh":
            z, dz = tanh_z(x)
            s = scipy_special.expit(z)
            return x * s, s + x * dz * s * (1 - s)
        z = 1.702 * x
        s = scipy_special.expit(z)
        return x * s, s + z * s * (1 - s)


def mpmath_oracle(points):
    """(x·Φ(x), Φ(x) + x·φ(x)) to 40 digits, rounded to float64."""
    mpmath.mp.dps = 40
    xs = [mpmath.mpf(float(p)) for p in points]
    value = np.array([float(x * mpmath.ncdf(x)) for x in xs])
    slope = np.array([float(mpmath.ncdf(x) + x * mpmath.npdf(x)) for x in xs])
    return value, slope


def ulp_error(result: torch.Tensor, reference: np.ndarray) -> np.ndarray:
    """|result − reference| in units of the spacing of the result's dtype at the reference."""
    np_dtype = {torch.float32: np.float32, torch.float64: np.float64}[result.dtype]
    spacing = np.spacing(np.abs(reference).astype(np_dtype)).astype(np.float64)
    return np.abs(result.double().cpu().numpy() - reference) / spacing


def on_device(values, dtype=torch.float32):
    return torch.as_tensor(np.asarray(values, dtype=np.float64)).to(dtype).to(DEVICE)
