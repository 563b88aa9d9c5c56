"""Shared by the Triton kernel tests: the device, the kernels, and their float64 oracles (from
tests/oracles.py)."""

import math
import os
from fractions import Fraction

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():  # conftest.py sets this before triton is imported; kept for
    os.environ.setdefault("TRITON_INTERPRET", "1")  # running one test file alone

triton = pytest.importorskip("triton", reason="the kernels need Triton (pip install triton)")
scipy_special = pytest.importorskip("scipy.special")
tl = pytest.importorskip("triton.language")
mpmath = pytest.importorskip("mpmath")

from gelus._triton import interpreting, load  # noqa: E402
from oracles import cdf, mpmath_oracle, pdf, ulp_error  # noqa: E402
from oracles import gelu_oracle as oracle  # noqa: E402

__all__ = [
    "DEVICE",
    "FLOATS",
    "FORMS",
    "NATIVE_BF16_WIDENING_EXACT",
    "NATIVE_FMA_EXACT",
    "cdf",
    "exact_fma",
    "fma_probe",
    "mpmath",
    "mpmath_oracle",
    "on_device",
    "ops",
    "oracle",
    "pdf",
    "scipy_special",
    "triton_marks",
    "ulp_error",
    "widen_probe",
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

# ---------------------------------------------------------------- an exact fma for the interpreter
# The float64 kernel takes u²'s rounding error from tl.fma(u, u, -u*u) (gelus/_triton/_math.py).
# Triton's interpreter up to 3.8 evaluates tl.fma as numpy's x*y + z, two roundings, which returns
# exactly 0 there and loses that low part (docs/CUDA.md); 3.9 rounds once. The kernel keeps its fma
# (one instruction on the GPU); where the interpreter rounds twice, the tests give it an exact one.


def exact_fma(a, b, c) -> np.ndarray:
    """a·b + c rounded once, elementwise, in float64 (exact rational arithmetic where finite)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    shape = a.shape
    a, b, c = (v.ravel() for v in (a, b, c))
    with np.errstate(all="ignore"):
        out = a * b + c  # the IEEE result wherever an input is inf or nan, and for exact zeros
    for i in np.flatnonzero(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)):
        total = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        if total:  # 0: a·b = −c is a float, so a*b + c is exact and carries IEEE's sign of zero
            try:
                out[i] = float(total)  # int / int in CPython: correctly rounded
            except OverflowError:
                out[i] = math.inf if total > 0 else -math.inf
    return out.reshape(shape)


@triton.jit
def _fma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    c = tl.load(c_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.fma(a, b, c), mask=mask)


def fma_probe(a, b, c) -> np.ndarray:
    """tl.fma(a, b, c) in float64, computed by a Triton kernel (at most 64 elements)."""
    a, b, c = (torch.as_tensor(np.asarray(v, dtype=np.float64)).to(DEVICE) for v in (a, b, c))
    out = torch.empty_like(a)
    _fma_kernel[(1,)](a, b, c, out, a.numel(), BLOCK=64)
    return out.cpu().numpy()


# (1 + 2^-30)² = 1 + 2^-29 + 2^-60: an fma that rounds once returns the 2^-60 that u*u drops.
_PROBE = 1.0 + 2.0**-30


def _install_exact_fma() -> None:
    """Make the interpreter's float64 fma round once (other dtypes keep the interpreter's)."""
    from triton.runtime import interpreter

    native = interpreter.InterpreterBuilder.create_fma

    def create_fma(self, x, y, z):
        if z.data.dtype != np.float64:
            return native(self, x, y, z)
        return interpreter.TensorHandle(exact_fma(x.data, y.data, z.data), z.dtype.scalar)

    interpreter.InterpreterBuilder.create_fma = create_fma


def _native_fma_exact() -> bool | None:
    """Whether this Triton's tl.fma rounds once in float64 (None: no kernels to ask)."""
    if ops is None:
        return None
    return bool(fma_probe([_PROBE], [_PROBE], [-_PROBE * _PROBE])[0] == 2.0**-60)


# ---------------------------------------------------------------- bf16 subnormals in the interpreter
# Triton's interpreter (3.9) widens bf16 to fp32 through a bit-level converter that gets subnormal
# bf16 inputs wrong (1.4e-39 becomes 1.0e-38); the GPU's conversion is exact (bf16 is the top half of
# an fp32). Where the interpreter errs, the tests give it the exact widening.


@triton.jit
def _widen_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets).to(tl.float32))


def widen_probe(values) -> np.ndarray:
    """bf16 values widened to fp32 by a Triton kernel (at most 16 of them)."""
    x = torch.zeros(16, dtype=torch.bfloat16)
    x[: len(values)] = torch.as_tensor(values, dtype=torch.float32).to(torch.bfloat16)
    out = torch.empty(16, dtype=torch.float32, device=DEVICE)
    _widen_kernel[(1,)](x.to(DEVICE), out, BLOCK=16)
    return out.cpu().numpy()[: len(values)]


_SUBNORMAL_BF16 = (2.0**-133 * 15, -(2.0**-130), 2.0**-126)


def _bf16_widening_exact() -> bool | None:
    if ops is None:
        return None
    expected = torch.tensor(_SUBNORMAL_BF16).to(torch.bfloat16).float().numpy()
    return bool((widen_probe(_SUBNORMAL_BF16) == expected).all())


def _install_exact_bf16_widening() -> None:
    from triton.runtime import interpreter

    native = interpreter._convert_float

    def convert(data, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            return (np.asarray(data).view(np.uint16).astype(np.uint32) << 16).view(np.uint32)
        return native(data, input_dtype, output_dtype, rounding_mode)

    interpreter._convert_float = convert


FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FORMS = ("none", "tanh", "sigmoid")


NATIVE_FMA_EXACT = _native_fma_exact()
if NATIVE_FMA_EXACT is False and interpreting():
    _install_exact_fma()
NATIVE_BF16_WIDENING_EXACT = _bf16_widening_exact()
if NATIVE_BF16_WIDENING_EXACT is False and interpreting():
    _install_exact_bf16_widening()


def on_device(values, dtype=torch.float32):
    return torch.as_tensor(np.asarray(values, dtype=np.float64)).to(dtype).to(DEVICE)
