import contextlib
import gzip
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _data_fixtures import idx_bytes, write_mnist
from gelus.data import DATASETS, ChecksumError, DataError, DatasetNotFoundError, load
from gelus.data.idx import decode_idx, read_idx

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")


def tiny_spec(name="mnist"):
    """The MNIST spec without its recorded checksums (the fixtures are not the real files)."""
    return replace(DATASETS[name], remote=(), system_dirs=())


@pytest.mark.parametrize(
    "type_code, dtype",
    [
        (0x08, np.uint8),
        (0x09, np.int8),
        (0x0B, np.int16),
        (0x0C, np.int32),
        (0x0D, np.float32),
        (0x0E, np.float64),
    ],
)
def test_decode_idx_every_type_round_trips(type_code, dtype):
    rng = np.random.default_rng(1)
    array = (rng.normal(size=(3, 4, 5)) * 100).astype(dtype)
    decoded = decode_idx(idx_bytes(array, type_code))
    assert decoded.dtype == np.dtype(dtype) and decoded.shape == (3, 4, 5)
    np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_split_is_first_55000_then_last_5000(tmp_path, gz):
    arrays = write_mnist(tmp_path / "mnist", n_train=5100, n_test=30, gz=gz)
    data = load(tiny_spec(), tmp_path)
    images, labels = arrays["train-images-idx3-ubyte"], arrays["train-labels-idx1-ubyte"]
    assert (len(data.train), len(data.val), len(data.test)) == (100, 5000, 30)
    np.testing.assert_array_equal(data.train.images[:, 0].numpy(), images[:100])
    np.testing.assert_array_equal(data.val.images[:, 0].numpy(), images[100:])
    np.testing.assert_array_equal(data.val.labels.numpy(), labels[100:])
    np.testing.assert_array_equal(data.test.labels.numpy(), arrays["t10k-labels-idx1-ubyte"])
    assert data.train.images.dtype == torch.uint8 and data.train.sample_shape == (1, 28, 28)
    assert data.num_classes == 10 and data.source == str(tmp_path / "mnist")

    batch = data.test.inputs(torch.tensor([3, 0]))
    assert batch.dtype == torch.float32 and batch.shape == (2, 1, 28, 28)
    expected = arrays["t10k-images-idx3-ubyte"][[3, 0]].astype(np.float64) / 255
    np.testing.assert_allclose(batch[:, 0].numpy(), expected, rtol=0, atol=1e-7)


def test_validation_false_keeps_all_training_images(tmp_path):
    write_mnist(tmp_path / "mnist", n_train=40, n_test=10)
    data = load(tiny_spec(), tmp_path, validation=False)
    assert data.val is None and len(data.train) == 40


def test_too_few_images_for_validation_says_how_to_proceed(tmp_path):
    write_mnist(tmp_path / "mnist", n_train=40, n_test=10)
    with pytest.raises(DataError, match="validation=False"):
        load(tiny_spec(), tmp_path)


def test_missing_dataset_names_the_searched_places_and_the_steps(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        load("mnist", tmp_path)
    message = str(error.value)
    assert str(tmp_path / "mnist") in message and "gelus data fetch mnist" in message
    assert "train-images-idx3-ubyte.gz" in message


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(DataError, match=r"fashion-mnist.*cifar10"):
        load("imagenet")


def rewrite(directory: Path, name: str, data: bytes) -> Path:
    path = directory / f"{name}.gz"
    path.write_bytes(gzip.compress(data))
    return path


@pytest.mark.parametrize(
    "name, payload, match",
    [
        ("train-images-idx3-ubyte", b"\x08\x03" + bytes(30), "not an IDX file"),
        (
            "train-images-idx3-ubyte",
            idx_bytes(np.zeros((5, 28), np.uint8)),
            "2 dimensions, expected 3",
        ),
        (
            "train-images-idx3-ubyte",
            idx_bytes(np.zeros((5, 28, 27), np.uint8)),
            r"expected \(28, 28\)",
        ),
        (
            "train-images-idx3-ubyte",
            idx_bytes(np.zeros((5, 28, 28), np.uint8))[:-1],
            "need 3920 bytes",
        ),
        (
            "train-images-idx3-ubyte",
            idx_bytes(np.zeros((5, 28, 28), np.int32), 0x0C),
            "expected unsigned bytes",
        ),
        ("train-labels-idx1-ubyte", idx_bytes(np.zeros(4, np.uint8)), "4 labels for 5 images"),
        (
            "train-labels-idx1-ubyte",
            idx_bytes(np.array([0, 1, 10, 2, 3], np.uint8)),
            "label 10 out of range",
        ),
        (
            "t10k-labels-idx1-ubyte",
            bytes([0, 0, 0x07, 1, 0, 0, 0, 1, 0]),
            "unknown IDX type code 0x07",
        ),
    ],
)
def test_bad_idx_files_get_one_clear_error_naming_the_file(tmp_path, name, payload, match):
    directory = tmp_path / "mnist"
    write_mnist(directory, n_train=5, n_test=5)
    path = rewrite(directory, name, payload)
    with pytest.raises(DataError, match=match) as error:
        load(tiny_spec(), tmp_path, validation=False)
    assert str(path) in str(error.value)


def test_truncated_gzip_is_reported_with_the_file(tmp_path):
    directory = tmp_path / "mnist"
    write_mnist(directory, n_train=50, n_test=5)
    path = directory / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="truncated or corrupt gzip") as error:
        read_idx(path)
    assert str(path) in str(error.value)


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_idx(tmp_path / "nothing.idx")


def test_a_file_that_differs_from_its_recorded_checksum_is_refused(tmp_path):
    directory = tmp_path / "fashion-mnist"
    write_mnist(directory, n_train=5, n_test=5)
    spec = replace(DATASETS["fashion-mnist"], system_dirs=())  # the real recorded checksums
    with pytest.raises(ChecksumError, match=r"train-images-idx3-ubyte\.gz.*verify=False"):
        load(spec, tmp_path, validation=False)
    assert len(load(spec, tmp_path, validation=False, verify=False).train) == 5


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_decode_idx_random_bytes(data):
    try:
        array = decode_idx(data)
    except DataError:
        return
    assert array.ndim == data[3]


VALID = idx_bytes(np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(VALID) - 1), st.integers(0, len(VALID) - 1), st.integers(0, 255))
def test_fuzz_idx_truncations_and_flipped_bytes(tmp_path_factory, cut, position, value):
    mutated = bytearray(VALID)
    mutated[position] = value
    for data in (VALID[:cut], bytes(mutated)):
        for compress in (False, True):
            path = tmp_path_factory.mktemp("fuzz") / "file"
            payload = gzip.compress(data) if compress else data
            path.write_bytes(payload[: len(payload) - cut % 7] if compress else payload)
            with contextlib.suppress(DataError):
                read_idx(path)


@pytest.fixture(scope="module")
def fashion():
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(
            f"Fashion-MNIST is not installed in {FASHION_DIR} (apt-get install dataset-fashion-mnist)"
        )
    start = time.perf_counter()
    data = load("fashion-mnist", data_dir=Path("/nonexistent-gelus-root"))
    seconds = time.perf_counter() - start
    print(f"\nloaded and verified all of Fashion-MNIST in {seconds:.2f} s")
    return data


def test_real_fashion_mnist_is_found_verified_and_split(fashion):
    assert fashion.source == str(FASHION_DIR)
    assert (len(fashion.train), len(fashion.val), len(fashion.test)) == (55000, 5000, 10000)
    # Fashion-MNIST is balanced: 6,000 of each class in the 60,000 training images, 1,000 in the test set
    train_counts = torch.bincount(
        torch.cat([fashion.train.labels, fashion.val.labels]), minlength=10
    )
    assert train_counts.tolist() == [6000] * 10
    assert torch.bincount(fashion.test.labels, minlength=10).tolist() == [1000] * 10
    assert fashion.train.labels[0].item() == 9  # the first training image is an ankle boot
    assert fashion.class_names[9] == "Ankle boot"


def test_real_fashion_mnist_val_is_the_last_5000_of_the_official_file(fashion):
    with gzip.open(FASHION_DIR / "train-labels-idx1-ubyte.gz") as file:
        official = np.frombuffer(file.read(), np.uint8, offset=8)
    np.testing.assert_array_equal(fashion.val.labels.numpy(), official[55000:])
    np.testing.assert_array_equal(fashion.train.labels.numpy(), official[:55000])
    with gzip.open(FASHION_DIR / "t10k-images-idx3-ubyte.gz") as file:
        first_test = np.frombuffer(file.read(16 + 784), np.uint8, offset=16).reshape(28, 28)
    inputs = fashion.test.inputs(torch.tensor([0]))
    np.testing.assert_allclose(inputs[0, 0].double().numpy(), first_test / 255.0, atol=1e-7)
