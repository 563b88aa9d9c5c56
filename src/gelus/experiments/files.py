"""Files the harness writes for a user (exports, reports, figures, the plan's price cache).

Each is written whole under a temporary name beside it and then renamed over the final name, so
that a command interrupted (Ctrl-C, a kill, a full disk) leaves the previous complete file, or
none, and never a truncated one under the final name. Checkpoints are written the same way
(:mod:`gelus.experiments.checkpoint`).
"""

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` "w" or "wb", ``open_kwargs``
    as for :func:`open`); when the block ends normally, flush it to disk, rename it to ``path``
    and flush the folder, so that the rename itself survives a crash.

    A folder that does not exist is a FileNotFoundError naming ``path`` (not the temporary name).
    If the block raises (``KeyboardInterrupt`` included), the temporary file is removed and
    ``path`` is left as it was. The file gets the usual permissions (the umask's), not mkstemp's
    0600: it is meant to be read.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        handle = open(temporary, mode.replace("w", "x"), **open_kwargs)  # noqa: SIM115 (closed below)
    except (FileNotFoundError, NotADirectoryError) as error:  # the folder: name the user's path
        raise type(error)(
            error.errno, f"{error.strerror} (its folder {path.parent})", str(path)
        ) from None
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
