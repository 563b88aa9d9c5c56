"""The committed results are reproducible from the records committed beside them: the report's
Markdown, regenerated from docs/results/*/records.sqlite.gz, equals the committed report.md."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _regenerate():
    spec = importlib.util.spec_from_file_location("regenerate", ROOT / "tools" / "regenerate_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.regenerate


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quick", "full"])
def test_the_committed_report_is_regenerated_exactly_from_its_records(name, tmp_path):
    folder = RESULTS / name
    assert (folder / "records.sqlite.gz").stat().st_size <= 5_000_000
    md = _regenerate()(folder, tmp_path)
    assert md.read_text(encoding="utf-8") == (folder / "report.md").read_text(encoding="utf-8")
