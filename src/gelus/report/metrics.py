"""What the report judges with: one table of metrics and the verdict and mark types.

Every metric a table judges is one row of :data:`METRICS`: its direction (lower is better for a
loss or an error, higher for an accuracy), the equivalence margin inside which a difference is a
tie (TOST) and its unit as the report writes it. A verdict is a :class:`Verdict`, never a string
to be parsed; a judged comparison's marks are :class:`Mark` values
(:attr:`gelus.report.stats.Comparison.marks`). This module imports nothing of the report, so every
other module can use it.
"""

import enum
import math
from typing import NamedTuple

__all__ = ["METRICS", "ClaimVerdict", "Mark", "Metric", "Verdict", "lower_is_better", "margin"]


class Metric(NamedTuple):
    """One metric the report judges: which way is better, its tie margin, its unit."""

    name: str
    lower_is_better: bool
    margin: float | None  # a difference within ±margin is a tie (TOST); None: no tie is judged
    unit: str  # as the tables write it: "%" (a fraction shown as a percentage) or the unit's name


# Margins: losses in nats (0.01), error and accuracy as fractions (0.5 percentage points),
# reconstruction error in MSE units. Bits per byte are the loss over ln 2, so the loss's 0.01 nats
# is 0.01/ln 2 ≈ 0.0144 bits (a tie in one unit is a tie in the other). The robustness area
# ("error·a", claims.py: test error integrated over the noise half-width a ∈ [0, 3]) gets the
# error's 0.5 pp held across the whole range, 0.005 × 3 = 0.015 (the committed areas are 1.3–1.9
# with seed SDs 0.008–0.043).
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("loss", True, 0.01, "nats"),
        Metric("bpb", True, 0.01 / math.log(2), "bits per byte"),
        Metric("error", True, 0.005, "%"),
        Metric("accuracy", False, 0.005, "%"),
        Metric("recon_error", True, 0.0005, "MSE"),
        Metric("error·a", True, 0.005 * 3, "error·a"),
    )
}


def lower_is_better(metric: str) -> bool:
    """The metric's direction; a metric outside :data:`METRICS` is taken as a loss (lower)."""
    found = METRICS.get(metric)
    return found.lower_is_better if found else True


def margin(metric: str) -> float | None:
    """The metric's tie margin, None where it has none."""
    found = METRICS.get(metric)
    return found.margin if found else None


class Verdict(enum.StrEnum):
    """A paired comparison's verdict after Holm: its value is the symbol and word the tables show
    (a ``str``, so that it prints and compares as the report writes it)."""

    BETTER = "▲ better"
    WORSE = "▼ worse"
    TIE = "= tie"
    UNRESOLVED = "· unresolved"

    @property
    def word(self) -> str:
        return self.value.split(" ", 1)[1]

    @property
    def symbol(self) -> str:
        return self.value.split(" ", 1)[0]

    @property
    def significant(self) -> bool:
        return self in (Verdict.BETTER, Verdict.WORSE)

    def flipped(self) -> "Verdict":
        """The verdict read the other way round (better ↔ worse; a tie stays a tie)."""
        return {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}.get(self, self)


class ClaimVerdict(enum.StrEnum):
    """A claim of the paper checked as a set of paired comparisons."""

    HOLDS = "✓ holds"
    CONTRADICTED = "✗ contradicted"
    UNRESOLVED = "· unresolved"
    NOT_RUN = "— not run"

    @property
    def word(self) -> str:
        return self.value.split(" ", 1)[1]


class Mark(enum.Enum):
    """What a judged comparison is marked with beside its verdict; the value is the glyph the
    forest figure draws and the verdict table shows."""

    SELECTION_RULE = "§"  # another lr-selection rule gives another verdict
    REFERENCE_LR = "‡"  # the reference at its runner-up lr gives another verdict
    INSIDE_MARGIN = "≈"  # significant, but the difference is inside the metric's margin
    LR_CHOICE = "¶"  # at the matched lr or under the mean rule another verdict (lr_choice.py)

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    Mark.SELECTION_RULE: "depends on the selection rule",
    Mark.REFERENCE_LR: "depends on the reference's lr",
    Mark.INSIDE_MARGIN: "significant but inside the margin",
    Mark.LR_CHOICE: "depends on the lr choice (matched lr, mean rule)",
}
