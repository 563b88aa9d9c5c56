"""Byte-level text corpora for the language model: one UTF-8 text, split by contiguous bytes.

A corpus is a sequence of bytes (a byte-level model has no tokenizer: its 256 symbols are the byte
values). It is split into contiguous train / validation / test parts, 90 / 5 / 5 % of the bytes by
default (enwik8's convention), so no window of the held-out parts was seen in training::

    >>> data = load_text_file("corpus.txt")                       # doctest: +SKIP
    >>> data.train.windows(torch.tensor([0, 7]), context=128)     # int64 [2, 129]

The offline corpus is Debian's ``fortunes`` package (``/usr/share/games/fortunes``): 42 files of
English fortune cookies, 2.57 MB, concatenated in name order; every file is pinned by its SHA-256
(the ASCII-art file is left out: pictures, not prose). Any other UTF-8 text file works too
(``text`` dataset: ``corpus.txt`` in its folder, or :func:`load_text_file`), or named by its path
(:func:`text_file_dataset`: the dataset ``text:<SHA-256 prefix>:<absolute path>``). Where a network
exists, ``gelus data fetch`` downloads tiny-shakespeare (Karpathy's char-rnn ``input.txt``) and
enwik8 (the first 10⁸ bytes of an English Wikipedia dump, Hutter Prize; read from its zip, split
90 / 5 / 5 M as is standard), each pinned by the SHA-256 recorded on its first download.

A file that is empty, binary (a NUL byte, or not UTF-8), or too short to give each split a few
windows raises one :class:`~gelus.data.errors.DataError` saying which. A file is checked before it
is read: one that is not a regular file, or larger than ``MAX_TEXT_BYTES`` (2 GiB: 20 times enwik8,
the largest corpus a preset can use), is refused from its ``stat`` alone; the rest is read in
chunks of ``CHUNK_BYTES``, each checked as it comes, so a binary file is refused at its first bad
byte without the rest of it ever being read.
"""

import codecs
import hashlib
import os
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from gelus.data.dataset import Dataset, Split
from gelus.data.errors import ChecksumError, DataError
from gelus.data.sources import DatasetSpec, Location, verify_file

__all__ = [
    "CHUNK_BYTES",
    "MAX_TEXT_BYTES",
    "MIN_WINDOWS",
    "SPLIT_FRACTIONS",
    "TEXT_FILE_PREFIX",
    "ByteSplit",
    "check_text",
    "is_text_path",
    "load_enwik8",
    "load_named_text_file",
    "load_text",
    "load_text_file",
    "min_text_file_bytes",
    "random_text",
    "read_text_file",
    "split_text",
    "text_file_dataset",
]

SPLIT_FRACTIONS = (0.90, 0.05, 0.05)  # train / val / test, contiguous, in this order
MIN_WINDOWS = 4  # each split must hold at least this many windows of a model's context
_LOADER_CONTEXT = 64  # the context the loader checks against (the engine checks its own)
VOCAB = 256  # byte values
TEXT_FILE_PREFIX = "text:"  # a text file named by its path: text:<sha256 prefix>:<absolute path>
_DIGEST_DIGITS = 12
# The largest text file read: 2 GiB, 20 times enwik8 (10^8 bytes, the largest corpus a preset
# can use); its bytes live in memory as one uint8 tensor, so the bound is also a memory bound.
MAX_TEXT_BYTES = 2 * 1024**3
CHUNK_BYTES = 16 * 1024**2  # read and checked this much at a time


class ByteSplit(Split):
    """A contiguous part of a corpus: ``data`` uint8 [N], read in windows of ``context + 1`` bytes
    (inputs are a window's first ``context`` bytes, targets the last ``context``).

    ``len(split)`` is its byte count; ``labels`` is the bytes as int64, so the generic code that
    asks a split for its size works unchanged.
    """

    def __init__(self, data: Tensor) -> None:
        if data.dtype != torch.uint8 or data.ndim != 1:
            raise TypeError(
                f"a ByteSplit holds uint8 [N] bytes, got {data.dtype} {tuple(data.shape)}"
            )
        self.data = data

    def __len__(self) -> int:
        return self.data.shape[0]

    @property
    def labels(self) -> Tensor:
        return self.data.long()

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return (1,)  # a sample is one byte

    def windows(self, starts: Tensor, context: int) -> Tensor:
        """int64 [B, context + 1]: the bytes from each of ``starts`` (int64 [B]) on."""
        offsets = torch.arange(context + 1, device=starts.device)
        return self.data[starts.to(self.data.device)[:, None] + offsets.to(self.data.device)].long()

    def inputs(self, index: Tensor) -> Tensor:
        return self.data[index].float()[:, None]

    def to(self, device: torch.device | str) -> "ByteSplit":
        return ByteSplit(self.data.to(device))

    def __repr__(self) -> str:
        return f"ByteSplit(bytes={len(self)})"


def check_text(data: bytes, name: str, context: int = _LOADER_CONTEXT) -> None:
    """Raise DataError unless ``data`` is non-empty UTF-8 text without NUL bytes whose every split
    holds at least ``MIN_WINDOWS`` windows of ``context + 1`` bytes."""
    checker = _TextChecker(name)
    checker.feed(data)
    checker.finish(context)


class _TextChecker:
    """:func:`check_text` a chunk at a time: ``feed`` raises DataError at the first NUL or
    invalid UTF-8 byte of the text fed so far, ``finish`` for an empty, cut or too short text."""

    def __init__(self, name: str) -> None:
        self.name, self.size = name, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def feed(self, chunk: bytes | memoryview) -> None:
        chunk = chunk if isinstance(chunk, bytes) else bytes(chunk)
        at = chunk.find(b"\0")
        if at >= 0:
            raise DataError(
                f"{self.name}: a NUL byte at offset {self.size + at:,}: a binary file, not UTF-8 "
                "text"
            )
        pending = len(self.decoder.getstate()[0])  # bytes of a character cut by the last chunk
        try:
            self.decoder.decode(chunk)
        except UnicodeDecodeError as error:
            self._not_utf8(error.reason, self.size - pending + error.start)
        self.size += len(chunk)

    def finish(self, context: int | None = _LOADER_CONTEXT) -> None:
        """Raise DataError for a text cut inside a character, or (unless ``context`` is None:
        a part of a corpus) an empty one or one too short for ``context``."""
        try:
            self.decoder.decode(b"", final=True)
        except UnicodeDecodeError as error:
            self._not_utf8(error.reason, self.size - len(self.decoder.getstate()[0]))
        if context is not None:
            _check_length(self.size, self.name, context)

    def _not_utf8(self, reason: str, at: int) -> None:
        raise DataError(
            f"{self.name}: not UTF-8 text ({reason} at byte {at:,}); convert it with iconv -t UTF-8"
        ) from None


def _check_length(size: int, name: str, context: int) -> None:
    if not size:
        raise DataError(f"{name}: the file is empty; a text corpus needs UTF-8 text")
    needed = min_bytes(context)
    if size < needed:
        raise DataError(
            f"{name}: {size:,} bytes is too short for {MIN_WINDOWS} windows of {context + 1} "
            f"bytes in each of the train / val / test splits ({SPLIT_FRACTIONS}); it needs "
            f"{needed:,} bytes or more"
        )


def read_text_file(
    path: Path,
    *,
    keep: bool = True,
    context: int | None = _LOADER_CONTEXT,
    limit: int = MAX_TEXT_BYTES,
) -> tuple[bytearray | None, str]:
    """(the bytes of the text file at ``path``, or None unless ``keep``; their SHA-256), checked
    as :func:`check_text` does while it is read, a chunk at a time (``context`` None: a part of a
    corpus, whose length is checked with the whole).

    The file is ``stat``-ed first: one that is not a regular file (a FIFO, a device), or larger
    than ``limit`` bytes, is refused before a byte is read; reading stops at its first bad byte.
    Raises DataError naming the file.
    """
    try:
        info = os.stat(path)  # before open: opening a FIFO would wait for a writer
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{path}: not a regular file; give the path of a UTF-8 text file")
        if info.st_size > limit:
            raise DataError(
                f"{path}: {info.st_size:,} bytes is more than the {limit:,} bytes "
                f"({limit / 1024**3:.3g} GiB) a text corpus may hold; train on a part of it "
                f"(head -c {limit} FILE > part.txt)"
            )
        with open(path, "rb") as file:
            data = bytearray(info.st_size) if keep else None
            buffer = memoryview(data) if keep else memoryview(bytearray(CHUNK_BYTES))
            checker, digest, size = _TextChecker(str(path)), hashlib.sha256(), 0
            while size < info.st_size:
                window = buffer[size:] if keep else buffer
                n = file.readinto(window[:CHUNK_BYTES])
                if not n:
                    break
                chunk = window[:n]
                checker.feed(chunk)
                digest.update(chunk)
                size += n
            if size != info.st_size or file.read(1):
                raise DataError(
                    f"{path}: it changed while it was read; read it again when it is whole"
                )
    except OSError as error:
        raise DataError(f"{path}: cannot read it ({error.strerror or error})") from None
    checker.finish(context)
    return data, digest.hexdigest()


def min_bytes(context: int) -> int:
    """The fewest bytes whose smallest split holds ``MIN_WINDOWS`` windows of ``context + 1``."""
    smallest = min(SPLIT_FRACTIONS)
    return int(-(-MIN_WINDOWS * (context + 1) // smallest)) + 1


def split_text(data: Tensor) -> tuple[ByteSplit, ByteSplit, ByteSplit]:
    """``data`` (uint8 [N]) cut into contiguous train / val / test splits by ``SPLIT_FRACTIONS``."""
    n = data.shape[0]
    train_end = int(n * SPLIT_FRACTIONS[0])
    val_end = train_end + int(n * SPLIT_FRACTIONS[1])
    return (
        ByteSplit(data[:train_end]),
        ByteSplit(data[train_end:val_end]),
        ByteSplit(data[val_end:]),
    )


def _dataset(data: bytes | bytearray, name: str, source: str, validation: bool) -> Dataset:
    tensor = torch.frombuffer(
        data if isinstance(data, bytearray) else bytearray(data), dtype=torch.uint8
    )
    train, val, test = split_text(tensor)
    if not validation:  # train on train + val
        train, val = ByteSplit(torch.cat([train.data, val.data])), None
    return Dataset(name, train, val, test, VOCAB, source)


def load_text_file(path: str | Path, *, validation: bool = True, name: str = "text") -> Dataset:
    """The UTF-8 text file at ``path`` as a byte corpus split 90 / 5 / 5 %. Raises DataError for a
    missing, empty, binary or too short file."""
    path = Path(path)
    data, _ = read_text_file(path)
    return _dataset(data, name, str(path), validation)


def is_text_path(name: str) -> bool:
    """Whether a dataset argument is a file's path rather than a catalog name: it ends in .txt or
    holds a path separator, which no catalog name does."""
    return name.endswith(".txt") or "/" in name or os.sep in name


def min_text_file_bytes(context: int) -> int:
    """The fewest bytes :func:`text_file_dataset` accepts for a model of ``context``."""
    return min_bytes(max(context, _LOADER_CONTEXT))


def text_file_dataset(path: str | Path, context: int = _LOADER_CONTEXT) -> tuple[str, str]:
    """(dataset name, source) of the UTF-8 text file at ``path``, checked as :func:`check_text`
    does for the larger of ``context`` and the loader's context.

    The name, ``text:<first 12 hex digits of the SHA-256>:<absolute path>``, is what a run's config
    (and so its config hash) holds: two different texts, or one text in two places, never share a
    run, and :func:`load_named_text_file` refuses the file once its content changed. The source
    adds the whole SHA-256, for the records.
    """
    path = Path(path).expanduser().resolve()
    _, digest = read_text_file(path, keep=False, context=max(context, _LOADER_CONTEXT))
    name = f"{TEXT_FILE_PREFIX}{digest[:_DIGEST_DIGITS]}:{path}"
    return name, f"{path} (sha256 {digest})"


def load_named_text_file(name: str, *, validation: bool = True) -> Dataset:
    """The corpus of a :func:`text_file_dataset` name; ChecksumError if the file's content is no
    longer the one the name was made from (runs of the old text must not read the new)."""
    digest, _, path = name.removeprefix(TEXT_FILE_PREFIX).partition(":")
    if not path:
        raise DataError(f"{name}: not a text file's dataset name (text:<sha256 prefix>:<path>)")
    data, actual = read_text_file(Path(path))
    if actual[:_DIGEST_DIGITS] != digest:
        raise ChecksumError(
            f"{path}: its content changed since its dataset name {name} was made (SHA-256 "
            f"{actual[:_DIGEST_DIGITS]}…, not {digest}…); name the file by its path to train on "
            "the new text as a new dataset, or restore the old text to resume its runs"
        )
    return _dataset(data, name, f"{path} (sha256 {actual})", validation)


def load_text(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """A ``DatasetSpec`` loader: the files of ``location`` concatenated in their layout's order,
    each checked against its recorded SHA-256 when ``verify`` (files without a record are used as
    they are), then checked as text and split."""
    parts, left = [], MAX_TEXT_BYTES
    for path in location.files:
        if verify:
            verify_file(path, spec.remote_file(path.name))
        part, _ = read_text_file(path, context=None, limit=left)  # checked as it is read
        parts.append(part)
        left -= len(part)
    data = parts[0] if len(parts) == 1 else bytearray().join(parts)
    where = str(location.files[0]) if len(location.files) == 1 else str(location.directory)
    _check_length(len(data), where, _LOADER_CONTEXT)  # the whole: long enough for its windows
    digest = hashlib.sha256(data).hexdigest()[:12]
    return _dataset(data, spec.name, f"{location.directory} (sha256 {digest}…)", validation)


ENWIK8_BYTES = 100_000_000


def load_enwik8(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """enwik8 from ``enwik8`` or ``enwik8.zip`` (its one member read, at most 10⁸ bytes): a byte
    benchmark, used as its bytes are (XML with UTF-8 text; not decoded), split 90 / 5 / 5 M."""
    (path,) = location.files
    if verify:
        verify_file(path, spec.remote_file(path.name))
    if path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                info = archive.getinfo("enwik8")
                if info.file_size > ENWIK8_BYTES:
                    raise DataError(f"{path}: its enwik8 is {info.file_size:,} bytes, not 10⁸")
                with archive.open(info) as member:
                    data = member.read(ENWIK8_BYTES + 1)
        except (zipfile.BadZipFile, KeyError, OSError) as error:
            raise DataError(f"{path}: not the enwik8 zip ({error})") from None
    elif path.stat().st_size > ENWIK8_BYTES:
        raise DataError(f"{path}: {path.stat().st_size:,} bytes; enwik8 is 10⁸ bytes")
    else:
        data = path.read_bytes()
    if not data or len(data) > ENWIK8_BYTES:
        raise DataError(f"{path}: {len(data):,} bytes; enwik8 is 10⁸ bytes")
    return _dataset(data, spec.name, str(path), validation)


def random_text(sizes: Sequence[int], seed: int = 0, name: str = "random") -> Dataset:
    """Random bytes in splits of ``sizes`` (train, test) bytes: a corpus of the right shape for
    timing a model, no text."""
    generator = torch.Generator().manual_seed(seed)
    train, test = (
        ByteSplit(torch.randint(0, VOCAB, (n,), generator=generator, dtype=torch.uint8))
        for n in sizes
    )
    return Dataset(name, train, None, test, VOCAB, "random")
