"""The report's one door to what the harness has stored or installed: records, presets, datasets.

Every read the report makes of a run folder's records (``gelus.experiments.records``), of the
presets (``PRESETS``) and of the datasets on this machine (``gelus.data``) goes through the small
functions here, so that a change in those interfaces is fixed in one place
(tests/report/test_read_only.py checks that no other report module reaches them). The report's
other modules use the harness's pure vocabulary directly: the selection protocol and the aggregate
(``gelus.experiments.selection``, ``aggregate``, ``protocol``), config flattening, divergence
marking and ``atomic_write``; ``report/cli.py`` runs the experiments through ``gelus.experiments``.
"""

import math
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.records import (
    REAL,
    TEXT,
    WHOLE,
    Record,
    RunInfo,
    StepTime,
    read_records,
    read_runs,
    read_step_times,
    readable_results,
    wrong_type,
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


_STEP_TIME_COLUMNS = {
    "experiment": TEXT, "config_hash": TEXT, "activation": TEXT, "device": TEXT,
    "threads": WHOLE, "round": WHOLE, "seconds": REAL,
}  # fmt: skip


def _bad_step_time(time: StepTime) -> str | None:
    wrong = wrong_type(time, _STEP_TIME_COLUMNS)
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
    records, runs, skipped = readable_results(load_records(run_dir), load_runs(run_dir))
    step_times = []
    for time in load_step_times(run_dir):
        why = _bad_step_time(time)
        if why is None:
            step_times.append(time)
        else:
            skipped.append(why)
    return Loaded(records, runs, skipped, step_times)


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
