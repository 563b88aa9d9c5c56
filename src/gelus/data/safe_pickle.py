"""Load the CIFAR python distribution without running arbitrary code.

``pickle.load`` on a downloaded file can execute anything the file names. The CIFAR "python
version" batches are dicts of lists, bytes, ints and one uint8 numpy array, so the unpickler below
resolves only numpy's array reconstruction helpers and dtype; any other global is refused, and
the loaded value is checked to hold nothing but those types.
"""

import io
import pickle

import numpy as np

from gelus.data.errors import DataError, UnsafeArchiveError

__all__ = ["RestrictedUnpickler", "safe_loads"]


def _numpy_core():
    try:
        from numpy._core import multiarray, numeric  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray, numeric
    return multiarray, numeric


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as Python 3 protocol-2 pickles use it for bytes, and only that."""
    if not isinstance(text, str) or encoding != "latin1":
        raise UnsafeArchiveError(
            f"_codecs.encode({type(text).__name__}, {encoding!r}) is not a bytes literal"
        )
    return text.encode("latin1")


def _allowed_globals() -> dict[tuple[str, str], object]:
    multiarray, numeric = _numpy_core()
    allowed: dict[tuple[str, str], object] = {("_codecs", "encode"): _latin1_encode}
    # numpy 1.x pickles name numpy.core.*, numpy >= 2 writes numpy._core.*
    for core in ("numpy.core", "numpy._core"):
        allowed[f"{core}.multiarray", "_reconstruct"] = multiarray._reconstruct  # protocols 0-4
        allowed[f"{core}.numeric", "_frombuffer"] = numeric._frombuffer  # protocol 5
        allowed[f"{core}.multiarray", "ndarray"] = np.ndarray
        allowed[f"{core}.multiarray", "dtype"] = np.dtype
    allowed["numpy", "ndarray"] = np.ndarray
    allowed["numpy", "dtype"] = np.dtype
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that admits plain containers, bytes, numbers and numpy arrays, nothing else.

    ``find_class`` resolves only ``numpy.ndarray``, ``numpy.dtype``, numpy's reconstruction helpers
    ``numpy[._]core.multiarray._reconstruct`` and ``numpy[._]core.numeric._frombuffer``, and
    ``_codecs.encode`` restricted to latin-1 text (how Python 3 writes bytes at protocol 2); any
    other global raises ``UnsafeArchiveError``.
    """

    def __init__(self, file, *, source: str = "<pickle>", **kwargs):
        super().__init__(file, **kwargs)
        self.source = source
        self._allowed = _allowed_globals()

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[module, name]
        except KeyError:
            raise UnsafeArchiveError(
                f"{self.source}: the pickle refers to {module}.{name}; expected only dicts, lists, "
                "bytes and numpy arrays (a CIFAR python batch); refusing to load it"
            ) from None


def safe_loads(data: bytes, source: str = "<pickle>") -> object:
    """Unpickle ``data`` with ``RestrictedUnpickler`` (latin-1 bytes keys, as CIFAR's Python 2 pickles need).

    Raises ``UnsafeArchiveError`` for a forbidden global or an object array, ``DataError`` for a
    damaged pickle.
    """
    try:
        value = RestrictedUnpickler(io.BytesIO(data), source=source, encoding="bytes").load()
    except DataError:
        raise
    except Exception as error:  # a damaged pickle can raise nearly anything: report one error type
        raise DataError(
            f"{source}: not a readable pickle ({type(error).__name__}: {error})"
        ) from None
    _check_plain(value, source)
    return value


_PLAIN = (bytes, str, int, float, bool, type(None))


def _check_plain(value: object, source: str) -> None:
    """Refuse anything but nested dicts / lists / tuples of plain values and non-object arrays."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, np.ndarray):
            if item.dtype.hasobject:
                raise UnsafeArchiveError(
                    f"{source}: the pickle holds an object array; expected numeric arrays"
                )
        elif not isinstance(item, _PLAIN):
            raise UnsafeArchiveError(
                f"{source}: the pickle holds a {type(item).__name__}; expected dicts, lists, bytes and arrays"
            )
