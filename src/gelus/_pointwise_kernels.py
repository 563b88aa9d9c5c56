"""Forward and backward kernels of the pointwise members, as named, separately testable functions.

Every kernel takes the input ``x`` (and ``grad`` for a backward) and returns a new tensor; none
modifies its arguments. Half types (fp16, bf16) are computed in fp32 and rounded once.

Two ways to reach the same contract (NUMERICS.md: ±inf, nan, −0, FLT_MAX, finite gradients):
- eager: torch's fused kernels (``F.gelu``, ``F.silu``, ``aten.gelu_backward`` ...) are exact
  enough and fast, but return nan at ±inf (and oneDNN's gelu overflows above FLT_MAX/2). One
  read-only pass, ``dot(x, x) <= bound²``, proves every element finite and small enough for them;
  otherwise (rare: inf, nan or huge inputs) a slower, straight-line patched formula runs.
- under ``torch.compile``: the patched formula always (clamp/where fuse into the same loop, and a
  data-dependent branch would break the graph).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "SIGMOID_SCALE",
    "TANH_CUBIC",
    "gelu_backward",
    "gelu_forward",
    "swish_backward",
    "swish_forward",
]

TANH_CUBIC = 0.044715  # the paper's tanh form: tanh(√(2/π)·(x + 0.044715·x³))
SIGMOID_SCALE = 1.702  # the paper's sigmoid form: x·σ(1.702·x)

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# 1 + tanh(u) = 2·σ(2u), so the tanh form is x·σ(z) with z = 2u = x·(_TANH_A + _TANH_B·x²).
_TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
_TANH_B = _TANH_A * TANH_CUBIC

# Bounds on |x| inside which torch's kernels (and our eager compositions) are finite and exact in
# their limits, for every float dtype: oneDNN's gelu overflows above FLT_MAX/2; the tanh backward
# forms x·(a + 3b·x²), which overflows fp32 above ~1e12.
_GELU_TAME = 1e18
_TANH_TAME = 1e12
# Beyond these the functions equal their limits in every float dtype, so clamping is exact:
# Φ(−40) and φ(±40)·40 underflow fp64; σ(±1e4) is 1 or 0; the tanh form's z(±100) ≈ ±7000.
_GELU_CLAMP = 40.0
_TANH_CLAMP = 100.0
_SILU_CLAMP = 1e4


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _compute_dtype(x: Tensor) -> torch.dtype:
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _upcast(x: Tensor) -> Tensor:
    """Half types to fp32; eager kernels also want a contiguous input (fast path, cheap check)."""
    x = x.to(_compute_dtype(x))
    return x if _compiling() else x.contiguous()


def is_tame(x: Tensor, bound: float) -> bool:
    """True when every element is finite with |x| <= bound (one read-only pass, nan -> False).

    A false alarm (the sum of squares overflowing) only sends the caller to its slower safe path.
    """
    flat = x.reshape(-1)
    return bool(torch.dot(flat, flat) <= bound * bound)


# ---------------------------------------------------------------- exact GELU, x·Φ(x)


def _gelu_exact_fast(x: Tensor) -> Tensor:
    if not _compiling() and is_tame(x, _GELU_TAME):
        return F.gelu(x)
    y = F.gelu(x.clamp(-_GELU_CLAMP, _GELU_TAME))  # −inf -> gelu(−40) = −0; +inf -> finite
    return torch.where(x > _GELU_TAME, x, y)  # gelu(x) = x there (and at +inf)


def _gelu_exact_fast_backward(grad: Tensor, x: Tensor) -> Tensor:
    if not _compiling() and is_tame(x, _GELU_TAME):
        return torch.ops.aten.gelu_backward(grad, x)
    # Φ(x) + x·φ(x) is exactly 1 above 40 and 0 below −40 in every float dtype.
    return torch.ops.aten.gelu_backward(grad, x.clamp(-_GELU_CLAMP, _GELU_CLAMP))


def _gelu_exact_accurate(x: Tensor) -> Tensor:
    # x·½·erfc(−x/√2) in float64: no cancellation for negative x, and the argument x/√2 is
    # rounded to 53 bits, far below the fp32 result's 24 (NUMERICS.md).
    xd = x.to(torch.float64).clamp(min=-_GELU_CLAMP)  # erfc(+inf)·(−inf) would be nan
    y = torch.special.erfc(xd * -_SQRT_HALF).mul_(xd).mul_(0.5)
    return y.to(x.dtype)


def _gelu_exact_accurate_backward(grad: Tensor, x: Tensor) -> Tensor:
    # Φ(x) + x·φ(x) in float64; x² of an fp32 x is exact in float64.
    xd = x.to(torch.float64).clamp(-_GELU_CLAMP, _GELU_CLAMP)
    density = torch.exp(xd * xd * -0.5).mul_(xd).mul_(_INV_SQRT_2PI)
    slope = torch.special.erfc(xd * -_SQRT_HALF).mul_(0.5).add_(density)
    return slope.mul_(grad).to(x.dtype)


# ---------------------------------------------------------------- tanh form, x·σ(z), z = x·(a + b·x²)


def _gelu_tanh(x: Tensor) -> Tensor:
    if _compiling() or not is_tame(x, _TANH_TAME):
        # At −inf, z = −inf and −inf·σ(−inf) is nan; below −100 the result is −0 anyway.
        x = x.clamp(min=-_TANH_CLAMP)
    z = torch.addcmul(x.new_tensor(_TANH_A), x, x, value=_TANH_B).mul_(x)
    return z.sigmoid_().mul_(x)


def _gelu_tanh_backward(grad: Tensor, x: Tensor) -> Tensor:
    # d/dx x·σ(z) = σ(z) + x·z'·σ(z)·(1 − σ(z)), z' = a + 3b·x².
    if _compiling() or not is_tame(x, _TANH_TAME):
        # Beyond ±100 the slope is exactly 1 or 0; x·z' would overflow fp32 above ~1e12.
        x = x.clamp(-_TANH_CLAMP, _TANH_CLAMP)
    a = x.new_tensor(_TANH_A)
    s = torch.addcmul(a, x, x, value=_TANH_B).mul_(x).sigmoid_()
    x_dz = torch.addcmul(a, x, x, value=3.0 * _TANH_B).mul_(x)
    return torch.ops.aten.sigmoid_backward(x_dz, s).add_(s).mul_(grad)


# ---------------------------------------------------------------- Swish, x·σ(β·x)


def _swish_bound(beta: float) -> float:
    return _GELU_TAME / max(1.0, abs(beta))  # keeps β·x finite


def swish_forward(x: Tensor, beta: float = 1.0) -> Tensor:
    """x·σ(β·x) (β = 1: SiLU; β = 1.702: the sigmoid form of GELU), edge cases patched."""
    dtype = x.dtype
    x = _upcast(x)
    if beta == 0.0:
        return (x * 0.5).to(dtype)
    y = F.silu(x) if beta == 1.0 else torch.mul(x, beta).sigmoid_().mul_(x)
    if _compiling() or not is_tame(x, _swish_bound(beta)):
        # x·σ(βx) is nan only where βx = −inf with x infinite; the limit there is 0.
        y = torch.where(x * beta == -math.inf, 0.0, y)
    return y.to(dtype)


def swish_backward(grad: Tensor, x: Tensor, beta: float = 1.0) -> Tensor:
    """d/dx x·σ(βx) = σ(z) + z·σ(z)·(1 − σ(z)) with z = βx, i.e. SiLU'(βx), times ``grad``."""
    dtype = x.dtype
    x = _upcast(x)
    grad = grad.to(x.dtype)
    if beta == 0.0:
        return (grad * 0.5).to(dtype)
    z = x if beta == 1.0 else x * beta
    if _compiling() or not is_tame(x, _swish_bound(beta)):
        # SiLU' is exactly 1 above 1e4 and 0 below −1e4 in every float dtype; nan at ±inf.
        z = z.clamp(-_SILU_CLAMP, _SILU_CLAMP)
    return torch.ops.aten.silu_backward(grad, z).to(dtype)


# ---------------------------------------------------------------- GELU, all forms


def gelu_forward(x: Tensor, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    """GELU in the given form (see :func:`gelus.functional.gelu` for formulas and accuracy)."""
    if approximate == "sigmoid":
        return swish_forward(x, SIGMOID_SCALE)
    dtype = x.dtype
    x = _upcast(x)
    if approximate == "tanh":
        y = _gelu_tanh(x)
    elif accurate:
        y = _gelu_exact_accurate(x)
    else:
        y = _gelu_exact_fast(x)
    return y.to(dtype)


def gelu_backward(
    grad: Tensor,
    x: Tensor,
    approximate: str = "none",
    *,
    accurate: bool = False,
) -> Tensor:
    """``grad`` times the derivative of :func:`gelu_forward` at ``x``; finite at every finite x,
    and 1 / 0 at +inf / −inf."""
    if approximate == "sigmoid":
        return swish_backward(grad, x, SIGMOID_SCALE)
    dtype = x.dtype
    x = _upcast(x)
    grad = grad.to(x.dtype)
    if approximate == "tanh":
        g = _gelu_tanh_backward(grad, x)
    elif accurate:
        g = _gelu_exact_accurate_backward(grad, x)
    else:
        g = _gelu_exact_fast_backward(grad, x)
    return g.to(dtype)
