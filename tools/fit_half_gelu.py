"""Fit the polynomials of the half-type exact GELU (gelus._gelu_half) and print them.

    python3 tools/fit_half_gelu.py

With v = 1/(u + C), u = |x| ≤ U, the scaled normal tail K(u) = Φ(−u)·e^{u²/2} = ½·erfcx(u/√2)
and M(u) = K(u) − u/√(2π) = (u − u₀)·R(u) are fitted as

    K = v·P(v),   R = S(v),   P and S of degree DEGREE in v ∈ [1/(C + U), 1/C]

for the least maximum relative error (Lawson's iteration of weighted least squares on Chebyshev
nodes), then scaled by 2^-64 (the composition multiplies by exp(−u²/2)·2^64, a normal number
for u ≤ U, so that the one rounding into the subnormal range comes last) and rounded to float32.
Printed: the constants, and the fits' relative errors (about 2e-5 and 1e-6: below a quarter of
fp16's half ulp, 2^-13; tests/library/test_gelu_half.py checks every bf16 and fp16 input).
"""

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx

C = 3.0  # v = 1/(u + C): K and R are smooth in v on [1/(C + U), 1/C]
U = 16.0  # beyond it both tails underflow bf16's least subnormal (2^-133) by far
DEGREE = 5
SCALE = 2.0**-64
INV_SQRT_2PI = 1 / np.sqrt(2 * np.pi)


def scaled_tail(u):
    return 0.5 * erfcx(u / np.sqrt(2))


def root() -> float:
    """u₀ > 0 with K(u₀) = u₀/√(2π): the slope's root is x = −u₀."""
    return brentq(lambda u: scaled_tail(u) - INV_SQRT_2PI * u, 0.5, 1.0, xtol=1e-18)


def fit(f, degree: int, nodes: int = 3000, steps: int = 30):
    """Monomial coefficients in v (lowest first) of the near-minimax relative fit of f(u, v)."""
    t = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    v = (t + 1) / 2 * (1 / C - 1 / (C + U)) + 1 / (C + U)
    u = 1 / v - C
    y = f(u, v)
    weights = np.ones(nodes) / nodes
    for _ in range(steps):
        c = np.polynomial.polynomial.polyfit(v, y, degree, w=np.sqrt(weights) / np.abs(y))
        error = np.abs(np.polynomial.polynomial.polyval(v, c) / y - 1)
        weights = weights * error / np.sum(weights * error)
    return c, float(error.max())


def main() -> None:
    u0 = root()
    value, value_error = fit(lambda u, v: scaled_tail(u) / v, DEGREE)
    slope, slope_error = fit(lambda u, v: (scaled_tail(u) - INV_SQRT_2PI * u) / (u - u0), DEGREE)
    hi = float(np.float32(u0))
    print(f"ROOT_HI = {hi!r}\nROOT_LO = {float(np.float32(u0 - hi))!r}")
    for name, c, error in (("VALUE", value, value_error), ("SLOPE", slope, slope_error)):
        print(f"# relative error {error:.2e}\n{name} = (")
        for coefficient in c:
            print(f"    {float(np.float32(coefficient * SCALE))!r},")
        print(")")


if __name__ == "__main__":
    main()
