"""`gelus report` reads records without writing: a read-only run folder, an archived WAL database
without its -shm/-wal files, another schema version, a run whose stored config or values are damaged,
a step time that is not a positive number."""

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest

from gelus.cli import main
from gelus.experiments.records import RecordsError, RecordStore, read_records, read_runs
from gelus.report.render import unwrapped
from test_synthetic import make_records, write_database

NOBODY = 65534


@contextlib.contextmanager
def cannot_write(folder: Path):
    """The folder read-only for the code inside: mode 555, and as root (who ignores modes) with
    the effective user dropped to nobody for the duration."""
    folder.chmod(0o555)
    for path in folder.iterdir():
        path.chmod(0o444)
    dropped = os.geteuid() == 0
    if dropped:
        os.seteuid(NOBODY)
    try:
        yield
    finally:
        if dropped:
            os.seteuid(0)
        folder.chmod(0o755)


@pytest.fixture
def shared_folder():
    """A folder that another user can reach (pytest's tmp_path is private to its user)."""
    top = Path(tempfile.mkdtemp(prefix="gelus-ro-", dir="/tmp"))
    top.chmod(0o755)
    yield top
    for path in top.rglob("*"):
        with contextlib.suppress(OSError):
            path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(top, ignore_errors=True)


def _wal_database(folder: Path, *, leave_wal: bool = False) -> tuple[list, list]:
    """A records database in WAL mode as `gelus run` writes it; ``leave_wal``: the writer dies
    before checkpointing, so records remain only in the -wal file."""
    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    store = RecordStore(folder)
    store.close()
    write_database(folder, records, runs)
    if leave_wal:
        code = (
            "import sqlite3, os, sys\n"
            "c = sqlite3.connect(sys.argv[1])\n"
            "c.execute(\"UPDATE runs SET status = 'running' WHERE rowid = 1\")\n"
            "c.commit()\n"
            "os._exit(0)\n"
        )
        subprocess.run([sys.executable, "-c", code, str(folder / "records.sqlite")], check=True)
    return records, runs


def test_a_read_only_archived_wal_database_is_read_in_full(shared_folder):
    folder = shared_folder / "run"
    records, runs = _wal_database(folder)
    for suffix in ("-wal", "-shm"):  # archived without them
        (folder / f"records.sqlite{suffix}").unlink(missing_ok=True)
    digest = hashlib.sha256((folder / "records.sqlite").read_bytes()).hexdigest()
    with cannot_write(folder):
        read, read_run_rows = read_records(folder), read_runs(folder)
    assert sorted(map(tuple, read)) == sorted(map(tuple, records))
    assert len(read_run_rows) == len(runs)
    assert sorted(p.name for p in folder.iterdir()) == ["records.sqlite"]  # nothing created
    assert hashlib.sha256((folder / "records.sqlite").read_bytes()).hexdigest() == digest


def test_records_left_in_a_wal_file_are_not_silently_missed(shared_folder):
    folder = shared_folder / "run"
    _wal_database(folder, leave_wal=True)
    assert (folder / "records.sqlite-wal").stat().st_size > 0
    (folder / "records.sqlite-shm").unlink(missing_ok=True)
    with cannot_write(folder), pytest.raises(RecordsError) as caught:
        read_records(folder)
    message = str(caught.value)
    assert "\n" not in message and "-wal" in message and "records.sqlite" in message


def test_the_report_of_a_read_only_folder_goes_to_out_and_the_records_stay_untouched(tmp_path):
    folder = tmp_path / "run"
    _wal_database(folder)
    digest = hashlib.sha256((folder / "records.sqlite").read_bytes()).hexdigest()
    mode = folder.stat().st_mode
    folder.chmod(stat.S_IMODE(mode) & ~0o222)  # for a user who is not root, truly read-only
    try:
        assert main(["report", str(folder), "--out", str(tmp_path / "rep")]) == 0
    finally:
        folder.chmod(stat.S_IMODE(mode))
    assert (tmp_path / "rep" / "report.md").is_file()
    assert hashlib.sha256((folder / "records.sqlite").read_bytes()).hexdigest() == digest


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("ALTER TABLE records ADD COLUMN unit TEXT", "extra column(s) unit"),
        ("ALTER TABLE runs DROP COLUMN metadata_json", "runs lacks metadata_json"),
        ("PRAGMA user_version = 7", "schema version 7 (written by a newer gelus"),
    ],
)
def test_another_schema_version_is_one_line_naming_both_versions(
    tmp_path, capsys, change, expected
):
    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    write_database(tmp_path, records, runs)
    with sqlite3.connect(tmp_path / "records.sqlite") as connection:
        connection.execute(change)
    connection.close()
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err and "reads schema version 1" in err
    with pytest.raises(RecordsError, match="reads schema version 1"):  # `gelus run`'s store too
        RecordStore(tmp_path)


def test_a_run_whose_stored_config_is_damaged_is_left_out_with_a_warning(tmp_path, capsys):
    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    broken = runs[0]._replace(config_json='{"dataset": "fashion-mn')
    write_database(tmp_path, records, [broken, *runs[1:]])
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert f"run {broken.run_id} left out: its stored config is not JSON" in err
    md = unwrapped((tmp_path / "rep" / "report.md").read_text())
    assert f"{len(runs) - 1} runs" in md


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("UPDATE records SET value = 'abc' WHERE rowid = 1", "value is 'abc', not a number"),
        ("UPDATE records SET epoch = NULL WHERE rowid = 1", "epoch is NULL, not a whole number"),
        ("UPDATE records SET seed = 'x' WHERE rowid = 1", "seed is 'x', not a whole number"),
        (
            "UPDATE runs SET seed = 'x' WHERE rowid = 1",
            "its stored seed is 'x', not a whole number",
        ),
    ],
)
def test_a_run_whose_stored_values_have_the_wrong_type_is_left_out_with_a_warning(
    tmp_path, capsys, damage, expected
):
    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    write_database(tmp_path, records, runs)
    with sqlite3.connect(tmp_path / "records.sqlite") as connection:
        connection.execute(damage)
        (damaged,) = connection.execute(f"SELECT run_id FROM {damage.split()[1]} WHERE rowid = 1")
    connection.close()
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert f"gelus report: warning: run {damaged[0]} left out: " in err and expected in err
    assert err.count("\n") == 1  # one line, no traceback
    assert f"{len(runs) - 1} runs" in unwrapped((tmp_path / "rep" / "report.md").read_text())
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "tables")]) == 0  # as in export
    assert f"run {damaged[0]} left out" in capsys.readouterr().err
    assert damaged[0] not in (tmp_path / "tables" / "runs.csv").read_text()


@pytest.mark.parametrize(
    ("seconds", "expected"), [(None, "NULL, not a number"), (0.0, "0.0"), (-1.0, "-1.0")]
)
def test_a_step_time_that_is_not_a_positive_number_is_left_out_with_a_warning(
    tmp_path, capsys, seconds, expected
):
    from gelus.experiments.records import _SCHEMA

    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    write_database(tmp_path, records, runs)
    timed = [
        ("mnist-classification", "hash0", a, "cpu", 1, r, 0.01)
        for a in ("gelu", "relu")
        for r in range(3)
    ]
    with sqlite3.connect(tmp_path / "records.sqlite") as connection:
        connection.executescript(_SCHEMA)
        connection.executemany("INSERT INTO step_times VALUES (?,?,?,?,?,?,?)", timed)
        connection.execute(
            "UPDATE step_times SET seconds = ? WHERE activation = 'gelu' AND round = 1", (seconds,)
        )
    connection.close()
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "step time of gelu in mnist-classification (round 1 on cpu)" in err
    )
    assert f"seconds is {expected}" in err
