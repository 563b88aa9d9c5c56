"""The engine protocol is all the harness needs: a toy engine, registered from its own module,
goes through `gelus run` (its config validated), the local executor, a kill -9 and its resume, Ray
and the budget with nothing else; every preset keeps its hash."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gelus.cli import main
from gelus.experiments import PRESETS, Preset, read_records, read_runs
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.budget import Workload, price
from gelus.experiments.config import apply_overrides, config_hash, config_keys, plugin_for
from gelus.experiments.plan import plan_jobs
from gelus.experiments.sweep import LocalExecutor
from test_run import write_tiny_mnist
from toy_engine import ToyConfig, ToyPlugin

TESTS = Path(__file__).resolve().parent
# the hashes before the configs were split per engine: old run folders must keep resuming
PRESET_HASHES = {
    "mnist-classification": ("3703fe21c3b1", "344a18fe68d8"),
    "mnist-noise": ("b4d4c973aff0", "22aee22aee1b"),
    "mnist-autoencoder": ("7785a7692b3f", "0bd6951c43c7"),
    "twitter-pos": ("5d27bac406ef", "e11a533b6a52"),
    "timit": ("fb0b86484e28", "4acf1d4b391a"),
    "cifar10-allconv": ("cfefc1db9b33", "4efa7d0aa972"),
    "cifar100-wrn": ("6e573727be23", "a7f5cf256854"),
    "stochastic-gelu": ("3703fe21c3b1", "344a18fe68d8"),
    "transformer-lm": ("155473b5c989", "66ec2e549992"),  # the transformer engine's own shape
    "transformer-vit": ("ac03997086c1", "0b5b6e2330af"),
    "transformer-scale": ("c3263ac43bcd", "64f4d6f0f6f8"),  # its d 128 point: the others are axes
}


def test_every_preset_keeps_its_config_hash():
    hashes = {
        name: (config_hash(p.config), config_hash(apply_overrides(p.config, p.quick)))
        for name, p in PRESETS.items()
    }
    assert hashes == PRESET_HASHES


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist")
    return root


@pytest.fixture
def toy_preset(monkeypatch):
    """The toy as a preset, as a user's own experiment would be added (no harness module edited)."""
    preset = Preset("toy", "least squares by SGD", "a test", ToyConfig(), {}, "none", {})
    monkeypatch.setitem(PRESETS, "toy", preset)
    return preset


def _gelus_run(data_dir, out, *extra) -> int:
    argv = ["run", "toy", "--data-dir", str(data_dir), "--no-verify", "--workers", "0"]
    return main([*argv, "--out", str(out), "--epochs", "2", *extra])


def test_the_toy_config_holds_only_its_own_keys():
    assert config_keys(ToyConfig()) == [
        "task", "dataset", "activations", "model.approximate", "model.width", "optim.lr",
        "train.epochs", "train.seeds", "train.batch_size",
    ]  # fmt: skip
    assert isinstance(plugin_for(ToyConfig()), ToyPlugin)


def test_gelus_run_trains_the_toy_engine(data_dir, tmp_path, toy_preset, capsys):
    assert _gelus_run(data_dir, tmp_path / "out") == 0
    runs = read_runs(tmp_path / "out")
    assert len(runs) == 2 * 2 * 2 and {run.status for run in runs} == {
        "done"
    }  # 2 acts × lrs × seeds
    assert {json.loads(run.metadata_json)["train_size"] for run in runs} == {300}  # the train split
    values = _values(tmp_path / "out")
    assert {key[1] for key in values} == {1, 2}  # no epoch 0: the toy does not evaluate before
    assert {key[2] for key in values} == {"train", "val", "test"}  # a validation split kept apart
    assert all(math.isfinite(v) for v in values.values())
    loading, planned, summary = capsys.readouterr().out.split("\n", 2)
    assert loading.startswith("toy: loading mnist from ") and planned.startswith("toy: 8 runs ")
    assert summary.startswith("toy: test loss, median") and "relu" in summary and "gelu" in summary


def test_gelus_run_validates_the_toy_config_by_its_own_checks(
    data_dir, tmp_path, toy_preset, capsys
):
    assert _gelus_run(data_dir, tmp_path / "a", "--set", "model.width=0") == 2
    assert "model.width: invalid value; expected at least 1" in capsys.readouterr().err
    assert _gelus_run(data_dir, tmp_path / "b", "--set", "train.keep=0.5") == 2  # an MLP key
    err = capsys.readouterr().err
    assert "unknown config key 'train.keep'" in err and "model.width" in err
    assert _gelus_run(data_dir, tmp_path / "c", "--set", "task=classify") == 2  # another engine's
    assert "task: invalid value; expected one of toy" in capsys.readouterr().err
    assert not (tmp_path / "a" / "records.sqlite").exists()  # refused before anything is written


def _jobs(out_dir, data_dir):
    config = ToyConfig()
    return plan_jobs(
        "toy", config, resolve_activations(config.activations), train_size=250,
        out_dir=out_dir, data_dir=str(data_dir), verify=False,
    )  # fmt: skip


def _values(out_dir):
    return {
        (r.run_id, r.epoch, r.split, r.metric): r.value
        for r in read_records(out_dir)
        if r.metric != "seconds"
    }


def test_the_toy_engine_runs_through_the_local_executor(data_dir, tmp_path):
    jobs = _jobs(tmp_path / "out", data_dir)
    assert [len(job.members) for job in jobs] == [4, 4]  # 2 lrs × 2 seeds per activation
    LocalExecutor(workers=0).run(jobs, lambda *report: None)
    runs = read_runs(tmp_path / "out")
    assert len(runs) == 8 and {run.status for run in runs} == {"done"}
    values = _values(tmp_path / "out")
    assert {key[1] for key in values} == {1, 2, 3, 4}
    assert len(values) == 8 * 4 * 3 and all(math.isfinite(v) for v in values.values())
    assert not list((tmp_path / "out" / "checkpoints").glob("*.pt"))  # removed when done


_KILLED_RUN = """
import sys, time
sys.path[:0] = {paths!r}
import toy_engine
original = toy_engine.ToyEngine.train_epoch
def slow(self, epoch):
    time.sleep(0.4)
    original(self, epoch)
toy_engine.ToyEngine.train_epoch = slow
from test_engine_protocol import _jobs
from gelus.experiments.sweep import LocalExecutor
LocalExecutor(workers=1).run(_jobs({out!r}, {data!r}), lambda *report: None)
"""


def test_kill_9_then_resume_equals_an_uninterrupted_run(data_dir, tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    LocalExecutor(workers=0).run(_jobs(clean, data_dir), lambda *report: None)
    src = str(Path(__import__("gelus").__file__).resolve().parents[1])
    script = _KILLED_RUN.format(paths=[str(TESTS), src], out=str(killed), data=str(data_dir))
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if (killed / "records.sqlite").exists() and any(key[1] >= 2 for key in _values(killed)):
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the driver and its worker, mid-job
    process.wait()
    assert {run.status for run in read_runs(killed)} != {"done"}
    LocalExecutor(workers=0).run(_jobs(killed, data_dir), lambda *report: None)
    assert _values(killed) == _values(clean)
    assert {run.status for run in read_runs(killed)} == {"done"}


def test_the_budget_prices_the_toy_engine_from_its_protocol(data_dir, tmp_path):
    config = ToyConfig()
    jobs = tuple(_jobs(tmp_path, data_dir))
    work = Workload("toy", config, jobs, steps=250 // 20, eval_samples=400,
                    sample_shape=(1, 28, 28), num_classes=10)  # fmt: skip
    cost = price(work, "cpu", repeats=1)
    assert cost.step_seconds > 0 and cost.eval_seconds_per_sample > 0
    assert math.isfinite(cost.seconds(2)) and cost.seconds(2) <= cost.seconds(1)


def test_ray_runs_the_toy_engine_like_the_local_executor(data_dir, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (gelus[ray])")
    from gelus.experiments.ray_executor import RayExecutor

    src = str(Path(__import__("gelus").__file__).resolve().parents[1])
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), src])}
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=2**27,
             runtime_env={"env_vars": env})  # fmt: skip
    try:
        RayExecutor().run(_jobs(tmp_path / "ray", data_dir), lambda *report: None)
    finally:
        ray.shutdown()
    LocalExecutor(workers=0).run(_jobs(tmp_path / "local", data_dir), lambda *report: None)
    assert _values(tmp_path / "ray") == _values(tmp_path / "local")
