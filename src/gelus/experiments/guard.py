"""The one guard around everything a job runs: user code's failures and a lack of memory named.

:func:`guarded` wraps a job's work in the driver (building the model, each training epoch, each
evaluation; stacked or not, in this process or in a worker) and turns what escapes it into one
harness error, the job's runs marked ``failed`` (a later ``gelus run`` tries them again):

* an exception whose traceback passes through the source file of a user's activation
  (``module:attribute``), or a ``SystemExit`` from anywhere while one is trained: an
  :class:`~gelus.experiments.activation_spec.ActivationError` naming the activation, the phase
  (``training epoch 3``) and the exception (exit status 2);
* an allocation that failed (``MemoryError``, ``torch.OutOfMemoryError``, the CPU allocator's
  ``can't allocate memory``): a :class:`~gelus.experiments.errors.MachineError` naming the settings
  that drive the job's memory (its engine's ``memory_bytes``), exit status 1.

A user's Ctrl-C (``KeyboardInterrupt``) passes as it is: an interruption, the runs left to resume.
Anything else is the harness's own bug and passes on too (its runs marked ``failed``).
"""

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

from gelus.experiments.activation_spec import ActivationError
from gelus.experiments.errors import HarnessError, MachineError, size_text

__all__ = ["Phase", "guarded", "is_out_of_memory", "user_code_failure"]

# what torch's CPU allocator and CUDA caching allocator say when an allocation fails
_RETRIED = (
    "; its runs are marked failed, the epochs they finished kept: the same command tries them again"
)
_NO_MEMORY = ("can't allocate memory", "defaultcpuallocator", "out of memory")


class Phase:
    """What a guarded job is doing now, in words (``training epoch 3``); set as it goes."""

    def __init__(self, now: str) -> None:
        self.now = now


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
    """The ActivationError of ``error`` when it is a user activation's among ``specs`` (its
    traceback passes through the activation's source file; a ``SystemExit`` while exactly one user
    activation runs), naming it, ``doing`` and the exception, then ``after`` (what becomes of the
    runs); None when it is not."""
    users = [spec for spec in specs if getattr(spec, "is_custom", False)]
    blamed = next((spec for spec in users if _passes_through(error, spec.path)), None)
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
        f"once its code ({blamed.path}) is fixed, give it a new label "
        f"({blamed.label}2={blamed.spec}) or another {{out_dir}}"
    )


@contextlib.contextmanager
def guarded(job: Any, store: Any, phase: Phase) -> Iterator[Phase]:
    """Run the body as ``job``'s work: what escapes it becomes the error the module's docstring
    describes, the job's runs marked ``failed`` in ``store`` first (not on Ctrl-C)."""
    try:
        yield phase
    except KeyboardInterrupt:
        raise  # the user's interruption: the runs stay as they are, to resume
    except HarnessError:
        raise  # already said (a full disk, records that cannot be written): the runs resume
    except BaseException as error:
        _mark_failed(store, job.run_ids)
        doing = f"{phase.now} of {job.experiment} {job.label}"
        if is_out_of_memory(error):
            raise MachineError("", _memory_message(job, doing, error)) from error
        failure = user_code_failure(error, [job.activation], doing, _RETRIED)
        if failure is not None:
            raise failure from error
        raise


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
