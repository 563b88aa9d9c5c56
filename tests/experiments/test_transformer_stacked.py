"""The stacked transformer engines (language model and ViT): each member equals its run trained
alone, a checkpoint resumes it bit for bit (through a kill -9 too), ``train.stack`` picks it per
device without moving a config hash, and a stacked sweep writes the records an unstacked one
writes, locally and on Ray."""

import dataclasses
import math

import pytest
import torch

from gelus.data.text import load_text_file
from gelus.experiments import PRESETS, read_records, read_runs
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.config import apply_overrides, config_hash, validate
from gelus.experiments.engines.transformer.config import TransformerExperimentConfig
from gelus.experiments.engines.transformer.engine import TransformerEngine
from gelus.experiments.engines.transformer.stacked import StackedTransformerEngine
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import plan_jobs, train_size
from text_corpus import write_corpus

TINY = (
    "model.d_model=16", "model.layers=2", "model.heads=2", "model.context=16",
    "train.epochs=2", "train.steps_per_epoch=3", "train.batch_size=4", "train.seeds=3",
    "optim.lr=3e-3,1e-2", "train.eval_bytes=2048",
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def data(corpus):
    return load_text_file(corpus / "text" / "corpus.txt")


CPU = torch.device("cpu")


def _config(*overrides: str) -> TransformerExperimentConfig:
    config = apply_overrides(TransformerExperimentConfig(), [*TINY, *overrides])
    validate(config)
    return config


def _jobs(config, activation: str, stack: str, out_dir="unused", device="cpu"):
    config = dataclasses.replace(
        config,
        activations=(activation,),
        train=dataclasses.replace(config.train, stack=stack),
    )
    return plan_jobs(
        "t", config, resolve_activations(config.activations), train_size=train_size(config, 0, 0),
        out_dir=out_dir, device=device,
    )  # fmt: skip


def _stacked(config, activation: str, data, out_dir="unused") -> StackedTransformerEngine:
    (job,) = _jobs(config, activation, "on", out_dir)
    return StackedTransformerEngine(job, data, CPU)


def _log_to(records: dict):
    return lambda key, epoch, split, metric, value: records.__setitem__(
        (key.run_id, epoch, split, metric), value
    )


def _train(engine, epochs, records: dict) -> None:
    for epoch in epochs:
        engine.train_epoch(epoch)
        engine.evaluate(epoch, _log_to(records))


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_each_member_equals_its_run_trained_alone(data, activation):
    config = _config()
    stacked, together = _stacked(config, activation, data), {}
    assert len(stacked.members) == 3 * 2  # seeds × lrs, each with its own lr schedule
    _train(stacked, (1, 2), together)
    alone = {}
    for job in _jobs(config, activation, "off"):
        single = TransformerEngine(job, data, CPU)
        _train(single, (1, 2), alone)
        (member,) = [m for m in stacked.members if m.key == job.members[0]]
        for (name, a), b in zip(
            single.model.named_parameters(), member.model.parameters(), strict=True
        ):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    assert together.keys() == alone.keys()  # the same metrics, splits and epochs per run
    logged = {key[2:] for key in together}
    assert {("train", "trivial_loss"), ("test", "bpb"), ("model", "parameters")} <= logged
    for key, value in alone.items():
        assert math.isclose(together[key], value, rel_tol=1e-5), key


def test_a_checkpoint_mid_run_resumes_bit_identically_through_the_driver(data, tmp_path):
    from gelus.experiments.checkpoint import save_checkpoint
    from gelus.experiments.driver import _resume

    config = _config()
    straight, first = _stacked(config, "swiglu", data), _stacked(config, "swiglu", data)
    records_a, records_b = {}, {}
    _train(straight, (1, 2), records_a)
    _train(first, (1,), records_b)
    (job,) = _jobs(config, "swiglu", "on", tmp_path)
    path = tmp_path / "run.pt"
    job = dataclasses.replace(job, checkpoint_path=str(path))
    save_checkpoint(path, {"run_ids": job.run_ids, "epoch": 1, "seconds": 1.0,
                           "engine": first.state()})  # fmt: skip
    resumed = _stacked(config, "swiglu", data)
    assert _resume(job, resumed, path) == (1, 1.0)  # it fits the fresh engine and loads
    _train(resumed, (2,), records_b)
    assert records_a == records_b
    for a, b in zip(straight.members, resumed.members, strict=True):
        assert a.step == b.step == 6
        assert torch.equal(a.order.get_state(), b.order.get_state())
        for (name, x), y in zip(
            a.model.state_dict().items(), b.model.state_dict().values(), strict=True
        ):
            assert torch.equal(x, y), name


def test_a_members_checkpoint_is_its_single_runs(data):
    from gelus.experiments.engine import state_mismatch

    config = _config()
    single = TransformerEngine(_jobs(config, "gelu", "off")[0], data, CPU)
    single.train_epoch(1)
    stacked = _stacked(config, "gelu", data)
    stacked.train_epoch(1)
    assert state_mismatch(single.state(), stacked.state()["members"][0]) is None


def test_stack_is_chosen_per_device_and_moves_no_config_hash():
    preset = PRESETS["transformer-lm"].config
    for stack in ("auto", "on", "off"):
        changed = apply_overrides(preset, [f"train.stack={stack}"])
        assert config_hash(changed) == config_hash(preset)
    specs = resolve_activations(["gelu", "swiglu"])
    n = train_size(preset, 0, 0)

    def engines(config, device):
        jobs = plan_jobs("t", config, specs, train_size=n, out_dir="x", device=device)
        return [(job.engine, len(job.members)) for job in jobs]

    runs = preset.train.seeds * len(preset.optim.lr)
    assert engines(preset, "cpu") == [("transformer", 1)] * 2 * runs  # auto: one model per job
    assert engines(preset, "cuda") == [("transformer-stacked", runs)] * 2
    on = apply_overrides(preset, ["train.stack=on"])
    assert engines(on, "cpu") == [("transformer-stacked", runs)] * 2
    off = apply_overrides(preset, ["train.stack=off"])
    assert engines(off, "cuda") == [("transformer", 1)] * 2 * runs
    gpt2 = apply_overrides(preset, ["model.d_model=768", "model.layers=12", "model.heads=12",
                                    "model.context=1024"])  # fmt: skip
    assert engines(gpt2, "cuda") == [("transformer", 1)] * 2 * runs  # a GPU's worth each
    with pytest.raises(ConfigError, match=r"train\.stack"):
        validate(apply_overrides(preset, ["train.stack=yes"]))


def test_a_stacked_sweep_writes_the_records_of_an_unstacked_one(corpus, tmp_path):
    from gelus.experiments.runner import run_experiment

    def sweep(stack: str):
        out = run_experiment(
            "transformer-lm", out_dir=tmp_path / stack, activations=["gelu", "swiglu"], seeds=2,
            overrides=[*TINY[:-3], f"train.stack={stack}"], quick=True, workers=0,
            data_dir=corpus, dataset="text", verify=False, device="cpu",
        )  # fmt: skip
        assert {run.status for run in read_runs(out)} == {"done"}
        assert not list((out / "checkpoints").glob("*.pt"))
        return {
            (r.run_id, r.epoch, r.split, r.metric): r.value
            for r in read_records(out)
            if r.metric != "seconds"
        }

    stacked, alone = sweep("on"), sweep("off")
    assert stacked.keys() == alone.keys() and len({key[0] for key in stacked}) == 4
    for key, value in alone.items():
        assert math.isclose(stacked[key], value, rel_tol=1e-5), key


def _sweep_jobs(out_dir, data_dir):
    """The stacked jobs of a tiny sweep (2 activations × 2 seeds × 2 lrs) over the text corpus."""
    config = _config("train.epochs=5", "train.seeds=2", "train.stack=on", "activations=gelu,swiglu")
    config = dataclasses.replace(config, dataset="text")
    return plan_jobs(
        "transformer-lm", config, resolve_activations(config.activations),
        train_size=train_size(config, 0, 0), out_dir=out_dir, data_dir=str(data_dir),
        verify=False,
    )  # fmt: skip


def _values(out_dir):
    return {
        (r.run_id, r.epoch, r.split, r.metric): r.value
        for r in read_records(out_dir)
        if r.metric != "seconds"
    }


_KILLED_RUN = """
import sys, time
sys.path[:0] = {paths!r}
from gelus.experiments.engines.transformer.stacked import StackedTransformerEngine as Engine
original = Engine.train_epoch
def slow(self, epoch):
    time.sleep(0.4)
    original(self, epoch)
Engine.train_epoch = slow
from test_transformer_stacked import _sweep_jobs
from gelus.experiments.sweep import LocalExecutor
LocalExecutor(workers=1).run(_sweep_jobs({out!r}, {data!r}), lambda *report: None)
"""


@pytest.mark.slow
def test_kill_9_then_resume_equals_an_uninterrupted_stacked_sweep(corpus, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from gelus.experiments.sweep import LocalExecutor

    clean, killed = tmp_path / "clean", tmp_path / "killed"
    jobs = _sweep_jobs(clean, corpus)
    assert [(job.engine, len(job.members)) for job in jobs] == [("transformer-stacked", 4)] * 2
    LocalExecutor(workers=0).run(jobs, lambda *report: None)
    tests = str(Path(__file__).resolve().parent)
    src = str(Path(__import__("gelus").__file__).resolve().parents[1])
    script = _KILLED_RUN.format(paths=[tests, src], out=str(killed), data=str(corpus))
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        if (killed / "records.sqlite").exists() and any(key[1] >= 2 for key in _values(killed)):
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the driver and its worker, mid-job
    process.wait()
    assert {run.status for run in read_runs(killed)} != {"done"}
    LocalExecutor(workers=0).run(_sweep_jobs(killed, corpus), lambda *report: None)
    assert _values(killed) == _values(clean)
    assert {run.status for run in read_runs(killed)} == {"done"}


@pytest.mark.slow
def test_ray_runs_the_stacked_jobs_like_the_local_executor(corpus, tmp_path):
    import os
    from pathlib import Path

    ray = pytest.importorskip("ray", reason="Ray is an optional extra (gelus[ray])")
    from gelus.experiments.ray_executor import RayExecutor
    from gelus.experiments.sweep import LocalExecutor

    LocalExecutor(workers=0).run(_sweep_jobs(tmp_path / "local", corpus), lambda *report: None)
    tests = str(Path(__file__).resolve().parent)
    src = str(Path(__import__("gelus").__file__).resolve().parents[1])
    env = {"PYTHONPATH": os.pathsep.join([tests, src])}
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=2**27,
             runtime_env={"env_vars": env})  # fmt: skip
    try:
        RayExecutor().run(_sweep_jobs(tmp_path / "ray", corpus), lambda *report: None)
    finally:
        ray.shutdown()
    local, remote = _values(tmp_path / "local"), _values(tmp_path / "ray")
    assert local.keys() == remote.keys()
    for key, value in local.items():
        assert math.isclose(remote[key], value, rel_tol=1e-5), key
    assert {run.status for run in read_runs(tmp_path / "ray")} == {"done"}


def test_the_transformer_bench_times_a_stacked_row_per_member_step(tmp_path):
    import argparse
    import json

    from gelus.bench.transformer import add_arguments, main

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args([
        "--activations", "gelu", "--d-model", "16", "--layers", "1", "--heads", "2",
        "--context", "16", "--batch", "2", "--steps", "1", "--rounds", "1", "--stack", "3",
        "--json", str(out),
    ])  # fmt: skip
    assert main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"plain loop (F.gelu)", "engine gelu", "stacked ×3 gelu"}
    stacked = rows["stacked ×3 gelu"]
    assert math.isfinite(stacked["seconds_per_step"]) and stacked["of_bmm_rate"] > 0
    assert stacked["model_flops_per_second"] * stacked["seconds_per_step"] == pytest.approx(
        rows["engine gelu"]["model_flops_per_second"] * rows["engine gelu"]["seconds_per_step"]
    )  # a member-step does a one-run step's arithmetic


VIT = (
    "model.d_model=16", "model.layers=1", "model.heads=2", "model.patch=7",
    "train.epochs=2", "train.batch_size=50", "train.seeds=2", "optim.lr=3e-3,1e-2",
    "train.train_subset=200", "train.eval_batch_size=100",
)  # fmt: skip


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from gelus.experiments.datasets import load_dataset
    from test_run import write_tiny_mnist

    root = tmp_path_factory.mktemp("images")
    write_tiny_mnist(root / "fashion-mnist")
    return root, load_dataset("fashion-mnist", str(root), verify=False)


def _vit_jobs(activation: str, stack: str, data, device="cpu"):
    from gelus.experiments.engines.vit.config import ViTExperimentConfig

    config = apply_overrides(ViTExperimentConfig(), [*VIT, f"activations={activation}",
                                                     f"train.stack={stack}"])  # fmt: skip
    validate(config)
    n = train_size(config, len(data.train), len(data.val))
    return plan_jobs("v", config, resolve_activations(config.activations), train_size=n,
                     out_dir="unused", device=device)  # fmt: skip


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_each_vit_member_equals_its_run_trained_alone(images, activation):
    from gelus.experiments.engines.vit.engine import ViTEngine
    from gelus.experiments.engines.vit.stacked import StackedViTEngine

    _, data = images
    (job,) = _vit_jobs(activation, "on", data)
    assert job.engine == "vit-stacked" and len(job.members) == 2 * 2
    stacked, together, alone = StackedViTEngine(job, data, CPU), {}, {}
    _train(stacked, (1, 2), together)
    for single_job in _vit_jobs(activation, "off", data):
        single = ViTEngine(single_job, data, CPU)
        _train(single, (1, 2), alone)
        (member,) = [m for m in stacked.members if m.key == single_job.members[0]]
        for (name, a), b in zip(
            single.model.named_parameters(), member.model.parameters(), strict=True
        ):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    assert together.keys() == alone.keys()
    for key, value in alone.items():
        assert math.isclose(together[key], value, rel_tol=1e-5, abs_tol=1e-9), key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_each_vit_member_equals_its_run_trained_alone_there(images):
    # The ViT's attention is not causal: another SDPA call under vmap than the language model's.
    from gelus.experiments.engines.vit.engine import ViTEngine
    from gelus.experiments.engines.vit.stacked import StackedViTEngine

    _, data = images
    cuda = torch.device("cuda")
    (job,) = _vit_jobs("swiglu", "on", data, "cuda")
    fp32 = dataclasses.replace(job.config, train=dataclasses.replace(job.config.train, bf16=False))
    stacked = StackedViTEngine(dataclasses.replace(job, config=fp32), data, cuda)
    together, alone = {}, {}
    _train(stacked, (1, 2), together)
    for single_job in _vit_jobs("swiglu", "off", data, "cuda"):
        single_job = dataclasses.replace(single_job, config=fp32)
        _train(ViTEngine(single_job, data, cuda), (1, 2), alone)
    assert together.keys() == alone.keys()
    for key, value in alone.items():
        assert math.isclose(together[key], value, rel_tol=1e-4), key
    bf16, records = StackedViTEngine(job, data, cuda), {}  # the preset's bf16 autocast
    assert bf16.autocast
    _train(bf16, (1,), records)
    assert records and all(math.isfinite(v) for v in records.values())


def test_a_stacked_vit_resumes_from_its_state_bit_identically(images):
    from gelus.experiments.engines.vit.stacked import StackedViTEngine

    _, data = images
    (job,) = _vit_jobs("swiglu", "on", data)
    straight, first, resumed = (StackedViTEngine(job, data, CPU) for _ in range(3))
    records_a, records_b = {}, {}
    _train(straight, (1, 2), records_a)
    _train(first, (1,), records_b)
    resumed.load_state(first.state())
    _train(resumed, (2,), records_b)
    assert records_a == records_b
    for a, b in zip(straight.members, resumed.members, strict=True):
        params = zip(a.model.parameters(), b.model.parameters(), strict=True)
        assert all(torch.equal(x, y) for x, y in params)


def test_the_vit_preset_stacks_on_cuda_only_by_default():
    from gelus.experiments.presets import PRESETS

    preset = PRESETS["transformer-vit"].config
    specs = resolve_activations(["gelu"])

    def engines(device):
        jobs = plan_jobs("v", preset, specs, train_size=55_000, out_dir="x", device=device)
        return {(job.engine, len(job.members)) for job in jobs}

    assert engines("cpu") == {("vit", 1)}
    assert engines("cuda") == {("vit-stacked", preset.train.seeds * len(preset.optim.lr))}


def test_a_stacked_vit_sweep_writes_the_records_of_an_unstacked_one(images, tmp_path):
    from gelus.experiments.runner import run_experiment

    root, _ = images

    def sweep(stack: str):
        out = run_experiment(
            "transformer-vit", out_dir=tmp_path / stack, activations=["gelu", "geglu"],
            overrides=[*VIT, f"train.stack={stack}"], workers=0, data_dir=root,
            verify=False, device="cpu",
        )  # fmt: skip
        assert {run.status for run in read_runs(out)} == {"done"}
        return _values(out)

    stacked, alone = sweep("on"), sweep("off")
    assert stacked.keys() == alone.keys() and len({key[0] for key in stacked}) == 2 * 2 * 2
    for key, value in alone.items():
        assert math.isclose(stacked[key], value, rel_tol=1e-5, abs_tol=1e-9), key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_each_member_equals_its_run_trained_alone_there(data):
    cuda = torch.device("cuda")
    config = _config("train.bf16=false")  # float32 both ways (TF32 stays off)
    (job,) = _jobs(config, "swiglu", "on")
    stacked, together, alone = StackedTransformerEngine(job, data, cuda), {}, {}
    _train(stacked, (1, 2), together)
    for single_job in _jobs(config, "swiglu", "off"):
        _train(TransformerEngine(single_job, data, cuda), (1, 2), alone)
    assert together.keys() == alone.keys()
    for key, value in alone.items():
        assert math.isclose(together[key], value, rel_tol=1e-4), key
    (bf16_job,) = _jobs(_config(), "swiglu", "on")  # the default: bf16 autocast
    bf16, records = StackedTransformerEngine(bf16_job, data, cuda), {}
    assert bf16.autocast
    _train(bf16, (1,), records)
    assert all(math.isfinite(v) for v in records.values())


def test_the_budget_prices_the_stacked_jobs_a_gpu_would_run():
    from gelus.experiments.budget import price, workload

    work = workload(PRESETS["transformer-lm"], quick=True, device="cuda")
    assert {(job.engine, len(job.members)) for job in work.planned} == {("transformer-stacked", 5)}
    cost = price(work, "cpu", repeats=1)  # timed here on two members, scaled to five
    assert cost.step_seconds > 0 and math.isfinite(cost.seconds(2))
