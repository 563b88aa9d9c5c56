"""The one guard around everything a job runs: user code's failures and a lack of memory named.

:func:`guarded` wraps a job's work in the driver (building the model, each training epoch, each
evaluation; stacked or not, in this process or in a worker) and turns what escapes it into one
harness error, the job's runs marked ``failed`` (a later ``gelus run`` tries them again):

* what a user's activation (``module:attribute``) did, wherever its code lives: an output that
  is not a tensor of the input's device, dtype and shape (its module's output check,
  :func:`~gelus.experiments.activation_spec.watch_output`), an exception raised inside its call
  (its module is found among the traceback's frames), in its source file, or in code outside
  the harness and the Python installation that torch called (a backward of its own), or a
  ``SystemExit`` from anywhere while one is trained: an
  :class:`~gelus.experiments.activation_spec.ActivationError` naming the activation, the phase
  (``training epoch 3``) and what it did (exit status 2); a ``MemoryError`` it raised too;
* an allocation that failed otherwise (``MemoryError``, ``torch.OutOfMemoryError``, the CPU
  allocator's ``can't allocate memory``): a :class:`~gelus.experiments.errors.MachineError` naming
  the settings that drive the job's memory (its engine's ``memory_bytes``), exit status 1.

What no exception can tell, a process that user code ends (``os._exit``, a crash) is told by a
supervisor that outlives it, from what the process noted it was running
(:mod:`gelus.experiments.notes`: the job and its phase, set here as it goes).

A user's Ctrl-C (``KeyboardInterrupt``) passes as it is: an interruption, the runs left to resume.
Anything else is the harness's own bug and passes on too (its runs marked ``failed``).
"""

import contextlib
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gelus.experiments.activation_spec import ActivationError, ActivationFault
from gelus.experiments.errors import HarnessError, MachineError, size_text
from gelus.experiments.notes import note_idle, note_job

__all__ = ["Phase", "guarded", "is_out_of_memory", "user_code_failure"]

_RETRIED = (
    "; its runs are marked failed, the epochs they finished kept: the same command tries them again"
)
# what torch's CPU allocator and CUDA caching allocator say when an allocation fails
_NO_MEMORY = ("can't allocate memory", "defaultcpuallocator", "out of memory")


class Phase:
    """What a guarded job is doing now, in words (``training epoch 3``); set as it goes, and
    noted where a supervisor watches this process (:mod:`gelus.experiments.notes`)."""

    def __init__(self, now: str) -> None:
        self.job: Any = None
        self._now = now

    @property
    def now(self) -> str:
        return self._now

    @now.setter
    def now(self, value: str) -> None:
        self._now = value
        if self.job is not None:
            note_job(self.job, value)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation that failed: ``MemoryError``, ``torch.OutOfMemoryError``
    or a RuntimeError of torch's allocators ("can't allocate memory", "out of memory")."""
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(words in text for words in _NO_MEMORY)


def user_code_failure(
    error: BaseException, specs: Iterable[Any], doing: str, after: str = ""
) -> ActivationError | None:
    """The ActivationError of ``error`` when it is a user activation's among ``specs``, naming
    it, ``doing`` and what it did, then ``after`` (what becomes of the runs); None when it is not.

    It is, in this order: its output check's :class:`ActivationFault` (what it returned); an
    exception raised inside its module's call, wherever the code that raised lives; one whose
    traceback passes through its source file; with one user activation, one that passed through
    code outside the harness and the Python installation that torch called (its own backward);
    a ``SystemExit`` while exactly one user activation runs."""
    users = [spec for spec in specs if getattr(spec, "is_custom", False)]
    fault = _chained(error, ActivationFault)
    if fault is not None:  # its output check: what it returned
        blamed = next((spec for spec in users if spec.text == fault.text), None)
        return ActivationError(
            f"activation {fault.text[:120]!r} {fault.what} during {doing}{after}; "
            + (_way_out(blamed) if blamed is not None else "fix its code")
        )
    called = _called_activation(error)  # raised inside its module's call, wherever defined
    blamed = next((spec for spec in users if spec.text == called), None)
    if blamed is None:
        blamed = next((spec for spec in users if _passes_through(error, spec.path)), None)
    if blamed is None and len(users) == 1 and _through_foreign_code(error):
        blamed = users[0]  # its backward, in another module, called by torch's autograd
    if blamed is None and isinstance(error, SystemExit) and users:
        blamed = users[0] if len(users) == 1 else None
        if blamed is None:
            names = ", ".join(repr(spec.text[:80]) for spec in users)
            return ActivationError(
                f"one of the activations {names} called sys.exit ({_detail(error)}) during "
                f"{doing}; an activation must return a tensor, never end the process{after}"
            )
    if blamed is None:
        return None
    return ActivationError(
        f"activation {blamed.text[:120]!r} failed during {doing}: {_detail(error)}{after}; "
        + _way_out(blamed)
    )


def _way_out(spec: Any) -> str:
    where = f" ({spec.path})" if spec.path else ""
    return (
        f"once its code{where} is fixed, give it a new label ({spec.label}2={spec.spec}) or "
        "another {out_dir}"
    )


@contextlib.contextmanager
def guarded(job: Any, store: Any, phase: Phase) -> Iterator[Phase]:
    """Run the body as ``job``'s work: what escapes it becomes the error the module's docstring
    describes, the job's runs marked ``failed`` in ``store`` first (not on Ctrl-C)."""
    phase.job = job
    note_job(job, phase.now)
    try:
        yield phase
    except KeyboardInterrupt:
        raise  # the user's interruption: the runs stay as they are, to resume
    except HarnessError:
        raise  # already said (a full disk, records that cannot be written): the runs resume
    except BaseException as error:
        _mark_failed(store, job.run_ids)
        doing = f"{phase.now} of {job.experiment} {job.label}"
        failure = user_code_failure(error, [job.activation], doing, _RETRIED)
        # torch's allocators failing are the machine's, wherever they ran; a Python MemoryError
        # that user code raised (or let through) is the user's
        if is_out_of_memory(error) and not (failure and isinstance(error, MemoryError)):
            raise MachineError("", _memory_message(job, doing, error)) from error
        if failure is not None:
            raise failure from error
        raise
    finally:
        phase.job = None
        note_idle()


def _memory_message(job: Any, doing: str, error: BaseException) -> str:
    from gelus.experiments.config import flat_config, plugin_for

    plugin = plugin_for(job.config)
    estimate, keys = plugin.memory_bytes(job.config, len(job.members))
    flat = flat_config(plugin.config_to_dict(job.config))
    shown = {
        k: ",".join(map(str, v)) if isinstance(v, list | tuple) else v for k, v in flat.items()
    }
    settings = ", ".join(f"{key}={shown[key]}" for key in keys if key in shown)
    driven = f"; it grows with {settings} (about {size_text(estimate)} per job)" if settings else ""
    first = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
    return (
        f"out of memory during {doing} ({type(error).__name__}{': ' + first if first else ''})"
        f"{driven}: lower them, or use fewer {{workers}}; finished runs are kept, and the runs "
        f"of this job are tried again by the next run of the same command"
    )


def _mark_failed(store: Any, run_ids: list[str]) -> None:
    """Mark ``run_ids`` failed where ``store`` can (a failure to write is not the one to report)."""
    fail_runs = getattr(store, "fail_runs", None)
    if fail_runs is None:
        return
    with contextlib.suppress(Exception):
        fail_runs(run_ids)


def _detail(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"SystemExit({error.code!r})"
    return f"{type(error).__name__}: {error}"[:300].replace("\n", " ")


def _passes_through(error: BaseException, path: str) -> bool:
    """Whether ``error`` (or an exception it was raised from or during) passed through ``path``."""
    if not path:
        return False
    target = os.path.realpath(path)
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name == path or os.path.realpath(name) == target:
                return True
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    return False


def _chained(error: BaseException, kind: type) -> Any:
    """The first exception of type ``kind`` among ``error`` and those it was raised from or
    during; None when there is none."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _frames(error: BaseException) -> Iterator[Any]:
    """The frames of ``error``'s traceback and of those it was raised from or during."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            yield tb.tb_frame
            tb = tb.tb_next
        current = current.__cause__ or current.__context__


def _called_activation(error: BaseException) -> str | None:
    """The text of the user activation whose module's call ``error`` was raised inside (a frame
    of ``nn.Module``'s call whose ``self`` is marked by ``watch_output``); None if none."""
    for frame in _frames(error):
        owner = frame.f_locals.get("self") if frame.f_code.co_name.endswith("call_impl") else None
        text = getattr(owner, "_gelus_activation", None) if owner is not None else None
        if isinstance(text, str):
            return text
    return None


def _installed_prefixes() -> tuple[str, ...]:
    """Where the harness, torch, the standard library and installed packages live."""
    import gelus

    paths = {
        str(Path(gelus.__file__).resolve().parent),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *(p for p in sysconfig.get_paths().values() if p),
    }
    with contextlib.suppress(Exception):
        paths |= {*site.getsitepackages(), site.getusersitepackages()}
    return tuple(os.path.realpath(p) + os.sep for p in paths)


# where torch.compile writes the code it generates (inductor's and Triton's caches)
_GENERATED = (f"{os.sep}torchinductor_", f"{os.sep}.triton{os.sep}", f"{os.sep}triton{os.sep}")


def _through_foreign_code(error: BaseException) -> bool:
    """Whether ``error`` passed through code outside the harness and the Python installation
    that torch called (a user's ``autograd.Function.backward``, wherever it lives), rather than
    the harness (a test's stand-in for an engine is called by the harness, not by torch)."""
    prefixes = _installed_prefixes()
    torch_seen = False
    for frame in _frames(error):
        name = frame.f_code.co_filename
        if name.startswith("<") or any(part in name for part in _GENERATED):
            continue  # code torch generated (fx, inductor, Triton): torch's own
        real = os.path.realpath(name)
        if not real.startswith(prefixes):
            if torch_seen:
                return True
            continue
        torch_seen = f"{os.sep}torch{os.sep}" in real
    return False
