"""A command that runs user code, supervised: an end of its process that no exception tells
(``os._exit`` from an activation, a crash) is still one line and a non-zero exit status.

User code can end the process it runs in without raising (``os._exit(0)``, a C extension's
``exit``, a segfault): no ``try``, ``finally`` or ``atexit`` of that process runs, so the process
cannot report it itself, and with ``--workers 0`` (or in the probe and the step timing, which
run in the command's own process) ``gelus run`` used to end with exit status 0, no output, its
run left ``running``. So the command line's ``gelus run`` and ``gelus reproduce`` fork at their
start, before anything runs (no thread exists yet): the child runs the command as before, noting
what it runs (the job and its phase, or the user code it calls) in a small state file
(:mod:`gelus.experiments.notes`) and, when it returns, its exit status; the parent
only waits. When the child ends without having noted its exit status, the parent reads what it
was doing and says so in one line: an activation that ended it (exit status 2, its runs marked
``failed``, retried by the next run), or the machine's failure (exit status 1; a crash marks the
job's runs ``failed`` too). The parent forwards the signals sent to it alone (``kill PID``: SIGINT,
SIGTERM, SIGHUP) and not those a terminal sends to the whole foreground group (Ctrl-C), which the
child receives itself; the child dies with the parent (``PR_SET_PDEATHSIG``), so ``kill -9``
stops both, as it did one process. ``main(argv)`` called from Python is not supervised (it runs
in the caller's process); nor is anything where ``os.fork`` or ``signal.sigtimedwait`` does not
exist, or with ``GELUS_SUPERVISE=0``.

Why a supervising parent rather than a check in the process: an ``atexit`` handler or a
``finally`` does not run on ``os._exit``, and running each job in a child process would change
what ``--workers 0`` means (one process, in which a debugger or a test's patch reaches the job).
"""

import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable

__all__ = ["ENV", "SUPERVISED", "supervise", "supervised"]

ENV = "GELUS_SUPERVISE"  # 0: run the command in this process, unsupervised
SUPERVISED = ("run", "reproduce")  # the commands that run user code (activations)
# a signal that a user or the system sends to stop a command: an interruption, not a failure
_STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL}
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_RESUME = "finished runs are kept: run the same command again to resume"


def supervised(command: str | None) -> bool:
    """Whether the command line's ``command`` runs under :func:`supervise` here."""
    return (
        command in SUPERVISED
        and os.environ.get(ENV, "1") != "0"
        and hasattr(os, "fork")
        and hasattr(signal, "sigtimedwait")
    )


def supervise(command: str, run: Callable[[], int]) -> int:
    """``run()`` in a forked child process, supervised (the module's docstring); returns its exit
    status in both processes: the child's own where it finished, else the parent's verdict."""
    from gelus.experiments import notes

    handle, state_path = tempfile.mkstemp(prefix="gelus-command-", suffix=".json")
    os.close(handle)
    watched = (*_FORWARDED, signal.SIGCHLD)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()  # nothing buffered is written twice
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: the command, as it ran before
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        from gelus.experiments.sweep import _die_with_parent

        _die_with_parent(parent)
        notes.watch_state(state_path)
        try:
            status = run()
        except SystemExit as stop:  # argparse's --help and usage errors: an end, as before
            notes.note_end(_status_of(stop.code))
            raise
        except KeyboardInterrupt:  # with --debug: the interruption's traceback
            notes.note_end(130)
            raise
        except BaseException:  # a bug's traceback: Python's exit status 1
            notes.note_end(1)
            raise
        notes.note_end(status)
        return status
    try:
        ended = _wait(pid, watched)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    state = notes.read_state(state_path)
    with contextlib.suppress(OSError):
        os.unlink(state_path)
    if isinstance(state.get("end"), int):
        return state["end"]  # it finished (whatever ended the process after)
    message, status = verdict(ended, state)
    print(f"gelus {command}: error: {message}", file=sys.stderr)
    return status


def _status_of(code: object) -> int:
    """The exit status ``SystemExit(code)`` ends a process with."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _wait(pid: int, watched: tuple) -> int:
    """Wait for the child ``pid`` to end, forwarding the signals sent to this process alone;
    returns its exit code (negative: the signal that ended it)."""
    while True:
        info = signal.sigtimedwait(watched, 0.5)
        # si_code <= 0: sent by kill() (SI_USER) or the like, to this process; a terminal's
        # Ctrl-C (SI_KERNEL) reached the child's group itself
        if info is not None and info.si_signo != signal.SIGCHLD and info.si_code <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, info.si_signo)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)


def verdict(code: int, state: dict) -> tuple[str, int]:
    """(message, exit status) for a command process that ended with exit code ``code`` (negative:
    a signal) without finishing, given what it last noted (``notes.read_state``); marks the runs
    of the job it held ``failed`` unless it was stopped (a signal to stop it: they resume)."""
    from gelus.experiments.sweep import exit_text

    how = exit_text(code)
    when = f" {state['when']}" if state.get("when") else ""
    activation = state.get("activation") or ""
    if code < 0 and -code in _STOPS:
        return f"stopped ({how}){when}; {_RESUME}", 128 - code
    marked = _fail_runs(state)
    if activation and code >= 0:
        runs = "its runs are marked failed, the epochs they finished kept: " if marked else ""
        return (
            f"activation {activation[:120]!r} ended the process ({how}){when}; an activation "
            f"must return a tensor, never end the process; {runs}once its code is fixed, give it "
            "a new label or another --out",
            2,
        )
    during = f" while activation {activation[:120]!r} ran" if activation else ""
    return (
        f"the command's process ended before it finished ({how}){when}{during}, without an "
        f"error; {_RESUME}",
        1,
    )


def _fail_runs(state: dict) -> bool:
    """Mark the runs of the job ``state`` names ``failed``; whether there were any."""
    run_ids, out_dir = state.get("run_ids"), state.get("out_dir")
    if not run_ids or not out_dir:
        return False
    from gelus.experiments.records import RecordStore

    with contextlib.suppress(Exception):  # the process's end is the error to report
        store = RecordStore(out_dir)
        try:
            store.fail_runs(run_ids)
        finally:
            store.close()
    return True
