"""The committed results are reproducible from the records committed beside them: the report's
Markdown, regenerated from docs/results/*/records.sqlite.gz, equals the committed report.md."""

import gzip
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _tool():
    spec = importlib.util.spec_from_file_location(
        "regenerate", ROOT / "tools" / "regenerate_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMMITTED = sorted(p.name for p in RESULTS.iterdir() if (p / "records.sqlite.gz").is_file())


def test_both_the_quick_and_the_full_results_are_committed():
    assert {"quick", "full"} <= set(COMMITTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMITTED)
def test_the_committed_report_is_regenerated_exactly_from_its_records(name, tmp_path):
    folder = RESULTS / name
    assert (folder / "records.sqlite.gz").stat().st_size <= 5_000_000
    md = _tool().regenerate(folder, tmp_path)
    assert md.read_text(encoding="utf-8") == (folder / "report.md").read_text(encoding="utf-8")


def test_packing_a_run_folder_keeps_every_record_run_and_step_time(tmp_path):
    from gelus.experiments.records import RecordStore, read_records, read_runs, read_step_times

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with gzip.open(RESULTS / "quick" / "records.sqlite.gz") as packed:
        (run_dir / "records.sqlite").write_bytes(packed.read())
    store = RecordStore(run_dir)  # as a live sweep's: WAL mode, a step time added
    store.add_step_times("transformer-lm", "h", "cpu", 1, {"gelu": [0.25, 0.5]})
    folder = _tool().pack(run_dir, tmp_path / "docs" / "transformer-lm")
    store.close()
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with gzip.open(folder) as packed:
        (unpacked / "records.sqlite").write_bytes(packed.read())
    assert read_records(unpacked) == read_records(run_dir)
    assert read_runs(unpacked) == read_runs(run_dir)
    assert read_step_times(unpacked) == read_step_times(run_dir) != []
    assert not (unpacked / "records.sqlite-wal").exists()
    assert folder.read_bytes() == _tool().pack(run_dir, tmp_path / "again").read_bytes()
