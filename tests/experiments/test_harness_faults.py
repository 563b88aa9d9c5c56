"""Faults and hostile input in the harness: a checkpoint that loads but does not fit, absurd
values, a full disk, and user activation code that fails or exits. Each gives one line (no
traceback), the right exit status, and loses nothing already written."""

import argparse
import sqlite3
import sys
import textwrap
import time

import pytest
import torch

from gelus.cli import main
from gelus.experiments import read_records, read_runs
from test_cli_errors import _argv, _error
from test_run import TINY, write_tiny_mnist


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist", n_train=5_200, n_test=100)
    return root


def _values(out):
    return {
        (r.run_id, r.epoch, r.split, r.metric): r.value
        for r in read_records(out)
        if r.metric != "seconds"
    }


@pytest.fixture(scope="module")
def clean(data_dir, tmp_path_factory):
    """A clean 3-epoch run, the reference every faulted run must equal."""
    out = tmp_path_factory.mktemp("clean")
    assert main(_argv(data_dir, out, epochs=3)) == 0
    return _values(out)


def _crash_after_first_checkpoint(monkeypatch, argv):
    from gelus.experiments import driver

    real_save = driver.save_checkpoint

    def save_then_crash(path, state):
        real_save(path, state)
        raise KeyboardInterrupt  # the machine dies right after the first checkpoint

    with monkeypatch.context() as patch:
        patch.setattr(driver, "save_checkpoint", save_then_crash)
        assert main(argv) == 130


@pytest.mark.parametrize("fault", ["epoch beyond the sweep", "a reshaped tensor", "a renamed one"])
def test_a_checkpoint_that_does_not_fit_is_set_aside_and_the_run_redone(
    fault, data_dir, clean, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    argv = _argv(data_dir, out, epochs=3)
    _crash_after_first_checkpoint(monkeypatch, argv)
    (checkpoint,) = (out / "checkpoints").glob("*.pt")
    state = torch.load(checkpoint, weights_only=True)
    model = state["engine"]["model"]
    if fault == "epoch beyond the sweep":
        state["epoch"] = 9
    elif fault == "a reshaped tensor":
        name = next(iter(model))
        model[name] = model[name][..., :-1].clone()
    else:
        name = next(iter(model))
        model[name + "_renamed"] = model.pop(name)
    torch.save(state, checkpoint)
    capsys.readouterr()
    assert main(argv) == 0
    err = _error(capsys)
    assert "does not fit this job" in err and "start again" in err
    assert len(list((out / "checkpoints").glob("*.corrupt-*"))) == 1  # kept, not deleted
    assert _values(out) == clean
    assert {run.status for run in read_runs(out)} == {"done"}


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--seeds", "1000000000000000000"], "--seeds must be at most 10,000"),
        (["--epochs", "1000000"], "--epochs must be at most 100,000"),
        (["--threads", "100000"], "--threads must be at most"),
        (["--workers", "100000"], "--workers must be at most"),
        (["--set", "optim.eps=1e400"], "optim.eps: expected a finite number"),
        (["--set", "optim.eps=0"], "optim.eps"),
        (["--set", "optim.beta1=1"], "beta1"),
        (["--set", "optim.lr=" + "9" * 100_000], "optim.lr: expected a finite number"),
        (["--set", "train.epochs=" + "9" * 100_000], "train.epochs"),
    ],
)
def test_absurd_values_are_refused_at_once_in_one_short_line(
    extra, words, data_dir, tmp_path, capsys
):
    began = time.perf_counter()
    assert main(_argv(data_dir, tmp_path / "out", *extra)) == 2
    err = _error(capsys)
    assert words in err and len(err) < 2_000 and err.count("\n") == 1
    assert time.perf_counter() - began < 30
    assert not (tmp_path / "out" / "records.sqlite").exists()


def test_the_cnns_adam_epsilon_and_weight_decay_are_checked(capsys):
    assert main(["run", "cifar10-allconv", "--set", "cnn.adam_eps=inf"]) == 2
    assert "cnn.adam_eps" in _error(capsys)
    assert main(["run", "cifar100-wrn", "--set", "cnn.weight_decay=-1"]) == 2
    assert "cnn.weight_decay" in _error(capsys)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_keeps_the_records(
    data_dir, tmp_path, monkeypatch, capsys
):
    from gelus.experiments import checkpoint

    def failed_save(state, file):  # what torch raises when the disk fills mid-write
        file.write(b"partial")
        raise RuntimeError(
            "[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0; "
            "PytorchStreamWriter failed writing file data/0: file write failed"
        )

    monkeypatch.setattr(checkpoint.torch, "save", failed_save)
    out = tmp_path / "out"
    assert main(_argv(data_dir, out, epochs=2)) == 2
    err = _error(capsys)
    assert "disk is full" in err and "free on its filesystem" in err and "--out" in err
    assert {r.epoch for r in read_records(out)} == {0, 1}  # the epoch before the save is kept
    assert not list((out / "checkpoints").glob(".*.tmp"))  # no partial file left behind


def test_a_full_disk_in_the_records_database_is_one_line(data_dir, tmp_path, monkeypatch, capsys):
    from gelus.experiments import records

    real_connect = records._connect

    def small_database(path):
        connection = real_connect(path)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")  # no room to grow: "disk is full"
        return connection

    monkeypatch.setattr(records, "_connect", small_database)
    assert main(_argv(data_dir, tmp_path / "out", epochs=8)) == 2
    err = _error(capsys)
    assert "disk is full" in err and "records.sqlite" in err and "damaged" not in err
    with sqlite3.connect(tmp_path / "out" / "records.sqlite") as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _message(err: str) -> str:
    """The one error line of a command's stderr (after its progress bars)."""
    assert err.count("error: ") == 1
    message = err.rpartition("error: ")[2]
    assert message.count("\n") == 1 and message.endswith("\n")
    return message


TORCH_SHORT_WRITE = "[enforce fail at inline_container.cc:603] . unexpected pos 1536 vs 1430"


@pytest.mark.parametrize("experiment", ["mnist-classification", "transformer-lm"])
def test_torchs_unexpected_pos_is_a_full_disk_in_every_engine(
    experiment, data_dir, tmp_path, monkeypatch, capsys
):
    """torch's checkpoint writer keeps no errno: a full disk reaches the harness as
    RuntimeError("... unexpected pos N vs M") alone, which must still read as a full disk."""
    from gelus.experiments import checkpoint
    from text_corpus import write_corpus

    def failed_save(state, file):
        file.write(b"partial")
        raise RuntimeError(TORCH_SHORT_WRITE)

    monkeypatch.setattr(checkpoint.torch, "save", failed_save)
    out = tmp_path / "out"
    if experiment == "transformer-lm":
        corpus = write_corpus(tmp_path / "data") / "text" / "corpus.txt"
        argv = ["run", "transformer-lm", "--dataset", str(corpus), "--activations", "gelu",
                "--workers", "0", "--out", str(out)]  # fmt: skip
        for setting in ("model.d_model=16", "model.layers=1", "model.heads=2", "model.context=16",
                        "train.epochs=2", "train.steps_per_epoch=2", "train.seeds=1",
                        "optim.lr=1e-3"):  # fmt: skip
            argv += ["--set", setting]
    else:
        argv = _argv(data_dir, out, epochs=2)
    assert main(argv) == 2
    err = _message(_error(capsys))
    assert "disk is full" in err and "checkpoints" in err
    assert "--out" in err and "unexpected pos" not in err
    epochs = {r.epoch for r in read_records(out)}
    assert epochs and max(epochs) == 1  # the epoch before the save is kept
    assert not list((out / "checkpoints").glob(".*.tmp"))


class _FailingConnection:
    """A records connection whose statements starting with ``fails`` raise SQLite's ``error``
    (what a write to a full disk gives when SQLite cannot tell why)."""

    def __init__(self, connection, fails, error):
        self.connection, self.fails, self.error = connection, fails, error

    def _check(self, sql):
        if sql.lstrip().upper().startswith(self.fails):
            raise sqlite3.OperationalError(self.error)

    def execute(self, sql, *args):
        self._check(sql)
        return self.connection.execute(sql, *args)

    def executemany(self, sql, *args):
        self._check(sql)
        return self.connection.executemany(sql, *args)

    def __enter__(self):
        return self.connection.__enter__()

    def __exit__(self, *exc):
        return self.connection.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self.connection, name)


@pytest.mark.parametrize(
    ("fails", "free", "full"),
    [
        ("INSERT OR IGNORE INTO RECORDS", 0, True),  # an epoch's records
        ("INSERT OR IGNORE INTO RUNS", 4096, True),  # a run's registration, a few kB left
        ("INSERT OR IGNORE INTO RECORDS", 10**12, False),  # room left: not a full disk
    ],
    ids=["records, 0 bytes free", "runs, 4 kB free", "records, 1 TB free"],
)
def test_sqlites_disk_io_error_on_a_full_disk_is_a_full_disk(
    fails, free, full, data_dir, tmp_path, monkeypatch, capsys
):
    import collections
    import shutil

    from gelus.experiments import records

    real_connect = records._connect
    monkeypatch.setattr(
        records,
        "_connect",
        lambda path: _FailingConnection(real_connect(path), fails, "disk I/O error"),
    )
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**12, 10**12 - free, free))
    out = tmp_path / "out"
    assert main(_argv(data_dir, out, epochs=2)) == 2
    err = _message(_error(capsys))
    assert str(out / "records.sqlite") in err
    if full:
        assert "disk is full" in err and "damaged" not in err and ".recover" not in err
    else:
        assert "disk is full" not in err and "disk I/O error" in err


@pytest.mark.parametrize(
    ("error", "free", "full"),
    [
        (OSError(28, "No space left on device"), None, True),  # ENOSPC
        (OSError(122, "Disk quota exceeded"), None, True),  # EDQUOT
        (sqlite3.OperationalError("database or disk is full"), None, True),
        (RuntimeError(TORCH_SHORT_WRITE), None, True),
        (
            RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"),
            None,
            True,
        ),
        (ValueError("unexpected pos 3 vs 4"), None, False),  # torch's words, not torch's error
        (sqlite3.OperationalError("disk I/O error"), 0, True),
        (OSError(5, "Input/output error"), 1000, True),  # EIO with a few kB free
        (sqlite3.OperationalError("disk I/O error"), 10**9, False),
        (sqlite3.OperationalError("disk I/O error"), None, False),  # no folder to look at
        (sqlite3.DatabaseError("database disk image is malformed"), 0, False),
    ],
)
def test_a_full_disk_is_told_by_errno_or_by_the_writers_message(
    error, free, full, tmp_path, monkeypatch
):
    import collections
    import shutil

    from gelus.cli import explain
    from gelus.experiments.errors import is_disk_full

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**12, 0, free or 0))
    where = None if free is None and not full else tmp_path
    assert is_disk_full(error, where) is full
    message, status = explain(error, argparse.Namespace(out=where)) or ("", 0)
    assert ("disk is full" in message) is full
    if full:
        assert status == 2 and message.count("\n") == 0


USER_CODE = {
    "raises_at_import": "raise RuntimeError('no GPU driver found')\n",
    "bad_syntax": "def act(x) return x\n",
    "refuses_tensors": "def act(x):\n    raise ValueError('only numpy please')\n",
    "builds_badly": "import torch\nclass Act(torch.nn.Module):\n"
    "    def __init__(self):\n        raise RuntimeError('weights missing')\n",
}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("raises_at_import:act", "no GPU driver found"),
        ("bad_syntax:act", "SyntaxError"),
        ("refuses_tensors:act", "only numpy please"),
        ("builds_badly:Act", "weights missing"),
        ("sys:exit", "SystemExit"),
        ("os:system", "TypeError"),
        ("builtins:eval", "TypeError"),
    ],
)
def test_user_activation_code_that_fails_is_one_line_before_any_worker(
    spec, words, data_dir, tmp_path, monkeypatch, capsys
):
    for name, source in USER_CODE.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    argv = _argv(data_dir, tmp_path / "out", workers=1)
    argv[argv.index("gelu")] = spec
    assert main(argv) == 2  # never 0: a user's SystemExit is not success
    err = _error(capsys)
    assert spec in err and words in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "records.sqlite").exists()
    for name in USER_CODE:
        sys.modules.pop(name, None)


def test_the_noise_experiment_evaluates_the_classifiers_kept_models(data_dir, tmp_path, capsys):
    """mnist-noise's runs are mnist-classification's no-dropout runs: in one folder they are
    evaluated from the kept final models, with the records a retraining gives at the last epoch."""
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    tiny = ["--activations", "gelu", "--seeds", "2", "--epochs", "2", "--data-dir", str(data_dir),
            "--no-verify", "--workers", "0", "--out", str(shared)]  # fmt: skip
    for setting in [*TINY, "optim.lr=1e-3", "train.train_subset=200"]:
        tiny += ["--set", setting]
    assert main(["run", "mnist-classification", *tiny]) == 0
    assert list((shared / "models").glob("*.pt"))
    assert main(["run", "mnist-noise", *tiny]) == 0
    tiny[tiny.index("--out") + 1] = str(alone)
    assert main(["run", "mnist-noise", *tiny]) == 0  # trained from scratch
    capsys.readouterr()

    def noise_records(out):
        return {
            (r.activation, r.lr, r.seed, r.epoch, r.split, r.metric): r.value
            for r in read_records(out)
            if r.experiment == "mnist-noise" and r.epoch == 2 and r.metric != "seconds"
        }

    reused = noise_records(shared)
    assert reused == noise_records(alone)
    assert any(split.startswith("test@noise=") for _, _, _, _, split, _ in reused)
    runs = [r for r in read_runs(shared) if r.experiment == "mnist-noise"]
    assert runs and all(r.status == "done" for r in runs)
    assert all(r.metadata["evaluated_kept_models"] for r in runs)
