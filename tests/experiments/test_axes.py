"""Axes: several values of one ``--set`` key, one config per combination, the lr chosen in each."""

import dataclasses
import json
import statistics
from collections import defaultdict

import pytest

from gelus.cli import main as gelus_main
from gelus.experiments import PRESETS, read_records, read_runs
from gelus.experiments.config import (
    ConfigError,
    apply_overrides,
    config_hash,
    config_to_dict,
    expand_axes,
    plugin_for,
    resolve_configs,
)
from gelus.experiments.run import resolve_config
from gelus.experiments.selection import run_configs, select
from test_run import write_tiny_mnist

TINY = [
    "model.hidden=16,16",
    "train.batch_size=50",
    "train.eval_batch_size=2000",
    "train.train_subset=200",
    "train.eval_train_subset=100",
    "optim.lr=1e-3,3e-2",
    "train.keep=1.0",
]


def test_an_axis_is_several_values_of_one_key():
    lm = PRESETS["transformer-lm"].config
    assert expand_axes(lm, ["optim.warmup=0,0.05", "train.epochs=2"]) == [
        ("optim.warmup=0", "train.epochs=2"),
        ("optim.warmup=0.05", "train.epochs=2"),
    ]
    # two axes: every combination, the first varying slowest; a tuple key's axis takes ";"
    mlp = PRESETS["mnist-classification"].config
    assert expand_axes(mlp, ["model.init=xavier,he", "model.hidden=8,8;16"]) == [
        ("model.init=xavier", "model.hidden=8,8"),
        ("model.init=xavier", "model.hidden=16"),
        ("model.init=he", "model.hidden=8,8"),
        ("model.init=he", "model.hidden=16"),
    ]
    # a tuple's commas are its items, the lr grid stays inside one config
    assert expand_axes(mlp, ["model.hidden=8,8", "optim.lr=1e-3,1e-4"]) == [
        ("model.hidden=8,8", "optim.lr=1e-3,1e-4")
    ]


@pytest.mark.parametrize(
    "override, words",
    [
        ("optim.lr=1e-3;1e-4", "swept inside each config"),
        ("train.seeds=2,3", "swept inside each config"),
        ("train.stack=on,off", "changes no result"),
        ("model.init=torch,torch", "distinct"),
        ("model.init=torch,", "non-empty"),
    ],
)
def test_what_is_no_axis_is_one_clear_error(override, words):
    with pytest.raises(ConfigError, match=words):
        expand_axes(PRESETS["transformer-lm"].config, [override])


def test_the_flags_overrides_go_into_every_config_and_are_no_axes():
    # --activations gelu,relu and --seeds are the flags' overrides: commas there are no axis
    fixed = ["activations=gelu,relu", "train.seeds=2"]
    preset = PRESETS["transformer-lm"].config
    resolved = resolve_configs(preset, fixed, ["model.init=gpt2,torch", "train.epochs=2"])
    assert [overrides for overrides, _, _ in resolved] == [
        ("model.init=gpt2", "train.epochs=2"),
        ("model.init=torch", "train.epochs=2"),
    ]
    assert [config.model.init for _, config, _ in resolved] == ["gpt2", "torch"]
    for _, config, plugin in resolved:
        assert config.activations == ("gelu", "relu") and config.train.seeds == 2
        assert config.train.epochs == 2 and plugin is plugin_for(config)
    with pytest.raises(ConfigError, match=r"train\.seeds"):  # validated: no run of 0 seeds
        resolve_configs(preset, ["train.seeds=0"], [])


def test_a_one_config_resolution_refuses_an_axis_by_name():
    with pytest.raises(ConfigError, match="resolve_runs"):
        resolve_config("transformer-lm", overrides=["model.init=gpt2,torch"])


def test_the_transformers_init_is_hashed_only_when_set():
    for name in ("transformer-lm", "transformer-vit"):
        preset = PRESETS[name].config
        gpt2, torch_init = (apply_overrides(preset, [f"model.init={v}"]) for v in ("gpt2", "torch"))
        assert config_hash(gpt2) == config_hash(preset)  # the default: the records' old hash
        assert "init" not in config_to_dict(gpt2)["model"]
        assert config_to_dict(torch_init)["model"]["init"] == "torch"
        assert config_hash(torch_init) != config_hash(preset)


def _chosen_lrs(records, metric="loss"):
    """{config hash: lr of the lowest median over seeds of the validation metric} (one epoch)."""
    values = defaultdict(list)
    for r in records:
        if r.split == "val" and r.metric == metric and r.activation == "gelu":
            values[(r.config_hash, r.lr)].append(r.value)
    medians = {key: statistics.median(v) for key, v in values.items()}
    chosen = {}
    for (chash, lr), median in sorted(medians.items()):
        if chash not in chosen or median < medians[(chash, chosen[chash])]:
            chosen[chash] = lr
    return chosen, medians


def test_an_axis_runs_one_config_per_value_with_its_own_lr(tmp_path, capsys):
    write_tiny_mnist(tmp_path / "data" / "mnist")
    out = tmp_path / "out"
    argv = ["run", "mnist-classification", "--activations", "gelu", "--seeds", "2"]
    argv += ["--epochs", "1", "--workers", "0", "--no-verify", "--data-dir", str(tmp_path / "data")]
    argv += ["--out", str(out)] + [a for o in TINY for a in ("--set", o)]
    assert gelus_main([*argv, "--set", "model.init=unit_norm,he"]) == 0
    runs, records = read_runs(out), read_records(out)
    hashes = {r.config_hash for r in runs}
    assert len(hashes) == 2 and len(runs) == 2 * 2 * 2  # configs × lrs × seeds
    inits = {json.loads(r.config_json)["model"]["init"]: r.config_hash for r in runs}
    # the default's config is the one a command without the axis gives: its hash is unchanged
    plain = apply_overrides(PRESETS["mnist-classification"].config, [*TINY, "train.epochs=1"])
    assert inits["unit_norm"] == config_hash(plain) != inits["he"]
    # the lr is chosen per config, on that config's validation runs alone
    chosen, medians = _chosen_lrs(records)
    assert medians[(inits["he"], 1e-3)] != medians[(inits["unit_norm"], 1e-3)]
    selections = select(records, PRESETS["mnist-classification"].protocol, run_configs(runs))
    picked = {s.config_hash: s.lr for s in selections if s.metric == "loss"}
    assert picked == chosen
    labels = {s.config_hash: s.variant for s in selections}
    assert labels == {inits[v]: f"model.init={v}" for v in ("he", "unit_norm")}
    assert "model.init=he" in capsys.readouterr().out  # the summary's config column


def test_a_key_stored_only_when_set_is_filled_in_at_its_default():
    from gelus.experiments.cli import preset_keys
    from gelus.experiments.config import flat_config, stored_defaults

    for name in ("transformer-lm", "transformer-vit"):
        stored = flat_config(config_to_dict(PRESETS[name].config))
        assert "model.init" not in stored and stored_defaults(stored)["model.init"] == "gpt2"
        torch_init = apply_overrides(PRESETS[name].config, ["model.init=torch"])
        assert stored_defaults(flat_config(config_to_dict(torch_init)))["model.init"] == "torch"
        assert any(line.split() == ["model.init", "gpt2"] for line in preset_keys(name).split("\n"))
    mlp = flat_config(config_to_dict(PRESETS["mnist-classification"].config))
    assert stored_defaults(mlp) == mlp  # the MLPs store their init always
    assert stored_defaults({"task": "no engine's", "a": 1}) == {"task": "no engine's", "a": 1}


def test_the_summary_labels_the_default_init_by_name():
    from gelus.experiments.cli import summary_table
    from gelus.experiments.records import Record, RunInfo

    preset = PRESETS["transformer-lm"]
    records, runs = [], []
    for init in ("gpt2", "torch"):
        config = apply_overrides(preset.config, [f"model.init={init}"])
        chash, text = config_hash(config), json.dumps(config_to_dict(config))
        for seed in range(2):
            run_id = f"{chash}/gelu/{seed}"
            runs.append(
                RunInfo(run_id, preset.name, chash, "gelu", seed, 1e-3, "", "done", text, "{}")
            )
            for split, metric in (("val", "loss"), ("test", "bpb")):
                value = 1.0 + seed / 10 + (init == "torch")
                records.append(Record(run_id, preset.name, chash, "gelu", seed, 1e-3, "", 1, split, metric, value))  # fmt: skip
    rows = summary_table(records, runs, preset).splitlines()[2:]
    assert [row.split()[1] for row in rows] == ["model.init=gpt2", "model.init=torch"]


def test_the_summary_orders_configs_by_their_numbers_and_aligns_long_labels():
    from gelus.experiments.cli import summary_table
    from gelus.experiments.records import Record, RunInfo

    preset = PRESETS["transformer-lm"]
    records, runs = [], []
    for d, layers in ((128, 4), (48, 2), (80, 3)):  # hashes and text order 128 < 48 < 80
        config = apply_overrides(preset.config, [f"model.d_model={d}", f"model.layers={layers}"])
        chash, text = config_hash(config), json.dumps(config_to_dict(config))
        run_id = f"{chash}/gelu/0"
        runs.append(RunInfo(run_id, preset.name, chash, "gelu", 0, 1e-3, "", "done", text, "{}"))
        for split, metric in (("val", "loss"), ("test", "bpb")):
            records.append(Record(run_id, preset.name, chash, "gelu", 0, 1e-3, "", 1, split, metric, 1.0))  # fmt: skip
    header, *rows = summary_table(records, runs, preset).splitlines()[1:]
    widths = [row.split()[1].rstrip(",") for row in rows]
    assert widths == ["model.d_model=48", "model.d_model=80", "model.d_model=128"]
    assert len({row.index("0.001") for row in rows}) == 1  # the lr column lines up
    assert header.index("lr") < rows[0].index("0.001") + len("0.001")


def test_each_config_of_an_axis_is_labelled_by_its_values(tmp_path):
    from gelus.experiments.plan import describe_plan, plan_run
    from gelus.experiments.run import RunOptions, resolve_runs

    write_tiny_mnist(tmp_path / "data" / "mnist")
    options = RunOptions(
        "mnist-classification", tmp_path / "out", ("gelu",), seeds=1, epochs=1,
        overrides=(*TINY, "model.init=xavier,he", "optim.lr=1e-3", "train.keep=1.0"),
        workers=0, data_dir=tmp_path / "data", verify=False,
    )  # fmt: skip
    runs = resolve_runs(options)
    assert [run.label for run in runs] == [
        "mnist-classification [model.init=xavier]",
        "mnist-classification [model.init=he]",
    ]
    assert describe_plan(runs[0], plan_run(runs[0])).startswith(
        "mnist-classification [model.init=xavier]: 1 runs to train"
    )
    one = resolve_runs(dataclasses.replace(options, overrides=(*TINY, "model.init=he")))
    assert one[0].label == "mnist-classification"  # one config: the name alone


def test_the_report_labels_a_config_stored_without_its_default_key_by_that_default():
    # an LM run recorded before model.init existed (or at its default) against one under torch:
    # the report's config labels name both inits, and the default is no departure from the preset
    from types import SimpleNamespace

    from gelus.experiments.selection import variant_labels
    from gelus.report.analysis import _departures

    preset = PRESETS["transformer-lm"]
    torch_init = apply_overrides(preset.config, ["model.init=torch"])
    runs = [
        SimpleNamespace(config_hash=name, config_json=json.dumps(config_to_dict(config)))
        for name, config in (("default", preset.config), ("torch", torch_init))
    ]
    labels = variant_labels(["default", "torch"], run_configs(runs))
    assert labels == {"default": "model.init=gpt2", "torch": "model.init=torch"}
    assert _departures(preset, runs[:1]) == ()
    assert _departures(preset, runs) == ('model.init="torch" (the preset\'s: "gpt2")',)
