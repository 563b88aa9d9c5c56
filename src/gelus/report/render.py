"""The report as a self-contained HTML page and its Markdown twin.

The content is built once as a list of blocks (heading, paragraph, table, figure, banner, details),
one builder per section, and rendered twice: HTML embeds figures as base64 PNG and shows a details
block closed until the reader opens it; Markdown links the PNG files next to it, keeps every line
within :data:`WIDTH` columns and writes details as GitHub's ``<details>``. What the report says about its statistics (column heads, captions, the "how to
read" paragraph) is written from the aggregate and the verdicts' design it was computed with
(:mod:`gelus.report.stats`), never beside them.
"""

import base64
import html
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelus.experiments.divergence import mark_diverged
from gelus.experiments.files import atomic_write
from gelus.experiments.presets import Preset
from gelus.experiments.selection import run_configs
from gelus.plots.io import save_figure
from gelus.report.analysis import ExperimentResult, Missing, analyse, environment, is_quick
from gelus.report.axes_render import axes_figures
from gelus.report.blocks import Block
from gelus.report.figures import experiment_figures
from gelus.report.forest import comparison_label, forest_figure
from gelus.report.metrics import Mark
from gelus.report.sections import SECTIONS, Context, median_cell
from gelus.report.stats import DESIGN, HEADLINE, Aggregate, Design
from gelus.report.words import (
    format_difference,
    format_value,
    how_to_read,
    interval,
    loso_text,
    p_text,
    power_text,
    sensitivity_claim,
    verdict_cell,
)

__all__ = [
    "Block",
    "format_difference",
    "format_value",
    "how_to_read",
    "power_text",
    "report_blocks",
    "sensitivity_claim",
    "summary_block",
    "to_html",
    "to_markdown",
    "unwrapped",
    "verdict_row",
    "write_report",
]

QUICK_BANNER = (
    "Quick run: fewer epochs and seeds than the paper, to finish in minutes. The numbers show the "
    "pipeline works; they are not a reproduction. Run `gelus reproduce` without --quick for that."
)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _found(result: ExperimentResult, variant: str, aggregate: Aggregate) -> str:
    """This run's aggregates on the headline metric, per setting (and lr when not selected)."""
    rows = [r for r in result.rows if r.selection.variant == variant]
    rows = [r for r in rows if r.selection.metric == rows[0].selection.metric] if rows else []
    groups: dict[str, list[str]] = {}
    for row in rows:
        s = row.selection
        where = ", ".join(p for p in (s.setting, "" if s.lr_selected else f"lr={s.lr:g}") if p)
        cell = median_cell(s.metric, row.summary, aggregate)
        groups.setdefault(where, []).append(f"{s.activation} {cell}")
    metric = rows[0].selection.metric if rows else ""
    parts = [f"{where}: " * bool(where) + ", ".join(cells) for where, cells in groups.items()]
    return f"test {metric}: " + "; ".join(parts) if parts else "—"


def _where(c, several_settings: bool = True) -> str:
    """ " (setting)" and " (lr=…)" of a comparison, where they tell it apart."""
    where = f" ({c.setting})" if several_settings and c.setting else ""
    return where + (f" (lr={c.lr})" if c.lr != "chosen" else "")


def _verdicts(result: ExperimentResult, variant: str, design: Design) -> str:
    settings = {c.setting for c, _ in result.comparisons if c.variant == variant}
    verdicts = [
        f"{c.treatment} vs {c.baseline}{_where(c, len(settings) > 1)}: {verdict_cell(c, design)}"
        for c, _ in result.comparisons
        if c.variant == variant
    ]
    return "; ".join(verdicts) or "—"


def claims_block(results: Sequence[ExperimentResult], design: Design = DESIGN) -> Block:
    """One row per claim: the paper's words, the measure compared, the verdict and its pairs."""
    rows = []
    for result in results:
        for check in result.claims:
            detail = "; ".join(
                f"{c.treatment} vs {c.baseline}{_where(c)}: {verdict_cell(c, design)}"
                for c in check.comparisons
            )
            verdict = check.verdict
            if check.depends:
                verdict += f" — depends on the selection rule ({check.depends})"
            rows.append((result.name, check.claim, check.measure, verdict, detail or "—"))
    headers = ("experiment", "the paper's claim", "measured as", "verdict", "paired comparisons")
    return Block("table", headers=headers, rows=tuple(rows))


def summary_block(
    results: Sequence[ExperimentResult], aggregate: Aggregate = HEADLINE, design: Design = DESIGN
) -> Block:
    """The summary table (opened on demand): per experiment (and config), what the paper reports,
    what this run found, and the verdict on the paper's ordering with its number of paired
    seeds."""
    rows = []
    for result in results:
        variants = dict.fromkeys(row.selection.variant for row in result.rows) or {"": None}
        paper = f" (Figure {result.figure.number})" if result.figure.number else ""
        unfinished = f" ({result.n_unfinished} of {result.n_runs} runs unfinished, not counted)"
        for variant in variants:
            name = result.name + paper + (f" [{variant}]" if variant else "")
            found = _found(result, variant, aggregate)
            found += unfinished if result.n_unfinished else ""
            verdicts = _verdicts(result, variant, design)
            rows.append((name, result.paper_summary or "—", found, verdicts))
    family = f"{design.test}, {design.correction} over the experiment's comparisons"
    headers = ("experiment", "the paper reports", "this run found", f"verdicts ({family})")
    return Block("table", headers=headers, rows=tuple(rows))


# --------------------------------------------------------------------------- sections
def _front_section(results, runs, source: str, quick: bool, aggregate) -> list[Block]:
    """The title, the quick banner and the report's scope in one sentence."""
    blocks = [Block("h1", "GELU paper reproduction: results")]
    if quick:
        blocks.append(Block("banner", QUICK_BANNER))
    n_records = sum(len(r.rows) for r in results)
    plural = "" if len(results) == 1 else "s"
    names = ", ".join(r.name for r in results)
    held = f"({n_records} result rows, {len(runs)} runs) from {source or 'the given records'}"
    scope = (
        f"{len(results)} experiment{plural} ({names}) with records {held}: per experiment, "
        "a figure of every paired comparison's difference to its reference with its "
        f"{aggregate.level} interval, coloured by its verdict, then the verdicts in a table, "
        "then each experiment in full."
    )
    return [*blocks, Block("p", scope)]


def verdict_row(c, design: Design = DESIGN, *, config: bool = True, setting: bool = True):
    """One comparison in the short verdict table: the verdict, what is compared, the effect with
    its interval, its range with one seed left out, the adjusted p and the marks' glyphs."""
    marks = "".join(m.value for m in c.marks(design.alpha))
    effect = f"{format_difference(c.metric, c.mean)} {interval(c.metric, c.ci, difference=True)}"
    label = comparison_label(c, config=config, setting=setting)
    loso = loso_text(c.metric, c.loso)
    return (str(c.verdict), label, effect, loso, p_text(c.p_holm), marks or "—")


def _glance(result: ExperimentResult, forest: Path | None, aggregate, design) -> list[Block]:
    """One experiment at a glance: its forest figure, its short verdict table and, on demand,
    each verdict in words with its marks."""
    blocks = [Block("h3", result.name)]
    comparisons = [c for c, _ in result.comparisons]
    if not comparisons:
        return [*blocks, Block("p", "No paired comparison: one activation, or too few seeds.")]
    if forest is not None:
        caption = (
            f"{result.name}: each comparison's mean paired difference (test "
            f"{comparisons[0].metric}) with its {aggregate.level} t interval, coloured by its "
            f"verdict ({design.correction}-adjusted); the shaded band is the tie margin; glyphs "
            "at the right are its marks."
        )
        blocks.append(Block("figure", caption, image=forest))
    configs = len({c.variant for c in comparisons}) > 1
    settings = len({c.setting for c in comparisons}) > 1
    headers = (
        "verdict", "comparison", f"difference [{aggregate.level} CI]", "one seed left out",
        f"p ({design.correction})", "marks",
    )  # fmt: skip
    rows = tuple(verdict_row(c, design, config=configs, setting=settings) for c in comparisons)
    blocks.append(Block("table", headers=headers, rows=rows))
    blocks += [Block("p", result.rule_note)] if result.rule_note else []  # § can tell nothing
    words = tuple((comparison_label(c), verdict_cell(c, design)) for c in comparisons)
    detail = Block("table", headers=("comparison", "verdict in words"), rows=words)
    return [*blocks, Block("details", "Each verdict in words, with its marks", children=(detail,))]


def _glance_section(results, forests, aggregate, design) -> list[Block]:
    """Every experiment's verdicts as a picture and a short table, before any other table."""
    blocks = [Block("h2", "Verdicts at a glance")]
    for result in results:
        blocks += _glance(result, forests.get(result.name), aggregate, design)
    return blocks


_GLYPHS = "; ".join(f"{m.value} {m.meaning}" for m in Mark)


def _summary_section(results, aggregate: Aggregate, design: Design) -> list[Block]:
    """The paper's claims as the paper made them (where it made any), then the summary table and
    how to read the report, each for the reader who opens it."""
    blocks = []
    if any(result.claims for result in results):
        title = "The paper's claims, as the paper made them"
        blocks += [Block("h2", title), claims_block(results, design)]
    summary = Block(
        "details",
        "Per config: what the paper reports, what this run found, every verdict",
        children=(summary_block(results, aggregate, design),),
    )
    how = Block(
        "details",
        "The statistics, the verdicts, their marks and their limits",
        children=(
            Block("p", how_to_read(aggregate, design)),
            Block("p", f"The marks' glyphs in the figures and tables: {_GLYPHS}."),
        ),
    )
    return [*blocks, Block("h2", "Summary"), summary, Block("h2", "How to read"), how]


def _figure1_section(activation_figure: Path | None) -> list[Block]:
    if activation_figure is None:
        return []
    caption = "Figure 1. GELU (μ=0, σ=1), ReLU and ELU (α=1)."
    return [
        Block("h2", "Figure 1: the activations"),
        Block("figure", caption, image=activation_figure),
    ]


def _missing_section(missing: Sequence[Missing]) -> list[Block]:
    if not missing:
        return []
    rows = tuple((m.experiment, m.dataset, _one_line(m.how_to_get)) for m in missing)
    return [
        Block("h2", "Experiments without data"),
        Block(
            "p",
            "Not in these records: each is listed with how to get its data, or how to run it "
            "when the data is already here.",
        ),
        Block("table", headers=("experiment", "dataset", "how to get it"), rows=rows),
    ]


def _environment_section(results: Sequence[ExperimentResult], runs) -> list[Block]:
    env = environment(runs)
    total = sum(r.wall_seconds for r in results)
    env.append(("training wall time (ensembles counted once)", f"{total / 60:.1f} min"))
    table = Block("table", headers=("metadata", "value"), rows=tuple(env))
    return [Block("h2", "Environment"), table]


def report_blocks(
    results: Sequence[ExperimentResult],
    figures: dict[str, list[tuple[Path, str]]],
    *,
    runs: Sequence[Any],
    missing: Sequence[Missing] = (),
    quick: bool = False,
    source: str = "",
    activation_figure: Path | None = None,
    aggregate: Aggregate = HEADLINE,
    design: Design = DESIGN,
    axis_figures: dict[str, list] | None = None,
    forests: dict[str, Path] | None = None,
) -> list[Block]:
    """The report's content, section by section. ``figures`` maps an experiment to its (PNG path,
    caption) pairs, ``axis_figures`` to its axis families' trend figures (or None each),
    ``forests`` to its verdicts' forest figure (:mod:`gelus.report.forest`);
    ``aggregate`` and ``design`` are what the results were computed with."""
    blocks = _front_section(results, runs, source, quick, aggregate)
    blocks += _glance_section(results, forests or {}, aggregate, design)
    blocks += _summary_section(results, aggregate, design)
    blocks += _figure1_section(activation_figure)
    for result in results:
        drawn = (axis_figures or {}).get(result.name, [None] * len(result.axes))
        context = Context(quick, aggregate, design, figures.get(result.name, []), drawn)
        blocks += [b for section in SECTIONS for b in section.blocks(result, context)]
    return blocks + _missing_section(missing) + _environment_section(results, runs)


# --------------------------------------------------------------------------- renderers
_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
.banner { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.8em 1em; }
details { margin: 0.6em 0; } summary { cursor: pointer; color: #1a4f8b; }
figure { margin: 1em 0; } figure img { max-width: 100%; } figcaption { font-size: 0.9em; color: #555; }
"""


def to_html(blocks: Sequence[Block]) -> str:
    """One self-contained HTML page; figures are embedded as base64 PNG."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(blocks[0].text)}</title>",
        f"<style>{_CSS}</style></head><body>",
        *_html_blocks(blocks),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _html_blocks(blocks: Sequence[Block]) -> list[str]:
    e = html.escape
    parts = []
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
        elif b.kind == "details":
            parts.append(f"<details><summary>{e(b.text)}</summary>")
            parts += _html_blocks(b.children)
            parts.append("</details>")
    return parts


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


WIDTH = 100  # the Markdown report reads in a terminal this wide
# A wrapped line must not start with what Markdown reads as a list item, quote, heading, table
# row or setext underline ("- x", "1. x", "> x", "# x", "| x", "===").
_BLOCK_START = re.compile(r"^\s*([-+*>#|=]+|\d+[.)])(\s|$)")


def _wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """``text`` in lines of at most :data:`WIDTH` columns (a longer word, e.g. a URL, gets a line
    of its own), the first prefixed with ``first`` and the others with ``rest``; a line that would
    start a Markdown block is joined to the one before it."""
    lines = textwrap.wrap(
        text, WIDTH, initial_indent=first, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False,
    ) or [first.rstrip()]  # fmt: skip
    kept = lines[:1]
    for line in lines[1:]:
        if _BLOCK_START.match(line[len(rest) :]):
            kept[-1] += " " + line[len(rest) :]
        else:
            kept.append(line)
    return kept


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table where every line fits :data:`WIDTH` columns, else one list item per row,
    each cell a "heading: value" line under it (a terminal shows it without wrapping)."""
    lines = [
        "| " + " | ".join(map(_md_cell, headers)) + " |",
        "|" + "---|" * len(headers),
    ]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
    if max(len(line) for line in lines) <= WIDTH:
        return "\n".join(lines)
    items = []
    for row in rows:
        cells = [f"{_md_cell(h)}: {_md_cell(c)}" for h, c in zip(headers, row, strict=True)]
        item = _wrap(cells[0], "- ", "    ")
        for cell in cells[1:]:
            item += _wrap(cell, "  - ", "    ")
        items.append("\n".join(item))
    return "\n".join(items)


def to_markdown(blocks: Sequence[Block], relative_to: Path) -> str:
    """The Markdown twin, in lines of at most :data:`WIDTH` columns; figures link their PNG files
    relative to ``relative_to``; a details block is GitHub's ``<details>``."""
    return "\n\n".join(_md_blocks(blocks, relative_to)) + "\n"


def unwrapped(markdown: str) -> str:
    """:func:`to_markdown`'s text as a wide screen would hold it: each paragraph, caption and
    banner on one line, each table written as a list of rows a pipe table again. What a
    renderer shows is unchanged; a reader (or a test) can search it line by line."""
    chunks = []
    for chunk in markdown.strip("\n").split("\n\n"):
        lines = chunk.split("\n")
        if lines[0].startswith("- ") and all(
            line.startswith(("- ", "  - ", "    ")) for line in lines
        ):
            chunks.append(_pipe_table(lines))
        elif lines[0].startswith("> "):
            chunks.append("> " + " ".join(line.removeprefix("> ") for line in lines))
        elif lines[0].startswith(("#", "|", "<", "![")):
            chunks.append(chunk)
        else:
            chunks.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(chunks) + "\n"


def _pipe_table(lines: Sequence[str]) -> str:
    """A table written by :func:`_md_table` as a list of rows, as a pipe table."""
    rows: list[list[list[str]]] = []  # rows of cells of (heading: value) lines
    for line in lines:
        if line.startswith("- "):
            rows.append([[line[2:]]])
        elif line.startswith("  - "):
            rows[-1].append([line[4:]])
        else:
            rows[-1][-1].append(line.strip())
    cells = [[" ".join(cell).split(": ", 1) for cell in row] for row in rows]
    headers = [heading for heading, _ in cells[0]]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(value for _, value in row) + " |" for row in cells]
    return "\n".join(out)


def _md_blocks(blocks: Sequence[Block], relative_to: Path) -> list[str]:
    parts = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            parts.append("#" * int(b.kind[1]) + " " + _md_text(b.text))
        elif b.kind == "p":
            parts.append("\n".join(_wrap(_md_text(b.text))))
        elif b.kind == "banner":
            parts.append("\n".join(_wrap(f"**{_md_text(b.text)}**", "> ", "> ")))
        elif b.kind == "table":
            parts.append(_md_table(b.headers, b.rows))
        elif b.kind == "figure" and b.image is not None:
            path = Path(b.image).relative_to(relative_to).as_posix()
            caption = "\n".join(_wrap(f"*{_md_cell(b.text)}*"))
            parts.append(f"![{Path(b.image).stem}]({path})\n\n{caption}")
        elif b.kind == "details":
            parts.append(f"<details><summary>{html.escape(b.text)}</summary>")
            parts += _md_blocks(b.children, relative_to)
            parts.append("</details>")
    return parts


def _draw_figures(
    results: Sequence[ExperimentResult], records: Sequence[Any], out: Path, aggregate: Aggregate
) -> dict[str, list[tuple[Path, str]]]:
    """{experiment: [(PNG path, caption)]}: each experiment's figures, saved into ``out``."""
    figures: dict[str, list[tuple[Path, str]]] = {}
    for result in results:
        selections = [row.selection for row in result.rows]
        mine = [r for r in records if r.experiment == result.name]
        seconds_per_step = {(c.config_hash, c.activation): c.seconds for c in result.step_costs}
        drawn = experiment_figures(
            mine,
            selections,
            result.figure,
            title=result.name,
            aggregate=aggregate,
            seconds_per_step=seconds_per_step,
            steps_per_epoch=dict(result.steps_per_epoch),
        )
        for kind, fig in drawn.items():
            png, _ = save_figure(fig, out, f"{_slug(result.name)}-{kind}")
            # Figure.get_suptitle arrived in matplotlib 3.8; 3.7 is supported
            caption = " ".join(fig.get_suptitle().split()) if hasattr(fig, "get_suptitle") else kind
            figures.setdefault(result.name, []).append((png, caption))
    return figures


def _draw_forests(results, out: Path, design: Design) -> dict[str, Path]:
    """{experiment: PNG path} of each experiment's verdicts as a forest figure."""
    found = {}
    for result in results:
        comparisons = [c for c, _ in result.comparisons]
        if comparisons:
            figure = forest_figure(comparisons, result.name, design)
            found[result.name], _ = save_figure(figure, out, f"{_slug(result.name)}-verdicts")
    return found


def write_report(
    records: Sequence[Any],
    runs: Sequence[Any],
    out_dir: str | Path,
    *,
    presets: dict[str, Preset],
    missing: Sequence[Missing] = (),
    source: str = "",
    activation_figure: bool = True,
    rule: str | None = None,
    step_times: Sequence[Any] = (),
    aggregate: Aggregate = HEADLINE,
    design: Design = DESIGN,
) -> tuple[Path, Path]:
    """Analyse ``records`` with each experiment's preset (``presets``: name -> Preset, in the
    paper's order), draw the figures into ``out_dir/figures`` and write ``out_dir/report.html`` and
    ``out_dir/report.md``. Returns the two paths. ``rule`` (one of ``SELECTION_RULES``) chooses
    every experiment's learning rate instead of its preset's protocol. ``step_times``: the records'
    interleaved step timings (``gelus.experiments.records.read_step_times``). ``aggregate`` (the
    statistic over seeds, its interval and the bootstrap's seed) and ``design`` (the verdicts'
    test) are used by every table, figure, lr choice and sentence of the report."""
    out_dir = Path(out_dir)
    records = mark_diverged(records, run_configs(runs))  # the figures leave diverged runs out
    results = analyse(records, runs, presets, rule, step_times, aggregate=aggregate, design=design)
    figures = _draw_figures(results, records, out_dir / "figures", aggregate)
    forests = _draw_forests(results, out_dir / "figures", design)
    axis_figures = {
        r.name: axes_figures(r.axes, out_dir / "figures", _slug(r.name), r.name) for r in results
    }
    figure1 = None
    if activation_figure:
        from gelus.plots.activations import figure1 as draw_figure1

        figure1, _ = save_figure(draw_figure1(), out_dir / "figures", "figure1")
    blocks = report_blocks(
        results,
        figures,
        runs=runs,
        missing=missing,
        quick=is_quick(runs),
        source=source,
        activation_figure=figure1,
        aggregate=aggregate,
        design=design,
        axis_figures=axis_figures,
        forests=forests,
    )
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    for path, text in ((html_path, to_html(blocks)), (md_path, to_markdown(blocks, out_dir))):
        with atomic_write(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return html_path, md_path
