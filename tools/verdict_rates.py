"""Measure the error rates and power of the report's verdicts by simulation (docs/REPORT.md,
"What a verdict can promise").

    python tools/verdict_rates.py                 # 200,000 draws per cell, seeded; ~1 min
    python tools/verdict_rates.py --draws 20000   # quicker, wider Monte-Carlo error

Prints, with each rate's Monte-Carlo standard error:
  - how often the paired t-test (α = 0.05) calls a null difference real, alone and as the
    family-wise rate of 5 Holm-adjusted null comparisons, for Gaussian, centred exponential
    (Exp(1) − 1) and centred lognormal (exp(Z) − e^{1/2}) differences, at n = 3, 5, 10; and the
    exact sign-flip test's rate beside it;
  - the power of a Holm verdict for one real Gaussian effect among 5 comparisons, exact
    (robust.holm_power) and simulated, with the lone test's.

What a mark built on dropping one seed can tell: tools/simulate_marks.py.
"""

import argparse
import math

import numpy as np

from gelus.report.robust import holm_adjust, holm_power, paired_t_p, sign_flip_p
from gelus.report.stats import power

ALPHA = 0.05
M = 5  # comparisons in a family (one experiment's table against one reference)
SHAPES = {
    "gaussian": lambda rng, size: rng.normal(size=size),
    "exponential": lambda rng, size: rng.exponential(size=size) - 1.0,
    "lognormal": lambda rng, size: np.exp(rng.normal(size=size)) - math.exp(0.5),
}
CHUNK = 20_000


def _rate(hits: int, total: int) -> str:
    p = hits / total
    return f"{100 * p:5.1f} % ± {100 * math.sqrt(p * (1 - p) / total):.2f}"


def _sign_flip_rejects(d: np.ndarray) -> np.ndarray:
    """Exact sign-flip p < α for each row of d (n ≤ 10 here), by one matrix product."""
    n = d.shape[-1]
    signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    sums = np.abs(d @ signs.T)  # (..., 2^n)
    observed = np.abs(d.sum(axis=-1, keepdims=True))
    p = np.mean(sums >= observed - 1e-9 * np.abs(d).sum(axis=-1, keepdims=True), axis=-1)
    return p < ALPHA


def null_rates(draws: int, seed: int) -> None:
    print(f"Null differences (mean 0), α = {ALPHA}, {draws:,} families of {M} per cell")
    print("shape        n   t alone          t family (Holm)  sign-flip alone")
    for shape, draw in SHAPES.items():
        for n in (3, 5, 10):
            rng = np.random.default_rng([seed, n, len(shape)])
            alone = family = flips = 0
            for start in range(0, draws, CHUNK):
                d = draw(rng, (min(CHUNK, draws - start), M, n))
                p = paired_t_p(d)
                alone += int((p[:, 0] < ALPHA).sum())
                family += int((holm_adjust(p) < ALPHA).any(axis=-1).sum())
                flips += int(_sign_flip_rejects(d[:, 0]).sum())
            print(f"{shape:12s} {n:2d}  {_rate(alone, draws)}  {_rate(family, draws)}  "
                  f"{_rate(flips, draws)}")  # fmt: skip
    print(f"sign-flip floor 2/2^n: n=3 {2 / 8}, n=5 {sign_flip_p([1.0] * 5)}, n=6 {2 / 64:.4f}")


def holm_powers(draws: int, seed: int) -> None:
    print(f"\nPower, one real Gaussian effect among {M} Holm comparisons ({draws:,} simulated)")
    print("n   effect  lone    Holm exact  Holm simulated")
    for n, effect in ((5, 1.0), (5, 1.5), (10, 1.0), (10, 1.5), (20, 1.0)):
        rng = np.random.default_rng([seed, n, int(10 * effect)])
        hits = 0
        for start in range(0, draws, CHUNK):
            d = rng.normal(size=(min(CHUNK, draws - start), M, n))
            d[:, 0] += effect
            p = holm_adjust(paired_t_p(d))
            hits += int(((p[:, 0] < ALPHA) & (d[:, 0].mean(axis=-1) > 0)).sum())
        exact = holm_power(n, effect, M)
        print(f"{n:2d}  {effect:4.1f}    {power(n, effect, ALPHA):.3f}   {exact:.3f}       "
              f"{_rate(hits, draws)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    null_rates(args.draws, args.seed)
    holm_powers(args.draws, args.seed)


if __name__ == "__main__":
    main()
