"""Fit the polynomial coefficients of src/gelus/_triton/_coefficients.py (run: python3 tools/fit_triton_coefficients.py):
the half and float64 kernels' (the fp32 kernels' come from tools/fit_float32_gelu.py).

Two functions of the exact GELU are approximated, by Chebyshev interpolation of mpmath values
(60 digits), which is within a small factor of the best (minimax) polynomial:

- the scaled normal tail K(u) = Q(u)·exp(u²/2), Q(u) = Φ(−u) = ½·erfc(u/√2), u ∈ [0, 40]
  (Q underflows float64 beyond 40). K falls from ½ to ~1/(√(2π)·u); in s = 4/(4 + u) ∈ [1/11, 1]
  K/s is smooth and bounded, so K = s·P(t) with t linear in s mapping [1/11, 1] to [−1, 1].
- the GELU slope near its root x₀ = −0.7517915…: Φ(x) + x·φ(x) = d·R(d), d = x − x₀, |d| ≤ 1/8.

It prints the Chebyshev coefficients of P (float64 evaluation by Clenshaw) and the monomial
coefficients of P and R (Horner), and the largest relative error of each on a dense grid.
"""

import mpmath as mp

mp.mp.dps = 60
S_SCALE = 4  # s = S_SCALE / (S_SCALE + u)
U_MAX = 40
ROOT_HALF_WIDTH = mp.mpf(1) / 8


def tail_k(u):
    return mp.erfc(u / mp.sqrt(2)) / 2 * mp.exp(u * u / 2)


def slope(x):
    return mp.ncdf(x) + x * mp.npdf(x)


def chebyshev(f, degree):
    """Coefficients c_j of the interpolant of f on [−1, 1] at the Chebyshev nodes."""
    n = degree + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [f(t) for t in nodes]
    c = [2 * mp.fsum(v * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k, v in enumerate(values)) / n
         for j in range(n)]  # fmt: skip
    c[0] /= 2
    return c


def to_monomial(c):
    """Chebyshev coefficients -> monomial coefficients (lowest first), exactly in mpmath."""
    t_prev, t_cur = [mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]
    out = [mp.mpf(0)] * len(c)
    for j, cj in enumerate(c):
        basis = t_prev if j == 0 else t_cur if j == 1 else None
        if j >= 2:
            nxt = [mp.mpf(0)] + [2 * a for a in t_cur]
            for i, a in enumerate(t_prev):
                nxt[i] -= a
            t_prev, t_cur = t_cur, nxt
            basis = t_cur
        for i, a in enumerate(basis):
            out[i] += cj * a
    return out


S_MIN = mp.mpf(S_SCALE) / (S_SCALE + U_MAX)
# t = T_SLOPE·s + T_OFFSET maps s ∈ [S_MIN, 1] to t ∈ [−1, 1]
T_SLOPE = 2 / (1 - S_MIN)
T_OFFSET = -(1 + S_MIN) / (1 - S_MIN)


def k_over_s(t):
    s = (t - T_OFFSET) / T_SLOPE
    return tail_k(S_SCALE / s - S_SCALE) / s


def root_ratio(t):
    d = t * ROOT_HALF_WIDTH
    return slope(ROOT + d) / d if d else mp.diff(slope, ROOT)


ROOT = mp.findroot(slope, -0.75)


def horner(coefficients, t):
    p = mp.mpf(0)
    for a in reversed(coefficients):
        p = p * t + a
    return p


def main() -> None:
    print(f"ROOT = {mp.nstr(ROOT, 25)}")
    print(f"T_SLOPE = {float(T_SLOPE)!r}, T_OFFSET = {float(T_OFFSET)!r}")
    for name, degree in (("TAIL_MONOMIAL_HALF", 9), ("TAIL_CHEBYSHEV", 24)):
        c = chebyshev(k_over_s, degree)
        coefficients = to_monomial(c) if "MONOMIAL" in name else c
        print(f"{name} = ({', '.join(repr(float(a)) for a in coefficients)})")
        worst = 0
        for i in range(2001):
            u = mp.mpf(U_MAX) * i / 2000
            s = S_SCALE / (S_SCALE + u)
            t = T_SLOPE * s + T_OFFSET
            rounded = [float(a) for a in coefficients]  # as the kernels hold them
            if "MONOMIAL" in name:
                p = horner(rounded, t)
            else:
                p = mp.fsum(a * mp.chebyt(j, t) for j, a in enumerate(rounded))
            worst = max(worst, abs(s * p / tail_k(u) - 1))
        print(f"# {name}: max relative error {mp.nstr(worst, 3)}")
    for name, degree in (("ROOT_MONOMIAL_32", 5), ("ROOT_MONOMIAL_64", 13)):
        m = [
            a / ROOT_HALF_WIDTH**i for i, a in enumerate(to_monomial(chebyshev(root_ratio, degree)))
        ]
        print(f"{name} = ({', '.join(repr(float(a)) for a in m)})")
        worst = 0
        for i in range(-500, 501):
            d = ROOT_HALF_WIDTH * i / 500
            if d:
                worst = max(worst, abs(d * horner([float(a) for a in m], d) / slope(ROOT + d) - 1))
        print(f"# {name}: max relative error {mp.nstr(worst, 3)}")


if __name__ == "__main__":
    main()
