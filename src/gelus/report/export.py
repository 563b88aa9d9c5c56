"""``gelus export RUN``: the records as tidy tables that pandas, R or a spreadsheet read directly.

The records, and every table the report shows, one row per observation:

    runs.csv           one row per run: its keys, status, activation source, and every config key
                       as a column (``config.optim.lr`` …) and the metadata's code version and
                       dataset
    records.csv        one row per run × epoch × split × metric (NaN: a diverged run)
    results.csv        each selection's summary over seeds: the median, its interval, mean, IQM
    verdicts.csv       the paired comparisons: difference, 95 % t interval, p, Holm p, verdict,
                       leave-one-seed-out range (loso_low, loso_high), marks
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


def tables(records: Sequence[Any], runs: Sequence[Any], results: Sequence[Any]) -> dict:
    """Every table the report shows, and the records behind them: ``runs``, ``records``, then
    each section's tables (:data:`gelus.report.sections.SECTIONS`: ``claims``, ``results``,
    ``verdicts``, ``sensitivity``, ``axis_verdicts``, ``trends``, ``step_times``, ``setup``);
    each row a dict of plain values."""
    from gelus.report.sections import SECTIONS

    found: dict[str, list[dict[str, Any]]] = {
        "runs": [_run_row(run) for run in runs],
        "records": [r._asdict() for r in records],  # a record's fields are the table's columns
    }
    for section in SECTIONS:
        for name in section.table_names:  # written even where the records give no row
            found[name] = []
        for result in results:
            for name, rows in section.tables(result).items():
                found[name].extend(rows)
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
