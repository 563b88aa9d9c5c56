"""The exact GELU in float32 arithmetic alone: the constants and a composition of torch ops.

x·Φ(x) and its slope Φ(x) + x·φ(x) within 2 ulp of the exact function for every float32 x, with
no float64 operation, no erf or erfc and no library exp: the algorithm of the CUDA kernels
(:mod:`gelus._triton._math`, which use fma) and of the compiled routes (this module, which has
none). docs/CUDA.md, "Exact GELU in float32", derives it; tools/fit_float32_gelu.py fits the
constants. With u = |x|, e = exp(−u²/2), the scaled tail K(u) = Φ(−u)·e^{u²/2} and
M(u) = K(u) − u/√(2π):

    x ≤ 0:  x·Φ(x) = −u·K·e               slope = M·e
    x > 0:  x·Φ(x) = x − u·K·e            slope = 1 − M·e

- **The polynomials.** Near 0 (u < 2) in t = u − 1: K, and M = (u − u₀)·R with u − u₀ carried
  as hi + lo, so the slope keeps its relative accuracy at its root x = −u₀. Far (2 ≤ u ≤ 15)
  in t = A/u + B: u·K and −M/u, smooth in 1/u. Each degree 12; the polynomial of a region is
  picked coefficient by coefficient, so one Horner loop serves both.
- **The product.** u·K·e is m·P(t)·(1 + w)·2^k, m = u, 1, u − u₀ or −u: P = hi + lo (its last
  addition's error kept), m·P_hi split exactly, and everything but the leading part summed in a
  tail, so the result is rounded once (a few small roundings in the tail).
- **e = exp(−u²/2)** = (1 + w)·2^k: u² = s + lo exactly; k = round(−s/2·log₂e);
  r = −s/2 − k·ln 2 − lo/2 with ln 2 split so that k·LN2_HI is exact; w = r·E(r); 2^k as
  2^(k+64)·2^-64, so that the one rounding into the subnormal range comes last.
- **Beyond u = 15** the value and the slope at −u are below half the least subnormal: the tail
  is set to 0, which gives +inf → +inf (slope 1), −inf → −0 (slope 0), FLT_MAX → FLT_MAX; nan
  propagates; −0 → −0.

This module computes the exact products that the kernels get from fma with the halves of
:func:`_high` (the significand's low 12 bits masked off: an integer operation, so that a compiler
contracting a·b + c into an fma cannot change the split; the products of halves are exact, so
contracting them changes nothing either). Measured against float64 on 1.2 million points
(tests/library/test_accuracy.py): value ≤ 1.71 ulp, slope ≤ 1.67 ulp.
"""

import torch
from torch import Tensor

__all__ = ["slope", "value"]

SPLIT = 2.0  # near region u < SPLIT, far region SPLIT ≤ u ≤ U_MAX
U_MAX = 15.0
LOG2E = 1.4426950216293335  # float32(1/ln 2)
LN2_HI = 0.693145751953125  # ln 2 to 16 bits: k·LN2_HI is exact for |k| < 2^8
LN2_LO = 1.428606765330187e-06  # float32(ln 2 − LN2_HI)
SCALE_EXPONENT = 64  # e·2^64 stays normal down to u = 15; the final ·2^-64 rounds once

# Printed by tools/fit_float32_gelu.py (polynomials: lowest degree first, in t ∈ [−1, 1]).
ROOT_HI = 0.7517915368080139  # float32(u₀)
ROOT_LO = -1.211444988769017e-08  # float32(u₀ − ROOT_HI)
FAR_SCALE = 4.615384578704834
FAR_OFFSET = -1.307692289352417
NEAR_VALUE = (
    0.2615782916545868,
    -0.1373639851808548,
    0.062107153236866,
    -0.02508562058210373,
    0.00925537757575512,
    -0.003165971487760544,
    0.001014911918900907,
    -0.0003075653512496501,
    8.843085379339755e-05,
    -2.3887963834567927e-05,
    6.382446827046806e-06,
    -1.96503174265672e-06,
    4.5328368969421717e-07,
)
NEAR_VALUE_LOW = -1.8269513679669558e-09
FAR_VALUE = (
    0.37258002161979675,
    -0.03379395976662636,
    -0.0052342587150633335,
    0.0033591692335903645,
    -0.0007438811007887125,
    -2.086953099933453e-05,
    8.944060391513631e-05,
    -4.0505765355192125e-05,
    9.08263882593019e-06,
    1.2200753189972602e-06,
    -2.186329538744758e-06,
    7.805635391378019e-07,
    -5.633813771055429e-08,
)
FAR_VALUE_LOW = 6.219043058308671e-09
NEAR_SLOPE = (
    -0.5534218549728394,
    0.0689563900232315,
    -0.027594704180955887,
    0.010108810849487782,
    -0.0034383339807391167,
    0.0010969940340146422,
    -0.00033086049370467663,
    9.497029532212764e-05,
    -2.6029707441921346e-05,
    6.736324394296389e-06,
    -1.7101256162277423e-06,
    5.063432695351366e-07,
    -1.1828029045091171e-07,
)
NEAR_SLOPE_LOW = 2.549358057990503e-08
FAR_SLOPE = (
    0.3690323829650879,
    -0.04303164407610893,
    -0.012921220622956753,
    0.0019594200421124697,
    -0.00010699370614020154,
    -6.466561899287626e-05,
    3.0297565899672918e-05,
    -6.822790510341292e-06,
    5.919992673852903e-08,
    8.097053409983346e-07,
    -4.17982448652765e-07,
    5.1670131284708987e-08,
    2.210361671473038e-08,
)
FAR_SLOPE_LOW = 1.1092846641247434e-09
EXP_RATIO = (
    1.0,
    0.5,
    0.1666666567325592,
    0.04166630655527115,
    0.008333427831530571,
    0.0013944696402177215,
    0.00019833452824968845,
)


def _high(v: Tensor) -> Tensor:
    """v with the low 12 bits of its significand cleared: v = high + (v − high), both halves
    exactly representable in 12 bits, so that products of halves are exact in float32."""
    return (v.view(torch.int32) & -4096).view(torch.float32)


def _product_error(a: Tensor, b: Tensor, product: Tensor) -> Tensor:
    """a·b − product exactly (Dekker's algorithm) for product = fl(a·b), without an fma."""
    a_hi, b_hi = _high(a), _high(b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return (((a_hi * b_hi - product) + a_hi * b_lo) + a_lo * b_hi) + a_lo * b_lo


def _gauss(u: Tensor) -> tuple[Tensor, Tensor]:
    """exp(−u²/2) = (1 + w)·scale·2^-64 for 0 ≤ u ≤ U_MAX: (w, scale)."""
    square = u * u
    low = _product_error(u, u, square)  # u² = square + low exactly
    a = -0.5 * square
    k = torch.floor(a * LOG2E + 0.5)
    r = (a - k * LN2_HI) - (k * LN2_LO + 0.5 * low)  # a − k·LN2_HI is exact
    e = EXP_RATIO[-1]
    for coefficient in reversed(EXP_RATIO[:-1]):
        e = e * r + coefficient
    # 2^(k + 64) from the exponent bits: a normal number for k ≥ −163 (u ≤ 15)
    scale = ((k.to(torch.int32) + (127 + SCALE_EXPONENT)) << 23).view(torch.float32)
    return r * e, scale


def _pick(near: Tensor, near_constant: float, far_constant: float) -> Tensor:
    # float32 whatever torch's default dtype (a where of two Python floats takes the default)
    return torch.where(near, near_constant, far_constant).to(torch.float32)


def _tail(t: Tensor, near: Tensor, polynomials, m_hi: Tensor, m_lo: Tensor | None, u: Tensor):
    """m·P(t)·exp(−u²/2) with one final rounding, P the near or far polynomial."""
    near_p, near_low, far_p, far_low = polynomials
    p = _pick(near, near_p[-1], far_p[-1])
    for j in range(len(near_p) - 2, 0, -1):
        p = p * t + _pick(near, near_p[j], far_p[j])
    rest = p * t  # P = c0 + rest + (rest's rounding error) + low
    rest_error = _product_error(p, t, rest)
    c0 = _pick(near, near_p[0], far_p[0])
    p_hi = c0 + rest  # |c0| ≥ |rest| on both regions: Fast2Sum
    p_lo = (rest - (p_hi - c0)) + (rest_error + _pick(near, near_low, far_low))
    a_hi = m_hi * p_hi
    a_lo = _product_error(m_hi, p_hi, a_hi) + m_hi * p_lo
    if m_lo is not None:
        a_lo = a_lo + m_lo * p_hi
    w, scale = _gauss(u)
    y = a_hi + (a_hi * w + (a_lo * w + a_lo))  # m·P·(1 + w)
    return y * scale * 2.0**-SCALE_EXPONENT


def _prepare(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(u clamped to U_MAX, whether beyond it, the near mask, the polynomial variable t)."""
    u = x.abs()
    beyond = u > U_MAX
    u = torch.where(beyond, U_MAX, u)  # a comparison: nan stays nan
    near = u < SPLIT
    t = torch.where(near, u - 1.0, (1.0 / u) * FAR_SCALE + FAR_OFFSET)  # 1/0 is discarded
    return u, beyond, near, t


def value(x: Tensor) -> Tensor:
    """x·Φ(x) of a float32 tensor, within 2 ulp, in float32 operations (composable, fusable)."""
    u, beyond, near, t = _prepare(x)
    m = torch.where(near, u, 1.0)
    q = _tail(t, near, (NEAR_VALUE, NEAR_VALUE_LOW, FAR_VALUE, FAR_VALUE_LOW), m, None, u)
    q = torch.where(beyond, 0.0, q)
    return torch.where(x >= 0, x - q, -q)  # x ≥ 0: ±0 − 0 keeps the sign of zero


def slope(x: Tensor) -> Tensor:
    """Φ(x) + x·φ(x) of a float32 tensor, within 2 ulp, in float32 operations."""
    u, beyond, near, t = _prepare(x)
    # u − u₀ = d_hi + d_lo: Fast2Sum of u and −ROOT_HI (larger magnitude first), then − ROOT_LO
    d_hi = u - ROOT_HI
    above = u >= ROOT_HI
    z = d_hi - torch.where(above, u, -ROOT_HI)
    d_lo = (torch.where(above, -ROOT_HI, u) - z) - ROOT_LO
    m_hi = torch.where(near, d_hi, -u)
    m_lo = torch.where(near, d_lo, 0.0)
    q = _tail(t, near, (NEAR_SLOPE, NEAR_SLOPE_LOW, FAR_SLOPE, FAR_SLOPE_LOW), m_hi, m_lo, u)
    q = torch.where(beyond, 0.0, q)
    return torch.where(x > 0, 1.0 - q, q)
