"""The report's first picture: every paired comparison of an experiment as its mean difference
with its interval (a forest plot, as in rliable's interval estimates), coloured by verdict.

One row per comparison (treatment − reference, on the seeds both ran), the point its mean paired
difference and the bar its t interval, coloured by its :class:`~gelus.report.metrics.Verdict`;
zero is drawn, the metric's tie margin shaded around it, and each comparison's marks
(:class:`~gelus.report.metrics.Mark`) written as glyphs at the right edge. Like the other figures,
:func:`plot_forest` takes an ``ax`` and returns it.
"""

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from gelus.report.metrics import METRICS, Mark, Verdict
from gelus.report.stats import DESIGN, Comparison, Design

__all__ = ["VERDICT_COLOURS", "comparison_label", "forest_figure", "plot_forest"]

VERDICT_COLOURS = {
    Verdict.BETTER: "#1a9850",  # green
    Verdict.WORSE: "#d73027",  # red
    Verdict.TIE: "#4575b4",  # blue
    Verdict.UNRESOLVED: "#8c8c8c",  # grey
}
_UNITS = {"%": "pp"}  # a difference of percentages is in percentage points


def comparison_label(c: Comparison, *, config: bool = True, setting: bool = True) -> str:
    """ "treatment − baseline", then the config, setting and lr where they tell rows apart."""
    parts = [f"{c.treatment} − {c.baseline}"]
    if config and c.variant:
        parts.append(c.variant)
    if setting and c.setting:
        parts.append(c.setting)
    if c.lr != "chosen":
        parts.append(f"lr={c.lr}")
    return ", ".join(parts)


def _scale(metric: str) -> tuple[float, str]:
    """(the factor the metric's differences are drawn with, their unit)."""
    found = METRICS.get(metric)
    if found is None:
        return 1.0, ""
    if found.unit == "%":
        return 100.0, "pp"
    return 1.0, found.unit


def plot_forest(
    ax: Axes,
    comparisons: Sequence[Comparison],
    design: Design = DESIGN,
    *,
    configs: bool | None = None,
) -> Axes:
    """Draw ``comparisons`` (one metric) top to bottom on ``ax``: the mean paired difference and
    its interval, coloured by verdict, zero and the tie margin, the marks as glyphs; a comparison
    without a testable difference (fewer than two pairs) is listed without a point. ``configs``:
    whether the labels name the config (default: where the comparisons hold several)."""
    if not comparisons:
        ax.set_axis_off()
        return ax
    metric = comparisons[0].metric
    factor, unit = _scale(metric)
    if configs is None:
        configs = len({c.variant for c in comparisons}) > 1
    settings = len({c.setting for c in comparisons}) > 1
    rows = list(range(len(comparisons)))[::-1]  # the first comparison on top
    margin = METRICS[metric].margin if metric in METRICS else None
    if margin:
        ax.axvspan(-margin * factor, margin * factor, color="#eeeeee", zorder=0, lw=0)
    ax.axvline(0.0, color="#222222", lw=0.9, zorder=1)
    glyphs = blended_transform_factory(ax.transAxes, ax.transData)
    for y, c in zip(rows, comparisons, strict=True):
        colour = VERDICT_COLOURS[c.verdict]
        if math.isfinite(c.mean):
            low, high = (v * factor for v in c.ci)
            if math.isfinite(low) and math.isfinite(high):
                ax.plot([low, high], [y, y], color=colour, lw=2.2, solid_capstyle="butt", zorder=2)
            filled = c.verdict is not Verdict.UNRESOLVED
            face = colour if filled else "white"
            point = {"ms": 6.5, "zorder": 3, "markerfacecolor": face, "markeredgewidth": 1.5}
            ax.plot([c.mean * factor], [y], "o", color=colour, **point)
        marks = "".join(m.value for m in c.marks(design.alpha))
        if marks:
            ax.text(1.01, y, marks, transform=glyphs, va="center", ha="left", fontsize=11)
    ax.set_yticks(rows)
    ax.set_yticklabels([comparison_label(c, config=configs, setting=settings) for c in comparisons])
    ax.set_ylim(-0.7, len(comparisons) - 0.3)
    better = "← treatment better" if comparisons[0].lower_is_better else "treatment better →"
    unit_text = f" ({unit})" if unit else ""
    ax.set_xlabel(f"treatment − reference, test {metric}{unit_text}\n{better}")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def _legend(fig: Figure, comparisons: Sequence[Comparison], design: Design, margin: bool) -> None:
    """The verdict colours present, the margin band and the glyphs used, below the axes."""
    present = [v for v in Verdict if any(c.verdict is v for c in comparisons)]
    handles = [
        Line2D([], [], marker="o", color=VERDICT_COLOURS[v], lw=2.2, label=str(v),
               markerfacecolor="white" if v is Verdict.UNRESOLVED else VERDICT_COLOURS[v])
        for v in present
    ]  # fmt: skip
    if margin:
        handles.append(Patch(color="#eeeeee", label="± tie margin"))
    used = [m for m in Mark if any(m in c.marks(design.alpha) for c in comparisons)]
    handles += [Line2D([], [], lw=0, label=f"{m.value} {m.meaning}") for m in used]
    columns = min(3, len(handles))
    place = {"loc": "outside lower center", "fontsize": 8, "frameon": False, "handlelength": 1.6}
    fig.legend(handles=handles, ncol=columns, **place)


def forest_figure(comparisons: Sequence[Comparison], title: str, design: Design = DESIGN) -> Figure:
    """One experiment's comparisons (its headline metric) as a forest plot with its legend: one
    panel per setting (dropout on and off differ by an order of magnitude, and a shared axis would
    flatten the smaller), each with its own x range."""
    settings = list(dict.fromkeys(c.setting for c in comparisons))
    groups = [[c for c in comparisons if c.setting == s] for s in settings]
    used = sum(any(m in c.marks(design.alpha) for c in comparisons) for m in Mark)
    present = len({c.verdict for c in comparisons})
    legend_rows = math.ceil((present + 1 + used) / 3)
    rows = sum(len(g) + 2.8 for g in groups)  # each panel's rows, its title and its axis
    fig = Figure(figsize=(6.4, 0.3 + 0.22 * rows + 0.2 * legend_rows), layout="constrained")
    axes = fig.subplots(len(groups), 1, height_ratios=[len(g) + 1.2 for g in groups], squeeze=False)
    configs = len({c.variant for c in comparisons}) > 1
    for ax, setting, group in zip(axes[:, 0], settings, groups, strict=True):
        plot_forest(ax, group, design, configs=configs)
        ax.set_title(setting or title, fontsize=9, loc="left")
    if len(groups) > 1:
        fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    metric = comparisons[0].metric if comparisons else ""
    _legend(fig, comparisons, design, margin=bool(METRICS.get(metric) and METRICS[metric].margin))
    return fig
