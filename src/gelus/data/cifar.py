"""CIFAR-10 and CIFAR-100: the official binary distributions, or the python one read safely.

Binary rows (https://www.cs.toronto.edu/~kriz/cifar.html): CIFAR-10 ``<label><3072 bytes>``,
CIFAR-100 ``<coarse label><fine label><3072 bytes>`` (we use the fine label); the 3072 bytes are
the red, green then blue 32×32 planes, row-major, so a row reshapes to ``[3, 32, 32]``.

The python distribution's batches are pickles; they are read only through
``gelus.data.safe_pickle`` (numpy arrays, dicts, lists and bytes, nothing else).

Split: val = the last 5,000 images of the 50,000 training images (the last half of
``data_batch_5`` for CIFAR-10); ``validation=False`` keeps all 50,000 for training, as the paper
did after tuning the learning rate.
"""

from pathlib import Path

import numpy as np
import torch

from gelus.data.dataset import Dataset, TensorSplit
from gelus.data.errors import DataError
from gelus.data.safe_pickle import safe_loads
from gelus.data.sources import DatasetSpec, Location, extract_archive, verify_file

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR_VALIDATION_SIZE",
    "IMAGE_BYTES",
    "MAX_BATCH_BYTES",
    "load_cifar",
    "parse_cifar_binary",
    "parse_cifar_python",
]

IMAGE_BYTES = 3 * 32 * 32
CIFAR_VALIDATION_SIZE = 5000
# The largest batch file, CIFAR-100's train (50,000 images), is 153.7 MB in binary and 155 MB
# pickled: a file is refused unread above twice that.
MAX_BATCH_BYTES = 2 * 50_000 * (IMAGE_BYTES + 2)
CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip


def parse_cifar_binary(
    data: bytes, label_bytes: int, num_classes: int, source: str = "<bytes>"
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``<label_bytes labels><3072 pixels>`` -> (uint8 images [N, 3, 32, 32], int64 labels [N]).

    The label is the last label byte (CIFAR-100's fine label). Raises ``DataError`` when the size
    is not a positive multiple of the row size or a label is out of range.
    """
    row = label_bytes + IMAGE_BYTES
    if len(data) == 0 or len(data) % row:
        raise DataError(
            f"{source}: {len(data)} bytes is not a positive multiple of the {row}-byte CIFAR row "
            f"({label_bytes} label byte{'s' if label_bytes > 1 else ''} + {IMAGE_BYTES} pixels); "
            "the file is truncated or not a CIFAR binary batch"
        )
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, row)
    labels = rows[:, label_bytes - 1].astype(np.int64)
    _check_labels(labels, num_classes, source)
    return rows[:, label_bytes:].reshape(-1, 3, 32, 32).copy(), labels


def parse_cifar_python(
    data: bytes, label_key: bytes, num_classes: int, source: str = "<bytes>"
) -> tuple[np.ndarray, np.ndarray]:
    """A python-distribution batch (a pickled dict) -> (uint8 images [N, 3, 32, 32], int64 labels [N]).

    Only ``b"data"`` (uint8 [N, 3072]) and ``label_key`` (N ints) are used.
    """
    batch = safe_loads(data, source)
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        raise DataError(f"{source}: expected a dict with keys b'data' and {label_key!r}")
    images, labels = batch[b"data"], batch[label_key]
    if (
        not isinstance(images, np.ndarray)
        or images.dtype != np.uint8
        or images.ndim != 2
        or images.shape[1] != IMAGE_BYTES
    ):
        raise DataError(f"{source}: b'data' must be a uint8 array [N, {IMAGE_BYTES}]")
    labels = _integer_labels(labels, label_key, source)
    if labels.shape != (images.shape[0],):
        raise DataError(f"{source}: {labels.size} labels for {images.shape[0]} images")
    _check_labels(labels, num_classes, source)
    return images.reshape(-1, 3, 32, 32).copy(), labels


def _integer_labels(labels: object, label_key: bytes, source: str) -> np.ndarray:
    """int64 labels from a list of ints or an integer array; floats are refused, not truncated."""
    if isinstance(labels, np.ndarray):
        integral = labels.ndim == 1 and labels.dtype.kind in "iu"
    else:
        integral = isinstance(labels, list) and all(type(label) is int for label in labels)
    if integral:
        try:
            return np.asarray(labels, dtype=np.int64)
        except OverflowError:
            pass
    raise DataError(f"{source}: {label_key!r} must be a list of integers (class numbers)")


def _check_labels(labels: np.ndarray, num_classes: int, source: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        bad = labels[(labels < 0) | (labels >= num_classes)][0]
        raise DataError(f"{source}: label {bad} out of range, expected 0..{num_classes - 1}")


def _read_files(
    paths: tuple[Path, ...], python: bool, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    parts = []
    for path in paths:
        if path.stat().st_size > MAX_BATCH_BYTES:
            raise DataError(
                f"{path}: {path.stat().st_size} bytes, more than any CIFAR batch "
                f"({MAX_BATCH_BYTES} at most); not a CIFAR batch file"
            )
        data = path.read_bytes()
        if python:
            label_key = b"labels" if num_classes == 10 else b"fine_labels"
            parts.append(parse_cifar_python(data, label_key, num_classes, str(path)))
        else:
            label_bytes = 1 if num_classes == 10 else 2
            parts.append(parse_cifar_binary(data, label_bytes, num_classes, str(path)))
    images = np.concatenate([images for images, _ in parts])
    labels = np.concatenate([labels for _, labels in parts])
    return torch.from_numpy(images), torch.from_numpy(labels)


def load_cifar(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """CIFAR-10 or CIFAR-100 (``spec.num_classes``) from the files at ``location``.

    A tarball is verified (when ``verify``), extracted safely next to itself, then read. Images are
    uint8 ``[N, 3, 32, 32]``; the last file of each layout is the test batch.
    """
    num_classes = spec.num_classes
    layout = location.layout
    if spec.layout_kinds[layout] == "archive":
        (archive,) = location.files
        if verify:
            verify_file(archive, spec.remote_file(archive.name))
        layout = spec.extracted_layout[layout]
        members = tuple(alternatives[0] for alternatives in spec.layouts[layout])
        extract_archive(archive, location.directory, expected=members)
        location = Location(
            location.directory, layout, tuple(location.directory / name for name in members)
        )
    python = spec.layout_kinds[layout] == "python"
    train_x, train_y = _read_files(location.files[:-1], python, num_classes)
    test_x, test_y = _read_files(location.files[-1:], python, num_classes)
    val = None
    if validation:
        cut = len(train_x) - CIFAR_VALIDATION_SIZE
        if cut <= 0:
            raise DataError(
                f"{location.directory}: {len(train_x)} training images, too few to hold out {CIFAR_VALIDATION_SIZE}; load with validation=False"
            )
        val = TensorSplit(train_x[cut:].clone(), train_y[cut:].clone())
        train_x, train_y = train_x[:cut].clone(), train_y[:cut].clone()
    return Dataset(
        name=spec.name,
        train=TensorSplit(train_x, train_y),
        val=val,
        test=TensorSplit(test_x, test_y),
        num_classes=num_classes,
        source=str(location.directory),
        class_names=spec.class_names,
    )
