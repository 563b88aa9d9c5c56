"""Where data files come from: the search order, checksums, downloads and safe archive extraction.

A dataset ``NAME`` is looked for in
1. ``<root>/NAME/`` where ``root`` is the explicit ``data_dir`` (``--data-dir``), else ``$GELUS_DATA``,
   else ``~/.cache/gelus/data`` (``$XDG_CACHE_HOME/gelus/data``);
2. the dataset's known system locations (Debian's ``dataset-fashion-mnist`` installs
   ``/usr/share/datasets/fashion-mnist/``);
3. a download into ``<root>/NAME/`` (only when asked: ``download=True`` or ``gelus data fetch``).

A download streams into a temporary file in the target directory, which is renamed to its final
name only after its SHA-256 matches the value recorded in the dataset's ``RemoteFile``; archives
are extracted with ``tarfile``'s ``"data"`` filter into a temporary directory that is moved into
place only when every member was extracted. A failure leaves nothing behind.
"""

import contextlib
import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gelus.data.errors import ChecksumError, DataError, DatasetNotFoundError, UnsafeArchiveError

__all__ = [
    "DatasetSpec",
    "Location",
    "RemoteFile",
    "data_root",
    "download_file",
    "extract_archive",
    "fetch",
    "find",
    "search_dirs",
    "sha256_file",
    "verify_file",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """A file as distributed: its name, SHA-256, size in bytes and mirrors (tried in order).

    ``content_sha256`` is the SHA-256 of the decompressed bytes of a ``.gz`` file: it verifies a copy
    that was recompressed (Debian's Fashion-MNIST) or stored uncompressed.
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


@dataclass(frozen=True)
class DatasetSpec:
    """Everything known about a dataset: how to recognise, verify, fetch and read it."""

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
    extra: dict = field(default_factory=dict, hash=False, compare=False)  # reader options

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
        if not directory.is_dir():
            continue
        for index, layout in enumerate(spec.layouts):
            files = _match(directory, layout)
            if files is not None:
                return Location(directory, index, files)
    return None


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _gunzip(path: Path) -> bytes:
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(
            f"{path}: not a complete gzip file ({error}); expected a gzip-compressed file"
        ) from None


def verify_file(path: Path, remote: RemoteFile | None, content: bytes | None = None) -> bool:
    """Check ``path`` against its recorded checksum: True if verified, False if none applies.

    A ``.gz`` file matches its distributed SHA-256, or else its decompressed bytes match
    ``content_sha256``; an uncompressed file matches ``content_sha256``. ``content`` passes the
    already-decompressed bytes to avoid decompressing twice. Raises ``ChecksumError`` on a mismatch.
    """
    if remote is None:
        return False
    if path.name == remote.name:
        actual = sha256_file(path)
        if actual == remote.sha256:
            return True
        if remote.content_sha256 is None or not path.name.endswith(".gz"):
            _mismatch(path, remote.sha256, actual)
    if remote.content_sha256 is None:
        return False
    if content is None:
        content = _gunzip(path) if path.name.endswith(".gz") else path.read_bytes()
    actual = hashlib.sha256(content).hexdigest()
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
            if digest.hexdigest() != remote.sha256:
                rejected = True
                failures.append(
                    f"{url}: SHA-256 {digest.hexdigest()}, expected {remote.sha256} (rejected)"
                )
                continue
            os.replace(temporary, target)
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


def extract_archive(archive: Path, directory: Path, expected: tuple[str, ...] = ()) -> None:
    """Extract a tar archive into ``directory`` with the ``"data"`` filter (no paths outside it).

    Every member is checked before anything is written: an absolute name, a ``..`` component, or
    a link leaving the directory raises ``UnsafeArchiveError``. Extraction goes to a temporary
    directory whose entries are moved into ``directory`` only once all succeeded and every
    ``expected`` relative path is present (else ``DataError``, as for a corrupt archive).
    Concurrent calls for one archive are serialised by a lock file, and a call that finds every
    ``expected`` file already in place (extracted meanwhile) returns without extracting.
    """
    directory.mkdir(parents=True, exist_ok=True)
    # Worker processes may load the same dataset at once: one extracts, the others wait and then
    # find its files in place. The lock file lives outside the data directory, which keeps only data.
    key = hashlib.sha256(str((directory / archive.name).resolve()).encode()).hexdigest()[:16]
    with _exclusive_lock(Path(tempfile.gettempdir()) / f"gelus-extract-{key}.lock"):
        if expected and all((directory / name).is_file() for name in expected):
            return
        _extract_archive_unlocked(archive, directory, expected)


@contextlib.contextmanager
def _exclusive_lock(path: Path):
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; no lock where that is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _extract_archive_unlocked(archive: Path, directory: Path, expected: tuple[str, ...]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{archive.name}.", suffix=".extract", dir=directory))
    try:
        try:
            with tarfile.open(archive) as tar:
                members = tar.getmembers()
                for member in members:
                    if member.name.startswith("/") or ".." in Path(member.name).parts:
                        raise UnsafeArchiveError(  # the "data" filter would only strip the "/"
                            f"{archive}: member {member.name!r} is not allowed (absolute or '..' path); "
                            "expected only relative paths inside the archive's own folder"
                        )
                    tarfile.data_filter(member, str(staging))
                tar.extractall(staging, members=members, filter="data")
        except tarfile.FilterError as error:
            raise UnsafeArchiveError(
                f"{archive}: member {error.tarinfo.name!r} is not allowed ({error}); "
                "expected only regular files and directories inside the archive's own folder"
            ) from None
        except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
            raise DataError(f"{archive}: not a readable tar archive ({error})") from None
        missing = [name for name in expected if not (staging / name).is_file()]
        if missing:
            raise DataError(
                f"{archive}: the archive lacks {', '.join(missing)}; expected {', '.join(expected)}"
            )
        for entry in staging.iterdir():
            destination = directory / entry.name
            if destination.exists():
                shutil.rmtree(destination) if destination.is_dir() else destination.unlink()
            os.replace(entry, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch(
    spec: DatasetSpec, data_dir: str | os.PathLike | None = None, progress: bool = True
) -> Path:
    """Download and verify every file of ``spec`` into ``<root>/NAME/`` (archives are extracted on load).

    Files already present and verified are kept. Returns the directory. Raises
    ``DatasetNotFoundError`` (with the instructions) for a dataset that cannot be downloaded.
    """
    if not spec.downloads:
        raise DatasetNotFoundError(f"{spec.name} cannot be downloaded: {spec.instructions}")
    directory = data_root(data_dir) / spec.name
    created = [path for path in (directory, *directory.parents) if not path.exists()]
    try:
        for name in spec.downloads:
            remote = spec.remote_file(name)
            path = directory / remote.name
            if path.is_file():
                try:
                    if verify_file(path, remote):
                        continue
                except ChecksumError:
                    path.unlink()  # a corrupt earlier copy: fetch it again
            download_file(remote, directory, progress=progress)
    finally:
        for path in created:  # deepest first: remove the folders this call made, if left empty
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    return directory
