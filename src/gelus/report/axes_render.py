"""The report's sections over axes: the interaction tables of categorical families and the
trend tables and figures of scale and budget families (:mod:`gelus.report.axes`), with sentences
written from the verdicts alone.
"""

from collections.abc import Sequence
from pathlib import Path

from gelus.report.axes import AXES, AxisResult, Family, Trend
from gelus.report.axes_figure import base_metric, trend_figure
from gelus.report.blocks import Block
from gelus.report.factorial_render import factorial_blocks
from gelus.report.folklore import init_claims, scale_claim, warmup_claim
from gelus.report.lr_choice import alternatives_text
from gelus.report.robust import INSIDE_MARGIN, inside_margin
from gelus.report.stats import EQUIVALENCE_MARGINS, Aggregate, Comparison, Design
from gelus.report.words import format_difference, interval, p_exact, p_text, verdict_cell

__all__ = [
    "axes_blocks",
    "axes_figures",
    "effect_sentence",
    "interaction_sentence",
    "trend_sentence",
]

_POINT = {"scale": "size", "budget": "budget"}


def _word(c: Comparison) -> str:
    return c.verdict.word


def interaction_sentence(c: Comparison, design: Design) -> str:
    """One interaction's verdict in words: which way the gap moves, by how much, with its
    adjusted p; a tie with its margin; unresolved with its p."""
    first, _, second = c.variant.partition(" vs ")
    where = f", {c.setting}" if c.setting else ""
    gap = f"The gap of {c.treatment} to {c.baseline} (test {c.metric}{where})"
    amount = f"{format_difference(c.metric, c.mean)} {interval(c.metric, c.ci, difference=True)}"
    p = f"p {design.correction} {p_text(c.p_holm)}"
    word = _word(c)
    if word in ("better", "worse"):
        way = f"in {c.treatment}'s favour" if word == "better" else f"against {c.treatment}"
        if inside_margin(c, design.alpha):
            margin = format_difference(c.metric, EQUIVALENCE_MARGINS[c.metric]).lstrip("+")
            way += f", {INSIDE_MARGIN} (±{margin})"
        return f"{gap} under {first} differs from under {second}: by {amount}, {way} ({p})."
    if word == "tie":
        margin = format_difference(c.metric, EQUIVALENCE_MARGINS.get(c.metric, 0.0))
        return f"{gap} is the same under {first} and {second} within ±{margin.lstrip('+')}."
    return f"{gap}: whether it differs between {first} and {second} is unresolved ({p})."


def effect_sentence(c: Comparison, design: Design) -> str:
    """One activation's change from the base value to another in words: which way, by how much,
    with its adjusted p and the runs that diverged; a tie with its margin; unresolved with its p."""
    value, _, base = c.variant.partition(" vs ")
    where = f", {c.setting}" if c.setting else ""
    subject = f"{c.treatment} (test {c.metric}{where}) under {value}"
    amount = f"{format_difference(c.metric, c.mean)} {interval(c.metric, c.ci, difference=True)}"
    p = f"p {design.correction} {p_text(c.p_holm)}"
    diverged = f"; {c.diverged} seed{'s' * (c.diverged > 1)} diverged" if c.diverged else ""
    word = _word(c)
    if word in ("better", "worse"):
        inside = f", {INSIDE_MARGIN}" if inside_margin(c, design.alpha) else ""
        return f"{subject} is {word} than under {base}: {amount}{inside} ({p}{diverged})."
    if word == "tie":
        margin = format_difference(c.metric, EQUIVALENCE_MARGINS.get(c.metric, 0.0))
        return f"{subject} is the same as under {base} within ±{margin.lstrip('+')}{diverged}."
    return f"{subject} against under {base}: unresolved ({p}{diverged})."


def _pairs_blocks(
    title: str, how: str, columns: tuple[str, str], comparisons, words, aggregate, design
) -> list[Block]:
    """A table of comparisons between two values of an axis, one row each (``columns``: the first
    column's and the mean's headings), its reading ``how`` above and ``words`` below."""
    headers = (
        columns[0], "values", "setting", "metric", "n pairs", columns[1],
        f"{aggregate.level} CI (t)", "p", "p (sign-flip)", f"p ({design.correction})", "verdict",
    )  # fmt: skip
    rows = tuple(
        (c.treatment if columns[0] == "activation" else f"{c.treatment} − {c.baseline}", c.variant,
         c.setting or "—", f"test {c.metric}",
         str(len(c.seeds)) + (f" ({c.diverged} diverged)" if c.diverged else ""),
         *_cells(c, c.metric, design))
        for c in comparisons
    )  # fmt: skip
    table = Block("table", headers=headers, rows=rows)
    return [Block("h3", title), Block("p", how), table, Block("p", words)]


def _effect_blocks(result: AxisResult, aggregate: Aggregate, design: Design) -> list[Block]:
    how = (
        "Each activation under the first of two values against itself under the second (each "
        f"config at its own chosen lr), paired by seed, for every pair of values; {design.test}, "
        f"{design.correction} over this table's comparisons of one metric. ▲ better: the first "
        "value does better for the activation."
    )
    words = " ".join(effect_sentence(c, design) for c in result.effects)
    title = f"Each activation across {', '.join(result.family.keys)}"
    columns = ("activation", "mean difference")
    return _pairs_blocks(title, how, columns, result.effects, words, aggregate, design)


def _holds_text(t: Trend, kind: str) -> str:
    """Where the per-point verdict holds: "better than gelu at 3 of 3 sizes"."""
    total = sum(t.holds.values())
    point = _POINT[kind] + "s" * (total > 1)
    return ", ".join(
        f"{word} than {t.comparison.baseline}" * (word in ("better", "worse"))
        + word * (word not in ("better", "worse"))
        + f" at {n} of {total} {point}"
        for word, n in t.holds.items()
    )


def trend_sentence(t: Trend, kind: str, design: Design) -> str:
    """One activation's trend in words: where its per-point verdict holds, and whether the trend
    is resolved (which way, per doubling, with its adjusted p)."""
    c, metric = t.comparison, base_metric(t)
    where = f" ({c.setting})" if c.setting else ""
    holds = f"{_holds_text(t, kind)}; " if t.holds else ""
    slope = f"{format_difference(metric, c.mean)} per doubling"
    p = f"p {design.correction} {p_text(c.p_holm)}"
    word = _word(c)
    if word in ("better", "worse"):
        way = f"in {c.treatment}'s favour" if word == "better" else f"against {c.treatment}"
        return (
            f"{c.treatment}{where}, test {metric}: {holds}the trend over {AXES[kind]} is resolved: "
            f"its gap to {c.baseline} moves {way}, {slope} ({p})."
        )
    return (
        f"{c.treatment}{where}, test {metric}: {holds}the trend over {AXES[kind]} is not "
        f"resolved ({slope}, {p})."
    )


def _family_text(family: Family) -> str:
    keys = ", ".join(family.keys)
    values = "; ".join(family.labels)
    n, t = family.at
    at = f", each of {int(n):,} weights trained on {int(t):,} tokens" if None not in (n, t) else ""
    held = f", all at {family.held}" if family.held else ""
    return f"Configs that differ in {keys} only{at}{held}: {values}."


def _cells(c: Comparison, metric: str, design: Design) -> tuple[str, ...]:
    return (
        format_difference(metric, c.mean), interval(metric, c.ci, difference=True), p_text(c.p),
        p_exact(c.p_sign), p_text(c.p_holm), verdict_cell(c, design),
    )  # fmt: skip


def _interaction_blocks(result: AxisResult, aggregate: Aggregate, design: Design) -> list[Block]:
    family, comparisons = result.family, result.comparisons
    reference = comparisons[0].baseline
    how = (
        f"{_family_text(family)} Per seed, each activation's gap to {reference} (each config at "
        f"its own chosen lr) under the first of the two values minus under the second, "
        f"dd = (a − {reference})_first − (a − {reference})_second, for every pair of values; "
        f"{design.test}, {design.correction} over this table's comparisons of one metric. ▲ "
        f"better: the activation gains more on {reference} under the first value; ▼ worse: "
        "less; = tie: the gap moves by less than the metric's margin (TOST)."
    )
    words = " ".join(interaction_sentence(c, design) for c in comparisons)
    title = f"Interaction over {', '.join(family.keys)}"
    columns = ("comparison", "mean difference of differences")
    return _pairs_blocks(title, how, columns, comparisons, words, aggregate, design)


def _trend_blocks(result: AxisResult, aggregate: Aggregate, design: Design) -> list[Block]:
    family, trends = result.family, result.trends
    axis = AXES[family.kind]
    how = (
        f"{_family_text(family)} Per seed, the least-squares slope of each activation's gap to "
        f"{trends[0].comparison.baseline} (each point at its own chosen lr) on {axis}: the change "
        f"of the gap per doubling; {design.test} of the slopes against 0, {design.correction} "
        "over this table's activations of one metric. ▲ better: the gap moves in the "
        "activation's favour as the axis grows; ▼ worse: toward the reference; a slope has no "
        "margin, so no tie."
    )
    headers = (
        "activation", "setting", "metric", "points", "n seeds", "mean slope per doubling",
        f"{aggregate.level} CI (t)", "p", "p (sign-flip)", f"p ({design.correction})", "verdict",
        "per-point verdicts",
    )  # fmt: skip
    rows = []
    for t in trends:
        c, metric = t.comparison, base_metric(t)
        seeds = str(len(c.seeds)) + (f" ({c.diverged} diverged left out)" if c.diverged else "")
        total = sum(t.holds.values())
        holds = ", ".join(f"{w} at {n} of {total}" for w, n in t.holds.items()) or "—"
        row = (c.treatment, c.setting or "—", f"test {metric}", str(len(t.x)), seeds)
        rows.append((*row, *_cells(c, metric, design), holds))
        for a in t.alternatives:  # at the matched lr, under the mean rule (lr_choice)
            row = (f"{c.treatment} ({a.lr})", c.setting or "—", f"test {metric}", str(len(t.x)))
            rows.append((*row, str(len(a.seeds)), *_cells(a, metric, design), "—"))
    words = " ".join(trend_sentence(t, family.kind, design) for t in trends)
    if any(t.alternatives for t in trends):
        words += " " + alternatives_text("trend")
    title = f"Trend over {axis}"
    table = Block("table", headers=headers, rows=tuple(rows))
    claim = [Block("p", text)] if (text := scale_claim(result)) else []
    return [Block("h3", title), Block("p", how), table, Block("p", words), *claim]


def axes_blocks(
    results: Sequence[AxisResult],
    figures: Sequence[tuple[Path, str] | None],
    aggregate: Aggregate,
    design: Design,
) -> list[Block]:
    """The sections of an experiment's axis families, in order; ``figures``: each family's trend
    figure (PNG, caption), None for none."""
    blocks = []
    for result, figure in zip(results, figures, strict=True):
        if result.family.kind == "categorical":
            blocks += _interaction_blocks(result, aggregate, design) if result.comparisons else []
            blocks += _effect_blocks(result, aggregate, design) if result.effects else []
            blocks += [Block("p", text) for text in init_claims(result)]
            blocks += [Block("p", text)] if (text := warmup_claim(result)) else []
        elif result.family.kind == "factorial":
            blocks += factorial_blocks(result, aggregate, design)
        else:
            blocks += _trend_blocks(result, aggregate, design)
        if figure is not None:
            blocks.append(Block("figure", figure[1], image=figure[0]))
    return blocks


def axes_figures(
    results: Sequence[AxisResult], out: Path, stem: str, title: str
) -> list[tuple[Path, str] | None]:
    """Each family's trend figure saved as ``out/stem-trend-i`` (PNG and SVG), with its caption;
    None for a categorical family."""
    from gelus.plots.io import save_figure

    saved: list[tuple[Path, str] | None] = []
    for i, result in enumerate(results):
        fig = trend_figure(result, title) if result.trends else None
        if fig is None:
            saved.append(None)
            continue
        png, _ = save_figure(fig, out, f"{stem}-trend-{i}")
        # Figure.get_suptitle arrived in matplotlib 3.8; 3.7 is supported
        caption = fig.get_suptitle() if hasattr(fig, "get_suptitle") else f"{title}: trend"
        saved.append((png, " ".join(caption.split())))
    return saved
