"""The ``gelus`` command line: one subcommand per area, each defined next to the code it drives.

Each area module named in ``COMMANDS`` provides ``register(subparsers)`` which adds its parser and
sets ``func`` (called with the parsed namespace, returning an exit code). Area modules import their
heavy dependencies inside the handlers so that ``gelus --help`` stays fast.

No error a user can act on ends in a Python traceback: ``explain`` turns it into one message that
names the file or setting and the way out (exit status 2 for a user's input or file, 1 for a
failure of the machine: a worker killed, the disk full). ``--debug`` or ``GELUS_DEBUG=1`` shows
the traceback instead, for bug reports; an error nobody anticipated (a bug) always shows it.

The harness's third-party modules come with an extra (``pip install 'gelus[harness]'``), not with
the library: a command that needs one that is missing says so in one line, exit status 2, before it
starts (``HARNESS_NEEDS``), or when the import fails anyway (``explain``).
"""

import argparse
import contextlib
import importlib
import os
import sys
from typing import NoReturn

__all__ = [
    "COMMANDS",
    "DEBUG_ENV",
    "FLAGS",
    "HARNESS_EXTRA",
    "HARNESS_NEEDS",
    "build_parser",
    "explain",
    "main",
]

# subcommand -> module providing register(subparsers)
COMMANDS = {
    "list": "gelus.experiments.cli",
    "run": "gelus.experiments.cli",
    "data": "gelus.data.cli",
    "bench": "gelus.bench.cli",
    "plot": "gelus.plots.cli",
    "report": "gelus.report.cli",
    "export": "gelus.report.cli",
    "reproduce": "gelus.report.cli",
    "audit": "gelus._audit_cli",
    "check": "gelus.conformance",
}
DEBUG_ENV = "GELUS_DEBUG"
# The extra that brings the harness's third-party modules (pyproject.toml), and which of them each
# subcommand imports: checked before the command starts, so that `gelus reproduce` does not train
# for an hour and then fail at the report for want of scipy. `list`, `bench` and `export` need none.
HARNESS_EXTRA = "harness"
HARNESS_NEEDS = {
    "run": ("tqdm",),  # progress bars
    "data": ("tqdm",),  # download progress
    "plot": ("matplotlib",),
    "report": ("matplotlib", "scipy"),  # figures; paired t-tests
    "reproduce": ("tqdm", "matplotlib", "scipy"),
}
# a parameter the harness's errors name (gelus.experiments.errors.PARAMETERS) -> its flag here
FLAGS = {
    "activations": "--activations",
    "address": "--address",
    "amp": "--amp",
    "data_dir": "--data-dir",
    "dataset": "--dataset",
    "device": "--device",
    "epochs": "--epochs",
    "experiment": "experiment",
    "max_retries": "--max-retries",
    "out_dir": "--out",
    "seeds": "--seeds",
    "set": "--set",
    "threads": "--threads",
    "workers": "--workers",
}
_RERUN = "finished runs are kept: run the same command again to resume"
# what an interrupted command that only writes files leaves (gelus.experiments.files)
_KEPT = "each file is replaced only when whole, so the previous ones stand: run it again"
_INTERRUPTED = {"export": _KEPT, "report": _KEPT, "plot": _KEPT}


def build_parser() -> argparse.ArgumentParser:
    """The ``gelus`` parser with every area's subcommands (each also accepts ``--debug``)."""
    parser = argparse.ArgumentParser(
        prog="gelus",
        description="The GELU family for PyTorch and the GELU paper's experiments.",
        epilog=f"Errors are printed as one message; --debug (or {DEBUG_ENV}=1) shows the traceback.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    debug_help = f"show the Python traceback of an error, for bug reports (also {DEBUG_ENV}=1)"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in dict.fromkeys(COMMANDS.values()):
        importlib.import_module(module_name).register(subparsers)
    for subparser in subparsers.choices.values():  # `gelus run ... --debug` works too
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help
        )
    return parser


def _version() -> str:
    """``gelus 0.1.0 (torch 2.13.0+cpu, Python 3.11.7)``: what a bug report needs to name; without
    an importable torch, why it does not import in its place (never a traceback)."""
    import platform

    from gelus import _TORCH_ERROR, __version__

    if _TORCH_ERROR is None:
        import torch

        torch_text = f"torch {torch.__version__}"
    else:
        reason = f"{type(_TORCH_ERROR).__name__}: {_TORCH_ERROR}".splitlines()[0][:160]
        torch_text = f"torch does not import: {reason}"
    return f"gelus {__version__} ({torch_text}, Python {platform.python_version()})"


def _print_version() -> NoReturn:
    """Print the version to stdout and end with SystemExit (as argparse's ``version`` action
    did): status 0, or 1 with one line on stderr when stdout cannot take it (a full disk,
    ``> /dev/full``, a closed pipe)."""
    try:
        print(_version())
        sys.stdout.flush()
    except OSError as error:
        _silence_stdout()
        print(
            f"gelus: error: cannot write the version to stdout ({_reason(error)})", file=sys.stderr
        )
        raise SystemExit(1) from None
    raise SystemExit(0)


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit, failing again on
    what is still buffered, adds no "Exception ignored" lines."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # a stream without an fd
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _asks_version(argv: list[str]) -> bool:
    """Whether ``argv`` asks for ``--version`` before any subcommand (answered before the
    subcommands are loaded, so without numpy or a working torch too)."""
    for token in argv:
        if token == "--version":
            return True
        if not token.startswith("-"):
            return False
    return False


def main(argv: list[str] | None = None) -> int:
    """Run ``gelus`` with ``argv``; returns the exit status (0 success, 2 a user's error, 1 other).

    The command line's own (``argv`` None) ``gelus run`` and ``gelus reproduce`` run supervised
    (:mod:`gelus.experiments.supervise`): user code that ends the process is still one line."""
    if argv is None:
        argv = sys.argv[1:]
        command = next((token for token in argv if not token.startswith("-")), None)
        if not _asks_version(argv) and _supervised(command):
            from gelus.experiments.supervise import supervise

            return supervise(command, lambda: _main(argv))
    return _main(list(argv))


def _supervised(command: str | None) -> bool:
    if command not in ("run", "reproduce"):
        return False  # nothing else runs user code: not even the import below
    try:
        from gelus.experiments.supervise import supervised
    except Exception:  # a broken installation: the command says so itself, unsupervised
        return False
    return supervised(command)


def _main(argv: list[str]) -> int:
    if _asks_version(argv):
        _print_version()
    try:
        parser = build_parser()
    except Exception as error:  # a module the commands need (numpy, torch) is missing or broken
        from gelus import _TORCH_ERROR

        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        if not isinstance(error, ImportError) and _TORCH_ERROR is None:
            raise  # a bug: shown
        print(f"gelus: error: {_cannot_load(error, _TORCH_ERROR)}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.version:
        _print_version()
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    missing = [name for name in HARNESS_NEEDS.get(args.command, ()) if not _importable(name)]
    if missing:
        print(f"gelus {args.command}: error: {_needs_extra(missing)}", file=sys.stderr)
        return 2
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        status = int(args.func(args) or 0)
    except _StdoutError as error:
        return _stdout_failed(args.command, error)
    except KeyboardInterrupt:
        if debug:
            raise
        note = _INTERRUPTED.get(args.command, _RERUN)
        print(f"gelus {args.command}: interrupted; {note}", file=sys.stderr)
        return 130
    except Exception as error:
        explained = None if debug else explain(error, args)
        if explained is None:
            raise
        message, status = explained
        print(f"gelus {args.command}: error: {message}", file=sys.stderr)
        return status
    finally:
        if isinstance(sys.stdout, _Stdout):
            sys.stdout = stdout
    try:  # what is still buffered fails here, with one line, not silently at exit
        sys.stdout.flush()
    except OSError as error:
        return _stdout_failed(args.command, error)
    return status


class _StdoutError(OSError):
    """A write to stdout that failed: the command's output, not a file of the user's."""


class _Stdout:
    """stdout, its failed writes raised as :class:`_StdoutError` (told apart from the files a
    command writes, whose errors name them)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            raise _StdoutError(error.errno, error.strerror) from error

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            raise _StdoutError(error.errno, error.strerror) from error

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_failed(command: str, error: OSError) -> int:
    """One line on stderr for output that stdout did not take; exit status 1."""
    _silence_stdout()
    print(f"gelus {command}: error: cannot write to stdout ({_reason(error)})", file=sys.stderr)
    return 1


def _cannot_load(error: Exception, torch_error: Exception | None) -> str:
    """The line for a command line that cannot load its commands: what is missing, how to get it."""
    name = _root(getattr(error, "name", None))
    if torch_error is not None:
        first = f"{type(torch_error).__name__}: {torch_error}".splitlines()[0][:200]
        return f"torch does not import ({first}); install or repair it: pip install torch"
    if isinstance(error, ModuleNotFoundError) and name:
        return (
            f"its commands need {name}, which is not installed (No module named {name!r}); "
            f"install it: pip install 'gelus[{HARNESS_EXTRA}]'"
        )
    first = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    return f"its commands cannot load ({first}); reinstall torch and gelus"


def explain(error: BaseException, args: argparse.Namespace | None = None) -> tuple[str, int] | None:
    """(message, exit status) for an error a user can act on, or None for a bug.

    Knows errors raised in worker processes too (re-raised in this one by the executor).
    ``args`` supplies the settings a message can name (``--out``).
    """
    import concurrent.futures.process
    import sqlite3

    error = _unwrap(error)
    out = getattr(args, "out", None)
    if isinstance(error, ModuleNotFoundError) and _root(error.name) in _HARNESS_MODULES:
        return _needs_extra([_root(error.name)]), 2
    harness_error = _harness_error(error)
    if harness_error is not None:
        return harness_error
    data_error = _data_error(error)
    if data_error is not None:
        return data_error, 2
    if isinstance(error, concurrent.futures.process.BrokenProcessPool) or type(error).__name__ in (
        "WorkerCrashedError",
        "NodeDiedError",
        "ActorDiedError",
    ):
        return (
            "a worker process died abruptly (killed, or out of memory: try fewer --workers); "
            + _RERUN,
            1,
        )
    disk_full = _disk_full_error(error, out)
    if disk_full is not None:
        return disk_full, 2
    if isinstance(error, sqlite3.DatabaseError):
        where = f" in {out}" if out else ""
        return (
            f"the records database{where} is damaged or unusable ({error}); it was left "
            "untouched: move records.sqlite aside and run again, or give --out another folder",
            2,
        )
    if isinstance(error, MemoryError):
        return f"out of memory ({error or 'MemoryError'}); try fewer --workers. " + _RERUN, 1
    if isinstance(error, OSError):
        return _os_error(error, out), 2 if _disk_full(error) else 1
    return None


_HARNESS_MODULES = frozenset(name for names in HARNESS_NEEDS.values() for name in names)


def _needs_extra(missing: list[str]) -> str:
    return (
        f"needs the {HARNESS_EXTRA} extra: pip install 'gelus[{HARNESS_EXTRA}]' "
        f"(missing: {', '.join(missing)})"
    )


def _importable(name: str) -> bool:
    """Whether ``import name`` would find the module (without importing it: no slow start)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder refused it; or sys.modules holds None for it
        return False


def _root(name: str | None) -> str:
    return (name or "").partition(".")[0]


def _unwrap(error: BaseException) -> BaseException:
    """The original error of one that Ray wrapped (``RayTaskError``); else ``error`` itself."""
    cause = getattr(error, "cause", None)
    if type(error).__name__.startswith("RayTaskError") and isinstance(cause, BaseException):
        return cause
    return error


def _harness_error(error: BaseException) -> tuple[str, int] | None:
    if "gelus.experiments.errors" not in sys.modules:
        return None  # no harness code ran, so none of its errors was raised
    from gelus.experiments.errors import HarnessError

    if not isinstance(error, HarnessError):
        return None
    return error.render(FLAGS), error.status


def _data_error(error: BaseException) -> str | None:
    if "gelus.data.errors" not in sys.modules:
        return None  # no data code ran, so no DataError was raised
    from gelus.data.errors import (
        ChecksumError,
        DataError,
        DatasetNotFoundError,
        FetchError,
        UnsafeArchiveError,
    )

    if not isinstance(error, DataError):
        return None
    if isinstance(error, DatasetNotFoundError | ChecksumError | FetchError):
        return str(error)  # these already give the steps to take
    if isinstance(error, UnsafeArchiveError):
        return (
            f"{error}\nThe file was refused for safety: delete it and get the dataset again "
            "(`gelus data` lists where each dataset was found and how to get it)"
        )
    return (
        f"{error}\nReplace the file named above with a good copy (`gelus data` lists where each "
        "dataset was found and how to get it)"
    )


def _disk_full_error(error: BaseException, out) -> str | None:
    """The full-disk message for an error that is one (by its errno, or torch's or SQLite's
    message: ``gelus.experiments.errors.is_disk_full``, the free space read in ``--out``)."""
    import sqlite3

    if not isinstance(error, OSError | RuntimeError | sqlite3.Error):
        return None
    if "gelus.experiments.errors" not in sys.modules:
        return None  # no harness code wrote anything (an OSError still says ENOSPC below)
    from gelus.experiments.errors import DiskFullError, is_disk_full

    if not is_disk_full(error, out):
        return None
    name = getattr(error, "filename", None)
    if name is None and out is not None and isinstance(error, sqlite3.Error):
        from pathlib import Path

        name = Path(out) / "records.sqlite"  # the one database the harness writes
    return DiskFullError(name or out or ".").render(FLAGS)


def _os_error(error: OSError, out) -> str:
    name = error.filename
    reason = error.strerror or str(error)
    if name is None:
        return f"{reason}; {_RERUN}"
    if out is not None and _within(name, out):
        return f"cannot write {name} ({reason}); give --out a folder you can write to"
    return f"{name}: {reason}"


def _disk_full(error: OSError) -> bool:
    import errno

    return error.errno in (errno.ENOSPC, errno.EDQUOT)


def _within(name, folder) -> bool:
    from pathlib import Path

    try:
        path, folder = Path(name).absolute(), Path(folder).absolute()
    except (TypeError, ValueError):
        return False
    return path == folder or folder in path.parents
