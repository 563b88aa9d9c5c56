"""TIMIT frame classification from feature files (the corpus itself is licensed by the LDC).

Feature file format (one ``.npz`` per split: ``timit_train.npz``, ``timit_val.npz``,
``timit_test.npz``), written with ``numpy.savez`` and read with ``allow_pickle=False``:

- ``features``  float32 [F, 26]: per frame, 13 MFCCs (with energy) and their 13 deltas;
- ``labels``    int64 [F] in 0..38: the frame's phone among the 39 folded classes;
- ``offsets``   int64 [U + 1]: utterance u holds frames ``offsets[u]:offsets[u + 1]``, with
  ``0 = offsets[0] < offsets[1] < ... < offsets[U] = F``.

A sample is a frame with its 5 neighbours on each side (11 frames, 286 inputs); neighbours past an
utterance edge repeat the edge frame. Every split is standardised once with the training split's
per-coefficient mean and standard deviation (the paper's code subtracted the mean twice from the
validation and test features; we do not).

A feature file is read without trusting it: each array's header (dtype, shape) is read first and
must agree with the archive's size for it and stay under ``MAX_ARRAY_BYTES`` before its data is
read, so a small file cannot claim gigabytes.
"""

import math
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch

from gelus.data.dataset import Dataset, WindowSplit
from gelus.data.errors import DataError
from gelus.data.sources import DatasetSpec, Location

__all__ = [
    "CONTEXT",
    "MAX_ARRAY_BYTES",
    "NUM_COEFFICIENTS",
    "NUM_PHONES",
    "context_windows",
    "load_timit",
    "read_feature_file",
    "standardisation",
    "write_feature_file",
]

NUM_COEFFICIENTS = 26
# TIMIT's training set has about 1.1 million frames: 120 MB of float32 features.
MAX_ARRAY_BYTES = 1 << 29
_NAMES = ("features", "labels", "offsets")
NUM_PHONES = 39
CONTEXT = 5  # frames on each side: 11-frame windows


def write_feature_file(
    path: str | Path, features: np.ndarray, labels: np.ndarray, offsets: np.ndarray
) -> None:
    """Write a TIMIT feature file in the documented format (validated first)."""
    features = np.asarray(features, dtype=np.float32)
    labels, offsets = np.asarray(labels, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
    _validate(features, labels, offsets, str(path))
    np.savez(path, features=features, labels=labels, offsets=offsets)


def read_feature_file(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features float32 [F, 26], labels int64 [F], offsets int64 [U + 1]) from a feature file.

    Raises ``DataError`` naming the file for a missing array, a wrong shape or dtype, labels
    outside 0..38, non-finite features, or offsets that do not cut 0..F into utterances.
    """
    path = Path(path)
    arrays = _read_npz(path)
    features, labels, offsets = (arrays[name] for name in _NAMES)
    if not np.issubdtype(features.dtype, np.floating):
        raise DataError(f"{path}: features have dtype {features.dtype}, expected float32")
    for name, array in (("labels", labels), ("offsets", offsets)):
        if not np.issubdtype(array.dtype, np.integer):
            raise DataError(f"{path}: {name} have dtype {array.dtype}, expected int64")
    features, labels, offsets = (
        features.astype(np.float32),
        labels.astype(np.int64),
        offsets.astype(np.int64),
    )
    _validate(features, labels, offsets, str(path))
    return features, labels, offsets


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The three arrays of a feature file, each read header first and size-checked."""
    try:
        with open(path, "rb") as file:
            magic = file.read(6)
        if magic == b"\x93NUMPY":
            raise DataError(
                f"{path}: a single .npy array (numpy.save), not a .npz archive; write the three "
                "arrays with numpy.savez or gelus.data.timit.write_feature_file"
            )
        with zipfile.ZipFile(path) as archive:
            members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
            missing = [name for name in _NAMES if name not in members]
            if missing:
                raise DataError(
                    f"{path}: missing arrays {missing}; expected features, labels, offsets"
                )
            arrays = {}
            for name in _NAMES:
                with archive.open(members[name]) as member:
                    arrays[name] = _read_npy(member, members[name].file_size, f"{path}:{name}")
            return arrays
    except FileNotFoundError:
        raise DataError(f"{path}: file not found (expected a .npz feature file)") from None
    except DataError:
        raise
    except (
        OSError,
        ValueError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        RuntimeError,
    ) as error:  # truncated, not a zip, object arrays, an encrypted or unknown compression
        raise DataError(f"{path}: not a readable .npz feature file ({error})") from None


def _read_npy(member, size: int, source: str) -> np.ndarray:
    """One ``.npy`` member of ``size`` bytes (from the zip directory): header, checks, then data."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise DataError(f"{source}: .npy format version {version}, expected 1.0 or 2.0")
    if dtype.hasobject or dtype.itemsize == 0:
        raise DataError(f"{source}: an array of dtype {dtype}; expected numbers")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_ARRAY_BYTES or nbytes != size - member.tell():
        raise DataError(
            f"{source}: the header claims {list(shape)} {dtype} ({nbytes} bytes) but the archive "
            f"holds {size - member.tell()} bytes for it (at most {MAX_ARRAY_BYTES} are read)"
        )
    data = member.read(nbytes)
    if len(data) != nbytes:
        raise DataError(f"{source}: truncated array data ({len(data)} of {nbytes} bytes)")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


def _validate(features: np.ndarray, labels: np.ndarray, offsets: np.ndarray, source: str) -> None:
    if features.ndim != 2 or features.shape[1] != NUM_COEFFICIENTS:
        raise DataError(
            f"{source}: features of shape {features.shape}, expected [F, {NUM_COEFFICIENTS}]"
        )
    frames = features.shape[0]
    if labels.shape != (frames,):
        raise DataError(
            f"{source}: labels of shape {labels.shape} for {frames} frames, expected [{frames}]"
        )
    if frames and (labels.min() < 0 or labels.max() >= NUM_PHONES):
        raise DataError(
            f"{source}: labels span {labels.min()}..{labels.max()}, expected 0..{NUM_PHONES - 1}"
        )
    if not np.isfinite(features).all():
        raise DataError(f"{source}: features hold NaN or infinite values")
    if (
        offsets.ndim != 1
        or offsets.size < 2
        or offsets[0] != 0
        or offsets[-1] != frames
        or (np.diff(offsets) <= 0).any()
    ):
        raise DataError(
            f"{source}: inconsistent offsets {offsets[:4].tolist()}...{offsets[-2:].tolist()}; expected "
            f"0 = offsets[0] < offsets[1] < ... < offsets[-1] = number of frames ({frames})"
        )


def context_windows(offsets: np.ndarray, context: int = CONTEXT) -> np.ndarray:
    """Frame indices int64 [F, 2 * context + 1]: each frame and its neighbours, clamped to its utterance.

    ``window[f, j] = clip(f + j - context, start(f), end(f) - 1)`` where ``start(f):end(f)`` is the
    utterance holding frame f.
    """
    lengths = np.diff(offsets)
    starts = np.repeat(offsets[:-1], lengths)[:, None]  # [F, 1]
    ends = np.repeat(offsets[1:], lengths)[:, None] - 1
    frames = np.arange(offsets[-1], dtype=np.int64)[:, None]
    shifts = np.arange(-context, context + 1, dtype=np.int64)[None, :]
    return np.clip(frames + shifts, starts, ends)


def standardisation(train_features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-coefficient mean and standard deviation of the training frames (float64 sums).

    A constant coefficient gets a standard deviation of 1 so that it maps to 0, not to NaN.
    """
    mean = train_features.mean(axis=0, dtype=np.float64)
    std = train_features.std(axis=0, dtype=np.float64)
    return mean, np.where(std > 0, std, 1.0)


def load_timit(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """TIMIT frames: ``inputs`` are 11 standardised frames [B, 286]; labels are 39 phone classes.

    ``validation=False`` merges the validation utterances into training (statistics included).
    ``verify`` is unused (no checksums: the files are made by the user).
    """
    splits = [read_feature_file(path) for path in location.files]
    if not validation:
        (train_x, train_y, train_o), (val_x, val_y, val_o) = splits[:2]
        merged_offsets = np.concatenate([train_o, val_o[1:] + train_o[-1]])
        splits = [
            (np.concatenate([train_x, val_x]), np.concatenate([train_y, val_y]), merged_offsets),
            None,
            splits[2],
        ]
    mean, std = standardisation(splits[0][0])

    def split(arrays) -> WindowSplit:
        features, labels, offsets = arrays
        table = ((features - mean) / std).astype(np.float32)  # standardised once
        windows = context_windows(offsets)
        return WindowSplit(
            torch.from_numpy(table), torch.from_numpy(windows), torch.from_numpy(labels)
        )

    return Dataset(
        name=spec.name,
        train=split(splits[0]),
        val=None if splits[1] is None else split(splits[1]),
        test=split(splits[2]),
        num_classes=NUM_PHONES,
        source=str(location.directory),
    )
