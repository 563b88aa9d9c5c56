"""The report's one door to the rest of the harness: records, presets, datasets.

Everything the report needs from ``gelus.experiments`` and ``gelus.data`` goes through the small
functions here, so that a change in those interfaces is fixed in one place.
"""

from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.records import Record, RunInfo, read_records, read_runs

__all__ = ["DatasetStatus", "dataset_status", "load_records", "load_runs", "presets"]


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
