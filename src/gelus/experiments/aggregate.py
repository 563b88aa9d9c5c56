"""The statistic over seeds, chosen once: its function, interval method, resamples and confidence.

One :class:`Aggregate` value (:data:`HEADLINE` unless a caller passes another) is what "the result
over seeds" means everywhere: the learning rate that :mod:`gelus.experiments.selection` chooses,
the console summary of ``gelus run``, and the report's tables, figures and "how to read" text
(:mod:`gelus.report`). Nothing else picks a statistic, a number of resamples or a confidence.

Pure functions of values; each interval's ``numpy.random.Generator`` is seeded from its own key
(a SHA-256 of it), so a cell has the same interval wherever it is shown.
"""

import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "HEADLINE",
    "STATISTICS",
    "Aggregate",
    "Summary",
    "bootstrap_ci",
    "iqm",
    "seeded_rng",
    "summarize",
]


def iqm(values: Any, axis: int = -1) -> Any:
    """Interquartile mean: the mean of the middle 50 % (``int(n/4)`` values cut from each end).

    Matches ``scipy.stats.trim_mean(values, 0.25, axis)``; for n < 4 nothing is cut (the mean).
    """
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


# name -> (function(values, axis), singular, plural); a Summary resamples them in this order
STATISTICS: dict[str, tuple[Callable[..., Any], str, str]] = {
    "mean": (np.mean, "mean", "means"),
    "median": (np.median, "median", "medians"),
    "iqm": (iqm, "IQM", "IQMs"),
}
METHODS = ("percentile bootstrap",)  # the interval methods :func:`bootstrap_ci` implements


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., Any],
    *,
    rng: np.random.Generator,
    n_resamples: int,
    confidence: float,
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


def seeded_rng(*key: object) -> np.random.Generator:
    """A generator seeded from ``key`` (a stable hash, not Python's ``hash``): the same cell gets
    the same interval in every section and whatever else the report holds."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class Summary(NamedTuple):
    """n finite values summarised (``diverged`` more were NaN or infinite); each ``*_ci`` is the
    aggregate's interval of that statistic (none below two values)."""

    n: int
    mean: float
    median: float
    iqm: float
    mean_ci: tuple[float, float]
    median_ci: tuple[float, float]
    iqm_ci: tuple[float, float]
    diverged: int = 0


def summarize(
    values: Sequence[float], *, rng: np.random.Generator, n_resamples: int, confidence: float
) -> Summary:
    """Mean, median and IQM of the finite ``values`` with their bootstrap CIs (in that order of
    resampling), and how many values were NaN or infinite (diverged runs)."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    diverged = int(values.size - finite.size)
    nan = float("nan")
    if finite.size == 0:
        return Summary(0, nan, nan, nan, (nan, nan), (nan, nan), (nan, nan), diverged)
    if finite.size == 1:  # one value has no interval
        value = float(finite[0])
        return Summary(1, value, value, value, (nan, nan), (nan, nan), (nan, nan), diverged)
    cis = [
        bootstrap_ci(finite, function, rng=rng, n_resamples=n_resamples, confidence=confidence)
        for function, _, _ in STATISTICS.values()
    ]
    points = [float(function(finite)) for function, _, _ in STATISTICS.values()]
    return Summary(int(finite.size), *points, *cis, diverged=diverged)


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """The statistic over seeds and its interval, as one value.

    ``statistic`` names the point estimate (a key of :data:`STATISTICS`); ``method`` the interval
    (one of ``METHODS``); ``resamples`` and ``confidence`` its size and level; ``seed`` 0 keys every
    generator by its cell alone, another seed is mixed into every key.
    """

    statistic: str = "median"
    method: str = "percentile bootstrap"
    resamples: int = 10_000
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic {self.statistic!r}: choose one of {', '.join(STATISTICS)}")
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r}: choose one of {', '.join(METHODS)}")
        if not (isinstance(self.resamples, int) and self.resamples >= 1):
            raise ValueError(f"resamples {self.resamples!r}: give a whole number of at least 1")
        if not (0 < self.confidence < 1):
            raise ValueError(f"confidence {self.confidence!r}: give a level between 0 and 1")

    @property
    def function(self) -> Callable[..., Any]:
        """The statistic as ``function(values, axis=-1)``."""
        return STATISTICS[self.statistic][0]

    @property
    def name(self) -> str:
        """The statistic as the report writes it ("median")."""
        return STATISTICS[self.statistic][1]

    @property
    def plural(self) -> str:
        """The statistic's plural as the report writes it ("medians")."""
        return STATISTICS[self.statistic][2]

    @property
    def level(self) -> str:
        """The confidence as a percentage ("95 %")."""
        return f"{100 * self.confidence:g} %"

    def point(self, values: Sequence[float]) -> float:
        """The statistic of ``values`` as given (callers decide what a diverged run counts as)."""
        values = np.asarray(values, dtype=np.float64)
        return float(self.function(values)) if values.size else math.nan

    def rng(self, *key: object) -> np.random.Generator:
        """The generator of the cell named ``key``."""
        return seeded_rng(*key) if self.seed == 0 else seeded_rng(self.seed, *key)

    def interval(self, values: Sequence[float], *key: object) -> tuple[float, float]:
        """The statistic's interval over ``values``, drawn from the generator of ``key``."""
        return bootstrap_ci(
            values,
            self.function,
            rng=self.rng(*key),
            n_resamples=self.resamples,
            confidence=self.confidence,
        )

    def summarize(self, values: Sequence[float], *key: object) -> Summary:
        """:func:`summarize` of ``values`` with this aggregate's resamples and confidence, drawn
        from the generator of ``key``: the same key gives the same intervals everywhere."""
        return summarize(
            values, rng=self.rng(*key), n_resamples=self.resamples, confidence=self.confidence
        )

    def of(self, summary: Summary) -> tuple[float, tuple[float, float]]:
        """This aggregate's (point, interval) out of a :class:`Summary`."""
        return getattr(summary, self.statistic), getattr(summary, f"{self.statistic}_ci")


HEADLINE = Aggregate()  # the median over seeds, percentile bootstrap, 10,000 resamples, 95 %
