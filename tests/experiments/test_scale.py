"""The scale experiment: a joint axis (width and depth together), the training budget tied to the
model's size (``train.tokens_per_param``), and the ``transformer-scale`` preset built of both."""

import json
from types import SimpleNamespace

import pytest

from gelus.experiments import PRESETS, read_records, read_runs
from gelus.experiments.config import (
    ConfigError,
    apply_overrides,
    config_hash,
    config_to_dict,
    expand_axes,
    plugin_for,
    validate,
    with_default_axes,
)
from gelus.experiments.errors import CommandError
from text_corpus import write_corpus

LM = PRESETS["transformer-lm"].config
SCALE = PRESETS["transformer-scale"]
SIZES = "model.d_model,model.layers=48,2;80,3;128,4"
# N = layers·12·d² + 256·d by hand (ffn_mult 4): the weights the budget is tied to
WEIGHTS = {
    48: 2 * 12 * 48**2 + 256 * 48,
    80: 3 * 12 * 80**2 + 256 * 80,
    128: 4 * 12 * 128**2 + 256 * 128,
}


def test_a_joint_axis_moves_its_keys_together_one_config_per_point():
    combos = expand_axes(LM, [SIZES, "model.init=gpt2,torch"])
    assert combos[:2] == [
        ("model.d_model=48", "model.layers=2", "model.init=gpt2"),
        ("model.d_model=48", "model.layers=2", "model.init=torch"),
    ]
    assert len(combos) == 3 * 2  # the points times the other axis, not 3 × 3 × 2
    configs = [apply_overrides(LM, combo) for combo in expand_axes(LM, [SIZES])]
    assert [(c.model.d_model, c.model.layers) for c in configs] == [(48, 2), (80, 3), (128, 4)]
    for config in configs:
        validate(config)  # 4 heads divide 48, 80 and 128
    assert len({config_hash(c) for c in configs}) == 3
    # one point is plain overrides, here as in a one-config resolution
    one = apply_overrides(LM, ["model.d_model, model.layers = 48, 2"])
    assert (one.model.d_model, one.model.layers) == (48, 2)


@pytest.mark.parametrize(
    "override, words",
    [
        (
            "model.d_model,model.layers=48,2;80",
            r"point 2 \('80'\) gives 1 value\(s\) for the 2 keys model.d_model, model.layers",
        ),
        ("model.d_model,model.layers=48,2;,3", "point 2"),
        ("model.d_model,model.layerz=48,2", "unknown config key 'model.layerz'.*model.layers"),
        ("model.d_model,optim.lr=48,1e-3", "optim.lr: a tuple"),
        ("model.d_model,train.seeds=48,2", "train.seeds: a sweep axis"),
        ("model.d_model,train.stack=48,on", "train.stack: a sweep axis or a bookkeeping key"),
        ("model.d_model,model.d_model=48,64", "names each key once"),
        ("model.d_model,model.layers=48,2;48,2", "points must be distinct"),
    ],
)
def test_a_bad_joint_axis_is_one_clear_error(override, words):
    with pytest.raises(ConfigError, match=words):
        expand_axes(LM, [override])


def test_a_joint_axis_of_several_points_is_refused_where_one_config_is_made():
    with pytest.raises(ConfigError, match="3 points is 3 configs"):
        apply_overrides(LM, [SIZES])
    bad = apply_overrides(LM, ["model.d_model,model.layers=50,2"])
    with pytest.raises(ConfigError, match=r"model.heads: .*a divisor of model.d_model"):
        validate(bad)


def test_the_budget_rule_derives_the_steps_from_the_size():
    rule = ["train.tokens_per_param=2.5", "train.epochs=5", "model.context=128"]
    for d, layers, steps in [(48, 2, 16), (80, 3, 61), (128, 4, 200)]:
        size = [f"model.d_model={d}", f"model.layers={layers}"]
        # the rule follows the size whichever is set first
        for overrides in ([*rule, *size], [*size, *rule]):
            config = apply_overrides(LM, overrides)
            plugin = plugin_for(config)
            assert plugin.parameter_count(config) == WEIGHTS[d]
            assert config.train.steps_per_epoch == steps == round(2.5 * WEIGHTS[d] / (5 * 16 * 128))
            tokens = plugin.token_count(config)
            assert tokens == 5 * steps * 16 * 128
            assert abs(tokens - 2.5 * WEIGHTS[d]) <= 5 * 16 * 128 / 2  # within half a step each
    # the cap: no run trains more bytes than train.max_tokens
    capped = apply_overrides(LM, [*rule, "train.max_tokens=1000000"])
    assert capped.train.steps_per_epoch == round(1_000_000 / (5 * 16 * 128)) == 98
    tiny = apply_overrides(LM, [*rule, "train.tokens_per_param=1e-9"])
    assert tiny.train.steps_per_epoch == 1  # at least one step


def test_the_budget_rule_is_hashed_only_when_set():
    off = apply_overrides(LM, ["train.tokens_per_param=0", "train.max_tokens=0"])
    assert config_hash(off) == config_hash(LM) == "155473b5c989"  # the committed runs' hash
    assert "tokens_per_param" not in config_to_dict(off)["train"]
    on = apply_overrides(LM, ["train.tokens_per_param=2.5"])
    assert config_to_dict(on)["train"]["tokens_per_param"] == 2.5
    assert config_hash(on) != config_hash(LM)
    vit = PRESETS["transformer-vit"].config
    assert config_hash(vit) == "ac03997086c1"  # the ViT has no budget keys


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.tokens_per_param=-1", "train.tokens_per_param"),
        ("train.max_tokens=-5", "train.max_tokens"),
    ],
)
def test_a_budget_out_of_range_names_its_key(override, key):
    with pytest.raises(ConfigError, match=f"{key}: invalid value"):
        validate(apply_overrides(LM, [override]))


def test_the_planner_prices_each_size_at_its_derived_steps():
    from gelus.experiments.budget import workloads

    work = workloads(SCALE)
    assert [w.point for w in work] == ["48,2", "80,3", "128,4"]
    assert [w.steps for w in work] == [16, 61, 200]  # steps per epoch, priced per size
    assert {w.runs for w in work} == {4 * 3 * 5}  # activations × lrs × seeds at each size


def test_the_scale_preset_spans_sizes_and_ties_tokens_to_them():
    configs = [apply_overrides(SCALE.config, c) for c in expand_axes(SCALE.config, SCALE.axes)]
    plugin = plugin_for(SCALE.config)
    sizes = [plugin.parameter_count(c) for c in configs]
    tokens = [plugin.token_count(c) for c in configs]
    assert sizes == sorted(sizes) and sizes[-1] >= 10 * sizes[0]
    assert all(c.model.d_model <= 128 for c in configs)
    assert all(abs(t / n - 2.5) < 0.1 for t, n in zip(tokens, sizes, strict=True))
    assert tokens[-1] >= 5 * 200 * 16 * 128  # at least what the committed d 128 sweep trained
    assert {"gelu", "relu", "relu2", "swiglu"} <= set(SCALE.config.activations)
    assert SCALE.config.train.seeds >= 5 and {4e-3, 8e-3} <= set(SCALE.config.optim.lr)
    assert SCALE.config.dataset == "linux-docs" and not SCALE.in_reproduce


def test_a_commands_own_value_replaces_the_presets_axis():
    assert with_default_axes(SCALE.axes, ()) == SCALE.axes
    assert with_default_axes(SCALE.axes, ["model.d_model=64"]) == (
        "model.d_model=64",
    )  # the axis is gone
    assert (
        with_default_axes(SCALE.axes, [], ["model.layers=3"]) == ()
    )  # --quick or --epochs' overrides too
    joint = "model.d_model,model.layers,model.heads=64,2,4;256,6,8"
    assert with_default_axes(SCALE.axes, [joint]) == (joint,)
    assert with_default_axes(SCALE.axes, ["train.epochs=2"]) == (*SCALE.axes, "train.epochs=2")
    from gelus.experiments.cli import preset_keys

    assert f"axes (one config per point): {SIZES}" in preset_keys("transformer-scale")


def test_the_quick_scale_preset_runs_one_config_per_size(tmp_path):
    from gelus.experiments.runner import run_experiment

    corpus = write_corpus(tmp_path / "data")
    out = run_experiment(
        "transformer-scale", out_dir=tmp_path / "out", activations=["gelu", "swiglu"], seeds=1,
        quick=True, workers=0, data_dir=corpus, dataset="text", verify=False, step_times=False,
    )  # fmt: skip
    runs = read_runs(out)
    assert {r.status for r in runs} == {"done"} and len(runs) == 3 * 2  # sizes × activations
    by_size = {}
    for run in runs:
        config = json.loads(run.config_json)
        size = (config["model"]["d_model"], config["model"]["layers"])
        by_size.setdefault(size, set()).add(run.config_hash)
        assert config["train"]["tokens_per_param"] == 0.025
        steps = round(0.025 * WEIGHTS[size[0]] / (2 * 16 * 32))  # quick: 2 epochs, context 32
        assert config["train"]["steps_per_epoch"] == steps
        assert json.loads(run.metadata_json)["steps"] == 2 * steps
    assert set(by_size) == {(48, 2), (80, 3), (128, 4)}
    assert all(len(hashes) == 1 for hashes in by_size.values())
    records = read_records(out)
    params = {(r.config_hash, r.activation): r.value for r in records if r.metric == "parameters"}
    assert len(set(params.values())) >= 3  # each size its own model
    assert {r.epoch for r in records if r.metric == "bpb" and r.split == "val"} == {1, 2}

    from gelus.report.analysis import analyse

    (result,) = analyse(records, runs, PRESETS)
    # each size is one of the preset's own points: the sizes are no departure, the quick run's
    # context is (against the point it is nearest), and the tables go d 48, d 80, d 128
    departed = {d.partition("=")[0]: d for d in result.departures}
    assert not {"model.d_model", "model.layers"} & set(departed)
    assert departed["model.context"] == "model.context=32 (the preset's: 128)"
    assert departed["train.steps_per_epoch"] == (
        "train.steps_per_epoch=2 or 6 or 20 (the preset's: 16 or 61 or 200)"
    )
    sizes = [row.selection.variant.partition(",")[0] for row in result.rows]
    assert sizes == sorted(sizes, key=lambda v: int(v.partition("=")[2])) and len(set(sizes)) == 3


def test_reproduce_runs_the_scale_preset_only_when_named(monkeypatch, tmp_path):
    import gelus.report.cli as report_cli

    ran = []
    monkeypatch.setattr(
        "gelus.experiments.cli.run_with_progress",
        lambda options, executor=None: ran.append(options.experiment),
    )
    present = SimpleNamespace(present=True, name="data", how_to_get="")
    monkeypatch.setattr(report_cli, "_data_status", lambda preset, data_dir: present)
    with pytest.raises(CommandError):  # nothing trained (run_with_progress stood in): no records
        report_cli.reproduce(tmp_path, quick=True)
    assert "transformer-lm" in ran and "transformer-scale" not in ran  # `make reproduce`
    ran.clear()
    with pytest.raises(CommandError):
        report_cli.reproduce(tmp_path, quick=True, experiments=["transformer-scale"])
    assert ran == ["transformer-scale"]
    assert "transformer-scale" not in {m.experiment for m in report_cli.missing_experiments(set())}
