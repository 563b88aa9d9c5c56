"""End to end: run_experiment / `gelus run` on a tiny MNIST written in the genuine IDX format."""

import gzip
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import gelus
from gelus.cli import main as gelus_main
from gelus.experiments import read_records, read_runs, run_experiment
from gelus.experiments.errors import SettingError
from gelus.report.render import unwrapped

TRAIN, TEST = 5_300, 300  # the MNIST loader holds out the last 5,000 training images as val
TINY = ["model.hidden=16,16", "train.batch_size=50", "train.eval_batch_size=2000"]


def _write_idx(path, array: np.ndarray) -> None:
    magic = struct.pack(">HBB", 0, 0x08, array.ndim)
    dims = struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(magic + dims + array.astype(np.uint8).tobytes())


def write_tiny_mnist(directory, n_train=TRAIN, n_test=TEST, seed=0) -> None:
    """Four IDX files: class c lights rows 2c..2c+2, plus noise, so the task is learnable."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, n)
        images = rng.integers(0, 90, (n, 28, 28))
        for i, c in enumerate(labels):
            images[i, 2 * c : 2 * c + 3, 4:24] += 160
        _write_idx(directory / f"{prefix}-images-idx3-ubyte.gz", images)
        _write_idx(directory / f"{prefix}-labels-idx1-ubyte.gz", labels)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist")
    return root


def _run(out_dir, data_dir, name="mnist-classification", **kwargs):
    kwargs.setdefault("overrides", [])
    kwargs["overrides"] = TINY + list(kwargs["overrides"])
    return run_experiment(
        name, out_dir=out_dir, data_dir=data_dir, workers=0, verify=False, **kwargs
    )


def _without_seconds(records):
    return [r for r in records if r.metric != "seconds"]


def test_records_schema_resume_skip_and_determinism(data_dir, tmp_path):
    overrides = ["optim.lr=1e-3,1e-2", "train.train_subset=200", "train.eval_train_subset=100"]
    _run(
        tmp_path / "a",
        data_dir,
        activations=["gelu", "relu"],
        seeds=2,
        epochs=2,
        overrides=overrides,
    )
    records, runs = read_records(tmp_path / "a"), read_runs(tmp_path / "a")
    assert len(runs) == 2 * 2 * 2 * 2  # activations × keeps × lrs × seeds
    assert {r.status for r in runs} == {"done"}
    assert {r.setting for r in runs} == {"keep=1.0", "keep=0.5"}
    metadata = runs[0].metadata
    assert metadata["dataset"] == "mnist" and metadata["threads"] == 1
    assert metadata["code_version"] and metadata["packages"]["torch"] == torch.__version__
    assert runs[0].config["model"]["approximate"] == "tanh"
    assert (
        metadata["train_size"] == 200 and metadata["steps"] == 200 // 50 * 2
    )  # TINY: batches of 50
    per_run = Counter(r.run_id for r in records)
    # epoch 0: 3 splits × (loss, error); epochs 1-2: the same plus train seconds
    assert set(per_run.values()) == {6 + 2 * 7}
    assert {(r.split, r.metric) for r in records} == {
        ("train", "loss"),
        ("train", "error"),
        ("val", "loss"),
        ("val", "error"),
        ("test", "loss"),
        ("test", "error"),
        ("train", "seconds"),
    }
    assert all(0 <= r.value <= 1 for r in records if r.metric == "error")
    gelu_loss = {
        r.epoch: r.value
        for r in records
        if r.run_id == runs[0].run_id and (r.split, r.metric) == ("train", "loss")
    }
    assert gelu_loss[2] < gelu_loss[0]  # it learns

    # the same config and seeds again: every run is done, nothing is added or changed
    _run(
        tmp_path / "a",
        data_dir,
        activations=["gelu", "relu"],
        seeds=2,
        epochs=2,
        overrides=overrides,
    )
    assert read_records(tmp_path / "a") == records
    # one more seed: only the new runs train; the old ones are untouched
    _run(
        tmp_path / "a",
        data_dir,
        activations=["gelu"],
        seeds=3,
        epochs=2,
        overrides=[*overrides, "train.keep=1.0"],
    )
    assert len(read_runs(tmp_path / "a")) == 16 + 2
    assert set(records) <= set(read_records(tmp_path / "a"))
    assert not list(
        (tmp_path / "a" / "checkpoints").glob("*.pt")
    )  # finished jobs drop their checkpoints

    # determinism: a fresh directory gets identical records
    _run(
        tmp_path / "b",
        data_dir,
        activations=["gelu", "relu"],
        seeds=2,
        epochs=2,
        overrides=overrides,
    )
    assert _without_seconds(read_records(tmp_path / "b")) == _without_seconds(records)


def test_substitute_dataset_is_used_and_recorded(tmp_path):
    write_tiny_mnist(tmp_path / "data" / "fashion-mnist", seed=1)
    _run(
        tmp_path / "out",
        tmp_path / "data",
        activations=["relu"],
        seeds=1,
        epochs=1,
        overrides=["train.keep=1", "optim.lr=1e-3"],
    )
    (run,) = read_runs(tmp_path / "out")
    assert (
        run.metadata["dataset"] == "fashion-mnist" and run.metadata["dataset_requested"] == "mnist"
    )
    assert run.config["dataset"] == "fashion-mnist"
    with pytest.raises(SettingError, match="no twitter-pos data"):
        _run(tmp_path / "out2", tmp_path / "data", name="twitter-pos")
    with pytest.raises(SettingError, match="valid datasets"):
        _run(tmp_path / "out2", tmp_path / "data", dataset="mnits")


def test_the_first_lines_say_what_is_loaded_and_planned_before_the_work(tmp_path, capsys):
    write_tiny_mnist(tmp_path / "data" / "fashion-mnist", seed=1)
    argv = ["run", "mnist-classification", "--data-dir", str(tmp_path / "data"), "--seeds", "2"]
    argv += ["--epochs", "1", "--workers", "0", "--activations", "relu", "--set", "optim.lr=1e-3"]
    argv += ["--set", "train.keep=1", "--no-verify", "--out", str(tmp_path / "out")]
    assert gelus_main(argv) == 0
    captured = capsys.readouterr()
    loading, planned = captured.out.splitlines()[:2]
    assert loading.startswith("mnist-classification: loading fashion-mnist from ")
    assert loading.endswith("standing in for mnist (not installed)")  # the stand-in, named
    assert planned == (
        "mnist-classification: 2 runs to train in 1 jobs, in this process on cpu "
        "(a job trains its runs at once)"
    )
    assert "relu keep=1.0, 2 runs" in captured.err and "epoch/s" in captured.err  # the bars' units
    assert gelus_main(argv) == 0  # again: nothing left, and it says so
    assert "nothing left to train, 2 done before" in capsys.readouterr().out
    argv[1] = "mnist-noise"  # another preset in the same folder: its runs alone are counted
    assert gelus_main([*argv[:-2], "--set", "train.epochs=1", *argv[-2:]]) == 0
    assert "mnist-noise: 2 runs to train in 1 jobs, in this process" in capsys.readouterr().out


def test_noise_records_after_last_epoch(data_dir, tmp_path):
    _run(
        tmp_path,
        data_dir,
        name="mnist-noise",
        activations=["elu"],
        seeds=1,
        epochs=2,
        overrides=["optim.lr=1e-3", "noise.levels=0,0.5,3", "train.train_subset=200"],
    )
    records = read_records(tmp_path)
    noisy = [r for r in records if r.split.startswith("test@noise=")]
    assert {r.split for r in noisy} == {"test@noise=0", "test@noise=0.5", "test@noise=3"}
    assert {r.epoch for r in noisy} == {2} and {r.metric for r in noisy} == {
        "loss",
        "error",
        "accuracy",
    }
    final = {(r.split, r.metric): r.value for r in records if r.epoch == 2}
    assert final[("test@noise=0", "loss")] == final[("test", "loss")]
    assert final[("test@noise=3", "loss")] > final[("test", "loss")]
    assert final[("test@noise=0.5", "accuracy")] == pytest.approx(
        1 - final[("test@noise=0.5", "error")]
    )


def test_autoencoder_trains_on_all_training_images(data_dir, tmp_path):
    _run(
        tmp_path,
        data_dir,
        name="mnist-autoencoder",
        activations=["gelu"],
        seeds=1,
        epochs=2,
        overrides=["model.hidden=32,8,32", "optim.lr=1e-3", "train.eval_train_subset=0"],
    )
    records = read_records(tmp_path)
    assert {r.split for r in records} == {"train", "test"}  # no validation split
    recon = {r.epoch: r.value for r in records if (r.split, r.metric) == ("train", "recon_error")}
    assert recon[2] < recon[0]
    (run,) = read_runs(tmp_path)
    assert run.setting == "" and run.config["train_on"] == "train+val"


def test_stochastic_gelu_trains_without_dropout_and_baseline_tunes_keep(data_dir, tmp_path):
    _run(
        tmp_path,
        data_dir,
        name="stochastic-gelu",
        seeds=1,
        epochs=1,
        overrides=["optim.lr=1e-3", "train.train_subset=200"],
    )
    settings = {(r.activation, r.setting) for r in read_runs(tmp_path)}
    assert settings == {
        ("stochastic_gelu", "keep=1.0"),
        ("relu", "keep=1.0"),
        ("relu", "keep=0.75"),
        ("relu", "keep=0.5"),
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "mnist-clasification"], "valid experiments"),
        (["run", "mnist-classification", "--activations", "gleu"], "gleu"),
        (["run", "mnist-classification", "--seeds", "-2"], "--seeds"),
        (["run", "mnist-classification", "--set", "optim.learning_rate=1"], "valid keys"),
        (["run", "mnist-classification", "--dataset", "mnits"], "valid datasets"),
    ],
)
def test_cli_bad_input_fails_before_work(argv, message, tmp_path, capsys):
    assert gelus_main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "records.sqlite").exists()


def test_cli_list(capsys):
    assert gelus_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "mnist-classification" in out and "stochastic_gelu" in out and "fashion-mnist" in out
    assert "gelu_new           gelu(approximate='tanh')" in out  # aliases with what they mean


@pytest.mark.slow
def test_kill_9_then_resume_equals_uninterrupted_run(data_dir, tmp_path):
    """SIGKILL a real `gelus run` once epoch records appear; a second `gelus run` completes it.

    The final records equal those of an uninterrupted run (wall time aside), with no duplicates.
    """
    epochs = 10
    settings = [
        "train.keep=0.5",
        "optim.lr=1e-3",
        "train.train_subset=3000",
        "train.checkpoint_every=3",
    ]
    argv = [
        sys.executable,
        "-m",
        "gelus",
        "run",
        "mnist-classification",
        "--activations",
        "gelu",
        "relu",
        "--seeds",
        "2",
        "--epochs",
        str(epochs),
        "--data-dir",
        str(data_dir),
        "--no-verify",
        "--workers",
        "1",
        "--out",
        str(tmp_path / "killed"),
    ]
    for setting in TINY + settings:
        argv += ["--set", setting]
    # the subprocess runs the code under test (this checkout's src), not whatever is installed
    env = {**os.environ, "PYTHONPATH": str(Path(gelus.__file__).resolve().parents[1])}
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    database = tmp_path / "killed" / "records.sqlite"
    deadline = time.monotonic() + 120
    max_epoch = None
    while time.monotonic() < deadline and process.poll() is None:
        if database.exists():
            try:
                with sqlite3.connect(database, timeout=1) as connection:
                    max_epoch = connection.execute("SELECT MAX(epoch) FROM records").fetchone()[0]
            except sqlite3.OperationalError:
                max_epoch = None
            if max_epoch is not None and max_epoch >= 1:
                break
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert max_epoch is not None and 1 <= max_epoch < epochs, "the run was not caught mid-way"
    interrupted = read_runs(tmp_path / "killed")
    assert any(r.status == "running" for r in interrupted)

    finished = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert finished.returncode == 0, finished.stderr[-2000:]

    # the uninterrupted reference, in this process with one thread like the worker
    run_experiment(
        "mnist-classification",
        out_dir=tmp_path / "reference",
        data_dir=data_dir,
        workers=0,
        verify=False,
        activations=["gelu", "relu"],
        seeds=2,
        epochs=epochs,
        overrides=TINY + settings,
    )

    resumed = read_records(tmp_path / "killed")
    reference = read_records(tmp_path / "reference")
    keys = [(r.run_id, r.epoch, r.split, r.metric) for r in resumed]
    assert len(keys) == len(set(keys))
    assert _without_seconds(resumed) == _without_seconds(reference)
    assert len(resumed) == len(reference) == 2 * 2 * (6 + epochs * 7)
    assert {r.status for r in read_runs(tmp_path / "killed")} == {"done"}


def test_a_batch_larger_than_the_training_set_is_refused_before_any_worker(
    data_dir, tmp_path, capsys
):
    argv = [
        "run",
        "mnist-classification",
        "--data-dir",
        str(data_dir),
        "--no-verify",
        "--workers",
        "0",
    ]
    argv += [
        "--set",
        "train.train_subset=300",
        "--set",
        "train.batch_size=301",
        "--out",
        str(tmp_path / "out"),
    ]
    assert gelus_main(argv) == 2
    err = capsys.readouterr().err
    assert "train.batch_size=301 is larger than the 300 training samples" in err
    assert not (tmp_path / "out" / "records.sqlite").exists()


def test_two_configs_in_one_folder_stay_apart_and_a_diverged_run_is_reported(data_dir, tmp_path):
    from gelus.experiments import PRESETS
    from gelus.experiments.cli import summary_table
    from gelus.report.render import write_report

    common = dict(activations=["gelu", "relu"], seeds=1, epochs=1)
    small = ["train.train_subset=200", "train.eval_train_subset=100", "train.keep=1"]
    for form, lr in (("tanh", "1e-3"), ("none", "1e38")):  # lr 1e38 diverges
        overrides = [*small, f"model.approximate={form}", f"optim.lr={lr}"]
        _run(tmp_path, data_dir, overrides=overrides, **common)
    records, runs = read_records(tmp_path), read_runs(tmp_path)
    assert len({r.config_hash for r in runs}) == 2
    assert any(np.isnan(r.value) for r in records)  # the NaN survived SQLite

    lines = summary_table(records, runs, PRESETS["mnist-classification"]).splitlines()
    (tanh,) = [
        line for line in lines if line.startswith("gelu") and "model.approximate=tanh" in line
    ]
    (none,) = [
        line for line in lines if line.startswith("gelu") and "model.approximate=none" in line
    ]
    (own,) = [r.value for r in records if (r.activation, r.lr, r.epoch, r.split, r.metric) == ("gelu", 1e-3, 1, "test", "loss")]  # fmt: skip
    assert f"{own:.4f}" in tanh and "—" in none and "1 diverged" in none

    _, md_path = write_report(
        records, runs, tmp_path / "report", presets=PRESETS, activation_figure=False
    )
    md = unwrapped(md_path.read_text())  # tables as pipe tables, paragraphs on one line
    assert md.index("## Summary") < md.index("\n## mnist-classification")
    assert (
        "| gelu | model.approximate=none | keep=1.0 | 1e+38 | test loss | 1 | — (all 1 diverged) |"
        in md
    )
    assert f"| gelu | model.approximate=tanh | keep=1.0 | 0.001 | test loss | 1 | {own:.4g} |" in md


def test_the_run_is_resolved_once_its_data_loaded_once_and_its_records_opened_once_a_phase(
    data_dir, tmp_path, monkeypatch, capsys
):
    import dataclasses

    import gelus.data
    from gelus.experiments import datasets, records
    from gelus.experiments.cli import run_with_progress
    from gelus.experiments.run import Run, RunOptions, resolve_run

    loads, opens = [], []
    load, connect, read_only = gelus.data.load, records._connect, records._open_read_only
    monkeypatch.setattr(gelus.data, "load", lambda *a, **k: loads.append(a) or load(*a, **k))
    monkeypatch.setattr(records, "_connect", lambda p: opens.append("write") or connect(p))
    monkeypatch.setattr(records, "_open_read_only", lambda p: opens.append("read") or read_only(p))
    datasets.load_dataset.cache_clear()
    options = RunOptions(
        "mnist-classification", tmp_path, ("gelu",), seeds=1, epochs=1, workers=0,
        data_dir=data_dir, verify=False,
        overrides=[*TINY, "train.keep=1", "optim.lr=1e-3", "train.train_subset=200"],
    )  # fmt: skip
    run = resolve_run(options)
    assert isinstance(run, Run) and run.done == frozenset() and run.train_size == 200
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.device = "cuda"
    assert opens == ["write"]  # the resolution reads what is recorded through one connection
    opens.clear()
    run_with_progress(options)
    # resolve; the one job (in this process); the summary's one read
    assert opens == ["write", "write", "read"]
    assert len(loads) == 1  # resolved twice, the job run once: the files read once
    assert "mnist-classification: test loss" in capsys.readouterr().out


# An MLP run of 2 epochs stopped after the first, its records and checkpoint written by the harness
# before the Run value (commit 4044ebc) on write_tiny_mnist's data with these settings.
INTERRUPTED = Path(__file__).parent / "data" / "interrupted-run"
INTERRUPTED_SETTINGS = dict(
    activations=["gelu"], seeds=1, epochs=2,
    overrides=["model.hidden=4", "train.train_subset=200", "train.eval_train_subset=100",
               "train.keep=1", "optim.lr=1e-3"],
)  # fmt: skip


def test_a_checkpoint_written_by_the_previous_layout_resumes(data_dir, tmp_path, monkeypatch):
    import shutil

    from gelus.experiments.engines.mlp.engine import MLPEngine

    shutil.copytree(INTERRUPTED, tmp_path / "resumed")
    (checkpoint,) = (tmp_path / "resumed" / "checkpoints").glob("*.pt")
    trained = []
    train_epoch = MLPEngine.train_epoch
    monkeypatch.setattr(
        MLPEngine,
        "train_epoch",
        lambda self, epoch: trained.append(epoch) or train_epoch(self, epoch),
    )
    _run(tmp_path / "resumed", data_dir, **INTERRUPTED_SETTINGS)
    assert trained == [2] and not checkpoint.exists()  # resumed after epoch 1, then finished
    assert not list((tmp_path / "resumed" / "checkpoints").glob("*corrupt*"))  # none set aside
    _run(tmp_path / "fresh", data_dir, **INTERRUPTED_SETTINGS)
    resumed = _without_seconds(read_records(tmp_path / "resumed"))
    assert resumed == _without_seconds(read_records(tmp_path / "fresh"))
    assert {r.status for r in read_runs(tmp_path / "resumed")} == {"done"}
