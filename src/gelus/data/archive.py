"""Extract a tar archive without trusting it: regular files and folders only, sizes capped.

``tarfile``'s own ``"data"`` filter is not relied on (CPython gh-135034: a symlink chain longer
than PATH_MAX slips through it on 3.11.7, among other releases). Here every member is checked
against a plain allow-list before a byte of it is written:

- only regular files and directories; symlinks, hard links, devices and FIFOs are refused;
- relative names only: no absolute path, no ``..`` component, no empty or NUL name;
- a member's size is capped, and so are the total and the number of members; the decompressed
  stream itself is capped too, so a long-name or pax header claiming gigabytes is refused
  before it is read into memory.

The archive is extracted into a fresh hidden folder inside the target folder, which is renamed
into place only once every member is written and the expected files are there. The target folder
itself is locked (``flock`` on the folder: nothing another user could create first) while this
happens, and leftovers of an extraction that was killed are removed by the next one.
"""

import bz2
import contextlib
import gzip
import io
import lzma
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

from gelus.data.errors import DataError, UnsafeArchiveError

__all__ = [
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "directory_lock",
    "extract_archive",
    "remove_leftovers",
]

# The largest member of the CIFAR tarballs is CIFAR-100's train file (153.7 MB, 50,000 rows of
# 3,074 bytes), the largest total 185 MB: the caps allow twice that and no more.
MAX_MEMBER_BYTES = 320 * 2**20
MAX_TOTAL_BYTES = 400 * 2**20
MAX_MEMBERS = 1000  # the CIFAR tarballs hold 8 or 5 members
_HEADER_SLACK = 2**20  # tar headers and padding on top of the members' data
_CHUNK = 2**20
_STAGING_SUFFIX = ".extract"


class _CappedReader(io.RawIOBase):
    """A read-only stream that raises ``DataError`` once more than ``limit`` bytes were asked for."""

    def __init__(self, stream, limit: int, archive: Path) -> None:
        self.stream, self.limit, self.left, self.archive = stream, limit, limit, archive

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.left <= 0:
            raise DataError(
                f"{self.archive}: the archive decompresses to more than the {self.limit} bytes "
                "its files may take; it is not the expected archive (or a decompression bomb)"
            )
        wanted = min(len(buffer), self.left)
        data = self.stream.read(wanted)
        buffer[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _open_decompressed(archive: Path, raw):
    """The decompressed stream of ``raw`` (gzip, bzip2, xz or plain tar, told by the magic bytes)."""
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


def _member_path(archive: Path, member: tarfile.TarInfo) -> PurePosixPath:
    """The member's relative path, or ``UnsafeArchiveError`` for anything but a plain file or folder."""
    name = member.name
    path = PurePosixPath(name)
    if not name or "\x00" in name or "\\" in name or path.is_absolute() or ".." in path.parts:
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is not allowed (absolute, '..' or malformed path); "
            "expected only relative paths inside the archive's own folder"
        )
    if not (member.isfile() or member.isdir()) or member.issparse():
        kind = "link" if member.issym() or member.islnk() else "special file"
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is not allowed (a {kind}); expected only regular files "
            "and directories"
        )
    return path


def _extract_members(archive: Path, staging: Path, max_member: int, max_total: int) -> None:
    total, count = 0, 0
    with open(archive, "rb") as raw, _open_decompressed(archive, raw) as decompressed:
        capped = io.BufferedReader(_CappedReader(decompressed, max_total + _HEADER_SLACK, archive))
        # stream mode: members are read in order, never seeked back to
        with tarfile.open(fileobj=capped, mode="r|") as tar:
            for member in tar:
                count += 1
                if count > MAX_MEMBERS:
                    raise DataError(
                        f"{archive}: more than {MAX_MEMBERS} members; not the expected archive"
                    )
                relative = _member_path(archive, member)
                target = staging.joinpath(*relative.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                total += member.size
                if member.size > max_member or total > max_total:
                    raise DataError(
                        f"{archive}: member {member.name!r} ({member.size} bytes) exceeds the "
                        f"caps ({max_member} bytes a file, {max_total} in all); not the expected archive"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                # "x": a name given twice is refused rather than overwritten
                with open(target, "xb") as out:
                    while chunk := source.read(_CHUNK):
                        out.write(chunk)


def remove_leftovers(archive: Path, directory: Path) -> list[Path]:
    """Remove staging folders of ``archive`` left in ``directory`` by a killed extraction.

    Call with the directory locked: then no live extraction owns them. Returns what was removed.
    """
    removed = []
    for entry in directory.glob(f".{glob_escape(archive.name)}.*{_STAGING_SUFFIX}"):
        if entry.is_symlink() or not entry.is_dir():
            continue  # not ours: leave it alone
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def glob_escape(name: str) -> str:
    """``name`` with glob metacharacters bracketed, to match it literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


@contextlib.contextmanager
def directory_lock(directory: Path):
    """An exclusive ``flock`` on ``directory`` itself, held for the ``with`` block.

    Locking the folder (not a file in a shared temporary folder) means nobody can take the lock
    first by creating a file of a predictable name. Where ``fcntl`` is missing (Windows) there is
    no lock.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    descriptor = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _not_writable(archive: Path, directory: Path, error: OSError) -> DataError:
    return DataError(
        f"{archive}: cannot extract into {directory} ({error.strerror or error}); the folder is "
        f"not writable. Copy {archive.name} into a folder you can write to and point --data-dir "
        f"(or $GELUS_DATA) at its parent, or extract it there yourself (tar -xf {archive.name})"
    )


def extract_archive(
    archive: Path,
    directory: Path,
    expected: tuple[str, ...] = (),
    *,
    max_member_bytes: int | None = None,
    max_total_bytes: int | None = None,
) -> None:
    """Extract the tar ``archive`` (gzip, bzip2, xz or plain) into ``directory``, safely.

    Only regular files and folders with relative names are extracted, each at most
    ``max_member_bytes`` and ``max_total_bytes`` in all (default ``MAX_MEMBER_BYTES`` and
    ``MAX_TOTAL_BYTES``); anything else raises ``UnsafeArchiveError``, a damaged archive
    ``DataError``. The members go to a fresh hidden folder inside ``directory`` whose entries are
    moved into place only when all were written and every ``expected`` path is there; on any
    failure nothing new is left in ``directory``. Calls for one folder are serialised by a lock on
    it; a call that finds every ``expected`` file already in place returns at once. An unwritable
    ``directory`` raises ``DataError`` saying where to put the archive instead.
    """
    max_member = MAX_MEMBER_BYTES if max_member_bytes is None else max_member_bytes
    max_total = MAX_TOTAL_BYTES if max_total_bytes is None else max_total_bytes
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _not_writable(archive, directory, error) from None
    with directory_lock(directory):
        if expected and all((directory / name).is_file() for name in expected):
            return  # another process extracted it while this one waited
        remove_leftovers(archive, directory)
        try:
            staging = Path(
                tempfile.mkdtemp(prefix=f".{archive.name}.", suffix=_STAGING_SUFFIX, dir=directory)
            )
        except OSError as error:
            raise _not_writable(archive, directory, error) from None
        try:
            _extract_checked(archive, staging, expected, max_member, max_total)
            _move_into_place(staging, directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _extract_checked(
    archive: Path, staging: Path, expected: tuple[str, ...], max_member: int, max_total: int
) -> None:
    try:
        _extract_members(archive, staging, max_member, max_total)
    except DataError:
        raise
    except FileExistsError as error:
        raise DataError(
            f"{archive}: the member {Path(error.filename).relative_to(staging)} appears twice; "
            "not the expected archive"
        ) from None
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as error:
        raise DataError(f"{archive}: not a readable tar archive ({error})") from None
    missing = [name for name in expected if not (staging / name).is_file()]
    if missing:
        raise DataError(
            f"{archive}: the archive lacks {', '.join(missing)}; expected {', '.join(expected)}"
        )


def _move_into_place(staging: Path, directory: Path) -> None:
    for entry in staging.iterdir():
        destination = directory / entry.name
        if destination.is_symlink() or destination.is_file():
            destination.unlink()
        elif destination.is_dir():
            shutil.rmtree(destination)  # an incomplete earlier copy: the archive replaces it
        os.replace(entry, destination)
