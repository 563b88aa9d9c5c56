"""The report's words: its cells (values, differences, intervals, p-values, the verdict with its
marks) and the sentences written from the aggregate over seeds, the verdicts' design and the
measured error rates (the "how to read" paragraph, what a family of verdicts can detect, the
learning-rate sensitivity claim judged), for :mod:`gelus.report.render` to place.
"""

import math
from collections.abc import Sequence
from typing import Any

from gelus.experiments.divergence import FACTOR
from gelus.report.metrics import Verdict
from gelus.report.robust import (
    INSIDE_MARGIN,
    NULL_RATES,
    NULL_RATES_ALPHA,
    holm_power,
    inside_margin,
    skewed_rates,
)
from gelus.report.stats import DESIGN, EQUIVALENCE_MARGINS, HEADLINE, Aggregate, Design, power

__all__ = [
    "CLAIM",
    "format_difference",
    "format_value",
    "how_to_read",
    "interval",
    "loso_text",
    "p_exact",
    "p_text",
    "percent",
    "power_text",
    "sensitivity_claim",
    "verdict_cell",
]


def format_value(metric: str, value: float) -> str:
    """Errors and accuracies as percentages, losses to 4 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if metric in ("error", "accuracy"):
        return f"{100 * value:.2f} %"
    return f"{value:.4g}"


def format_difference(metric: str, value: float) -> str:
    """A difference of errors or accuracies in percentage points, else to 4 significant digits."""
    if value is None or math.isnan(value):
        return "—"
    if metric in ("error", "accuracy"):
        return f"{100 * value:+.2f} pp"
    return f"{value:+.4g}"


def interval(metric: str, ci: tuple[float, float], difference: bool = False) -> str:
    fmt = format_difference if difference else format_value
    return f"[{fmt(metric, ci[0])}, {fmt(metric, ci[1])}]"


def percent(level: float) -> str:
    return f"{100 * level:g} %"


def _range(low: float, high: float) -> str:
    return f"{100 * low:.1f}–{100 * high:.1f} %" if low != high else f"{100 * low:.1f} %"


def _assumption(design: Design) -> str:
    """The test's assumption and what it costs when broken, from :data:`robust.NULL_RATES`."""
    n_values = sorted(next(iter(NULL_RATES.values())))
    (g_low, g_high), _ = skewed_rates("Gaussian")
    skewed = [(shape, *skewed_rates(shape)) for shape in NULL_RATES if shape != "Gaussian"]
    per = ", ".join(f"{_range(*p)} ({shape})" for shape, p, _ in skewed)
    family = _range(min(f[0] for _, _, f in skewed), max(f[1] for _, _, f in skewed))
    at = "" if design.alpha == NULL_RATES_ALPHA else f", measured at α = {NULL_RATES_ALPHA:g}"
    return (
        f"It assumes roughly symmetric paired differences: then it calls a null difference real "
        f"in {_range(g_low, g_high)} of comparisons at n = {', '.join(map(str, n_values))}; for "
        "skewed differences with mean 0 (an activation with an occasional bad seed) it does so in "
        f"{per}, and family-wise over 5 comparisons in {family} (simulated{at}: docs/REPORT.md, "
        '"What a verdict can promise"). Five seeds cannot tell these shapes apart, so its '
        f"{percent(design.alpha)} holds only under the assumption."
    )


def how_to_read(aggregate: Aggregate = HEADLINE, design: Design = DESIGN) -> str:
    """The report's "how to read" paragraph, written from the aggregate over seeds (statistic,
    interval method, resamples, confidence, seed) and the verdicts' design (test, alpha,
    correction, equivalence test, power, fewest pairs) that the numbers were computed with, and
    the measured error rates of the test when its assumption fails (:data:`robust.NULL_RATES`)."""
    seeded = "each cell's generator seeded from its own key"
    if aggregate.seed:
        seeded += f" and the report's seed {aggregate.seed}"
    alpha = f"{design.alpha:g}"
    floor = 2 / 2**5  # the sign-flip test's smallest p: the observed pattern and its mirror
    return " ".join(
        [
            "How to read: n is the number of seeds; each seed contributes its test value at the chosen "
            "learning rate and epoch.",
            f"A run diverged when a final loss is NaN, infinite or above {FACTOR:g}× that of the "
            "trivial predictor (ln(classes) for a classifier; the training mean's error for the "
            "autoencoder): medians, means and intervals are over the runs that did not, and say how "
            "many did; figures leave such runs out.",
            "Records of different configs are never merged: each config is its own row, labelled by "
            "the settings that differ.",
            f"The {aggregate.plural}' {aggregate.level} intervals are {aggregate.method}s "
            f"({aggregate.resamples:,} resamples, {seeded}), a description of spread: with n ≤ 3 "
            "seeds such an interval cannot be wider than the range of the values; none is given for "
            "n = 1.",
            f"Verdicts come from a {design.test} on the seeds both activations ran "
            f"(n ≥ {design.min_pairs}), {design.correction}-adjusted over every comparison of the "
            f"experiment: ▲ better / ▼ worse when the adjusted p < {alpha}, = tie when an "
            f"equivalence test ({design.equivalence}, margins in docs/REPORT.md) says the "
            "difference is within the margin, else · unresolved with the pairs with which a "
            f"{design.correction} verdict over the experiment's m comparisons would call the "
            f"observed effect real with {percent(design.power)} power (one real effect, the others "
            "null).",
            _assumption(design),
            "Beside the t-test's p stands the exact sign-flip p (all 2ⁿ sign patterns of the "
            "differences, unadjusted): it needs no normality, only symmetry, and its floor is "
            f"2/2ⁿ, {floor:g} at n = 5, so below 6 pairs it can never reach {alpha}.",
            'Beside each verdict, "one seed left out": the lowest and highest mean difference '
            "with each seed left out in turn, how far one seed moves the estimate (a description, "
            "not a test: at 5 seeds no rule built on dropping a seed tells a real effect from a "
            f'null one, docs/REPORT.md). Marked "{INSIDE_MARGIN}" when its mean difference is '
            "smaller than the metric's margin; \"depends on the reference's lr\" when the "
            "reference activation's two best learning rates are not told apart on validation "
            "(unresolved, or inside the margin) and the verdict changes with the reference at "
            "its runner-up.",
            '"Depends on the lr choice" when it changes at the matched lr (every activation of a '
            "config at one grid point, the lr they all ran with the lowest median validation "
            "regret; one point over a family's configs for a trend) or with the lr chosen by the "
            "mean over seeds instead of the median: both are rows beside the headline ones.",
            "Errors are in %, differences in percentage points (pp), losses in nats, a language "
            "model's bpb in bits per byte (its loss over ln 2).",
        ]
    )


def loso_text(metric: str, loso: tuple[float, float]) -> str:
    """A leave-one-seed-out range (:func:`gelus.report.robust.loso_range`), "low to high" in the
    metric's difference units; "—" where it was not computed (NaN)."""
    if not all(math.isfinite(v) for v in loso):
        return "—"
    return f"{format_difference(metric, loso[0])} to {format_difference(metric, loso[1])}"


def p_text(p: float) -> str:
    return "—" if p != p else "< 0.001" if p < 0.001 else f"{p:.3f}"


def p_exact(p: float) -> str:
    """A sign-flip p, a multiple of 1/2ⁿ: to 4 significant digits (its floor 0.0625 at n = 5)."""
    return "—" if p != p else f"{p:.4g}"


def verdict_cell(c, design: Design) -> str:
    """The verdict word and its detail (which way, or the pairs the design's power would need),
    then its range with one seed left out, its marks: inside the margin, whether another defensible
    choice of the learning rate (the selection rule, the reference's own lr, the matched lr or
    the mean rule: :mod:`gelus.report.lr_choice`) would change it."""
    marks = [_verdict_detail(c, design)]
    if all(math.isfinite(v) for v in c.loso):  # judged with its marks (judge(marks=True))
        marks.append(f"one seed left out: {loso_text(c.metric, c.loso)}")
    if inside_margin(c, design.alpha):
        margin = format_difference(c.metric, EQUIVALENCE_MARGINS[c.metric])
        marks.append(f"{INSIDE_MARGIN} (±{margin.lstrip('+')})")
    if c.depends:
        marks.append(f"depends on the selection rule ({c.depends})")
    if c.reference_lr:
        marks.append(f"depends on the reference's lr ({c.reference_lr})")
    if c.lr_choice:
        marks.append(f"depends on the lr choice ({c.lr_choice})")
    return " — ".join(marks)


def _verdict_detail(c, design: Design) -> str:
    if c.verdict is Verdict.UNRESOLVED:
        power = percent(design.power)
        more = f"; ≈ {c.pairs_needed} pairs for {power} power" if c.pairs_needed else ""
        return f"{c.verdict} (n={len(c.seeds)}{more})"
    if c.verdict is Verdict.TIE:
        margin = EQUIVALENCE_MARGINS.get(c.metric, 0.0)
        return f"{c.verdict} (within ±{format_difference(c.metric, margin).lstrip('+')})"
    return f"{c.verdict} (p {design.correction} {p_text(c.p_holm)})"


def power_text(comparisons: Sequence[Any], design: Design = DESIGN) -> str:
    """What one Holm family of comparisons (one config's: the largest) can detect: the power
    with which a verdict over its m comparisons (at their usual n pairs) calls one real effect of 1 and 1.5 SD of its paired
    differences real, the others null (:func:`~gelus.report.robust.holm_power`), each with the
    lone test's (:func:`~gelus.report.stats.power`) beside it. "" without a testable comparison."""
    tested = [c for c in comparisons if not math.isnan(c.p)]
    if not tested:
        return ""
    sizes = [len(c.seeds) for c in tested]
    configs = [c.variant for c in tested]  # a Holm family per config: its m
    n = max(set(sizes), key=lambda k: (sizes.count(k), k))
    m = max(configs.count(config) for config in set(configs))
    found = "; ".join(
        f"{effect:g} SD: {holm_power(n, effect, m, design.alpha):.2f} "
        f"(a lone test: {power(n, effect, design.alpha):.2f})"
        for effect in (1.0, 1.5)
    )
    return (
        f"What these verdicts can detect: with n = {n} pairs and m = {m} comparison{'s' * (m > 1)} "
        f"({design.correction}), one real effect (in standard deviations of its paired "
        f"differences), the others null, is called real with power {found}."
    )


CLAIM = "moderate, less sensitive than some alternatives; stable across learning rates"


def sensitivity_claim(sens, aggregate: Aggregate = HEADLINE) -> str:
    """The seed documents' claim about GELU's learning-rate sensitivity judged in one sentence
    from the paired regret verdicts: its first half by which alternatives are shown more (▼
    worse) or less (▲ better) sensitive than the reference; "stable" by whether the reference's
    own regret (its aggregate over seeds) is within the metric's margin in every setting."""
    several = len({c.setting for c in sens.comparisons}) > 1
    words: dict[str, list[str]] = {"better": [], "worse": []}
    for c in sens.comparisons:
        if c.verdict.significant:
            where = f" ({c.setting})" if several and c.setting else ""
            words[c.verdict.word].append(c.treatment + where)
    # an activation shown so in several configs (two inits) is named once, with their count
    more, less = (
        [
            n + (f" (in {found.count(n)} configs)" if found.count(n) > 1 else "")
            for n in dict.fromkeys(found)
        ]
        for found in (words["worse"], words["better"])
    )  # more / less sensitive than the reference
    ref = sens.reference
    if more and not less:
        half = f"holds in part: {ref} is shown less sensitive than {', '.join(more)}"
    elif less and not more:
        are = "is" if len(less) == 1 else "are"
        half = f"is contradicted: {', '.join(less)} {are} shown less sensitive than {ref}"
    elif less and more:
        half = f"is mixed: {ref} is less sensitive than {', '.join(more)}, more than "
        half += ", ".join(less)
    else:
        half = f"is not shown: no alternative's regret is told apart from {ref}'s"
    margin = EQUIVALENCE_MARGINS.get(sens.metric)
    own = [
        aggregate.point([v for v in g.regrets[ref].values() if math.isfinite(v)])
        for g in sens.groups
        if ref in g.regrets
    ]
    shown = ", ".join(format_value(sens.metric, v) for v in own)
    if margin is None or not own:
        stable = f"{ref}'s stability has no margin to be judged against"
    else:
        bound = f"the margin {format_difference(sens.metric, margin).lstrip('+')}"
        if all(v <= margin for v in own):
            stable = f"{ref} is stable across them: its regret ({shown}) is within {bound}"
        else:
            stable = (
                f"{ref} is not stable across them: its regret ({shown}) is "
                f"{min(own) / margin:.0f}× {bound} or more"
            )
    return f"The seed documents' claim that {ref}'s learning-rate sensitivity is \"{CLAIM}\" {half}; {stable}."  # fmt: skip
