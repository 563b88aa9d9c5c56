"""`gelus export`: tidy CSV tables that read back to exactly the records, with formula-like text
neutralised for spreadsheets; an interrupted export or report keeps the previous complete files."""

import csv
import importlib.util
import json
import math
from contextlib import nullcontext
from pathlib import Path

import pytest

from gelus.cli import main
from gelus.experiments.records import RecordStore, RunKey, read_records
from gelus.report.export import neutralise
from gelus.report.words import format_value

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


def _files(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def test_an_interrupted_export_keeps_the_previous_complete_tables(
    run_dir, tmp_path, monkeypatch, capsys
):
    from gelus.report import export as export_module

    out = tmp_path / "out"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    before = _files(out)
    cells, real_cell = [], export_module._cell

    def ctrl_c_midway(value):  # Ctrl-C while runs.csv is half written
        cells.append(value)
        if len(cells) == 40:
            raise KeyboardInterrupt
        return real_cell(value)

    monkeypatch.setattr(export_module, "_cell", ctrl_c_midway)
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gelus export: interrupted;")
    assert len(cells) == 40  # it stopped inside the first table
    assert _files(out) == before  # the complete tables as they were, and no temporary left


def test_atomic_write_replaces_only_a_whole_file_with_the_usual_permissions(tmp_path):
    import os

    from gelus.experiments.files import atomic_write

    path = tmp_path / "table.csv"
    path.write_text("old, complete\n")
    with pytest.raises(KeyboardInterrupt), atomic_write(path, encoding="utf-8") as handle:
        handle.write("new, half")
        raise KeyboardInterrupt
    assert path.read_text() == "old, complete\n" and os.listdir(tmp_path) == ["table.csv"]
    with atomic_write(path, encoding="utf-8") as handle:
        handle.write("new, whole\n")
    assert path.read_text() == "new, whole\n" and os.listdir(tmp_path) == ["table.csv"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # readable as any written file is


def test_an_interrupted_report_keeps_the_previous_complete_report_and_figures(
    tmp_path, monkeypatch, capsys
):
    from matplotlib.figure import Figure

    from test_synthetic import make_records, write_database

    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    write_database(tmp_path / "run", records, runs)
    argv = ["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]
    assert main(argv) == 0
    before = {p: p.read_bytes() for p in (tmp_path / "rep").rglob("*") if p.is_file()}
    saved = []

    def ctrl_c_inside_a_figure(self, target, **kwargs):  # half of it written, then Ctrl-C
        saved.append(target)
        with open(target, "wb") if isinstance(target, str | Path) else nullcontext(target) as out:
            out.write(b"\x89PNG half a figure")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", ctrl_c_inside_a_figure)
    capsys.readouterr()
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gelus report: interrupted;")
    after = {p: p.read_bytes() for p in (tmp_path / "rep").rglob("*") if p.is_file()}
    assert (
        len(saved) == 1 and after == before
    )  # every figure and page as it was, and no temporary left


def _interruptible() -> None:
    # a terminal's SIGINT: a test run in the background inherits it ignored, and Python then
    # installs no KeyboardInterrupt for it
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_real_ctrl_c_during_an_export_leaves_the_previous_tables(run_dir, tmp_path):
    """SIGINT sent to a `gelus export` process while its first table is being written (its 20th
    cell waits for the signal, so the signal lands there however loaded the machine is)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    before = _files(out)
    marker = tmp_path / "midway"
    slowed = (  # the 20th cell says we are there, then waits (a SIGINT ends the sleep)
        "import sys, time; import gelus.report.export as e; real = e._cell; n = [0]\n"
        "def slow(v):\n"
        "    n[0] += 1\n"
        f"    if n[0] == 20: open({str(marker)!r}, 'w').close(); time.sleep(120)\n"
        "    return real(v)\n"
        "e._cell = slow\n"
        "from gelus.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-c", slowed, "export", str(run_dir), "--out", str(out)],
        env=env, stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the export never started"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.count("\n") == 1 and err.startswith("gelus export: interrupted;")
    assert _files(out) == before


def test_the_export_writes_each_sections_tables_with_a_row_per_row_the_report_shows():
    from gelus.experiments.presets import PRESETS
    from gelus.report.analysis import analyse
    from gelus.report.export import tables
    from gelus.report.render import report_blocks
    from gelus.report.sections import SECTIONS, Context
    from test_synthetic import make_records

    records, runs = make_records(epochs=2, lrs=(1e-3, 1e-4))
    (result,) = analyse(records, runs, PRESETS)
    found = tables(records, runs, [result])
    names = [name for section in SECTIONS for name in section.table_names]
    assert list(found) == ["runs", "records", *names] and len(set(names)) == len(names)
    # the results section shows a results table and a paired-differences table: the same rows
    (results,) = [s for s in SECTIONS if s.name == "results"]
    shown = [b for b in results.blocks(result, Context()) if b.kind == "table"]
    assert [len(b.rows) for b in shown] == [len(found["results"]), len(found["verdicts"])] != [0, 0]
    column = shown[0].headers.index("median")  # the median column, as the report writes it
    medians = [row[column] for row in shown[0].rows]
    assert medians == [format_value(r["metric"], r["median"]) for r in found["results"]]
    headline = [r for r in found["verdicts"] if r["lr_choice"] == "protocol"]
    assert [r["verdict"] for r in headline] == [c.verdict.word for c, _ in result.comparisons]
    # under each headline row, its rows at the matched lr and under the mean rule (lr_choice.py)
    assert [r["lr_choice"] for r in found["verdicts"][:3]] == [
        "protocol",
        "matched lr",
        "mean rule",
    ]
    # and the report renders exactly the sections' blocks, in their order, after its front matter
    blocks = report_blocks([result], {}, runs=runs)
    own = [b for s in SECTIONS for b in s.blocks(result, Context())]
    assert blocks[-len(own) - 2 : -2] == own  # then the environment's heading and table
