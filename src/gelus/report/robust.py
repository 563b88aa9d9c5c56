"""Verdicts that hold up: the power of a Holm-adjusted verdict, an exact sign-flip p, the
leave-one-seed-out range of an effect, and a significant difference that is inside its margin.

Pure functions of values (and of :class:`~gelus.report.stats.Comparison` results); the one random
route (:func:`sign_flip_p` beyond 20 pairs) takes an explicit ``numpy.random.Generator``.
"""

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gelus.report.stats import (  # holm_power, pairs_for_holm_power: re-exported (__all__)
    ALPHA,
    EQUIVALENCE_MARGINS,
    HEADLINE,
    Aggregate,
    Comparison,
    holm_power,
    pairs_for_holm_power,
)

__all__ = [
    "INSIDE_MARGIN",
    "NULL_RATES",
    "NULL_RATES_ALPHA",
    "holm_adjust",
    "holm_power",
    "inside_margin",
    "loso_means",
    "loso_range",
    "paired_t_p",
    "pairs_for_holm_power",
    "robust_marks",
    "seed_drop_losses",
    "sign_flip_p",
    "skewed_rates",
]

# What a verdict can promise, measured by tools/verdict_rates.py (its default seed 2026, 200,000
# families of 5 comparisons per cell, Monte-Carlo standard errors ≤ 0.11 pp) at α = 0.05, quoted by
# docs/REPORT.md ("What a verdict can promise") and every report's "how to read": the share of
# null comparisons (mean difference 0) that the paired t-test calls real, per comparison and
# family-wise over 5 Holm-adjusted ones, at n = 3, 5 and 10 pairs. The Gaussian rows hold the
# test's assumption (roughly symmetric differences); the skewed ones are an activation with an
# occasional bad seed: Exp(1) − 1 and exp(Z) − e^½.
NULL_RATES_ALPHA = 0.05
NULL_RATES = {  # shape -> n -> (per comparison, family-wise over 5)
    "Gaussian": {3: (0.051, 0.049), 5: (0.049, 0.049), 10: (0.050, 0.049)},
    "centred exponential": {3: (0.115, 0.170), 5: (0.118, 0.229), 10: (0.099, 0.209)},
    "centred lognormal": {3: (0.162, 0.240), 5: (0.179, 0.372), 10: (0.163, 0.379)},
}


def skewed_rates(shape: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """((lowest, highest) per comparison, (lowest, highest) family-wise over 5) of
    :data:`NULL_RATES` for one shape, over its n."""
    per, family = zip(*NULL_RATES[shape].values(), strict=True)
    return (min(per), max(per)), (min(family), max(family))


# --------------------------------------------------------------------------- sign-flip test
def _flip_sums(d: np.ndarray) -> np.ndarray:
    """Σ s_i·d_i over all 2^len(d) sign patterns s (s_i = ±1)."""
    signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
    return signs @ d


def sign_flip_p(
    differences: Sequence[float],
    *,
    max_exact: int = 20,
    resamples: int = 100_000,
    rng: np.random.Generator | None = None,
) -> float:
    """Two-sided paired permutation (sign-flip) p of mean(d) = 0: under a null symmetric about
    0 every pattern of signs is as likely, so

        p = #{s ∈ {±1}ⁿ : |Σ s_i d_i| ≥ |Σ d_i|} / 2ⁿ,

    exact for n ≤ ``max_exact`` (the sums of the two halves' patterns, matched by sorting); beyond,
    ``resamples`` random patterns from ``rng`` (required there), p = (1 + hits)/(1 + resamples).
    Its floor is 2/2ⁿ (the observed pattern and its mirror): 0.0625 at n = 5, 0.25 at n = 3, so
    below n = 6 it can never reach 0.05 alone, let alone after Holm. It needs no normality, but it
    does assume the differences symmetric under the null. NaN below 1 pair; 1 when every d is 0.
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return float("nan")
    observed = abs(float(d.sum()))
    slack = 1e-9 * float(np.abs(d).sum())  # a pattern equal to the observed one, up to rounding
    if observed <= slack:
        return 1.0  # a zero mean: every pattern is at least as far from 0
    if d.size <= max_exact:
        half = d.size // 2
        first, second = _flip_sums(d[:half]), np.sort(_flip_sums(d[half:]))
        # |a + b| ≥ T  ⟺  b ≥ T − a  or  b ≤ −T − a
        above = second.size - np.searchsorted(second, observed - slack - first, side="left")
        below = np.searchsorted(second, -observed + slack - first, side="right")
        return float(min(1.0, (above.sum() + below.sum()) / 2.0**d.size))
    if rng is None:
        raise ValueError(
            f"sign_flip_p: {d.size} pairs is beyond the exact enumeration ({max_exact}); "
            "pass rng=numpy.random.default_rng(seed) for the Monte-Carlo p"
        )
    hits = 0
    for start in range(0, resamples, 10_000):  # in blocks, to bound memory
        size = min(10_000, resamples - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, d.size))
        hits += int(np.sum(np.abs(signs @ d) >= observed - slack))
    return (1 + hits) / (1 + resamples)


# --------------------------------------------------------------------------- one seed left out
def paired_t_p(differences: Any) -> np.ndarray:
    """:func:`~gelus.report.stats.paired_t_test`'s two-sided p along the last axis, vectorised:
    p = 2·P(T_{n−1} > |d̄/(s/√n)|); with s = 0, 0 for a nonzero mean and 1 for a zero one; NaN
    below 2 pairs."""
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    n = d.shape[-1]
    if n < 2:
        return np.full(d.shape[:-1], np.nan)
    mean, sd = d.mean(axis=-1), d.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * stats.t.sf(np.abs(mean / (sd / math.sqrt(n))), n - 1)
    return np.where(sd == 0, np.where(mean != 0, 0.0, 1.0), p)


def holm_adjust(pvalues: Any, axis: int = -1) -> np.ndarray:
    """:func:`~gelus.report.stats.holm` along ``axis``, vectorised: sorted ascending,
    p_(i)·(m − i + 1), made monotone and capped at 1; NaN left out of m and kept NaN."""
    p = np.moveaxis(np.asarray(pvalues, dtype=np.float64), axis, -1)
    missing = np.isnan(p)
    m = (~missing).sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(missing, np.inf, p), axis=-1, kind="stable")
    ranked = np.take_along_axis(np.where(missing, np.inf, p), order, axis=-1)
    steps = m - np.arange(p.shape[-1])  # m − i for 0-based rank i
    with np.errstate(invalid="ignore"):
        scaled = np.minimum(1.0, ranked * np.maximum(steps, 1))
    adjusted = np.empty_like(p)
    np.put_along_axis(adjusted, order, np.maximum.accumulate(scaled, axis=-1), axis=-1)
    return np.moveaxis(np.where(missing, np.nan, adjusted), -1, axis)


def loso_means(differences: Any) -> np.ndarray:
    """The mean difference with each seed left out in turn, along the last axis, vectorised:
    for n paired differences d (shape (..., n)),

        d̄₍₋ⱼ₎ = (Σᵢ dᵢ − d_j)/(n − 1),  j = 0 … n − 1,

    of the same shape (seed j's value at index j); NaN below 2 pairs."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.shape[-1]
    if n < 2:
        return np.full(d.shape, np.nan)
    return (d.sum(axis=-1, keepdims=True) - d) / (n - 1)


def loso_range(differences: Any) -> tuple[np.ndarray, np.ndarray]:
    """The leave-one-seed-out range of a mean difference, (low, high) of shape (...) for
    differences of shape (..., n): the smallest and largest :func:`loso_means`,

        [(Σd − max d)/(n − 1), (Σd − min d)/(n − 1)],

    how far one seed moves the estimate, in the effect's own units. It is a description, not a
    test: it never crosses 0 for a verdict the paired t-test calls significant at α ≤ 0.3 (if
    leaving d_k out moves the mean to the other side of 0 then s > |Σd|/√n, so t < 1), and at
    n = 5 no rule built on dropping a seed tells a real effect from a null one
    (tools/simulate_marks.py, docs/REPORT.md). NaN below 2 pairs."""
    means = loso_means(differences)
    if means.shape[-1] < 2:  # no pair, or one: nothing to leave out
        nothing = np.full(means.shape[:-1], np.nan)
        return nothing, nothing.copy()
    return means.min(axis=-1), means.max(axis=-1)


def seed_drop_losses(differences: Any, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """How many single seeds a significant verdict depends on, on families of comparisons that
    share their n seeds, vectorised (what the fragility mark this replaced counted).

    ``differences`` has shape (..., m, n): m comparisons (one Holm family) of n paired
    differences, seed j at index j in each. A comparison is *significant* when its Holm-adjusted
    paired-t p < ``alpha``; seed j's drop *loses* it when, with seed j removed from every
    comparison and the same t-test and Holm run again, it is no longer significant with the sign
    of its full mean. Returns (significant, losses) of shape (..., m): losses counts the seeds
    whose drop loses it (0 … n; counted for every comparison, significant or not). The retired
    mark was losses = 1 ("one seed carries it")."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.shape[-1]
    significant = holm_adjust(paired_t_p(d), axis=-1) < alpha
    keep = np.array([[k for k in range(n) if k != j] for j in range(n)], dtype=np.intp)
    dropped = np.moveaxis(d[..., keep], -2, 0)  # (n, ..., m, n − 1): seed j dropped
    same_way = dropped.mean(axis=-1) * d.mean(axis=-1) > 0
    still = (holm_adjust(paired_t_p(dropped), axis=-1) < alpha) & same_way
    return significant, (~still).sum(axis=0)


def robust_marks(
    comparisons: Sequence[Comparison], aggregate: Aggregate = HEADLINE
) -> list[Comparison]:
    """Adjusted comparisons (:func:`~gelus.report.stats.adjust`) with each one's exact sign-flip p
    (:func:`sign_flip_p`; beyond its exact range, ``aggregate``'s generator of the comparison's
    own key) and its leave-one-seed-out range (:func:`loso_range` of its own differences) filled
    in: ``p_sign`` and ``loso``."""
    marked = []
    for c in comparisons:
        key = (c.experiment, c.variant, c.setting, c.metric, c.treatment, c.baseline, c.lr)
        p_sign = sign_flip_p(c.differences, rng=aggregate.rng("sign-flip", *key))
        low, high = loso_range(c.differences)
        marked.append(c._replace(p_sign=p_sign, loso=(float(low), float(high))))
    return marked


# --------------------------------------------------------------------------- margins
INSIDE_MARGIN = "significant but inside the margin"


def inside_margin(comparison: Comparison, alpha: float = ALPHA) -> bool:
    """True when a verdict is significant (Holm-adjusted p < ``alpha``) but its mean difference
    is smaller than the metric's margin, |d̄| < ``EQUIVALENCE_MARGINS[metric]``: real, but below
    what the project calls a practical difference (shown as :data:`INSIDE_MARGIN`). False for a
    metric with no margin."""
    margin = EQUIVALENCE_MARGINS.get(comparison.metric)
    return margin is not None and comparison.p_holm < alpha and abs(comparison.mean) < margin
