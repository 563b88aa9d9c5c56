"""Statistics of experiment results: robust aggregates, bootstrap CIs, paired comparisons.

Everything here is a pure function of values (or of :class:`~gelus.experiments.selection.Selection`
results of an experiment's protocol) and, for resampling, an explicit ``numpy.random.Generator``.
Nothing reads files or global state. NaN and infinite values are diverged runs: the aggregates are
taken over the finite values and say how many diverged.
"""

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from gelus.experiments.selection import Selection

__all__ = [
    "MIN_PAIRS_FOR_VERDICT",
    "Comparison",
    "Summary",
    "bootstrap_ci",
    "compare_paired",
    "iqm",
    "ordering_verdict",
    "summarize",
]


# --------------------------------------------------------------------------- aggregates
def iqm(values: Any, axis: int = -1) -> Any:
    """Interquartile mean: the mean of the middle 50 % (``int(n/4)`` values cut from each end).

    Matches ``scipy.stats.trim_mean(values, 0.25, axis)``; for n < 4 nothing is cut (the mean).
    """
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., Any],
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``statistic(values, axis=-1)``.

    Resamples the n values with replacement ``n_resamples`` times and returns the
    (1 − confidence)/2 and (1 + confidence)/2 percentiles of the statistic. With n = 1 the interval
    is the single value; with n = 0 it is (nan, nan).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return (float("nan"), float("nan"))
    indices = rng.integers(0, values.size, size=(n_resamples, values.size))
    resampled = statistic(values[indices], axis=-1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return (float(low), float(high))


class Summary(NamedTuple):
    """n finite values summarised (``diverged`` more were NaN or infinite); each ``*_ci`` is a
    percentile-bootstrap 95 % interval."""

    n: int
    mean: float
    median: float
    iqm: float
    mean_ci: tuple[float, float]
    median_ci: tuple[float, float]
    iqm_ci: tuple[float, float]
    diverged: int = 0


def summarize(
    values: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 10_000
) -> Summary:
    """Mean, median and IQM of the finite ``values`` with their bootstrap CIs (in that order of
    resampling), and how many values were NaN or infinite (diverged runs)."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    diverged = int(values.size - finite.size)
    if finite.size == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, (nan, nan), (nan, nan), (nan, nan), diverged)
    return Summary(
        n=int(finite.size),
        mean=float(finite.mean()),
        median=float(np.median(finite)),
        iqm=float(iqm(finite)),
        mean_ci=bootstrap_ci(finite, np.mean, rng=rng, n_resamples=n_resamples),
        median_ci=bootstrap_ci(finite, np.median, rng=rng, n_resamples=n_resamples),
        iqm_ci=bootstrap_ci(finite, iqm, rng=rng, n_resamples=n_resamples),
        diverged=diverged,
    )


# --------------------------------------------------------------------------- paired comparisons
class Comparison(NamedTuple):
    """treatment − baseline on the seeds both share, with the paper's ordering judged."""

    experiment: str
    setting: str
    metric: str
    treatment: str
    baseline: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float  # mean paired difference
    ci: tuple[float, float]  # bootstrap 95 % CI of the mean difference
    verdict: str
    lr: str = "chosen"  # "chosen" (each side's selected lr) or the one lr both ran at
    diverged: int = 0  # shared seeds left out because a run of the pair diverged
    variant: str = ""  # the config both sides come from (Selection.variant)


# Fewest pairs for a verdict: with n pairs all on one side by chance (probability 2·2^-n under
# "no difference"), a percentile bootstrap excludes 0; n = 5 brings that down to 6 %, n = 3
# would leave it at 25 %.
MIN_PAIRS_FOR_VERDICT = 5


def ordering_verdict(ci: tuple[float, float], n: int, lower_is_better: bool = True) -> str:
    """Does "treatment beats baseline" hold, given the CI of treatment − baseline over n pairs?

    "holds" when the whole interval lies on the better side of 0, "reversed" when it lies on the
    worse side, otherwise "not resolved at n=…: the 95 % CI of the difference includes 0". Below
    ``MIN_PAIRS_FOR_VERDICT`` pairs no verdict is given: the bootstrap cannot support one.
    """
    low, high = ci
    if n == 0 or np.isnan(low):
        return "no shared seeds"
    better = high < 0 if lower_is_better else low > 0
    worse = low > 0 if lower_is_better else high < 0
    if n < MIN_PAIRS_FOR_VERDICT:
        leaning = "leans to holding" if better else "leans reversed" if worse else "CI includes 0"
        return f"not resolved at n={n} ({leaning}; a verdict needs ≥ {MIN_PAIRS_FOR_VERDICT} seeds)"
    if better:
        return "holds"
    if worse:
        return "reversed"
    return f"not resolved at n={n}: the 95 % CI of the difference includes 0"


def compare_paired(
    treatment: Selection,
    baseline: Selection,
    *,
    rng: np.random.Generator,
    lower_is_better: bool = True,
    n_resamples: int = 10_000,
) -> Comparison:
    """Paired difference treatment − baseline over the seeds present in both selections.

    Seeds present in only one of them are left out (a pair needs both halves), and so are pairs
    where either run diverged (counted in ``diverged``). The statistic is the mean difference, with
    a percentile-bootstrap CI that resamples seeds (pairs) together.
    """
    shared = sorted(set(treatment.values) & set(baseline.values))
    seeds = tuple(
        s
        for s in shared
        if math.isfinite(treatment.values[s]) and math.isfinite(baseline.values[s])
    )
    differences = np.array(
        [treatment.values[s] - baseline.values[s] for s in seeds], dtype=np.float64
    )
    ci = bootstrap_ci(differences, np.mean, rng=rng, n_resamples=n_resamples)
    mean = float(differences.mean()) if seeds else float("nan")
    return Comparison(
        treatment.experiment,
        treatment.setting,
        treatment.metric,
        treatment.activation,
        baseline.activation,
        seeds,
        tuple(float(d) for d in differences),
        mean,
        ci,
        ordering_verdict(ci, len(seeds), lower_is_better),
        "chosen" if treatment.lr_selected and baseline.lr_selected else f"{treatment.lr:g}",
        len(shared) - len(seeds),
        treatment.variant,
    )
