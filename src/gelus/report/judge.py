"""The one way a set of paired comparisons becomes verdicts, and the one way a verdict is judged
again under every lr-selection rule.

:func:`judge` is used by the per-config tables (:mod:`gelus.report.analysis`), the axis tables
(:mod:`gelus.report.axes`), the paper's claims (:mod:`gelus.report.claims`) and the learning-rate
sensitivity table: Holm over each family, the verdict (:class:`~gelus.report.metrics.Verdict`),
the pairs an unresolved one needs, the exact sign-flip p and the leave-one-seed-out range.
:func:`rule_dependence` recomputes verdicts with the lr every selection rule the records allow
chooses and says, per verdict, where the rules disagree.
"""

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from gelus.experiments.protocol import SELECTION_RULES, Protocol
from gelus.experiments.selection import Selection
from gelus.report.metrics import Verdict
from gelus.report.robust import robust_marks
from gelus.report.stats import (
    DESIGN,
    HEADLINE,
    Aggregate,
    Comparison,
    Design,
    adjust,
    compare_paired,
    rule_disagreement,
)

__all__ = ["applicable_rules", "judge", "judge_pairs", "rule_dependence"]


def judge(
    tests: Sequence[Comparison],
    design: Design = DESIGN,
    aggregate: Aggregate = HEADLINE,
    *,
    families: Sequence[Hashable] | None = None,
    marks: bool = True,
) -> list[Comparison]:
    """The unadjusted ``tests`` judged: Holm over each family (``families[i]`` names the family of
    ``tests[i]``; None: one family), the verdict by the adjusted p and TOST; with ``marks`` also
    the pairs an unresolved verdict needs, the sign-flip p and the leave-one-seed-out range (a
    verdict recomputed only for its word goes without). The order of ``tests`` is kept."""
    keys = list(families) if families is not None else [None] * len(tests)
    judged: dict[int, Comparison] = {}
    for family in dict.fromkeys(keys):
        index = [i for i, key in enumerate(keys) if key == family]
        adjusted = adjust([tests[i] for i in index], design, pairs=marks)
        if marks:
            adjusted = robust_marks(adjusted, aggregate)
        judged.update(zip(index, adjusted, strict=True))
    return [judged[i] for i in range(len(tests))]


def judge_pairs(
    pairs: Sequence[tuple[Selection, Selection]],
    design: Design = DESIGN,
    aggregate: Aggregate = HEADLINE,
    *,
    by_config: bool = True,
    marks: bool = True,
) -> list[Comparison]:
    """(treatment, reference) selections compared on the seeds both ran (the metric's direction
    from the metrics table) and :func:`judge`-d, one Holm family per config with ``by_config``
    (the runs of another init or size change no verdict of this one's), else one family."""
    tests = [compare_paired(t, b, aggregate=aggregate) for t, b in pairs]
    families = [t.config_hash for t, _ in pairs] if by_config else None
    return judge(tests, design, aggregate, families=families, marks=marks)


def applicable_rules(records: Sequence[Any], protocol: Protocol) -> list[str]:
    """The rules of ``SELECTION_RULES`` the records allow (a best-epoch rule needs epochs)."""
    recorded = {(r.split, r.metric) for r in records}
    epochs = {r.epoch for r in records}
    return [
        name
        for name, (metric, epoch) in SELECTION_RULES.items()
        if (protocol.select_split, metric) in recorded and not (epoch == "best" and len(epochs) < 2)
    ]  # e.g. the noise experiment's kept models: only the last epoch was evaluated


def rule_dependence(
    records: Sequence[Any],
    protocol: Protocol,
    verdicts_under: Callable[[Protocol], Mapping[Hashable, Verdict | Any]],
) -> Callable[[Hashable], str]:
    """Judge again under every selection rule the records allow: ``verdicts_under(protocol)``
    gives {key: verdict} with the lr that protocol chooses; returns a function of a key that says
    each rule's verdict where they disagree ("val-loss-last better, val-error-last tie"), ""
    where they agree or no rule formed it."""
    by_rule = (
        {
            rule: verdicts_under(protocol.with_rule(rule))
            for rule in applicable_rules(records, protocol)
        }
        if records
        else {}
    )

    def depends(key: Hashable) -> str:
        return rule_disagreement({rule: found.get(key) for rule, found in by_rule.items()})

    return depends
