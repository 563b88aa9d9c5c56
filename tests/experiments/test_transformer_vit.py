"""The ViT engine: patches as a hand-written loop cuts them, attention without a mask, the FFN
variants at equal parameters, exact resume, and a tiny run from preset to report."""

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from gelus.experiments import PRESETS, read_records, read_runs
from gelus.experiments.activation_spec import resolve_activation, resolve_activations
from gelus.experiments.budget import price, workload
from gelus.experiments.config import apply_overrides, validate
from gelus.experiments.datasets import load_dataset
from gelus.experiments.engines.vit.config import ViTExperimentConfig
from gelus.experiments.engines.vit.engine import ViTEngine, build_vit
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import plan_jobs, train_size
from test_run import write_tiny_mnist

TINY = (
    "model.d_model=16", "model.layers=1", "model.heads=2", "model.patch=7",
    "train.epochs=2", "train.batch_size=50", "train.seeds=2", "optim.lr=3e-3",
    "train.train_subset=200", "train.eval_batch_size=100",
)  # fmt: skip


def _config(*overrides: str) -> ViTExperimentConfig:
    config = apply_overrides(ViTExperimentConfig(), [*TINY, *overrides])
    validate(config)
    return config


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "fashion-mnist")
    return root


@pytest.fixture(scope="module")
def data(data_dir):
    return load_dataset("fashion-mnist", str(data_dir), verify=False)


def _engine(config, activation: str, data, seed: int = 0):
    config = dataclasses.replace(config, activations=(activation,))
    n = train_size(config, len(data.train), len(data.val))
    jobs = plan_jobs("v", config, resolve_activations(config.activations), train_size=n,
                     out_dir="unused")  # fmt: skip
    (job,) = [j for j in jobs if j.members[0].seed == seed]
    return ViTEngine(job, data, torch.device("cpu"))


def test_patches_are_cut_as_a_plain_loop_cuts_them():
    model = build_vit(_config(), resolve_activation("gelu"), 0, (2, 14, 14), 10)
    seen = []
    model.embed.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    images = torch.randn(3, 2, 14, 14, generator=torch.Generator().manual_seed(0))
    logits = model(images)
    assert logits.shape == (3, 10)
    expected = torch.stack(
        [images[:, :, i : i + 7, j : j + 7].reshape(3, -1) for i in (0, 7) for j in (0, 7)], dim=1
    )  # row by row; each patch (channel, row, column)
    assert torch.equal(seen[0], expected)


def test_attention_has_no_mask_and_pooling_is_by_mean_or_class_token():
    model = build_vit(_config(), resolve_activation("gelu"), 0, (1, 28, 28), 10).eval()
    outputs = []
    model.blocks[0].register_forward_hook(lambda module, args, out: outputs.append(out))
    images = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    changed = images.clone()
    changed[..., 21:, 21:] += 1  # the last patch only
    with torch.no_grad():
        model(images), model(changed)
    assert not torch.allclose(outputs[0][:, 0], outputs[1][:, 0])  # the first token sees it
    cls = build_vit(_config("model.pool=cls"), resolve_activation("gelu"), 0, (1, 28, 28), 10)
    assert cls.position.weight.shape[0] == 16 + 1 and cls(images).shape == (1, 10)
    with pytest.raises(ConfigError, match="patch"):
        build_vit(_config("model.patch=5"), resolve_activation("gelu"), 0, (1, 28, 28), 10)


def test_gated_and_elementwise_vits_have_equal_parameters_up_to_rounding():
    count = lambda name: sum(  # noqa: E731
        p.numel()
        for p in build_vit(_config(), resolve_activation(name), 0, (1, 28, 28), 10).parameters()
    )
    d = 16
    assert abs(count("swiglu") - count("gelu")) <= 3 * d * 4  # one layer, h rounded to 8
    assert count("gelu") == count("relu2")


def test_one_seed_gives_every_activation_the_same_start(data):
    a, b = (
        dict(_engine(_config(), name, data).model.named_parameters()) for name in ("gelu", "reglu")
    )
    shared = [k for k in a if ".ffn." not in k]
    assert all(torch.equal(a[k], b[k]) for k in shared)


def _log_to(records: dict):
    return lambda key, epoch, split, metric, value: records.__setitem__(
        (key.run_id, epoch, split, metric), value
    )


def test_resume_from_state_continues_bit_identically(data):
    straight, first, records_a, records_b = (
        *(_engine(_config(), "swiglu", data) for _ in range(2)),
        {},
        {},
    )
    for epoch in (1, 2):
        straight.train_epoch(epoch)
        straight.evaluate(epoch, _log_to(records_a))
    first.train_epoch(1)
    first.evaluate(1, _log_to(records_b))
    resumed = _engine(_config(), "swiglu", data)
    resumed.load_state(first.state())
    resumed.train_epoch(2)
    resumed.evaluate(2, _log_to(records_b))
    assert records_a == records_b


def test_the_preset_validates_and_prices():
    preset = PRESETS["transformer-vit"]
    validate(preset.config)
    assert preset.config.model.pool == "mean" and preset.config.train.seeds >= 5
    work = workload(preset, quick=True)
    assert work.runs == 8 * 5 and work.steps == 10_000 // 128
    cost = price(work, "cpu", repeats=1)
    assert cost.step_seconds > 0 and math.isfinite(cost.seconds(2))


def test_a_tiny_run_records_error_and_the_report_compares_with_gelu(data_dir, tmp_path):
    from gelus.experiments.runner import run_experiment
    from gelus.report.render import write_report

    out = run_experiment(
        "transformer-vit", out_dir=tmp_path / "out", activations=["gelu", "geglu"], seeds=2,
        overrides=TINY, workers=0, data_dir=data_dir, verify=False,
    )  # fmt: skip
    records = read_records(out)
    error = {
        (r.activation, r.seed, r.split) for r in records if r.metric == "error" and r.epoch == 2
    }
    assert error == {(a, s, split) for a in ("gelu", "geglu") for s in (0, 1)
                     for split in ("train", "val", "test")}  # fmt: skip
    runs = read_runs(out)
    assert {r.status for r in runs} == {"done"} and len(runs) == 4
    _, md = write_report(
        records, runs, tmp_path / "report", presets=PRESETS, activation_figure=False
    )
    text = Path(md).read_text(encoding="utf-8")
    assert "transformer-vit" in text and "geglu − gelu" in text
