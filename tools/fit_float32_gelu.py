"""Fit the constants of the float32 exact GELU (src/gelus/_gelu_float32.py); run:

    python3 tools/fit_float32_gelu.py        (about 3 minutes: mpmath, 50 digits)

The algorithm (docs/CUDA.md, "Exact GELU in float32") needs, with u = |x|, K(u) = Q(u)·e^{u²/2}
the scaled normal tail (Q(u) = Φ(−u)) and M(u) = K(u) − u/√(2π) (the slope at −u over e^{−u²/2}):

- near, u < 2, in t = u − 1 ∈ [−1, 1]:   K(u)              and  R(u) = M(u)/(u − u₀)
- far, 2 ≤ u ≤ 15, in t = A·(1/u) + B:    F(u) = u·K(u)     and  H(u) = −M(u)/u = 1/√(2π) − K(u)/u
- e^r − 1 = r·E(r) for |r| ≤ ½·ln 2 (plus the reduction's slack)

u₀ = 0.7517915… is the root of M (the slope's zero at x = −u₀). Each polynomial is a least-squares
fit of relative error on Chebyshev nodes, in monomials of t (Horner), with the coefficients
rounded to float32 from the highest down and the lower ones refitted after each rounding, so
that the float32 coefficients are the best for what the kernels hold. The constant term is
split into float32 hi + lo (the kernels add lo before hi). The relative error printed for each
is that of the float32 coefficients evaluated exactly: it is the fit's share of the kernels'
error (the rest is rounding; tests/library/test_triton_kernels.py measures the whole).
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 50
SPLIT = 2  # near: u < SPLIT (t = u − 1); far: SPLIT ≤ u ≤ U_MAX
U_MAX = 15  # beyond, the value and the slope at −u are below half the least fp32 subnormal
# Degrees: the lowest that keep each fit's relative error near 1e-8 or below (the kernels evaluate
# both regions' polynomials, so each degree is paid by every element)
DEGREES = {"NEAR_VALUE": 12, "FAR_VALUE": 10, "NEAR_SLOPE": 10, "FAR_SLOPE": 10}
EXP_DEGREE = 5
EXP_RANGE = mp.mpf("0.3566")  # ½·ln 2 plus the slack of the reduction's rounded k
C = 1 / mp.sqrt(2 * mp.pi)
# far map: w = 1/u ∈ [1/U_MAX, 1/SPLIT] → t = FAR_SCALE·w + FAR_OFFSET ∈ [−1, 1]
FAR_SCALE = float(np.float32(2 / (mp.mpf(1) / SPLIT - mp.mpf(1) / U_MAX)))
FAR_OFFSET = float(
    np.float32(-(mp.mpf(1) / SPLIT + mp.mpf(1) / U_MAX) / (mp.mpf(1) / SPLIT - mp.mpf(1) / U_MAX))
)


def tail_k(u):
    return mp.erfc(u / mp.sqrt(2)) / 2 * mp.exp(u * u / 2)


ROOT = -mp.findroot(lambda x: mp.ncdf(x) + x * mp.npdf(x), -0.75)  # u₀ > 0


def near_u(t):
    return t + 1


def far_u(t):
    return 1 / ((t - FAR_OFFSET) / FAR_SCALE)


def near_value(t):  # K(u)
    return tail_k(near_u(t))


def near_slope(t):  # R(u) = M(u)/(u − u₀), its limit M'(u₀) at the root
    u = near_u(t)
    if abs(u - ROOT) < mp.mpf(10) ** -30:
        return mp.diff(lambda v: tail_k(v) - C * v, ROOT)
    return (tail_k(u) - C * u) / (u - ROOT)


def far_value(t):  # F(u) = u·K(u)
    u = far_u(t)
    return u * tail_k(u)


def far_slope(t):  # H(u) = 1/√(2π) − K(u)/u
    u = far_u(t)
    return C - tail_k(u) / u


def exp_ratio(t):  # E(r) = (e^r − 1)/r on r = t·EXP_RANGE
    r = t * EXP_RANGE
    return mp.expm1(r) / r if r else mp.mpf(1)


def fit(f, degree, nodes=None):
    """Float32 monomial coefficients of f on t ∈ [−1, 1] (lowest first) and the constant's lo."""
    n = nodes or 6 * degree
    ts = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)] + [mp.mpf(-1), mp.mpf(1)]
    ys = [f(t) for t in ts]
    fixed = {}
    low = 0.0
    for j in range(degree, -1, -1):
        a = mp.matrix(len(ts), j + 1)
        rhs = mp.matrix(len(ts), 1)
        for i, (t, y) in enumerate(zip(ts, ys, strict=True)):
            rhs[i] = (y - mp.fsum(c * t**q for q, c in fixed.items())) / y
            for q in range(j + 1):
                a[i, q] = t**q / y
        solution = mp.qr_solve(a, rhs)[0]
        fixed[j] = mp.mpf(float(np.float32(float(solution[j]))))
        if j == 0:
            low = float(np.float32(float(solution[0] - fixed[0])))
    return [float(fixed[j]) for j in range(degree + 1)], low


def worst(f, coefficients, low, points=4001):
    error = 0
    for i in range(points):
        t = mp.mpf(2 * i) / (points - 1) - 1
        p = mp.fsum(c * t**q for q, c in enumerate(coefficients)) + low
        error = max(error, abs(p / f(t) - 1))
    return error


def main() -> None:
    print(f"ROOT = {mp.nstr(ROOT, 25)}")
    hi = float(np.float32(float(ROOT)))
    print(f"ROOT_HI = {hi!r}  # float32(u₀)")
    print(f"ROOT_LO = {float(np.float32(float(ROOT - hi)))!r}  # float32(u₀ − ROOT_HI)")
    print(f"FAR_SCALE = {FAR_SCALE!r}")
    print(f"FAR_OFFSET = {FAR_OFFSET!r}")
    for name, f in (("NEAR_VALUE", near_value), ("FAR_VALUE", far_value),
                    ("NEAR_SLOPE", near_slope), ("FAR_SLOPE", far_slope)):  # fmt: skip
        coefficients, low = fit(f, DEGREES[name])
        print(f"{name} = ({', '.join(repr(c) for c in coefficients)})")
        print(f"{name}_LOW = {low!r}")
        print(f"# {name}: relative error {mp.nstr(worst(f, coefficients, low), 3)}", flush=True)
    coefficients, _ = fit(exp_ratio, EXP_DEGREE)
    scaled = [float(np.float32(c / EXP_RANGE**q)) for q, c in enumerate(coefficients)]
    print(f"EXP_RATIO = ({', '.join(repr(c) for c in scaled)})  # in powers of r")


if __name__ == "__main__":
    main()
