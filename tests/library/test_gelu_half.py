"""The half-type exact GELU of the compiled CUDA route (gelus._gelu_half), on every bf16 and fp16
input: composed eagerly in float32 on the CPU and rounded to the half type, within 1 ulp of the
half type at the float64 truth (scipy; 40-digit mpmath where it is worst and at the slope's
root). The GPU's code of the same composition is gated by tools/inductor_kernels.py (its
instructions) and by the PTX evaluation of the compiled route (its floating-point semantics).
"""

import numpy as np
import pytest
import torch

from gelus import _gelu_exact, _gelu_half
from oracles import gelu_oracle, mpmath_oracle

HALF_TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
BOUND = 1.0  # ulp of the half type (docs/CUDA.md, "The compiled route on CUDA")


def _every(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of a 16-bit float type."""
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return x[x.float().isfinite()]


def _half_ulp(reference: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """The half type's spacing at |reference| (subnormal spacing below its least normal)."""
    info = torch.finfo(dtype)
    mantissa = {torch.bfloat16: 7, torch.float16: 10}[dtype]
    exponent = np.floor(np.log2(np.maximum(np.abs(reference), info.smallest_normal)))
    return 2.0 ** (exponent - mantissa)


def _errors(dtype: torch.dtype):
    x = _every(dtype)
    xf = x.float()
    value = _gelu_half.value(xf).to(dtype).double().numpy()
    slope = _gelu_half.slope(xf).to(dtype).double().numpy()
    xd = xf.double().numpy()
    true_value, true_slope = gelu_oracle(xd)
    representable = np.abs(true_value) <= torch.finfo(dtype).max
    value_ulp = np.abs(value - true_value) / _half_ulp(true_value, dtype)
    slope_ulp = np.abs(slope - true_slope) / _half_ulp(true_slope, dtype)
    return xd, np.where(representable, value_ulp, 0.0), slope_ulp


@pytest.mark.parametrize("name", HALF_TYPES)
def test_every_half_input_within_one_ulp(name):
    dtype = HALF_TYPES[name]
    x, value_ulp, slope_ulp = _errors(dtype)
    assert x.size == {"bf16": 65280, "fp16": 63488}[name]  # every finite value, both zeros
    worst = {"value": (value_ulp.max(), x[value_ulp.argmax()]),
             "slope": (slope_ulp.max(), x[slope_ulp.argmax()])}  # fmt: skip
    assert value_ulp.max() <= BOUND and slope_ulp.max() <= BOUND, worst
    # nearly correctly rounded: a few inputs above half an ulp, none near the bound
    assert max(value_ulp.max(), slope_ulp.max()) < 0.6, worst
    # the oracle against 40-digit mpmath at the worst inputs and around the slope's root
    root = x[np.argsort(np.abs(x + 0.7517915246935645))[:16]]
    spots = np.unique(np.concatenate([root, x[np.argsort(-value_ulp)[:8]],
                                      x[np.argsort(-slope_ulp)[:8]]]))  # fmt: skip
    scipy_value, scipy_slope = gelu_oracle(spots)
    mp_value, mp_slope = mpmath_oracle(spots)
    np.testing.assert_allclose(scipy_value, mp_value, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(scipy_slope, mp_slope, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("name", HALF_TYPES)
def test_the_tails_and_the_root(name):
    """The negative tail down to the half type's least subnormal (bf16: below fp32's normals),
    the slope's sign change at x₀ ≈ −0.7518 and the linear part are where the algorithm could
    lose: each region has inputs, and they are within the bound (the sweep above)."""
    dtype = HALF_TYPES[name]
    x, value_ulp, slope_ulp = _errors(dtype)
    tiny = torch.finfo(dtype).smallest_normal
    true_value, true_slope = gelu_oracle(x)
    subnormal_out = (np.abs(true_value) < tiny) & (np.abs(true_value) > 0) & (x < -1)
    assert subnormal_out.sum() > 50 and value_ulp[subnormal_out].max() <= BOUND
    near_root = np.abs(x + 0.7518) < 0.01
    assert near_root.sum() > 4 and slope_ulp[near_root].max() <= BOUND
    assert (np.sign(true_slope[near_root]) != 0).all()


@pytest.mark.parametrize("name", HALF_TYPES)
def test_edges(name):
    dtype = HALF_TYPES[name]
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 1e30, -1e30])
    value, slope = _gelu_half.value(x), _gelu_half.slope(x)
    assert value[0] == float("inf") and value[1] == 0 and value[1].signbit()
    assert value[2].isnan() and slope[2].isnan()
    assert value[3] == 0 and not value[3].signbit() and value[4] == 0 and value[4].signbit()
    assert value[5] == 1e30 and value[6] == 0
    assert slope[0] == 1 and slope[1] == 0 and slope[5] == 1 and slope[6] == 0
    assert (slope[3:5].to(dtype) == 0.5).all()
    largest = torch.tensor(torch.finfo(dtype).max)
    assert _gelu_half.value(largest).to(dtype) == largest.to(dtype)  # x − 0, no overflow


def test_the_route_takes_it_for_half_types_on_cuda_only():
    """CUDA tensors (fake: metadata only) of float32 holding bf16/fp16 values take it; the CPU
    keeps its routes, and fp32 keeps the fp32 algorithm."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        on_cuda = torch.empty(4, device="cuda")
    on_cpu = torch.empty(4)
    assert _gelu_exact.half_algorithm(on_cuda, torch.bfloat16)
    assert _gelu_exact.half_algorithm(on_cuda, torch.float16)
    assert not _gelu_exact.half_algorithm(on_cuda, torch.float32)
    assert not _gelu_exact.half_algorithm(on_cuda, None)
    assert not _gelu_exact.half_algorithm(on_cpu, torch.bfloat16)
