"""The IDX format of MNIST and Fashion-MNIST, gzipped or not.

An IDX file is a big-endian header ``0x00 0x00 <type> <ndim>``, then ``ndim`` uint32 dimensions,
then the values in C order. MNIST images are ``type 0x08`` (uint8), ``ndim 3`` ``[N, 28, 28]``;
labels are uint8 ``ndim 1`` ``[N]``.

Split: train = the first 55,000 images of the official training file, val = its last 5,000, test =
the official 10,000. The sizes are those of TensorFlow's ``input_data``, which the paper's code
used; ``input_data`` took the *first* 5,000 as validation, so the images differ.

A file is read header first: the dimensions fix the payload's size, which must be at most
``MAX_IDX_BYTES``, and a gzip stream is decompressed only that far (plus one byte, to see that it
ends there), so a small file cannot expand into memory.
"""

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from gelus.data.dataset import Dataset, TensorSplit
from gelus.data.errors import DataError
from gelus.data.sources import DatasetSpec, Location, verify_file

__all__ = [
    "IDX_TYPES",
    "MAX_IDX_BYTES",
    "MNIST_VALIDATION_SIZE",
    "decode_idx",
    "load_mnist_like",
    "read_idx",
    "read_idx_bytes",
]

# IDX type code -> big-endian numpy dtype
IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
MNIST_VALIDATION_SIZE = 5000  # the last 5,000 of the 60,000 training images
# The largest IDX file of the paper's datasets holds 60,000 images of 28×28 bytes (47 MB).
MAX_IDX_BYTES = 1 << 27
_CHUNK = 1 << 20


def _parse_header(header: bytes, source: str) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape from the first 4 bytes and the dimensions (``header`` may be short)."""
    if len(header) < 4 or header[0] != 0 or header[1] != 0:
        raise DataError(f"{source}: not an IDX file (expected magic 0x0000 then type and ndim)")
    type_code, ndim = header[2], header[3]
    if type_code not in IDX_TYPES:
        known = ", ".join(f"0x{code:02X}" for code in IDX_TYPES)
        raise DataError(
            f"{source}: unknown IDX type code 0x{type_code:02X} (expected one of {known})"
        )
    if ndim == 0 or len(header) < 4 + 4 * ndim:
        raise DataError(f"{source}: truncated IDX header (ndim {ndim}, {len(header)} bytes)")
    return IDX_TYPES[type_code], struct.unpack(f">{ndim}I", header[4 : 4 + 4 * ndim])


def _payload_size(dtype: np.dtype, shape: tuple[int, ...], source: str) -> int:
    size = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if size > MAX_IDX_BYTES:
        raise DataError(
            f"{source}: IDX dimensions {list(shape)} claim {size} bytes of data, more than "
            f"{MAX_IDX_BYTES} (any of the paper's datasets holds less); not an MNIST-style file"
        )
    return size


def decode_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode uncompressed IDX bytes into an array of the stored dtype and shape (native byte order).

    Raises ``DataError`` naming ``source`` for a bad magic number, an unknown type, dimensions
    claiming more than ``MAX_IDX_BYTES``, a payload whose length does not match them, or
    floating-point values that are NaN or infinite.
    """
    dtype, shape = _parse_header(data[: 4 + 4 * 255], source)
    header = 4 + 4 * len(shape)
    expected = _payload_size(dtype, shape, source)
    if len(data) - header != expected:
        raise DataError(
            f"{source}: IDX dimensions {list(shape)} need {expected} bytes of data, "
            f"the file holds {len(data) - header}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    if dtype.kind == "f" and not np.isfinite(array).all():
        raise DataError(f"{source}: IDX values hold NaN or infinite numbers; expected finite data")
    return array.astype(dtype.newbyteorder("="), copy=True)  # a writable native-order copy


def _read_exactly(stream, size: int) -> bytes:
    chunks, left = [], size
    while left > 0 and (chunk := stream.read(min(left, _CHUNK))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_idx_bytes(path: Path) -> bytes:
    """The uncompressed IDX bytes of ``path`` (gzip detected by content), read header first.

    The payload's size comes from the header and is capped at ``MAX_IDX_BYTES``; a gzip stream is
    decompressed no further than that. A truncated, overlong or corrupt file raises ``DataError``.
    """
    try:
        with open(path, "rb") as raw:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
            head = _read_exactly(stream, 4)
            ndim = head[3] if len(head) == 4 else 0
            head += _read_exactly(stream, 4 * ndim)
            dtype, shape = _parse_header(head, str(path))
            size = _payload_size(dtype, shape, str(path))
            if not compressed and path.stat().st_size != len(head) + size:
                raise DataError(
                    f"{path}: IDX dimensions {list(shape)} need {size} bytes of data, "
                    f"the file holds {path.stat().st_size - len(head)}"
                )
            payload = _read_exactly(stream, size)
            extra = stream.read(1)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found (expected an IDX file)") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise DataError(
            f"{path}: truncated or corrupt gzip data ({error}); fetch the file again"
        ) from None
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(payload) != size or extra:
        raise DataError(
            f"{path}: IDX dimensions {list(shape)} need {size} bytes of data, the file holds "
            f"{'more' if extra else len(payload)}; the file is truncated or not this IDX file"
        )
    return head + payload


def read_idx(path: str | Path, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not, detected by content) and check its ``ndim``."""
    path = Path(path)
    array = decode_idx(read_idx_bytes(path), str(path))
    if ndim is not None and array.ndim != ndim:
        raise DataError(f"{path}: IDX file has {array.ndim} dimensions, expected {ndim}")
    return array


def _read_pair(
    images_path: Path, labels_path: Path, spec: DatasetSpec, verify: bool, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for path, ndim in ((images_path, 3), (labels_path, 1)):
        content = read_idx_bytes(path)
        if verify:
            verify_file(path, spec.remote_file(path.name), content=content)
        array = decode_idx(content, str(path))
        if array.ndim != ndim:
            raise DataError(f"{path}: IDX file has {array.ndim} dimensions, expected {ndim}")
        if array.dtype != np.uint8:
            raise DataError(f"{path}: IDX type {array.dtype}, expected unsigned bytes (0x08)")
        arrays.append(array)
    images, labels = arrays
    if images.shape[1:] != (28, 28):
        raise DataError(f"{images_path}: images of shape {images.shape[1:]}, expected (28, 28)")
    if len(labels) != len(images):
        raise DataError(
            f"{labels_path}: {len(labels)} labels for {len(images)} images in {images_path}"
        )
    if labels.size and labels.max() >= num_classes:
        raise DataError(
            f"{labels_path}: label {labels.max()} out of range, expected 0..{num_classes - 1}"
        )
    return images, labels


def load_mnist_like(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """MNIST or Fashion-MNIST from the four IDX files at ``location``.

    ``validation=True``: train = first 55,000, val = last 5,000 of the training file; otherwise
    train = all 60,000 and ``val`` is None. Images are uint8 ``[N, 1, 28, 28]``; labels lie in
    0..``spec.num_classes`` - 1.
    """
    train_images, train_labels, test_images, test_labels = location.files
    num_classes = spec.num_classes
    images, labels = _read_pair(train_images, train_labels, spec, verify, num_classes)
    test_x, test_y = _read_pair(test_images, test_labels, spec, verify, num_classes)
    images = torch.from_numpy(images).unsqueeze(1)  # [N, 1, 28, 28]
    labels = torch.from_numpy(labels).long()
    val = None
    if validation:
        if len(images) <= MNIST_VALIDATION_SIZE:
            raise DataError(
                f"{train_images}: {len(images)} training images, too few to hold out "
                f"{MNIST_VALIDATION_SIZE}; load with validation=False"
            )
        cut = len(images) - MNIST_VALIDATION_SIZE
        val = TensorSplit(images[cut:].clone(), labels[cut:].clone())
        images, labels = images[:cut].clone(), labels[:cut].clone()
    return Dataset(
        name=spec.name,
        train=TensorSplit(images, labels),
        val=val,
        test=TensorSplit(torch.from_numpy(test_x).unsqueeze(1), torch.from_numpy(test_y).long()),
        num_classes=num_classes,
        source=str(location.directory),
        class_names=spec.class_names,
    )
