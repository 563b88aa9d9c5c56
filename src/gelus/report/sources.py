"""The report's one door to the rest of the harness: records, presets, datasets.

Everything the report needs from ``gelus.experiments`` and ``gelus.data`` goes through the small
functions here, so that a change in those interfaces is fixed in one place.
"""

import json
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.records import (
    Record,
    RunInfo,
    StepTime,
    read_records,
    read_runs,
    read_step_times,
)

__all__ = [
    "DatasetStatus", "Loaded", "dataset_status", "load", "load_records", "load_runs",
    "load_step_times", "presets",
]  # fmt: skip


def _database(run_dir: str | Path) -> Path:
    path = Path(run_dir) / "records.sqlite"
    if not path.is_file():
        from gelus.experiments.errors import SettingError

        raise SettingError(
            "out_dir",
            f"no records.sqlite in {run_dir}: give the {{out_dir}} directory of `gelus run` or "
            "`gelus reproduce`",
        )
    return path


def load_records(run_dir: str | Path) -> list[Record]:
    """All records of ``run_dir``; a directory without records is a SettingError."""
    _database(run_dir)
    return read_records(run_dir)


def load_runs(run_dir: str | Path) -> list[RunInfo]:
    """All runs of ``run_dir``; a directory without records is a SettingError."""
    _database(run_dir)
    return read_runs(run_dir)


def load_step_times(run_dir: str | Path) -> list[StepTime]:
    """The interleaved step timings of ``run_dir`` ([] for records made before them)."""
    _database(run_dir)
    return read_step_times(run_dir)


class Loaded(NamedTuple):
    """A run directory's records and runs, without the runs whose stored config or metadata
    cannot be read (``skipped``: one line each saying which and why)."""

    records: list[Record]
    runs: list[RunInfo]
    skipped: list[str]


def _unreadable(run: RunInfo) -> str | None:
    for what, text in (("config", run.config_json), ("metadata", run.metadata_json)):
        try:
            parsed = json.loads(text) if text else {}
        except (TypeError, ValueError) as error:
            return f"its stored {what} is not JSON ({str(error)[:60]})"
        if not isinstance(parsed, dict):
            return f"its stored {what} is a JSON {type(parsed).__name__}, not an object"
    return None


def load(run_dir: str | Path) -> Loaded:
    """The records and runs of ``run_dir`` (read-only), a run whose stored config or metadata is
    damaged left out with its records, so that the rest can be reported."""
    records, runs = load_records(run_dir), load_runs(run_dir)
    problems = {run.run_id: why for run in runs if (why := _unreadable(run)) is not None}
    skipped = [f"run {run_id} left out: {why}" for run_id, why in problems.items()]
    return Loaded(
        [r for r in records if r.run_id not in problems],
        [r for r in runs if r.run_id not in problems],
        skipped,
    )


def presets() -> dict[str, Any]:
    """The engine's presets, name -> Preset, in the paper's order."""
    from gelus.experiments.presets import PRESETS

    return dict(PRESETS)


# --------------------------------------------------------------------------- datasets
class DatasetStatus(NamedTuple):
    """Whether a dataset's files are here, and how to get them."""

    name: str
    present: bool
    how_to_get: str


def dataset_status(name: str, data_dir: str | Path | None = None) -> DatasetStatus:
    """Whether dataset ``name``'s files are on this machine (without loading them), and how to get them."""
    from gelus.data import find, get_spec, how_to_get

    try:
        spec = get_spec(name)
    except ValueError as error:
        return DatasetStatus(name, False, str(error))
    return DatasetStatus(name, find(spec, data_dir) is not None, how_to_get(spec, data_dir).strip())
