"""The trend figure: an activation's gap to the reference against the scale (or budget) axis.

One panel per activation: each seed's within-cell gap as a dot, each cell's mean gap with its t
interval, the least-squares fit of the cells' means bold (the slope the trend verdict tests), 0
(no gap) dashed. No line joins a seed across cells: seed s at two sizes are different models.
Plot functions take an ``ax`` and return it, as in :mod:`gelus.report.figures`.
"""

import math
import textwrap
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from gelus.plots.palette import color_for
from gelus.report.axes import UNITS, AxisResult, Trend
from gelus.report.figures import METRIC_LABELS

__all__ = ["base_metric", "plot_trend", "trend_figure"]

_PERCENT = {"error", "accuracy"}  # stored as fractions, drawn as percentages


def base_metric(trend: Trend) -> str:
    """The metric whose gap the trend fits ("bpb" of "bpb gap per unit of log₂ parameters")."""
    return trend.comparison.metric.split(" gap per unit of ")[0]


def _size(n: float) -> str:
    """A count as the axis' tick says it: 1.2 M, 350 k, 2.1 G."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def plot_trend(ax: Axes, trend: Trend, *, title: str = "") -> Axes:
    """The trend's cells: each seed's within-cell gap as a dot (no line joins a seed across cells:
    they are different models), each cell's mean gap with its t interval, the least-squares fit
    of the cells' gaps bold (the slope the verdict tests); x in log₂ of the axis' unit, labelled
    with the counts."""
    from scipy import stats

    metric = base_metric(trend)
    scale = 100.0 if metric in _PERCENT else 1.0
    x = np.asarray(trend.x, dtype=float)
    color = color_for(trend.comparison.treatment)
    for xi, cell in zip(x, trend.cells, strict=True):
        ax.scatter(
            [xi] * len(cell.differences),
            scale * np.asarray(cell.differences),
            s=12,
            color=color,
            alpha=0.45,
        )
        half = float(stats.t.ppf(0.975, len(cell.seeds) - 1)) * math.sqrt(cell.variance)
        ax.errorbar(xi, scale * cell.mean, yerr=scale * half, fmt="o", color=color, capsize=3)
    if trend.cells:
        fit = np.polyfit(x, [scale * cell.mean for cell in trend.cells], 1)
        ax.plot(x, np.polyval(fit, x), color=color, linewidth=2.2)
    ax.axhline(0.0, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_xticks(x, [_size(2.0**v) for v in x], fontsize=7)
    c = trend.comparison
    ax.set_ylabel(f"{c.treatment} − {c.baseline}, " + METRIC_LABELS.get(metric, metric), fontsize=8)
    ax.set_title(title or c.treatment, fontsize=9)
    ax.grid(alpha=0.3)
    return ax


def trend_figure(result: AxisResult, title: str) -> Figure | None:
    """One panel per trend of ``result`` on its first metric (the headline); None without, or for
    a factorial family (its cells are a table)."""
    if result.family.kind not in UNITS:
        return None
    trends: Sequence[Trend] = [t for t in result.trends if t.gaps]
    trends = [t for t in trends if t.comparison.metric == trends[0].comparison.metric] if trends else []  # fmt: skip
    if not trends:
        return None
    width = 3.2 * len(trends) + 0.6
    fig = Figure(figsize=(width, 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(trends), squeeze=False)[0])
    several = len({t.comparison.setting for t in trends}) > 1
    for ax, t in zip(axes, trends, strict=True):
        setting = f" ({t.comparison.setting})" if several and t.comparison.setting else ""
        plot_trend(ax, t, title=t.comparison.treatment + setting)
        ax.set_xlabel(f"{UNITS[result.family.kind]} (log₂ scale)", fontsize=8)
    text = (
        f"{title}: gap to {trends[0].comparison.baseline} against "
        f"{UNITS[result.family.kind]}; seeds as dots, each cell's mean with its 95 % t interval, the "
        "least-squares fit of the cells' means bold"
    )
    fig.suptitle(textwrap.fill(text, width=int(width * 15)), fontsize=9)  # ~15 characters an inch
    return fig
