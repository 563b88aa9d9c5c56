"""Run planned jobs (:mod:`gelus.experiments.plan`): ``run_job`` and the local worker processes.

``run_job`` hands a job to the driver (:mod:`gelus.experiments.driver`) and is idempotent given the output directory: runs already
``done`` are never planned, and an interrupted job resumes from its checkpoint. An executor is anything with
``run(jobs, progress) -> None``; ``LocalExecutor`` uses spawned processes with one torch thread
each (on a shared CPU, 1-thread workers beat one multi-thread process, see docs/PERFORMANCE.md).
"""

import contextlib
import ctypes
import os
import queue
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Protocol

from gelus.experiments.datasets import load_data
from gelus.experiments.plan import Job
from gelus.experiments.records import RecordStore

__all__ = [
    "Executor",
    "LocalExecutor",
    "Report",
    "WorkerReport",
    "claim_gpu",
    "exit_text",
    "run_job",
]

Report = Callable[[str, int, int], None]  # (job label, epochs done, epochs total)
WorkerReport = Callable[[int, str, int, int], None]  # (worker id, job label, done, total)


def run_job(job: Job, report: Report, store: RecordStore | None = None) -> None:
    """Run ``job`` to completion in this process, resuming from its checkpoint if there is one.

    Records go to ``store`` (anything with RecordStore's ``start_run``, ``add``, ``commit`` and
    ``finish_runs``), by default ``RecordStore(job.out_dir)``, opened and closed here.
    """
    from gelus.experiments.device import set_tf32
    from gelus.experiments.driver import train_job

    set_tf32(job.device, getattr(job.config.train, "tf32", False))
    data = load_data(job.config, job.data_dir, job.verify)
    owned = store is None
    if owned:
        store = RecordStore(job.out_dir)
    try:
        train_job(job, data, store, lambda epoch: report(job.label, epoch, job.epochs))
    finally:
        if owned:
            store.close()


class Executor(Protocol):
    """Runs independent jobs; ``report(worker, label, done, total)`` is called as epochs finish.

    Optional: ``workers`` (jobs run at once, for planning) and ``resolve_device(device)`` (where
    "auto" and "cuda" point when the jobs run elsewhere), as ``RayExecutor`` has.
    """

    def run(self, jobs: Sequence[Job], report: WorkerReport) -> None: ...


# ----------------------------------------------------------------------- local processes

_report_queue = None


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker die when the parent does, even by SIGKILL (Linux prctl; else a watchdog)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watchdog() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            threading.Event().wait(1.0)

    threading.Thread(target=watchdog, daemon=True).start()


def _init_worker(
    threads: int, report_queue, parent_pid: int, gpu_turn=None, states: str | None = None
) -> None:
    global _report_queue
    _die_with_parent(parent_pid)
    if states is not None:  # what this worker runs, for the executor to name should it end
        from gelus.experiments.notes import watch_state

        watch_state(Path(states) / f"{os.getpid()}.json")
    import torch

    torch.set_num_threads(threads)
    _report_queue = report_queue
    if gpu_turn is not None:
        torch.cuda.set_device(claim_gpu(gpu_turn, torch.cuda.device_count()))


def claim_gpu(turn, gpus: int) -> int:
    """The GPU of the next worker to start: workers take the ``gpus`` visible GPUs in turn.

    ``turn`` is a shared ``multiprocessing.Value("i")``, the count of workers started so far.
    """
    with turn.get_lock():
        index = turn.value
        turn.value += 1
    return index % max(1, gpus)


def _worker_run(job: Job) -> None:
    pid = os.getpid()
    run_job(job, lambda label, done, total: _report_queue.put((pid, label, done, total)))


class LocalExecutor:
    """``workers`` spawned processes with ``threads`` torch threads each; ``workers=0`` runs in this process."""

    def __init__(self, workers: int, threads: int = 1) -> None:
        self.workers = workers
        self.threads = threads

    def _run_here(self, jobs: Sequence[Job], report: WorkerReport) -> None:
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(self.threads)  # as in a worker (and identical arithmetic)
        try:
            for job in jobs:
                run_job(job, lambda label, done, total: report(0, label, done, total))
        finally:
            torch.set_num_threads(previous)

    def run(self, jobs: Sequence[Job], report: WorkerReport) -> None:
        if not jobs:
            return
        if self.workers == 0:
            self._run_here(jobs, report)
            return
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        report_queue = context.Queue()
        stop = threading.Event()

        def forward_reports() -> None:
            while not stop.is_set():
                try:
                    pid, label, done, total = report_queue.get(timeout=0.2)
                except queue.Empty:
                    continue
                report(pid, label, done, total)

        forwarder = threading.Thread(target=forward_reports, daemon=True)
        forwarder.start()
        workers = min(self.workers, len(jobs))
        # on a machine with several GPUs, workers spread over them ("cuda" is each one's own)
        gpu_turn = context.Value("i", 0) if any(job.device == "cuda" for job in jobs) else None
        states = tempfile.TemporaryDirectory(prefix="gelus-workers-")
        pool = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self.threads, report_queue, os.getpid(), gpu_turn, states.name),
        )
        try:
            _run_pool(pool, jobs, Path(states.name))
        finally:
            stop.set()
            forwarder.join()
            states.cleanup()
            # drain what is left so the bars end complete
            while True:
                try:
                    pid, label, done, total = report_queue.get_nowait()
                except (queue.Empty, OSError, ValueError):
                    break
                report(pid, label, done, total)


def _run_pool(pool: ProcessPoolExecutor, jobs: Sequence[Job], states: Path) -> None:
    """Run ``jobs`` on ``pool``, whose workers note what they run in ``states``. A job that
    raised: the other workers finish the jobs they run (none is left ``running``; the jobs not
    started are not), then its error; a worker that ended: the error naming what ended it
    (:func:`_worker_ended`); Ctrl-C: every worker stopped at once (its runs resume)."""
    processes: dict = {}
    try:
        futures = [pool.submit(_worker_run, job) for job in jobs]
        processes = dict(getattr(pool, "_processes", None) or {})  # all started by now
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f.exception() for f in finished if f.exception() is not None), None)
        if failed is not None and not isinstance(failed, BrokenProcessPool):
            pool.shutdown(wait=True, cancel_futures=True)  # the others finish their jobs
            raise failed
        if failed is not None:
            raise failed
        pool.shutdown(wait=True)
    except BrokenProcessPool as error:
        # the pool stops every worker: the runs of each job a worker held are marked failed
        processes |= dict(getattr(pool, "_processes", None) or {})
        pool.shutdown(wait=False, cancel_futures=True)
        raise _worker_ended(processes, states) or error from error
    except BaseException:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise


def _worker_ended(processes: dict, states: Path) -> Exception | None:
    """The error naming what ended a worker that died (a user activation that ended it: an
    ActivationError, status 2; else the machine's, status 1), after the runs of every job a
    worker held then are marked failed; None when no worker can be told to have ended."""
    from gelus.experiments.activation_spec import ActivationError
    from gelus.experiments.errors import MachineError
    from gelus.experiments.notes import read_state
    from gelus.experiments.records import RecordStore

    held = [read_state(path) for path in sorted(states.glob("*.json"))]
    for state in held:
        if state.get("run_ids") and state.get("out_dir"):
            with contextlib.suppress(Exception):  # the worker's end is the error to report
                store = RecordStore(state["out_dir"])
                try:
                    store.fail_runs(state["run_ids"])
                finally:
                    store.close()
    ended = []  # (pid, exit code) of the workers that ended of themselves (not the pool's stop)
    for pid, process in sorted(processes.items()):
        process.join(timeout=5)  # the one that ended is reaped; the pool stops the others
        code = process.exitcode
        if code is not None and code != -signal.SIGTERM:
            ended.append((pid, code))
    # an activation that ended its worker first: its error is the user's to fix
    ended.sort(
        key=lambda item: (
            not (item[1] >= 0 and read_state(states / f"{item[0]}.json").get("activation"))
        )
    )
    for pid, code in ended:
        state = read_state(states / f"{pid}.json")
        how = exit_text(code)
        doing = f" {state['when']}" if state.get("when") else ""
        if state.get("activation") and code >= 0:
            return ActivationError(
                f"activation {state['activation'][:120]!r} ended its worker process ({how}){doing}; "
                "an activation must return a tensor, never end the process; its runs are marked "
                "failed, the epochs they finished kept: once its code is fixed, give it a new "
                "label or another {out_dir}"
            )
        return MachineError(
            "",
            f"a worker process died abruptly ({how}){doing}: killed, or out of memory: try fewer "
            "{workers}; finished runs are kept: run the same command again to resume",
        )
    return None


def exit_text(code: int) -> str:
    """A process's exit status in words: "exit status 3 (os._exit or exit)", "signal SIGKILL"."""
    if code >= 0:
        return f"exit status {code}: os._exit, exit or a library ending the process"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"
