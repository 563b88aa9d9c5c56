"""Configs, overrides and presets."""

import dataclasses
import math

import pytest

import gelus
from gelus.experiments import PRESETS
from gelus.experiments.config import (
    ConfigError,
    apply_overrides,
    config_hash,
    config_keys,
    validate,
)
from gelus.experiments.engines.cnn.config import CIFAR10AllConvConfig
from gelus.experiments.engines.mlp.config import MLPExperimentConfig
from gelus.experiments.errors import SettingError
from gelus.experiments.run import resolve_config as resolve_preset


def resolve_config(name, **kwargs):
    """The preset's config with its activations resolved, as ``resolve_run`` does first."""
    preset, config, _ = resolve_preset(name, **kwargs)
    return preset, config


def test_override_sets_nested_values_with_types():
    config = apply_overrides(
        MLPExperimentConfig(),
        [
            "optim.lr=1e-3",
            "train.epochs=7",
            "train.keep=1,0.5",
            "model.hidden=64,32",
            "train.compile=true",
            "activations=gelu,silu",
        ],
    )
    assert config.optim.lr == (1e-3,)
    assert config.train.epochs == 7 and isinstance(config.train.epochs, int)
    assert config.train.keep == (1.0, 0.5)
    assert config.model.hidden == (64, 32)
    assert config.train.compile is True
    assert config.activations == ("gelu", "silu")


def test_unknown_key_lists_valid_keys():
    with pytest.raises(ConfigError) as error:
        apply_overrides(MLPExperimentConfig(), ["optim.learning_rate=1e-3"])
    message = str(error.value)
    assert "optim.learning_rate" in message
    for key in ("optim.lr", "train.epochs", "model.approximate", "noise.levels"):
        assert key in message
    with pytest.raises(ConfigError, match="valid keys"):
        apply_overrides(MLPExperimentConfig(), ["optim=3"])  # a section, not a value


@pytest.mark.parametrize(
    "override", ["train.epochs=ten", "optim.lr=fast", "train.compile=maybe", "train.epochs"]
)
def test_wrong_type_or_form_is_an_error(override):
    with pytest.raises(ConfigError):
        apply_overrides(MLPExperimentConfig(), [override])


@pytest.mark.parametrize(
    "override",
    [
        "train.epochs=0",
        "train.keep=1.5",
        "optim.lr=-1e-3",
        "model.approximate=cubic",
        "optim.lr=nan",
        "optim.lr=inf",
        "optim.lr=0",
        "model.init=glorot",
    ],
)
def test_validation_rejects_out_of_range(override):
    with pytest.raises(ConfigError):
        validate(apply_overrides(MLPExperimentConfig(), [override]))


def test_config_hash_ignores_sweep_axes_only():
    base = MLPExperimentConfig()
    assert config_hash(base) == config_hash(
        apply_overrides(base, ["train.seeds=9", "optim.lr=1e-2", "activations=silu"])
    )
    assert config_hash(base) != config_hash(apply_overrides(base, ["train.epochs=3"]))
    assert config_hash(base) != config_hash(apply_overrides(base, ["model.approximate=none"]))


def test_presets_carry_paper_protocol():
    expected = {
        "mnist-classification",
        "mnist-noise",
        "mnist-autoencoder",
        "twitter-pos",
        "timit",
        "cifar10-allconv",
        "cifar100-wrn",
        "stochastic-gelu",
    }
    assert expected <= set(PRESETS)
    for preset in (PRESETS[name] for name in expected):
        assert "1606.08415" in preset.citation
        assert preset.paper_summary and {"training set", "runs", "epochs"} <= set(
            preset.paper_setup
        )
        assert preset.config.model.approximate == "tanh"  # the paper's form, everywhere
        assert preset.quick
    mnist = PRESETS["mnist-classification"].config
    assert (mnist.model.hidden, mnist.train.keep, mnist.optim.lr) == (
        (128,) * 8,
        (1.0, 0.5),
        (1e-3, 1e-4, 1e-5),
    )
    assert (mnist.train.epochs, mnist.train.batch_size, mnist.model.init) == (50, 128, "unit_norm")
    assert PRESETS["mnist-classification"].substitute == "fashion-mnist"
    auto = PRESETS["mnist-autoencoder"].config
    assert auto.model.hidden == (1000, 500, 250, 30, 250, 500, 1000)
    assert (auto.train.epochs, auto.train.batch_size, auto.optim.lr, auto.train_on) == (
        250,
        64,
        (1e-3, 1e-4),
        "train+val",
    )
    noise = PRESETS["mnist-noise"].config.noise.levels
    assert noise[0] == 0 and noise[-1] == 3 and len(noise) == 13
    assert PRESETS["twitter-pos"].paper_results == {"gelu": 0.1257, "relu": 0.1267, "elu": 0.1291}
    assert math.isclose(PRESETS["cifar100-wrn"].paper_results["gelu"], 0.2074)
    assert PRESETS["stochastic-gelu"].config.train.keep == (1.0, 0.75, 0.5)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_and_its_quick_version_resolve(name):
    _, config = resolve_config(name)
    _, quick = resolve_config(name, quick=True)
    assert quick.train.epochs < config.train.epochs
    if config.task == "cnn":
        assert dataclasses.is_dataclass(config.cnn) and quick.cnn == config.cnn


def test_resolve_config_explicit_arguments_win_over_quick():
    _, config = resolve_config(
        "mnist-classification",
        activations=["silu", "gelu_tanh"],
        seeds=2,
        epochs=3,
        overrides=["optim.lr=1e-2"],
        quick=True,
    )
    assert config.activations == ("silu", "gelu_tanh")
    assert (config.train.seeds, config.train.epochs, config.optim.lr) == (2, 3, (1e-2,))
    assert config.train.train_subset == 20000  # from quick


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "mnist-clasification"}, "valid experiments"),
        ({"activations": ["gleu"]}, "gleu"),
        ({"seeds": -1}, "seeds"),
        ({"epochs": 0}, "epochs"),
        ({"overrides": ["train.epoch=3"]}, "valid keys"),
        ({"activations": ["prelu"]}, "learnable"),
    ],
)
def test_bad_input_is_a_user_error(kwargs, match):
    name = kwargs.pop("name", "mnist-classification")
    with pytest.raises(SettingError, match=match):
        resolve_config(name, **kwargs)


def test_every_parameter_free_registry_activation_is_accepted():
    accepted = []
    for name in gelus.list_activations():
        try:
            resolve_config("mnist-classification", activations=[name])
            accepted.append(name)
        except SettingError as error:
            assert any(
                word in str(error) for word in ("learnable", "arguments", "shape", "gated")
            ), str(error)
    assert {"gelu", "relu", "elu", "silu", "stochastic_gelu"} <= set(accepted)


def test_config_keys_are_dotted_and_complete():
    keys = config_keys(MLPExperimentConfig())
    assert "optim.lr" in keys and "train.epochs" in keys and "activations" in keys
    assert len(keys) == len(set(keys))
    assert all(
        not dataclasses.is_dataclass(getattr(MLPExperimentConfig(), k))
        for k in keys
        if "." not in k
    )


def test_config_hash_changes_with_the_engine_version(monkeypatch):
    import gelus.experiments.config as config_module

    base = MLPExperimentConfig()
    before = config_hash(base)
    monkeypatch.setattr(config_module, "ENGINE_VERSION", config_module.ENGINE_VERSION + 1)
    assert config_hash(base) != before


def test_presets_are_in_the_papers_order():
    assert list(PRESETS) == [
        "mnist-classification", "mnist-noise", "mnist-autoencoder", "twitter-pos", "timit",
        "cifar10-allconv", "cifar100-wrn", "stochastic-gelu",
        "transformer-lm", "transformer-vit", "transformer-scale",  # beyond the paper, after it
    ]  # fmt: skip


def test_the_old_gelu_form_key_is_refused_naming_the_new_one():
    with pytest.raises(SettingError, match=r"model\.gelu_form.*did you mean model\.approximate"):
        resolve_config("mnist-noise", overrides=["model.gelu_form=none"])
    _, config = resolve_config("mnist-noise", overrides=["model.approximate=none"])
    assert config.model.approximate == "none"


@pytest.mark.parametrize("lr", ["nan", "inf", "-inf", "0", "-1e-3", "1e-3,nan"])
def test_a_learning_rate_that_is_not_finite_and_positive_is_refused(lr):
    with pytest.raises(SettingError, match=r"optim\.lr"):
        resolve_config("mnist-classification", overrides=[f"optim.lr={lr}"])
    resolve_config("mnist-classification", overrides=["optim.lr=1e38"])  # large but finite


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("cifar100-wrn", "train.keep=0.5"),
        ("cifar100-wrn", "train.dtype=float64"),
        ("cifar10-allconv", "optim.eps=1e-4"),
        ("cifar10-allconv", "model.hidden=64"),
    ],
)
def test_a_setting_with_no_effect_is_refused_with_the_valid_keys(name, key):
    with pytest.raises(SettingError, match="unknown config key") as error:
        resolve_config(name, overrides=[key])
    assert (
        "valid keys" in str(error.value)
        and key.split("=")[0] not in str(error.value).split("valid keys")[1]
    )


def test_dropout_on_the_autoencoder_is_refused():
    with pytest.raises(SettingError, match="autoencoder trains without dropout"):
        resolve_config("mnist-autoencoder", overrides=["train.keep=0.5"])


@pytest.mark.parametrize(
    "key", ["cnn.batch_size=16", "cnn.val_size=32", "cnn.epochs=3", "cnn.lr=0.1"]
)
def test_the_cnn_keys_that_had_a_twin_no_longer_exist(key):
    with pytest.raises(SettingError, match="unknown config key"):
        resolve_config("cifar100-wrn", overrides=[key])


def test_the_cnns_read_the_shared_knobs():
    _, config = resolve_config(
        "cifar10-allconv", epochs=4, overrides=["train.batch_size=50", "optim.lr=1e-4"]
    )
    assert (config.train.epochs, config.train.batch_size, config.optim.lr) == (4, 50, (1e-4,))
    assert isinstance(config.cnn, CIFAR10AllConvConfig)


def test_cifar100_trains_on_all_50k_and_states_its_steps():
    wrn = PRESETS["cifar100-wrn"]
    assert wrn.config.cnn.retrain_full and wrn.train_size == 50_000
    assert wrn.steps == 50_000 // 128 * 50 == 19_500
    assert "19,500" in " ".join(wrn.fidelity) and "39,050" in wrn.paper_setup["steps"]
    allconv = PRESETS["cifar10-allconv"]
    assert (
        not allconv.config.cnn.retrain_full and allconv.protocol.retrain_key == "cnn.retrain_full"
    )
    assert f"{allconv.steps:,}" in " ".join(allconv.fidelity)
    for preset in PRESETS.values():
        if preset.config.task == "cnn":
            assert "steps" in preset.paper_setup and preset.steps


def test_paper_claims_as_the_paper_states_them():
    mnist = PRESETS["mnist-classification"].paper_summary
    assert "GELU lowest, then ELU, then ReLU with dropout" in mnist
    assert "tends to have the lowest training loss" in mnist
    assert "§3.3" in PRESETS["twitter-pos"].citation
    assert PRESETS["twitter-pos"].paper_setup["runs"] == PRESETS["timit"].paper_setup["runs"] == "5"
    soi = PRESETS["stochastic-gelu"]
    assert "gelus run twitter-pos" not in " ".join(soi.fidelity)
    assert soi.protocol.tune_setting and "11.9 %" in soi.paper_summary
    assert "TensorFlow's input_data" in " ".join(PRESETS["mnist-classification"].fidelity)
    assert "effective ε" in " ".join(PRESETS["cifar10-allconv"].fidelity)


def test_run_help_after_a_preset_lists_its_keys_with_values(capsys):
    from gelus.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "cifar10-allconv", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "cnn.adam_eps                 1e-08" in out and "optim.eps" not in out
    assert "train.epochs                 200" in out and "--quick sets: train.epochs=2" in out
    with pytest.raises(SystemExit):
        main(["run", "mnist-classification", "--help"])
    out = capsys.readouterr().out
    assert "train.keep" in out and "activations                  gelu,relu,elu,silu" in out
