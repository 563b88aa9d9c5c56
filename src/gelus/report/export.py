"""``gelus export RUN``: the records as tidy tables that pandas, R or a spreadsheet read directly.

The records, and every table the report shows, one row per observation:

    runs.csv           one row per run: its keys, status, activation source, and every config key
                       as a column (``config.optim.lr`` …) and the metadata's code version and
                       dataset
    records.csv        one row per run × epoch × split × metric (NaN: a diverged run)
    results.csv        each selection's summary over seeds: the median, its interval, mean, IQM
    verdicts.csv       the paired comparisons: difference, 95 % t interval, p, Holm p, verdict,
                       marks
    claims.csv         the paper's claims, each one's verdict
    sensitivity.csv    the learning-rate sensitivity's paired regret comparisons
    axis_verdicts.csv  the interactions over an axis and each activation across it
    trends.csv         the trends over a scale or budget axis, with the per-point verdicts
    step_times.csv     each activation's interleaved time per step
    setup.csv          the setup beside the paper's

A table the records give no row for is written empty (its header is unknown: no column).

``--format parquet`` writes the same tables as Parquet (``pip install 'gelus[parquet]'`` brings
pyarrow). A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is
prefixed with ``'`` so that a spreadsheet shows it instead of running it as a formula. Each table
is written under a temporary name and renamed when complete: an interrupted export leaves the
previous complete table (or none), never a truncated one.
"""

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gelus.experiments.config import flat_config
from gelus.experiments.files import atomic_write
from gelus.report.stats import DESIGN, HEADLINE

__all__ = ["export", "neutralise", "tables"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """``value``, with a text that a spreadsheet would run as a formula prefixed by ``'``."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _run_row(run: Any) -> dict[str, Any]:
    metadata = json.loads(run.metadata_json or "{}")
    config = flat_config(json.loads(run.config_json or "{}"))
    source = metadata.get("activation_sources", {}).get(run.activation, {})
    row = {
        "run_id": run.run_id, "experiment": run.experiment, "config_hash": run.config_hash,
        "activation": run.activation, "seed": run.seed, "lr": run.lr, "setting": run.setting,
        "status": run.status, "activation_spec": source.get("spec", run.activation),
        "activation_sha256": source.get("sha256", ""), "dataset": metadata.get("dataset", ""),
        "code_version": metadata.get("code_version", ""),
    }  # fmt: skip
    for key, value in config.items():
        row[f"config.{key}"] = json.dumps(value) if isinstance(value, list | dict) else value
    return row


def _comparison(c: Any) -> dict[str, Any]:
    """One judged comparison as a row: what was compared, the difference, its interval, the
    p-values, the verdict's word and its marks (the same columns in every table of them)."""
    power = f"pairs_for_{100 * DESIGN.power:g}_percent_power"
    return {
        "experiment": c.experiment, "config": c.variant, "setting": c.setting, "lr": c.lr,
        "metric": c.metric, "treatment": c.treatment, "baseline": c.baseline,
        "pairs": len(c.seeds), "mean_difference": c.mean, "ci_low": c.ci[0], "ci_high": c.ci[1],
        "p": c.p, "p_holm": c.p_holm, "verdict": c.verdict.word, power: c.pairs_needed,
        "depends_on_selection_rule": c.depends, "p_sign_flip": c.p_sign, "fragile": c.fragile,
        "depends_on_reference_lr": c.reference_lr,
        "marks": "".join(m.value for m in c.marks(DESIGN.alpha)),
    }  # fmt: skip


def _results(result: Any) -> list[dict[str, Any]]:
    """The results table: each selection's summary over seeds (the headline aggregate)."""
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
    return rows


def _axes(result: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the interaction and per-activation tables of categorical families, the trend tables of
    scale and budget families), each row naming its family."""
    pairs, trends = [], []
    for axis in result.axes:
        family = {"family": axis.family.kind, "keys": ",".join(axis.family.keys)}
        for kind, found in (("interaction", axis.comparisons), ("effect", axis.effects)):
            pairs += [{**family, "table": kind, **_comparison(c)} for c in found]
        for t in axis.trends:
            holds = ", ".join(f"{word} at {n}" for word, n in t.holds.items())
            trends.append({
                **family, "x": ",".join(f"{x:g}" for x in t.x), **_comparison(t.comparison),
                "per_point_verdicts": holds,
            })  # fmt: skip
    return pairs, trends


def tables(records: Sequence[Any], runs: Sequence[Any], results: Sequence[Any]) -> dict:
    """Every table the report shows, and the records behind them: ``runs``, ``records``,
    ``results``, ``verdicts`` (the paired comparisons), ``claims``, ``sensitivity``,
    ``axis_verdicts`` (interactions and each activation across an axis), ``trends``,
    ``step_times`` and ``setup``; each row a dict of plain values."""
    found: dict[str, list[dict[str, Any]]] = {
        "runs": [_run_row(run) for run in runs],
        "records": [r._asdict() for r in records],  # a record's fields are the table's columns
        "results": [row for result in results for row in _results(result)],
        "verdicts": [_comparison(c) for result in results for c, _ in result.comparisons],
        "claims": [
            {
                "experiment": result.name,
                "claim": check.claim,
                "measure": check.measure,
                "verdict": check.verdict.word,
                "depends_on_selection_rule": check.depends,
                "comparisons": len(check.comparisons),
            }
            for result in results
            for check in result.claims
        ],
        "sensitivity": [
            {
                "reference": result.sensitivity.reference,
                "split": result.sensitivity.split,
                "epoch": result.sensitivity.epoch,
                **_comparison(c),
            }
            for result in results
            if result.sensitivity
            for c in result.sensitivity.comparisons
        ],
        "axis_verdicts": [],
        "trends": [],
        "step_times": [
            {"experiment": result.name, **c._asdict()}
            for result in results
            for c in result.step_costs
        ],
        "setup": [
            {"experiment": result.name, "aspect": aspect, "paper": paper, "this_run": ours}
            for result in results
            for aspect, paper, ours in result.setup
        ],
    }
    for result in results:
        pairs, trends = _axes(result)
        found["axis_verdicts"] += pairs
        found["trends"] += trends
    return found


def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    rows = list(rows)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with atomic_write(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in columns})


def _cell(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # pandas and R read it as a missing value
    return "" if value is None else neutralise(value)


def export(
    run_dir: str | Path, out: str | Path, fmt: str = "csv", loaded: Any = None
) -> list[Path]:
    """Write the run folder's tables into ``out`` as CSV or Parquet; returns the files (a run
    whose stored config or values are damaged is left out, as in the report). ``loaded``: the
    folder's ``sources.load``, when the caller has read it already."""
    from gelus.report.analysis import analyse
    from gelus.report.sources import load, presets

    records, runs, _, _ = loaded if loaded is not None else load(run_dir)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = tables(records, runs, analyse(records, runs, presets()))
    written = []
    for name, rows in data.items():
        if fmt == "parquet":
            written.append(_write_parquet(out / f"{name}.parquet", rows))
        else:
            _write_csv(out / f"{name}.csv", rows)
            written.append(out / f"{name}.csv")
    return written


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        from gelus.experiments.errors import CommandError

        raise CommandError(
            "--format parquet needs pyarrow: pip install 'gelus[parquet]' (or use --format csv)"
        ) from None
    columns = list(dict.fromkeys(key for row in rows for key in row))
    table = pa.table({c: [neutralise(row.get(c)) for row in rows] for c in columns})
    with atomic_write(path, "wb") as handle:
        pq.write_table(table, handle)
    return path
