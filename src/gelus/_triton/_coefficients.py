"""Polynomial coefficients of the half and float64 exact-GELU kernels, as printed by
tools/fit_triton_coefficients.py (the fp32 kernels' constants are gelus._gelu_float32's).

Chebyshev interpolation of 60-digit mpmath values (see that script for the method). The test suite
checks the polynomials they define against mpmath, so a mistyped digit fails a test.
"""

import triton.language as tl

__all__ = [
    "ROOT_HI_32",
    "ROOT_HI_64",
    "ROOT_LO_32",
    "ROOT_LO_64",
    "ROOT_MONOMIAL_32",
    "ROOT_MONOMIAL_64",
    "TAIL_CHEBYSHEV",
    "TAIL_MONOMIAL_HALF",
    "T_OFFSET",
    "T_SLOPE",
]

# K(u) = Q(u)·exp(u²/2) = s·P(t), s = 4/(4 + u), t = T_SLOPE·s + T_OFFSET ∈ [−1, 1] for u ∈ [0, 40].
T_SLOPE = tl.constexpr(2.2)  # 2 / (1 − 1/11)
T_OFFSET = tl.constexpr(-1.2)  # −(1 + 1/11) / (1 − 1/11)
# P in powers of t, lowest first, for fp16/bf16 inputs (fp32 arithmetic): degree 9, relative error 2.3e-8, below fp32's own
# rounding and 1/20000 of a half type's ulp.
TAIL_MONOMIAL_HALF = tl.constexpr(
    (
        0.20347305801048163,
        0.1552485677571116,
        0.09112724771410066,
        0.039266027850766265,
        0.010815408770841277,
        0.0008314726537088016,
        -0.00062559839911357,
        -0.00018345304936453392,
        3.0231549264837666e-05,
        1.7044776818014304e-05,
    )
)

# P in Chebyshev polynomials T_j(t): degree 24, relative error 1.4e-16 (float64 inputs)
TAIL_CHEBYSHEV = tl.constexpr(
    (
        0.25290522709612706,
        0.18512582239347325,
        0.05069130529567597,
        0.010021739452576226,
        0.001241239548229789,
        3.429878388069156e-05,
        -1.7660484480749078e-05,
        -2.2671711224465563e-06,
        2.363239623917853e-07,
        6.476788374516506e-08,
        -4.37779692802775e-09,
        -1.8132757002034755e-09,
        1.3998376024327942e-10,
        5.233886596582943e-11,
        -6.337502402139125e-12,
        -1.441895695015673e-12,
        3.067405150489061e-13,
        2.9981871907063924e-14,
        -1.3868007658190551e-14,
        1.2563451161084202e-16,
        5.349823143030959e-16,
        -6.425535329606544e-17,
        -1.4613598202528354e-17,
        4.5988393966061294e-18,
        -1.5660598520171257e-20,
    )
)

# The root x₀ of the slope Φ(x) + x·φ(x), split hi + lo so that x − x₀ is formed without rounding.
ROOT_HI_64 = tl.constexpr(-0.7517915246935645)
ROOT_LO_64 = tl.constexpr(1.4956759177009883e-17)
ROOT_HI_32 = tl.constexpr(-0.7517915368080139)
ROOT_LO_32 = tl.constexpr(1.211444988769017e-08)
# slope = d·R(d), d = x − x₀, |d| ≤ 1/8, R in powers of d: degree 5, relative error 1.5e-9
ROOT_MONOMIAL_32 = tl.constexpr(
    (
        0.4314939928530883,
        0.38828498272409834,
        -0.018200297462906346,
        -0.11400792632041727,
        -0.014665440278177849,
        0.019369267360844426,
    )
)

# the same, degree 13, relative error 6.4e-17 (float64 inputs)
ROOT_MONOMIAL_64 = tl.constexpr(
    (
        0.4314939923140469,
        0.388284982990552,
        -0.018199676398671087,
        -0.1140082332972217,
        -0.014771522148244237,
        0.019421679838189064,
        0.004539228379086505,
        -0.0022395380680733826,
        -0.000744826831558354,
        0.00018633974621139472,
        8.615881040974555e-05,
        -1.121437823128935e-05,
        -7.717338608475795e-06,
        4.327547908244247e-07,
    )
)
