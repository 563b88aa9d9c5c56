"""Atomic checkpoints: a crash at any moment leaves either the old file or the new one, never half.

Write to a temporary file in the same directory, fsync it, rename it over the target, fsync the
directory. Loading uses ``torch.load(weights_only=True)``: a checkpoint holds tensors, numbers,
strings and containers of them, never arbitrary pickled objects.
"""

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["load_checkpoint", "save_checkpoint"]


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (write, fsync, rename, fsync the directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            torch.save(state, tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any] | None:
    """The state saved at ``path``, or None when there is none. Only tensors and plain data load."""
    path = Path(path)
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)
