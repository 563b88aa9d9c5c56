"""Does a mark built on dropping one seed tell a real effect from a null one? By simulation at the
report's design (docs/REPORT.md, "One seed left out").

    python tools/simulate_marks.py                  # 50,000 families per cell, seeded; 1–2 min
    python tools/simulate_marks.py --draws 5000     # quicker, wider Monte-Carlo error

Families of m comparisons (m = 3, 5, 7) share n = 5 paired seeds; each comparison gets the paired
t-test and Holm over its family at α = 0.05 (gelus.report.robust.paired_t_p, holm_adjust). Noise
per difference, scaled to SD 1: Gaussian, Student t with 3 degrees of freedom (heavy tails),
centred exponential Exp(1) − 1 and centred lognormal exp(Z) − e^½ (skewed: an occasional bad
seed). A null cell has every comparison at mean 0 and counts all its significant verdicts (false
positives); an effect cell adds δ SD to one comparison and counts that one's significant verdicts
of the right sign (true positives). Among those verdicts, each candidate mark's rate:

  - one seed carries it: exactly one seed's drop (from every comparison, then the same t-test and
    Holm) leaves it not significant its way: the retired "fragile" mark;
  - some drop loses it (≥ 1 of the n), most drops lose it (≥ 3), every drop loses it (n);
  - the leave-one-seed-out range crosses 0 (robust.loso_range);
  - for scale, a mark that drops nothing: Holm p ≥ α/5.

A mark separates when its rate among null false positives and among true positives differ by at
least 2×, the same way, in every cell. Printed: each cell's rates with their Monte-Carlo standard
errors, then per mark and effect the range over shapes and m of null rate / real rate.
"""

import argparse
import math
from collections.abc import Callable

import numpy as np

from gelus.report.robust import holm_adjust, loso_range, paired_t_p, seed_drop_losses

ALPHA = 0.05
N = 5  # paired seeds, as the report's experiments run
FAMILIES = (3, 5, 7)  # comparisons in one Holm family
EFFECTS = (1.0, 1.5, 2.0, 3.0)  # one real effect, in SDs of the noise
SHAPES: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = {
    "Gaussian": lambda rng, size: rng.normal(size=size),
    "t(3)": lambda rng, size: rng.standard_t(3, size=size) / math.sqrt(3.0),
    "exponential": lambda rng, size: rng.exponential(size=size) - 1.0,
    "lognormal": lambda rng, size: (
        (np.exp(rng.normal(size=size)) - math.exp(0.5)) / math.sqrt((math.e - 1.0) * math.e)
    ),
}
MARKS = (
    "one seed carries it",
    "some drop loses it",
    "most drops lose it",
    "every drop loses it",
    "range crosses 0",
    "Holm p ≥ α/5",
)
CHUNK = 20_000


def marks(d: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(significant, {mark: fired}) of shape (..., m) for families d of shape (..., m, n)."""
    n = d.shape[-1]
    significant, losses = seed_drop_losses(d, alpha)
    low, high = loso_range(d)
    fired = dict(
        zip(
            MARKS,
            (
                losses == 1,
                losses >= 1,
                losses >= (n + 1) // 2,
                losses == n,
                (low <= 0) & (high >= 0),
                holm_adjust(paired_t_p(d)) >= alpha / 5,
            ),
            strict=True,
        )
    )
    return significant, fired


def cell(shape: str, m: int, effect: float | None, draws: int, seed: int) -> dict[str, int]:
    """One cell's counts: {"verdicts": significant verdicts counted, mark: how many it marks}.
    ``effect`` None: every comparison null, all significant verdicts counted; else ``effect`` SD
    added to comparison 0, whose significant verdicts with a positive mean are counted."""
    rng = np.random.default_rng([seed, m, list(SHAPES).index(shape), round(10 * (effect or 0.0))])
    counts = dict.fromkeys(("verdicts", *MARKS), 0)
    for start in range(0, draws, CHUNK):
        d = SHAPES[shape](rng, (min(CHUNK, draws - start), m, N))
        if effect is not None:
            d[:, 0] += effect
        significant, fired = marks(d)
        if effect is not None:
            significant = significant[:, 0] & (d[:, 0].mean(axis=-1) > 0)
            fired = {name: f[:, 0] for name, f in fired.items()}
        counts["verdicts"] += int(significant.sum())
        for name, f in fired.items():
            counts[name] += int((f & significant).sum())
    return counts


def simulate(
    draws: int,
    seed: int,
    shapes=tuple(SHAPES),
    families=FAMILIES,
    effects=(None, *EFFECTS),
) -> list[dict]:
    """Every cell's counts as rows {shape, m, effect (None: null), verdicts, mark: count}."""
    return [
        {"shape": shape, "m": m, "effect": effect, **cell(shape, m, effect, draws, seed)}
        for shape in shapes
        for m in families
        for effect in effects
    ]


def ratios(rows: list[dict]) -> dict[tuple[str, float], tuple[float, float]]:
    """{(mark, effect): (lowest, highest) over shapes and m of rate among null false positives /
    rate among true positives of that effect}; inf where a mark fires on nulls only, NaN where it
    fires on neither in some cell."""
    rate = {
        (r["shape"], r["m"], r["effect"], name): r[name] / r["verdicts"]
        for r in rows
        if r["verdicts"]
        for name in MARKS
    }
    found: dict[tuple[str, float], list[float]] = {}
    for (shape, m, effect, name), real in rate.items():
        null = rate.get((shape, m, None, name))
        if effect is None or null is None:
            continue
        value = null / real if real else (math.inf if null else math.nan)
        found.setdefault((name, effect), []).append(value)
    return {
        key: (min(v), max(v)) if not any(map(math.isnan, v)) else (math.nan, math.nan)
        for key, v in found.items()
    }


def separates(low: float, high: float, factor: float = 2.0) -> bool:
    """Whether every cell's null/real ratio is ≥ ``factor``, or every one ≤ 1/``factor``."""
    return low >= factor or high <= 1.0 / factor


def _rate(hits: int, total: int) -> str:
    if not total:
        return "     —      "
    p = hits / total
    return f"{100 * p:5.1f} ± {100 * math.sqrt(p * (1 - p) / total):3.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=50_000, help="families per cell")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rows = simulate(args.draws, args.seed)
    print(f"n = {N} seeds, α = {ALPHA}, {args.draws:,} families per cell; % of significant "
          "verdicts a mark fires on (± Monte-Carlo SE)")  # fmt: skip
    print(f"{'shape':12s} {'m':>2s} {'effect':>6s} {'verdicts':>8s}  " + "  ".join(
        f"{name[:12]:>12s}" for name in MARKS))  # fmt: skip
    for r in rows:
        effect = "null" if r["effect"] is None else f"{r['effect']:g} SD"
        cells = "  ".join(_rate(r[name], r["verdicts"]) for name in MARKS)
        print(f"{r['shape']:12s} {r['m']:2d} {effect:>6s} {r['verdicts']:8,d}  {cells}")
    print("\nnull rate / real rate, lowest – highest over shapes and m (separates: ≥ 2× one way)")
    for (name, effect), (low, high) in sorted(ratios(rows).items()):
        if math.isnan(low):
            print(f"{name:22s} {effect:4g} SD  never fires")
            continue
        verdict = "separates" if separates(low, high) else "does not separate"
        print(f"{name:22s} {effect:4g} SD  {low:5.2f} – {high:5.2f}  {verdict}")


if __name__ == "__main__":
    main()
