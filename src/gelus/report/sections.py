"""An experiment's report as sections: each one renders its blocks and gives its rows to
``gelus export``, so that every table the report shows is a table the export writes.

A :class:`Section` is a pair of functions of one experiment's
:class:`~gelus.report.analysis.ExperimentResult`: ``blocks`` (with the report's :class:`Context`:
the quick flag, the aggregate, the design, the experiment's figures) and ``tables`` ({table name:
rows}, each row a dict of plain values). :data:`SECTIONS` lists them in the report's order;
:func:`gelus.report.render.report_blocks` renders them, :func:`gelus.report.export.tables` writes
their rows. A new table is one new section and one line in :data:`SECTIONS`.
"""

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.selection import variant_order
from gelus.report.analysis import ExperimentResult
from gelus.report.axes_render import axes_blocks
from gelus.report.blocks import Block
from gelus.report.lr_choice import MATCHED, MEAN_RULE, alternatives_text, choice_of
from gelus.report.stats import DESIGN, HEADLINE, Aggregate, Design
from gelus.report.words import (
    format_difference,
    format_value,
    interval,
    p_exact,
    p_text,
    power_text,
    sensitivity_claim,
    verdict_cell,
)

__all__ = [
    "SECTIONS",
    "Context",
    "Section",
    "alternative_cells",
    "comparison_row",
    "median_cell",
]

Rows = list[dict[str, Any]]


class Context(NamedTuple):
    """What a section's blocks need beside the experiment's result."""

    quick: bool = False
    aggregate: Aggregate = HEADLINE
    design: Design = DESIGN
    figures: Sequence[tuple[Path, str]] = ()  # the experiment's (PNG, caption) pairs
    axis_figures: Sequence[Any] = ()  # its axis families' trend figures (or None each)


class Section(NamedTuple):
    """One part of an experiment's report: its blocks, and the rows it gives ``gelus export``."""

    name: str
    blocks: Callable[[ExperimentResult, Context], list[Block]]
    tables: Callable[[ExperimentResult], dict[str, Rows]]
    table_names: tuple[str, ...] = ()  # the tables it gives (written empty without a row)


def median_cell(metric: str, summary: Any, aggregate: Aggregate) -> str:
    """The aggregate over the runs that did not diverge, saying how many did."""
    total = summary.n + summary.diverged
    if summary.diverged and summary.n == 0:
        return f"— (all {total} diverged)"
    note = f" ({summary.diverged} of {total} diverged)" if summary.diverged else ""
    return format_value(metric, aggregate.of(summary)[0]) + note


def _edge(s) -> str:
    """ " (edge of the grid)" when the chosen lr is the grid's lowest or highest: the best lr may
    lie beyond the grid, so the comparison may not be at each activation's best."""
    grid = sorted({lr for setting, lr in s.val_medians if setting == s.setting} or {})
    if not s.lr_selected or len(grid) < 2 or s.lr not in (grid[0], grid[-1]):
        return ""
    return f" (edge of the grid {grid[0]:g}–{grid[-1]:g})"


_OTHERS = {"mean": "mean", "median": "median", "iqm": "IQM"}  # Summary's statistics, as headed


def _result_row(row: Any, variants: bool, paper: bool, aggregate: Aggregate) -> tuple[str, ...]:
    s, m = row.selection, row.summary
    lr = f"{s.lr:g}" + ("" if s.lr_selected else " (not selected)") + _edge(s)
    others = [format_value(s.metric, getattr(m, k)) for k in _OTHERS if k != aggregate.statistic]
    return (
        s.activation,
        *((s.variant or "—",) if variants else ()),
        s.setting or "—",
        lr,
        f"test {s.metric}",
        str(m.n + m.diverged),
        median_cell(s.metric, m, aggregate),
        interval(s.metric, aggregate.of(m)[1]),
        *others,
        *((format_value(s.metric, row.paper) if row.paper is not None else "—",) if paper else ()),
    )


def _result_table(result: ExperimentResult, aggregate: Aggregate) -> Block:
    variants = any(row.selection.variant for row in result.rows)
    paper = ("paper",) if result.in_paper else ()  # beyond the paper: no such column
    others = [name for key, name in _OTHERS.items() if key != aggregate.statistic]
    headers = (
        "activation", *(("config",) if variants else ()), "setting", "lr", "metric", "n",
        aggregate.name, f"{aggregate.level} CI of {aggregate.name}", *others, *paper,
    )  # fmt: skip
    rows = [_result_row(row, variants, bool(paper), aggregate) for row in result.rows]
    return Block("table", headers=headers, rows=tuple(rows))


def _comparison_row(c, paper, variants: bool, theirs: bool, design: Design) -> tuple[str, ...]:
    pairs = str(len(c.seeds)) + (f" ({c.diverged} diverged left out)" if c.diverged else "")
    paper_cell = format_difference(c.metric, paper) if paper is not None else "—"
    return (
        f"{c.treatment} − {c.baseline}",
        *((c.variant or "—",) if variants else ()),
        c.setting or "—",
        c.lr,
        f"test {c.metric}",
        pairs,
        format_difference(c.metric, c.mean),
        interval(c.metric, c.ci, difference=True),
        p_text(c.p),
        p_exact(c.p_sign),
        p_text(c.p_holm),
        *((paper_cell,) if theirs else ()),
        verdict_cell(c, design),
    )


def _comparison_table(result: ExperimentResult, aggregate: Aggregate, design: Design) -> Block:
    variants = any(c.variant for c, _ in result.comparisons)
    theirs = ("paper",) if result.in_paper else ()  # beyond the paper: no such column
    headers = (
        "comparison", *(("config",) if variants else ()), "setting", "lr", "metric", "n pairs",
        "mean difference", f"{aggregate.level} CI (t)", "p", "p (sign-flip)",
        f"p ({design.correction})",
        *theirs, "verdict",
    )  # fmt: skip
    rows = []
    alternatives = result.alternatives or ((),) * len(result.comparisons)
    for (c, paper), others in zip(result.comparisons, alternatives, strict=True):
        rows.append(_comparison_row(c, paper, variants, bool(theirs), design))
        rows += [_comparison_row(a, None, variants, bool(theirs), design) for a in others]
    return Block("table", headers=headers, rows=tuple(rows))


def _step_cost_table(result: ExperimentResult) -> Block:
    """Each activation's interleaved time per step, against exact GELU's at the same config and
    device (the reference every transformer comparison uses)."""
    reference = {
        (c.config_hash, c.device): c.seconds for c in result.step_costs if c.activation == "gelu"
    }
    several = len({c.config_hash for c in result.step_costs}) > 1
    # a config by its label in the other tables (d 48 before d 128), its hash where it has none
    labels = {row.selection.config_hash: row.selection.variant for row in result.rows}

    def label(c) -> str:
        return labels.get(c.config_hash) or c.config_hash

    rows = []
    for c in sorted(
        result.step_costs, key=lambda c: (variant_order(label(c)), c.device, c.seconds)
    ):
        base = reference.get((c.config_hash, c.device))
        threads = f"{c.device}, {c.threads} thread{'s' if c.threads != 1 else ''}"
        rows.append(
            (
                c.activation,
                *((label(c),) if several else ()),
                threads,
                f"{c.seconds * 1e3:.1f}",
                f"{c.low * 1e3:.1f} – {c.high * 1e3:.1f}",
                str(c.rounds),
                f"{c.seconds / base:.3f}×" if base else "—",
            )
        )
    headers = (
        "activation",
        *(("config",) if several else ()),
        "device",
        "ms per step (median)",
        "fastest – slowest round",
        "rounds",
        "vs gelu",
    )
    return Block("table", headers=headers, rows=tuple(rows))


def _unfinished_text(result: ExperimentResult) -> str:
    return (
        f"{result.n_unfinished} of {result.n_runs} runs have not finished: the tables and paired "
        "differences count only the finished ones (the curves show every run so far). Run the "
        "same command again to resume them."
    )


def _experiment_intro(result: ExperimentResult, quick: bool) -> list[Block]:
    """The experiment's heading, citation, the paper's result, protocol and departures."""
    number = result.figure.number
    blocks = [Block("h2", result.name + (f" (paper Figure {number})" if number else ""))]
    if result.citation:
        lead = "Paper" if result.in_paper else "Background"
        blocks.append(Block("p", f"{lead}: {result.citation}"))
    if result.paper_summary:
        lead = "The paper reports: " if result.in_paper else "The question: "
        blocks.append(Block("p", lead + result.paper_summary))
    blocks += [Block("p", "Protocol: " + rule + ".") for rule in result.rules]
    blocks += [Block("p", result.rule_note)] if result.rule_note else []
    if result.departures and not quick:  # the quick banner already says so
        whose = "the paper's settings" if result.in_paper else "the preset's defaults"
        blocks.append(Block("banner", f"Not {whose}: " + "; ".join(result.departures)))
    if result.n_unfinished:
        blocks.append(Block("banner", _unfinished_text(result)))
    return blocks


def _experiment_results(result: ExperimentResult, figures, aggregate, design) -> list[Block]:
    """The results table, the paired differences (with what they can detect) and the
    experiment's figures."""
    title = "Test results: paper vs ours" if result.in_paper else "Test results"
    blocks = [Block("h3", title), _result_table(result, aggregate)]
    if result.comparisons:
        table = _comparison_table(result, aggregate, design)
        blocks += [Block("h3", "Paired differences (same seeds)"), table]
        blocks += [Block("p", alternatives_text())] if any(result.alternatives) else []
        detect = power_text([c for c, _ in result.comparisons], design)
        blocks += [Block("p", detect)] if detect else []
    blocks += [Block("figure", caption, image=image) for image, caption in figures]
    return blocks


def _regret_rows(sens, aggregate: Aggregate, design: Design, labels) -> list[tuple[str, ...]]:
    """One row per (config, setting, activation): its regret over seeds and, for an alternative,
    its paired difference against the reference (lr_sensitivity emits them in group order);
    ``labels``: {config hash: its label} where there are several configs, else None."""
    comparisons = iter(sens.comparisons)
    rows = []
    for group in sens.groups:
        config = (labels.get(group.config_hash) or "—",) if labels else ()
        lrs = ", ".join(f"{lr:g}" for lr in group.lrs)
        paired = sens.reference in group.regrets
        for activation, by_seed in group.regrets.items():
            finite = [v for v in by_seed.values() if math.isfinite(v)]
            diverged = len(by_seed) - len(finite)
            regret = format_value(sens.metric, aggregate.point(finite)) + (
                f" ({diverged} of {len(by_seed)} diverged)" if diverged else ""
            )
            cells: tuple[str, ...] = ("—",) * 7
            if paired and activation != sens.reference:
                c = next(comparisons)
                cells = (
                    f"{c.treatment} − {c.baseline}", format_difference(c.metric, c.mean),
                    interval(c.metric, c.ci, difference=True), p_text(c.p), p_exact(c.p_sign),
                    p_text(c.p_holm), verdict_cell(c, design),
                )  # fmt: skip
            row = (activation, *config, group.setting or "—", lrs, str(len(finite)), regret)
            rows.append((*row, *cells))
    return rows


def _sensitivity_section(result: ExperimentResult, aggregate, design) -> list[Block]:
    """Learning-rate sensitivity: each activation's regret over the common lrs, paired against
    the reference with the family's Holm, and the seed's claim judged from the verdicts."""
    sens = result.sensitivity
    if sens is None:
        return []
    at = "its last epoch" if sens.epoch == "last" else "its best epoch"
    how = (
        f"Per activation and seed: the mean regret of {sens.split} {sens.metric} (each run at "
        f"{at}) over the learning rates every activation ran, relative to that seed's best of "
        f"them, (1/L)·Σ_lr [m(lr) − min m]; 0 when every lr does as well as the best. Each "
        f"alternative − {sens.reference} is paired by seed, {design.test}, {design.correction} "
        "over this table: ▲ better means less sensitive, ▼ worse more."
    )
    labels = {r.selection.config_hash: r.selection.variant for r in result.rows}
    labels = labels if len({g.config_hash for g in sens.groups}) > 1 else None
    headers = (
        "activation", *(("config",) if labels else ()), "setting", "learning rates", "n",
        f"regret ({aggregate.name})", "comparison", "mean difference", f"{aggregate.level} CI (t)",
        "p", "p (sign-flip)", f"p ({design.correction})", "verdict",
    )  # fmt: skip
    rows = tuple(_regret_rows(sens, aggregate, design, labels))
    table = Block("table", headers=headers, rows=rows)
    claim = Block("p", sensitivity_claim(sens, aggregate))
    return [Block("h3", "Learning-rate sensitivity"), Block("p", how), table, claim]


def _experiment_time_and_setup(result: ExperimentResult) -> list[Block]:
    """Time per step (where measured), the setup beside the paper's, notes and wall time."""
    blocks = []
    if result.step_costs:
        how = (
            "Measured after the sweep in one process, not under its load: each activation's "
            "engine takes a few optimizer steps in turn, round by round, the starting "
            "activation rotating (docs/REPORT.md)."
        )
        blocks += [Block("h3", "Time per step"), Block("p", how), _step_cost_table(result)]
    source = "paper" if result.in_paper else "preset"
    blocks += [
        Block("h3", f"Setup: {source} vs this run"),
        Block("table", headers=("aspect", source, "this run"), rows=result.setup),
    ]
    if result.notes:
        blocks.append(Block("p", "Fidelity notes: " + result.notes))
    minutes = result.wall_seconds / 60
    blocks.append(Block("p", f"{result.n_runs} runs, {minutes:.1f} min of training wall time."))
    return blocks


# --------------------------------------------------------------------------- rows for gelus export
def comparison_row(c: Any, design: Design = DESIGN) -> dict[str, Any]:
    """One judged comparison as a row: what was compared, the difference, its interval, the
    p-values, the verdict's word, the mean difference's leave-one-seed-out range (loso_low,
    loso_high) and its marks (the same columns in every table of them)."""
    power = f"pairs_for_{100 * design.power:g}_percent_power"
    return {
        "experiment": c.experiment, "config": c.variant, "setting": c.setting, "lr": c.lr,
        "metric": c.metric, "treatment": c.treatment, "baseline": c.baseline,
        "pairs": len(c.seeds), "mean_difference": c.mean, "ci_low": c.ci[0], "ci_high": c.ci[1],
        "p": c.p, "p_holm": c.p_holm, "verdict": c.verdict.word, power: c.pairs_needed,
        "depends_on_selection_rule": c.depends, "p_sign_flip": c.p_sign,
        "loso_low": c.loso[0], "loso_high": c.loso[1],
        "depends_on_reference_lr": c.reference_lr, "depends_on_lr_choice": c.lr_choice,
        "lr_choice": choice_of(c),
        "marks": "".join(m.value for m in c.marks(design.alpha)),
    }  # fmt: skip


def _claims_tables(result: ExperimentResult) -> dict[str, Rows]:
    return {
        "claims": [
            {
                "experiment": result.name,
                "claim": check.claim,
                "measure": check.measure,
                "verdict": check.verdict.word,
                "depends_on_selection_rule": check.depends,
                "comparisons": len(check.comparisons),
            }
            for check in result.claims
        ]
    }


def _results_tables(result: ExperimentResult) -> dict[str, Rows]:
    """The results table (each selection's summary over seeds, the headline aggregate) and the
    paired comparisons."""
    rows = []
    for row in result.rows:
        s, m = row.selection, row.summary
        point, (low, high) = HEADLINE.of(m)
        rows.append({
            "experiment": s.experiment, "config": s.variant, "activation": s.activation,
            "setting": s.setting, "lr": s.lr, "lr_selected": s.lr_selected, "metric": s.metric,
            "n": m.n, "diverged": m.diverged, HEADLINE.statistic: point,
            "ci_low": low, "ci_high": high, "mean": m.mean, "median": m.median, "iqm": m.iqm,
            "paper": row.paper,
        })  # fmt: skip
    alternatives = result.alternatives or ((),) * len(result.comparisons)
    verdicts = []
    for (c, _), others in zip(result.comparisons, alternatives, strict=True):
        verdicts.append({**comparison_row(c), **alternative_cells(others)})
        verdicts += [comparison_row(a) for a in others]  # the rows shown under it
    return {"results": rows, "verdicts": verdicts}


def alternative_cells(others: Sequence[Any]) -> dict[str, Any]:
    """A verdict's rows at the matched lr and under the mean rule as columns: each one's label
    ("matched lr 0.004"), verdict word and Holm p ("" and NaN where it was not formed)."""
    found: dict[str, Any] = {}
    for kind, column in ((MATCHED, "matched_lr"), (MEAN_RULE, "mean_rule")):
        a = next((a for a in others if a.lr.startswith(kind)), None)
        found[column] = a.lr if a else ""
        found[f"{column}_verdict"] = a.verdict.word if a else ""
        found[f"{column}_p_holm"] = a.p_holm if a else math.nan
    return found


def _sensitivity_tables(result: ExperimentResult) -> dict[str, Rows]:
    sens = result.sensitivity
    if sens is None:
        return {"sensitivity": []}
    where = {"reference": sens.reference, "split": sens.split, "epoch": sens.epoch}
    return {"sensitivity": [{**where, **comparison_row(c)} for c in sens.comparisons]}


def _axes_tables(result: ExperimentResult) -> dict[str, Rows]:
    """The interaction and per-activation tables of categorical families, and the trend tables of
    scale and budget families, each row naming its family."""
    pairs, trends = [], []
    for axis in result.axes:
        family = {"family": axis.family.kind, "keys": ",".join(axis.family.keys)}
        for kind, found in (("interaction", axis.comparisons), ("effect", axis.effects)):
            pairs += [{**family, "table": kind, **comparison_row(c)} for c in found]
        for t in axis.trends:
            holds = ", ".join(f"{word} at {n}" for word, n in t.holds.items())
            trends.append({
                **family, "x": ",".join(f"{x:g}" for x in t.x), **comparison_row(t.comparison),
                "per_point_verdicts": holds, **alternative_cells(t.alternatives),
            })  # fmt: skip
            x = ",".join(f"{x:g}" for x in t.x)
            trends += [{**family, "x": x, **comparison_row(a)} for a in t.alternatives]
    return {"axis_verdicts": pairs, "trends": trends}


def _time_and_setup_tables(result: ExperimentResult) -> dict[str, Rows]:
    return {
        "step_times": [{"experiment": result.name, **c._asdict()} for c in result.step_costs],
        "setup": [
            {"experiment": result.name, "aspect": aspect, "paper": paper, "this_run": ours}
            for aspect, paper, ours in result.setup
        ],
    }


# --------------------------------------------------------------------------- the sections
def _no_blocks(result: ExperimentResult, context: Context) -> list[Block]:
    return []


SECTIONS = (
    # the paper's claims: shown once for every experiment, in the report's claims table
    # (gelus.report.render.claims_block), near its top
    Section("claims", _no_blocks, _claims_tables, ("claims",)),
    Section("intro", lambda r, c: _experiment_intro(r, c.quick), lambda r: {}),
    Section(
        "results",
        lambda r, c: _experiment_results(r, c.figures, c.aggregate, c.design),
        _results_tables,
        ("results", "verdicts"),
    ),
    Section(
        "sensitivity",
        lambda r, c: _sensitivity_section(r, c.aggregate, c.design),
        _sensitivity_tables,
        ("sensitivity",),
    ),
    Section(
        "axes",
        lambda r, c: axes_blocks(r.axes, c.axis_figures, c.aggregate, c.design),
        _axes_tables,
        ("axis_verdicts", "trends"),
    ),
    Section(
        "time and setup",
        lambda r, c: _experiment_time_and_setup(r),
        _time_and_setup_tables,
        ("step_times", "setup"),
    ),
)
