"""The command line never answers a user's mistake or a bad file with a traceback.

Each case ends in one message naming the file or setting and the way out, with a non-zero exit
status; ``--debug`` (or ``GELUS_DEBUG=1``) shows the traceback instead.
"""

import concurrent.futures.process
import gzip
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gelus.cli import explain, main
from gelus.data import DataError
from gelus.experiments import read_records
from gelus.experiments.records import RecordStore, RunKey
from test_run import TINY, write_tiny_mnist

SRC = Path(__file__).resolve().parents[1] / "src"
SETTINGS = [*TINY, "train.keep=0.5", "optim.lr=1e-3", "train.train_subset=200"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist", n_train=5_200, n_test=100)
    return root


@pytest.fixture(scope="module")
def bad_data_dir(tmp_path_factory):
    """Tiny MNIST whose training images are cut short."""
    root = tmp_path_factory.mktemp("bad-data")
    write_tiny_mnist(root / "mnist", n_train=5_200, n_test=100)
    images = root / "mnist" / "train-images-idx3-ubyte.gz"
    images.write_bytes(gzip.compress(gzip.decompress(images.read_bytes())[:-1000]))
    return root


def _argv(data_dir, out, *extra, epochs=2, workers=0):
    argv = ["run", "mnist-classification", "--activations", "gelu", "--seeds", "1"]
    argv += ["--epochs", str(epochs), "--data-dir", str(data_dir), "--no-verify"]
    argv += ["--workers", str(workers), "--out", str(out), *extra]
    for setting in SETTINGS:
        argv += ["--set", setting]
    return argv


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def _gelus(argv, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC), **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "gelus", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def test_a_bad_data_file_in_a_worker_is_one_message_naming_it(bad_data_dir, tmp_path):
    """The DataError is raised in a worker process and re-raised in the CLI's."""
    result = _gelus(_argv(bad_data_dir, tmp_path / "out", workers=1))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    images = bad_data_dir / "mnist" / "train-images-idx3-ubyte.gz"
    assert f"gelus run: error: {images}: IDX dimensions" in result.stderr
    assert "gelus data" in result.stderr  # the way out
    message = result.stderr[result.stderr.index("gelus run: error:") :]
    assert len(message.strip().splitlines()) == 2  # the error, then the way out


def test_debug_and_the_environment_variable_show_the_traceback(bad_data_dir, tmp_path, capsys):
    assert main(_argv(bad_data_dir, tmp_path / "a")) == 2
    assert "train-images-idx3-ubyte.gz" in _error(capsys)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\.gz"):
        main(["--debug", *_argv(bad_data_dir, tmp_path / "b")])
    with pytest.raises(DataError):
        main([*_argv(bad_data_dir, tmp_path / "c"), "--debug"])
    os.environ["GELUS_DEBUG"] = "1"
    try:
        with pytest.raises(DataError):
            main(_argv(bad_data_dir, tmp_path / "d"))
    finally:
        del os.environ["GELUS_DEBUG"]
    result = _gelus(["--debug", *_argv(bad_data_dir, tmp_path / "e")])
    assert result.returncode == 1 and "Traceback" in result.stderr


def test_an_out_that_is_a_file_names_it_and_the_option(data_dir, tmp_path, capsys):
    out = tmp_path / "results.txt"
    out.write_text("not a folder")
    assert main(_argv(data_dir, out)) != 0
    err = _error(capsys)
    assert str(out) in err and "give --out a folder you can write to" in err
    assert out.read_text() == "not a folder"


def test_an_out_that_cannot_be_written_names_it_and_the_option(data_dir, tmp_path, capsys):
    # a folder even root cannot create things in (sysfs), else a read-only one
    if Path("/sys/kernel").is_dir():
        out = Path("/sys/kernel/gelus-test-out")
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        out = tmp_path / "ro" / "out"
    assert main(_argv(data_dir, out)) != 0
    err = _error(capsys)
    assert str(out) in err and "give --out a folder you can write to" in err


def _records(out: Path, rows: int = 3000) -> bytes:
    store = RecordStore(out)
    key = RunKey("run/1", "mnist-classification", "abc", "gelu", 0, 1e-3, "")
    store.start_run(key, "{}", "{}")
    for epoch in range(rows):
        store.add(key, epoch, "train", "loss", epoch / rows)
    store.close()
    connection = sqlite3.connect(out / "records.sqlite")
    connection.execute("PRAGMA journal_mode=DELETE")  # fold the WAL into the file, drop -wal/-shm
    connection.close()
    assert sorted(p.name for p in out.iterdir()) == ["records.sqlite"]
    return (out / "records.sqlite").read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
@pytest.mark.parametrize("command", ["run", "report"])
def test_a_damaged_records_database_is_named_and_left_untouched(
    data_dir, tmp_path, capsys, damage, command
):
    out = tmp_path / "out"
    database = out / "records.sqlite"
    if damage == "garbage":
        out.mkdir()
        database.write_bytes(b"these are not the records you are looking for" * 100)
    else:
        content = _records(out)
        database.write_bytes(content[: len(content) // 2])
    before = database.read_bytes()
    argv = _argv(data_dir, out) if command == "run" else ["report", str(out)]
    assert main(argv) == 2
    err = _error(capsys)
    assert f"{database}: the records database is damaged" in err
    assert "left untouched" in err and f"mv {database}" in err
    assert database.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["records.sqlite"]


def test_a_corrupt_checkpoint_is_set_aside_and_its_run_restarted(
    data_dir, tmp_path, capsys, monkeypatch
):
    from gelus.experiments import driver as train_mlp

    real_save = train_mlp.save_checkpoint

    def save_then_crash(path, state):  # the machine dies right after the first checkpoint
        real_save(path, state)
        raise KeyboardInterrupt

    out = tmp_path / "out"
    argv = _argv(data_dir, out, "--set", "train.checkpoint_every=1", epochs=3)
    with monkeypatch.context() as patch:
        patch.setattr(train_mlp, "save_checkpoint", save_then_crash)
        assert main(argv) == 130
    assert "interrupted; finished runs are kept" in _error(capsys)
    (checkpoint,) = (out / "checkpoints").glob("*.pt")
    damaged = checkpoint.read_bytes()[:-200]  # truncated: a full disk, a crash mid-copy
    checkpoint.write_bytes(damaged)

    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {checkpoint} is unreadable" in err and "start again" in err
    (aside,) = (out / "checkpoints").glob("*.corrupt-*")
    assert aside.read_bytes() == damaged  # kept, never deleted
    assert main(argv) == 0  # done: nothing left that blocks the next call

    reference_argv = _argv(
        data_dir, tmp_path / "ref", "--set", "train.checkpoint_every=1", epochs=3
    )
    assert main(reference_argv) == 0  # never interrupted
    ours = [r for r in read_records(out) if r.metric != "seconds"]
    reference = [r for r in read_records(tmp_path / "ref") if r.metric != "seconds"]
    assert ours == reference and len(ours) > 0


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (`gelus run`'s workers are its command process's children,
    under the supervising parent: gelus.experiments.supervise)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    children = [int(c) for c in path.read_text().split()] if path.exists() else []
    return children + [grandchild for child in children for grandchild in _children(child)]


@pytest.mark.slow
def test_a_killed_worker_is_one_message_saying_how_to_resume(data_dir, tmp_path):
    argv = _argv(data_dir, tmp_path / "out", epochs=200, workers=1)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gelus", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    database = tmp_path / "out" / "records.sqlite"
    deadline = time.monotonic() + 120
    workers = []
    while time.monotonic() < deadline and not workers and process.poll() is None:
        if database.exists():
            workers = [
                child
                for child in _children(process.pid)
                if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text(errors="replace")
            ]
        time.sleep(0.05)
    assert workers, "no worker process was seen"
    os.kill(workers[0], signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in err
    assert "a worker process died abruptly" in err and "run the same command again" in err


def test_errors_nobody_anticipated_still_show_a_traceback():
    assert explain(RuntimeError("a bug")) is None
    assert explain(ZeroDivisionError()) is None
    message, status = explain(concurrent.futures.process.BrokenProcessPool("gone"))
    assert status == 1 and "worker process died" in message


def test_errors_wrapped_by_ray_are_unwrapped():
    cause = DataError("/data/x.gz: truncated")
    wrapped = type("RayTaskError(DataError)", (Exception,), {})("traceback text")
    wrapped.cause = cause
    message, status = explain(wrapped)
    assert status == 2 and message.startswith("/data/x.gz: truncated")
