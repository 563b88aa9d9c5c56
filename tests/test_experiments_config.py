"""Configs, overrides and presets."""

import dataclasses
import math

import pytest

import gelus
from gelus.cli import UserError
from gelus.experiments import PRESETS
from gelus.experiments.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_hash,
    config_keys,
    validate,
)
from gelus.experiments.runner import resolve_config


def test_override_sets_nested_values_with_types():
    config = apply_overrides(
        ExperimentConfig(),
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
        apply_overrides(ExperimentConfig(), ["optim.learning_rate=1e-3"])
    message = str(error.value)
    assert "optim.learning_rate" in message
    for key in ("optim.lr", "train.epochs", "model.gelu_form", "noise.levels"):
        assert key in message
    with pytest.raises(ConfigError, match="valid keys"):
        apply_overrides(ExperimentConfig(), ["optim=3"])  # a section, not a value


@pytest.mark.parametrize(
    "override", ["train.epochs=ten", "optim.lr=fast", "train.compile=maybe", "train.epochs"]
)
def test_wrong_type_or_form_is_an_error(override):
    with pytest.raises(ConfigError):
        apply_overrides(ExperimentConfig(), [override])


@pytest.mark.parametrize(
    "override",
    [
        "train.epochs=0",
        "train.keep=1.5",
        "optim.lr=-1e-3",
        "model.gelu_form=cubic",
        "model.init=xavier",
        "activations=nonsense",
    ],
)
def test_validation_rejects_out_of_range(override):
    with pytest.raises(ConfigError):
        validate(apply_overrides(ExperimentConfig(), [override]))


def test_config_hash_ignores_sweep_axes_only():
    base = ExperimentConfig()
    assert config_hash(base) == config_hash(
        apply_overrides(base, ["train.seeds=9", "optim.lr=1e-2", "activations=silu"])
    )
    assert config_hash(base) != config_hash(apply_overrides(base, ["train.epochs=3"]))
    assert config_hash(base) != config_hash(apply_overrides(base, ["model.gelu_form=none"]))


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
    for preset in PRESETS.values():
        assert "1606.08415" in preset.citation
        assert preset.paper_results
        assert preset.config.model.gelu_form == "tanh"  # the paper's form, everywhere
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
        assert quick.cnn.epochs == quick.train.epochs and quick.cnn.gelu_form == "tanh"


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
    with pytest.raises(UserError, match=match):
        resolve_config(name, **kwargs)


def test_every_parameter_free_registry_activation_is_accepted():
    accepted = []
    for name in gelus.list_activations():
        try:
            resolve_config("mnist-classification", activations=[name])
            accepted.append(name)
        except UserError as error:
            assert (
                "learnable" in str(error) or "arguments" in str(error) or "shape" in str(error)
            ), str(error)
    assert {"gelu", "relu", "elu", "silu", "stochastic_gelu"} <= set(accepted)


def test_config_keys_are_dotted_and_complete():
    keys = config_keys(ExperimentConfig())
    assert "optim.lr" in keys and "train.epochs" in keys and "activations" in keys
    assert len(keys) == len(set(keys))
    assert all(
        not dataclasses.is_dataclass(getattr(ExperimentConfig(), k)) for k in keys if "." not in k
    )


def test_config_hash_changes_with_the_engine_version(monkeypatch):
    import gelus.experiments.config as config_module

    base = ExperimentConfig()
    before = config_hash(base)
    monkeypatch.setattr(config_module, "ENGINE_VERSION", config_module.ENGINE_VERSION + 1)
    assert config_hash(base) != before
