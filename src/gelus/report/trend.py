"""Does an activation's gap to the reference move with scale? A trend verdict, paired by seed.

At points i = 1..k of a scale axis with coordinates x_i (log parameters, or log tokens), each
seed s gives the paired gap of activation a to the reference r, each side at the lr chosen for
it at that point (the experiment's protocol),

    d_{s,i} = m(a, s, i) − m(r, s, i),

and the seed's least-squares slope of the gap on x,

    b_s = Σ_i (x_i − x̄)(d_{s,i} − d̄_s) / Σ_i (x_i − x̄)²,

the change of the gap per unit of x (per doubling when x = log₂). The verdict is the paired
test's on the slopes against 0 (the same t-test, Holm across the activations through
:func:`gelus.report.stats.adjust`): "▲ better" means a's gap to the reference shrinks in a's
favour as x grows (the metric's direction), "▼ worse" that it moves toward the reference; no
slope margin is set, so a trend is never declared a tie, only resolved or not. A seed enters only
if both of its runs are finite at every point. How often the whole procedure, lr choice per point
included, calls a trend where there is none is measured by simulation in
``tests/report/test_trend.py`` (docs/REPORT.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from gelus.experiments.selection import Selection
from gelus.report.stats import Comparison, compare_paired

__all__ = ["seed_slopes", "trend"]


def seed_slopes(x: Sequence[float], gaps: Mapping[int, Sequence[float]]) -> dict[int, float]:
    """seed -> least-squares slope of its gaps (one per point, in the order of ``x``) on ``x``."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError(f"a slope needs two distinct points on the axis, got {x.tolist()}")
    centred = x - x.mean()
    return {
        seed: float(centred @ (np.asarray(d, dtype=np.float64) - np.mean(d)) / (centred @ centred))
        for seed, d in gaps.items()
    }


def trend(
    points: Sequence[tuple[float, Selection, Selection]],
    *,
    axis: str = "log₂ parameters",
    lower_is_better: bool = True,
) -> Comparison:
    """The unadjusted trend comparison of one activation against the reference over ``points``
    ((x, activation's selection, reference's selection) per point of the axis); pass the family's
    trends to :func:`gelus.report.stats.adjust` for Holm and the verdict."""
    if not points:
        raise ValueError("trend: no points")
    x = [point[0] for point in points]
    seeds = set.intersection(*(set(t.values) & set(b.values) for _, t, b in points))
    gaps = {
        seed: [t.values[seed] - b.values[seed] for _, t, b in points]
        for seed in sorted(seeds)
        if all(math.isfinite(v) for _, t, b in points for v in (t.values[seed], b.values[seed]))
    }
    slopes = seed_slopes(x, gaps)
    _, first, reference = points[0]
    metric = f"{first.metric} gap per unit of {axis}"
    shared = {"metric": metric, "variant": f"trend over {axis}", "lr_selected": True}
    treatment = first._replace(values=slopes, **shared)
    zero = reference._replace(values=dict.fromkeys(slopes, 0.0), **shared)
    found = compare_paired(treatment, zero, lower_is_better=lower_is_better)
    return found._replace(baseline=reference.activation, diverged=len(seeds) - len(slopes))
