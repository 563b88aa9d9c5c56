"""A text file is checked before it is read: `stat` first (not a regular file, or larger than
MAX_TEXT_BYTES: refused at once, naming the file and the bound), then read in chunks, each checked
as it comes, so that a binary file is refused at its first bad byte without being read whole."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gelus
from gelus import cli
from gelus.data import DataError, text
from gelus.data.text import MAX_TEXT_BYTES, read_text_file

SRC = Path(gelus.__file__).resolve().parents[1]
# run `gelus run` in a fresh interpreter and report its peak resident memory (kB) on stderr's end:
# VmHWM, the high-water mark of this process's own memory (ru_maxrss would not do: it survives
# exec, so a child forked from a large pytest process starts with pytest's size)
PEAK = (
    "import re, sys\nfrom gelus.cli import main\nstatus = main(sys.argv[1:])\n"
    "status_text = open('/proc/self/status').read()\n"
    "print('peak_kb', re.search(r'VmHWM:\\s*(\\d+)', status_text)[1], file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def test_the_bound_admits_the_largest_corpus_a_preset_uses():
    assert MAX_TEXT_BYTES >= 10**9 and MAX_TEXT_BYTES >= 10 * text.ENWIK8_BYTES


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (50 * 1024**3, f"53,687,091,200 bytes is more than the {MAX_TEXT_BYTES:,} bytes"),
        (1_200_000_000, "a NUL byte at offset 0"),  # under the bound: refused at its first byte
    ],
    ids=["50 GB", "1.2 GB of NULs"],
)
def test_a_huge_or_binary_file_is_refused_without_reading_it_whole(tmp_path, size, words):
    path = tmp_path / "corpus.txt"
    with open(path, "wb") as file:
        file.truncate(size)  # sparse: no disk used, and it reads as NUL bytes
    began = time.perf_counter()
    argv = ["run", "transformer-lm", "--dataset", str(path), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    error, _, peak = done.stderr.rpartition("peak_kb ")
    first = error.splitlines()[0]
    assert first.startswith(f"gelus run: error: {path}: ") and words in first
    assert "Traceback" not in error and "out of memory" not in error
    assert int(peak) < 900_000  # kB: far under the file (the interpreter and torch take ~300 MB)
    assert time.perf_counter() - began < 60
    assert not (tmp_path / "out" / "records.sqlite").exists()


def test_a_fifo_is_refused_before_it_is_opened(tmp_path, capsys):
    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    argv = ["run", "transformer-lm", "--dataset", str(fifo), "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert f"{fifo}: not a regular file" in error and "Traceback" not in error


def test_a_file_over_a_corpus_bound_is_refused_from_its_size(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\0" * 100)  # never read: its size alone refuses it
    with pytest.raises(DataError, match=r"100 bytes is more than the 99 bytes") as info:
        read_text_file(path, limit=99)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_chunks_are_checked_as_one_text(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "CHUNK_BYTES", 7)  # characters and offsets cut by every chunk
    prose = ("naïve café – ünïcødé 😀 " * 400).encode()
    path = tmp_path / "corpus.txt"
    path.write_bytes(prose)
    data, digest = read_text_file(path)
    assert bytes(data) == prose and digest == __import__("hashlib").sha256(prose).hexdigest()
    assert read_text_file(path, keep=False) == (None, digest)

    at = len(prose) - 100
    path.write_bytes(prose[:at] + b"\0" + prose[at:])
    with pytest.raises(DataError, match=f"a NUL byte at offset {at:,}"):
        read_text_file(path)
    bad = prose.index("😀".encode(), 5000) + 1  # inside a 4-byte character
    path.write_bytes(prose[:bad] + b"x" + prose[bad + 1 :])
    with pytest.raises(DataError, match=f"not UTF-8 text .* at byte {bad - 1:,}"):
        read_text_file(path)
    path.write_bytes(prose + "😀".encode()[:2])  # cut inside its last character
    with pytest.raises(DataError, match=f"at byte {len(prose):,}"):
        read_text_file(path)
