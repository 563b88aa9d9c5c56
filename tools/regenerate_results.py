"""Regenerate a committed result's report from the records committed beside it.

    python tools/regenerate_results.py                         # every docs/results/* folder
    python tools/regenerate_results.py docs/results/quick     # or docs/results/full
    python tools/regenerate_results.py docs/results/transformer-lm --from runs/results-transformer-lm

Reads ``records.sqlite.gz`` in the folder and writes ``report.md``, ``report.html`` and
``figures/`` there; ``--from RUN_DIR`` first packs that run folder's ``records.sqlite`` into it (a
consistent snapshot through SQLite's backup, vacuumed, gzipped without a timestamp).
tests/report/test_committed_results.py checks that the committed report.md is exactly what this
gives, so every committed number has its records beside it.
"""

import argparse
import gzip
import shutil
import sqlite3
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")


def regenerate(folder: Path, out: Path) -> Path:
    """Write the report of ``folder/records.sqlite.gz`` into ``out``; returns report.md's path."""
    from gelus.report.render import write_report
    from gelus.report.sources import load_records, load_runs, load_step_times, presets

    with tempfile.TemporaryDirectory() as scratch:
        with (
            gzip.open(folder / "records.sqlite.gz") as packed,
            open(Path(scratch) / "records.sqlite", "wb") as database,
        ):
            shutil.copyfileobj(packed, database)
        records, runs = load_records(scratch), load_runs(scratch)
        source = f"docs/results/{folder.name}/records.sqlite.gz"
        _, md = write_report(
            records, runs, out, presets=presets(), source=source,
            step_times=load_step_times(scratch),
        )  # fmt: skip
    return md


def pack(run_dir: Path, folder: Path) -> Path:
    """Write ``folder/records.sqlite.gz`` from ``run_dir/records.sqlite`` (read while a sweep may
    still write it: the backup is one consistent snapshot); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    packed = folder / "records.sqlite.gz"
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "records.sqlite"
        source = sqlite3.connect(
            f"{(run_dir / 'records.sqlite').resolve().as_uri()}?mode=ro", uri=True
        )
        target = sqlite3.connect(copy)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
            target.execute("VACUUM")
        finally:
            source.close()
            target.close()
        with open(copy, "rb") as raw, gzip.GzipFile(packed, "wb", mtime=0) as out:
            shutil.copyfileobj(raw, out)
    return packed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", type=Path, nargs="*", help="docs/results/NAME (default: every committed one)"
    )
    parser.add_argument("--from", dest="run_dir", type=Path, help="pack this run folder first")
    args = parser.parse_args()
    results = Path(__file__).resolve().parents[1] / "docs" / "results"
    folders = args.folders or sorted(p.parent for p in results.glob("*/records.sqlite.gz"))
    if args.run_dir is not None:
        if len(folders) != 1:
            parser.error("--from packs one run folder: name the one docs/results folder it fills")
        print(f"wrote {pack(args.run_dir, folders[0])}")
    for folder in folders:
        print(f"wrote {regenerate(folder, folder)}")
