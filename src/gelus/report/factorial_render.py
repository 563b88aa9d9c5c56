"""The report's section of a factorial family (:mod:`gelus.report.factorial`): each activation's
gap to the reference on log₂ N and log₂ T fitted together over the cells, its slopes' table, the
cells' gaps with their lrs and grid-edge flags, the sentences, and the procedure's error rate and
power simulated at the design that ran.
"""

from collections import defaultdict
from collections.abc import Sequence

from gelus.report.axes import FACTORIAL_AXES, AxisResult, Trend
from gelus.report.blocks import Block
from gelus.report.factorial import fit_slopes, rates_at_design
from gelus.report.folklore import scale_claim
from gelus.report.stats import Aggregate, Design
from gelus.report.words import format_difference, interval, p_text, verdict_cell

__all__ = ["factorial_blocks", "factorial_sentence"]

_PER = {FACTORIAL_AXES[0]: "N", FACTORIAL_AXES[1]: "T"}  # a slope's axis, by the letter


def _axis(t: Trend) -> str:
    return t.comparison.metric.split(" gap per unit of ")[1]


def _metric(t: Trend) -> str:
    return t.comparison.metric.split(" gap per unit of ")[0]


def factorial_sentence(slopes: Sequence[Trend], design: Design) -> str:
    """One activation's two slopes in words: per doubling of N and of T, each with its interval,
    verdict word and adjusted p."""
    c, metric = slopes[0].comparison, _metric(slopes[0])
    where = f" ({c.setting})" if c.setting else ""
    parts = [
        f"per doubling of {_PER[_axis(t)]} {format_difference(metric, t.comparison.mean)} "
        f"{interval(metric, t.comparison.ci, difference=True)} ({t.comparison.verdict.word}, "
        f"p {design.correction} {p_text(t.comparison.p_holm)})"
        for t in slopes
    ]
    return (
        f"{c.treatment}{where}, test {metric}: its gap to {c.baseline} moves "
        + "; ".join(parts)
        + "."
    )


def _slope_rows(trends: Sequence[Trend], aggregate: Aggregate, design: Design) -> list[tuple]:
    """One row per slope (its Welch–Satterthwaite df refitted from its cells), each followed by
    its rows at the matched lr and under the mean rule where they were judged."""
    rows = []
    for t in trends:
        metric, slope = _metric(t), _PER[_axis(t)]
        df = fit_slopes(t.cells, aggregate.confidence)[FACTORIAL_AXES.index(_axis(t))].df
        for c, label in (
            (t.comparison, t.comparison.treatment),
            *((a, f"{a.treatment} ({a.lr})") for a in t.alternatives),
        ):
            rows.append(
                (
                    label,
                    c.setting or "—",
                    f"test {metric}",
                    f"per doubling of {slope}",
                    str(len(t.cells)),
                    str(len(c.seeds)) + (f" ({c.diverged} left out)" if c.diverged else ""),
                    format_difference(metric, c.mean),
                    interval(metric, c.ci, difference=True),
                    f"{df:.1f}" if c is t.comparison else "—",
                    p_text(c.p),
                    p_text(c.p_holm),
                    verdict_cell(c, design),
                )
            )
    return rows


def _cell_rows(trends: Sequence[Trend], confidence: float) -> list[tuple]:
    """Per activation (its first slope's cells, the headline metric) and cell: the gap with its
    t interval, the lrs, the grid-edge flag."""
    from scipy import stats

    rows = []
    for t in trends:
        metric = _metric(t)
        for cell in t.cells:
            n = len(cell.seeds)
            half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * cell.variance**0.5
            rows.append(
                (
                    t.comparison.treatment,
                    cell.variant,
                    f"{2 ** cell.coordinates[0]:,.0f}",
                    f"{2 ** cell.coordinates[1]:,.0f}",
                    str(n),
                    format_difference(metric, cell.mean),
                    interval(metric, (cell.mean - half, cell.mean + half), difference=True),
                    f"{cell.lr:g}",
                    f"{cell.reference_lr:g}",
                    cell.edge or "—",
                )
            )
    return rows


def _rates_text(trends: Sequence[Trend], aggregate: Aggregate, design: Design) -> str:
    """The simulated family-wise error and power at this design (the headline metric's cells),
    drawn from the aggregate's generator of this family."""
    by_activation: dict[str, list[Trend]] = defaultdict(list)
    for t in trends:
        by_activation[t.comparison.treatment].append(t)
    slopes = list(by_activation.values())
    cells = [s[0].cells for s in slopes]
    observed = [[t.comparison.mean for t in s] for s in slopes]
    first = trends[0].comparison
    rng = aggregate.rng("factorial simulation", first.experiment, first.variant, first.metric)
    found = rates_at_design(cells, observed, rng=rng, alpha=design.alpha)
    if found is None:
        return ""
    worst, power = found
    said = "; ".join(
        f"{s[0].comparison.treatment} "
        + ", ".join(f"b_{_PER[_axis(t)]} {100 * p:.0f} %" for t, p in zip(s, row, strict=True))
        for s, row in zip(slopes, power, strict=True)
    )
    return (
        "Simulated at this design (these cells, their seeds and spreads, each side's lr chosen per "
        "cell among 3 on validation, 2,000 families each): a slope is called where there is none "
        f"in {100 * worst:.1f} % of null families (the worst of lr grids 0, 1 and 3 run sds deep; "
        f"the design's α {design.alpha:g}); with the observed slopes true, each is called in its "
        f"direction with probability {said}."
    )


def _how(result: AxisResult, design: Design) -> str:
    family, reference = result.family, result.trends[0].comparison.baseline
    return (
        f"Configs that differ in {', '.join(family.keys)} only: {'; '.join(family.labels)}. Per "
        f"config (a cell) each activation's gap to {reference}: the mean over seeds of the paired "
        "difference within the cell (same seed, same data order; each side at its own chosen lr), "
        "with its variance s²/n; across cells nothing is paired (a seed at one size and at "
        "another are different models). The gaps are fitted by least squares over the cells, "
        "gap = a + b_N·log₂ N + b_T·log₂ T, each slope with the variance Σ w²·s²/n of its cell "
        f"weights w and Welch–Satterthwaite degrees of freedom (df); {design.correction} over "
        "this table's activations × slopes of one metric. ▲ better: the gap moves in the "
        "activation's favour per doubling; ▼ worse: toward the reference; a slope has no margin."
    )


def factorial_blocks(result: AxisResult, aggregate: Aggregate, design: Design) -> list[Block]:
    """The factorial family's section: how it is fitted, the slopes' table (with the rows at the
    matched lr and under the mean rule, where judged), the sentences, the simulated rates, and
    the headline metric's cells (gap, interval, lrs, grid edge)."""
    trends = result.trends
    reference, headline = trends[0].comparison.baseline, _metric(trends[0])
    level, correction = aggregate.level, design.correction
    headers = ("activation", "setting", "metric", "slope", "cells", "n seeds", "per doubling")
    headers += (f"{level} CI (t)", "df", "p", f"p ({correction})", "verdict")
    slopes = Block("table", headers=headers, rows=tuple(_slope_rows(trends, aggregate, design)))
    grouped: dict[tuple, list[Trend]] = defaultdict(list)
    for t in trends:
        grouped[(t.comparison.treatment, t.comparison.setting, _metric(t))].append(t)
    words = " ".join(factorial_sentence(s, design) for s in grouped.values())
    cell_headers = ("activation", "config", "N", "T", "n pairs", "gap", f"{level} CI (t)", "lr")
    cell_headers += (f"{reference} lr", "at the grid's edge")
    firsts = [s[0] for key, s in grouped.items() if key[2] == headline]
    rows = tuple(_cell_rows(firsts, aggregate.confidence))
    rates = _rates_text([t for t in trends if _metric(t) == headline], aggregate, design)
    edges = (
        f"Each cell's gap (test {headline}), lrs and grid edge: an lr at its cell's grid edge may "
        "have a better value beyond the grid."
    )
    return [
        Block("h3", "Gap over size and training length together"),
        Block("p", _how(result, design)),
        slopes,
        Block("p", words),
        *([Block("p", claim)] if (claim := scale_claim(result)) else []),
        *([Block("p", rates)] if rates else []),
        Block("p", edges),
        Block("table", headers=cell_headers, rows=rows),
    ]
