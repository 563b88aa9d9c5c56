"""Load the CIFAR python distribution without running arbitrary code.

``pickle.load`` on a downloaded file can execute anything the file names. The CIFAR "python
version" batches are dicts of lists, bytes, ints and one uint8 numpy array, so the unpickler below
resolves only numpy's array reconstruction helpers and dtype; any other global is refused.
"""

import io
import pickle

import numpy as np

from gelus.data.errors import DataError, UnsafeArchiveError

__all__ = ["RestrictedUnpickler", "safe_loads"]


def _numpy_multiarray():
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    return multiarray


def _allowed_globals() -> dict[tuple[str, str], object]:
    multiarray = _numpy_multiarray()
    allowed = {}
    # numpy 1.x pickles name numpy.core.multiarray, numpy >= 2 writes numpy._core.multiarray
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[module, "_reconstruct"] = multiarray._reconstruct
    for module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[module, "ndarray"] = np.ndarray
        allowed[module, "dtype"] = np.dtype
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that admits plain containers, bytes, numbers and numpy arrays, nothing else.

    ``find_class`` resolves only ``numpy.ndarray``, ``numpy.dtype`` and
    ``numpy[._]core.multiarray._reconstruct``; any other global raises ``UnsafeArchiveError``.
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
