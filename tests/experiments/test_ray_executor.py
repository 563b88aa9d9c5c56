"""The Ray executor on a real local Ray runtime (2 CPUs), and device / autocast handling on the CPU.

The sweep test SIGKILLs the Ray worker running one job mid-way: Ray retries the task, the job
resumes from its checkpoint, and the records equal those of an uninterrupted local run.
"""

import dataclasses
import os
import signal
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from _data_fixtures import cifar100_binary_members, write_mnist, write_tar
from gelus.cli import main as gelus_main
from gelus.data import DatasetNotFoundError
from gelus.experiments import plan, read_records, read_runs, run_experiment
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.device import WORKERS_PER_GPU
from gelus.experiments.engines.cnn import engine as cnn
from gelus.experiments.errors import SettingError
from gelus.experiments.ray_executor import (
    INSTALL_HINT,
    RayExecutor,
    RecordSink,
    RemoteRecordStore,
    task_resources,
)
from gelus.experiments.records import RunKey
from gelus.experiments.run import resolve_config, resolve_device

ray = pytest.importorskip(
    "ray", reason="the Ray executor's tests need Ray: pip install 'gelus[ray]'"
)

EPOCHS = 16  # a wide window (epochs 4-15) to catch a job mid-way on a fast machine
SWEEP = {
    "activations": ["gelu", "relu"],
    "seeds": 2,
    "epochs": EPOCHS,
    "overrides": [
        "model.hidden=64,64",
        "train.batch_size=50",
        "train.eval_batch_size=2500",
        "optim.lr=1e-3",
        "train.keep=1.0",
        "train.checkpoint_every=3",
    ],
}
TINY_WRN = [
    "cnn.blocks_per_stage=1",
    "cnn.widths=4,4,8,8",
    "train.batch_size=16",
    "cnn.retrain_full=false",
    "cnn.train_eval_size=32",
    "cnn.eval_batch_size=64",
]


@pytest.fixture(scope="module")
def ray_runtime():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=2**27)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_mnist(root / "mnist", n_train=5000 + 1500, n_test=500)  # the last 5,000 are val
    members, _ = cifar100_binary_members(n_train=5000 + 96, n_test=32)  # the last 5,000: val
    (root / "cifar100").mkdir()
    write_tar(root / "cifar100" / "cifar-100-binary.tar.gz", members)
    return root


def _without_seconds(records):
    return [r for r in records if r.metric != "seconds"]


def _max_epoch(database: Path, activation: str) -> int | None:
    with sqlite3.connect(database, timeout=5) as connection:
        query = "SELECT MAX(epoch) FROM records WHERE activation = ?"
        return connection.execute(query, (activation,)).fetchone()[0]


class RecordingRayExecutor(RayExecutor):
    """A RayExecutor that also keeps every progress report (worker pid, label, done, total)."""

    def __init__(self, reports: list, **kwargs) -> None:
        super().__init__(**kwargs)
        self.reports = reports

    def run(self, jobs, report) -> None:
        def record(*args) -> None:
            self.reports.append(args)
            report(*args)

        super().run(jobs, record)


def test_killed_worker_is_retried_and_records_equal_an_uninterrupted_run(
    ray_runtime, data_dir, tmp_path
):
    reports: list[tuple[int, str, int, int]] = []
    executor = RecordingRayExecutor(reports, poll_seconds=0.05)
    out = tmp_path / "ray"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            run_experiment,
            "mnist-classification",
            out_dir=out,
            data_dir=data_dir,
            verify=False,
            executor=executor,
            **SWEEP,
        )
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline and not running.done():
            # past the first checkpoint (epoch 3), before the last epoch
            victim = next((r for r in list(reports) if 4 <= r[2] < r[3]), None)
            time.sleep(0.01)
        assert victim is not None, "no job was caught mid-way"
        worker, label, _, _ = victim
        if Path("/proc").is_dir():
            title = Path(f"/proc/{worker}/cmdline").read_bytes()
            assert title.startswith(f"ray::gelus mnist-classification {label}".encode()), title
        activation = label.split()[0]
        os.kill(worker, signal.SIGKILL)
        assert _max_epoch(out / "records.sqlite", activation) < EPOCHS
        running.result(timeout=300)

    retried = [r for r in reports if r[1] == label and r[0] != worker]
    assert retried, "the killed job was not run again"
    assert 3 <= retried[0][2] < EPOCHS  # the retry resumed from a checkpoint, not from epoch 0
    assert retried[-1][2:] == (EPOCHS, EPOCHS)

    run_experiment(
        "mnist-classification",
        out_dir=tmp_path / "reference",
        data_dir=data_dir,
        workers=0,
        verify=False,
        **SWEEP,
    )
    resumed, reference = read_records(out), read_records(tmp_path / "reference")
    keys = [(r.run_id, r.epoch, r.split, r.metric) for r in resumed]
    assert len(keys) == len(set(keys))
    assert len(resumed) == len(reference) == 2 * 2 * (6 + EPOCHS * 7)
    assert _without_seconds(resumed) == _without_seconds(reference)
    runs = read_runs(out)
    assert len(runs) == 4 and {r.status for r in runs} == {"done"}
    assert {r.metadata["threads"] for r in runs} == {1}
    assert not list((out / "checkpoints").glob("*.pt"))


def test_cnn_through_ray_with_bf16_autocast_matches_a_local_run(
    ray_runtime, data_dir, tmp_path, monkeypatch
):
    argv = [
        "run", "cifar100-wrn", "--activations", "gelu", "--seeds", "1", "--epochs", "1",
        "--data-dir", str(data_dir), "--no-verify", "--amp", "bf16",
    ]  # fmt: skip
    for setting in TINY_WRN:
        argv += ["--set", setting]
    assert gelus_main([*argv, "--executor", "ray", "--out", str(tmp_path / "ray")]) == 0
    assert ray.is_initialized()  # a runtime the executor did not start is left running

    pinned, logit_dtypes = [], set()
    build_cnn = cnn.build_cnn

    def hooked(*args):
        model = build_cnn(*args)
        model.register_forward_hook(lambda module, inputs, output: logit_dtypes.add(output.dtype))
        return model

    monkeypatch.setattr(cnn, "build_cnn", hooked)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a: pinned.append(1) or self)
    assert gelus_main([*argv, "--workers", "0", "--out", str(tmp_path / "local")]) == 0
    assert logit_dtypes == {torch.bfloat16}  # --amp bf16 reached the network
    assert not pinned  # pinned host memory only for copies to CUDA

    on_ray, local = read_records(tmp_path / "ray"), read_records(tmp_path / "local")
    assert {r.epoch for r in on_ray} == {1}
    assert _without_seconds(on_ray) == _without_seconds(local)
    (run,) = read_runs(tmp_path / "ray")
    assert run.status == "done" and run.config["cnn"]["amp_dtype"] == "bf16"
    assert run.metadata["device"] == "cpu"  # --device auto on a machine without a GPU


def test_job_exception_is_raised_on_the_driver_with_its_type(ray_runtime, tmp_path):
    _, config, _ = resolve_config(
        "mnist-classification", seeds=1, epochs=1, overrides=["optim.lr=1e-3", "train.keep=1"]
    )
    jobs = plan.plan_jobs(
        "mnist-classification",
        config,
        resolve_activations(config.activations, config.model.approximate),
        train_size=1000,
        out_dir=tmp_path / "out",
        data_dir=str(tmp_path / "no-data"),
        verify=False,
        metadata={},
        done=set(),
    )
    with pytest.raises(DatasetNotFoundError, match="no files found"):
        RayExecutor().run(jobs, lambda *report: None)
    assert read_records(tmp_path / "out") == []


def test_remote_store_buffers_until_commit_and_never_duplicates(ray_runtime, tmp_path):
    sink = ray.remote(RecordSink).remote(str(tmp_path))
    store = RemoteRecordStore(sink)
    key = RunKey("exp/h/gelu/-/lr=0.001/seed=0", "exp", "h", "gelu", 0, 1e-3, "")
    store.start_run(key, "{}", "{}")
    store.add(key, 1, "train", "loss", 0.5)
    store.add(key, 1, "test", "error", 0.25)
    assert read_records(tmp_path) == []  # buffered
    store.commit()
    first = read_records(tmp_path)
    assert [(r.epoch, r.split, r.metric, r.value) for r in first] == [
        (1, "test", "error", 0.25),
        (1, "train", "loss", 0.5),
    ]
    store.add(key, 1, "train", "loss", 9.0)  # a re-logged epoch: ignored, the first value stays
    store.add(key, 2, "train", "loss", 0.4)
    assert read_runs(tmp_path)[0].status == "running"
    store.finish_runs([key.run_id])  # commits first
    assert [r.value for r in read_records(tmp_path)] == [0.25, 0.5, 0.4]
    assert read_runs(tmp_path)[0].status == "done"
    sink.report.remote(7, "gelu ×1", 2, 2)
    assert ray.get(sink.take_reports.remote()) == [(7, "gelu ×1", 2, 2)]
    assert ray.get(sink.take_reports.remote()) == []
    ray.kill(sink)


def test_ray_executor_resolves_devices_from_the_cluster(ray_runtime):
    executor = RayExecutor()
    assert executor.workers == 2
    assert executor.resolve_device("auto") == "cpu"
    with pytest.raises(SettingError, match="no GPUs"):
        executor.resolve_device("cuda")


def test_without_ray_the_flag_fails_before_any_work(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out"
    argv = ["run", "mnist-classification", "--executor", "ray", "--out", str(out)]
    assert gelus_main(argv) == 2
    assert INSTALL_HINT in capsys.readouterr().err
    assert INSTALL_HINT == "--executor ray needs Ray: pip install 'gelus[ray]'"
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--address", "auto"], "--address needs --executor ray"),
        (["--executor", "ray", "--address", "auto", "--workers", "2"], "--workers sets the CPUs"),
        (["--executor", "ray", "--max-retries", "-1"], "--max-retries"),
        (["--amp", "bf16"], "--amp applies to the CNN experiments (cifar10-allconv, cifar100-wrn)"),
    ],
)
def test_cli_executor_and_amp_errors(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert gelus_main(["run", "mnist-classification", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_device_resolution(monkeypatch):
    _, mlp, _ = resolve_config("mnist-classification")
    _, cnn, _ = resolve_config("cifar100-wrn")
    _, fp16, _ = resolve_config("cifar100-wrn", overrides=["cnn.amp_dtype=fp16"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto", cnn) == "cpu"
    assert resolve_device("auto", mlp) == "cpu"
    for config in (mlp, cnn):  # both engines train where --device says
        with pytest.raises(SettingError, match="no CUDA device"):
            resolve_device("cuda", config)
    with pytest.raises(SettingError, match="valid devices: auto, cpu, cuda"):
        resolve_device("gpu", cnn)
    with pytest.raises(SettingError, match="amp bf16 on the CPU"):
        resolve_device("cpu", fp16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto", cnn) == "cuda"
    assert resolve_device("auto", mlp) == "cuda"
    assert resolve_device("auto", fp16) == "cuda"


@pytest.mark.parametrize("experiment", ["mnist-classification", "cifar100-wrn"])
def test_tasks_on_cuda_share_a_gpu_and_tasks_on_cpu_take_their_threads(experiment, tmp_path):
    _, config, _ = resolve_config(experiment, quick=True)
    jobs = plan.plan_jobs(
        experiment,
        config,
        resolve_activations(config.activations, config.model.approximate),
        train_size=1000, out_dir=tmp_path, data_dir=None, verify=False, metadata={},
        done=set(), device="cuda",
    )  # fmt: skip
    assert task_resources(jobs[0], threads=3) == {"num_cpus": 1, "num_gpus": 1 / WORKERS_PER_GPU}
    on_cpu = dataclasses.replace(jobs[0], device="cpu")
    assert task_resources(on_cpu, threads=3) == {"num_cpus": 3, "num_gpus": 0}
