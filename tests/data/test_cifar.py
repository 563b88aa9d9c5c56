import contextlib
import io
import os
import pickle
import tarfile
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from _data_fixtures import (
    cifar10_binary_members,
    cifar10_python_members,
    cifar100_binary_members,
    cifar_rows,
    files_under,
    python_batch,
    sha256,
    write_tar,
)
from gelus.data import DATASETS, ChecksumError, DataError, RemoteFile, UnsafeArchiveError, load
from gelus.data.cifar import parse_cifar_binary, parse_cifar_python
from gelus.data.safe_pickle import safe_loads


def spec_for(name, archive=None):
    """The real spec with the fixture archive's checksum in place of the recorded one."""
    remote = () if archive is None else (RemoteFile(archive.name, sha256(archive)),)
    return replace(DATASETS[name], remote=remote)


def test_cifar10_binary_tarball_is_verified_extracted_and_read(tmp_path):
    members, arrays = cifar10_binary_members(per_batch=1001, n_test=7)
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    data = load(spec_for("cifar10", archive), tmp_path)

    assert (len(data.train), len(data.val), len(data.test)) == (5, 5000, 7)
    np.testing.assert_array_equal(data.train.images.numpy(), arrays["train_x"][:5])
    np.testing.assert_array_equal(data.val.images.numpy(), arrays["train_x"][5:])
    np.testing.assert_array_equal(data.val.labels.numpy(), arrays["train_y"][5:])
    np.testing.assert_array_equal(data.test.images.numpy(), arrays["test_x"])
    assert data.train.sample_shape == (3, 32, 32) and data.num_classes == 10
    assert data.class_names[0] == "airplane"
    # extracted next to the archive, no staging folder left behind
    assert (tmp_path / "cifar10" / "cifar-10-batches-bin" / "test_batch.bin").is_file()
    assert not [name for name in os.listdir(tmp_path / "cifar10") if name.startswith(".")]

    again = load(spec_for("cifar10"), tmp_path, validation=False)  # now from the extracted files
    assert len(again.train) == 5005 and again.val is None
    np.testing.assert_array_equal(again.train.labels.numpy(), arrays["train_y"])


def test_cifar_rows_are_red_green_blue_planes(tmp_path):
    image = np.zeros((1, 3, 32, 32), np.uint8)
    image[0, 0] = 200  # red plane
    image[0, 2, 5, 7] = 9  # one blue pixel at row 5, column 7
    data = cifar_rows(image, [np.array([3])])
    images, labels = parse_cifar_binary(data, label_bytes=1, num_classes=10)
    assert labels.tolist() == [3]
    assert (images[0, 0] == 200).all() and (images[0, 1] == 0).all()
    assert images[0, 2, 5, 7] == 9 and images[0, 2].sum() == 9
    assert data[1 + 2 * 1024 + 5 * 32 + 7] == 9  # the format's own offset of that pixel


def test_cifar100_uses_the_fine_label(tmp_path):
    members, arrays = cifar100_binary_members(n_train=12, n_test=4)
    archive = tmp_path / "cifar100" / "cifar-100-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    data = load(spec_for("cifar100", archive), tmp_path, validation=False)
    np.testing.assert_array_equal(data.train.labels.numpy(), arrays["train_y"])
    np.testing.assert_array_equal(data.test.images.numpy(), arrays["test_x"])
    assert data.num_classes == 100
    batch = data.train.inputs(torch.tensor([0, 11]))
    np.testing.assert_allclose(batch.numpy(), arrays["train_x"][[0, 11]] / 255.0, atol=1e-7)


def test_cifar10_python_tarball_is_read_through_the_restricted_unpickler(tmp_path):
    members, arrays = cifar10_python_members(per_batch=3, n_test=2)
    archive = tmp_path / "cifar10" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    data = load(spec_for("cifar10", archive), tmp_path, validation=False)
    np.testing.assert_array_equal(data.train.images.numpy(), arrays["train_x"])
    np.testing.assert_array_equal(data.test.labels.numpy(), arrays["test_y"])


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("core", [b"numpy.core", b"numpy._core"])
def test_safe_loads_reads_arrays_pickled_by_numpy_1_and_2(protocol, core):
    images = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3, 32, 32)
    data = python_batch(images, np.array([4, 1]))
    data = pickle.dumps(pickle.loads(data), protocol=protocol)
    data = (
        data.replace(b"numpy._core", core) if protocol <= 2 else data
    )  # text opcodes: rename freely
    batch = safe_loads(data)
    np.testing.assert_array_equal(batch[b"data"], images.reshape(2, -1))
    assert batch[b"labels"] == [4, 1]


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_calling_anything_else_is_refused_before_it_runs(tmp_path):
    marker = tmp_path / "pwned"
    data = pickle.dumps({b"data": _Exploit(marker), b"labels": []}, protocol=2)
    with pytest.raises(UnsafeArchiveError, match=r"refers to (posix|os)\.system"):
        safe_loads(data, "batch")
    assert not marker.exists()
    with pytest.raises(UnsafeArchiveError, match=r"dtype .O8."):  # refused as it is built
        safe_loads(pickle.dumps({b"data": np.array([1, "x"], dtype=object)}))
    with pytest.raises(UnsafeArchiveError, match="set"):
        safe_loads(pickle.dumps({b"data": {1, 2}}))  # unpickled without globals, still not expected


def test_a_python_batch_with_an_evil_member_stops_the_load(tmp_path):
    members, _ = cifar10_python_members(per_batch=3, n_test=2)
    members["cifar-10-batches-py/data_batch_3"] = pickle.dumps(
        _Exploit(tmp_path / "pwned"), protocol=2
    )
    directory = tmp_path / "cifar10"
    for name, data in members.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    with pytest.raises(UnsafeArchiveError, match="data_batch_3"):
        load(spec_for("cifar10"), tmp_path, validation=False)
    assert not (tmp_path / "pwned").exists()


def _evil_tar(path, kind):
    with tarfile.open(path, "w:gz") as tar:
        good = tarfile.TarInfo("cifar-10-batches-bin/data_batch_1.bin")
        good.size = 4
        tar.addfile(good, io.BytesIO(b"abcd"))
        if kind == "parent":
            info = tarfile.TarInfo("../escaped.bin")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        elif kind == "absolute":
            info = tarfile.TarInfo(str(path.parent.parent / "absolute.bin"))
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        elif kind == "symlink":
            info = tarfile.TarInfo("cifar-10-batches-bin/link")
            info.type = tarfile.SYMTYPE
            info.linkname = "../../escaped.bin"
            tar.addfile(info)


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink"])
def test_tar_member_outside_the_target_is_refused_and_nothing_is_extracted(tmp_path, kind):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    _evil_tar(archive, kind)
    with pytest.raises(UnsafeArchiveError, match=r"cifar-10-binary\.tar\.gz.*not allowed"):
        load(spec_for("cifar10", archive), tmp_path)
    assert files_under(tmp_path) == ["cifar10", "cifar10/cifar-10-binary.tar.gz"]


def test_archive_with_the_wrong_checksum_is_not_extracted(tmp_path):
    members, _ = cifar10_binary_members(per_batch=2, n_test=2)
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    with pytest.raises(
        ChecksumError, match="c4a38c50a1bc"
    ):  # the recorded SHA-256 of the real tarball
        load("cifar10", tmp_path)
    assert files_under(tmp_path) == ["cifar10", "cifar10/cifar-10-binary.tar.gz"]


def test_a_truncated_archive_is_a_data_error_and_leaves_nothing_extracted(tmp_path):
    members, _ = cifar10_binary_members(per_batch=2, n_test=2)
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(DataError, match=r"cifar-10-binary\.tar\.gz: not a readable tar archive"):
        load(spec_for("cifar10"), tmp_path)
    assert files_under(tmp_path) == ["cifar10", "cifar10/cifar-10-binary.tar.gz"]


def test_an_archive_missing_a_batch_is_not_moved_into_place(tmp_path):
    members, _ = cifar10_binary_members(per_batch=2, n_test=2)
    del members["cifar-10-batches-bin/test_batch.bin"]
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    with pytest.raises(DataError, match=r"lacks cifar-10-batches-bin/test_batch\.bin"):
        load(spec_for("cifar10"), tmp_path)
    assert files_under(tmp_path) == ["cifar10", "cifar10/cifar-10-binary.tar.gz"]


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "not a positive multiple of the 3073-byte"),
        (bytes(3073 * 2 - 5), "truncated or not a CIFAR binary"),
        (bytes([10]) + bytes(3072), "label 10 out of range, expected 0..9"),
    ],
)
def test_bad_cifar_binary_rows(data, match):
    with pytest.raises(DataError, match=match):
        parse_cifar_binary(data, 1, 10, "data_batch_1.bin")


def test_bad_python_batches_name_what_was_expected():
    with pytest.raises(DataError, match="b'data'"):
        parse_cifar_python(pickle.dumps({b"labels": [1]}), b"labels", 10)
    with pytest.raises(DataError, match="uint8 array"):
        parse_cifar_python(
            pickle.dumps({b"data": np.zeros((1, 3072), np.float32), b"labels": [1]}), b"labels", 10
        )
    with pytest.raises(DataError, match="2 labels for 1 images"):
        parse_cifar_python(
            pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [1, 2]}), b"labels", 10
        )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=7000), st.sampled_from([(1, 10), (2, 100)]))
def test_fuzz_cifar_binary(data, layout):
    label_bytes, num_classes = layout
    try:
        images, labels = parse_cifar_binary(data, label_bytes, num_classes)
    except DataError:
        return
    assert (
        images.shape == (len(data) // (label_bytes + 3072), 3, 32, 32)
        and labels.max() < num_classes
    )


VALID_BATCH = python_batch(np.zeros((1, 3, 32, 32), np.uint8), np.array([1]))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300), st.integers(0, len(VALID_BATCH)).map(lambda n: VALID_BATCH[:n])
    )
)
def test_fuzz_cifar_python_random_and_truncated_pickles(data):
    with contextlib.suppress(DataError):
        parse_cifar_python(data, b"labels", 10)


def test_concurrent_extractions_wait_for_each_other_and_do_not_redo_the_work(tmp_path):
    import threading

    from gelus.data.archive import directory_lock, extract_archive

    members, _ = cifar10_binary_members(per_batch=2, n_test=2)
    directory = tmp_path / "cifar10"
    archive = directory / "cifar-10-binary.tar.gz"
    directory.mkdir()
    write_tar(archive, members)
    expected = tuple(members)

    # the lock is the data folder itself: no lock file anywhere another user could create first
    with directory_lock(directory):  # another process is extracting
        worker = threading.Thread(target=extract_archive, args=(archive, directory, expected))
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive(), "extraction did not wait for the lock"
        for name in expected:  # ... and finishes: its files are in place
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(b"extracted by the other process")
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert all((directory / n).read_bytes() == b"extracted by the other process" for n in expected)
    assert sorted(p.name for p in directory.iterdir()) == ["cifar-10-batches-bin", archive.name]
