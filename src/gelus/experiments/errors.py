"""The harness's exceptions: what went wrong, and which parameter or resource it concerns.

The core raises these; only :mod:`gelus.cli` turns them into one line and an exit status, with the
command line's names for the parameters. A message names a parameter as ``{seeds}``: rendered as
``seeds`` for a Python caller (``str(error)``) and as ``--seeds`` on the command line, so that the
core never spells a flag::

    SettingError("seeds", "{seeds} must be at least 1, got 0")   # str(): seeds must be at least 1
    HarnessError.render(error, {"seeds": "--seeds"})             # --seeds must be at least 1

Two branches, by who can act: :class:`SettingError` (a ``ValueError``: a value or file the user
gave; exit status 2) and :class:`MachineError` (a ``RuntimeError``: the machine failed, e.g. a disk
full; exit status 1 unless it says otherwise).
"""

import re
from collections.abc import Mapping

__all__ = [
    "NEARLY_FULL_BYTES",
    "PARAMETERS",
    "CommandError",
    "ConfigError",
    "DiskFullError",
    "HarnessError",
    "MachineError",
    "RecordsError",
    "SettingError",
    "free_bytes",
    "free_space",
    "is_disk_full",
    "render",
    "size_text",
]

# The parameters a message may name as ``{parameter}``: run_experiment's arguments and --set.
PARAMETERS = (
    "activations", "address", "amp", "data_dir", "dataset", "device", "epochs", "experiment",
    "max_retries", "out_dir", "seeds", "set", "threads", "workers",
)  # fmt: skip
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PARAMETERS) + r")\}")


def render(message: str, names: Mapping[str, str] | None = None) -> str:
    """``message`` with each ``{parameter}`` replaced by ``names[parameter]`` (default: the
    parameter's own name); other braces are left as they are."""
    names = names or {}
    return _PLACEHOLDER.sub(lambda m: names.get(m[1], m[1]), message)


class HarnessError(Exception):
    """Base of the harness's errors; ``parameter`` names the setting concerned ("" for none)."""

    status = 2  # the command line's exit status

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.template = message

    def render(self, names: Mapping[str, str] | None = None) -> str:
        """The message with parameters spelled as ``names`` gives them (a CLI's flags)."""
        return render(self.template, names)

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self):  # re-raised from a worker process intact
        return type(self), (self.parameter, self.template)


class SettingError(HarnessError, ValueError):
    """A value the user gave (an option, a ``--set`` key, an activation, a folder) is invalid."""


class CommandError(SettingError):
    """A command's own option is invalid; raised by the areas' command handlers, whose messages
    name their flags as they are."""

    def __init__(self, message: str) -> None:
        super().__init__("", message)

    def __reduce__(self):
        return type(self), (self.template,)


class ConfigError(SettingError):
    """A config override or value is invalid; the message names the key and the valid choices."""

    def __init__(self, message: str, parameter: str = "set") -> None:
        super().__init__(parameter, message)

    def __reduce__(self):
        return type(self), (self.template, self.parameter)


class RecordsError(SettingError):
    """A records database that cannot be used as it is (damaged, another schema version)."""


class MachineError(HarnessError, RuntimeError):
    """The machine failed under a run (a worker killed, a device missing): exit status 1."""

    status = 1


class DiskFullError(MachineError):
    """A write ran out of space; the message names the path and the free space left."""

    status = 2  # the user frees space or picks another folder

    def __init__(self, path: object, message: str | None = None) -> None:
        if message is None:
            message = (
                f"the disk is full: cannot write {path} ({free_space(path)} free on its "
                "filesystem); free some space or give {out_dir} another folder, then run the "
                "same command again: everything already written is kept"
            )
        super().__init__("out_dir", message)
        self.path = path

    def __reduce__(self):
        return type(self), (self.path, self.template)


def free_bytes(path: object) -> int | None:
    """The free bytes of the filesystem holding ``path`` (its nearest existing folder); None if
    they cannot be read."""
    import shutil
    from pathlib import Path

    folder = Path(str(path)).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def free_space(path: object) -> str:
    """The free space of the filesystem holding ``path`` (its nearest existing folder), e.g.
    "12.0 MB"; "unknown" if it cannot be read."""
    free = free_bytes(path)
    return "unknown" if free is None else size_text(free, "GB")


def size_text(n: float, largest: str = "PB") -> str:
    """``n`` bytes in words, in decimal units up to ``largest``: "812 bytes", "12.0 MB"."""
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == largest:
            return f"{n:.0f} bytes" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} {largest}"


# Messages that say a write ran out of space, whatever the free space reads now: the OS's and
# SQLite's ("database or disk is full"); and, in a RuntimeError, torch's checkpoint writer's, which
# keeps no errno: it reports a short write as "PytorchStreamWriter failed writing file …: file
# write failed", and the archive it could not finish as "unexpected pos N vs M".
_FULL_MESSAGES = ("disk is full", "no space left")
_TORCH_FULL_MESSAGES = ("unexpected pos", "write failed", "failed writing")
# Messages that name no cause (SQLite's "disk I/O error"; EIO): a full disk when the filesystem
# written has less than NEARLY_FULL_BYTES free (a few kB is what a full disk leaves).
_UNSAID_MESSAGES = ("disk i/o error", "input/output error")
NEARLY_FULL_BYTES = 1024**2


def is_disk_full(error: BaseException, where: object = None) -> bool:
    """Whether ``error`` is a write that ran out of space, told by its cause where it has one and
    by its message where it has not:

    * an ``OSError`` with errno ENOSPC or EDQUOT (``EIO``: as below);
    * a message that says so: SQLite's "database or disk is full", or a RuntimeError of torch's
      checkpoint writer ("unexpected pos" of an archive it could not finish, "write failed");
    * with ``where`` (a path on the filesystem written), an error that names no cause (SQLite's
      "disk I/O error", EIO) while that filesystem has under ``NEARLY_FULL_BYTES`` free.
    """
    import errno

    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error).lower()
    if isinstance(error, OSError) and error.errno == errno.EIO:
        text += " input/output error"
    if any(words in text for words in _FULL_MESSAGES):
        return True
    if isinstance(error, RuntimeError) and any(words in text for words in _TORCH_FULL_MESSAGES):
        return True
    if where is None or not any(words in text for words in _UNSAID_MESSAGES):
        return False
    free = free_bytes(where)
    return free is not None and free < NEARLY_FULL_BYTES
