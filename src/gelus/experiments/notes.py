"""What a process runs, noted for a supervisor that outlives it (the state a supervisor reads).

User code can end the process it runs in without raising (``os._exit``, a crash): nothing in that
process runs after, so what it was doing is told by a note written before: the job and its phase
(:class:`gelus.experiments.guard.Phase`), or the user code called (importing, building, probing:
:func:`note_user_code`), in a small JSON file that a supervisor reads when the process ends
before it finished (a worker: the local executor, :mod:`gelus.experiments.sweep`; the command's
own process: :mod:`gelus.experiments.supervise`). No note is written where none is watched.
"""

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "note_end",
    "note_idle",
    "note_job",
    "note_user_code",
    "read_state",
    "watch_state",
    "write_state",
]

_STATE_FILE: Path | None = None  # where this process notes what it runs; None: not watched


def watch_state(path: str | os.PathLike | None) -> None:
    """Note what this process runs in ``path`` from now on (None: stop), for a supervisor."""
    global _STATE_FILE
    _STATE_FILE = None if path is None else Path(path)
    write_state({"pid": os.getpid(), "doing": ""})


def read_state(path: str | os.PathLike) -> dict[str, Any]:
    """What the process watched through ``path`` last noted: ``doing`` (empty when idle) and
    ``when`` (the same with its preposition: "during training epoch 2 of …"), ``activation`` (a
    user activation's text, or empty), for a job ``job``, ``out_dir`` and ``run_ids``, and
    ``end``, the exit status of a command that finished; {} when there is no readable note."""
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def note_end(status: int) -> None:
    """Note that the command finished, with exit status ``status`` (whatever ends the process
    after, its supervisor returns this status)."""
    write_state({"pid": os.getpid(), "doing": "", "end": int(status)})


def note_idle() -> None:
    """Note that nothing is running now."""
    write_state({"pid": os.getpid(), "doing": ""})


def write_state(state: dict[str, Any]) -> None:
    """Replace the note with ``state`` (nothing where this process is not watched)."""
    if _STATE_FILE is None:
        return
    with contextlib.suppress(OSError):  # a note that cannot be written must not stop the job
        _STATE_FILE.write_text(json.dumps(state), encoding="utf-8")


def note_job(job: Any, phase: str) -> None:
    """Note that ``job`` is in ``phase`` ("training epoch 2")."""
    if _STATE_FILE is None:
        return
    activation = job.activation
    doing = f"{phase} of {job.experiment} {job.label}"
    write_state(
        {
            "pid": os.getpid(),
            "doing": doing,
            "when": f"during {doing}",
            "activation": activation.text if getattr(activation, "is_custom", False) else "",
            "job": job.label,
            "out_dir": str(job.out_dir),
            "run_ids": list(job.run_ids),
        }
    )


@contextlib.contextmanager
def note_user_code(text: str, doing: str) -> Iterator[None]:
    """Note, for the body, that user activation ``text`` runs (``doing``: "importing it")."""
    if _STATE_FILE is None:
        yield
        return
    previous = read_state(_STATE_FILE)
    write_state({"pid": os.getpid(), "doing": doing, "when": f"when {doing}", "activation": text})
    try:
        yield
    finally:
        write_state(previous or {"pid": os.getpid(), "doing": ""})
