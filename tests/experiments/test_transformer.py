"""The transformer engine: the byte GPT's causality, FFN widths and outputs against plain torch,
pairing by seed, the recipe, exact resume, and a tiny run from preset to report."""

import dataclasses
import itertools
import math
import sqlite3
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gelus.data.text import load_text_file
from gelus.experiments import PRESETS
from gelus.experiments.activation_spec import resolve_activation, resolve_activations
from gelus.experiments.budget import price, workload
from gelus.experiments.config import apply_overrides, config_hash, validate
from gelus.experiments.engines.mlp.engine import MLPEngine
from gelus.experiments.engines.transformer.config import TransformerExperimentConfig, gated_hidden
from gelus.experiments.engines.transformer.engine import (
    TransformerEngine,
    build_model,
    eval_starts,
    lm_lr,
)
from gelus.experiments.engines.transformer.models import FeedForward
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import plan_jobs, train_size
from text_corpus import CORPUS_TEXT, write_corpus

TINY = (
    "model.d_model=32", "model.layers=2", "model.heads=2", "model.context=16",
    "train.epochs=2", "train.steps_per_epoch=3", "train.batch_size=4", "train.seeds=2",
    "optim.lr=3e-3", "train.eval_bytes=2048",
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def data(corpus):
    return load_text_file(corpus / "text" / "corpus.txt")


def _config(*overrides: str) -> TransformerExperimentConfig:
    config = apply_overrides(TransformerExperimentConfig(), [*TINY, *overrides])
    validate(config)
    return config


def _engine(config, activation: str, data, seed: int = 0, lr: float = 3e-3):
    config = dataclasses.replace(config, activations=(activation,))
    jobs = plan_jobs(
        "t", config, resolve_activations(config.activations), train_size=train_size(config, 0, 0),
        out_dir="unused",
    )  # fmt: skip
    (job,) = [j for j in jobs if j.members[0].seed == seed and j.members[0].lr == lr]
    return TransformerEngine(job, data, torch.device("cpu"))


def test_changing_a_later_byte_leaves_earlier_logits_unchanged():
    model = build_model(_config(), resolve_activation("gelu"), seed=0).eval()
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    changed = idx.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 256
    with torch.no_grad():
        a, b = model(idx), model(changed)
    assert torch.equal(a[:, :9], b[:, :9])
    assert not torch.allclose(a[:, 9:], b[:, 9:])


@pytest.mark.parametrize("d", [32, 64, 128, 768])
def test_gated_ffns_match_the_elementwise_parameter_count(d):
    cfg = dataclasses.replace(_config().model, d_model=d)
    h = 8 * round(8 * d / 3 / 8)  # the documented width
    assert gated_hidden(d) == h
    elementwise = FeedForward(cfg, resolve_activation("gelu"))
    gated = FeedForward(cfg, resolve_activation("swiglu"))
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(elementwise) == 2 * d * 4 * d  # d -> 4d -> d, no biases
    assert n(gated) == 3 * d * h  # d -> 2h, h -> d
    assert abs(n(gated) - n(elementwise)) <= 3 * d * 4  # rounding h to 8: at most 4 off


_REFERENCE = {
    "gelu": lambda u: F.gelu(u),
    "gelu_tanh": lambda u: F.gelu(u, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "relu2": lambda u: F.relu(u).square(),
    "geglu": lambda u: u.chunk(2, -1)[0] * F.gelu(u.chunk(2, -1)[1]),
    "swiglu": lambda u: u.chunk(2, -1)[0] * F.silu(u.chunk(2, -1)[1]),
    "reglu": lambda u: u.chunk(2, -1)[0] * F.relu(u.chunk(2, -1)[1]),
    "generalized_gelu": lambda u: u * 0.5 * (1 + torch.erf(u / math.sqrt(2))),  # μ = 0, σ = 1
}


@pytest.mark.parametrize("name", list(_REFERENCE))
def test_each_ffn_equals_plain_torch(name):
    cfg = _config().model
    ffn = FeedForward(cfg, resolve_activation(name)).double()
    x = torch.randn(
        3, 5, cfg.d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    expected = (_REFERENCE[name](x @ ffn.up.weight.T)) @ ffn.down.weight.T
    torch.testing.assert_close(ffn(x), expected, rtol=1e-10, atol=1e-12)


def test_one_seed_gives_every_activation_the_same_start_and_batches(data):
    config = _config()
    models = {
        a: build_model(config, resolve_activation(a), seed=0) for a in ("gelu", "relu", "swiglu")
    }
    gelu, relu, swiglu = (dict(m.named_parameters()) for m in models.values())
    assert all(torch.equal(gelu[k], relu[k]) for k in gelu)  # same shapes: every parameter
    shared = [k for k in gelu if ".ffn." not in k]
    assert shared and all(torch.equal(gelu[k], swiglu[k]) for k in shared)
    other_seed = dict(build_model(config, resolve_activation("gelu"), seed=1).named_parameters())
    assert not torch.equal(gelu["embed.weight"], other_seed["embed.weight"])
    engines = [_engine(config, a, data) for a in ("gelu", "swiglu")]
    draws = [torch.randint(0, 1000, (5,), generator=e.order) for e in engines]
    assert torch.equal(*draws)


def test_the_schedule_warms_up_then_decays_to_its_floor():
    lrs = [lm_lr(step, 100, 1.0, warmup=0.1, min_lr=0.1) for step in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))
    assert lrs[-1] == pytest.approx(0.1)


def test_flops_per_token_is_six_times_the_weights_plus_attention():
    from gelus.experiments.engines.transformer.models import flops_per_token

    cfg = _config().model  # d 32, 2 layers, context 16, 4d FFN
    model = build_model(_config(), resolve_activation("relu"), seed=0)
    d, layers = cfg.d_model, cfg.layers
    weights = 256 * d + layers * (3 * d * d + d * d + 2 * 4 * d * d)  # tied head, qkv, proj, ffn
    assert flops_per_token(model, d, layers, 16) == 6 * weights + 6 * layers * 16 * d


def test_parameter_count_is_the_models_weights_without_the_position_table():
    from gelus.experiments.config import plugin_for

    config = _config()
    counted = plugin_for(config).parameter_count(config)
    for name in ("relu", "swiglu"):  # the gated FFN: matched to the elementwise one, rounded
        model = build_model(config, resolve_activation(name), seed=0)
        weights = sum(
            p.numel() for n, p in model.named_parameters() if p.ndim >= 2 and "position" not in n
        )
        assert abs(counted - weights) / weights < 0.02, (name, counted, weights)  # rounding


def test_token_count_is_the_bytes_the_training_steps_predict():
    import dataclasses

    from gelus.experiments.config import plugin_for
    from gelus.experiments.presets import PRESETS

    config = PRESETS["transformer-lm"].config
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, epochs=5))
    # the committed sweep: 5 epochs of 200 steps of 16 windows, 128 bytes predicted per window
    assert plugin_for(config).token_count(config) == 1_000 * 16 * 128


def test_evaluation_windows_predict_each_byte_once():
    starts = eval_starts(100, context=16)
    assert starts.tolist() == [0, 16, 32, 48, 64, 80]  # the last window ends at byte 96
    assert eval_starts(100, 16, limit=40).tolist() == [0, 16]


def test_gated_and_learnable_activations_train_but_not_stochastic_ones(data):
    for name in ("geglu", "reglu", "generalized_gelu"):
        engine = _engine(_config(), name, data)
        before = {k: v.clone() for k, v in engine.model.state_dict().items()}
        engine.train_epoch(1)
        assert any(not torch.equal(before[k], v) for k, v in engine.model.state_dict().items())
    with pytest.raises(ConfigError, match="stochastic"):
        TransformerEngine.check_activation(resolve_activation("stochastic_gelu"))
    with pytest.raises(ConfigError, match="gated"):
        MLPEngine.check_activation(resolve_activation("swiglu"))


def test_weight_decay_only_on_matrices(data):
    engine = _engine(_config(), "generalized_gelu", data)
    decayed, plain = engine.optimizer.param_groups
    assert decayed["weight_decay"] > 0 and all(p.ndim >= 2 for p in decayed["params"])
    assert plain["weight_decay"] == 0 and all(p.ndim < 2 for p in plain["params"])
    assert len(plain["params"]) > 0  # norm gains and the activation's μ, σ


def _log_to(records: dict):
    return lambda key, epoch, split, metric, value: records.__setitem__(
        (key.run_id, epoch, split, metric), value
    )


def test_resume_from_state_continues_bit_identically(data):
    config = _config()
    straight, first, records_a, records_b = (
        *(_engine(config, "gelu", data) for _ in range(2)),
        {},
        {},
    )
    for epoch in (1, 2):
        straight.train_epoch(epoch)
        straight.evaluate(epoch, _log_to(records_a))
    first.train_epoch(1)
    first.evaluate(1, _log_to(records_b))
    state = first.state()
    resumed = _engine(config, "gelu", data)
    resumed.load_state(state)
    resumed.train_epoch(2)
    resumed.evaluate(2, _log_to(records_b))
    assert records_a == records_b
    for (name, a), b in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_too_short_corpus_for_the_context_is_one_config_error(tmp_path):
    """The file is fine: the setting is what to change, so the error names model.context and the
    largest context the corpus admits (its shortest split over MIN_WINDOWS windows)."""
    from gelus.experiments.errors import ConfigError

    path = tmp_path / "short.txt"
    path.write_text(CORPUS_TEXT[:6000], encoding="utf-8")
    short = load_text_file(path)  # long enough for the loader's floor, not for context 128
    largest = min(len(short.train), len(short.val), len(short.test)) // 4 - 1
    with pytest.raises(ConfigError, match=rf"model\.context=128 .*to {largest} or less"):
        _engine(_config("model.context=128"), "gelu", short)


def test_the_preset_validates_prices_and_keeps_quick_small():
    preset = PRESETS["transformer-lm"]
    validate(preset.config)
    assert preset.config.activations == (
        "gelu", "gelu_tanh", "relu", "silu", "relu2", "geglu", "swiglu", "reglu",
    )  # fmt: skip
    assert preset.config.train.seeds >= 5 and len(preset.config.optim.lr) >= 3
    quick = apply_overrides(preset.config, preset.quick)
    assert config_hash(quick) != config_hash(preset.config)
    work = workload(preset, quick=True)
    assert work.runs == 8 * 5 and work.steps == quick.train.steps_per_epoch
    cost = price(work, "cpu", repeats=1)
    assert cost.step_seconds > 0 and math.isfinite(cost.seconds(2))


def test_a_tiny_run_records_bits_per_byte_and_the_report_builds(corpus, tmp_path):
    from gelus.experiments import read_records, read_runs
    from gelus.experiments.runner import run_experiment
    from gelus.report.render import unwrapped, write_report

    out = run_experiment(
        "transformer-lm", out_dir=tmp_path / "out", activations=["gelu", "swiglu"], seeds=2,
        overrides=TINY[:-3], quick=True, workers=0, data_dir=corpus, dataset="text",
        verify=False,
    )  # fmt: skip
    records = read_records(out)
    bpb = {
        (r.activation, r.seed, r.split): r.value
        for r in records
        if r.metric == "bpb" and r.epoch == 2
    }
    assert set(bpb) == {(a, s, split) for a in ("gelu", "swiglu") for s in (0, 1)
                        for split in ("train", "val", "test")}  # fmt: skip
    assert all(0 < v < 8.5 for v in bpb.values())
    loss = {
        (r.activation, r.seed, r.split): r.value
        for r in records
        if r.metric == "loss" and r.epoch == 2
    }
    assert all(math.isclose(bpb[k], loss[k] / math.log(2)) for k in bpb)
    runs = read_runs(out)
    assert {r.status for r in runs} == {"done"} and len(runs) == 4
    _, md = write_report(
        records, runs, tmp_path / "report", presets=PRESETS, activation_figure=False
    )
    text = unwrapped(Path(md).read_text(encoding="utf-8"))  # tables as pipe tables
    assert "transformer-lm" in text and "bpb" in text
    assert "swiglu − gelu" in text and "gelu − swiglu" not in text  # each against exact GELU
    sizes = {(r.activation, r.metric): r.value for r in records if r.split == "model"}
    model = build_model(_config(*TINY[:-3]), resolve_activation("swiglu"), seed=0)
    assert sizes[("swiglu", "parameters")] == sum(p.numel() for p in model.parameters())
    assert "| parameters |" in text and "training FLOPs per token" in text
    with sqlite3.connect(out / "records.sqlite") as db:
        (n,) = db.execute("select count(*) from records where metric = 'bpb'").fetchone()
    assert n == 2 * 2 * 2 * 3


@pytest.mark.parametrize(
    ("preset", "override", "key"),
    [
        ("transformer-lm", "model.heads=3", r"model\.heads"),
        ("transformer-lm", "model.norm=batchnorm", r"model\.norm"),
        ("transformer-lm", "optim.warmup=1.5", r"optim\.warmup"),
        ("transformer-lm", "train.keep=0.5", r"unknown config key"),
        ("transformer-vit", "model.pool=max", r"model\.pool"),
        ("transformer-vit", "optim.beta2=1", r"optim\.beta1/beta2"),
    ],
)
def test_out_of_range_transformer_settings_name_their_key(preset, override, key):
    from gelus.experiments.errors import SettingError
    from gelus.experiments.run import resolve_config

    with pytest.raises(SettingError, match=key):
        resolve_config(preset, overrides=[override])


def test_a_checkpoint_on_disk_resumes_through_the_driver_bit_identically(data, tmp_path):
    from gelus.experiments.checkpoint import save_checkpoint
    from gelus.experiments.driver import _resume

    config = _config()
    straight, first = _engine(config, "swiglu", data), _engine(config, "swiglu", data)
    records_a, records_b = {}, {}
    for epoch in (1, 2):
        straight.train_epoch(epoch)
        straight.evaluate(epoch, _log_to(records_a))
    first.train_epoch(1)
    first.evaluate(1, _log_to(records_b))
    path = tmp_path / "run.pt"
    job = dataclasses.replace(
        plan_jobs("t", dataclasses.replace(config, activations=("swiglu",)),
                  resolve_activations(["swiglu"]), train_size=train_size(config, 0, 0),
                  out_dir=tmp_path)[0],
        checkpoint_path=str(path),
    )  # fmt: skip
    save_checkpoint(path, {"run_ids": job.run_ids, "epoch": 1, "seconds": 1.0,
                           "engine": first.state()})  # fmt: skip
    resumed = _engine(config, "swiglu", data)
    assert _resume(job, resumed, path) == (1, 1.0)  # it fits the fresh engine and loads
    resumed.train_epoch(2)
    resumed.evaluate(2, _log_to(records_b))
    assert records_a == records_b


def test_a_corpus_too_short_for_the_context_is_refused_before_any_job(corpus, tmp_path):
    from gelus.experiments.errors import ConfigError
    from gelus.experiments.runner import run_experiment

    with pytest.raises(ConfigError, match=r"model\.context=1024 is too long"):
        run_experiment(
            "transformer-lm", out_dir=tmp_path / "out", activations=["gelu"], seeds=1,
            overrides=["model.context=1024"], quick=True, workers=0, data_dir=corpus,
            dataset="text", verify=False,
        )  # fmt: skip
    assert not (tmp_path / "out" / "records.sqlite").exists()


_USER_ACTIVATIONS = """
import torch
from torch import nn


class TanhGLU(nn.Module):
    gated = True

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return a * torch.tanh(b)


class NotReallyGated(nn.Module):
    gated = True

    def forward(self, x):
        return torch.tanh(x)
"""


def test_a_users_gated_activation_gets_the_gated_width(tmp_path, monkeypatch, data):
    from gelus.experiments.activation_spec import ActivationError

    (tmp_path / "my_glus.py").write_text(_USER_ACTIVATIONS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    spec = resolve_activation("tglu=my_glus:TanhGLU")
    assert spec.gated and spec.label == "tglu"
    ffn = FeedForward(_config().model, spec)
    assert ffn.down.in_features == gated_hidden(32) and ffn.up.out_features == 2 * gated_hidden(32)
    engine = _engine(_config(), "tglu=my_glus:TanhGLU", data)
    engine.train_epoch(1)
    with pytest.raises(ActivationError, match="gated"):
        resolve_activation("my_glus:NotReallyGated")
