"""Hostile and careless data files: every reader ends in a DataError naming the file, in bounded
time and memory (bombs are measured with tracemalloc, which sees every bytes/array allocation)."""

import contextlib
import gzip
import io
import pickle
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _data_fixtures import IDX_NAMES, idx_bytes, python_batch
from gelus.data import DataError, UnsafeArchiveError, cifar, idx, pos, safe_pickle, sources, timit
from gelus.data.cifar import parse_cifar_python
from gelus.data.idx import read_idx
from gelus.data.safe_pickle import safe_loads
from gelus.data.timit import read_feature_file

MiB = 2**20


@contextlib.contextmanager
def peak_memory(limit: int):
    """Assert that the block allocates at most ``limit`` bytes at its peak."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= limit, f"peak {peak / MiB:.1f} MiB > {limit / MiB:.1f} MiB"


def _zeros_gz(path: Path, head: bytes, zeros: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(head)
        for _ in range(zeros // MiB):
            stream.write(bytes(MiB))


# ------------------------------------------------------------------------------------ IDX


def test_a_gzip_bomb_is_decompressed_no_further_than_its_header_allows(tmp_path):
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    _zeros_gz(path, struct.pack(">BBBBI", 0, 0, 8, 1, MiB), zeros=64 * MiB)  # claims 1 MiB
    assert path.stat().st_size < MiB
    start = time.perf_counter()
    with peak_memory(4 * MiB), pytest.raises(DataError, match=rf"{path.name}: .*holds more"):
        read_idx(path)
    assert time.perf_counter() - start < 5


def test_dimensions_beyond_the_cap_or_int64_are_refused_from_the_header(tmp_path):
    for dims, name in (((2**31, 2**31, 2**31), "overflow"), ((60_000, 2**16, 2**16), "big")):
        path = tmp_path / f"{name}-idx3-ubyte.gz"
        path.write_bytes(gzip.compress(struct.pack(">BBBB3I", 0, 0, 8, 3, *dims)))
        with peak_memory(MiB), pytest.raises(DataError, match=rf"{name}-idx3-ubyte\.gz: .*claim"):
            read_idx(path)


def test_an_uncompressed_idx_file_is_checked_against_its_header_before_it_is_read(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(idx, "MAX_IDX_BYTES", MiB)
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(idx_bytes(np.zeros((2, 28, 28), np.uint8)) + bytes(8 * MiB))  # extra bytes
    with peak_memory(MiB), pytest.raises(DataError, match=r"t10k-images-idx3-ubyte: .*holds"):
        read_idx(path)
    path.write_bytes(idx_bytes(np.zeros((2000, 28, 28), np.uint8)))  # over the cap
    with peak_memory(MiB), pytest.raises(DataError, match="more than 1048576"):
        read_idx(path)


def test_non_finite_idx_values_are_refused(tmp_path):
    path = tmp_path / "floats-idx1"
    path.write_bytes(idx_bytes(np.array([1.0, np.nan]), type_code=0x0D))
    with pytest.raises(DataError, match=r"floats-idx1: .*NaN or infinite"):
        read_idx(path)


def test_checking_a_bombs_checksum_streams_with_a_cap(tmp_path, monkeypatch, capsys):
    """`gelus data` (read-only listing) hashes content without holding it, and stops at the cap."""
    monkeypatch.setattr(sources, "MAX_CONTENT_BYTES", 4 * MiB)
    directory = tmp_path / "fashion-mnist"
    directory.mkdir()
    for name in IDX_NAMES:
        (directory / f"{name}.gz").write_bytes(gzip.compress(b"x"))
    bomb = directory / "train-images-idx3-ubyte.gz"
    _zeros_gz(bomb, b"", zeros=32 * MiB)
    with peak_memory(6 * MiB), pytest.raises(DataError, match=r"decompresses to more than"):
        sources.content_sha256(bomb)
    from gelus.cli import main

    assert main(["data", "--data-dir", str(tmp_path)]) == 0
    assert f"{bomb}: decompresses to more than 4194304 bytes" in capsys.readouterr().out


# ---------------------------------------------------------------------------------- pickles


def test_a_self_referencing_list_loads_fast_and_is_refused_as_a_batch():
    loop = []
    loop.append(loop)
    data = pickle.dumps({b"data": loop, b"labels": loop}, protocol=2)
    assert len(data) < 120
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"b'data' must be a uint8 array"):
        parse_cifar_python(data, b"labels", 10, "data_batch_1")
    assert time.perf_counter() - start < 1


def test_shared_references_are_checked_once_not_once_per_path():
    value = []
    for _ in range(130):  # 2**130 paths through 130 objects
        value = [value, value]
    data = pickle.dumps(value, protocol=2)
    assert len(data) < 2000
    start = time.perf_counter()
    with pytest.raises(UnsafeArchiveError, match="nests deeper than 32 levels"):
        safe_loads(data, "batch")
    assert time.perf_counter() - start < 1
    wide = []
    for _ in range(20):  # shallow enough, still 2**20 paths: accepted quickly
        wide = [wide, wide]
    start = time.perf_counter()
    safe_loads(pickle.dumps(wide, protocol=2))
    assert time.perf_counter() - start < 1


class _Reduce:
    """Pickles as ``function(*args)`` then, if given, ``BUILD state``: what an attacker writes."""

    def __init__(self, function, args, state=None):
        self.reduced = (function, args) if state is None else (function, args, state)

    def __reduce__(self):
        return self.reduced


def _reconstruct():
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:
        from numpy.core.multiarray import _reconstruct
    return _reconstruct


def test_a_zero_stride_array_cannot_be_made():
    """numpy.ndarray(shape, dtype, buffer, offset, strides) would make 5.7 GiB from one byte."""
    bomb = _Reduce(np.ndarray, ((50_000 * 30, 3072), np.dtype("u1"), b"x", 0, (0, 0)))
    data = pickle.dumps({b"data": bomb, b"labels": [0]}, protocol=2)
    assert len(data) < 450
    with peak_memory(MiB), pytest.raises(UnsafeArchiveError, match=r"batch: .*numpy\.ndarray"):
        safe_loads(data, "batch")


@pytest.mark.parametrize(
    "bomb, match",
    [
        (_Reduce(_reconstruct(), (np.ndarray, (10**9,), b"b")), "reconstructs an array"),
        (
            _Reduce(
                _reconstruct(),
                (np.ndarray, (0,), b"b"),
                (1, (10**6,), np.dtype("u1"), False, b"x"),
            ),
            "does not match its shape",
        ),
        (
            _Reduce(
                _reconstruct(),
                (np.ndarray, (0,), b"b"),
                (1, (1,), np.dtype("O"), False, [1]),
            ),
            "dtype 'O8'",
        ),
    ],
)
def test_arrays_must_be_built_from_data_of_their_size(bomb, match):
    with peak_memory(MiB), pytest.raises(UnsafeArchiveError, match=match):
        safe_loads(pickle.dumps({b"data": bomb}, protocol=2), "batch")


def test_one_shared_buffer_built_into_many_arrays_is_a_bomb():
    raw = bytes(MiB)  # stored once (memoised), copied by every BUILD
    copies = [
        _Reduce(_reconstruct(), (np.ndarray, (0,), b"b"), (1, (MiB,), np.dtype("u1"), False, raw))
        for _ in range(64)
    ]
    data = pickle.dumps(copies, protocol=2)
    assert len(data) < 2 * MiB
    with peak_memory(12 * MiB), pytest.raises(UnsafeArchiveError, match="memory bomb"):
        safe_loads(data, "batch")


def test_strided_and_oversized_arrays_are_refused_by_the_final_check():
    base = np.zeros(8, np.uint8)
    for array, match in (
        (np.lib.stride_tricks.as_strided(base, (1000, 3072), (0, 0)), "strided"),
        (np.zeros((4, 4), np.uint8)[:, ::2], "strided"),
        (np.zeros(4096, np.uint8), "more than the 100-byte file"),
    ):
        with pytest.raises(UnsafeArchiveError, match=match):
            safe_pickle._check_plain({b"data": array}, "batch", max_bytes=100)


@pytest.mark.parametrize(
    "labels", [[1.0, 2.0], np.array([1.5, 2.0]), [True, False], [1, "2"], [2**70, 1]]
)
def test_labels_must_be_integers_not_truncated_floats(labels):
    data = pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": labels}, protocol=2)
    with pytest.raises(DataError, match=r"batch: b'labels' must be a list of integers"):
        parse_cifar_python(data, b"labels", 10, "batch")


def test_a_cifar_file_larger_than_any_batch_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(cifar, "MAX_BATCH_BYTES", 3073 * 10)
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(bytes(3073 * 11))
    with peak_memory(MiB), pytest.raises(DataError, match=r"data_batch_1\.bin: .*more than any"):
        cifar._read_files((path,), python=False, num_classes=10)


VALID_BATCH = python_batch(np.zeros((2, 3, 32, 32), np.uint8), np.array([1, 2]))


@settings(max_examples=200, deadline=2000)
@given(st.integers(0, len(VALID_BATCH) - 1), st.integers(0, 255))
def test_fuzz_cifar_python_flipped_bytes(position, value):
    data = bytearray(VALID_BATCH)
    data[position] = value
    try:
        images, labels = parse_cifar_python(bytes(data), b"labels", 10, "batch")
    except DataError:
        return
    assert images.shape == (2, 3, 32, 32) and labels.dtype == np.int64


# ------------------------------------------------------------------------------------ TIMIT


def _npy(shape, dtype="<f4", data=b"") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def _npz(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)


def test_a_npy_under_the_npz_name_is_named(tmp_path):
    path = tmp_path / "timit_train.npz"
    with open(path, "wb") as file:
        np.save(file, np.zeros((3, 26), np.float32))
    with pytest.raises(DataError, match=r"timit_train\.npz: a single \.npy array .*numpy\.savez"):
        read_feature_file(path)


def test_a_timit_header_claiming_a_huge_shape_is_refused_before_allocating(tmp_path):
    path = tmp_path / "timit_train.npz"
    _npz(
        path,
        {
            "features": _npy((10**12, 26)),
            "labels": _npy((3,), "<i8", bytes(24)),
            "offsets": _npy((2,), "<i8", bytes(16)),
        },
    )
    with peak_memory(MiB), pytest.raises(DataError, match=r"timit_train\.npz:features: .*claims"):
        read_feature_file(path)


def test_a_timit_array_over_the_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(timit, "MAX_ARRAY_BYTES", 1000)
    path = tmp_path / "timit_val.npz"
    np.savez(path, features=np.zeros((100, 26), np.float32), labels=np.zeros(100), offsets=[0, 100])
    with pytest.raises(DataError, match=r"timit_val\.npz:features: .*at most 1000"):
        read_feature_file(path)


def _valid_timit_bytes() -> bytes:
    buffer = io.BytesIO()
    features = np.random.default_rng(0).normal(size=(6, 26)).astype(np.float32)
    np.savez(buffer, features=features, labels=np.arange(6) % 39, offsets=np.array([0, 2, 6]))
    return buffer.getvalue()


VALID_TIMIT = _valid_timit_bytes()


@settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=600),
        st.integers(0, len(VALID_TIMIT)).map(lambda n: VALID_TIMIT[:n]),
        st.tuples(st.integers(0, len(VALID_TIMIT) - 1), st.integers(0, 255)).map(
            lambda c: VALID_TIMIT[: c[0]] + bytes([c[1]]) + VALID_TIMIT[c[0] + 1 :]
        ),
    )
)
def test_fuzz_timit_feature_files(tmp_path, data):
    path = tmp_path / "timit_train.npz"
    path.write_bytes(data)
    try:
        features, labels, offsets = read_feature_file(path)
    except DataError:
        return
    assert features.shape[1] == 26 and np.isfinite(features).all()
    assert offsets[0] == 0 and offsets[-1] == len(labels) == len(features)


# ------------------------------------------------------------------------------ Twitter POS


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e39"])
def test_non_finite_embeddings_are_refused_with_the_line(tmp_path, value):
    path = tmp_path / "embeddings-twitter.txt"
    path.write_text(f"</s> 0.1 0.2\nhello 0.3 {value}\n")
    with pytest.raises(DataError, match=r"embeddings-twitter\.txt:2: .*'hello'.*NaN or infinite"):
        pos.read_embeddings(path)


def test_oversized_pos_files_are_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(pos, "MAX_TEXT_BYTES", 100)
    path = tmp_path / "oct27.train"
    path.write_text("word\tN\n" * 100)
    with peak_memory(MiB), pytest.raises(DataError, match=r"oct27\.train: 700 bytes, more than"):
        pos.read_tagged_tweets(path)


@settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(alphabet=st.sampled_from("ab N^,\t\n.e-+0123456789nafi"), max_size=300))
def test_fuzz_pos_files(tmp_path, text):
    path = tmp_path / "fuzz.txt"
    path.write_text(text)
    with contextlib.suppress(DataError):
        tweets = pos.read_tagged_tweets(path)
        assert tweets and all(tag in pos.TAGS for tweet in tweets for _, tag in tweet)
    with contextlib.suppress(DataError):
        words, vectors = pos.read_embeddings(path)
        assert len(words) == len(vectors) and vectors.shape[1] > 0
        assert vectors.dtype == np.float32 and np.isfinite(vectors).all()
