"""Datasets of the GELU paper as in-memory tensors, with their sources and the ``gelus data`` command.

>>> from gelus.data import load
>>> data = load("fashion-mnist")                       # doctest: +SKIP
>>> x = data.train.inputs(torch.arange(128))           # float32 [128, 1, 28, 28] in [0, 1]
>>> y = data.train.labels[:128]                        # int64 [128]

See docs/DATA.md for the formats, splits and locations.
"""

from gelus.data.catalog import DATASETS, get_spec, how_to_get, load
from gelus.data.dataset import Dataset, Split, TensorSplit, WindowSplit
from gelus.data.errors import ChecksumError, DataError, DatasetNotFoundError, UnsafeArchiveError
from gelus.data.sources import DatasetSpec, Location, RemoteFile, SplitSizes, fetch, find

__all__ = [
    "DATASETS",
    "ChecksumError",
    "DataError",
    "Dataset",
    "DatasetNotFoundError",
    "DatasetSpec",
    "Location",
    "RemoteFile",
    "Split",
    "SplitSizes",
    "TensorSplit",
    "UnsafeArchiveError",
    "WindowSplit",
    "fetch",
    "find",
    "get_spec",
    "how_to_get",
    "load",
]
