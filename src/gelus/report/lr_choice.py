"""Every headline verdict judged again under two other defensible lr choices, and whether the
selection-rule check can tell anything apart.

The headline verdicts compare each activation at the lr its protocol chose for it (the lowest
median over seeds of the validation metric). Two other choices are standing rows beside them:

- **matched lr** (:func:`matched_point`, :func:`matched_records`): every activation at one common
  grid point. Over the cells the judgment spans (each activation in one config for a verdict of
  the per-config tables; each activation in every config of a family for a trend or an axis
  verdict), L is the set of lrs every cell ran; a cell's regret at lr ∈ L is its aggregate over
  seeds of the validation metric (at the protocol's epoch, a diverged run counted as +∞) minus
  its lowest over L; the matched point is the lr of L with the lowest median regret over the
  cells, the lower lr on a tie. It is the grid point at which the typical activation gives up
  least against its own best, chosen on validation like the headline lr, never on test.
- **mean rule**: the protocol's lr choice with the mean over seeds in place of the median (one
  broken seed moves a mean, not a median).

A verdict whose word differs under either is marked (:attr:`gelus.report.metrics.Mark.LR_CHOICE`,
``Comparison.lr_choice``: each alternative's word and adjusted p). :func:`epoch_rule_note` says
when the selection-rule check (:func:`gelus.report.judge.rule_dependence`) is vacuous: where the
best validation epoch is the last in every run, the best-epoch rules choose what the last-epoch
rules choose, by construction.
"""

import dataclasses
import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from gelus.experiments.aggregate import Aggregate
from gelus.experiments.protocol import SELECTION_RULES, Protocol
from gelus.experiments.selection import Selection, curves_by_seed
from gelus.report.axes import AxisResult
from gelus.report.stats import Comparison

__all__ = [
    "MATCHED",
    "MEAN_RULE",
    "alternatives_text",
    "beside",
    "choice_of",
    "epoch_rule_note",
    "labelled",
    "lr_choice_text",
    "mark_axes",
    "matched_point",
    "matched_records",
    "mean_rule",
    "relabel",
]

MATCHED = "matched lr"  # the label of a row with every activation at the matched point
MEAN_RULE = "mean rule"  # the label of a row with the lr chosen by the mean over seeds


def mean_rule(aggregate: Aggregate) -> Aggregate:
    """``aggregate`` with the mean as its statistic: the lr choice of the mean rule."""
    return dataclasses.replace(aggregate, statistic="mean")


def matched_point(grids: Mapping[Hashable, Mapping[float, float]]) -> float | None:
    """The lr every cell ran (``grids``: {cell: {lr: aggregate over seeds of its validation
    metric}}) with the lowest median over cells of the regret
    regret_c(lr) = v_c(lr) − min_{lr′ ∈ L} v_c(lr′), L = ∩_c grid_c (+∞ where v_c(lr) is; 0 for a
    cell with no finite value in L, which no lr helps); the lower lr on a tie. None where L is
    empty."""
    if not grids:
        return None
    common = sorted(set.intersection(*(set(grid) for grid in grids.values())))
    if not common:
        return None

    def regret(grid: Mapping[float, float], lr: float) -> float:
        values = [_worst(grid[x]) for x in common]
        best = min(values)
        return 0.0 if math.isinf(best) else _worst(grid[lr]) - best

    medians = {lr: statistics.median(regret(g, lr) for g in grids.values()) for lr in common}
    return min(common, key=lambda lr: (medians[lr], lr))


def _worst(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def _grid(s: Selection, tune_setting: bool) -> dict[float, float]:
    """{lr: its validation aggregate} of one selection: at its own setting, or (when the protocol
    tunes the setting with the lr) the best setting at each lr."""
    grid: dict[float, float] = {}
    for (setting, lr), value in s.val_medians.items():
        if tune_setting or setting == s.setting:
            grid[lr] = min(grid.get(lr, math.inf), _worst(value))
    return grid


def matched_records(
    records: Sequence[Any],
    selections: Sequence[Selection],
    scope: Callable[[str], Hashable | None],
    tune_setting: bool = False,
) -> tuple[list[Any], dict[tuple[Hashable, str], float]]:
    """(the records at each judgment's matched point, {(judgment, setting): point}): ``scope``
    maps a reported config hash to the judgment it belongs to (its own hash for the per-config
    tables, the family for an axis; None: in none), ``selections`` are the protocol's (their
    validation aggregates per lr). A config's records are kept at its judgment's point only (the
    tuning config's too, where the lr is chosen on another config); a config whose judgment has
    no lr every activation ran, or whose lr was not chosen on validation, is left out. Passed to
    :func:`gelus.experiments.selection.select`, each activation's only lr is the point."""
    grids: dict[tuple[Hashable, str], dict[Hashable, dict[float, float]]] = {}
    configs: dict[str, tuple[Hashable, str]] = {}  # config hash -> its judgment's key
    for s in selections:
        judgment = scope(s.config_hash)
        if judgment is None or not s.lr_selected:
            continue
        group = "" if tune_setting else s.setting
        cell = (s.config_hash, s.activation, s.setting)
        grids.setdefault((judgment, group), {})[cell] = _grid(s, tune_setting)
        for h in (s.config_hash, s.tuned_on or s.config_hash):
            configs[h] = (judgment, group)  # the setting is read from each record below
    points = {key: p for key, cells in grids.items() if (p := matched_point(cells)) is not None}

    def kept(r: Any) -> bool:
        found = configs.get(r.config_hash)
        if found is None:
            return False
        key = (found[0], "" if tune_setting else r.setting)
        return key in points and float(r.lr) == points[key]

    return [r for r in records if kept(r)], points


def labelled(comparisons: Sequence[Comparison], pairs, kind: str) -> list[Comparison]:
    """The comparisons of one alternative choice, their ``lr`` set to the row's label:
    "matched lr 0.004" (``kind`` :data:`MATCHED`) or "mean rule: 0.002 vs 0.004" (the treatment's
    lr vs the reference's); ``pairs``: their (treatment, reference) selections, in order."""
    out = []
    for c, (t, b) in zip(comparisons, pairs, strict=True):
        label = f"{MATCHED} {t.lr:g}" if kind == MATCHED else f"{MEAN_RULE}: {t.lr:g} vs {b.lr:g}"
        out.append(c._replace(lr=label))
    return out


def beside(
    tests: Sequence[Comparison],
    rows: Sequence[Comparison],
    key: Callable[[Comparison], Hashable],
    correction: str,
) -> list[tuple[Comparison, tuple[Comparison, ...]]]:
    """Each headline test with its alternative rows (:func:`labelled`, those of the same ``key``,
    in the order of ``rows``), the test marked (``Comparison.lr_choice``, :func:`lr_choice_text`)
    where one gives another verdict; a test whose lr was not chosen (``lr`` not "chosen") has
    none."""
    found: dict[Hashable, list[Comparison]] = {}
    for a in rows:
        found.setdefault(key(a), []).append(a)
    out = []
    for c in tests:
        mine = tuple(found.get(key(c), ())) if c.lr == "chosen" else ()
        said = lr_choice_text(c, mine, correction)
        out.append((c._replace(lr_choice=said) if said else c, mine))
    return out


def relabel(results: Sequence[AxisResult], label: Callable[[Comparison], str]) -> list:
    """Axis results (:mod:`gelus.report.axes`) with every verdict's ``lr`` set to ``label(c)``:
    the row label of an alternative choice ("matched lr 0.004", "mean rule")."""
    return [
        r._replace(
            comparisons=tuple(c._replace(lr=label(c)) for c in r.comparisons),
            effects=tuple(c._replace(lr=label(c)) for c in r.effects),
            trends=tuple(
                t._replace(comparison=t.comparison._replace(lr=label(t.comparison)))
                for t in r.trends
            ),
        )
        for r in results
    ]


def _tables(r: AxisResult) -> dict[str, Sequence[Comparison]]:
    return {
        "interaction": r.comparisons,
        "effect": r.effects,
        "trend": [t.comparison for t in r.trends],
    }


def mark_axes(
    results: Sequence[AxisResult], others: Sequence[AxisResult], correction: str
) -> list[AxisResult]:
    """``results`` with each verdict marked where the same verdict in ``others`` (the families
    judged again under the alternative choices, :func:`relabel`-ed) has another word
    (``Comparison.lr_choice``), and each trend with its alternative rows (``Trend.alternatives``)."""

    def key(c: Comparison) -> Hashable:
        return (c.variant, c.treatment, c.baseline, c.setting, c.metric)

    out = []
    for r in results:
        mine = [o for o in others if o.family.members == r.family.members]
        found = {
            table: beside(tests, [a for o in mine for a in _tables(o)[table]], key, correction)
            for table, tests in _tables(r).items()
        }
        trends = [
            t._replace(comparison=c, alternatives=rows)
            for t, (c, rows) in zip(r.trends, found["trend"], strict=True)
        ]
        out.append(
            r._replace(
                comparisons=tuple(c for c, _ in found["interaction"]),
                effects=tuple(c for c, _ in found["effect"]),
                trends=tuple(trends),
            )
        )
    return out


def choice_of(c: Comparison) -> str:
    """Which lr choice a row judges: :data:`MATCHED`, :data:`MEAN_RULE` (a row under a headline
    one, its ``lr`` the label :func:`labelled` gave), else "protocol" (the headline)."""
    return next((kind for kind in (MATCHED, MEAN_RULE) if c.lr.startswith(kind)), "protocol")


def lr_choice_text(c: Comparison, found: Sequence[Comparison], correction: str) -> str:
    """``Comparison.lr_choice``: "matched lr 0.004 unresolved, p Holm 0.071; mean rule: 0.002 vs
    0.004 better, p Holm 0.035" (each alternative formed, its label, word and adjusted p) where
    one gives another verdict than ``c``'s; "" where every alternative agrees."""
    if all(a.verdict == c.verdict for a in found):
        return ""
    return "; ".join(f"{a.lr} {a.verdict.word}, p {correction} {_p(a.p_holm)}" for a in found)


def _p(p: float) -> str:
    return "—" if p != p else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _best_is_last(records: Sequence[Any], split: str, metric: str) -> tuple[int, int]:
    """(runs whose best ``split`` ``metric`` epoch is the last, runs that did not diverge): the
    best as :func:`gelus.experiments.selection.select` finds it (the lowest, the earliest on a
    tie); a diverged run (every value NaN) is the same under either rule and not counted."""
    curves = curves_by_seed(records, split, metric)
    finite = [c for c in curves.values() if c and any(math.isfinite(v) for v in c.values())]
    best = [min(c, key=lambda e: (_worst(c[e]), e)) for c in finite]
    return sum(e == max(c) for e, c in zip(best, finite, strict=True)), len(finite)


def epoch_rule_note(records: Sequence[Any], protocol: Protocol) -> str:
    """A sentence on what the selection-rule check can tell apart in these records: where the
    best validation epoch is the last in every run (for each metric the rules choose by), the
    best-epoch rules agree with the last-epoch rules by construction, and with one such metric
    the check compares a rule with itself; where it is not, in how many runs. "" where no
    best-epoch rule applies (one epoch recorded, no validation split)."""
    recorded = {r.metric for r in records if r.split == protocol.select_split}
    metrics = [m for m in dict.fromkeys(m for m, _ in SELECTION_RULES.values()) if m in recorded]
    if len({r.epoch for r in records}) < 2 or not metrics:
        return ""
    counts = {m: _best_is_last(records, protocol.select_split, m) for m in metrics}
    if any(total == 0 for _, total in counts.values()):
        return ""
    where = ", ".join(f"{protocol.select_split} {m} {n} of {t}" for m, (n, t) in counts.items())
    if any(n < t for n, t in counts.values()):
        return (
            f"The selection-rule check: the best {protocol.select_split} epoch is the last in "
            f"{where} runs, so the best-epoch rules can choose otherwise than the last-epoch ones."
        )
    alone = (
        ": the check compares a rule with itself, and its agreement is no robustness result"
        if len(metrics) == 1
        else f"; only the metric ({' or '.join(metrics)}) can change a verdict"
    )
    return (
        f"The selection-rule check is vacuous here: the best {protocol.select_split} epoch is the "
        f"last in every run ({where}), so the best-epoch rules choose what the last-epoch rules "
        f"choose, by construction{alone}."
    )


def alternatives_text(kind: str = "comparison") -> str:
    """How to read the rows labelled "matched lr" and "mean rule" under a headline row (a
    ``kind`` of verdict: "comparison", "trend")."""
    span = "every config of the family" if kind == "trend" else "the config"
    return (
        f'Under each {kind} (lr "chosen": each activation at its own lr, the lowest median over '
        f'seeds on validation), the same {kind} judged again: "{MATCHED} x" with every '
        f"activation at one grid point x, the lr every activation ran in {span} with the lowest "
        "median (over them) validation regret against its own best there; "
        f'"{MEAN_RULE}" with each lr chosen by the mean over seeds instead of the median (one '
        "bad seed moves a mean). Each is its own Holm family, as the headline; a verdict whose "
        'word changes under either is marked "depends on the lr choice" (docs/REPORT.md).'
    )
