"""Does an activation's gap to the reference move with scale? A trend verdict over independent
cells.

At points i = 1..k of one axis (log₂ parameters, or log₂ tokens) each point is a cell: a config
whose seeds ran activation a and the reference r on the same data order, each at the lr chosen
for it there (the experiment's protocol), so the within-cell difference d_{s,i} = m(a, s, i) −
m(r, s, i) is a real pair and its mean g_i with v_i = s_i²/n_i is the cell's gap. Across points
nothing is paired (seed s at d 48 and at d 128 are different models): the slope is the OLS fit of
the cells' gaps on x,

    b = Σ_i w_i g_i,   w_i = (x_i − x̄) / Σ_j (x_j − x̄)²,   Var b = Σ_i w_i² v_i,

referred to Student's t on Welch–Satterthwaite degrees of freedom: the one-axis case of
:func:`gelus.report.factorial.factorial` (its docstring has the formulas). The verdict is
:func:`gelus.report.stats.adjust`'s, Holm across the activations: "▲ better" means a's gap to the
reference moves in a's favour as x grows (the metric's direction), "▼ worse" that it moves toward
the reference; a slope has no margin, so a trend is never a tie, only resolved or not. How often
the whole procedure, lr choice per point included, calls a trend where there is none is simulated
at the design that ran (:func:`gelus.report.factorial.simulate`; docs/REPORT.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from gelus.experiments.selection import Selection
from gelus.report.factorial import factorial
from gelus.report.stats import HEADLINE, Comparison

__all__ = ["trend"]


def trend(
    points: Sequence[tuple[float, Selection, Selection]],
    *,
    axis: str = "log₂ parameters",
    lower_is_better: bool = True,
    confidence: float = HEADLINE.confidence,
) -> Comparison:
    """The unadjusted trend comparison of one activation against the reference over ``points``
    ((x, activation's selection, reference's selection) per point of the axis, each point a cell
    with two or more finite pairs); pass the family's trends to
    :func:`gelus.report.stats.adjust` (``pairs=False``) for Holm and the verdict."""
    if not points:
        raise ValueError("trend: no points")
    (found,), _ = factorial(
        [((x,), t, b) for x, t, b in points],
        (axis,),
        lower_is_better=lower_is_better,
        confidence=confidence,
    )
    return found
