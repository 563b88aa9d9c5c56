"""From records to what the report says: results tables, comparisons, claims, sensitivity, axes.

:func:`analyse` is a pure function of the records, the runs, the presets (each experiment's
protocol, figure, paper numbers and setup), the aggregate over seeds and the verdicts' design
(:mod:`gelus.report.stats`); the renderers in :mod:`gelus.report.render` only format its result.
What the runs ran beside the paper (setup, departures, time, environment) is
:mod:`gelus.report.setup`'s, re-exported here (``environment``, ``StepCost``, ``_departures``).
"""

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gelus.experiments.config import (
    config_to_dict,
    flat_config,
    identity_keys,
    stored_defaults,
)
from gelus.experiments.divergence import mark_diverged
from gelus.experiments.presets import Preset
from gelus.experiments.protocol import FigureSpec, Protocol
from gelus.experiments.selection import (
    RunnerUp,
    Selection,
    run_configs,
    runner_up,
    select,
)
from gelus.report.axes import (
    AxisResult,
    axis_results,
    axis_verdicts,
    families,
    mark_rule_dependence,
    sizes,
)
from gelus.report.claims import check_claims
from gelus.report.judge import judge, judge_pairs, rule_dependence
from gelus.report.lr_choice import (
    MATCHED,
    MEAN_RULE,
    beside,
    epoch_rule_note,
    labelled,
    mark_axes,
    matched_records,
    mean_rule,
    relabel,
)
from gelus.report.metrics import Verdict
from gelus.report.sensitivity import LrSensitivity, lr_sensitivity
from gelus.report.setup import (
    StepCost,
    departures,
    environment,
    preset_configs,
    setup_table,
    step_costs,
    steps_per_epoch,
    wall_seconds,
)
from gelus.report.stats import (
    DESIGN,
    EQUIVALENCE_MARGINS,
    HEADLINE,
    Aggregate,
    Comparison,
    Design,
    Summary,
    paired_t_test,
)

__all__ = [
    "BASELINES",
    "ExperimentResult",
    "Missing",
    "ResultRow",
    "StepCost",
    "analyse",
    "environment",
    "is_quick",
]

BASELINES = ("relu", "elu")  # the paper compares GELU against these


def _json(text: Any) -> dict[str, Any]:
    parsed = json.loads(text) if isinstance(text, str) and text.strip() else {}
    return parsed if isinstance(parsed, dict) else {}


def is_quick(runs: Sequence[Any]) -> bool:
    """True when any run's config or metadata has a ``quick`` key that is true."""
    return any(
        _json(r.config_json).get("quick") is True or _json(r.metadata_json).get("quick") is True
        for r in runs
    )


class ResultRow(NamedTuple):
    """One selection, its summary over seeds, and the paper's number where it applies."""

    selection: Selection
    summary: Summary
    paper: float | None  # the paper's number for this activation, metric and setting


class Missing(NamedTuple):
    """An experiment with no records, and how to get what it needs."""

    experiment: str
    dataset: str
    how_to_get: str


class ExperimentResult(NamedTuple):
    """Everything the report shows about one experiment."""

    name: str
    citation: str
    figure: FigureSpec
    rules: tuple[str, ...]  # the protocol in words
    rows: tuple[ResultRow, ...]
    comparisons: tuple[tuple[Comparison, float | None], ...]  # with the paper's difference if known
    setup: tuple[tuple[str, str, str], ...]  # (aspect, paper, ours)
    paper_summary: str  # the paper's result in words
    notes: str
    wall_seconds: float
    n_runs: int
    n_unfinished: int = 0  # runs still training (or interrupted): left out of rows and comparisons
    claims: tuple = ()  # the paper's claims checked as it made them (report.claims.ClaimCheck)
    departures: tuple[str, ...] = ()  # "key=ours (the paper's: theirs)" where the runs differ
    in_paper: bool = True  # False: beyond the paper; its setup column is the preset's
    step_costs: tuple[StepCost, ...] = ()  # each activation's interleaved time per step
    steps_per_epoch: tuple[tuple[str, int], ...] = ()  # (config hash, optimizer steps per epoch)
    sensitivity: LrSensitivity | None = None  # learning-rate sensitivity, paired against GELU
    axes: tuple[AxisResult, ...] = ()  # families of configs along one axis, and their verdicts
    # each comparison's rows at the matched lr and under the mean rule (report.lr_choice)
    alternatives: tuple[tuple[Comparison, ...], ...] = ()
    rule_note: str = ""  # when the selection-rule check is vacuous (lr_choice.epoch_rule_note)


def _pairs(
    selections: Sequence[Selection], reference: str | None = None
) -> list[tuple[Selection, Selection]]:
    """(treatment, reference) pairs on the headline metric: same config and setting, and the same
    lr when it was not selected. With a protocol's ``reference`` every other activation is
    compared with it; else the GELU family is compared with the baselines (ReLU, ELU, …) and any
    other activation (one a researcher brought) with the GELU family and the baselines."""
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    if reference is not None:
        anchor = [s for s in headline if s.activation == reference]
        return _matched([s for s in headline if s.activation != reference], anchor)
    gelus = [s for s in headline if "gelu" in s.activation.lower()]
    baselines = [s for s in headline if s.activation.lower() in BASELINES]
    others = [s for s in headline if s not in gelus and s not in baselines]
    return _matched(gelus, baselines) + _matched(others, gelus + baselines)


def _matched(
    treatments: Sequence[Selection], references: Sequence[Selection]
) -> list[tuple[Selection, Selection]]:
    pairs = []
    for t in treatments:
        mine = [
            b
            for b in references
            if b.config_hash == t.config_hash and (t.lr_selected or b.lr == t.lr)
        ]
        same = [b for b in mine if b.setting == t.setting]
        if not same and len({s.setting for s in treatments if s.activation == t.activation}) == 1:
            same = mine  # e.g. the SOI map (no dropout) vs ReLU at its tuned dropout
        pairs.extend((t, b) for b in same)
    return pairs


class _Finished(NamedTuple):
    """One experiment's finished records and what its statistics are taken with."""

    name: str
    records: list[Any]
    protocol: Protocol
    configs: dict[str, dict[str, Any]]
    aggregate: Aggregate
    design: Design
    claimed: frozenset[str] = frozenset()  # the configs the paper's claims are judged on (all)

    def selections(
        self, protocol: Protocol | None = None, *, records=None, aggregate: Aggregate | None = None
    ) -> list[Selection]:
        """The selections under ``protocol`` (default: the experiment's), of ``records`` (default:
        the experiment's), the lr chosen by ``aggregate`` (default: the experiment's)."""
        records = self.records if records is None else records
        if not records:
            return []
        chosen = protocol or self.protocol
        return select(records, chosen, self.configs, aggregate or self.aggregate)

    def compare(
        self, pairs: Sequence[tuple[Selection, Selection]], *, marks: bool = True
    ) -> list[Comparison]:
        """The paired comparisons of ``pairs`` judged (:func:`~gelus.report.judge.judge_pairs`),
        one Holm family per config; the order of ``pairs`` is kept."""
        return judge_pairs(pairs, self.design, self.aggregate, marks=marks)

    def claims(self, protocol: Protocol | None = None) -> list:
        """The paper's claims checked under ``protocol`` (default: the experiment's)."""
        chosen = protocol or self.protocol
        records = [r for r in self.records if not self.claimed or r.config_hash in self.claimed]
        return check_claims(self.name, records, chosen, self.configs, self.aggregate, self.design)


def _verdicts_under(finished: _Finished, protocol: Protocol) -> dict[tuple, Verdict]:
    """{comparison key: verdict} with the lr chosen by ``protocol``."""
    pairs = _pairs(finished.selections(protocol), protocol.reference)
    return {_comparison_key(c): c.verdict for c in finished.compare(pairs, marks=False)}


def _comparison_key(c: Comparison) -> tuple:
    return (c.variant, c.setting, c.treatment, c.baseline, c.lr)


def _claims_under_every_rule(finished: _Finished) -> list:
    """The paper's claims checked with the protocol's lr choice, each marked with every rule's
    verdict where the rules disagree."""
    checks = finished.claims()
    if not finished.records or not checks:
        return checks
    depends = rule_dependence(
        finished.records,
        finished.protocol,
        lambda protocol: {c.claim: c.verdict for c in finished.claims(protocol)},
    )
    return [c._replace(depends=depends(c.claim)) if depends(c.claim) else c for c in checks]


def _mark_rule_dependence(tests, finished: _Finished) -> list[Comparison]:
    """Each verdict recomputed with the lr chosen by every rule of ``SELECTION_RULES`` (those the
    records allow); one that changes is marked "depends on the selection rule" with each rule's."""
    depends = rule_dependence(
        finished.records, finished.protocol, lambda protocol: _verdicts_under(finished, protocol)
    )
    marked = []
    for c in tests:
        said = depends(_comparison_key(c))
        marked.append(c._replace(depends=said) if said else c)
    return marked


REFERENCE = "gelu"  # the reference activation when a protocol names none (the paper's pairs)


def _unresolved_choice(found: RunnerUp, design: Design) -> tuple[bool, str]:
    """(whether the reference's two best lrs are not told apart, in words): the paired validation
    difference runner-up − chosen over the seeds both ran, a lone paired t-test at the design's
    alpha; not told apart when it is not significant, or significant but inside the metric's
    margin."""
    seeds = [
        s for s in found.chosen
        if s in found.second and math.isfinite(found.chosen[s]) and math.isfinite(found.second[s])
    ]  # fmt: skip
    test = paired_t_test([found.second[s] - found.chosen[s] for s in seeds])
    margin = EQUIVALENCE_MARGINS.get(found.metric, 0.0)
    apart = test.p < design.alpha and abs(test.mean) >= margin
    words = f"validation {found.metric} {test.mean:+.2g} against its chosen lr's, p {test.p:.2f}"
    return not apart, words


def _mark_reference_lr(tests, finished: _Finished, selections) -> list[Comparison]:
    """Each verdict recomputed with the reference activation (the protocol's, else GELU) at its
    runner-up lr, one of its selections at a time, where the paired validation difference between
    its two best lrs is unresolved or inside the margin; a verdict whose word changes is marked
    "depends on the reference's lr" with the runner-up's lr, its validation gap and the verdict."""
    protocol = finished.protocol
    reference = protocol.reference or REFERENCE
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    marks: dict[tuple, list[str]] = defaultdict(list)
    for chosen in (s for s in headline if s.activation == reference):
        found = runner_up(finished.records, protocol, chosen, finished.configs, finished.aggregate)
        if found is None:
            continue
        unresolved, gap = _unresolved_choice(found, finished.design)
        if not unresolved:
            continue
        moved = [found.selection if s == chosen else s for s in headline]
        tests_again = finished.compare(_pairs(moved, protocol.reference), marks=False)
        again = {_comparison_key(c): c for c in tests_again}
        where = f" ({chosen.setting})" if chosen.setting else ""
        for c in tests:
            other = again.get(_comparison_key(c))
            if other is not None and other.verdict != c.verdict:
                marks[_comparison_key(c)].append(
                    f"{reference}{where} at its runner-up lr {found.selection.lr:g}, not "
                    f"{chosen.lr:g} ({gap}): {other.verdict.word}, "
                    f"p {finished.design.correction} {other.p_holm:.3f}"
                )
    return [c._replace(reference_lr="; ".join(marks[_comparison_key(c)])) for c in tests]


def _paper_number(preset: Preset | None, s: Selection) -> float | None:
    """The paper's number for ``s``: an error of an activation the paper reports, in a setting the
    preset itself runs (a dropout keep the paper did not use is not the paper's experiment)."""
    if preset is None or s.metric != "error" or s.activation.lower() not in preset.paper_results:
        return None
    kept = getattr(preset.config.train, "keep", (1.0,))  # the CNN engine has no dropout setting
    keeps = {1.0, *kept} if preset.protocol.tune_setting else set(kept)
    if s.setting and s.setting not in {f"keep={float(k)!r}" for k in keeps}:
        return None
    return preset.paper_results[s.activation.lower()]


def analyse(
    records: Sequence[Any],
    runs: Sequence[Any],
    presets: Mapping[str, Preset],
    rule: str | None = None,
    step_times: Sequence[Any] = (),
    *,
    aggregate: Aggregate = HEADLINE,
    design: Design = DESIGN,
) -> list[ExperimentResult]:
    """Every experiment in ``records``, in the order of ``presets`` (the paper's; unknown names
    after it): the protocol's results, paired comparisons, setup and time (``step_times``: the
    records' interleaved step timings, ``gelus.experiments.records.read_step_times``).

    ``rule`` (one of ``SELECTION_RULES``) chooses every experiment's lr instead of its protocol;
    ``aggregate`` is the statistic over seeds of the tables and the lr choice, ``design`` the
    verdicts' test."""
    by_experiment: dict[str, list[Any]] = defaultdict(list)
    for r in records:
        by_experiment[r.experiment].append(r)
    names = [n for n in presets if n in by_experiment] + sorted(set(by_experiment) - set(presets))
    results = []
    for name in names:
        preset = presets.get(name)
        protocol = preset.protocol if preset else Protocol()
        if rule is not None:  # --select: one rule for every experiment
            protocol = protocol.with_rule(rule)
        mine_runs = [r for r in runs if r.experiment == name]
        finished = _finish(name, by_experiment[name], mine_runs, protocol, aggregate, design)
        finished = finished._replace(claimed=preset_configs(preset, finished.configs))
        result = _result(preset, finished, mine_runs, by_experiment[name])
        results.append(result._replace(step_costs=step_costs(step_times, name)))
    return results


def _finish(name, records, runs, protocol, aggregate, design) -> _Finished:
    """The experiment's finished runs' records, diverged runs marked. A run still training stops
    at another epoch than the finished ones: comparing it at its last epoch would mix epochs, so
    only finished runs enter the statistics."""
    unfinished = {r.run_id for r in runs if r.status != "done"}
    configs = run_configs(runs)
    kept = mark_diverged([r for r in records if r.run_id not in unfinished], configs)
    return _Finished(name, kept, protocol, configs, aggregate, design)


def _rows(preset: Preset | None, finished: _Finished) -> list[ResultRow]:
    """One row per selection: its summary over seeds (each cell's own generator) and the
    paper's number."""
    return [ResultRow(s, s.summarize(), _paper_number(preset, s)) for s in finished.selections()]


def _comparisons(preset: Preset | None, finished: _Finished, selections) -> list[tuple]:
    """The experiment's paired comparisons (one Holm family), each with the paper's difference
    where the paper gives both numbers, marked where another selection rule changes them."""
    pairs = _pairs(selections, finished.protocol.reference)
    tests = _mark_rule_dependence(finished.compare(pairs), finished)
    tests = _mark_reference_lr(tests, finished, selections)
    comparisons = []
    for comparison, (t, b) in zip(tests, pairs, strict=True):
        paper_t, paper_b = _paper_number(preset, t), _paper_number(preset, b)
        paper_difference = None if paper_t is None or paper_b is None else paper_t - paper_b
        comparisons.append((comparison, paper_difference))
    return comparisons


def _lr_choice(finished: _Finished, selections, comparisons) -> tuple[list[tuple], tuple]:
    """(``comparisons`` marked where the verdict at the matched lr or under the mean rule has
    another word, each one's rows under both): every activation of a config at its matched point
    (:func:`~gelus.report.lr_choice.matched_records`, per config), and the lr chosen by the mean
    over seeds; each judged as the headline (one Holm family per config). Only comparisons whose
    lr was chosen on validation have alternatives."""
    protocol = finished.protocol
    if not finished.records:
        return list(comparisons), ()
    # each config is its own judgment
    matched, _ = matched_records(finished.records, selections, lambda h: h, protocol.tune_setting)
    rows: list[Comparison] = []
    for kind, chosen in (
        (MATCHED, finished.selections(records=matched)),
        (MEAN_RULE, finished.selections(aggregate=mean_rule(finished.aggregate))),
    ):
        pairs = _pairs(chosen, protocol.reference)
        kept = [
            (c, p) for c, p in zip(finished.compare(pairs), pairs, strict=True) if c.lr == "chosen"
        ]
        rows += labelled([c for c, _ in kept], [p for _, p in kept], kind)

    def key(c: Comparison) -> tuple:
        setting = "" if protocol.tune_setting else c.setting
        return (c.variant, setting, c.treatment, c.baseline, c.metric)

    tests = [c for c, _ in comparisons]
    found = beside(tests, rows, key, finished.design.correction)
    marked = [(c, paper) for (c, _), (_, paper) in zip(found, comparisons, strict=True)]
    return marked, tuple(rows for _, rows in found)


def _axis_lr_choice(found, finished: _Finished, selections, results, reference) -> list:
    """The trends of the axis ``results`` marked where the matched lr (one point over each scale or
    budget family's configs) or the mean rule gives another verdict, each with its rows under
    both; unchanged where some lr was not chosen on validation. A categorical family (an init) is
    left as it is: one point over its values would judge each value away from its own lr."""
    found = [family for family in found if family.kind != "categorical"]
    if not found or not all(s.lr_selected for s in selections):
        return list(results)
    judged = {"design": finished.design, "aggregate": finished.aggregate}
    tune_setting = finished.protocol.tune_setting
    others = []
    for family in found:
        scope = dict.fromkeys(family.members, family.members)
        records, points = matched_records(finished.records, selections, scope.get, tune_setting)
        at = finished.selections(records=records)
        again = axis_results([family], at, [], reference, **judged)
        others += relabel(again, _matched_label(points, family.members, tune_setting))
    mean = finished.selections(aggregate=mean_rule(finished.aggregate))
    others += relabel(axis_results(found, mean, [], reference, **judged), lambda c: MEAN_RULE)
    return mark_axes(results, others, finished.design.correction)


def _matched_label(points, judgment, tune_setting: bool):
    """The row label of a verdict at its judgment's matched point: "matched lr 0.004"."""
    return lambda c: f"{MATCHED} {points[(judgment, '' if tune_setting else c.setting)]:g}"


def _sensitivity(finished: _Finished) -> LrSensitivity | None:
    """The experiment's learning-rate sensitivity (:func:`~gelus.report.sensitivity.lr_sensitivity`)
    on the metric and epoch rule its lr is chosen by, on validation (the reported split where no
    validation split was recorded, e.g. the autoencoder: a regret chooses nothing), against the
    protocol's reference (else GELU); its comparisons carry the sign-flip p and one-seed-out ranges.
    None with fewer than two common lrs or no such records."""
    protocol, records = finished.protocol, finished.records
    recorded = {(r.split, r.metric) for r in records}
    for split, metrics in (
        (protocol.select_split, protocol.select_metrics),
        (protocol.report_split, protocol.report_metrics),
    ):
        metric = next((m for m in metrics if (split, m) in recorded), None)
        if metric is not None:
            break
    else:
        return None
    found = lr_sensitivity(
        records, finished.name, reference=protocol.reference or REFERENCE, split=split,
        metric=metric, epoch=protocol.epoch, configs=finished.configs,
    )  # fmt: skip
    if not found.groups:
        return None
    judged = judge(found.comparisons, finished.design, finished.aggregate)
    return found._replace(comparisons=tuple(judged))


def _axes(preset: Preset | None, finished: _Finished, selections, comparisons) -> tuple:
    """The experiment's axis families (:mod:`gelus.report.axes`) judged against the protocol's
    reference (else GELU), each verdict judged again with the lr every selection rule the records
    allow chooses and marked where the rules disagree; () with one config."""
    if len(finished.configs) < 2:
        return ()
    base = preset.config if preset else None
    defaults = identity_keys(stored_defaults(flat_config(config_to_dict(base)))) if base else {}
    found = families(finished.configs, sizes(finished.configs, base), defaults)
    reference = finished.protocol.reference or REFERENCE
    judged = {"design": finished.design, "aggregate": finished.aggregate}
    results = axis_results(found, selections, [c for c, _ in comparisons], reference, **judged)
    depends = rule_dependence(
        finished.records,
        finished.protocol,
        lambda protocol: axis_verdicts(
            axis_results(found, finished.selections(protocol), [], reference, **judged)
        ),
    )
    results = mark_rule_dependence(results, depends)
    return tuple(_axis_lr_choice(found, finished, selections, results, reference))


def _result(
    preset: Preset | None, finished: _Finished, runs: Sequence[Any], records: Sequence[Any]
) -> ExperimentResult:
    """One experiment's :class:`ExperimentResult` (its ``step_costs`` left to the caller)."""
    rows = _rows(preset, finished)
    selections = [row.selection for row in rows]
    comparisons = _comparisons(preset, finished, selections)
    marked, alternatives = _lr_choice(finished, selections, comparisons)
    return ExperimentResult(
        name=finished.name,
        citation=preset.citation if preset else "",
        figure=preset.figure if preset else FigureSpec(),
        rules=tuple(dict.fromkeys(s.rule for s in selections)),
        rows=tuple(rows),
        comparisons=tuple(marked),
        setup=setup_table(preset, runs, records),
        paper_summary=preset.paper_summary if preset else "",
        notes=" ".join(preset.fidelity) if preset else "",
        wall_seconds=wall_seconds(records),
        n_runs=len(runs),
        n_unfinished=sum(r.status != "done" for r in runs),
        claims=tuple(_claims_under_every_rule(finished)),
        departures=departures(preset, runs),
        in_paper=preset.in_paper if preset else True,
        steps_per_epoch=tuple(sorted(steps_per_epoch(runs).items())),
        sensitivity=_sensitivity(finished) if finished.records else None,
        axes=_axes(preset, finished, selections, comparisons),
        alternatives=alternatives,
        rule_note=epoch_rule_note(finished.records, finished.protocol),
    )


_departures = departures  # the name tests and tools used before the move
