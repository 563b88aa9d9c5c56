"""The report's one door to what the harness has stored or installed: records, presets, datasets.

Every read the report makes of a run folder's records (``gelus.experiments.records``), of the
presets (``PRESETS``) and of the datasets on this machine (``gelus.data``) goes through the small
functions here, so that a change in those interfaces is fixed in one place
(tests/report/test_read_only.py checks that no other report module reaches them). The report's
other modules use the harness's pure vocabulary directly: the selection protocol and the aggregate
(``gelus.experiments.selection``, ``aggregate``, ``protocol``), config flattening, divergence
marking and ``atomic_write``; ``report/cli.py`` runs the experiments through ``gelus.experiments``.
"""

import json
import math
from collections.abc import Callable
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
    "DatasetStatus",
    "Loaded",
    "dataset_status",
    "load",
    "load_records",
    "load_runs",
    "load_step_times",
    "presets",
]


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
    """A run directory's records, runs and step timings, without the runs whose stored config,
    metadata or values cannot be read and without the timings that are not valid (``skipped``:
    one line each saying which and why)."""

    records: list[Record]
    runs: list[RunInfo]
    skipped: list[str]
    step_times: list[StepTime]


# The type each stored column must hold when read back (SQLite keeps whatever was put in a
# column). A record's value may be NULL: a diverged run's NaN.
_TEXT = ("a text", lambda value: isinstance(value, str))
_WHOLE = ("a whole number", lambda value: isinstance(value, int) and not isinstance(value, bool))
_REAL = ("a number", lambda value: isinstance(value, int | float) and not isinstance(value, bool))
_RUN_COLUMNS = {
    "run_id": _TEXT, "experiment": _TEXT, "config_hash": _TEXT, "activation": _TEXT,
    "seed": _WHOLE, "lr": _REAL, "setting": _TEXT, "status": _TEXT,
}  # fmt: skip
_RECORD_COLUMNS = {
    **{name: kind for name, kind in _RUN_COLUMNS.items() if name != "status"},
    "epoch": _WHOLE, "split": _TEXT, "metric": _TEXT, "value": _REAL,
}  # fmt: skip
_STEP_TIME_COLUMNS = {
    "experiment": _TEXT, "config_hash": _TEXT, "activation": _TEXT, "device": _TEXT,
    "threads": _WHOLE, "round": _WHOLE, "seconds": _REAL,
}  # fmt: skip


def _wrong_type(
    row: NamedTuple, columns: dict[str, tuple[str, Callable[[Any], bool]]]
) -> str | None:
    """The first column of ``row`` whose value is not of its kind, said in words (None if all are)."""
    for name, (kind, check) in columns.items():
        value = getattr(row, name)
        if not check(value):
            shown = "NULL" if value is None else repr(value)[:40]
            return f"{name} is {shown}, not {kind}"
    return None


def _unreadable(run: RunInfo) -> str | None:
    wrong = _wrong_type(run, _RUN_COLUMNS)
    if wrong is not None:
        return f"its stored {wrong}"
    for what, text in (("config", run.config_json), ("metadata", run.metadata_json)):
        try:
            parsed = json.loads(text) if text else {}
        except (TypeError, ValueError, RecursionError) as error:
            return f"its stored {what} is not JSON ({str(error)[:60]})"
        if not isinstance(parsed, dict):
            return f"its stored {what} is a JSON {type(parsed).__name__}, not an object"
    return None


def _bad_record(record: Record) -> str | None:
    wrong = _wrong_type(record, _RECORD_COLUMNS)
    if wrong is None:
        return None
    epoch = f" at epoch {record.epoch}" if isinstance(record.epoch, int) else ""
    return f"its stored record {record.split}/{record.metric}{epoch}: {wrong}"


def _bad_step_time(time: StepTime) -> str | None:
    wrong = _wrong_type(time, _STEP_TIME_COLUMNS)
    if wrong is None and not (time.seconds > 0 and math.isfinite(time.seconds)):
        wrong = f"seconds is {time.seconds!r}, not a finite positive number"
    if wrong is None:
        return None
    return (
        f"step time of {time.activation} in {time.experiment} (round {time.round} on "
        f"{time.device}) left out: {wrong}"
    )


def load(run_dir: str | Path) -> Loaded:
    """The records, runs and step timings of ``run_dir`` (read-only). A run whose stored config or
    metadata is damaged, or whose row or records hold a value of the wrong type (a text where a
    number belongs, a NULL epoch), is left out with its records, and a step timing that is not a
    positive number of seconds is left out, so that the rest can be reported."""
    records, runs = load_records(run_dir), load_runs(run_dir)
    problems = {run.run_id: why for run in runs if (why := _unreadable(run)) is not None}
    for record in records:
        if record.run_id not in problems and (why := _bad_record(record)) is not None:
            problems[record.run_id] = why
    skipped = [f"run {run_id} left out: {why}" for run_id, why in problems.items()]
    step_times = []
    for time in load_step_times(run_dir):
        why = _bad_step_time(time)
        if why is None:
            step_times.append(time)
        else:
            skipped.append(why)
    return Loaded(
        [r for r in records if r.run_id not in problems],
        [r for r in runs if r.run_id not in problems],
        skipped,
        step_times,
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
