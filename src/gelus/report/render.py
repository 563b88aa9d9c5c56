"""The report as a self-contained HTML page and its Markdown twin.

The content is built once as a list of blocks (heading, paragraph, table, figure, banner) and
rendered twice: HTML embeds figures as base64 PNG; Markdown links the PNG files next to it.
"""

import base64
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gelus.experiments.divergence import mark_diverged
from gelus.experiments.files import atomic_write
from gelus.experiments.presets import Preset
from gelus.experiments.selection import run_configs
from gelus.plots.io import save_figure
from gelus.report.analysis import ExperimentResult, Missing, analyse, environment, is_quick
from gelus.report.figures import experiment_figures

__all__ = [
    "Block",
    "format_difference",
    "format_value",
    "report_blocks",
    "summary_block",
    "to_html",
    "to_markdown",
    "write_report",
]

QUICK_BANNER = (
    "Quick run: fewer epochs and seeds than the paper, to finish in minutes. The numbers show the "
    "pipeline works; they are not a reproduction. Run `gelus reproduce` without --quick for that."
)


class Block(NamedTuple):
    kind: str  # "h1" | "h2" | "h3" | "p" | "banner" | "table" | "figure"
    text: str = ""
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    image: Path | None = None  # figure: the PNG file


def format_value(metric: str, value: float) -> str:
    """Errors and accuracies as percentages, losses to 4 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if metric in ("error", "accuracy"):
        return f"{100 * value:.2f} %"
    return f"{value:.4g}"


def format_difference(metric: str, value: float) -> str:
    """A difference of errors or accuracies in percentage points, else to 4 significant digits."""
    if value is None or math.isnan(value):
        return "—"
    if metric in ("error", "accuracy"):
        return f"{100 * value:+.2f} pp"
    return f"{value:+.4g}"


def _interval(metric: str, ci: tuple[float, float], difference: bool = False) -> str:
    fmt = format_difference if difference else format_value
    return f"[{fmt(metric, ci[0])}, {fmt(metric, ci[1])}]"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _median_cell(metric: str, summary: Any) -> str:
    """The median over the runs that did not diverge, saying how many did."""
    total = summary.n + summary.diverged
    if summary.diverged and summary.n == 0:
        return f"— (all {total} diverged)"
    note = f" ({summary.diverged} of {total} diverged)" if summary.diverged else ""
    return format_value(metric, summary.median) + note


def _edge(s) -> str:
    """ " (edge of the grid)" when the chosen lr is the grid's lowest or highest: the best lr may
    lie beyond the grid, so the comparison may not be at each activation's best."""
    grid = sorted({lr for setting, lr in s.val_medians if setting == s.setting} or {})
    if not s.lr_selected or len(grid) < 2 or s.lr not in (grid[0], grid[-1]):
        return ""
    return f" (edge of the grid {grid[0]:g}–{grid[-1]:g})"


def _result_table(result: ExperimentResult) -> Block:
    variants = any(row.selection.variant for row in result.rows)
    paper = ("paper",) if result.in_paper else ()  # beyond the paper: no such column
    headers = (
        "activation", *(("config",) if variants else ()), "setting", "lr", "metric", "n",
        "median", "95 % CI of median", "mean", "IQM", *paper,
    )  # fmt: skip
    rows = []
    for row in result.rows:
        s, m = row.selection, row.summary
        lr = f"{s.lr:g}" + ("" if s.lr_selected else " (not selected)") + _edge(s)
        theirs = format_value(s.metric, row.paper) if row.paper is not None else "—"
        rows.append(
            (s.activation, *((s.variant or "—",) if variants else ()), s.setting or "—", lr, f"test {s.metric}",
             str(m.n + m.diverged), _median_cell(s.metric, m), _interval(s.metric, m.median_ci),
             format_value(s.metric, m.mean), format_value(s.metric, m.iqm),
             *((theirs,) if paper else ()))
        )  # fmt: skip
    return Block("table", headers=headers, rows=tuple(rows))


def _comparison_table(result: ExperimentResult) -> Block:
    variants = any(c.variant for c, _ in result.comparisons)
    theirs = ("paper",) if result.in_paper else ()  # beyond the paper: no such column
    headers = (
        "comparison", *(("config",) if variants else ()), "setting", "lr", "metric", "n pairs",
        "mean difference", "95 % CI (t)", "p", "p (Holm)", *theirs, "verdict",
    )  # fmt: skip
    rows = []
    for c, paper in result.comparisons:
        pairs = str(len(c.seeds)) + (f" ({c.diverged} diverged left out)" if c.diverged else "")
        paper_cell = format_difference(c.metric, paper) if paper is not None else "—"
        rows.append(
            (f"{c.treatment} − {c.baseline}", *((c.variant or "—",) if variants else ()), c.setting or "—", c.lr,
             f"test {c.metric}", pairs, format_difference(c.metric, c.mean),
             _interval(c.metric, c.ci, difference=True), _p(c.p), _p(c.p_holm),
             *((paper_cell,) if theirs else ()), _verdict(c))
        )  # fmt: skip
    return Block("table", headers=headers, rows=tuple(rows))


def _step_cost_table(result: ExperimentResult) -> Block:
    """Each activation's interleaved time per step, against exact GELU's at the same config and
    device (the reference every transformer comparison uses)."""
    reference = {
        (c.config_hash, c.device): c.seconds for c in result.step_costs if c.activation == "gelu"
    }
    several = len({c.config_hash for c in result.step_costs}) > 1
    rows = []
    for c in sorted(result.step_costs, key=lambda c: (c.config_hash, c.device, c.seconds)):
        base = reference.get((c.config_hash, c.device))
        rows.append(
            (c.activation, *((c.config_hash,) if several else ()),
             f"{c.device}, {c.threads} thread{'s' if c.threads != 1 else ''}",
             f"{c.seconds * 1e3:.1f}", f"{c.low * 1e3:.1f} – {c.high * 1e3:.1f}", str(c.rounds),
             f"{c.seconds / base:.3f}×" if base else "—")
        )  # fmt: skip
    headers = ("activation", *(("config",) if several else ()), "device", "ms per step (median)",
               "fastest – slowest round", "rounds", "vs gelu")  # fmt: skip
    return Block("table", headers=headers, rows=tuple(rows))


def _p(p: float) -> str:
    return "—" if p != p else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _verdict(c) -> str:
    """The verdict word and its detail: which way, or the pairs 80 % power would need; and
    whether another defensible choice of the learning rate would change it."""
    text = _verdict_detail(c)
    return f"{text} — depends on the selection rule ({c.depends})" if c.depends else text


def _verdict_detail(c) -> str:
    if c.verdict.endswith("unresolved"):
        more = f"; ≈ {c.pairs_needed} pairs for 80 % power" if c.pairs_needed else ""
        return f"{c.verdict} (n={len(c.seeds)}{more})"
    if c.verdict.endswith("tie"):
        return f"{c.verdict} (within ±{format_difference(c.metric, _margin(c.metric))})"
    return f"{c.verdict} (p Holm {_p(c.p_holm)})"


def _margin(metric: str) -> float:
    from gelus.report.stats import EQUIVALENCE_MARGINS

    return EQUIVALENCE_MARGINS.get(metric, 0.0)


def _found(result: ExperimentResult, variant: str) -> str:
    """This run's medians on the headline metric, per setting (and lr when not selected)."""
    rows = [r for r in result.rows if r.selection.variant == variant]
    rows = [r for r in rows if r.selection.metric == rows[0].selection.metric] if rows else []
    groups: dict[str, list[str]] = {}
    for row in rows:
        s = row.selection
        where = ", ".join(p for p in (s.setting, "" if s.lr_selected else f"lr={s.lr:g}") if p)
        groups.setdefault(where, []).append(f"{s.activation} {_median_cell(s.metric, row.summary)}")
    metric = rows[0].selection.metric if rows else ""
    parts = [f"{where}: " * bool(where) + ", ".join(cells) for where, cells in groups.items()]
    return f"test {metric}: " + "; ".join(parts) if parts else "—"


def _unfinished_text(result: ExperimentResult) -> str:
    return (
        f"{result.n_unfinished} of {result.n_runs} runs have not finished: the tables and paired "
        "differences count only the finished ones (the curves show every run so far). Run the "
        "same command again to resume them."
    )


def _verdicts(result: ExperimentResult, variant: str) -> str:
    settings = {c.setting for c, _ in result.comparisons if c.variant == variant}
    verdicts = []
    for c, _ in result.comparisons:
        if c.variant != variant:
            continue
        where = f" ({c.setting})" if len(settings) > 1 and c.setting else ""
        if c.lr != "chosen":
            where += f" (lr={c.lr})"
        verdicts.append(f"{c.treatment} vs {c.baseline}{where}: {_verdict(c)}")
    return "; ".join(verdicts) or "—"


def claims_block(results: Sequence[ExperimentResult]) -> Block:
    """One row per claim: the paper's words, the measure compared, the verdict and its pairs."""
    rows = []
    for result in results:
        for check in result.claims:
            detail = "; ".join(
                f"{c.treatment} vs {c.baseline}{f' ({c.setting})' if c.setting else ''}"
                f"{f' (lr={c.lr})' if c.lr != 'chosen' else ''}: "
                f"{_verdict(c)}"
                for c in check.comparisons
            )
            verdict = check.verdict
            if check.depends:
                verdict += f" — depends on the selection rule ({check.depends})"
            rows.append((result.name, check.claim, check.measure, verdict, detail or "—"))
    headers = ("experiment", "the paper's claim", "measured as", "verdict", "paired comparisons")
    return Block("table", headers=headers, rows=tuple(rows))


def summary_block(results: Sequence[ExperimentResult]) -> Block:
    """The report's first table: per experiment (and config), what the paper reports, what this
    run found, and the verdict on the paper's ordering with its number of paired seeds."""
    rows = []
    for result in results:
        variants = dict.fromkeys(row.selection.variant for row in result.rows) or {"": None}
        paper = f" (Figure {result.figure.number})" if result.figure.number else ""
        unfinished = f" ({result.n_unfinished} of {result.n_runs} runs unfinished, not counted)"
        for variant in variants:
            name = result.name + paper + (f" [{variant}]" if variant else "")
            found = _found(result, variant) + (unfinished if result.n_unfinished else "")
            rows.append((name, result.paper_summary or "—", found, _verdicts(result, variant)))
    headers = (
        "experiment",
        "the paper reports",
        "this run found",
        "verdicts (paired t-test, Holm over the experiment's comparisons)",
    )
    return Block("table", headers=headers, rows=tuple(rows))


def report_blocks(
    results: Sequence[ExperimentResult],
    figures: dict[str, list[tuple[Path, str]]],
    *,
    runs: Sequence[Any],
    missing: Sequence[Missing] = (),
    quick: bool = False,
    source: str = "",
    activation_figure: Path | None = None,
    seed: int = 0,
) -> list[Block]:
    """The report's content. ``figures`` maps an experiment to its (PNG path, caption) pairs."""
    blocks = [Block("h1", "GELU paper reproduction: results")]
    if quick:
        blocks.append(Block("banner", QUICK_BANNER))
    n_records = sum(len(r.rows) for r in results)
    plural = "" if len(results) == 1 else "s"
    blocks.append(
        Block(
            "p",
            f"{len(results)} experiment{plural} with records ({n_records} result rows, {len(runs)} runs) from {source or 'the given records'}.",
        )
    )
    blocks.append(
        Block(
            "p",
            "How to read: n is the number of seeds; each seed contributes its test value at the chosen learning rate "
            "and epoch. A run diverged when a final loss is NaN, infinite or above 10× that of the trivial predictor "
            "(ln(classes) for a classifier; the training mean's error for the autoencoder): medians, means and "
            "intervals are over the runs that did not, and say how many did; figures leave such runs out. Records of different configs are never merged: each config is its "
            "own row, labelled by the settings that differ. The medians' 95 % intervals are percentile bootstraps "
            "(10,000 resamples, each cell's generator seeded from its own key), a description of spread: with n ≤ 3 "
            "seeds such an interval cannot be wider than the range of the values; none is given for n = 1. "
            "Verdicts come from a paired t-test on the seeds both activations ran (false-positive rate 5 % at any n ≥ 2), "
            "Holm-adjusted over every comparison of the experiment: ▲ better / ▼ worse when the adjusted p < 0.05, "
            "= tie when an equivalence test (TOST, margins in docs/REPORT.md) says the difference is within the margin, "
            "else · unresolved with the pairs a test would need for 80 % power against the observed effect. "
            "Errors are in %, differences in percentage points (pp), losses in nats, a language "
            "model's bpb in bits per byte (its loss over ln 2).",
        )
    )
    blocks += [Block("h2", "Summary"), summary_block(results)]
    if any(result.claims for result in results):
        blocks += [Block("h2", "The paper's claims, as the paper made them"), claims_block(results)]
    if activation_figure is not None:
        blocks += [
            Block("h2", "Figure 1: the activations"),
            Block(
                "figure", "Figure 1. GELU (μ=0, σ=1), ReLU and ELU (α=1).", image=activation_figure
            ),
        ]
    for result in results:
        number = result.figure.number
        blocks.append(Block("h2", result.name + (f" (paper Figure {number})" if number else "")))
        if result.citation:
            lead = "Paper" if result.in_paper else "Background"
            blocks.append(Block("p", f"{lead}: {result.citation}"))
        if result.paper_summary:
            lead = "The paper reports: " if result.in_paper else "The question: "
            blocks.append(Block("p", lead + result.paper_summary))
        blocks += [Block("p", "Protocol: " + rule + ".") for rule in result.rules]
        if result.departures and not quick:  # the quick banner already says so
            whose = "the paper's settings" if result.in_paper else "the preset's defaults"
            blocks.append(Block("banner", f"Not {whose}: " + "; ".join(result.departures)))
        if result.n_unfinished:
            blocks.append(Block("banner", _unfinished_text(result)))
        results_title = "Test results: paper vs ours" if result.in_paper else "Test results"
        blocks += [Block("h3", results_title), _result_table(result)]
        if result.comparisons:
            blocks += [Block("h3", "Paired differences (same seeds)"), _comparison_table(result)]
        for image, caption in figures.get(result.name, []):
            blocks.append(Block("figure", caption, image=image))
        if result.step_costs:
            blocks += [
                Block("h3", "Time per step"),
                Block(
                    "p",
                    "Measured after the sweep in one process, not under its load: each activation's "
                    "engine takes a few optimizer steps in turn, round by round, the starting "
                    "activation rotating (docs/REPORT.md).",
                ),
                _step_cost_table(result),
            ]
        source = "paper" if result.in_paper else "preset"
        blocks += [
            Block("h3", f"Setup: {source} vs this run"),
            Block("table", headers=("aspect", source, "this run"), rows=result.setup),
        ]
        if result.notes:
            blocks.append(Block("p", "Fidelity notes: " + result.notes))
        blocks.append(
            Block(
                "p",
                f"{result.n_runs} runs, {result.wall_seconds / 60:.1f} min of training wall time.",
            )
        )
    if missing:
        blocks.append(Block("h2", "Experiments without data"))
        blocks.append(
            Block(
                "p",
                "Not in these records: each is listed with how to get its data, or how to run it "
                "when the data is already here.",
            )
        )
        rows = tuple((m.experiment, m.dataset, _one_line(m.how_to_get)) for m in missing)
        blocks.append(Block("table", headers=("experiment", "dataset", "how to get it"), rows=rows))
    blocks.append(Block("h2", "Environment"))
    env = environment(runs)
    total = sum(r.wall_seconds for r in results)
    env.append(("training wall time (ensembles counted once)", f"{total / 60:.1f} min"))
    blocks.append(Block("table", headers=("", "value"), rows=tuple(env)))
    return blocks


# --------------------------------------------------------------------------- renderers
_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
.banner { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.8em 1em; }
figure { margin: 1em 0; } figure img { max-width: 100%; } figcaption { font-size: 0.9em; color: #555; }
"""


def to_html(blocks: Sequence[Block]) -> str:
    """One self-contained HTML page; figures are embedded as base64 PNG."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(blocks[0].text)}</title>",
        f"<style>{_CSS}</style></head><body>",
    ]
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            parts.append(f"<{b.kind} id='{_slug(b.text)}'>{e(b.text)}</{b.kind}>")
        elif b.kind == "p":
            parts.append(f"<p>{e(b.text)}</p>")
        elif b.kind == "banner":
            parts.append(f"<p class='banner'><strong>{e(b.text)}</strong></p>")
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            body = "".join(
                "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in b.rows
            )
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif b.kind == "figure" and b.image is not None:
            data = base64.b64encode(Path(b.image).read_bytes()).decode("ascii")
            parts.append(
                f"<figure><img alt='{e(b.text)}' src='data:image/png;base64,{data}'><figcaption>{e(b.text)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _one_line(text: str) -> str:
    """Multi-line instructions ("  - step" per line) as one table cell: steps joined by "; "."""
    steps = [line.strip().removeprefix("- ").strip() for line in text.splitlines()]
    return "; ".join(step for step in steps if step)


_MARKDOWN_CELL = re.compile(r"([\\`*\[\]|~])")  # code, emphasis, links, table pipes
_MARKDOWN_TEXT = re.compile(r"([\\\[\]|])")  # links and pipes; our prose keeps its code spans


def _md_text(text: str) -> str:
    """Prose shown as text by any Markdown renderer: no HTML tag (<, >, & as entities), no link."""
    return _MARKDOWN_TEXT.sub(r"\\\1", html.escape(str(text), quote=False))


def _md_cell(text: str) -> str:
    """A table cell (where labels from the records land): no tag, link, code span, emphasis or
    extra cell."""
    return _MARKDOWN_CELL.sub(r"\\\1", html.escape(str(text), quote=False)).replace("\n", " ")


def to_markdown(blocks: Sequence[Block], relative_to: Path) -> str:
    """The Markdown twin; figures link their PNG files relative to ``relative_to``."""
    parts = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            parts.append("#" * int(b.kind[1]) + " " + _md_text(b.text))
        elif b.kind == "p":
            parts.append(_md_text(b.text))
        elif b.kind == "banner":
            parts.append(f"> **{_md_text(b.text)}**")
        elif b.kind == "table":
            lines = [
                "| " + " | ".join(map(_md_cell, b.headers)) + " |",
                "|" + "---|" * len(b.headers),
            ]
            lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in b.rows]
            parts.append("\n".join(lines))
        elif b.kind == "figure" and b.image is not None:
            caption = _md_cell(b.text)
            parts.append(
                f"![{caption}]({Path(b.image).relative_to(relative_to).as_posix()})\n\n*{caption}*"
            )
    return "\n\n".join(parts) + "\n"


def write_report(
    records: Sequence[Any],
    runs: Sequence[Any],
    out_dir: str | Path,
    *,
    presets: dict[str, Preset],
    missing: Sequence[Missing] = (),
    seed: int = 0,
    source: str = "",
    activation_figure: bool = True,
    rule: str | None = None,
    step_times: Sequence[Any] = (),
) -> tuple[Path, Path]:
    """Analyse ``records`` with each experiment's preset (``presets``: name -> Preset, in the
    paper's order), draw the figures into ``out_dir/figures`` and write ``out_dir/report.html`` and
    ``out_dir/report.md``. Returns the two paths. ``rule`` (one of ``SELECTION_RULES``) chooses
    every experiment's learning rate instead of its preset's protocol. ``step_times``: the records'
    interleaved step timings (``gelus.experiments.records.read_step_times``)."""
    out_dir = Path(out_dir)
    figure_dir = out_dir / "figures"
    rng = np.random.default_rng(seed)
    records = mark_diverged(records, run_configs(runs))  # the figures leave diverged runs out
    results = analyse(records, runs, presets, rule, step_times)
    figures: dict[str, list[tuple[Path, str]]] = {}
    for result in results:
        selections = [row.selection for row in result.rows]
        mine = [r for r in records if r.experiment == result.name]
        seconds_per_step = {(c.config_hash, c.activation): c.seconds for c in result.step_costs}
        drawn = experiment_figures(
            mine, selections, result.figure, title=result.name, rng=rng,
            seconds_per_step=seconds_per_step, steps_per_epoch=dict(result.steps_per_epoch),
        )  # fmt: skip
        for kind, fig in drawn.items():
            png, _ = save_figure(fig, figure_dir, f"{_slug(result.name)}-{kind}")
            figures.setdefault(result.name, []).append(
                (
                    png,
                    " ".join(fig.get_suptitle().split()) if hasattr(fig, "get_suptitle") else kind,
                )
            )
    figure1 = None
    if activation_figure:
        from gelus.plots.activations import figure1 as draw_figure1

        figure1, _ = save_figure(draw_figure1(), figure_dir, "figure1")
    blocks = report_blocks(
        results,
        figures,
        runs=runs,
        missing=missing,
        quick=is_quick(runs),
        source=source,
        activation_figure=figure1,
        seed=seed,
    )
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    for path, text in ((html_path, to_html(blocks)), (md_path, to_markdown(blocks, out_dir))):
        with atomic_write(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return html_path, md_path
