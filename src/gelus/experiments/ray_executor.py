"""Run an experiment's jobs as Ray tasks, on this machine or on a Ray cluster with GPUs.

>>> executor = RayExecutor(address="auto")  # the cluster started with `ray start`  # doctest: +SKIP
>>> run_experiment("cifar100-wrn", out_dir="/shared/runs", device="cuda", executor=executor)  # doctest: +SKIP

Each job (one stacked MLP ensemble, or one CNN run) is one Ray task asking for ``threads`` CPUs, or
on CUDA for one CPU and a quarter of a GPU (``task_resources``: runs share a GPU). Ray retries a task whose worker process or node dies
(``max_retries``); the job resumes from its last checkpoint, as a second local ``gelus run`` would.
An exception raised by the job itself is a bug, not a lost machine: it is not retried but raised on
the driver, and the other tasks are cancelled.

Records: SQLite's WAL locking does not work across machines (network filesystems), so no task opens
``records.sqlite``. A ``RecordSink`` actor pinned to the driver's node owns the ``RecordStore``; a
task writes through a ``RemoteRecordStore`` whose ``commit`` is one blocking call to the sink, so an
epoch's records are stored before its checkpoint is written, as with the local executor. A retried
job re-logs the epochs since its checkpoint and the store ignores them (INSERT OR IGNORE).
Checkpoints stay files at ``job.checkpoint_path``: on a cluster the output directory (and the data)
must be at the same path on every node, e.g. on a shared filesystem (docs/CLUSTER.md).

Ray is an optional dependency (``pip install 'gelus[ray]'``), imported here only when used.
"""

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gelus.experiments.device import WORKERS_PER_GPU
from gelus.experiments.errors import SettingError
from gelus.experiments.plan import Job
from gelus.experiments.records import RecordStore, RunKey
from gelus.experiments.sweep import WorkerReport, run_job

__all__ = [
    "INSTALL_HINT",
    "RayExecutor",
    "RecordSink",
    "RemoteRecordStore",
    "import_ray",
    "run_gelus_job",
]

INSTALL_HINT = "--executor ray needs Ray: pip install 'gelus[ray]'"
_LOCAL_OBJECT_STORE_BYTES = 2**27  # tasks exchange configs and record rows only: 128 MiB is plenty


def import_ray() -> Any:
    """The ``ray`` module, or ``SettingError`` with the command that installs it."""
    try:
        import ray
    except ImportError:
        raise SettingError("", INSTALL_HINT) from None
    return ray


class RecordSink:
    """The single writer of ``out_dir/records.sqlite`` (a Ray actor on the driver's node), and the
    mailbox of the tasks' progress reports, which the driver collects with ``take_reports``.

    Every method is idempotent on the records (INSERT OR IGNORE; ``done`` stays ``done``), so a
    call repeated by a retried task or a restarted actor changes nothing.
    """

    def __init__(self, out_dir: str) -> None:
        self.store = RecordStore(out_dir)
        self.reports: list[tuple[int, str, int, int]] = []

    def start_run(self, key: RunKey, config_json: str, metadata_json: str) -> None:
        self.store.start_run(RunKey(*key), config_json, metadata_json)

    def write(self, rows: list[tuple[RunKey, int, str, str, float]]) -> None:
        """Store ``rows`` of (run key, epoch, split, metric, value) in one transaction."""
        for key, epoch, split, metric, value in rows:
            self.store.add(RunKey(*key), epoch, split, metric, value)
        self.store.commit()

    def finish_runs(self, run_ids: list[str], epochs: list[int] | None = None) -> None:
        self.store.finish_runs(run_ids, epochs)

    def fail_runs(self, run_ids: list[str]) -> None:
        self.store.fail_runs(run_ids)

    def report(self, worker: int, label: str, done: int, total: int) -> None:
        self.reports.append((worker, label, done, total))

    def take_reports(self) -> list[tuple[int, str, int, int]]:
        reports, self.reports = self.reports, []
        return reports

    def close(self) -> None:
        self.store.close()


class RemoteRecordStore:
    """``RecordStore``'s writing methods inside a Ray task, backed by a ``RecordSink`` actor.

    ``add`` buffers; ``commit`` sends the buffer in one call and returns once it is stored.
    """

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._pending: list[tuple[RunKey, int, str, str, float]] = []

    def start_run(self, key: RunKey, config_json: str, metadata_json: str) -> None:
        self._call(self.sink.start_run, key, config_json, metadata_json)

    def add(self, key: RunKey, epoch: int, split: str, metric: str, value: float) -> None:
        self._pending.append((key, int(epoch), split, metric, float(value)))

    def commit(self) -> None:
        if self._pending:
            self._call(self.sink.write, self._pending)
            self._pending = []

    def finish_runs(self, run_ids: Iterable[str], epochs: Iterable[int] | None = None) -> None:
        """Mark runs ``done`` after their last records are committed (with ``epochs``: only if
        every one of them is recorded)."""
        self.commit()
        self._call(self.sink.finish_runs, list(run_ids), None if epochs is None else list(epochs))

    def fail_runs(self, run_ids: Iterable[str]) -> None:
        """Mark the runs still ``running`` as ``failed`` (their job raised)."""
        self._call(self.sink.fail_runs, list(run_ids))

    def close(self) -> None:
        self.commit()

    @staticmethod
    def _call(method: Any, *args: Any) -> Any:
        import ray

        return ray.get(method.remote(*args))


def run_gelus_job(job: Job, sink: Any, threads: int) -> None:
    """The Ray task: run ``job`` with ``threads`` torch threads, its records and progress reports
    going to ``sink``. The task, and its worker's process title, are named
    ``gelus EXPERIMENT LABEL`` (``ray::gelus mnist-classification gelu keep=1.0 ×15``)."""
    import torch

    torch.set_num_threads(threads)
    worker = os.getpid()  # names the progress bar; pids may repeat across nodes (bars only)

    def report(label: str, done: int, total: int) -> None:
        sink.report.remote(worker, label, done, total)  # fire and forget: progress only

    run_job(job, report, store=RemoteRecordStore(sink))


def _absolute(job: Job) -> Job:
    """``job`` with absolute paths: a task's working directory is not the driver's on a cluster."""
    return dataclasses.replace(
        job,
        out_dir=str(Path(job.out_dir).resolve()),
        checkpoint_path=str(Path(job.checkpoint_path).resolve()),
        data_dir=None if job.data_dir is None else str(Path(job.data_dir).resolve()),
    )


def task_resources(job: Job, threads: int) -> dict[str, float]:
    """The Ray resources of one job's task: ``threads`` CPUs on the CPU; on CUDA one CPU and
    1 / ``WORKERS_PER_GPU`` of a GPU, so that as many runs share a GPU as the local executor puts
    on one (either engine: one of the paper's runs leaves most of a GPU idle). Ray gives each task
    its GPU through ``CUDA_VISIBLE_DEVICES``."""
    if job.device == "cuda":
        return {"num_cpus": 1, "num_gpus": 1 / WORKERS_PER_GPU}
    return {"num_cpus": threads, "num_gpus": 0}


class RayExecutor:
    """Runs jobs as Ray tasks: on a local Ray runtime (``address=None``) or a running cluster.

    ``address``: None starts a Ray runtime on this machine with ``num_cpus`` CPUs (default: all
    cores) and stops it after the run; "auto" joins the cluster that ``ray start`` set up on this
    machine; "HOST:PORT" another one. ``threads``: torch threads, and Ray CPUs, per task (a task on
    CUDA asks for one CPU and a share of a GPU, ``task_resources``). ``max_retries``: new attempts of a task whose worker or
    node died. Ray is imported here: without it, ``SettingError`` with the install command.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        threads: int = 1,
        max_retries: int = 3,
        poll_seconds: float = 0.5,
    ) -> None:
        self.ray = import_ray()
        if num_cpus is not None and address is not None:
            raise SettingError(
                "workers",
                "{workers} sets the CPUs of a local Ray runtime; with {address} the cluster's "
                "resources decide (size it with `ray start --num-cpus N`)",
            )
        if num_cpus is not None and num_cpus < 1:
            raise SettingError(
                "workers", f"{{workers}} {num_cpus}: the Ray executor needs at least 1"
            )
        if threads < 1:
            raise SettingError("threads", f"{{threads}} must be at least 1, got {threads}")
        if max_retries < 0:
            raise SettingError(
                "max_retries", f"{{max_retries}} must be 0 or more, got {max_retries}"
            )
        self.address = address
        self.num_cpus = num_cpus
        self.threads = threads
        self.max_retries = max_retries
        self.poll_seconds = poll_seconds
        self._started = False

    def connect(self) -> Any:
        """Start or join the Ray runtime (once); returns the ``ray`` module."""
        ray = self.ray
        if ray.is_initialized():
            return ray
        try:
            if self.address is None:
                ray.init(
                    num_cpus=None if self.num_cpus is None else self.num_cpus * self.threads,
                    include_dashboard=False,
                    object_store_memory=_LOCAL_OBJECT_STORE_BYTES,
                )
            else:
                ray.init(address=self.address)
        except ConnectionError as error:
            raise SettingError(
                "address",
                f"cannot reach a Ray cluster at {{address}} {self.address}: {error}; start one with "
                "`ray start --head` (docs/CLUSTER.md)",
            ) from None
        self._started = True
        return ray

    def shutdown(self) -> None:
        """Stop the Ray runtime if this executor started or joined it."""
        if self._started:
            self.ray.shutdown()
            self._started = False

    @property
    def workers(self) -> int:
        """How many tasks run at once on the cluster's CPUs (for planning the jobs)."""
        cpus = self.connect().cluster_resources().get("CPU", 1)
        return max(1, int(cpus) // self.threads)

    def resolve_device(self, device: str) -> str:
        """``device`` for the tasks: "auto" is "cuda" when the cluster has GPUs, else "cpu"."""
        gpus = self.connect().cluster_resources().get("GPU", 0)
        if device == "auto":
            return "cuda" if gpus else "cpu"
        if device == "cuda" and not gpus:
            raise SettingError(
                "device",
                "{device} cuda: the Ray cluster has no GPUs; start GPU nodes with "
                "`ray start --num-gpus N`, or use {device} auto or cpu",
            )
        return device

    def run(self, jobs: Sequence[Job], report: WorkerReport) -> None:
        """Run every job as a task; returns when all are done, raises the first failure."""
        try:
            if jobs:
                self._run(self.connect(), [_absolute(job) for job in jobs], report)
        finally:
            self.shutdown()

    def _run(self, ray: Any, jobs: list[Job], report: WorkerReport) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        driver_node = ray.get_runtime_context().get_node_id()
        sink_actor = ray.remote(RecordSink).options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(driver_node, soft=False),
            max_restarts=3,  # its calls are idempotent: a restarted sink may replay them
            max_task_retries=3,
        )
        sinks = {out_dir: sink_actor.remote(out_dir) for out_dir in {job.out_dir for job in jobs}}
        task = ray.remote(run_gelus_job)
        pending = {}
        for job in jobs:
            options = task_resources(job, self.threads) | {
                "max_retries": self.max_retries,
                "retry_exceptions": False,  # an exception in the job is a bug: surface it
                "name": f"gelus {job.experiment} {job.label}",
            }
            pending[task.options(**options).remote(job, sinks[job.out_dir], self.threads)] = job
        try:
            while pending:
                ready, _ = ray.wait(
                    list(pending), num_returns=len(pending), timeout=self.poll_seconds
                )
                self._forward(ray, sinks.values(), report)
                for ref in ready:
                    job = pending.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayTaskError:
                        raise  # the job's own exception (an instance of its class too)
                    except ray.exceptions.RayError as error:
                        raise RuntimeError(
                            f"{job.experiment} {job.label}: the task failed "
                            f"{self.max_retries + 1} times ({type(error).__name__}: {error}); "
                            "its records so far are kept: run the same command again to resume"
                        ) from error
            self._forward(ray, sinks.values(), report)  # the last reports: the bars end complete
            ray.get([sink.close.remote() for sink in sinks.values()])
        except BaseException:
            for ref in pending:  # a failure or Ctrl-C: stop the other tasks now
                ray.cancel(ref, force=True)
            raise
        finally:
            for sink in sinks.values():
                ray.kill(sink)

    @staticmethod
    def _forward(ray: Any, sinks: Iterable[Any], report: WorkerReport) -> None:
        for reports in ray.get([sink.take_reports.remote() for sink in sinks]):
            for worker, label, done, total in reports:
                report(worker, label, done, total)
