"""Forward and backward kernels of the pointwise members, as named, separately testable functions.

Every kernel takes the input ``x`` (and ``grad`` for a backward) and never modifies them; it
returns a new tensor, or writes into ``out`` when given (``out`` may be ``x`` itself when the
caller owns a temporary). Half types (fp16, bf16) are computed in fp32 and rounded once.

Two ways to reach the same contract (NUMERICS.md: ±inf, nan, −0, FLT_MAX, finite gradients):
- eager: torch's fused kernels (``F.gelu``, ``F.silu``, ``aten.gelu_backward`` ...) are fast and
  correct for finite, not-too-large input but return nan at ±inf (oneDNN's gelu also overflows
  above FLT_MAX/2). One read-only pass, ``dot(x, x) <= bound²`` (:func:`is_tame`), proves every
  element finite with |x| <= bound; otherwise (inf, nan or huge input: rare) a patched formula
  runs. ``tame=`` lets a caller that already knows the answer (a forward, for its backward) skip
  the check.
- under ``torch.compile``: the patched formula always; clamp/where fuse into the same loop, and
  a data-dependent branch would break the graph.
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
    "gelu_slope",
    "gelu_tame_bound",
    "is_tame",
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

# Bounds on |x| inside which torch's kernels and our eager compositions are finite and exact in
# their limits: oneDNN's gelu overflows above FLT_MAX/2; the tanh backward forms x·(a + 3b·x²),
# which overflows fp32 above ~1e12; swish forms β·x.
_GELU_TAME = 1e18
_TANH_TAME = 1e12
# Beyond these the functions equal their limits in every float dtype, so clamping is exact:
# Φ(−40) and 40·φ(40) underflow fp64; SiLU'(±1e4) is exactly 1 or 0; the tanh form's
# z(±100) ≈ ±7000, so σ(z) is exactly 1 or 0.
_GELU_CLAMP = 40.0
_TANH_CLAMP = 100.0
_SILU_CLAMP = 1e4


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def is_tame(x: Tensor, bound: float) -> bool:
    """True when every element of ``x`` is finite with |x| <= bound (one read-only pass).

    nan or inf make the sum of squares nan or inf, hence False; a false alarm (the sum
    overflowing) only sends the caller to its slower, always-correct path.
    """
    flat = x.reshape(-1)
    return bool(torch.dot(flat, flat) <= bound * bound)


def gelu_tame_bound(approximate: str = "none", beta: float = 1.0) -> float:
    """The bound for :func:`is_tame` under which the eager fast kernels of a form are valid."""
    if approximate == "tanh":
        return _TANH_TAME
    if approximate == "sigmoid":
        beta = SIGMOID_SCALE
    return _GELU_TAME / max(1.0, abs(beta))  # keeps β·x finite


def _fast(x: Tensor, bound: float, tame: bool | None) -> bool:
    """Whether torch's plain fused kernels may run (never under compile: no data-dependent branch)."""
    if _compiling():
        return False
    return is_tame(x, bound) if tame is None else tame


def _finish(y: Tensor, dtype: torch.dtype, out: Tensor | None) -> Tensor:
    """Round once to the input dtype, into ``out`` if given (no copy when ``y`` already is it)."""
    if out is None:
        return y.to(dtype)
    if y is not out:
        out.copy_(y)
    return out


def _direct_out(out: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    # Kernels write into ``out`` only when it has the compute dtype and is contiguous (torch's
    # gelu(out=) silently writes nothing into a strided view, torch 2.13 CPU).
    if out is not None and out.dtype == dtype and out.is_contiguous() and not _compiling():
        return out
    return None


def _mul(a: Tensor, b: Tensor, out: Tensor | None) -> Tensor:
    """a·b into ``out``, or into ``a`` (a temporary) when there is no ``out``."""
    return a.mul_(b) if out is None else torch.mul(a, b, out=out)


# ---------------------------------------------------------------- exact GELU, x·Φ(x)


def _gelu_exact_fast(x: Tensor, tame: bool | None, out: Tensor | None) -> Tensor:
    if _fast(x, _GELU_TAME, tame):
        return F.gelu(x) if out is None else torch._C._nn.gelu(x, out=out)
    y = F.gelu(x.clamp(-_GELU_CLAMP, _GELU_TAME))  # −inf -> gelu(−40) = −0; +inf -> finite
    return torch.where(x > _GELU_TAME, x, y)  # gelu(x) = x there, and at +inf


def _gelu_exact_fast_backward(
    grad: Tensor, x: Tensor, tame: bool | None, out: Tensor | None
) -> Tensor:
    if not _fast(x, _GELU_TAME, tame):
        # Φ(x) + x·φ(x) is exactly 1 above 40 and 0 below −40 in every float dtype.
        x = x.clamp(-_GELU_CLAMP, _GELU_CLAMP)
    if out is None:
        return torch.ops.aten.gelu_backward(grad, x)
    return torch.ops.aten.gelu_backward.grad_input(grad, x, grad_input=out)


def _gelu_exact_accurate(x: Tensor) -> Tensor:
    # x·½·erfc(−x/√2) in float64: no cancellation for negative x, and the argument x/√2 is
    # rounded to 53 bits, far below the fp32 result's 24 (NUMERICS.md).
    xd = x.to(torch.float64).clamp(min=-_GELU_CLAMP)  # erfc(+inf)·(−inf) would be nan
    return torch.special.erfc(xd * -_SQRT_HALF).mul_(0.5).mul_(xd)  # Φ·x: no overflow


def _gelu_exact_accurate_backward(grad: Tensor, x: Tensor) -> Tensor:
    # Φ(x) + x·φ(x) in float64; x² of an fp32 x is exact in float64.
    xd = x.to(torch.float64).clamp(-_GELU_CLAMP, _GELU_CLAMP)
    density = torch.exp(xd * xd * -0.5).mul_(xd).mul_(_INV_SQRT_2PI)
    slope = torch.special.erfc(xd * -_SQRT_HALF).mul_(0.5).add_(density)
    return slope.mul_(grad)


# ---------------------------------------------------------------- tanh form, x·σ(z), z = x·(a + b·x²)


def _gelu_tanh(x: Tensor, tame: bool | None, out: Tensor | None) -> Tensor:
    xs = x if _fast(x, _TANH_TAME, tame) else x.clamp(min=-_TANH_CLAMP)
    # (at −inf, −inf·σ(−inf) would be nan; below −100 the result is −0 anyway)
    s = torch.addcmul(xs.new_tensor(_TANH_A), xs, xs, value=_TANH_B).mul_(xs).sigmoid_()
    return _mul(s, xs, out)


def _gelu_tanh_backward(grad: Tensor, x: Tensor, tame: bool | None, out: Tensor | None) -> Tensor:
    # d/dx x·σ(z) = σ(z) + x·z'·σ(z)·(1 − σ(z)), z' = a + 3b·x².
    if not _fast(x, _TANH_TAME, tame):
        # Beyond ±100 the slope is exactly 1 or 0; x·z' would overflow fp32 above ~1e12.
        x = x.clamp(-_TANH_CLAMP, _TANH_CLAMP)
    a = x.new_tensor(_TANH_A)
    s = torch.addcmul(a, x, x, value=_TANH_B).mul_(x).sigmoid_()
    x_dz = torch.addcmul(a, x, x, value=3.0 * _TANH_B).mul_(x)
    if _compiling():
        return torch.ops.aten.sigmoid_backward(x_dz, s).add_(s).mul_(grad)
    torch.ops.aten.sigmoid_backward.grad_input(x_dz, s, grad_input=x_dz)  # in place
    return _mul(x_dz.add_(s), grad, out)


# ---------------------------------------------------------------- Swish, x·σ(β·x)


def swish_forward(
    x: Tensor, beta: float = 1.0, *, tame: bool | None = None, out: Tensor | None = None
) -> Tensor:
    """x·σ(β·x) (β = 1: SiLU; β = 1.702: the sigmoid form of GELU), edge cases patched."""
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    direct = _direct_out(out, x.dtype)
    if beta == 0.0:
        y = torch.mul(x, 0.5, out=direct)
    elif beta == 1.0:
        y = F.silu(x) if direct is None else torch._C._nn.silu(x, out=direct)
    else:
        y = _mul(torch.mul(x, beta).sigmoid_(), x, direct)
    if beta != 0.0 and not _fast(x, gelu_tame_bound(beta=beta), tame):
        # x·σ(βx) is nan only where βx = −inf with x infinite; the limit there is 0.
        y = torch.where(x * beta == -math.inf, 0.0, y)
    return _finish(y, dtype, out)


def swish_backward(
    grad: Tensor,
    x: Tensor,
    beta: float = 1.0,
    *,
    tame: bool | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """``grad`` times d/dx x·σ(βx) = σ(z) + z·σ(z)·(1 − σ(z)) with z = βx, i.e. SiLU'(βx)."""
    if _recorded(grad, x):
        slope = gelu_slope(x.to(_compute_dtype(x.dtype)), "swish", beta)
        return _finish(grad * slope, x.dtype, out)
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    grad = grad.to(x.dtype)
    direct = _direct_out(out, x.dtype)
    if beta == 0.0:
        return _finish(torch.mul(grad, 0.5, out=direct), dtype, out)
    z = x if beta == 1.0 else x * beta
    if not _fast(x, gelu_tame_bound(beta=beta), tame):
        # SiLU' is exactly 1 above 1e4 and 0 below −1e4 in every float dtype; nan at ±inf.
        z = z.clamp(-_SILU_CLAMP, _SILU_CLAMP)
    if direct is None and z is not x and not _compiling():
        direct = z  # z is our temporary: write the result over it
    if direct is None:
        g = torch.ops.aten.silu_backward(grad, z)
    else:
        g = torch.ops.aten.silu_backward.grad_input(grad, z, grad_input=direct)
    return _finish(g, dtype, out)


# ---------------------------------------------------------------- differentiable derivatives


def gelu_slope(x: Tensor, approximate: str = "none", beta: float = 1.0) -> Tensor:
    """The derivative d/dx of a form at ``x``, out of place and itself differentiable.

    Used by the backwards when autograd records them (double backward, ``create_graph=True``);
    ``approximate="swish"`` takes ``beta``. Limits as in :func:`gelu_backward`.
    """
    if approximate == "none":
        x = x.clamp(-_GELU_CLAMP, _GELU_CLAMP)
        return (
            0.5 * torch.special.erfc(x * -_SQRT_HALF) + x * torch.exp(-0.5 * x * x) * _INV_SQRT_2PI
        )
    if approximate == "tanh":
        x = x.clamp(-_TANH_CLAMP, _TANH_CLAMP)
        s = torch.sigmoid(x * (_TANH_A + _TANH_B * x * x))
        return s + x * (_TANH_A + 3.0 * _TANH_B * x * x) * s * (1.0 - s)
    if approximate == "sigmoid":
        beta = SIGMOID_SCALE
    z = (beta * x).clamp(-_SILU_CLAMP, _SILU_CLAMP)
    s = torch.sigmoid(z)
    return s * (1.0 + z * (1.0 - s))


def _recorded(grad: Tensor, x: Tensor) -> bool:
    """Whether autograd records this backward (create_graph=True): then no in-place or out= ops."""
    return torch.is_grad_enabled() and (grad.requires_grad or x.requires_grad)


# ---------------------------------------------------------------- GELU, all forms


def gelu_forward(
    x: Tensor,
    approximate: str = "none",
    *,
    accurate: bool = False,
    tame: bool | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """GELU in the given form; see :func:`gelus.functional.gelu` for formulas and accuracy.

    ``tame``: whether ``is_tame(x, gelu_tame_bound(approximate))`` holds, if the caller knows
    (None: check here). ``out``: write the result there (may be ``x`` itself).
    """
    if approximate == "sigmoid":
        return swish_forward(x, SIGMOID_SCALE, tame=tame, out=out)
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    direct = _direct_out(out, x.dtype)
    if approximate == "tanh":
        y = _gelu_tanh(x, tame, direct)
    elif accurate:
        y = _gelu_exact_accurate(x)
    else:
        y = _gelu_exact_fast(x, tame, direct)
    return _finish(y, dtype, out)


def gelu_backward(
    grad: Tensor,
    x: Tensor,
    approximate: str = "none",
    *,
    accurate: bool = False,
    tame: bool | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """``grad`` times the derivative of :func:`gelu_forward` at ``x``.

    The derivative is finite at every finite x, and 1 / 0 at +inf / −inf. Exact form:
    Φ(x) + x·φ(x); tanh form: σ(z) + x·z'·σ(z)(1 − σ(z)); sigmoid form: SiLU'(1.702x).
    """
    if approximate == "sigmoid":
        return swish_backward(grad, x, SIGMOID_SCALE, tame=tame, out=out)
    if _recorded(grad, x):
        return _finish(grad * gelu_slope(x.to(_compute_dtype(x.dtype)), approximate), x.dtype, out)
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    grad = grad.to(x.dtype)
    direct = _direct_out(out, x.dtype)
    if approximate == "tanh":
        g = _gelu_tanh_backward(grad, x, tame, direct)
    elif accurate:
        g = _gelu_exact_accurate_backward(grad, x)
    else:
        g = _gelu_exact_fast_backward(grad, x, tame, direct)
    return _finish(g, dtype, out)
