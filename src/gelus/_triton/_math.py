"""Device functions (``@triton.jit``, inlined into the kernels): the formulas of every member.

Each takes values already in the compute dtype and returns values in it. The ``PREC`` constexpr
picks how the exact GELU is evaluated:

- ``HALF`` (fp16/bf16 inputs): fp32 arithmetic, a degree-9 polynomial and the GPU's fast exp.
  The result is rounded once to 8 or 11 bits, so fp32's few-ulp errors are far below the
  output's half ulp.
- ``SINGLE`` (fp32 inputs): fp32 arithmetic alone, within 2 ulp: the algorithm of
  :mod:`gelus._gelu_float32` (its docstring and docs/CUDA.md derive it; its constants are
  these kernels'), with fma where that module forms exact products from split halves.
- ``DOUBLE`` (float64 inputs): float64 with a degree-24 polynomial and x² split hi + lo.

HALF and DOUBLE rest on the scaled normal tail K(u) = Q(u)·exp(u²/2), Q(u) = Φ(−u), u = |x|:

    x ≤ 0:  Φ(x) = Q(u) = K·e                  slope Φ(x) + x·φ(x) = e·(K − u/√(2π))
    x > 0:  Φ(x) = 1 − K·e                     slope = 1 − e·(K − u/√(2π))
    e = exp(−u²/2)

K is smooth and never small (½ ≥ K ≥ ~1/(√(2π)·u)), so no step cancels and no erfc argument
is rounded: the accuracy is that of K's polynomial and of one exp. Near the slope's root x₀
(K − u/√(2π) cancels) the slope is d·R(d), d = x − x₀ formed exactly from x₀ = hi + lo.
"""

import triton
import triton.language as tl

from gelus import _common
from gelus import _gelu_float32 as f32
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
    TAIL_MONOMIAL_HALF,
)

__all__ = [
    "DOUBLE",
    "HALF",
    "SINGLE",
    "SWISH_CLAMP",
    "gelu_form",
    "gelu_form_slope",
    "gelu_form_slope_times",
    "gelu_form_times",
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
_ROOT_HALF_WIDTH = tl.constexpr(0.125)
# The float32 algorithm's constants (gelus._gelu_float32), as constexprs the kernels can read.
_SPLIT = tl.constexpr(f32.SPLIT)
_U_MAX_SINGLE = tl.constexpr(f32.U_MAX)
_FAR_SCALE = tl.constexpr(f32.FAR_SCALE)
_FAR_OFFSET = tl.constexpr(f32.FAR_OFFSET)
_ROOT_HI = tl.constexpr(f32.ROOT_HI)
_ROOT_LO = tl.constexpr(f32.ROOT_LO)
_LOG2E = tl.constexpr(f32.LOG2E)
_LN2_HI = tl.constexpr(f32.LN2_HI)
_LN2_LO = tl.constexpr(f32.LN2_LO)
_SCALE_EXPONENT = tl.constexpr(f32.SCALE_EXPONENT)
_ROUNDER = tl.constexpr(f32.ROUNDER)
_ROUNDER_BITS = tl.constexpr(f32.ROUNDER_BITS)
_SCALE_DOWN = tl.constexpr(2.0**-f32.SCALE_EXPONENT)
_EXP_RATIO = tl.constexpr(f32.EXP_RATIO)
_NEAR_VALUE = tl.constexpr(f32.NEAR_VALUE)
_NEAR_VALUE_LOW = tl.constexpr(f32.NEAR_VALUE_LOW)
_FAR_VALUE = tl.constexpr(f32.FAR_VALUE)
_FAR_VALUE_LOW = tl.constexpr(f32.FAR_VALUE_LOW)
_NEAR_SLOPE = tl.constexpr(f32.NEAR_SLOPE)
_NEAR_SLOPE_LOW = tl.constexpr(f32.NEAR_SLOPE_LOW)
_FAR_SLOPE = tl.constexpr(f32.FAR_SLOPE)
_FAR_SLOPE_LOW = tl.constexpr(f32.FAR_SLOPE_LOW)
# 1 + tanh(v) = 2·σ(2v): the tanh form is x·σ(z), z = x·(A + B·x²), A = 2·√(2/π), B = A·0.044715.
_TANH_A = tl.constexpr(_common.TANH_A)
_TANH_B = tl.constexpr(_common.TANH_B)
_TANH_CLAMP = tl.constexpr(_common.TANH_CLAMP)  # |z(±100)| > 7000: σ(z) is 0 or 1 in every dtype
SWISH_CLAMP = tl.constexpr(_common.SILU_CLAMP)  # σ(±1e4) is exactly 1 or 0, and so is the slope
SIGMOID_SCALE = tl.constexpr(_common.SIGMOID_SCALE)


# Lengths of the coefficient tuples (len() is not available on a constexpr inside a kernel).
_NEAR_VALUE_N = tl.constexpr(len(f32.NEAR_VALUE))
_FAR_VALUE_N = tl.constexpr(len(f32.FAR_VALUE))
_NEAR_SLOPE_N = tl.constexpr(len(f32.NEAR_SLOPE))
_FAR_SLOPE_N = tl.constexpr(len(f32.FAR_SLOPE))
_EXP_RATIO_N = tl.constexpr(len(f32.EXP_RATIO))
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
def _horner_fma(t, COEFFICIENTS: tl.constexpr, N: tl.constexpr):
    """Σ c_j·t^j by Horner's rule, each step one fma (rounded once, as the GPU and the
    interpreter both compute it, whatever the compiler would contract)."""
    p = tl.fma(t, COEFFICIENTS[N - 1], COEFFICIENTS[N - 2])
    for j in tl.static_range(N - 3, -1, -1):
        p = tl.fma(p, t, COEFFICIENTS[j])
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
    """K(u) = Q(u)·exp(u²/2) for 0 ≤ u ≤ 40 (HALF and DOUBLE)."""
    s = 4.0 / (4.0 + u)
    t = s * T_SLOPE + T_OFFSET
    if PREC == DOUBLE:
        p = _clenshaw(t, TAIL_CHEBYSHEV, _TAIL_CHEBYSHEV_N)
    else:
        p = _horner(t, TAIL_MONOMIAL_HALF, _TAIL_HALF_N)
    return s * p


@triton.jit
def _gauss(u, PREC: tl.constexpr):
    """exp(−u²/2) for 0 ≤ u ≤ 40 (HALF: the fast exp; DOUBLE: u² split hi + lo)."""
    square = u * u
    e = tl.exp(-0.5 * square)
    if PREC == DOUBLE:
        e = e - e * (0.5 * tl.fma(u, u, -square))  # e·exp(−lo) ≈ e·(1 − lo)
    return e


@triton.jit
def _clamped_abs(x):
    u = tl.abs(x)
    return tl.where(u > _U_MAX, _U_MAX, u)  # a comparison: nan stays nan


# ---------------------------------------------------------------- fp32: gelus._gelu_float32


@triton.jit
def _gauss_single(u):
    """exp(−u²/2) = (1 + w)·scale·2^-64 for fp32 0 ≤ u ≤ 15: (w, scale)."""
    square = u * u
    low = tl.fma(u, u, -square)  # u² = square + low exactly
    a = -0.5 * square
    # k = round(a·log₂e) by the rounding of an addition to 1.5·2^23 (its low bits are k): no
    # float-to-integer conversion, which the GPU issues at an eighth of the fma rate
    shifted = tl.fma(a, _LOG2E, _ROUNDER)
    k = shifted - _ROUNDER
    r = tl.fma(k, -_LN2_HI, a)  # exact: k·LN2_HI has at most 24 bits, and so has the difference
    r = r + tl.fma(k, -_LN2_LO, -0.5 * low)
    e = _horner_fma(r, _EXP_RATIO, _EXP_RATIO_N)
    # 2^(k + 64) is a normal number for k ≥ −163 (u ≤ 15); the last factor, 2^-64, rounds once
    bits = shifted.to(tl.int32, bitcast=True) + (127 + _SCALE_EXPONENT - _ROUNDER_BITS)
    return r * e, (bits << 23).to(tl.float32, bitcast=True)


@triton.jit
def _prepare_single(x):
    """(u clamped to 15, whether beyond, the near mask, t near, t far, 1/u)."""
    u = tl.abs(x)
    beyond = u > _U_MAX_SINGLE
    u = tl.where(beyond, _U_MAX_SINGLE, u)  # a comparison: nan stays nan
    near = u < _SPLIT
    # 1/u from the fast reciprocal square root, squared, and one Newton step (error ~2^-40 relative
    # before the final rounding); far cheaper than a division, and u = 0 (inf) is discarded
    inverse = tl.math.rsqrt(u)
    inverse = inverse * inverse
    inverse = tl.fma(inverse, tl.fma(-inverse, u, 1.0), inverse)
    return u, beyond, near, u - 1.0, tl.fma(inverse, _FAR_SCALE, _FAR_OFFSET), inverse


@triton.jit
def _tail_single(near, t_near, t_far, SLOPE: tl.constexpr, m_hi, m_lo, w, scale):
    """m·P(t)·(1 + w)·scale (times 2^-64: the exact result), P the near or far polynomial of the
    value's tail (of the slope's with ``SLOPE``). m = m_hi + m_lo is scaled first (exactly: scale
    is a power of two, 2^(k+64) ≥ 2^-99), so that every product below is a normal number even
    where m is subnormal (GEGLU's a·gelu(b) at a subnormal b): the only rounding into the
    subnormal range is the caller's last factor, 2^-64.

    Both polynomials are evaluated and one is kept: an fma with an immediate coefficient per
    step and region is cheaper than picking each coefficient (a select and a move per step)."""
    if SLOPE:
        NEAR: tl.constexpr = _NEAR_SLOPE
        NEAR_N: tl.constexpr = _NEAR_SLOPE_N
        NEAR_LOW: tl.constexpr = _NEAR_SLOPE_LOW
        FAR: tl.constexpr = _FAR_SLOPE
        FAR_N: tl.constexpr = _FAR_SLOPE_N
        FAR_LOW: tl.constexpr = _FAR_SLOPE_LOW
    else:
        NEAR: tl.constexpr = _NEAR_VALUE
        NEAR_N: tl.constexpr = _NEAR_VALUE_N
        NEAR_LOW: tl.constexpr = _NEAR_VALUE_LOW
        FAR: tl.constexpr = _FAR_VALUE
        FAR_N: tl.constexpr = _FAR_VALUE_N
        FAR_LOW: tl.constexpr = _FAR_VALUE_LOW
    p_near = tl.fma(t_near, NEAR[NEAR_N - 1], NEAR[NEAR_N - 2])
    for j in tl.static_range(NEAR_N - 3, 0, -1):
        p_near = tl.fma(p_near, t_near, NEAR[j])
    p_far = tl.fma(t_far, FAR[FAR_N - 1], FAR[FAR_N - 2])
    for j in tl.static_range(FAR_N - 3, 0, -1):
        p_far = tl.fma(p_far, t_far, FAR[j])
    rest = tl.where(near, tl.fma(p_near, t_near, NEAR_LOW), tl.fma(p_far, t_far, FAR_LOW))
    c0 = tl.where(near, NEAR[0], FAR[0])
    p_hi = c0 + rest  # |c0| ≥ |rest| on both regions: Fast2Sum
    p_lo = rest - (p_hi - c0)
    # m·P·(1 + w) = m_hi·p_hi + low + (a_hi + error + low)·w, with m_hi·p_hi = a_hi + error
    # exactly and low = m_hi·p_lo + m_lo·p_hi (m_lo·p_lo is below the tail's roundings). The exact
    # product enters once, through the last fma: written as a_hi + tail, a compiler that
    # contracts a·b + c would fuse the rounded product a_hi = m_hi·p_hi back into that addition
    # while the tail already holds its error (counted twice: 2.24 ulp at x = −0.327). Every step
    # here is an fma or an addition of fma results, so there is nothing left to contract.
    m_hi = m_hi * scale
    m_lo = m_lo * scale
    a_hi = m_hi * p_hi
    error = tl.fma(m_hi, p_hi, -a_hi)
    low = tl.fma(m_hi, p_lo, m_lo * p_hi)
    return tl.fma(m_hi, p_hi, tl.fma(a_hi, w, tl.fma(error + low, w, low)))


@triton.jit
def _gelu_exact_single(x, factor):
    """factor·x·Φ(x), rounded once where it is subnormal (factor: GEGLU's a; 1.0 folds away)."""
    u, beyond, near, t_near, t_far, _ = _prepare_single(x)
    w, scale = _gauss_single(u)
    m = tl.where(near, u, 1.0)
    q = _tail_single(near, t_near, t_far, False, m, 0.0, w, scale)
    q = tl.where(beyond, 0.0, q) * factor * _SCALE_DOWN
    # x ≥ 0: x·factor − q rounded once (an explicit fma: what a contracting compiler would make
    # of it anyway); ±0 − 0 keeps the sign of zero
    return tl.where(x >= 0, tl.fma(x, factor, -q), -q)


@triton.jit
def _gelu_exact_slope_single(x, factor):
    """factor·(Φ(x) + x·φ(x)), rounded once where it is subnormal."""
    u, beyond, near, t_near, t_far, _ = _prepare_single(x)
    w, scale = _gauss_single(u)
    # u − u₀ = d_hi + d_lo: Fast2Sum of u and −ROOT_HI (larger magnitude first), then − ROOT_LO
    d_hi = u - _ROOT_HI
    above = u >= _ROOT_HI
    z = d_hi - tl.where(above, u, -_ROOT_HI)
    d_lo = (tl.where(above, -_ROOT_HI, u) - z) - _ROOT_LO
    m_hi = tl.where(near, d_hi, -u)
    m_lo = tl.where(near, d_lo, 0.0)
    q = _tail_single(near, t_near, t_far, True, m_hi, m_lo, w, scale)
    q = tl.where(beyond, 0.0, q) * factor
    # factor − q·2^-64 rounded once (an explicit fma, whatever the compiler contracts); x ≤ 0: the
    # one rounding into the subnormal range
    return tl.where(x > 0, tl.fma(-q, _SCALE_DOWN, factor), q * _SCALE_DOWN)


@triton.jit
def _normal_cdf_pdf_single(z):
    """(Φ(z), φ(z)) in fp32: Q = K·e with K = P (near) or P/u (far), φ = e/√(2π)."""
    u, beyond, near, t_near, t_far, inverse = _prepare_single(z)
    w, scale = _gauss_single(u)
    m = tl.where(near, 1.0, inverse)
    q = _tail_single(near, t_near, t_far, False, m, 0.0, w, scale)
    q = tl.where(beyond, 0.0, q * _SCALE_DOWN)
    pdf = tl.fma(_INV_SQRT_2PI, w, _INV_SQRT_2PI) * scale * _SCALE_DOWN
    pdf = tl.where(beyond, 0.0, pdf)
    return tl.where(z > 0, 1.0 - q, q), pdf


@triton.jit
def normal_cdf_pdf(z, PREC: tl.constexpr):
    """(Φ(z), φ(z)) without cancellation, for any z (±inf give the limits; nan gives nan)."""
    if PREC == SINGLE:
        cdf, pdf = _normal_cdf_pdf_single(z)
    else:
        u = _clamped_abs(z)
        # At the clamp (|z| ≥ 40) the tail and the density are 0 in the output dtype; make them
        # exactly 0, so that x·Φ(z) and x·φ(z) are 0 and not inf·tiny = inf for x = −inf.
        e = tl.where(u < tl.abs(z), 0.0, _gauss(u, PREC))
        q = _scaled_tail(u, PREC) * e
        cdf = tl.where(z > 0, 1.0 - q, q)
        pdf = e * _INV_SQRT_2PI
    return cdf, pdf


@triton.jit
def _gelu_exact(x, PREC: tl.constexpr):
    cdf, _ = normal_cdf_pdf(x, PREC)
    x = tl.where(x < -_U_MAX, -_U_MAX, x)  # −inf·0 would be nan; −40·Φ(−40) is −0
    return x * cdf


@triton.jit
def _gelu_exact_slope(x, PREC: tl.constexpr):
    u = _clamped_abs(x)
    e = _gauss(u, PREC)
    gap = e * (_scaled_tail(u, PREC) - _INV_SQRT_2PI * u)  # Q(u) − u·φ(u)
    slope = tl.where(x > 0, 1.0 - gap, gap)
    if PREC == DOUBLE:
        d = (x - ROOT_HI_64) - ROOT_LO_64
        root = d * _horner(d, ROOT_MONOMIAL_64, _ROOT_64_N)
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
    return gelu_form_times(x, 1.0, FORM, PREC)


@triton.jit
def gelu_form_times(x, factor, FORM: tl.constexpr, PREC: tl.constexpr):
    """factor·GELU(x) in the given form; the fp32 exact form rounds it once (GEGLU's a·gelu(b)
    stays within 2.5 ulp also where it is subnormal)."""
    if FORM == EXACT and PREC == SINGLE:
        y = _gelu_exact_single(x, factor)
    elif FORM == EXACT:
        y = factor * _gelu_exact(x, PREC)
    elif FORM == TANH:
        y = factor * _gelu_tanh(x)
    else:
        y = factor * swish_value(x, SIGMOID_SCALE)
    return y


@triton.jit
def gelu_form_slope(x, FORM: tl.constexpr, PREC: tl.constexpr):
    """The derivative of :func:`gelu_form`: finite everywhere, 1 at +inf and 0 at −inf."""
    return gelu_form_slope_times(x, 1.0, FORM, PREC)


@triton.jit
def gelu_form_slope_times(x, factor, FORM: tl.constexpr, PREC: tl.constexpr):
    """factor·GELU'(x) in the given form, rounded once by the fp32 exact form."""
    if FORM == EXACT and PREC == SINGLE:
        g = _gelu_exact_slope_single(x, factor)
    elif FORM == EXACT:
        g = factor * _gelu_exact_slope(x, PREC)
    elif FORM == TANH:
        g = factor * _gelu_tanh_slope(x)
    else:
        g = factor * swish_slope(x, SIGMOID_SCALE)
    return g
