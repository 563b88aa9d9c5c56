"""The exact GELU x·Φ(x): every route's kernels side by side (docs/NUMERICS.md, "Exact GELU";
each route's accuracy: its "Accuracy" table, the one place it is written).

    eager, default        torch's fused kernel (``F.gelu``, ``aten.gelu_backward``), edges patched
    eager, accurate       Φ in float64, rounded once to fp32
    compiled, default     torch's formula on the clamped input, fused by inductor (CPU)
    compiled, accurate    fp32 operations alone (gelus._gelu_float32); CUDA's default too
    compiled, CUDA half   bf16/fp16 on CUDA: fp32 sized for the half type (gelus._gelu_half)
    ONNX                  the ONNX ``Gelu`` op on the clamped input; accurate: Φ without erfc
    slope                 Φ(x) + x·φ(x) as a composition (double backward, jvp, compiled backward)

Eager kernels take any float dtype (half types computed in float32, rounded once) and never
modify their inputs; ``out=`` lets a caller that owns a temporary receive the result there.
"""

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus import _gelu_float32 as float32_gelu
from gelus import _gelu_half as half_gelu
from gelus._common import (
    GELU_CLAMP,
    GELU_TAME,
    INV_SQRT_2PI,
    SQRT_HALF,
    compute_dtype,
    has_negative_zero,
    is_tame,
)
from gelus._phi import normal_cdf_rational
from gelus._torch_compat import gelu_into

__all__ = [
    "backward",
    "compiled_half_slope",
    "compiled_half_value",
    "compiled_slope",
    "compiled_value",
    "float32_algorithm_unclamped",
    "forward",
    "gelu_accurate",
    "gelu_accurate_slope",
    "half_algorithm",
    "onnx_value",
    "slope",
]


def _finish(y: Tensor, dtype: torch.dtype, out: Tensor | None) -> Tensor:
    """Round once to ``dtype``, into ``out`` if given (no copy when ``y`` already is it)."""
    if out is None:
        return y.to(dtype)
    if y is not out:
        out.copy_(y)
    return out


def _direct(out: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    # torch's kernels write into ``out`` only when it has the compute dtype and is contiguous
    # (gelu(out=) silently writes nothing into a strided view, torch 2.13 CPU).
    if out is not None and out.dtype == dtype and out.is_contiguous():
        return out
    return None


# ------------------------------------------------------------------------------ eager kernels


def forward(
    x: Tensor, accurate: bool = False, *, tame: bool | None = None, out: Tensor | None = None
) -> Tensor:
    """x·Φ(x) in x's dtype; ``tame``: whether ``is_tame(x, GELU_TAME)`` holds, if known."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    if accurate:
        # x·½·erfc(−x/√2) in float64: no cancellation for negative x, and the argument x/√2 is
        # rounded to 53 bits, far below the fp32 result's 24.
        xd = x.to(torch.float64).clamp(min=-GELU_CLAMP)  # erfc(+inf)·(−inf) would be nan
        return _finish(torch.special.erfc(xd * -SQRT_HALF).mul_(0.5).mul_(xd), dtype, out)
    direct = _direct(out, x.dtype)
    drops_sign = x.device.type == "cpu" and _cpu_kernel_drops_negative_zero()
    if is_tame(x, GELU_TAME) if tame is None else tame:
        # Looking for −0 (a read of x, before the kernel evicts it from cache) costs half the
        # sign pass it saves, and inputs rarely hold −0 (docs/PERFORMANCE.md).
        drops_sign = drops_sign and has_negative_zero(x)
        y = F.gelu(x) if direct is None else gelu_into(x, direct)
    else:
        y = F.gelu(x.clamp(-GELU_CLAMP, GELU_TAME))  # −inf -> gelu(−40) = −0; +inf -> finite
        y = torch.where(x > GELU_TAME, x, y)  # gelu(x) = x there, and at +inf
    if drops_sign:
        y.copysign_(x)  # gelu(x) has x's sign everywhere, so this changes only zeros' signs
    return _finish(y, dtype, out)


@functools.cache
def _cpu_kernel_drops_negative_zero() -> bool:
    """Whether torch's CPU ``F.gelu`` returns +0 for −0 on this processor (oneDNN's AVX2 kernel
    does; its AVX-512 one keeps −0): measured once, on a tensor long enough for that kernel."""
    return not bool(F.gelu(torch.full((64,), -0.0)).signbit().all())


def backward(
    grad: Tensor,
    x: Tensor,
    accurate: bool = False,
    *,
    tame: bool | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """``grad`` times Φ(x) + x·φ(x), in x's dtype: finite at every finite x, 1 / 0 at ±inf."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    if accurate:
        # Φ(x) + x·φ(x) in float64; x² of an fp32 x is exact in float64.
        xd = x.to(torch.float64).clamp(-GELU_CLAMP, GELU_CLAMP)
        density = torch.exp(xd * xd * -0.5).mul_(xd).mul_(INV_SQRT_2PI)
        result = torch.special.erfc(xd * -SQRT_HALF).mul_(0.5).add_(density).mul_(grad)
        return _finish(result, dtype, out)
    grad = grad.to(x.dtype)
    if not (is_tame(x, GELU_TAME) if tame is None else tame):
        # Φ(x) + x·φ(x) is exactly 1 above 40 and 0 below −40 in every float dtype.
        x = x.clamp(-GELU_CLAMP, GELU_CLAMP)
    direct = _direct(out, x.dtype)
    if direct is None:
        g = torch.ops.aten.gelu_backward(grad, x)
    else:
        g = torch.ops.aten.gelu_backward.grad_input(grad, x, grad_input=direct)
    return _finish(g, dtype, out)


# ------------------------------------------------------------------------------ slope, composed


def slope(x: Tensor, accurate: bool = False) -> Tensor:
    """Φ(x) + x·φ(x) as a differentiable composition of torch ops, in x's compute dtype.

    For the backward when autograd records it (double backward, torch.func) and for ``jvp``.
    ``accurate``: evaluated in float64 and rounded once.
    """
    dtype = compute_dtype(x.dtype)
    t = x.to(torch.float64 if accurate else dtype).clamp(-GELU_CLAMP, GELU_CLAMP)
    value = 0.5 * torch.special.erfc(t * -SQRT_HALF) + t * torch.exp(-0.5 * t * t) * INV_SQRT_2PI
    return value.to(dtype)


# ------------------------------------------------------------------------------ compiled


def compiled_value(t: Tensor, accurate: bool) -> Tensor:
    """x·Φ(x) of an input already clamped to ±40, in plain torch ops for inductor."""
    if _float32_algorithm(t, accurate):
        return gelu_accurate(t)
    # torch's formula, which inductor fuses as cheaply as F.gelu (its 1 + erf(x/√2) cancels for
    # x < −3 like the eager kernel: small absolute, large relative error).
    return F.gelu(t)


def compiled_slope(grad: Tensor, t: Tensor, accurate: bool) -> Tensor:
    """``grad`` times the slope at an input already clamped to ±40, in plain torch ops."""
    if _float32_algorithm(t, accurate):
        return grad * gelu_accurate_slope(t)
    return torch.ops.aten.gelu_backward(grad, t)  # F.gelu's own gradient formula


# ------------------------------------------------------------------------------ ONNX


def onnx_value(t: Tensor, accurate: bool) -> Tensor:
    """x·Φ(x) of an input already clamped to ±40, in ops the dynamo ONNX exporter translates
    faithfully: the ONNX ``Gelu`` op; ``accurate``: Φ from
    :func:`gelus._phi.normal_cdf_rational` in float64 (ONNX has no erfc, and its 1 + Erf
    cancels in the negative tail)."""
    if accurate:
        td = t.to(torch.float64)
        return (td * normal_cdf_rational(td)).to(t.dtype)
    return F.gelu(t)


# ------------------------------------------------------------------------------ fp32 accurate
# Exact GELU and its slope within 2 ulp in fp32 arithmetic alone (gelus._gelu_float32, the CUDA
# kernels' algorithm): the compiled route's accurate path, and its default on CUDA, where the
# eager kernels are accurate by default too. Eager CPU uses float64, which inductor would not
# fuse as cheaply.


def _float32_algorithm(t: Tensor, accurate: bool) -> bool:
    return accurate or t.device.type == "cuda"


def float32_algorithm_unclamped(x: Tensor, accurate: bool) -> bool:
    """Whether the compiled route computes float32 x by gelus._gelu_float32 without the ±40
    clamp and the final ``where`` around it: the algorithm takes ±inf and nan itself (beyond
    |x| = 15 its tail is 0), and on CUDA the two NaN-propagating clamps cost 6 instructions."""
    return x.dtype == torch.float32 and _float32_algorithm(x, accurate)


# bf16 and fp16 on CUDA: fp32 arithmetic sized for the half type (gelus._gelu_half), within
# 1 ulp of it once rounded, at a third of the fp32 algorithm's instructions. The CPU keeps its
# routes (inductor's C++ code, compiled with unsafe-math flags, is not what this was checked on).
_HALF_TYPES = (torch.bfloat16, torch.float16)


def half_algorithm(x: Tensor, dtype: torch.dtype | None) -> bool:
    """Whether the compiled route computes x (float32), to be rounded to ``dtype``, by
    gelus._gelu_half: a half type on CUDA. Its value and slope take x itself (±inf, nan)."""
    return dtype in _HALF_TYPES and x.dtype == torch.float32 and x.device.type == "cuda"


def compiled_half_value(x: Tensor) -> Tensor:
    """x·Φ(x) of a float32 x of half-type values, unclamped (gelus._gelu_half)."""
    return half_gelu.value(x)


def compiled_half_slope(grad: Tensor, x: Tensor) -> Tensor:
    """``grad`` times the slope at a float32 x of half-type values, unclamped."""
    return grad * half_gelu.slope(x)


def gelu_accurate(x: Tensor) -> Tensor:
    """x·Φ(x) within 2 ulp in fp32 (fp32 operations only); float64 input in float64."""
    if x.dtype == torch.float64:
        return x * (0.5 * torch.special.erfc(x * -SQRT_HALF))
    return float32_gelu.value(x)


def gelu_accurate_slope(x: Tensor) -> Tensor:
    """Φ(x) + x·φ(x) within 2 ulp in fp32 (fp32 operations only); float64 input in float64."""
    if x.dtype == torch.float64:
        return 0.5 * torch.special.erfc(x * -SQRT_HALF) + x * torch.exp(-0.5 * x * x) * INV_SQRT_2PI
    return float32_gelu.slope(x)
