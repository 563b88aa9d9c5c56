"""Synthetic experiment records in the schema of docs/ARCHITECTURE.md, for the report's tests.

Built here, independently of the engine, so the report is tested against the schema itself.
"""

import json
import sqlite3
from collections import namedtuple
from pathlib import Path

import numpy as np

Record = namedtuple(
    "Record", "run_id experiment config_hash activation seed lr setting epoch split metric value"
)
RunInfo = namedtuple(
    "RunInfo",
    "run_id experiment config_hash activation seed lr setting status config_json metadata_json",
)

# GELU best, then ELU, then ReLU (the paper's ordering), by a clear margin
BASE = {"gelu": 0.10, "elu": 0.12, "relu": 0.14}
METADATA = {
    "code_version": "0.1.0+git.abc1234",
    "packages": {"torch": "2.13.0+cpu", "python": "3.11.2"},
    "device": "cpu",
    "threads": 1,
}


def value_of(activation, seed, lr, setting, epoch, split, metric, noise=0.0):
    """A deterministic value: decays with epochs, lr 1e-3 better than 1e-4, seed jitter."""
    base = BASE.get(activation, 0.13) * (1.2 if "keep=0.5" in setting else 1.0)
    lr_penalty = 0.0 if lr == 1e-3 else 0.03
    jitter = 0.002 * ((seed * 7 + len(activation)) % 5)
    split_shift = {"train": -0.02, "val": 0.0, "test": 0.005}.get(split, 0.005)
    value = base + lr_penalty + jitter + split_shift + 0.3 / epoch + 0.05 * noise
    if metric == "loss":
        value *= 3.0
    return float(value)


def make_records(
    experiment="mnist-classification",
    activations=("gelu", "relu", "elu"),
    seeds=(0, 1, 2),
    lrs=(1e-3, 1e-4),
    settings=("keep=1.0", "keep=0.5"),
    epochs=4,
    splits=("train", "val", "test"),
    metrics=("loss", "error"),
    noise_levels=(),
    quick=False,
    dataset="fashion-mnist",
    config_hash="hash0",
    approximate="tanh",
    metadata=None,
):
    """(records, runs) for one experiment; noise splits after the last epoch as the engine does."""
    records, runs = [], []
    for activation in activations:
        for setting in settings:
            for lr in lrs:
                for seed in seeds:
                    run_id = f"{experiment}-{activation}-{setting}-{lr:g}-{seed}"
                    run_id = f"{config_hash}-{run_id}"
                    key = (run_id, experiment, config_hash, activation, seed, lr, setting)
                    config = {"dataset": dataset, "train": {"epochs": epochs, "batch_size": 128}}
                    config["model"] = {"approximate": approximate}
                    if quick:
                        config["quick"] = True
                    run_metadata = {**METADATA, **(metadata or {})}
                    runs.append(RunInfo(*key, "done", json.dumps(config), json.dumps(run_metadata)))
                    for epoch in range(1, epochs + 1):
                        for split in splits:
                            for metric in metrics:
                                v = value_of(activation, seed, lr, setting, epoch, split, metric)
                                records.append(Record(*key, epoch, split, metric, v))
                        records.append(Record(*key, epoch, "train", "seconds", 10.0 * epoch))
                    for a in noise_levels:
                        for metric in metrics:
                            v = value_of(activation, seed, lr, setting, epochs, "test", metric, a)
                            records.append(Record(*key, epochs, f"test@noise={a:g}", metric, v))
    return records, runs


SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, experiment TEXT, config_hash TEXT, activation TEXT,
    seed INTEGER, lr REAL, setting TEXT, status TEXT, config_json TEXT, metadata_json TEXT);
CREATE TABLE IF NOT EXISTS records (run_id TEXT, experiment TEXT, config_hash TEXT, activation TEXT,
    seed INTEGER, lr REAL, setting TEXT, epoch INTEGER, split TEXT, metric TEXT, value REAL,
    UNIQUE(run_id, epoch, split, metric));
"""


def write_database(directory: Path, records, runs) -> Path:
    """Write ``records.sqlite`` with the schema's tables directly."""
    directory.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(directory / "records.sqlite") as connection:
        connection.executescript(SCHEMA)
        connection.executemany("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)", runs)
        connection.executemany(
            "INSERT OR IGNORE INTO records VALUES (?,?,?,?,?,?,?,?,?,?,?)", records
        )
    connection.close()
    return directory / "records.sqlite"


def test_database_round_trip(tmp_path):
    from gelus.report.sources import load_records, load_runs

    records, runs = make_records(epochs=2)
    write_database(tmp_path, records, runs)
    loaded = load_records(tmp_path)
    assert sorted(map(tuple, loaded)) == sorted(map(tuple, records))
    assert sorted(r.run_id for r in load_runs(tmp_path)) == sorted(r.run_id for r in runs)


def test_values_follow_the_papers_ordering():
    v = {a: value_of(a, 0, 1e-3, "", 4, "test", "error") for a in BASE}
    assert v["gelu"] < v["elu"] < v["relu"]
    assert np.isfinite(list(v.values())).all()
