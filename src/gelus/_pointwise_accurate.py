"""Exact GELU x·Φ(x) and its slope Φ(x) + x·φ(x) to a few ulp in fp32, in fp32 arithmetic.

Why the plain formulas lose accuracy (NUMERICS.md), and what is done here instead:

- Φ(x) = ½·erfc(t), t = −x/√2. Rounding t to fp32 (error |δ| ≤ 2^-25·|t|) changes erfc(t) by the
  relative amount δ·h(t), h(t) = (2/√π)·exp(−t²)/erfc(t) ≈ 2t + 1/t for large t: 82 ulp at
  x = −20. So t is split into t_hi = fp32(t) and its rounding error t_lo (the product is formed
  exactly in float64, which holds any fp32 × fp32), and erfc(t_hi + t_lo) ≈ erfc(t_hi)·(1 −
  t_lo·h(t_hi)) with h ≈ 2t + 1/(t + ½) for t > 0 (for t ≤ 0 the correction is below 0.1 ulp).
- φ(x) = exp(−x²/2)/√(2π): the argument −x²/2 − ln√(2π) reaches −200, where its fp32 rounding
  would cost 200·2^-24 relative; it is split the same way, exp(a_hi + a_lo) ≈ exp(a_hi)·(1 + a_lo).
  The density is computed scaled by 2^64 (folded into the exponent), so that x·φ(x) and the far
  tail stay normal numbers until the last, exact, multiplication by 2^-64.
- Below x = −12.7 erfc(t) leaves the normal range (its subnormal result would lose digits, and
  x·Φ(x) multiplies that loss by |x|); there Φ(x) = φ(x)/|x|·S(1/x²) with the asymptotic series
  S(u) = 1 − u + 3u² − 15u³ + 105u⁴ − 945u⁵ (next term < 6e-10 at x = −12.7).
- The slope Φ(x) + x·φ(x) vanishes at x₀ = −0.75179…, where the two terms cancel; on
  [−1.5, −0.376] it is evaluated as (x − x₀)·P(x − x₀), P a degree-10 least-squares fit
  (relative error 1e-3 ulp), with x − x₀ formed from x₀ = x₀_hi + x₀_lo (x − x₀_hi is exact).

Measured on the accuracy test grid (every ~1e5th fp32 in [−20, 20] plus 2^20 random points):
see :func:`gelus.functional.gelu`. float64 input uses the float64 formulas directly.
"""

import math

import torch
from torch import Tensor

__all__ = ["gelu_accurate", "gelu_accurate_slope", "normal_cdf_accurate"]

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
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


def _erfc_argument(x: Tensor) -> tuple[Tensor, Tensor]:
    # x·(−1/√2) in float64 holds the fp32 product to 2^-53; split it into fp32 hi + lo.
    return _split(x.double() * -_SQRT_HALF)


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
    t, t_lo = _erfc_argument(x)
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
        return 0.5 * torch.special.erfc(x * -_SQRT_HALF)
    tail = x < _TAIL
    xs = torch.where(tail, x, _TAIL)  # keeps each branch in its own domain
    asymptotic = (_scaled_density(xs) * _tail_series(xs) / -xs) * _SCALE_DOWN
    return torch.where(tail, asymptotic, _erfc_cdf(torch.where(tail, _TAIL, x)))


def gelu_accurate(x: Tensor) -> Tensor:
    """x·Φ(x) to ≤ 4 ulp in fp32 for finite x with |x| ≤ 40 (the callers clamp beyond)."""
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
        return normal_cdf_accurate(x) + x * torch.exp(-0.5 * x * x) * _INV_SQRT_2PI
    slope = normal_cdf_accurate(x) + _scaled_density(x, x) * _SCALE_DOWN
    near_root = (x >= _ROOT_RANGE[0]) & (x <= _ROOT_RANGE[1])
    d = (torch.where(near_root, x, _ROOT_HI) - _ROOT_HI) - _ROOT_LO
    p = d.new_full((), _ROOT_COEFFICIENTS[-1])
    for coefficient in reversed(_ROOT_COEFFICIENTS[:-1]):
        p = p * d + coefficient
    return torch.where(near_root, d * p, slope)
