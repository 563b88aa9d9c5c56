"""The exact GELU for bf16 and fp16, in float32 arithmetic sized for the half type's precision.

The compiled CUDA route's algorithm for half-type inputs (the fp32 algorithm,
:mod:`gelus._gelu_float32`, carries 24 bits through ~100 instructions per element where the
result keeps 8 or 11): x·Φ(x) and its slope Φ(x) + x·φ(x) on float32 tensors holding half-type
values, within 1 ulp of the half type once rounded to it (docs/CUDA.md, "The compiled route on
CUDA"). With u = min(|x|, U), v = 1/(u + C), e = exp(−u²/2)·2^64 and the scaled normal tail
K(u) = Φ(−u)·e^{u²/2}:

    Q(u) = Φ(−u) = v·P(v)·e·2^-64                         P of degree 5 (2^-64 in its constants)
    x·Φ(x) = x − u·Q  (x > 0),   max(x, −U)·Q  (x ≤ 0)
    Φ(−u) − u·φ(u) = (u − u₀)·S(v)·e·2^-64                S of degree 5; u₀ = hi + lo
    slope = 1 − that  (x > 0),   that  (x ≤ 0)

- **No cancellation.** K is smooth in v and never small; the slope's root x = −u₀, where
  K − u/√(2π) cancels, is a factor (u − u₀) formed from u₀ = hi + lo (u − hi is exact there), so
  the slope keeps its relative accuracy through the root. Relative error of the fits: 1.9e-5 and
  1.1e-6 (tools/fit_half_gelu.py), against 2^-12 ≈ 2.4e-4 for fp16's half ulp: rounded to the half
  type, every bf16 and fp16 input is within 0.54 ulp (tests/library/test_gelu_half.py).
- **The GPU compiler's liberties cost nothing here.** Every step's error is ~2^-23 relative,
  1/2000 of the margin: a contracted a·b + c, the approximate reciprocal (``div.full.f32``, 2 ulp)
  and exp2 (``ex2.approx``, 2 ulp) move the result by far less than the margin.
- **The tails.** e·2^64 stays a normal float32 up to u = U (no flush to zero of a subnormal
  intermediate), and the last product, by e, is the one that rounds into the subnormal range:
  bf16's subnormal outputs (x·Φ(x) for x below about −13.2) are rounded twice at most, 2^-150
  then to bf16. −inf gives −0 (slope 0), +inf gives inf (slope 1), nan gives nan, ±0 give ±0:
  no clamp of x or final ``where`` is needed around it (the fp32 route's ±40 clamp is not).
"""

import torch
from torch import Tensor

__all__ = ["slope", "value"]

C = 3.0  # v = 1/(u + C)
U = 16.0  # |x| beyond: value x or −0, slope 1 or 0 (the tails underflow bf16 by far)
LOG2E_HALF = -0.7213475108146667  # float32(−log₂e / 2): e = 2^(u²·LOG2E_HALF + 64)
SCALE_EXPONENT = 64.0

# Printed by tools/fit_half_gelu.py (lowest degree first, in v; scaled by 2^-64).
ROOT_HI = 0.7517915368080139
ROOT_LO = -1.211444988769017e-08
VALUE = (
    2.1600164104422944e-20,
    6.587404673256622e-20,
    1.6171234926334787e-19,
    4.072797453833468e-19,
    1.0897944304142457e-18,
    -2.1265636884316985e-18,
)
SLOPE = (
    -2.1629764891890125e-20,
    -1.6087402756191952e-20,
    -4.3064783679486564e-20,
    -4.358694144116066e-20,
    -3.533278205077647e-19,
    4.130272806227008e-19,
)


def _horner(v: Tensor, coefficients: tuple[float, ...]) -> Tensor:
    p = v * coefficients[-1] + coefficients[-2]
    for c in reversed(coefficients[:-2]):
        p = p * v + c
    return p


def _prepare(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(u = |x| capped at U, v, e·2^64) of a float32 tensor. A comparison caps u: nan stays nan
    (inductor's clamp and minimum propagate nan at three instructions each on sm_90; this, two)."""
    u = x.abs()
    u = torch.where(u > U, U, u)
    v = 1.0 / (u + C)
    e = torch.exp2(u * u * LOG2E_HALF + SCALE_EXPONENT)
    return u, v, e


def value(x: Tensor) -> Tensor:
    """x·Φ(x) of a float32 tensor of half-type values (any: ±inf, nan), for rounding to that
    type (≤ 1 ulp)."""
    u, v, e = _prepare(x)
    q = (v * _horner(v, VALUE)) * e  # Φ(−u); the product by e rounds into subnormals
    # x ≤ 0: x·Φ(−u) with x capped at −U (−inf gives −U·0 = −0; ±0 give ±0; nan stays nan)
    return torch.where(x > 0, x - u * q, torch.where(x < -U, -U, x) * q)


def slope(x: Tensor) -> Tensor:
    """Φ(x) + x·φ(x) of a float32 tensor of half-type values (any), for rounding to that type."""
    u, v, e = _prepare(x)
    gap = (((u - ROOT_HI) - ROOT_LO) * _horner(v, SLOPE)) * e  # Φ(−u) − u·φ(u)
    return torch.where(x > 0, 1.0 - gap, gap)
