"""`gelus export`: tidy CSV tables that read back to exactly the records, with formula-like text
neutralised for spreadsheets."""

import csv
import importlib.util
import json
import math

import pytest

from gelus.cli import main
from gelus.experiments.records import RecordStore, RunKey, read_records
from gelus.report.export import neutralise

HOSTILE = '=HYPERLINK("http://x")'


@pytest.fixture
def run_dir(tmp_path):
    store = RecordStore(tmp_path)
    config = json.dumps({"optim": {"lr": [0.001]}, "train": {"epochs": 2}})
    for activation in ("gelu", HOSTILE):
        for seed in range(3):
            key = RunKey(f"e/h/{activation}/-/lr=0.001/seed={seed}", "e", "h", activation, seed,
                         1e-3, "")  # fmt: skip
            store.start_run(key, config, json.dumps({"dataset": "mnist"}))
            for epoch in (1, 2):
                value = math.nan if (seed, epoch) == (2, 2) else 0.1 * seed + 0.01 * epoch
                store.add(key, epoch, "test", "loss", value)
            store.commit()
            store.finish_runs([key.run_id])
    store.close()
    return tmp_path


def test_records_round_trip_exactly_through_csv(run_dir, tmp_path, capsys):
    assert main(["export", str(run_dir), "--out", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "records.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    original = read_records(run_dir)
    assert len(rows) == len(original)
    for row, record in zip(rows, original, strict=True):
        value = float(row["value"])
        assert (math.isnan(value) and math.isnan(record.value)) or value == record.value
        assert int(row["epoch"]) == record.epoch and float(row["lr"]) == record.lr
    with open(tmp_path / "out" / "runs.csv", newline="", encoding="utf-8") as handle:
        runs = list(csv.DictReader(handle))
    assert {r["config.train.epochs"] for r in runs} == {"2"}
    assert {r["activation"] for r in runs} == {"gelu", "'" + HOSTILE}  # shown, never run


def test_formula_like_text_is_neutralised():
    assert (
        neutralise("=1+1") == "'=1+1" and neutralise("-2") == "'-2" and neutralise("gelu") == "gelu"
    )
    assert neutralise(-2.0) == -2.0  # numbers stay numbers


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_names_the_extra(run_dir, tmp_path, capsys):
    assert main(["export", str(run_dir), "--format", "parquet", "--out", str(tmp_path)]) == 2
    assert "gelus[parquet]" in capsys.readouterr().err
