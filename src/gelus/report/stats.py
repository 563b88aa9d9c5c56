"""Statistics of experiment results: the aggregate over seeds and the calibrated paired tests.

The aggregate (statistic, interval, resamples, confidence) is one value,
:class:`~gelus.experiments.aggregate.Aggregate` (re-exported here with its functions), shared with
the lr selection and the console summary; the verdicts' settings (test, alpha, correction, power)
are another, :class:`Design`. Everything here is a pure function of values (or of
:class:`~gelus.experiments.selection.Selection` results of an experiment's protocol) and those two
values. Nothing reads files or global state. NaN and infinite values are diverged runs: the
aggregates are taken over the finite values and say how many diverged.
"""

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from gelus.experiments.aggregate import (
    HEADLINE,
    Aggregate,
    Summary,
    bootstrap_ci,
    iqm,
    seeded_rng,
    summarize,
)
from gelus.experiments.selection import Selection
from gelus.report.metrics import METRICS, Mark, Verdict
from gelus.report.metrics import lower_is_better as _lower_is_better

__all__ = [
    "ALPHA",
    "DESIGN",
    "EQUIVALENCE_MARGINS",
    "HEADLINE",
    "VERDICTS",
    "Aggregate",
    "Comparison",
    "Design",
    "PairedTest",
    "Summary",
    "adjust",
    "bootstrap_ci",
    "compare_paired",
    "fewest_pairs",
    "holm",
    "iqm",
    "noncentral_t_sf",
    "paired_t_test",
    "pairs_for_power",
    "power",
    "rule_disagreement",
    "seeded_rng",
    "summarize",
    "tost_p",
]


# --------------------------------------------------------------------------- paired comparisons
# A difference smaller than this is a tie, if an equivalence test (TOST) shows it: the margins of
# the metrics table (:data:`gelus.report.metrics.METRICS`, where each is explained).
EQUIVALENCE_MARGINS = {m.name: m.margin for m in METRICS.values() if m.margin is not None}


@dataclasses.dataclass(frozen=True)
class Design:
    """How a paired comparison becomes a verdict: the test, its family-wise error rate ``alpha``
    and the correction over one experiment's comparisons, the equivalence test for a tie, the
    power an unresolved verdict's pair count aims at, and the fewest pairs a test needs."""

    test: str = "paired t-test"
    alpha: float = 0.05
    correction: str = "Holm"
    equivalence: str = "TOST"
    power: float = 0.8
    min_pairs: int = 2  # a t-test needs a standard deviation

    def __post_init__(self) -> None:
        implemented = {"test": "paired t-test", "correction": "Holm", "equivalence": "TOST"}
        for field, value in implemented.items():
            if getattr(self, field) != value:
                raise ValueError(f"{field} {getattr(self, field)!r}: only {value!r} is implemented")
        if not (0 < self.alpha < 1 and 0 < self.power < 1):
            raise ValueError(f"alpha {self.alpha!r}, power {self.power!r}: give levels in (0, 1)")


DESIGN = Design()
ALPHA = DESIGN.alpha  # family-wise error rate of one experiment's comparisons (Holm)
POWER = DESIGN.power


class PairedTest(NamedTuple):
    """Student's paired t-test of mean(d) = 0 over n differences d."""

    n: int
    mean: float
    sd: float  # sample standard deviation (n − 1)
    ci: tuple[float, float]  # two-sided t interval of the mean difference at the confidence asked
    p: float  # two-sided p-value (nan below 2 pairs)


def paired_t_test(
    differences: Sequence[float], confidence: float = HEADLINE.confidence
) -> PairedTest:
    """t = mean(d) / (sd(d)/√n) on n − 1 degrees of freedom; p = 2·P(T > |t|); CI = mean ±
    t_{(1+c)/2, n−1}·sd/√n. With sd = 0, p is 0 for a nonzero mean and 1 for a zero one."""
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    n = int(d.size)
    if n < 2:
        nan = float("nan")
        return PairedTest(n, float(d.mean()) if n else nan, nan, (nan, nan), nan)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    if se == 0:
        return PairedTest(n, mean, sd, (mean, mean), 0.0 if mean != 0 else 1.0)
    p = float(2 * stats.t.sf(abs(mean / se), n - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se
    return PairedTest(n, mean, sd, (mean - half, mean + half), p)


def tost_p(differences: Sequence[float], margin: float) -> float:
    """Two one-sided t-tests (Schuirmann 1987) of |mean(d)| ≥ margin: the larger one-sided p.
    Below ``ALPHA`` the difference lies within ±margin (a tie)."""
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return float("nan")
    se = float(d.std(ddof=1)) / math.sqrt(d.size)
    mean = float(d.mean())
    if se == 0:
        return 0.0 if abs(mean) < margin else 1.0
    lower = stats.t.sf((mean + margin) / se, d.size - 1)  # H0: mean ≤ −margin
    upper = stats.t.cdf((mean - margin) / se, d.size - 1)  # H0: mean ≥ +margin
    return float(max(lower, upper))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values: sorted ascending, p_(i)·(m − i + 1), made
    monotone and capped at 1; NaN values are left out of m and stay NaN."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    adjusted = [float("nan")] * len(pvalues)
    m, running = len(indexed), 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, p * (m - rank)))
        adjusted[i] = running
    return adjusted


def noncentral_t_sf(x: float, nu: int, noncentrality: float) -> float:
    """P(T' > x) for T' noncentral t with ``nu`` degrees of freedom, x ≥ 0.

    T' = (Z + δ)/(X/√ν) with Z standard normal and X chi-distributed (ν), so, integrating over X,

        P(T' > x) = ∫₀^∞ f_χ(s; ν) · Φ(δ − x·s/√ν) ds.

    The integrand is smooth and bounded, so this is finite where scipy's ``nct`` gives NaN (its
    lower tail once δ ≳ 8, e.g. n = 3, effect 5.0, α = 0.00625).
    """
    from scipy import integrate, special, stats

    scale = x / math.sqrt(nu)
    log_norm = (nu / 2 - 1) * math.log(2) + math.lgamma(nu / 2)  # of the chi density

    def integrand(s: float) -> float:
        if s <= 0:
            return 0.0 if nu > 1 else math.sqrt(2 / math.pi) * special.ndtr(noncentrality)
        density = math.exp((nu - 1) * math.log(s) - s * s / 2 - log_norm)
        return density * float(special.ndtr(noncentrality - scale * s))

    # the chi density is negligible outside its 1e-15 and 1 − 1e-15 quantiles; break points at its
    # mode √(ν − 1) and where Φ falls from 1 to 0 (s = δ/scale, width 1/scale: narrow when x is
    # large, e.g. at α = 1e-6 with ν = 1), so quad never steps over either
    lower, upper = float(stats.chi.ppf(1e-15, nu)), float(stats.chi.isf(1e-15, nu))
    breaks = {lower, upper, math.sqrt(max(nu - 1, 0))}
    if scale > 0:
        centre, width = noncentrality / scale, 1 / scale
        breaks |= {centre + k * width for k in (-8, -2, 0, 2, 8)}
    edges = sorted(b for b in breaks if lower <= b <= upper)
    value = sum(
        integrate.quad(integrand, a, b, epsabs=1e-15, epsrel=1e-11, limit=200)[0]
        for a, b in itertools.pairwise(edges)
    )
    return min(1.0, max(0.0, value))


def power(n: int, effect: float, alpha: float) -> float:
    """Power of a two-sided paired t-test at level ``alpha`` with n pairs when the true mean
    difference is ``effect`` standard deviations: P(|T'| > c), c = t_{1−α/2, n−1}, T' noncentral
    t with n − 1 degrees of freedom and noncentrality δ = effect·√n, i.e.
    :func:`noncentral_t_sf` (c, n − 1, δ) + :func:`noncentral_t_sf` (c, n − 1, −δ). Never NaN
    for n ≥ 2."""
    from scipy import stats

    if n < 2:
        return float("nan")
    critical = float(stats.t.ppf(1 - alpha / 2, n - 1))
    noncentrality = effect * math.sqrt(n)
    return min(
        1.0,
        noncentral_t_sf(critical, n - 1, noncentrality)
        + noncentral_t_sf(critical, n - 1, -noncentrality),
    )


def fewest_pairs(
    reaches: Callable[[int], bool], most: int = 10_000, *, low: int = 1, high: int = 2
) -> int | None:
    """The smallest n in [2, ``most``] with ``reaches(n)`` true, for a ``reaches`` monotone in n
    (power at a fixed effect grows with n): doubling from ``high``, then bisection. None when
    ``reaches(most)`` is false. ``low`` (where ``reaches`` is known false) and ``high`` start the
    search where a bracket is known."""
    low, high = max(1, low), min(max(high, low + 1), most)
    # reaches(low) false (n = 1 has no test), reaches(high) once doubling stops; ``most`` is asked
    # last, only when no smaller count reaches (a count of 10,000 is the slowest to compute)
    while not reaches(high):
        if high >= most:
            return None
        low, high = high, min(2 * high, most)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def pairs_for_power(
    mean: float, sd: float, alpha: float, target: float = DESIGN.power
) -> int | None:
    """The fewest pairs for which a two-sided paired t-test at ``alpha`` has ``target`` power
    against the observed effect mean/sd (None: no effect seen, or more than 10,000 pairs)."""
    if not (math.isfinite(mean) and math.isfinite(sd)) or sd == 0 or mean == 0:
        return None
    effect = abs(mean) / sd
    return fewest_pairs(lambda n: power(n, effect, alpha) >= target)


# --------------------------------------------------------------------------- Holm-family power
def _ordered_volume(bounds: Sequence[float]) -> float:
    """Volume of {0 < u₁ < … < u_k : u_j ≤ b_j} for nondecreasing bounds b_j (1 for k = 0):
    the iterated integral G_{j−1}(x) = ∫_x^{b_j} G_j(u) du from G_k = 1, at x = 0, exact in
    polynomials."""
    inner = np.polynomial.Polynomial([1.0])
    for b in reversed(bounds):
        antiderivative = inner.integ()
        inner = antiderivative(b) - antiderivative
    return float(inner(0.0))


def _holm_passes(p: float, m: int, alpha: float) -> float:
    """Q(p): the probability that Holm at level ``alpha`` over m comparisons rejects one whose p
    is ``p`` when the other m − 1 p-values are independent uniforms (nulls).

    With k nulls below p the comparison has rank k + 1 and is rejected iff p ≤ α/(m − k) and
    the k smaller ones, sorted, pass their steps u_(j) ≤ α/(m − j + 1):

        Q(p) = Σ_k C(m−1, k) (1 − p)^{m−1−k} · k! · vol{0 < u₁ < … < u_k : u_j ≤ min(α/(m−j+1), p)}.
    """
    if p <= alpha / m:
        return 1.0
    total = 0.0
    for k in range(m):
        if p > alpha / (m - k):
            continue
        bounds = [min(alpha / (m - j), p) for j in range(k)]  # rank j + 1's step, 0-based j
        ways = math.comb(m - 1, k) * math.factorial(k) * (1 - p) ** (m - 1 - k)
        total += ways * _ordered_volume(bounds)
    return total


def holm_power(n: int, effect: float, m: int, alpha: float = ALPHA) -> float:
    """The probability that a Holm-adjusted verdict over m comparisons calls one real effect of
    ``effect`` standard deviations (of its paired differences) real, in its own direction, with n
    pairs, when the other m − 1 comparisons are true nulls independent of it (uniform p-values).

    Let G(p) = P(the effect's two-sided p ≤ p, with the right sign) = P(T' > t_{1−p/2, n−1})
    (T' noncentral t, δ = effect·√n; :func:`~gelus.report.stats.noncentral_t_sf`). When its p
    lies in (α/(m−k+1), α/(m−k)] Holm rejects it iff at least k nulls lie below it and the k
    smallest pass their steps, U_(j) ≤ α/(m−j+1) for j = 1..k (the larger ones' steps are above
    p); that probability, Q_k (Q_0 = 1), does not depend on p within the piece, so exactly

        power = Σ_{k=0}^{m−1} Q_k · [G(α/(m−k)) − G(α/(m−k+1))],   G(α/(m+1)) := 0.

    Between G(α/m) (a lone test at α/m, a lower bound) and G(α). With m = 1 it is the one-sided
    share of :func:`~gelus.report.stats.power`. Comparisons that share a reference share its
    noise, so they are not quite independent: this is the independent case.
    """
    from scipy import stats

    if n < 2:
        return float("nan")
    if m < 1:
        raise ValueError(f"holm_power: m = {m} comparisons; a family has at least one")
    nu, delta = n - 1, abs(effect) * math.sqrt(n)
    steps = [alpha / (m - k) for k in range(m)]  # α/m, α/(m−1), …, α
    reached = [noncentral_t_sf(float(stats.t.isf(p / 2, nu)), nu, delta) for p in steps]
    below = [0.0, *reached[:-1]]
    return float(sum(
        _holm_passes(p, m, alpha) * (g - g_below)
        for p, g, g_below in zip(steps, reached, below, strict=True)
    ))  # fmt: skip


def pairs_for_holm_power(
    mean: float, sd: float, m: int, alpha: float = ALPHA, target: float = POWER
) -> int | None:
    """The fewest pairs with which a Holm verdict over m comparisons calls one real effect of
    mean/sd (the others null) real with probability ``target`` (:func:`holm_power`); None when no
    effect is seen or more than 10,000 pairs are needed. At most
    :func:`~gelus.report.stats.pairs_for_power` at α/m (the lone test at Holm's strictest level,
    a lower bound on the power)."""
    if not (math.isfinite(mean) and math.isfinite(sd)) or sd == 0 or mean == 0:
        return None
    effect = abs(mean) / sd
    # bracket: a lone test at α has at least Holm's power, one at α/m about as much (its one-sided
    # share is a lower bound), so the count lies near [lone at α, lone at α/m]; each holm_power
    # costs m integrals, the lone counts one
    above = pairs_for_power(mean, sd, alpha, target)
    below = pairs_for_power(mean, sd, alpha / m, target)
    low, high = (above - 1, below) if above and below else (1, 2)
    return fewest_pairs(lambda n: holm_power(n, effect, m, alpha) >= target, low=low, high=high)


class Comparison(NamedTuple):
    """treatment − baseline on the seeds both share: a paired t-test, Holm-adjusted over the
    experiment's comparisons (:func:`adjust`)."""

    experiment: str
    setting: str
    metric: str
    treatment: str
    baseline: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float  # mean paired difference
    ci: tuple[float, float]  # unadjusted t interval of the mean difference (aggregate's confidence)
    verdict: Verdict  # better, worse, tie or unresolved (after Holm)
    lr: str = "chosen"  # "chosen" (each side's selected lr) or the one lr both ran at
    diverged: int = 0  # shared seeds left out because a run of the pair diverged
    variant: str = ""  # the config both sides come from (Selection.variant)
    p: float = float("nan")  # unadjusted two-sided p
    p_holm: float = float("nan")  # Holm-adjusted over the experiment's comparisons
    p_tie: float = float("nan")  # Holm-adjusted TOST p for a difference within the margin
    pairs_needed: int | None = None  # pairs for the design's power of a Holm verdict (unresolved)
    lower_is_better: bool = True
    depends: str = ""  # each selection rule's verdict, when they disagree ("" when they agree)
    p_sign: float = float("nan")  # exact sign-flip p, unadjusted (robust.sign_flip_p)
    # the mean difference's (lowest, highest) with one seed left out (robust.loso_range)
    loso: tuple[float, float] = (float("nan"), float("nan"))
    reference_lr: str = ""  # the verdict with the reference at its runner-up lr, where it changes
    lr_choice: str = ""  # the verdicts at the matched lr and under the mean rule, where one changes

    def marks(self, alpha: float = ALPHA) -> tuple[Mark, ...]:
        """The marks beside the verdict, as values: depends on the selection rule, depends on the
        reference's lr, significant (at ``alpha``) but inside the margin."""
        margin = METRICS[self.metric].margin if self.metric in METRICS else None
        inside = margin is not None and self.p_holm < alpha and abs(self.mean) < margin
        found = (
            (Mark.INSIDE_MARGIN, inside),
            (Mark.SELECTION_RULE, bool(self.depends)),
            (Mark.REFERENCE_LR, bool(self.reference_lr)),
            (Mark.LR_CHOICE, bool(self.lr_choice)),
        )
        return tuple(mark for mark, present in found if present)


def rule_disagreement(verdicts: Mapping[str, Verdict | None]) -> str:
    """``Comparison.depends`` from {selection rule: its verdict, None where it formed none}:
    "rule word, rule word, …" where the rules disagree, "" where they agree."""
    said = {rule: v for rule, v in verdicts.items() if v is not None}
    return (
        ", ".join(f"{rule} {v.word}" for rule, v in said.items())
        if len(set(said.values())) > 1
        else ""
    )


VERDICTS = {v.word: v for v in Verdict}  # {word: Verdict}


def compare_paired(
    treatment: Selection,
    baseline: Selection,
    *,
    lower_is_better: bool | None = None,
    aggregate: Aggregate = HEADLINE,
) -> Comparison:
    """Paired difference treatment − baseline over the seeds present in both selections, with
    its unadjusted t-test (interval at ``aggregate.confidence``); the verdict is set by
    :func:`adjust` over the experiment's comparisons.

    Seeds present in only one of them are left out (a pair needs both halves), and so are pairs
    where either run diverged (counted in ``diverged``). ``lower_is_better``: the metric's
    direction (default: the metrics table's, :data:`gelus.report.metrics.METRICS`).
    """
    if lower_is_better is None:
        lower_is_better = _lower_is_better(treatment.metric)
    shared = sorted(set(treatment.values) & set(baseline.values))
    seeds = tuple(
        s
        for s in shared
        if math.isfinite(treatment.values[s]) and math.isfinite(baseline.values[s])
    )
    differences = tuple(float(treatment.values[s] - baseline.values[s]) for s in seeds)
    test = paired_t_test(differences, aggregate.confidence)
    both_chosen = treatment.lr_selected and baseline.lr_selected
    return Comparison(
        experiment=treatment.experiment,
        setting=treatment.setting,
        metric=treatment.metric,
        treatment=treatment.activation,
        baseline=baseline.activation,
        seeds=seeds,
        differences=differences,
        mean=test.mean,
        ci=test.ci,
        verdict=Verdict.UNRESOLVED,
        lr="chosen" if both_chosen else f"{treatment.lr:g}",
        diverged=len(shared) - len(seeds),
        variant=treatment.variant,
        p=test.p,
        lower_is_better=lower_is_better,
    )


def _verdict(c: Comparison, p_holm: float, p_tie: float, design: Design) -> Verdict:
    if p_holm < design.alpha:
        return Verdict.BETTER if (c.mean < 0) == c.lower_is_better else Verdict.WORSE
    return Verdict.TIE if p_tie < design.alpha else Verdict.UNRESOLVED


def adjust(
    comparisons: Sequence[Comparison], design: Design = DESIGN, *, pairs: bool = True
) -> list[Comparison]:
    """The comparisons of one experiment with Holm-adjusted p-values and their verdicts: better or
    worse when the adjusted p < alpha, a tie when the adjusted TOST p < alpha, else unresolved
    with (``pairs``) the pairs with which a Holm verdict over the family's m comparisons calls the
    observed effect real with the design's power, the other m − 1 null
    (:func:`pairs_for_holm_power`): what the verdict, not a lone test, needs.
    """
    adjusted = holm([c.p for c in comparisons])
    margins = [EQUIVALENCE_MARGINS.get(c.metric, 0.0) for c in comparisons]
    ties = holm([tost_p(c.differences, m) for c, m in zip(comparisons, margins, strict=True)])
    family = max(1, sum(not math.isnan(c.p) for c in comparisons))
    out = []
    for c, p_holm, p_tie in zip(comparisons, adjusted, ties, strict=True):
        verdict = _verdict(c, p_holm, p_tie, design)
        needed = None
        if verdict is Verdict.UNRESOLVED and pairs:
            sd = float(np.std(c.differences, ddof=1)) if len(c.differences) > 1 else math.nan
            needed = pairs_for_holm_power(c.mean, sd, family, design.alpha, design.power)
        out.append(c._replace(p_holm=p_holm, p_tie=p_tie, verdict=verdict, pairs_needed=needed))
    return out
