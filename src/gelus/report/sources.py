"""The report's one door to the rest of the harness: records, presets, datasets.

Everything the report needs from ``gelus.experiments`` and ``gelus.data`` goes through the small
functions here, so that a change in those interfaces is fixed in one place.
"""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.records import Record, RunInfo, read_records, read_runs

__all__ = [
    "DatasetStatus",
    "PresetInfo",
    "Record",
    "RunInfo",
    "dataset_status",
    "load_records",
    "load_runs",
    "paper_results",
    "preset_info",
    "preset_names",
    "run_config",
    "run_metadata",
]


def _database(run_dir: str | Path) -> Path:
    path = Path(run_dir) / "records.sqlite"
    if not path.is_file():
        from gelus.cli import UserError

        raise UserError(
            f"no records.sqlite in {run_dir}: give the --out directory of `gelus run` or `gelus reproduce`"
        )
    return path


def load_records(run_dir: str | Path) -> list[Record]:
    """All records of ``run_dir``; a directory without records is a UserError."""
    _database(run_dir)
    return read_records(run_dir)


def load_runs(run_dir: str | Path) -> list[RunInfo]:
    """All runs of ``run_dir``; a directory without records is a UserError."""
    _database(run_dir)
    return read_runs(run_dir)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def run_config(run: Any) -> dict[str, Any]:
    """The run's full configuration as a dict (``config_json`` parsed, or ``config`` if given)."""
    return _as_dict(getattr(run, "config", None) or getattr(run, "config_json", None))


def run_metadata(run: Any) -> dict[str, Any]:
    """The run's metadata (code version, packages, device, threads) as a dict."""
    return _as_dict(getattr(run, "metadata", None) or getattr(run, "metadata_json", None))


# --------------------------------------------------------------------------- presets
class PresetInfo(NamedTuple):
    name: str
    citation: str
    dataset: str
    substitute: str  # the dataset used when ``dataset`` is absent ("" if none)
    paper_results: dict[str, float]  # activation -> the paper's number (fraction for errors)
    paper_summary: str  # what the paper reports, in words, when it gives no numbers
    notes: str


def _presets() -> Mapping[str, Any]:
    from gelus.experiments import PRESETS

    return PRESETS


def preset_names() -> list[str]:
    """The experiments the engine knows, in its order."""
    return list(_presets())


def paper_results(preset: Any) -> dict[str, float]:
    """The paper's reported numbers as ``{activation: value}``; errors as fractions in [0, 1].

    Accepts a mapping of activation to number, or to a mapping holding one number (e.g.
    ``{"test_error": 0.1257}``); percentages (values above 1 for an error) are divided by 100.
    """
    raw = getattr(preset, "paper_results", None) or {}
    if not isinstance(raw, Mapping):
        return {}
    results = {}
    for activation, value in raw.items():
        if isinstance(value, Mapping):
            numbers = [v for v in value.values() if isinstance(v, int | float)]
            value = numbers[0] if len(numbers) == 1 else None
        if isinstance(value, int | float):
            results[str(activation).lower()] = float(value) / 100 if value > 1 else float(value)
    return results


def preset_info(name: str) -> PresetInfo | None:
    """What the engine's preset ``name`` says about the paper (None when unknown)."""
    preset = _presets().get(name)
    if preset is None:
        return None
    notes = getattr(preset, "fidelity", None) or getattr(preset, "notes", None) or ""
    if not isinstance(notes, str):
        notes = " ".join(map(str, notes))
    summary = getattr(preset, "paper_results", None)
    return PresetInfo(
        name=name,
        citation=str(getattr(preset, "citation", "") or ""),
        dataset=str(getattr(preset, "dataset", "") or ""),
        substitute=str(getattr(preset, "substitute", "") or ""),
        paper_results=paper_results(preset),
        paper_summary=summary if isinstance(summary, str) else "",
        notes=notes,
    )


# --------------------------------------------------------------------------- datasets
class DatasetStatus(NamedTuple):
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
