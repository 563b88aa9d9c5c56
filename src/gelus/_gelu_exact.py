"""The exact GELU x·Φ(x): every route's kernels side by side (docs/NUMERICS.md, "Exact GELU").

    eager, default        torch's fused kernel (``F.gelu``, ``aten.gelu_backward``), edges patched
    eager, accurate       Φ in float64 (0.5 ulp for fp32, value and slope)
    compiled, default     torch's formula on the clamped input, fused by inductor
    compiled, accurate    Φ in fp32 with the arguments split into high and low parts (≤ 3 ulp)
    ONNX                  the ONNX ``Gelu`` op on the clamped input; accurate: Φ without erfc
    slope                 Φ(x) + x·φ(x) as a composition (double backward, jvp, compiled backward)

Eager kernels take any float dtype (half types computed in float32, rounded once) and never
modify their inputs; ``out=`` lets a caller that owns a temporary receive the result there.
"""

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

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
    "compiled_slope",
    "compiled_value",
    "forward",
    "gelu_accurate",
    "gelu_accurate_slope",
    "normal_cdf_accurate",
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
    if accurate:
        return gelu_accurate(t)
    # torch's formula, which inductor fuses as cheaply as F.gelu (its 1 + erf(x/√2) cancels for
    # x < −3 like the eager kernel: small absolute, large relative error).
    return F.gelu(t)


def compiled_slope(grad: Tensor, t: Tensor, accurate: bool) -> Tensor:
    """``grad`` times the slope at an input already clamped to ±40, in plain torch ops."""
    if accurate:
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
# Exact GELU and its slope to a few ulp in fp32, in fp32 arithmetic (the compiled accurate route;
# eager uses float64, which inductor would not fuse as cheaply). docs/NUMERICS.md explains:
# - Φ(x) = ½·erfc(t), t = −x/√2: rounding t to fp32 costs δ·h(t) relative, h ≈ 2t + 1/t (82 ulp at
#   x = −20), so t is split into t_hi + t_lo (formed exactly in float64) and
#   erfc(t_hi + t_lo) ≈ erfc(t_hi)·(1 − t_lo·h(t_hi)), h ≈ 2t + 1/(t + ½) for t > 0.
# - φ(x) = exp(−x²/2)/√(2π): the argument is split the same way, exp(a_hi + a_lo) ≈
#   exp(a_hi)·(1 + a_lo), and φ is computed scaled by 2^64 so that the tail stays normal until
#   the last, exact, multiplication by 2^-64.
# - below x = −12.7: Φ(x) = φ(x)/|x|·S(1/x²), S(u) = 1 − u + 3u² − 15u³ + 105u⁴ − 945u⁵.
# - the slope vanishes at x₀ = −0.75179…; on [−1.5, −0.376] it is (x − x₀)·P(x − x₀), P a
#   degree-10 least-squares fit, with x − x₀ formed from x₀ = x₀_hi + x₀_lo.

_SCALE_EXP = 64  # φ is computed times 2^64
_SCALE_DOWN = 2.0**-_SCALE_EXP
# exp argument of 2^64·φ(x): −x²/2 + (64·ln 2 − ln √(2π)), formed in float64
_DENSITY_OFFSET = _SCALE_EXP * math.log(2.0) - 0.5 * math.log(2.0 * math.pi)
_TAIL = -12.7  # below: the asymptotic series (erfc(9.0) = 4e-37 is still normal at the switch)
_ROOT_HI = -0.75179154  # fp32(x₀), x₀ = −0.7517915246935644574… the root of Φ(x) + x·φ(x)
_ROOT_LO = 1.211445e-08  # fp32(x₀ − _ROOT_HI)
_ROOT_RANGE = (-1.5, -0.376)  # inside [2·x₀_hi, x₀_hi/2], so x − x₀_hi is exact
# Least-squares fit of (Φ(x) + x·φ(x))/(x − x₀) in powers of d = x − x₀ on _ROOT_RANGE (mpmath).
_ROOT_COEFFICIENTS = (
    0.431493992307238,
    0.3882849828950296,
    -0.018199674876156438,
    -0.11400822627246052,
    -0.014771573136252707,
    0.019421510895930343,
    0.004539773364940705,
    -0.002237755015019229,
    -0.0007466186610577102,
    0.0001783260379712799,
    8.48197309145074e-05,
)


def _split(value: Tensor) -> tuple[Tensor, Tensor]:
    """A float64 tensor as fp32 hi + lo (hi = its rounding, lo = the rounding error)."""
    hi = value.float()
    return hi, (value - hi.double()).float()


def _scaled_density(x: Tensor, factor: Tensor | None = None) -> Tensor:
    """2^64·φ(x)·factor in fp32 (overflow-free: 2^64·φ(x) is at most 7e18)."""
    xd = x.double()
    a_hi, a_lo = _split(xd * xd * -0.5 + _DENSITY_OFFSET)
    e = torch.exp(a_hi)
    if factor is not None:
        e = e * factor
    return e + e * a_lo  # e·(1 + a_lo) with one rounding


def _erfc_cdf(x: Tensor) -> Tensor:
    """Φ(x) = ½·erfc(t_hi + t_lo) for fp32 x ≥ −12.7 (to ~2 ulp)."""
    t, t_lo = _split(x.double() * -SQRT_HALF)
    positive = t.clamp(min=0.0)
    # h(t) ≈ 2t + 1/(t + ½): the relative change of erfc per unit change of its argument.
    h = 2.0 * positive + 1.0 / (positive + 0.5)
    correction = torch.where(t > 0, t_lo * h, 0.0)
    half = 0.5 * torch.special.erfc(t)
    return half - half * correction  # half·(1 − correction) with one rounding


def _tail_series(x: Tensor) -> Tensor:
    """S(1/x²) with Φ(x) = φ(x)/|x|·S for x → −∞."""
    u = 1.0 / (x * x)
    s = 945.0
    for coefficient in (105.0, 15.0, 3.0, 1.0):
        s = coefficient - u * s
    return 1.0 - u * s


def normal_cdf_accurate(x: Tensor) -> Tensor:
    """Φ(x), the standard normal CDF, to ~2 ulp in fp32 for every x (float64: in float64)."""
    if x.dtype == torch.float64:
        return 0.5 * torch.special.erfc(x * -SQRT_HALF)
    tail = x < _TAIL
    xs = torch.where(tail, x, _TAIL)  # keeps each branch in its own domain
    asymptotic = (_scaled_density(xs) * _tail_series(xs) / -xs) * _SCALE_DOWN
    return torch.where(tail, asymptotic, _erfc_cdf(torch.where(tail, _TAIL, x)))


def gelu_accurate(x: Tensor) -> Tensor:
    """x·Φ(x) to ≤ 3 ulp in fp32 for finite x with |x| ≤ 40 (the callers clamp beyond)."""
    if x.dtype == torch.float64:
        return x * normal_cdf_accurate(x)
    tail = x < _TAIL
    xs = torch.where(tail, x, _TAIL)
    asymptotic = -(_scaled_density(xs) * _tail_series(xs)) * _SCALE_DOWN
    xe = torch.where(tail, _TAIL, x)
    return torch.where(tail, asymptotic, xe * _erfc_cdf(xe))


def gelu_accurate_slope(x: Tensor) -> Tensor:
    """Φ(x) + x·φ(x) to ≤ 4 ulp in fp32 for finite x with |x| ≤ 40, out of place."""
    if x.dtype == torch.float64:
        return normal_cdf_accurate(x) + x * torch.exp(-0.5 * x * x) * INV_SQRT_2PI
    result = normal_cdf_accurate(x) + _scaled_density(x, x) * _SCALE_DOWN
    near_root = (x >= _ROOT_RANGE[0]) & (x <= _ROOT_RANGE[1])
    d = (torch.where(near_root, x, _ROOT_HI) - _ROOT_HI) - _ROOT_LO
    p = d.new_full((), _ROOT_COEFFICIENTS[-1])
    for coefficient in reversed(_ROOT_COEFFICIENTS[:-1]):
        p = p * d + coefficient
    return torch.where(near_root, d * p, result)
