"""Device functions (``@triton.jit``, inlined into the kernels): the formulas of every member.

Each takes values already in the compute dtype and returns values in it. The ``PREC`` constexpr
picks how the exact GELU is evaluated:

- ``HALF`` (fp16/bf16 inputs): fp32 arithmetic and a degree-9 polynomial. The result is rounded
  once to 8 or 11 bits, so fp32's few-ulp errors (fast exp, fast division) are far below the
  output's half ulp.
- ``SINGLE`` (fp32 inputs): float64 arithmetic, but only cheap operations: a degree-12
  polynomial, one exp, no erfc. x² of an fp32 x is exact in float64, so exp(−x²/2) carries no
  argument error (fp32 arithmetic loses ~x²·2^-24 there, 200 ulp at x = −20), and the result
  is rounded to fp32 once: ≤ 0.5 ulp + 2^-29 relative.
- ``DOUBLE`` (float64 inputs): float64 with a degree-24 polynomial and x² split hi + lo.

The exact GELU rests on the scaled normal tail K(u) = Q(u)·exp(u²/2), Q(u) = Φ(−u), u = |x|:

    x ≤ 0:  Φ(x) = Q(u) = K·e                  slope Φ(x) + x·φ(x) = e·(K − u/√(2π))
    x > 0:  Φ(x) = 1 − K·e                     slope = 1 − e·(K − u/√(2π))
    e = exp(−u²/2)

K is smooth and never small (½ ≥ K ≥ ~1/(√(2π)·u)), so no step cancels and no erfc argument
is rounded: the accuracy is that of K's polynomial and of one exp. Near the slope's root x₀
(K − u/√(2π) cancels) the slope is d·R(d), d = x − x₀ formed exactly from x₀ = hi + lo.
"""

import math

import triton
import triton.language as tl

from gelus import _common
from gelus._triton._coefficients import (
    ROOT_HI_32,
    ROOT_HI_64,
    ROOT_LO_32,
    ROOT_LO_64,
    ROOT_MONOMIAL_32,
    ROOT_MONOMIAL_64,
    T_OFFSET,
    T_SLOPE,
    TAIL_CHEBYSHEV,
    TAIL_MONOMIAL,
    TAIL_MONOMIAL_HALF,
)

__all__ = [
    "DOUBLE",
    "HALF",
    "SINGLE",
    "SWISH_CLAMP",
    "gelu_form",
    "gelu_form_slope",
    "normal_cdf_pdf",
    "swish_slope",
    "swish_value",
]

HALF = tl.constexpr(0)
SINGLE = tl.constexpr(1)
DOUBLE = tl.constexpr(2)

# Forms of GELU (the ``FORM`` constexpr of the kernels).
EXACT = tl.constexpr(0)
TANH = tl.constexpr(1)
SIGMOID = tl.constexpr(2)

# The constants the torch routes use (gelus._common), as constexprs the kernels can read.
_INV_SQRT_2PI = tl.constexpr(_common.INV_SQRT_2PI)
_U_MAX = tl.constexpr(_common.GELU_CLAMP)  # Q(40), 40·φ(40) underflow float64: the limits are exact
# For fp32 inputs (float64 arithmetic) u stops at 37, where exp(−u²/2) = 1e-297 is still normal and
# the results, times any fp32 x, round to the limits 0 and 1 in fp32.
_U_MAX_SINGLE = tl.constexpr(37.0)
_LOG2E = tl.constexpr(1.0 / math.log(2.0))
_LN2_HI = tl.constexpr(float.fromhex("0x1.62e42fefa0000p-1"))  # ln 2 to 37 bits
_LN2_LO = tl.constexpr(math.log(2.0) - float.fromhex("0x1.62e42fefa0000p-1"))
_EXP_TAYLOR = tl.constexpr(tuple(1.0 / math.factorial(j) for j in range(10)))
_ROOT_HALF_WIDTH = tl.constexpr(0.125)
# 1 + tanh(v) = 2·σ(2v): the tanh form is x·σ(z), z = x·(A + B·x²), A = 2·√(2/π), B = A·0.044715.
_TANH_A = tl.constexpr(_common.TANH_A)
_TANH_B = tl.constexpr(_common.TANH_B)
_TANH_CLAMP = tl.constexpr(_common.TANH_CLAMP)  # |z(±100)| > 7000: σ(z) is 0 or 1 in every dtype
SWISH_CLAMP = tl.constexpr(_common.SILU_CLAMP)  # σ(±1e4) is exactly 1 or 0, and so is the slope
SIGMOID_SCALE = tl.constexpr(_common.SIGMOID_SCALE)


# Lengths of the coefficient tuples (len() is not available on a constexpr inside a kernel).
_TAIL_MONOMIAL_N = tl.constexpr(len(TAIL_MONOMIAL.value))
_TAIL_HALF_N = tl.constexpr(len(TAIL_MONOMIAL_HALF.value))
_TAIL_CHEBYSHEV_N = tl.constexpr(len(TAIL_CHEBYSHEV.value))
_ROOT_32_N = tl.constexpr(len(ROOT_MONOMIAL_32.value))
_ROOT_64_N = tl.constexpr(len(ROOT_MONOMIAL_64.value))


@triton.jit
def _horner(t, COEFFICIENTS: tl.constexpr, N: tl.constexpr):
    p = tl.zeros_like(t) + COEFFICIENTS[N - 1]
    for j in tl.static_range(N - 2, -1, -1):
        p = p * t + COEFFICIENTS[j]
    return p


@triton.jit
def _clenshaw(t, COEFFICIENTS: tl.constexpr, N: tl.constexpr):
    # Σ c_j·T_j(t) without converting to powers of t (which would cancel at degree 24).
    b1 = tl.zeros_like(t)
    b2 = tl.zeros_like(t)
    for j in tl.static_range(N - 1, 0, -1):
        b1, b2 = 2.0 * t * b1 - b2 + COEFFICIENTS[j], b1
    return t * b1 - b2 + COEFFICIENTS[0]


@triton.jit
def _scaled_tail(u, PREC: tl.constexpr):
    """K(u) = Q(u)·exp(u²/2) for 0 ≤ u ≤ 40."""
    if PREC == SINGLE:
        # 4/(4 + u): an fp32 quotient (2^-22 on the GPU's fast division) and one float64 Newton
        # step (error 2^-44), instead of a float64 division (a long instruction sequence).
        d = 4.0 + u
        s = (4.0 / d.to(tl.float32)).to(tl.float64)
        s = s + s * (1.0 - 0.25 * d * s)
    else:
        s = 4.0 / (4.0 + u)
    t = s * T_SLOPE + T_OFFSET
    if PREC == DOUBLE:
        p = _clenshaw(t, TAIL_CHEBYSHEV, _TAIL_CHEBYSHEV_N)
    elif PREC == SINGLE:
        p = _horner(t, TAIL_MONOMIAL, _TAIL_MONOMIAL_N)
    else:
        p = _horner(t, TAIL_MONOMIAL_HALF, _TAIL_HALF_N)
    return s * p


@triton.jit
def _gauss(u, PREC: tl.constexpr):
    """exp(−u²/2) for 0 ≤ u ≤ 40 (u² is exact in float64 for fp32 u; split for float64 u)."""
    square = u * u
    if PREC == SINGLE:
        # exp(a), a = −u²/2 ≥ −684.5 (u ≤ 37): a = k·ln 2 + r, |r| ≤ ln(2)/2, k·ln 2 in two
        # parts (LN2_HI has 37 bits and |k| < 2^10, so k·LN2_HI is exact), e^r by its degree-9 Taylor
        # polynomial (error 7e-12 relative), 2^k by the exponent bits (k ≥ −988: normal).
        # Cheaper than a full-precision float64 exp, and 2^-38 is all an fp32 result needs.
        a = -0.5 * square
        k = tl.floor(a * _LOG2E + 0.5)
        r = a - k * _LN2_HI - k * _LN2_LO
        p = tl.zeros_like(r) + _EXP_TAYLOR[9]
        for j in tl.static_range(8, -1, -1):
            p = p * r + _EXP_TAYLOR[j]
        scale = ((k.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)
        e = p * scale
    else:
        e = tl.exp(-0.5 * square)
        if PREC == DOUBLE:
            e = e - e * (0.5 * tl.fma(u, u, -square))  # e·exp(−lo) ≈ e·(1 − lo)
    return e


@triton.jit
def _clamped_abs(x, PREC: tl.constexpr):
    u = tl.abs(x)
    if PREC == SINGLE:
        u = tl.where(u > _U_MAX_SINGLE, _U_MAX_SINGLE, u)  # a comparison: nan stays nan
    else:
        u = tl.where(u > _U_MAX, _U_MAX, u)
    return u


@triton.jit
def normal_cdf_pdf(z, PREC: tl.constexpr):
    """(Φ(z), φ(z)) without cancellation, for any z (±inf give the limits; nan gives nan)."""
    u = _clamped_abs(z, PREC)
    # At the clamp (|z| ≥ 37 or 40) the tail and the density are 0 in the output dtype; make them
    # exactly 0, so that x·Φ(z) and x·φ(z) are 0 and not inf·tiny = inf for x = −inf.
    e = tl.where(u < tl.abs(z), 0.0, _gauss(u, PREC))
    q = _scaled_tail(u, PREC) * e
    return tl.where(z > 0, 1.0 - q, q), e * _INV_SQRT_2PI


@triton.jit
def _gelu_exact(x, PREC: tl.constexpr):
    cdf, _ = normal_cdf_pdf(x, PREC)
    x = tl.where(x < -_U_MAX, -_U_MAX, x)  # −inf·0 would be nan; −40·Φ(−40) is −0
    return x * cdf


@triton.jit
def _gelu_exact_slope(x, PREC: tl.constexpr):
    u = _clamped_abs(x, PREC)
    e = _gauss(u, PREC)
    gap = e * (_scaled_tail(u, PREC) - _INV_SQRT_2PI * u)  # Q(u) − u·φ(u)
    slope = tl.where(x > 0, 1.0 - gap, gap)
    if PREC == DOUBLE:
        d = (x - ROOT_HI_64) - ROOT_LO_64
        root = d * _horner(d, ROOT_MONOMIAL_64, _ROOT_64_N)
    elif PREC == SINGLE:
        d = (x - ROOT_HI_64) - ROOT_LO_64
        root = d * _horner(d, ROOT_MONOMIAL_32, _ROOT_32_N)
    else:
        d = (x - ROOT_HI_32) - ROOT_LO_32
        root = d * _horner(d, ROOT_MONOMIAL_32, _ROOT_32_N)
    return tl.where(tl.abs(d) <= _ROOT_HALF_WIDTH, root, slope)


@triton.jit
def _sigmoid_pair(z):
    """(σ(z), σ(z)·(1 − σ(z))) without cancellation: t = exp(−|z|) ≤ 1."""
    t = tl.exp(-tl.abs(z))
    r = 1.0 / (1.0 + t)
    s = tl.where(z >= 0, r, t * r)
    return s, t * r * r


@triton.jit
def swish_value(x, beta):
    """x·σ(β·x); β = 0 gives x/2 (also at ±inf); where σ underflows the result is a signed 0."""
    z = tl.where(beta == 0, 0.0, beta * x)
    z = tl.where(z > SWISH_CLAMP, SWISH_CLAMP, tl.where(z < -SWISH_CLAMP, -SWISH_CLAMP, z))
    s, _ = _sigmoid_pair(z)
    zero = tl.where(x < 0, -0.0, 0.0)
    return tl.where(s == 0, zero, x * s)


@triton.jit
def swish_slope(x, beta):
    """d/dx x·σ(βx) = σ(z) + z·σ(z)(1 − σ(z)), z = βx (clamped: the slope is exactly 0 or 1 there)."""
    z = tl.where(beta == 0, 0.0, beta * x)
    z = tl.where(z > SWISH_CLAMP, SWISH_CLAMP, tl.where(z < -SWISH_CLAMP, -SWISH_CLAMP, z))
    s, ds = _sigmoid_pair(z)
    return s + z * ds


@triton.jit
def _gelu_tanh(x):
    x = tl.where(x < -_TANH_CLAMP, -_TANH_CLAMP, x)  # −inf·σ(−inf) would be nan
    z = x * (_TANH_A + _TANH_B * x * x)  # +inf or FLT_MAX give z = +inf, σ = 1: exact
    s, _ = _sigmoid_pair(z)
    return x * s


@triton.jit
def _gelu_tanh_slope(x):
    # σ(z) + x·z'·σ(z)(1 − σ(z)), z' = A + 3B·x²; beyond ±100 the slope is exactly 1 or 0, and
    # clamping keeps x·z' finite (it overflows fp32 near |x| = 1.8e19 in torch's kernel).
    x = tl.where(x > _TANH_CLAMP, _TANH_CLAMP, tl.where(x < -_TANH_CLAMP, -_TANH_CLAMP, x))
    square = x * x
    s, ds = _sigmoid_pair(x * (_TANH_A + _TANH_B * square))
    return s + x * (_TANH_A + 3.0 * _TANH_B * square) * ds


@triton.jit
def gelu_form(x, FORM: tl.constexpr, PREC: tl.constexpr):
    """GELU of the given form: x·Φ(x), x·σ(2√(2/π)(x + 0.044715x³)), or x·σ(1.702x)."""
    if FORM == EXACT:
        y = _gelu_exact(x, PREC)
    elif FORM == TANH:
        y = _gelu_tanh(x)
    else:
        y = swish_value(x, SIGMOID_SCALE)
    return y


@triton.jit
def gelu_form_slope(x, FORM: tl.constexpr, PREC: tl.constexpr):
    """The derivative of :func:`gelu_form`: finite everywhere, 1 at +inf and 0 at −inf."""
    if FORM == EXACT:
        g = _gelu_exact_slope(x, PREC)
    elif FORM == TANH:
        g = _gelu_tanh_slope(x)
    else:
        g = swish_slope(x, SIGMOID_SCALE)
    return g
