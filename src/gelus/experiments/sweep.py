"""Plan an experiment as independent jobs and run them in local worker processes.

A ``Job`` is one stacked ensemble (one activation and setting; members = seeds × learning rates)
or one CNN run. ``run_job`` is idempotent given the output directory: runs already ``done`` are
never planned, and an interrupted job resumes from its checkpoint. An executor is anything with
``run(jobs, progress) -> None``; ``LocalExecutor`` uses spawned processes with one torch thread
each (on a shared CPU, 1-thread workers beat one multi-thread process, see PERFORMANCE.md).
"""

import ctypes
import functools
import hashlib
import json
import os
import queue
import re
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gelus.experiments.config import ExperimentConfig, config_hash, config_to_dict, is_stochastic
from gelus.experiments.records import RecordStore, RunKey

__all__ = [
    "Executor",
    "Job",
    "LocalExecutor",
    "Report",
    "WorkerReport",
    "load_dataset",
    "plan_jobs",
    "run_job",
]

Report = Callable[[str, int, int], None]  # (job label, epochs done, epochs total)
WorkerReport = Callable[[int, str, int, int], None]  # (worker id, job label, done, total)


@dataclass(frozen=True)
class Job:
    """One unit of work: a stacked ensemble ("mlp") or one CNN training ("cnn")."""

    kind: str
    experiment: str
    config: ExperimentConfig
    activation: str
    setting: str
    keep: float
    members: tuple[RunKey, ...]
    dataset: str
    data_dir: str | None
    verify: bool
    out_dir: str
    checkpoint_path: str
    config_json: str
    metadata_json: str
    device: str = "cpu"

    @property
    def label(self) -> str:
        setting = f" {self.setting}" if self.setting else ""
        lr = f" lr={self.members[0].lr:g} seed={self.members[0].seed}" if self.kind == "cnn" else ""
        return f"{self.activation}{setting}{lr} ×{len(self.members)}"

    @property
    def epochs(self) -> int:
        return self.config.train.epochs


def _run_id(
    experiment: str, chash: str, activation: str, setting: str, lr: float, seed: int
) -> str:
    return f"{experiment}/{chash}/{activation}/{setting or '-'}/lr={lr:g}/seed={seed}"


def plan_jobs(
    experiment: str,
    config: ExperimentConfig,
    *,
    out_dir: Path,
    data_dir: str | None,
    verify: bool,
    metadata: dict,
    done: set[str],
    device: str = "cpu",
    split_by_lr: bool = False,
) -> list[Job]:
    """The jobs of ``experiment`` whose runs are not all ``done`` (their done members left out).

    One ensemble per activation and setting; ``split_by_lr`` makes one per learning rate too (more,
    smaller jobs to balance the workers; a member's arithmetic does not depend on its ensemble).
    """
    chash = config_hash(config)
    config_json = json.dumps(config_to_dict(config), sort_keys=True)
    metadata_json = json.dumps(metadata, sort_keys=True)
    jobs = []
    for activation in config.activations:
        stochastic = is_stochastic(activation)
        keeps = (1.0,) if stochastic or config.task == "autoencode" else config.train.keep
        for keep in dict.fromkeys(keeps):
            setting = "" if config.task in ("autoencode", "cnn") else f"keep={float(keep)!r}"
            members = tuple(
                RunKey(
                    _run_id(experiment, chash, activation, setting, lr, seed),
                    experiment,
                    chash,
                    activation,
                    seed,
                    lr,
                    setting,
                )
                for lr in config.optim.lr
                for seed in range(config.train.seeds)
            )
            members = tuple(key for key in members if key.run_id not in done)
            if config.task == "cnn":
                groups = [(m,) for m in members]
            elif split_by_lr:
                lrs = dict.fromkeys(m.lr for m in members)
                groups = [tuple(m for m in members if m.lr == lr) for lr in lrs]
            else:
                groups = [members] if members else []
            for group in groups:
                run_ids = "\n".join(k.run_id for k in group)
                digest = hashlib.sha256(run_ids.encode()).hexdigest()[:12]
                stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{experiment}-{activation}-{setting}")
                jobs.append(
                    Job(
                        kind="cnn" if config.task == "cnn" else "mlp",
                        experiment=experiment,
                        config=config,
                        activation=activation,
                        setting=setting,
                        keep=keep,
                        members=group,
                        dataset=config.dataset,
                        data_dir=data_dir,
                        verify=verify,
                        out_dir=str(out_dir),
                        checkpoint_path=str(out_dir / "checkpoints" / f"{stem}-{digest}.pt"),
                        config_json=config_json,
                        metadata_json=metadata_json,
                        device=device,
                    )
                )
    return jobs


@functools.lru_cache(maxsize=2)
def load_dataset(name: str, data_dir: str | None, *, validation: bool = True, verify: bool = True):
    """``gelus.data.load``, cached: a worker running several jobs reads the files once."""
    from gelus.data import load

    return load(name, data_dir, validation=validation, verify=verify)


def run_job(job: Job, report: Report, store: RecordStore | None = None) -> None:
    """Run ``job`` to completion in this process, resuming from its checkpoint if there is one.

    Records go to ``store`` (anything with RecordStore's ``start_run``, ``add``, ``commit`` and
    ``finish_runs``), by default ``RecordStore(job.out_dir)``, opened and closed here.
    """
    owned = store is None
    if owned:
        store = RecordStore(job.out_dir)
    try:
        if job.kind == "mlp":
            from gelus.experiments.train_mlp import run_mlp_job

            data = load_dataset(
                job.dataset,
                job.data_dir,
                validation=job.config.train_on == "train",
                verify=job.verify,
            )
            run_mlp_job(job, data, store, lambda epoch: report(job.label, epoch, job.epochs))
        else:
            _run_cnn_job(job, store, report)
    finally:
        if owned:
            store.close()


def _run_cnn_job(job: Job, store: RecordStore, report: Report) -> None:
    from gelus.experiments.cnn import train_cnn_run

    (key,) = job.members
    data = load_dataset(job.dataset, job.data_dir, verify=job.verify)
    store.start_run(key, job.config_json, job.metadata_json)

    def log(epoch: int, split: str, metric: str, value: float) -> None:
        store.add(key, epoch, split, metric, value)
        store.commit()  # the CNN checkpoints after its logs: commit each one before that
        if split == "train" and metric == "seconds":
            report(job.label, epoch, job.epochs)

    report(job.label, 0, job.epochs)
    train_cnn_run(
        job.config.cnn,
        data,
        activation=job.activation,
        seed=key.seed,
        lr=key.lr,
        device=job.device,
        log=log,
        checkpoint_path=Path(job.checkpoint_path),
    )
    store.finish_runs([key.run_id])
    Path(job.checkpoint_path).unlink(missing_ok=True)


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


def _init_worker(threads: int, report_queue, parent_pid: int) -> None:
    global _report_queue
    _die_with_parent(parent_pid)
    import torch

    torch.set_num_threads(threads)
    _report_queue = report_queue


def _worker_run(job: Job) -> None:
    pid = os.getpid()
    run_job(job, lambda label, done, total: _report_queue.put((pid, label, done, total)))


class LocalExecutor:
    """``workers`` spawned processes with ``threads`` torch threads each; ``workers=0`` runs in this process."""

    def __init__(self, workers: int, threads: int = 1) -> None:
        self.workers = workers
        self.threads = threads

    def run(self, jobs: Sequence[Job], report: WorkerReport) -> None:
        if not jobs:
            return
        if self.workers == 0:
            import torch

            previous = torch.get_num_threads()
            torch.set_num_threads(self.threads)  # as in a worker (and identical arithmetic)
            try:
                for job in jobs:
                    run_job(job, lambda label, done, total: report(0, label, done, total))
            finally:
                torch.set_num_threads(previous)
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
        pool = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self.threads, report_queue, os.getpid()),
        )
        try:
            futures = [pool.submit(_worker_run, job) for job in jobs]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in finished:
                if future.exception() is not None:
                    raise future.exception()
            pool.shutdown(wait=True)
        except BaseException:
            # a failed job or Ctrl-C: stop every worker now rather than after its current job
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            stop.set()
            forwarder.join()
            # drain what is left so the bars end complete
            while True:
                try:
                    pid, label, done, total = report_queue.get_nowait()
                except (queue.Empty, OSError, ValueError):
                    break
                report(pid, label, done, total)
