"""The records store: append-only, WAL, duplicates ignored, runs marked done."""

import math
import sqlite3

from gelus.experiments.records import DB_NAME, RecordStore, RunKey, read_records, read_runs

KEY = RunKey("exp/abc/gelu/keep=1.0/lr=0.001/seed=0", "exp", "abc", "gelu", 0, 1e-3, "keep=1.0")


def test_duplicates_are_ignored_and_first_values_kept(tmp_path):
    store = RecordStore(tmp_path)
    store.start_run(KEY, '{"a": 1}', '{"threads": 1}')
    store.add(KEY, 1, "test", "error", 0.25)
    store.commit()
    store.add(KEY, 1, "test", "error", 0.5)  # a resumed run re-logging epoch 1
    store.add(KEY, 2, "test", "error", 0.125)
    store.start_run(KEY, '{"a": 2}', "{}")  # a second start keeps the first row
    store.commit()
    store.close()
    records = read_records(tmp_path)
    assert [(r.epoch, r.value) for r in records] == [(1, 0.25), (2, 0.125)]
    assert records[0]._asdict() == KEY._asdict() | {
        "epoch": 1,
        "split": "test",
        "metric": "error",
        "value": 0.25,
    }
    (run,) = read_runs(tmp_path)
    assert run.status == "running" and run.config == {"a": 1} and run.metadata == {"threads": 1}


def test_finish_marks_done_and_database_is_wal(tmp_path):
    store = RecordStore(tmp_path)
    store.start_run(KEY, "{}", "{}")
    store.add(KEY, 0, "train", "loss", 2.3)
    store.finish_runs([KEY.run_id])  # commits pending records first
    assert store.done_run_ids() == {KEY.run_id}
    store.close()
    assert read_runs(tmp_path)[0].status == "done" and len(read_records(tmp_path)) == 1
    with sqlite3.connect(tmp_path / DB_NAME) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reading_a_missing_directory_gives_nothing(tmp_path):
    assert read_records(tmp_path / "none") == [] and read_runs(tmp_path / "none") == []


def test_nan_and_inf_survive_the_database(tmp_path):
    # SQLite stores a NaN as NULL: a diverged run's value must come back as NaN, not None
    store = RecordStore(tmp_path)
    store.start_run(KEY, "{}", "{}")
    for epoch, value in ((1, float("nan")), (2, float("inf")), (3, float("-inf")), (4, 0.5)):
        store.add(KEY, epoch, "val", "loss", value)
    store.close()
    values = [r.value for r in read_records(tmp_path)]
    assert all(isinstance(v, float) for v in values)
    assert math.isnan(values[0]) and values[1:] == [math.inf, -math.inf, 0.5]
