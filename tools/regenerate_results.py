"""Regenerate a committed result's report from the records committed beside it.

    python tools/regenerate_results.py docs/results/quick     # or docs/results/full

Reads ``records.sqlite.gz`` in the folder and writes ``report.md``, ``report.html`` and
``figures/`` there. tests/report/test_committed_results.py checks that the committed report.md is exactly
what this gives, so every committed number has its records beside it.
"""

import gzip
import shutil
import sys
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


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    print(f"wrote {regenerate(folder, folder)}")
