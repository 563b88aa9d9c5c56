"""Load the CIFAR python distribution without running arbitrary code or exhausting memory.

``pickle.load`` on a downloaded file can execute anything the file names. The CIFAR "python
version" batches are dicts of lists, bytes, ints and one uint8 numpy array, so the unpickler below
resolves only numpy's array reconstruction helpers, a plain ``dtype`` and ``_codecs.encode``.

A pickle is also a small program that can ask for far more memory or time than its size: numpy's
``ndarray(shape, dtype, buffer, strides=0)`` makes a huge zero-stride array from one byte, every
``BUILD`` of an array copies its data (so one shared string rebuilt a thousand times costs a
thousand copies), and a self-referencing or shared-reference structure has more paths than
objects. So:

- the ``ndarray`` class is never callable: only ``_reconstruct(ndarray, (0,), b"b")`` (what numpy
  writes) makes an empty array, which ``BUILD`` then fills from bytes of exactly its size;
- every byte copied out of the pickle (``_codecs.encode``, array data) is charged against a
  budget of a few times the pickle's size;
- the final check visits each object once (a set of ids) down to ``MAX_DEPTH``, and refuses
  arrays that are object, zero-stride, non-contiguous, or larger in total than the pickle.

The unpickler is the standard library's pure-Python one (``pickle._Unpickler``), whose opcode
table lets ``BUILD`` be checked before it runs; the CIFAR batches hold a few thousand opcodes.
"""

import io
import math
import pickle
from typing import ClassVar

import numpy as np

from gelus.data.errors import DataError, UnsafeArchiveError

__all__ = ["MAX_DEPTH", "RestrictedUnpickler", "safe_loads"]

MAX_DEPTH = 32  # a CIFAR batch is 2 deep (dict -> list -> int)
_BUDGET_FACTOR = 4  # bytes copied out of a pickle, per byte of pickle (an honest one needs 2)


def _numpy_core():
    try:
        from numpy._core import multiarray, numeric  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray, numeric
    return multiarray, numeric


class _NdarrayToken:
    """Stands for ``numpy.ndarray`` in a pickle: an argument of ``_reconstruct``, never called."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __call__(self, *args, **kwargs):
        raise UnsafeArchiveError(
            f"{self.source}: the pickle calls numpy.ndarray directly (how a strided array of any "
            "size is made from a few bytes); expected a CIFAR python batch; refusing to load it"
        )


_SIMPLE_DTYPE_KINDS = "biuf"  # bool, signed, unsigned, float: no objects, records or subarrays


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that admits plain containers, bytes, numbers and numpy arrays, nothing else.

    ``find_class`` resolves only ``numpy.ndarray`` (as a token for ``_reconstruct``),
    ``numpy.dtype`` (simple numeric types), numpy's ``numpy[._]core.multiarray._reconstruct`` and
    ``numpy[._]core.numeric._frombuffer``, and ``_codecs.encode`` restricted to latin-1 text (how
    Python 3 writes bytes at protocol 2); any other global raises ``UnsafeArchiveError``.
    ``BUILD`` may only fill an array or a dtype, with a state of the right form and size. Bytes
    copied out of the pickle are capped at ``budget`` (default: 4 times the pickle's size).
    """

    dispatch: ClassVar[dict] = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, *, source: str = "<pickle>", budget: int | None = None, **kwargs):
        super().__init__(file, **kwargs)
        self.source = source
        self.budget = budget if budget is not None else 1 << 20
        multiarray, numeric = _numpy_core()
        self._reconstruct_array, self._frombuffer = multiarray._reconstruct, numeric._frombuffer
        token = _NdarrayToken(source)
        allowed = {("_codecs", "encode"): self._latin1_encode}
        # numpy 1.x pickles name numpy.core.*, numpy >= 2 writes numpy._core.*
        for core in ("numpy.core", "numpy._core"):
            allowed[f"{core}.multiarray", "_reconstruct"] = self._reconstruct
            allowed[f"{core}.numeric", "_frombuffer"] = self._frombuffer_checked
            allowed[f"{core}.multiarray", "ndarray"] = token
            allowed[f"{core}.multiarray", "dtype"] = self._dtype
        allowed["numpy", "ndarray"] = token
        allowed["numpy", "dtype"] = self._dtype
        self._allowed = allowed

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[module, name]
        except KeyError:
            raise UnsafeArchiveError(
                f"{self.source}: the pickle refers to {module}.{name}; expected only dicts, lists, "
                "bytes and numpy arrays (a CIFAR python batch); refusing to load it"
            ) from None

    def _refuse(self, what: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(
            f"{self.source}: the pickle {what}; expected a CIFAR python batch; refusing to load it"
        )

    def _charge(self, size: int) -> None:
        self.budget -= size
        if self.budget < 0:
            raise self._refuse("copies more data than it holds (a memory bomb)")

    def _latin1_encode(self, text: str, encoding: str = "utf-8") -> bytes:
        """``_codecs.encode`` as Python 3 protocol-2 pickles use it for bytes, and only that."""
        if not isinstance(text, str) or encoding != "latin1":
            raise self._refuse(f"calls _codecs.encode({type(text).__name__}, {encoding!r})")
        self._charge(len(text))
        return text.encode("latin1")

    def _reconstruct(self, cls, shape, dtype) -> np.ndarray:
        if (
            not isinstance(cls, _NdarrayToken)
            or not isinstance(shape, tuple)
            or shape != (0,)
            or dtype != b"b"
        ):
            raise self._refuse("reconstructs an array other than numpy's way")
        return self._reconstruct_array(np.ndarray, (0,), b"b")

    def _frombuffer_checked(self, buffer, dtype, shape, order) -> np.ndarray:
        if not isinstance(dtype, np.dtype) or dtype.kind not in _SIMPLE_DTYPE_KINDS:
            raise self._refuse(f"holds an array of dtype {dtype!r}")
        return self._frombuffer(buffer, dtype, shape, order)  # a view: nothing is copied

    def _dtype(self, spec, align=False, copy=False) -> np.dtype:
        if not isinstance(spec, str) or len(spec) > 8:
            raise self._refuse(f"builds a dtype from {type(spec).__name__}")
        try:
            dtype = np.dtype(spec)
        except TypeError:
            raise self._refuse(f"builds the unknown dtype {spec!r}") from None
        if dtype.kind not in _SIMPLE_DTYPE_KINDS:
            raise self._refuse(f"builds the dtype {spec!r}")
        return dtype

    def load_build(self):
        state, target = self.stack[-1], self.stack[-2]
        if isinstance(target, np.dtype):
            # (version, byte order, subarray, names, fields, elsize, alignment, flags[, meta])
            if not isinstance(state, tuple) or len(state) < 8 or state[2:5] != (None,) * 3:
                raise self._refuse("sets a dtype's fields or subarray")
        elif isinstance(target, np.ndarray):
            self._check_array_state(state)
        else:
            raise self._refuse(f"sets the state of a {type(target).__name__}")
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build

    def _check_array_state(self, state) -> None:
        # (version, shape, dtype, is_fortran, raw bytes): raw must be exactly shape × itemsize
        if not isinstance(state, tuple) or len(state) != 5:
            raise self._refuse("sets an array's state in an unknown form")
        _, shape, dtype, _, raw = state
        if (
            not isinstance(shape, tuple)
            or len(shape) > MAX_DEPTH
            or not all(isinstance(n, int) and n >= 0 for n in shape)
            or not isinstance(dtype, np.dtype)
            or dtype.kind not in _SIMPLE_DTYPE_KINDS
            or not isinstance(raw, bytes | bytearray)
            or math.prod(shape) * dtype.itemsize != len(raw)
        ):
            raise self._refuse("holds an array whose data does not match its shape and dtype")
        self._charge(len(raw))


def safe_loads(data: bytes, source: str = "<pickle>") -> object:
    """Unpickle ``data`` with ``RestrictedUnpickler`` (latin-1 bytes keys, as CIFAR's Python 2 pickles need).

    Raises ``UnsafeArchiveError`` for a forbidden global, an object, strided or oversized array, a
    memory bomb or a structure deeper than ``MAX_DEPTH``; ``DataError`` for a damaged pickle. Time
    and memory are linear in ``len(data)``.
    """
    unpickler = RestrictedUnpickler(
        io.BytesIO(data), source=source, budget=_BUDGET_FACTOR * len(data) + 4096, encoding="bytes"
    )
    try:
        value = unpickler.load()
    except DataError:
        raise
    except Exception as error:  # a damaged pickle can raise nearly anything: report one error type
        raise DataError(
            f"{source}: not a readable pickle ({type(error).__name__}: {error})"
        ) from None
    _check_plain(value, source, max_bytes=len(data))
    return value


_PLAIN = (bytes, str, int, float, bool, type(None))


def _check_plain(value: object, source: str, max_bytes: int) -> None:
    """Refuse anything but nested dicts / lists / tuples of plain values and plain arrays.

    Each object is visited once (shared references and cycles cost nothing more), at most
    ``MAX_DEPTH`` deep; the arrays' data must fit in ``max_bytes`` (they came from the pickle).
    """
    seen: set[int] = set()
    stack = [(value, 0)]
    array_bytes = 0
    while stack:
        item, depth = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if depth > MAX_DEPTH:
            raise UnsafeArchiveError(
                f"{source}: the pickle nests deeper than {MAX_DEPTH} levels; expected a CIFAR batch"
            )
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in (*item.keys(), *item.values()))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, np.ndarray):
            array_bytes += _check_array(item, source)
            if array_bytes > max_bytes:
                raise UnsafeArchiveError(
                    f"{source}: the pickle's arrays hold {array_bytes} bytes, more than the "
                    f"{max_bytes}-byte file could; refusing to load it"
                )
        elif not isinstance(item, _PLAIN):
            raise UnsafeArchiveError(
                f"{source}: the pickle holds a {type(item).__name__}; expected dicts, lists, bytes and arrays"
            )


def _check_array(array: np.ndarray, source: str) -> int:
    """The array's size in bytes, or ``UnsafeArchiveError`` for an object or strided array."""
    if array.dtype.hasobject:
        raise UnsafeArchiveError(
            f"{source}: the pickle holds an object array; expected numeric arrays"
        )
    contiguous = array.flags.c_contiguous or array.flags.f_contiguous
    zero_stride = array.size > 1 and any(
        stride == 0 and n > 1 for stride, n in zip(array.strides, array.shape, strict=True)
    )
    if not contiguous or zero_stride:
        raise UnsafeArchiveError(
            f"{source}: the pickle holds a strided array (strides {array.strides}); expected "
            "contiguous arrays"
        )
    return array.nbytes
