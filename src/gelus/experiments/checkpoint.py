"""Atomic checkpoints: a crash at any moment leaves either the old file or the new one, never half.

Write to a temporary file in the same directory, fsync it, rename it over the target, fsync the
directory. Loading uses ``torch.load(weights_only=True)``: a checkpoint holds tensors, numbers,
strings and containers of them, never arbitrary pickled objects.

A checkpoint that cannot be read (damaged on disk, truncated by a full disk, written by something
else) is never deleted and never blocks the run: it is renamed aside to
``NAME.corrupt-<UTC time>``, named in a warning on stderr, and the run starts again from its
beginning, the last state known good (records are appended with ``INSERT OR IGNORE``, so the
epochs it redoes change nothing already recorded).
"""

import os
import pickle
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import torch

from gelus.experiments.errors import DiskFullError, is_disk_full
from gelus.experiments.files import atomic_write

__all__ = ["load_checkpoint", "save_checkpoint", "set_aside"]

# what torch.load raises for a damaged or foreign file
_DAMAGE = (
    RuntimeError,
    OSError,
    EOFError,
    ValueError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
)


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (write, fsync, rename, fsync the directory): an
    interrupted write leaves the last good checkpoint as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_write(path, "wb") as handle:
            torch.save(state, handle)
    except (OSError, RuntimeError) as error:
        if is_disk_full(error, path.parent):
            raise DiskFullError(path) from error
        raise


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any] | None:
    """The state saved at ``path``, or None when there is none. Only tensors and plain data load.

    An unreadable checkpoint (or one that is not a dict) is renamed aside with ``set_aside`` and
    None is returned: the caller starts the run afresh.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except PermissionError:
        raise  # not damage: the user must fix the permissions
    except _DAMAGE as error:
        first_line = (str(error).splitlines() or [""])[0]
        set_aside(path, f"is unreadable ({type(error).__name__}: {first_line})")
        return None
    if not isinstance(state, dict):
        set_aside(path, f"is unreadable (holds a {type(state).__name__}, not a checkpoint's dict)")
        return None
    return state


def set_aside(path: str | os.PathLike, reason: str) -> Path:
    # ``reason`` completes "checkpoint PATH ...": "is unreadable (...)", "does not fit this job: ..."
    """Rename an unusable checkpoint to ``NAME.corrupt-<UTC time>`` (never delete it) and warn.

    Returns the new path. The warning on stderr names both paths and says the run restarts.
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while aside.exists():
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
        counter += 1
    os.replace(path, aside)
    print(
        f"gelus: warning: checkpoint {path} {reason}; it was moved to {aside} "
        "and its runs start again from the beginning (records already written are kept)",
        file=sys.stderr,
        flush=True,
    )
    return aside
