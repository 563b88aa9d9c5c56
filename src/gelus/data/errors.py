"""Errors raised by the dataset readers and sources.

Every error names the file and what was expected, so that the message alone tells the user what
to fix. All derive from ``DataError`` (a ``ValueError``), so callers can catch one type.
"""

__all__ = [
    "ChecksumError",
    "DataError",
    "DatasetNotFoundError",
    "FetchError",
    "UnsafeArchiveError",
]


class DataError(ValueError):
    """A data file is missing, malformed, or not the file it claims to be."""


class DatasetNotFoundError(DataError):
    """No copy of a dataset was found in any searched location (and none could be downloaded)."""


class ChecksumError(DataError):
    """A file's SHA-256 differs from the one recorded for it."""


class UnsafeArchiveError(DataError):
    """An archive member would land outside the target directory, or an archive/pickle holds
    something other than the expected data."""


class FetchError(DataError):
    """A download failed or was refused (network, checksum); the message says what to do."""
