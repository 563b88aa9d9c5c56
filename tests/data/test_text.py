"""Byte-level text corpora: contiguous splits, the pinned fortunes files, and one clear error for a
file that is empty, binary or too short."""

import hashlib
import zipfile
from dataclasses import replace

import pytest
import torch

from _data_fixtures import http_server
from gelus.data import DATASETS, DataError, fetch, find, load
from gelus.data.errors import ChecksumError
from gelus.data.sources import DatasetSpec, RemoteFile
from gelus.data.text import (
    MIN_WINDOWS,
    SPLIT_FRACTIONS,
    ByteSplit,
    check_text,
    load_text,
    load_text_file,
    min_bytes,
)

PROSE = "The quick brown fox jumps over the lazy dog; naïve café, déjà vu.\n" * 200


def test_a_text_file_splits_into_contiguous_90_5_5_parts(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(PROSE, encoding="utf-8")
    data = load_text_file(path)
    raw = PROSE.encode("utf-8")
    n = len(raw)
    assert len(data.train) == int(n * SPLIT_FRACTIONS[0])
    assert len(data.val) == int(n * SPLIT_FRACTIONS[1])
    assert len(data.train) + len(data.val) + len(data.test) == n
    joined = torch.cat([data.train.data, data.val.data, data.test.data])
    assert bytes(joined.tolist()) == raw  # contiguous, in order, nothing lost
    assert data.num_classes == 256


def test_windows_are_the_bytes_from_each_start():
    split = ByteSplit(torch.arange(50, dtype=torch.uint8))
    windows = split.windows(torch.tensor([0, 10]), context=4)
    assert windows.dtype == torch.int64
    assert windows.tolist() == [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]]


def test_training_on_train_plus_val(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(PROSE, encoding="utf-8")
    with_val, without = load_text_file(path), load_text_file(path, validation=False)
    assert without.val is None
    assert len(without.train) == len(with_val.train) + len(with_val.val)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"text\0more text" * 1000, "NUL byte"),
        ("caf\u00e9 ".encode("latin-1") * 2000, "not UTF-8"),
        (b"too short", "too short"),
    ],
)
def test_bad_corpora_get_one_clear_error(tmp_path, content, message):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        load_text_file(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_the_shortest_corpus_gives_each_split_its_windows():
    context = 32
    n = min_bytes(context)
    check_text(b"a" * n, "x", context)
    with pytest.raises(DataError, match="too short"):
        check_text(
            b"a" * (int(MIN_WINDOWS * (context + 1) / SPLIT_FRACTIONS[1]) - 40), "x", context
        )


def test_a_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        load_text_file(tmp_path / "nope.txt")


def test_the_text_dataset_reads_corpus_txt_from_its_folder(tmp_path):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "corpus.txt").write_text(PROSE, encoding="utf-8")
    data = load("text", tmp_path)
    assert len(data.train) + len(data.val) + len(data.test) == len(PROSE.encode())


def _spec_of(directory, files: dict[str, bytes], pinned: dict[str, bytes]) -> DatasetSpec:
    for name, content in files.items():
        (directory / name).write_bytes(content)
    remote = tuple(
        RemoteFile(name, hashlib.sha256(content).hexdigest(), len(content))
        for name, content in pinned.items()
    )
    return DatasetSpec(
        name="corpus", title="t", layouts=(tuple((n,) for n in files),), loader=load_text,
        remote=remote, system_dirs=(str(directory),), num_classes=256,
    )  # fmt: skip


def test_pinned_files_are_concatenated_in_layout_order_and_verified(tmp_path):
    files = {"b": PROSE[:5000].encode(), "a": PROSE[5000:].encode()}
    spec = _spec_of(tmp_path, files, files)
    data = load(spec, tmp_path / "elsewhere")
    joined = torch.cat([data.train.data, data.val.data, data.test.data])
    assert bytes(joined.tolist()) == files["b"] + files["a"]
    (tmp_path / "a").write_bytes(PROSE[5000:].upper().encode())  # edited after pinning
    with pytest.raises(ChecksumError):
        load(spec, tmp_path / "elsewhere")
    assert len(load(spec, tmp_path / "elsewhere", verify=False).test) > 0


def test_fortunes_is_pinned_file_by_file():
    spec = DATASETS["fortunes"]
    assert spec.apt_package == "fortunes" and spec.num_classes == 256
    names = [alternatives[0] for alternatives in spec.layouts[0]]
    assert names == sorted(names) and "ascii-art" not in names
    assert {remote.name for remote in spec.remote} == set(names)
    assert sum(spec.split_sizes) == sum(remote.size for remote in spec.remote) >= 1_000_000


@pytest.mark.skipif(find(DATASETS["fortunes"]) is None, reason="Debian's fortunes not installed")
def test_the_installed_fortunes_load_and_verify():
    data = load("fortunes")
    assert (len(data.train), len(data.val), len(data.test)) == DATASETS["fortunes"].split_sizes


def _served(spec_name: str, directory, base_url: str, name: str):
    """The catalog's spec with its one download served from ``base_url``, no system folders."""
    remote = replace(DATASETS[spec_name].remote_file(name), urls=(base_url + name,))
    return replace(DATASETS[spec_name], remote=(remote,), system_dirs=())


def test_a_download_without_a_published_checksum_is_pinned_by_its_first(tmp_path):
    served, root = tmp_path / "served", tmp_path / "data"
    served.mkdir()
    (served / "input.txt").write_text(PROSE, encoding="utf-8")
    with http_server(served) as base_url:
        spec = _served("tiny-shakespeare", served, base_url, "input.txt")
        directory = fetch(spec, root, progress=False)
        recorded = (directory / "SHA256SUMS").read_text(encoding="utf-8")
        assert recorded == f"{hashlib.sha256(PROSE.encode()).hexdigest()}  input.txt\n"
        data = load(spec, root)
        assert len(data.train) + len(data.val) + len(data.test) == len(PROSE.encode())
        (directory / "input.txt").write_text(PROSE.upper(), encoding="utf-8")  # altered later
        with pytest.raises(ChecksumError, match="first download"):
            load(spec, root)
        (directory / "input.txt").unlink()
        (served / "input.txt").write_text(PROSE.upper(), encoding="utf-8")  # the source changed
        with pytest.raises(ChecksumError, match="rejected"):
            fetch(spec, root, progress=False)
    assert not (directory / "input.txt").exists()


def test_enwik8_is_read_from_its_zip_and_split_by_bytes(tmp_path):
    served, root = tmp_path / "served", tmp_path / "data"
    served.mkdir()
    content = ("<page><text>Ünïcode wiki text</text></page>\n" * 400).encode()
    with zipfile.ZipFile(served / "enwik8.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("enwik8", content)
    with http_server(served) as base_url:
        spec = _served("enwik8", served, base_url, "enwik8.zip")
        fetch(spec, root, progress=False)
    data = load(spec, root)
    joined = torch.cat([data.train.data, data.val.data, data.test.data])
    assert bytes(joined.tolist()) == content
    assert len(data.train) == int(len(content) * 0.9)
    (root / "enwik8" / "enwik8.zip").write_bytes(b"not a zip")
    with pytest.raises(DataError):
        load(spec, root, verify=False)


def test_the_network_corpora_are_listed_with_their_downloads():
    for name in ("tiny-shakespeare", "enwik8"):
        spec = DATASETS[name]
        assert spec.downloads and all(spec.remote_file(n).sha256 == "" for n in spec.downloads)
    assert DATASETS["enwik8"].split_sizes == (90_000_000, 5_000_000, 5_000_000)
