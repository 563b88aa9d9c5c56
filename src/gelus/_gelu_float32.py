"""The exact GELU in float32 arithmetic alone: the constants and a composition of torch ops.

x·Φ(x) and its slope Φ(x) + x·φ(x) within 2 ulp of the exact function for every float32 x, with
no float64 operation, no erf or erfc and no library exp: the algorithm of the CUDA kernels
(:mod:`gelus._triton._math`, which use fma) and of the compiled routes (this module, which has
none). docs/CUDA.md, "Exact GELU in float32", derives it; tools/fit_float32_gelu.py fits the
constants. With u = |x|, e = exp(−u²/2), the scaled tail K(u) = Φ(−u)·e^{u²/2} and
M(u) = K(u) − u/√(2π):

    x ≤ 0:  x·Φ(x) = −u·K·e               slope = M·e
    x > 0:  x·Φ(x) = x − u·K·e            slope = 1 − M·e

- **The polynomials.** Near 0 (u < 2) in t = u − 1: K (degree 12), and M = (u − u₀)·R (R of
  degree 10) with u − u₀ carried as hi + lo, so the slope keeps its relative accuracy at its
  root x = −u₀. Far (2 ≤ u ≤ 15) in t = A/u + B: u·K and −M/u, smooth in 1/u (degree 10). Here
  the region's coefficient is picked at each Horner step; the kernels evaluate both regions'
  polynomials and keep one (cheaper there than a select per step), with the same result.
- **The product.** u·K·e is m·P(t)·(1 + w)·2^k, m = u, 1, u − u₀ or −u: P = hi + lo (its last
  addition's error kept), m·P_hi split exactly, and everything but the leading part summed in a
  tail, so the result is rounded once (a few small roundings in the tail).
- **e = exp(−u²/2)** = (1 + w)·2^k: u² = s + lo exactly; k = round(−s/2·log₂e) (the kernels
  add 1.5·2^23, which rounds it and leaves k in the low bits: no float-to-integer conversion);
  r = −s/2 − k·ln 2 − lo/2 with ln 2 split so that k·LN2_HI is exact; w = r·E(r); 2^k as
  2^(k+64)·2^-64, so that the one rounding into the subnormal range comes last.
- **Beyond u = 15** the value and the slope at −u are below half the least subnormal: the tail
  is set to 0, which gives +inf → +inf (slope 1), −inf → −0 (slope 0), FLT_MAX → FLT_MAX; nan
  propagates; −0 → −0.

This module computes the exact products that the kernels get from fma with the halves of
:func:`_high` (the significand's low 12 bits masked off: an integer operation, so that a compiler
contracting a·b + c into an fma cannot change the split; the products of halves are exact, so
contracting them changes nothing either).

**Whatever the compiler contracts.** inductor's Triton code is built with fp fusion on, so any
a·b + c of this composition may become one fma. Every sum whose error the analysis tracks adds
an exact product (a product of halves) or no product; where an inexact product meets an addition
(Horner steps, the tail), an fma rounds once instead of twice. So the leading product m·P_hi is
taken as the exact product of its halves (with its three other half products in the tail): a
rounded leading product contracted into fma(m, P_hi, tail) whose tail already holds that
product's error counted it twice (value 2.19 ulp in inductor's sm_90 code). 1/v (the far
region's variable) takes one Newton step on an exact residual (:func:`_reciprocal`), since
inductor divides with ``div.full.f32`` (2 ulp: slope 2.34 ulp). Measured against
float64 on 1.2 million points (tests/library/test_accuracy.py), eagerly on the CPU (no fma):
value ≤ 1.88 ulp, slope ≤ 1.62 ulp; inductor's sm_90 PTX evaluated as the GPU defines it (fma,
``div.full`` anywhere in its bound; tools/ptx_numerics.py --route): 1.89 / 1.49 ulp.
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
ROUNDER = 12582912.0  # 1.5·2^23: v + ROUNDER rounds v to an integer, held in the low bits
ROUNDER_BITS = 0x4B400000  # its bit pattern

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
    -0.03379395231604576,
    -0.005234257318079472,
    0.003358997870236635,
    -0.00074388412758708,
    -1.9915652956115082e-05,
    8.941431588027626e-05,
    -4.267443000571802e-05,
    9.191056051349733e-06,
    3.3775320389395347e-06,
    -2.3229879388964036e-06,
)
FAR_VALUE_LOW = 6.250869599710995e-09
NEAR_SLOPE = (
    -0.5534218549728394,
    0.0689563974738121,
    -0.027594704180955887,
    0.010108701884746552,
    -0.0034383113961666822,
    0.0010976047487929463,
    -0.000330994778778404,
    9.357433009427041e-05,
    -2.571337972767651e-05,
    8.131043614412192e-06,
    -2.0319644136179704e-06,
)
NEAR_SLOPE_LOW = 2.4732541348271297e-08
FAR_SLOPE = (
    0.3690323829650879,
    -0.04303164407610893,
    -0.012921219691634178,
    0.0019594086334109306,
    -0.00010700544225983322,
    -6.460230360971764e-05,
    3.034372093679849e-05,
    -6.966577984712785e-06,
    -2.3950468275302228e-08,
    9.526212920718535e-07,
    -3.482461750081711e-07,
)
FAR_SLOPE_LOW = 1.259832682620754e-09
EXP_RATIO = (
    1.0,
    0.4999999701976776,
    0.16666480898857117,
    0.04166732355952263,
    0.008371775038540363,
    0.0013882038183510303,
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


def _reciprocal(v: Tensor) -> Tensor:
    """1/v within 0.5 ulp + 2^-44 relative, whatever the division's accuracy: inductor lowers 1/v
    on CUDA to div.full.f32 (2 ulp, which moved the far polynomial's argument: slope 2.34 ulp;
    its correctly rounded div_rn costs a slow-path call, ~20 instructions per element). One
    Newton step r + r·(1 − v·r) on the exact residual: v·r = p + (p's error) by Dekker's
    products of halves (exact, so contraction changes none of them), 1 − p exact for p near 1."""
    r = 1.0 / v
    p = v * r
    residual = (1.0 - p) - _product_error(v, r, p)
    return r + r * residual


def _gauss(u: Tensor) -> tuple[Tensor, Tensor]:
    """exp(−u²/2) = (1 + w)·scale·2^-64 for 0 ≤ u ≤ U_MAX: (w, scale)."""
    square = u * u
    low = _product_error(u, u, square)  # u² = square + low exactly
    a = -0.5 * square
    # k = round(a·log₂e) by floor, not by the kernels' rounding addition to 1.5·2^23: inductor's
    # C++ code (CPU) is compiled with unsafe-math flags, under which (v + R) − R may become v
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
    n = max(len(near_p), len(far_p))  # the shorter one padded with leading zeros (exact steps)
    near_p, far_p = (tuple(c) + (0.0,) * (n - len(c)) for c in (near_p, far_p))
    p = _pick(near, near_p[-1], far_p[-1])
    for j in range(n - 2, 0, -1):
        p = p * t + _pick(near, near_p[j], far_p[j])
    rest = p * t  # P = c0 + rest + (rest's rounding error) + low
    rest_error = _product_error(p, t, rest)
    c0 = _pick(near, near_p[0], far_p[0])
    p_hi = c0 + rest  # |c0| ≥ |rest| on both regions: Fast2Sum
    p_lo = (rest - (p_hi - c0)) + (rest_error + _pick(near, near_low, far_low))
    # m_hi·p_hi = a_hi + (its three other half products), a_hi exact: a compiler that contracts
    # the final a_hi + tail into fma(m_h, p_h, tail) computes the same sum, rounded once (a
    # rounded leading product whose error sits in the tail would be counted twice)
    m_h, p_h = _high(m_hi), _high(p_hi)
    m_l, p_l = m_hi - m_h, p_hi - p_h
    a_hi = m_h * p_h
    a_lo = ((m_h * p_l + m_l * p_h) + m_l * p_l) + m_hi * p_lo
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
    # 1/u of the far region only: autograd through the discarded branch (torch.func under compile
    # differentiates this composition) would otherwise meet 1/0 and give 0·inf = nan at x = ±0
    inverse = _reciprocal(torch.where(near, SPLIT, u))
    t = torch.where(near, u - 1.0, inverse * FAR_SCALE + FAR_OFFSET)
    return u, beyond, near, t


def value(x: Tensor) -> Tensor:
    """x·Φ(x) of a float32 tensor, within 2 ulp, in float32 operations (composable, fusable)."""
    u, beyond, near, t = _prepare(x)
    m = torch.where(near, u, 1.0)
    q = _tail(t, near, (NEAR_VALUE, NEAR_VALUE_LOW, FAR_VALUE, FAR_VALUE_LOW), m, None, u)
    q = torch.where(beyond, 0.0, q)
    # ±0 gives ±0·½: the sign of zero kept, and autograd's derivative there ½ (through |x| it
    # would see none of q's)
    return torch.where(x > 0, x - q, torch.where(x < 0, -q, 0.5 * x))


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
