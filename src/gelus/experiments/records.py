"""Tidy, append-only results: one SQLite database per output directory (``records.sqlite``).

Schema (docs/ARCHITECTURE.md)::

    runs(run_id PRIMARY KEY, experiment, config_hash, activation, seed, lr, setting, status,
         config_json, metadata_json)
    records(run_id, experiment, config_hash, activation, seed, lr, setting, epoch, split, metric,
            value, UNIQUE(run_id, epoch, split, metric))

A diverged run's NaN is stored as NULL (SQLite has no NaN) and read back as NaN; ±inf are stored as
they are. Records are inserted with ``INSERT OR IGNORE`` and committed once per epoch, so a run resumed from
an earlier checkpoint re-logs the epochs since then without duplicating (or changing) a record. The
database is in WAL mode so several worker processes append at once. The only updates ever made are
a run's ``status``: from ``running`` to ``done``, or to ``failed`` (its job raised: user code that
failed, memory that ran out) and from ``failed`` back to ``running`` when a later command tries it
again (runs not ``done`` are planned again).
"""

import contextlib
import json
import math
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.device import code_version, environment_metadata  # the stamp, re-exported
from gelus.experiments.errors import DiskFullError, MachineError, SettingError, is_disk_full

__all__ = [
    "DB_NAME",
    "REAL",
    "RECORD_COLUMNS",
    "RUN_COLUMNS",
    "TEXT",
    "WHOLE",
    "Record",
    "RecordStore",
    "RecordedState",
    "RecordsError",
    "RunInfo",
    "RunKey",
    "StepTime",
    "code_version",
    "environment_metadata",
    "read_records",
    "read_results",
    "read_runs",
    "read_state",
    "read_step_times",
    "readable_results",
    "wrong_type",
]

DB_NAME = "records.sqlite"
# Stamped in ``PRAGMA user_version`` by every writer; 0 in a database written before the stamp,
# read as this version when its columns are this version's.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, experiment TEXT, config_hash TEXT, activation TEXT, seed INTEGER,
    lr REAL, setting TEXT, status TEXT, config_json TEXT, metadata_json TEXT);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT, experiment TEXT, config_hash TEXT, activation TEXT, seed INTEGER, lr REAL,
    setting TEXT, epoch INTEGER, split TEXT, metric TEXT, value REAL,
    UNIQUE(run_id, epoch, split, metric));
CREATE TABLE IF NOT EXISTS step_times (
    experiment TEXT, config_hash TEXT, activation TEXT, device TEXT, threads INTEGER,
    round INTEGER, seconds REAL, UNIQUE(experiment, config_hash, activation, device, round));
"""


class RunKey(NamedTuple):
    """What identifies one run (one member of an ensemble, or one CNN training)."""

    run_id: str
    experiment: str
    config_hash: str
    activation: str
    seed: int
    lr: float
    setting: str


class Record(NamedTuple):
    """One measurement: ``metric`` of ``split`` after ``epoch`` epochs of run ``run_id``."""

    run_id: str
    experiment: str
    config_hash: str
    activation: str
    seed: int
    lr: float
    setting: str
    epoch: int
    split: str
    metric: str
    value: float


class StepTime(NamedTuple):
    """One round of an interleaved timing: ``activation``'s seconds per optimizer step at the
    config ``config_hash`` of ``experiment``, on ``device`` with ``threads`` torch threads."""

    experiment: str
    config_hash: str
    activation: str
    device: str
    threads: int
    round: int
    seconds: float


class RunInfo(NamedTuple):
    """One run's row: identity, status (``running`` | ``done`` | ``failed``), full config and metadata (JSON)."""

    run_id: str
    experiment: str
    config_hash: str
    activation: str
    seed: int
    lr: float
    setting: str
    status: str
    config_json: str
    metadata_json: str

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json)

    @property
    def metadata(self) -> dict[str, Any]:
        return json.loads(self.metadata_json)


class RecordsError(SettingError):
    """``records.sqlite`` cannot be used: damaged, or in a folder that cannot be written."""

    def __init__(self, message: str, parameter: str = "out_dir") -> None:
        super().__init__(parameter, message)

    def __reduce__(self):
        return type(self), (self.template, self.parameter)


def _columns() -> dict[str, tuple[str, ...]]:
    return {"runs": RunInfo._fields, "records": Record._fields, "step_times": StepTime._fields}


def _check_schema(connection: sqlite3.Connection, path: Path) -> None:
    """Raise RecordsError, naming both versions, for a database of another schema (tables not
    created yet are fine: a writer creates them)."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    differences = []
    for table, expected in _columns().items():
        found = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
        if not found:
            continue
        extra = [c for c in found if c not in expected]
        lacking = [c for c in expected if c not in found]
        if extra:
            differences.append(f"{table} has the extra column(s) {', '.join(extra[:3])}")
        if lacking:
            differences.append(f"{table} lacks {', '.join(lacking[:3])}")
        if not extra and not lacking and tuple(found) != expected:
            differences.append(f"{table} has its columns in another order")
    if version in (0, SCHEMA_VERSION) and not differences:
        return
    from gelus import __version__

    what = f"schema version {version}" if version else "an unstamped schema"
    newer = " (written by a newer gelus: upgrade gelus)" if version > SCHEMA_VERSION else ""
    raise RecordsError(
        f"{path}: records of {what}{newer}"
        + (f" ({'; '.join(differences)})" if differences else "")
        + f"; gelus {__version__} reads schema version {SCHEMA_VERSION}. Read it with the gelus "
        "that wrote it (its runs' code_version), or give {out_dir} another folder"
    )


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the records database at ``path``, in WAL mode with the schema.

    An existing database is checked (``PRAGMA quick_check``) before anything is written to it:
    a damaged one raises ``RecordsError`` naming it and is left exactly as it was, never
    overwritten or repaired in place; so does a database that cannot be opened or written.
    """
    existed = path.is_file() and path.stat().st_size > 0
    connection = None
    try:
        connection = sqlite3.connect(path, timeout=120.0)
        if existed:
            problems = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("; ".join(problems[:3]))
            _check_schema(connection, path)
        connection.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: durable at checkpoints, never corrupt
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except RecordsError:
        connection.close()
        raise
    except sqlite3.Error as error:
        if connection is not None:
            connection.close()
        raise _records_error(path, error) from None
    return connection


def _records_error(
    path: Path, error: sqlite3.Error, reading: bool = False
) -> RecordsError | DiskFullError:
    text = str(error)
    if is_disk_full(error, path.parent):  # by its message, or "disk I/O error" with ~0 bytes free
        return DiskFullError(path)
    if reading and any(word in text for word in ("unable to open", "readonly")):
        return RecordsError(
            f"{path}: cannot open the records database to read it ({text}); its folder must be "
            "readable, and an unfinished -wal file beside it needs the folder to be writable"
        )
    if any(word in text for word in ("readonly", "unable to open", "read-only", "permission")):
        return RecordsError(
            f"{path}: cannot open the records database for writing ({text}); give {{out_dir}} a "
            "folder you can write to"
        )
    if "locked" in text or "busy" in text:
        return RecordsError(
            f"{path}: the records database stayed locked by another process ({text}); wait for "
            "the other gelus command to finish, or give {out_dir} another folder"
        )
    return RecordsError(
        f"{path}: the records database is damaged ({text}). It was left untouched. To keep what "
        f"it holds, try `sqlite3 {path} .recover | sqlite3 recovered.sqlite`; to start afresh, "
        f"move it aside (mv {path} {path}.damaged) and run again: finished runs are then redone"
    )


class RecordStore:
    """Appends runs and records to ``out_dir/records.sqlite``.

    ``add`` buffers; ``commit`` writes the buffer in one transaction (call it once per epoch).
    """

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.connection = _connect(self.out_dir / DB_NAME)
        self._pending: list[tuple] = []

    @contextlib.contextmanager
    def _transaction(self):
        """One transaction (committed, or rolled back on an error); a failed write raises what
        ``_records_error`` makes of it (a full disk as DiskFullError), not SQLite's error."""
        try:
            with self.connection:
                yield self.connection
        except sqlite3.Error as error:
            raise _records_error(self.out_dir / DB_NAME, error) from error

    def start_run(self, key: RunKey, config_json: str, metadata_json: str) -> None:
        """Register a run (status ``running``); a run already registered keeps its first row (one
        that ``failed`` is ``running`` again: it is being tried again)."""
        with self._transaction():
            self.connection.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                (*key, config_json, metadata_json),
            )
            self.connection.execute(
                "UPDATE runs SET status = 'running' WHERE run_id = ? AND status = 'failed'",
                (key.run_id,),
            )

    def fail_runs(self, run_ids: Iterable[str]) -> None:
        """Mark the runs among ``run_ids`` still ``running`` as ``failed`` (their job raised); the
        records already committed stay, and a later command plans them again."""
        with self._transaction():
            self.connection.executemany(
                "UPDATE runs SET status = 'failed' WHERE run_id = ? AND status = 'running'",
                [(r,) for r in run_ids],
            )

    def add(self, key: RunKey, epoch: int, split: str, metric: str, value: float) -> None:
        self._pending.append((*key, int(epoch), split, metric, float(value)))

    def commit(self) -> None:
        if not self._pending:
            return
        with self._transaction():  # one transaction: all of an epoch's records or none
            self.connection.executemany(
                "INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self._pending,
            )
        self._pending.clear()

    def finish_runs(self, run_ids: Iterable[str], epochs: Iterable[int] | None = None) -> None:
        """Mark runs ``done`` after their last records are committed; with ``epochs``, only if
        every run has records of each of them (else MachineError: nothing is marked)."""
        self.commit()
        run_ids = list(run_ids)
        if epochs is not None:
            expected = set(epochs)
            for run_id in run_ids:
                rows = self.connection.execute(
                    "SELECT DISTINCT epoch FROM records WHERE run_id = ?", (run_id,)
                )
                missing = sorted(expected - {row[0] for row in rows})
                if missing:
                    raise MachineError(
                        "",
                        f"run {run_id} lacks the records of epochs {missing[:5]}; it was not "
                        "marked done: run the same command again to redo it",
                    )
        with self._transaction():
            self.connection.executemany(
                "UPDATE runs SET status = 'done' WHERE run_id = ?", [(r,) for r in run_ids]
            )

    def add_step_times(
        self,
        experiment: str,
        config_hash: str,
        device: str,
        threads: int,
        times: Mapping[str, Sequence[float]],
    ) -> None:
        """Store each activation's seconds per step, one row per round (a re-measurement of the
        same activation, config and device replaces the old rows)."""
        rows = [
            (experiment, config_hash, label, device, int(threads), i, float(seconds))
            for label, rounds in times.items()
            for i, seconds in enumerate(rounds)
        ]
        with self._transaction():
            self.connection.executemany(
                "DELETE FROM step_times WHERE experiment = ? AND config_hash = ? "
                "AND activation = ? AND device = ?",
                [(experiment, config_hash, label, device) for label in times],
            )
            self.connection.executemany("INSERT INTO step_times VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def timed_activations(self, experiment: str, config_hash: str, device: str) -> set[str]:
        """The activations whose step times at this config and device are stored."""
        rows = self.connection.execute(
            "SELECT DISTINCT activation FROM step_times WHERE experiment = ? AND config_hash = ? "
            "AND device = ?",
            (experiment, config_hash, device),
        )
        return {row[0] for row in rows}

    def done_run_ids(self) -> set[str]:
        rows = self.connection.execute("SELECT run_id FROM runs WHERE status = 'done'")
        return {row[0] for row in rows}

    def close(self) -> None:
        self.commit()
        self.connection.close()


def _open_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` for reading only: nothing is created, converted or written, so a read-only
    folder (an archive, a read-only mount) reads as a writable one.

    A WAL database needs its ``-shm`` index to be read; in a folder that cannot be written, one
    archived without it opens ``immutable`` (no other process can be writing there), unless a
    ``-wal`` file holds records not yet in the database: those would be missed, so that is refused.
    """
    uri = path.resolve().as_uri()
    try:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=120.0)
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return connection
    except sqlite3.OperationalError as error:
        wal = path.with_name(path.name + "-wal")
        cannot = any(word in str(error) for word in ("unable to open", "readonly"))
        if not cannot or (wal.exists() and wal.stat().st_size > 0):
            raise _records_error(path, error, reading=True) from None
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)


def _read(out_dir: str | os.PathLike, table: str, order: str) -> list[tuple]:
    """The rows of ``table`` (checked, read-only), ordered by ``order``; [] without a database."""
    return _read_tables(out_dir, {table: order})[table]


def _read_tables(out_dir: str | os.PathLike, orders: Mapping[str, str]) -> dict[str, list[tuple]]:
    """``{table: its rows ordered by orders[table]}``, read through one connection (checked,
    read-only); [] for a table (or a database) that is not there."""
    path = Path(out_dir) / DB_NAME
    if not path.exists():
        return {table: [] for table in orders}
    connection = None
    try:
        connection = _open_read_only(path)
        problems = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:3]))
        _check_schema(connection, path)
        present = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            if table in present
            else []
            for table, order in orders.items()
        }
    except sqlite3.Error as error:
        raise _records_error(path, error, reading=True) from None
    finally:
        if connection is not None:
            connection.close()


_RECORD_ORDER = "run_id, epoch, split, metric"


def _records(rows: list[tuple]) -> list[Record]:
    # SQLite stores a NaN as NULL (and keeps ±inf): a NULL value is a diverged run's NaN
    return [Record(*row[:-1], math.nan if row[-1] is None else row[-1]) for row in rows]


def read_records(out_dir: str | os.PathLike) -> list[Record]:
    """Every record in ``out_dir/records.sqlite``, ordered by run, epoch, split and metric
    (read-only: the folder may be read-only)."""
    return _records(_read(out_dir, "records", _RECORD_ORDER))


def read_runs(out_dir: str | os.PathLike) -> list[RunInfo]:
    """Every run in ``out_dir/records.sqlite``, ordered by run id (read-only)."""
    return [RunInfo(*row) for row in _read(out_dir, "runs", "run_id")]


# The type each stored column must hold when read back (SQLite keeps whatever was put in a
# column). A record's value may be NULL: a diverged run's NaN.
TEXT = ("a text", lambda value: isinstance(value, str))
WHOLE = ("a whole number", lambda value: isinstance(value, int) and not isinstance(value, bool))
REAL = ("a number", lambda value: isinstance(value, int | float) and not isinstance(value, bool))
RUN_COLUMNS = {
    "run_id": TEXT, "experiment": TEXT, "config_hash": TEXT, "activation": TEXT,
    "seed": WHOLE, "lr": REAL, "setting": TEXT, "status": TEXT,
}  # fmt: skip
RECORD_COLUMNS = {
    **{name: kind for name, kind in RUN_COLUMNS.items() if name != "status"},
    "epoch": WHOLE, "split": TEXT, "metric": TEXT, "value": REAL,
}  # fmt: skip


def readable_results(
    records: Sequence[Record], runs: Sequence[RunInfo]
) -> tuple[list[Record], list[RunInfo], list[str]]:
    """``records`` and ``runs`` without the runs whose stored config or metadata is damaged, or
    whose row or records hold a value of the wrong type (a text where a number belongs, a NULL
    epoch), and their records; and one line per run left out saying why (what a reader warns of).
    """
    problems = {run.run_id: why for run in runs if (why := _unreadable(run)) is not None}
    for record in records:
        if record.run_id not in problems and (why := _bad_record(record)) is not None:
            problems[record.run_id] = why
    skipped = [f"run {run_id} left out: {why}" for run_id, why in problems.items()]
    return (
        [r for r in records if r.run_id not in problems],
        [r for r in runs if r.run_id not in problems],
        skipped,
    )


def wrong_type(
    row: NamedTuple, columns: dict[str, tuple[str, Callable[[Any], bool]]]
) -> str | None:
    """The first column of ``row`` whose value is not of its kind, said in words (None if all are)."""
    for name, (kind, check) in columns.items():
        value = getattr(row, name)
        if not check(value):
            shown = "NULL" if value is None else repr(value)[:40]
            return f"{name} is {shown}, not {kind}"
    return None


def _unreadable(run: RunInfo) -> str | None:
    wrong = wrong_type(run, RUN_COLUMNS)
    if wrong is not None:
        return f"its stored {wrong}"
    for what, text in (("config", run.config_json), ("metadata", run.metadata_json)):
        try:
            parsed = json.loads(text) if text else {}
        except (TypeError, ValueError, RecursionError) as error:
            return f"its stored {what} is not JSON ({str(error)[:60]})"
        if not isinstance(parsed, dict):
            return f"its stored {what} is a JSON {type(parsed).__name__}, not an object"
    return None


def _bad_record(record: Record) -> str | None:
    wrong = wrong_type(record, RECORD_COLUMNS)
    if wrong is None:
        return None
    epoch = f" at epoch {record.epoch}" if isinstance(record.epoch, int) else ""
    return f"its stored record {record.split}/{record.metric}{epoch}: {wrong}"


def read_results(out_dir: str | os.PathLike) -> tuple[list[Record], list[RunInfo]]:
    """``(read_records(out_dir), read_runs(out_dir))`` through one connection."""
    rows = _read_tables(out_dir, {"records": _RECORD_ORDER, "runs": "run_id"})
    return _records(rows["records"]), [RunInfo(*row) for row in rows["runs"]]


class RecordedState(NamedTuple):
    """What an output folder's records hold before a run: its runs, the ids of those done, and
    the activations whose steps are timed at one experiment's config and device."""

    runs: list[RunInfo]
    done: frozenset[str]
    timed: frozenset[str]

    def edited(self, experiment: str, sources: Mapping[str, Mapping[str, str]]) -> RunInfo | None:
        """The first run of ``experiment`` whose activation is one of ``sources`` (user code:
        ``{label: {"spec": ..., "sha256": ...}}``) recorded with code of another SHA-256."""
        for run in self.runs:
            if run.experiment != experiment or run.activation not in sources:
                continue
            recorded = run.metadata.get("activation_sources", {}).get(run.activation, {})
            if recorded.get("sha256") != sources[run.activation]["sha256"]:
                return run
        return None

    def edited_code(self, experiment: str, sources: Mapping[str, Mapping[str, str]]) -> str | None:
        """What :meth:`edited` found, said for the user (a template naming ``{out_dir}``): the
        report would pool the runs of two versions of one activation's code."""
        if (edited := self.edited(experiment, sources)) is None:
            return None
        was = edited.metadata.get("activation_sources", {}).get(edited.activation, {})
        now = sources[edited.activation]
        return (
            f"holds runs of activation {edited.activation!r} made by other code "
            f"({was.get('spec', 'a registry activation')}, sha256 {str(was.get('sha256'))[:12]}) "
            f"than {now['spec']} now (sha256 {now['sha256'][:12]}); give the new version its own "
            f"label ({edited.activation}2={now['spec']}) or another {{out_dir}}"
        )


def read_state(out_dir: str | os.PathLike, experiment: str, config_hash: str, device: str):
    """The :class:`RecordedState` of ``out_dir/records.sqlite`` for ``experiment`` at
    ``config_hash`` on ``device``, through one connection; the database is opened for writing
    (created if new), so a folder that cannot hold it fails here, before any job starts."""
    store = RecordStore(out_dir)
    try:
        rows = store.connection.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
        runs = [RunInfo(*row) for row in rows]
        return RecordedState(
            runs,
            frozenset(run.run_id for run in runs if run.status == "done"),
            frozenset(store.timed_activations(experiment, config_hash, device)),
        )
    finally:
        store.close()


_STEP_TIME_ORDER = "experiment, config_hash, activation, device, round"


def read_step_times(out_dir: str | os.PathLike) -> list[StepTime]:
    """Every interleaved step timing in ``out_dir/records.sqlite`` (read-only; [] in records
    written before the table existed)."""
    return [StepTime(*row) for row in _read(out_dir, "step_times", _STEP_TIME_ORDER)]
