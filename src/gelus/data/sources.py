"""Where data files come from: the search order, checksums, downloads and safe archive extraction.

A dataset ``NAME`` is looked for in
1. ``<root>/NAME/`` where ``root`` is the explicit ``data_dir`` (``--data-dir``), else ``$GELUS_DATA``,
   else ``~/.cache/gelus/data`` (``$XDG_CACHE_HOME/gelus/data``);
2. the dataset's known system locations (Debian's ``dataset-fashion-mnist`` installs
   ``/usr/share/datasets/fashion-mnist/``);
3. a download into ``<root>/NAME/`` (only when asked: ``download=True`` or ``gelus data fetch``).

A download streams into a temporary file in the target directory, which is renamed to its final
name only after its SHA-256 matches the value recorded in the dataset's ``RemoteFile``; archives
are extracted by ``gelus.data.archive`` (regular files only, sizes capped, staged and moved into
place when complete). A failure leaves nothing behind. Checking a ``.gz`` file's content streams
the decompression with a cap, so a small file cannot expand into memory.
"""

import contextlib
import gzip
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gelus.data.archive import directory_lock, extract_archive, glob_escape
from gelus.data.errors import ChecksumError, DataError, DatasetNotFoundError

__all__ = [
    "DatasetSpec",
    "Location",
    "RemoteFile",
    "SplitSizes",
    "content_sha256",
    "data_root",
    "download_file",
    "extract_archive",
    "fetch",
    "find",
    "recorded_sha256",
    "search_dirs",
    "sha256_file",
    "verify_file",
]

_CHUNK = 1 << 20
# A folder's checksums recorded on first download, for files published without one (a
# RemoteFile whose sha256 is ""): one "<sha256>  <name>" line each, checked thereafter.
RECORDED_SUMS = "SHA256SUMS"
# Checking a .gz file's content hashes at most this many decompressed bytes (the largest recorded
# content, Fashion-MNIST's training images, is 47 MB): more is a bomb, not the recorded file.
MAX_CONTENT_BYTES = 1 << 27


@dataclass(frozen=True)
class RemoteFile:
    """A file as distributed: its name, SHA-256, size in bytes and mirrors (tried in order).

    ``content_sha256`` is the SHA-256 of the decompressed bytes of a ``.gz`` file: it verifies a copy
    that was recompressed (Debian's Fashion-MNIST) or stored uncompressed. An empty ``sha256``: no
    checksum is published; the first download records its own (``RECORDED_SUMS``), which every
    later check and download must match.
    """

    name: str
    sha256: str
    size: int | None = None
    urls: tuple[str, ...] = ()
    content_sha256: str | None = None


# For each required file, the relative paths that may hold it (the first existing one is used).
Layout = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Location:
    """Where a dataset was found: the directory, the matched layout and its files (one per entry)."""

    directory: Path
    layout: int
    files: tuple[Path, ...]

    @property
    def size(self) -> int:
        return sum(path.stat().st_size for path in self.files)


class SplitSizes(NamedTuple):
    """Samples in each split of a dataset's standard split (tokens for Twitter POS, frames for TIMIT).

    ``val`` is 0 when there is none (``load(..., validation=False)``, see ``DatasetSpec.sizes``).
    """

    train: int
    val: int
    test: int


@dataclass(frozen=True)
class DocumentCorpus:
    """A dataset that is a folder of documents, every file ending in ``suffix`` (its layout's one
    file marks the folder), and the ``digest`` (``gelus.data.documents.corpus_digest``) of the
    version measured here ("" when none is recorded)."""

    suffix: str
    digest: str = ""


@dataclass(frozen=True)
class DatasetSpec:
    """Everything known about a dataset: how to recognise, verify, fetch and read it, and its size.

    The fields after ``citation`` describe the data without loading them, for planning work:

    - ``sample_shape``: the shape of one sample as the loader gives it (``split.sample_shape``);
    - ``num_classes``: the number of label classes (0 when the dataset has no labels);
    - ``split_sizes``: the sample counts of ``load(..., validation=True)``'s train / val / test
      (None when unknown); ``sizes(validation)`` gives those of either split;
    - ``class_names``: the classes' names, in label order (empty when unnamed).

    and read options of the loaders:

    - ``lowercase``: Twitter POS looks words up lowercased (for embeddings of lowercased text);
    - ``layout_kinds``: per entry of ``layouts``, the kind of files it holds (CIFAR: ``"binary"``,
      ``"python"`` or ``"archive"``); empty when the loader needs no such hint;
    - ``extracted_layout``: per entry of ``layouts``, for an archive the index of the layout its
      extraction gives, else None; empty when there are no archives.
    """

    name: str
    title: str
    layouts: tuple[
        Layout, ...
    ]  # the directory holds the dataset if it holds every file of one layout
    loader: Callable[..., object]  # loader(location, spec, validation=..., verify=...) -> Dataset
    remote: tuple[RemoteFile, ...] = ()  # files with recorded checksums (and mirrors)
    downloads: tuple[str, ...] = ()  # names in ``remote`` that ``fetch`` downloads
    system_dirs: tuple[str, ...] = ()
    apt_package: str | None = None
    instructions: str = ""  # how to get the files when there is no download
    citation: str = ""
    sample_shape: tuple[int, ...] = ()
    num_classes: int = 0
    split_sizes: SplitSizes | None = None
    class_names: tuple[str, ...] = ()
    lowercase: bool = False
    layout_kinds: tuple[str, ...] = ()
    extracted_layout: tuple[int | None, ...] = ()
    documents: DocumentCorpus | None = None  # a folder of documents (gelus.data.documents)

    def __post_init__(self) -> None:
        for name in ("layout_kinds", "extracted_layout"):
            value = getattr(self, name)
            if value and len(value) != len(self.layouts):
                raise ValueError(
                    f"{self.name}: {name} has {len(value)} entries for {len(self.layouts)} layouts"
                )
        if self.class_names and len(self.class_names) != self.num_classes:
            raise ValueError(
                f"{self.name}: {len(self.class_names)} class names for {self.num_classes} classes"
            )

    def sizes(self, validation: bool = True) -> SplitSizes | None:
        """The split sizes of ``load(..., validation=validation)``: with ``validation=False`` the
        validation samples are trained on (train + val) and ``val`` is 0. None when unknown."""
        if self.split_sizes is None or validation:
            return self.split_sizes
        train, val, test = self.split_sizes
        return SplitSizes(train + val, 0, test)

    def remote_file(self, name: str) -> RemoteFile | None:
        """The recorded ``RemoteFile`` for a local file name (``x.gz`` or its gunzipped ``x``)."""
        for remote in self.remote:
            if name in (remote.name, remote.name.removesuffix(".gz")):
                return remote
        return None


def data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """The root holding ``<root>/NAME/``: ``data_dir``, else ``$GELUS_DATA``, else the user cache."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    if os.environ.get("GELUS_DATA"):
        return Path(os.environ["GELUS_DATA"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "gelus" / "data"


def search_dirs(spec: DatasetSpec, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched for ``spec``, in order."""
    return [data_root(data_dir) / spec.name, *(Path(d) for d in spec.system_dirs)]


def _match(directory: Path, layout: Layout) -> tuple[Path, ...] | None:
    files = []
    for alternatives in layout:
        for relative in alternatives:
            path = directory / relative
            if path.is_file():
                files.append(path)
                break
        else:
            return None
    return tuple(files)


def find(spec: DatasetSpec, data_dir: str | os.PathLike | None = None) -> Location | None:
    """The first searched directory holding every file of one of ``spec``'s layouts, or None."""
    for directory in search_dirs(spec, data_dir):
        try:
            if not directory.is_dir():
                continue
            for index, layout in enumerate(spec.layouts):
                files = _match(directory, layout)
                if files is not None:
                    return Location(directory, index, files)
        except PermissionError:  # a folder this user cannot read holds nothing it can use
            continue
    return None


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_sha256(path: Path, limit: int | None = None) -> str:
    """The hex SHA-256 of a file's content: gunzipped as it streams for a ``.gz`` file.

    At most ``limit`` (default ``MAX_CONTENT_BYTES``) decompressed bytes are read; a longer or
    damaged stream raises ``DataError`` naming the file. Memory stays at one chunk.
    """
    if not path.name.endswith(".gz"):
        return sha256_file(path)
    limit = MAX_CONTENT_BYTES if limit is None else limit
    digest, size = hashlib.sha256(), 0
    try:
        with gzip.open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise DataError(
                        f"{path}: decompresses to more than {limit} bytes, far more than the "
                        "dataset's file; it is not the expected file: delete it and fetch it again"
                    )
                digest.update(chunk)
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(
            f"{path}: not a complete gzip file ({error}); expected a gzip-compressed file"
        ) from None
    return digest.hexdigest()


def recorded_sha256(directory: Path, name: str) -> str | None:
    """The SHA-256 recorded for ``name`` in ``directory/SHA256SUMS`` on its first download."""
    try:
        lines = (directory / RECORDED_SUMS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        digest, _, recorded = line.partition("  ")
        if recorded == name:
            return digest
    return None


def _record_sha256(directory: Path, name: str, digest: str) -> None:
    with open(directory / RECORDED_SUMS, "a", encoding="utf-8") as sums:
        sums.write(f"{digest}  {name}\n")


def verify_file(path: Path, remote: RemoteFile | None, content: bytes | None = None) -> bool:
    """Check ``path`` against its recorded checksum: True if verified, False if none applies.

    A ``.gz`` file matches its distributed SHA-256, or else its decompressed bytes match
    ``content_sha256``; an uncompressed file matches ``content_sha256``. ``content`` passes the
    already-decompressed bytes to avoid decompressing twice (else the content is streamed, capped).
    Raises ``ChecksumError`` on a mismatch.
    """
    if remote is None:
        return False
    if not remote.sha256:  # none published: the one recorded on its first download, if any
        expected = recorded_sha256(path.parent, remote.name)
        if expected is None or path.name != remote.name:
            return False
        if (actual := sha256_file(path)) != expected:
            _mismatch(path, expected, actual, what="file (as recorded on its first download)")
        return True
    if path.name == remote.name:
        actual = sha256_file(path)
        if actual == remote.sha256:
            return True
        if remote.content_sha256 is None or not path.name.endswith(".gz"):
            _mismatch(path, remote.sha256, actual)
    if remote.content_sha256 is None:
        return False
    actual = content_sha256(path) if content is None else hashlib.sha256(content).hexdigest()
    if actual != remote.content_sha256:
        _mismatch(path, remote.content_sha256, actual, what="decompressed content")
    return True


def _mismatch(path: Path, expected: str, actual: str, what: str = "file") -> None:
    raise ChecksumError(
        f"{path}: SHA-256 of the {what} is {actual}, expected {expected}; the file is corrupt or "
        "a different version: delete it and fetch it again (`gelus data fetch NAME`), "
        "or load with verify=False to use it anyway"
    )


def download_file(remote: RemoteFile, directory: Path, progress: bool = True) -> Path:
    """Download ``remote`` into ``directory`` and return its path; keep it only if its SHA-256 matches.

    Mirrors are tried in order. The bytes go to a temporary file in ``directory`` that is renamed
    to ``remote.name`` only after verification, so an interrupted or corrupted download leaves
    nothing behind. Raises ``ChecksumError`` if a mirror served other bytes and none served the
    right ones, ``DataError`` if no mirror could be reached.
    """
    from tqdm.auto import tqdm

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / remote.name
    expected = remote.sha256 or recorded_sha256(directory, remote.name)  # None: record it now
    failures, rejected = [], False
    for url in remote.urls:
        descriptor, temporary = tempfile.mkstemp(
            prefix=f".{remote.name}.", suffix=".part", dir=directory
        )
        try:
            digest = hashlib.sha256()
            with (
                os.fdopen(descriptor, "wb") as out,
                urllib.request.urlopen(url, timeout=60) as response,
                tqdm(
                    total=int(response.headers.get("Content-Length") or 0) or remote.size,
                    unit="B",
                    unit_scale=True,
                    desc=remote.name,
                    disable=not progress,
                ) as bar,
            ):
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            if expected is not None and digest.hexdigest() != expected:
                rejected = True
                failures.append(
                    f"{url}: SHA-256 {digest.hexdigest()}, expected {expected} (rejected)"
                )
                continue
            os.replace(temporary, target)
            if expected is None:
                _record_sha256(directory, remote.name, digest.hexdigest())
            return target
        except (urllib.error.URLError, OSError, ValueError) as error:
            failures.append(f"{url}: {error}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    error_type = ChecksumError if rejected else DataError
    raise error_type(
        f"could not download {remote.name} into {directory}:\n  " + "\n  ".join(failures)
    )


def fetch(
    spec: DatasetSpec, data_dir: str | os.PathLike | None = None, progress: bool = True
) -> Path:
    """Download and verify every file of ``spec`` into ``<root>/NAME/`` (archives are extracted on load).

    Files already present and verified are kept. Partial downloads left by a killed fetch are
    removed. Returns the directory. Raises ``DatasetNotFoundError`` (with the instructions) for a
    dataset that cannot be downloaded, ``DataError`` for a folder that cannot be written.
    """
    if not spec.downloads:
        raise DatasetNotFoundError(f"{spec.name} cannot be downloaded: {spec.instructions}")
    directory = data_root(data_dir) / spec.name
    created = [path for path in (directory, *directory.parents) if not path.exists()]
    try:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataError(
                f"cannot create {directory} ({error.strerror or error}); download into a folder "
                "you can write to: --data-dir DIR (or $GELUS_DATA)"
            ) from None
        with directory_lock(directory):  # one fetch per folder at a time
            for name in spec.downloads:
                remote = spec.remote_file(name)
                for stale in directory.glob(f".{glob_escape(remote.name)}.*.part"):
                    stale.unlink(missing_ok=True)  # a download killed before it finished
                path = directory / remote.name
                if path.is_file():
                    try:
                        if verify_file(path, remote):
                            continue
                    except DataError:
                        path.unlink()  # a corrupt earlier copy: fetch it again
                download_file(remote, directory, progress=progress)
    finally:
        for path in created:  # deepest first: remove the folders this call made, if left empty
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    return directory
