"""Writers of tiny dataset files in the genuine formats, and a local HTTP server, for the data tests.

Every writer builds the bytes from the format's definition (not with the code under test), so a
reader that misreads the format fails the tests.
"""

import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import pickle
import struct
import tarfile
import threading
from pathlib import Path

import numpy as np

IDX_NAMES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    """IDX: 0x0000, type, ndim, big-endian uint32 dims, big-endian values."""
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=dtypes[type_code]).tobytes()


def write_mnist(directory: Path, n_train: int, n_test: int, gz: bool = True, seed: int = 0) -> dict:
    """The four MNIST IDX files (gzipped or not) with random images and labels; returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        data = idx_bytes(array)
        if gz:
            (directory / f"{name}.gz").write_bytes(gzip.compress(data, compresslevel=1))
        else:
            (directory / name).write_bytes(data)
    return arrays


def cifar_rows(images: np.ndarray, labels: list[np.ndarray]) -> bytes:
    """CIFAR binary rows: the label bytes, then the red, green, blue 32x32 planes."""
    columns = [label.astype(np.uint8)[:, None] for label in labels]
    flat = images.reshape(len(images), 3 * 32 * 32)
    return np.concatenate([*columns, flat], axis=1).tobytes()


def cifar_images(n: int, rng: np.random.Generator) -> np.ndarray:
    # compressible pixels (small values) keep the tarballs fast to write
    return rng.integers(0, 4, (n, 3, 32, 32), dtype=np.uint8)


def write_tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def cifar10_binary_members(
    per_batch: int, n_test: int, seed: int = 0
) -> tuple[dict[str, bytes], dict]:
    """Members of cifar-10-binary.tar.gz (real names) and the arrays they hold."""
    rng = np.random.default_rng(seed)
    members, train_x, train_y = {}, [], []
    for i in range(1, 6):
        x, y = cifar_images(per_batch, rng), rng.integers(0, 10, per_batch)
        members[f"cifar-10-batches-bin/data_batch_{i}.bin"] = cifar_rows(x, [y])
        train_x.append(x)
        train_y.append(y)
    test_x, test_y = cifar_images(n_test, rng), rng.integers(0, 10, n_test)
    members["cifar-10-batches-bin/test_batch.bin"] = cifar_rows(test_x, [test_y])
    members["cifar-10-batches-bin/batches.meta.txt"] = b"airplane\nautomobile\n"
    arrays = {
        "train_x": np.concatenate(train_x),
        "train_y": np.concatenate(train_y),
        "test_x": test_x,
        "test_y": test_y,
    }
    return members, arrays


def cifar100_binary_members(
    n_train: int, n_test: int, seed: int = 0
) -> tuple[dict[str, bytes], dict]:
    """Members of cifar-100-binary.tar.gz: rows <coarse><fine><pixels>."""
    rng = np.random.default_rng(seed)
    arrays = {}
    members = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x, fine = cifar_images(n, rng), rng.integers(0, 100, n)
        coarse = fine // 5  # any coarse label: the reader must ignore it
        members[f"cifar-100-binary/{split}.bin"] = cifar_rows(x, [coarse, fine])
        arrays[f"{split}_x"], arrays[f"{split}_y"] = x, fine
    return members, arrays


def python_batch(images: np.ndarray, labels: np.ndarray, label_key: bytes = b"labels") -> bytes:
    """A CIFAR python batch: a dict of bytes keys, uint8 data [N, 3072] and a list of int labels."""
    batch = {
        b"batch_label": b"training batch 1 of 5",
        label_key: [int(v) for v in labels],
        b"data": images.reshape(len(images), -1),
        b"filenames": [f"img_{i}.png".encode() for i in range(len(images))],
    }
    return pickle.dumps(batch, protocol=2)


def cifar10_python_members(
    per_batch: int, n_test: int, seed: int = 0
) -> tuple[dict[str, bytes], dict]:
    rng = np.random.default_rng(seed)
    members, train_x, train_y = {}, [], []
    for i in range(1, 6):
        x, y = cifar_images(per_batch, rng), rng.integers(0, 10, per_batch)
        members[f"cifar-10-batches-py/data_batch_{i}"] = python_batch(x, y)
        train_x.append(x)
        train_y.append(y)
    test_x, test_y = cifar_images(n_test, rng), rng.integers(0, 10, n_test)
    members["cifar-10-batches-py/test_batch"] = python_batch(test_x, test_y)
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps(
        {b"label_names": [b"airplane"]}, protocol=2
    )
    arrays = {
        "train_x": np.concatenate(train_x),
        "train_y": np.concatenate(train_y),
        "test_x": test_x,
        "test_y": test_y,
    }
    return members, arrays


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def http_server(directory: Path):
    """Serve ``directory`` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def files_under(directory: Path) -> list[str]:
    """Every path under ``directory`` (hidden ones included), relative, sorted."""
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))
