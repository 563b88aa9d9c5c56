"""Experiment configs: frozen dataclasses with one commented default per line, and overrides.

An override is ``key=value`` with a dotted key into the config (``optim.lr=1e-3``,
``train.epochs=10``, ``activations=gelu,relu``). Tuple fields take comma-separated values, so
``optim.lr=1e-3`` sets a one-point learning-rate grid. An unknown key or a value of the wrong type
is an error that lists the valid keys; :func:`validate` then checks ranges and names.
"""

import dataclasses
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gelus.experiments.cnn_config import CNNConfig

__all__ = [
    "BOOKKEEPING_KEYS",
    "RENAMED_KEYS",
    "STOCHASTIC_ACTIVATIONS",
    "SWEEP_KEYS",
    "TASKS",
    "ConfigError",
    "ExperimentConfig",
    "ModelConfig",
    "NoiseConfig",
    "OptimConfig",
    "TrainConfig",
    "apply_overrides",
    "canonical_activation",
    "check_batch_fits",
    "config_hash",
    "config_keys",
    "config_to_dict",
    "flat_config",
    "identity_keys",
    "inert_keys",
    "is_stochastic",
    "validate",
]

TASKS = ("classify", "autoencode", "cnn")
INITS = ("unit_norm", "torch")
# Activations whose forward pass draws its own mask (the SOI map); the engine feeds them uniforms.
STOCHASTIC_ACTIVATIONS = ("stochastic_gelu",)


class ConfigError(ValueError):
    """An override or a config value is invalid; the message names the key and the valid choices."""


@dataclass(frozen=True)
class ModelConfig:
    hidden: tuple[int, ...] = (128,) * 8  # hidden layer widths (the paper's MNIST net: 8 × 128)
    init: str = "unit_norm"  # "unit_norm": normal weights, each unit's fan-in scaled to L2 norm 1 (paper); "torch": nn.Linear default
    approximate: str = "tanh"  # "gelu" means gelu(x, approximate=...): "none" | "tanh" | "sigmoid"; the paper used "tanh" everywhere


@dataclass(frozen=True)
class OptimConfig:
    name: str = "adam"  # the paper's TF scripts: Adam with default betas
    lr: tuple[float, ...] = (1e-3, 1e-4, 1e-5)  # learning-rate grid, every point a separate run
    beta1: float = 0.9  # Adam β1 (TF and torch default)
    beta2: float = 0.999  # Adam β2 (TF and torch default)
    eps: float = 1e-8  # Adam ε (TF and torch default)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 50  # passes over the training set
    batch_size: int = 128  # samples per step; the last partial batch of an epoch is dropped
    seeds: int = 5  # runs per (activation, setting, lr), seeds 0 .. seeds-1 (paper: medians of 5)
    keep: tuple[float, ...] = (
        1.0,
    )  # dropout keep probabilities, one setting each (1.0 = no dropout)
    train_subset: int = 0  # train on the first N training samples (0 = all); quick runs only
    eval_train_subset: int = 0  # evaluate the train loss on the first N of those (0 = all)
    eval_batch_size: int = 1000  # samples per evaluation batch
    checkpoint_every: int = 1  # epochs between checkpoints (the last epoch always saves)
    compile: bool = False  # torch.compile the training step (pays only on long runs: ~15 s cold)
    dtype: str = "float32"  # parameter and activation dtype ("float32" or "float64")
    tf32: bool = (
        False  # CUDA only: allow TF32 matmuls/convs (faster, 10-bit mantissa); off for fidelity
    )


@dataclass(frozen=True)
class NoiseConfig:
    levels: tuple[
        float, ...
    ] = ()  # half-widths a of Uniform[-a, a] test noise, evaluated after the last epoch
    seed: int = 1234  # seed of the noise draws, shared by every run so the comparison is paired


@dataclass(frozen=True)
class ExperimentConfig:
    task: str = "classify"  # "classify" (softmax cross-entropy), "autoencode" (MSE), "cnn"
    dataset: str = "mnist"  # gelus.data name; a preset may allow a substitute when it is absent
    activations: tuple[str, ...] = ("gelu", "relu", "elu")  # one stacked ensemble per activation
    train_on: str = "train"  # "train", or "train+val" (the autoencoder trains on all 60k)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    cnn: CNNConfig | None = None  # task "cnn": the network's own typed config, keys cnn.KEY


# Sweep axes: each value is its own run, so they are not part of a run's identity hash.
SWEEP_KEYS = ("activations", "optim.lr", "train.seeds", "train.keep")
# Keys that do not change a run's results.
BOOKKEEPING_KEYS = ("train.checkpoint_every", "train.eval_batch_size")

# Keys a task never reads: setting one would change nothing, so it is refused (key -> the reason).
_CNN_ENGINE = "the CNN engine does not read it"
_INERT_KEYS: dict[str, dict[str, str]] = {
    "cnn": {
        "train_on": "the CNN trains on train, or train + val with cnn.retrain_full",
        "model.hidden": "the network is cnn.widths",
        "model.init": "the CNNs have their own init",
        "optim.name": "the network's optimizer is fixed by its config",
        "optim.beta1": "the all-conv net's β₁ is cnn.beta1 / cnn.beta1_late",
        "optim.beta2": "use cnn.beta2",
        "optim.eps": "use cnn.adam_eps",
        "train.keep": "the CNN's dropout is cnn.dropout",
        "train.train_subset": _CNN_ENGINE,
        "train.eval_train_subset": "use cnn.train_eval_size",
        "train.eval_batch_size": "use cnn.eval_batch_size",
        "train.checkpoint_every": "the CNN checkpoints every epoch",
        "train.compile": "use cnn.compile (a torch.compile mode)",
        "train.dtype": "use cnn.amp_dtype",
        "noise.levels": _CNN_ENGINE,
        "noise.seed": _CNN_ENGINE,
    },
    "autoencode": {
        "train.keep": "the autoencoder trains without dropout",
        "noise.levels": "noise evaluation applies to classifiers only",
        "noise.seed": "noise evaluation applies to classifiers only",
    },
}
# Keys that were renamed: the old name is refused with the new one.
RENAMED_KEYS = {"model.gelu_form": "model.approximate", "cnn.gelu_form": "model.approximate"}


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as nested plain dicts and lists (JSON-ready)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


# Bump when the training arithmetic or random streams change (e.g. how dropout masks are drawn):
# a run's identity then changes, so old checkpoints and records are never resumed into new ones.
ENGINE_VERSION = 2


def config_hash(config: ExperimentConfig) -> str:
    """SHA-256 (first 12 hex digits) of the config without sweep axes and bookkeeping keys.

    Two runs with equal hash, activation, setting, lr and seed are the same run: extending a sweep
    (more seeds, another lr) reuses the runs already done. ``ENGINE_VERSION`` is part of the hash.
    """
    flat = identity_keys(flat_config(config_to_dict(config)))
    flat["engine_version"] = ENGINE_VERSION
    text = json.dumps(flat, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def flat_config(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flat_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def identity_keys(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat config without its sweep axes and bookkeeping keys: what a config hash stands for."""
    return {k: v for k, v in flat.items() if k not in SWEEP_KEYS + BOOKKEEPING_KEYS}


def config_keys(config: Any, prefix: str = "") -> list[str]:
    """Every overridable dotted key of a config dataclass (nested dataclasses expanded); for an
    :class:`ExperimentConfig`, only the keys its task reads."""
    keys = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            keys.extend(config_keys(value, f"{prefix}{f.name}."))
        elif f.name != "cnn":
            keys.append(f"{prefix}{f.name}")
    if isinstance(config, ExperimentConfig) and not prefix:
        inert = _INERT_KEYS.get(config.task, {})
        keys = [key for key in keys if key not in inert]
    return keys


def inert_keys(config: ExperimentConfig) -> dict[str, str]:
    """The keys ``config``'s task never reads, each with why (setting one is refused)."""
    return dict(_INERT_KEYS.get(config.task, {}))


def _parse_scalar(text: str, kind: type, key: str) -> Any:
    text = text.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true or false, got {text!r}")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{key}: expected {kind.__name__}, got {text!r}") from None
    if kind is str:
        return text
    raise ConfigError(f"{key}: cannot be set from the command line")


def _parse_value(text: str, annotation: Any, key: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # X | None
        if text.strip().lower() in ("none", "null", ""):
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _parse_value(text, inner, key)
    if origin is tuple:
        item_type = args[0]
        items = [part for part in text.split(",") if part.strip()]
        values = tuple(_parse_scalar(part, item_type, key) for part in items)
        if len(args) == 2 and args[1] is Ellipsis:
            return values
        if len(values) != len(args):
            raise ConfigError(f"{key}: expected {len(args)} comma-separated values, got {text!r}")
        return values
    return _parse_scalar(text, annotation, key)


def _set(config: Any, path: list[str], text: str, full_key: str, all_keys: list[str]) -> Any:
    names = {f.name: f for f in dataclasses.fields(config)}
    name = path[0]
    if name not in names or (len(path) == 1 and dataclasses.is_dataclass(getattr(config, name))):
        raise ConfigError(f"unknown config key {full_key!r}; valid keys: {', '.join(all_keys)}")
    value = getattr(config, name)
    if len(path) > 1:
        if not dataclasses.is_dataclass(value):
            raise ConfigError(f"unknown config key {full_key!r}; valid keys: {', '.join(all_keys)}")
        return dataclasses.replace(
            config, **{name: _set(value, path[1:], text, full_key, all_keys)}
        )
    hints = typing.get_type_hints(type(config))
    return dataclasses.replace(config, **{name: _parse_value(text, hints[name], full_key)})


def apply_overrides(config: Any, overrides: typing.Iterable[str]) -> Any:
    """``config`` with each ``key=value`` override applied (dotted keys, tuples comma-separated).

    >>> apply_overrides(ExperimentConfig(), ["optim.lr=1e-3"]).optim.lr
    (0.001,)
    """
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.strip()
        all_keys = config_keys(config)
        if not sep or not key:
            raise ConfigError(
                f"override {override!r} is not key=value; valid keys: {', '.join(all_keys)}"
            )
        if key in RENAMED_KEYS:
            raise ConfigError(
                f"{key} is now {RENAMED_KEYS[key]}: use --set {RENAMED_KEYS[key]}={text}"
            )
        inert = inert_keys(config) if isinstance(config, ExperimentConfig) else {}
        if key in inert:
            raise ConfigError(
                f"{key} has no effect on a {config.task} experiment ({inert[key]}); "
                f"valid keys: {', '.join(all_keys)}"
            )
        config = _set(config, key.split("."), text, key, all_keys)
    return config


def canonical_activation(name: str) -> str:
    """The registry's canonical name for ``name`` (an alias such as ``soi_map`` resolves); a
    ``module:attribute`` activation is imported and checked, and goes by its label."""
    from gelus.experiments.custom_activations import (
        CustomActivationError,
        is_custom_spec,
        resolve_activation_spec,
    )
    from gelus.registry import resolve_activation

    if is_custom_spec(name):
        try:
            return resolve_activation_spec(name).label
        except CustomActivationError as error:
            raise ConfigError(str(error)) from None

    try:
        return resolve_activation(name)[0]
    except (KeyError, ValueError) as error:
        raise ConfigError(str(error)) from None


def is_stochastic(name: str) -> bool:
    """Whether ``name`` is an activation that draws its own mask (the SOI map); a user's
    ``module:attribute`` activation never is (its module draws whatever it draws itself)."""
    from gelus.experiments.custom_activations import is_custom_spec

    return not is_custom_spec(name) and canonical_activation(name) in STOCHASTIC_ACTIVATIONS


def validate(config: ExperimentConfig) -> None:
    """Check ranges and names; raise ConfigError naming the key and the valid values."""
    from gelus.functional import APPROXIMATIONS

    checks = [
        (config.task in TASKS, "task", f"one of {', '.join(TASKS)}"),
        (config.train_on in ("train", "train+val"), "train_on", "train or train+val"),
        (len(config.activations) > 0, "activations", "at least one name"),
        (config.model.init in INITS, "model.init", f"one of {', '.join(INITS)}"),
        (
            config.model.approximate in APPROXIMATIONS,
            "model.approximate",
            f"one of {', '.join(APPROXIMATIONS)}",
        ),
        (all(h > 0 for h in config.model.hidden), "model.hidden", "positive widths"),
        (config.optim.name == "adam", "optim.name", "adam"),
        (
            len(config.optim.lr) > 0
            and all(math.isfinite(lr) and lr > 0 for lr in config.optim.lr),
            "optim.lr",
            "finite positive learning rates",
        ),
        (
            0 <= config.optim.beta1 < 1 and 0 <= config.optim.beta2 < 1,
            "optim.beta1/beta2",
            "in [0, 1)",
        ),
        (config.optim.eps > 0, "optim.eps", "positive"),
        (config.train.epochs >= 1, "train.epochs", "at least 1"),
        (config.train.batch_size >= 1, "train.batch_size", "at least 1"),
        (config.train.seeds >= 1, "train.seeds", "at least 1"),
        (
            len(config.train.keep) > 0 and all(0 < k <= 1 for k in config.train.keep),
            "train.keep",
            "in (0, 1]",
        ),
        (config.train.train_subset >= 0, "train.train_subset", "0 (all) or a positive count"),
        (
            config.train.eval_train_subset >= 0,
            "train.eval_train_subset",
            "0 (all) or a positive count",
        ),
        (config.train.eval_batch_size >= 1, "train.eval_batch_size", "at least 1"),
        (config.train.checkpoint_every >= 1, "train.checkpoint_every", "at least 1"),
        (config.train.dtype in ("float32", "float64"), "train.dtype", "float32 or float64"),
        (all(a >= 0 for a in config.noise.levels), "noise.levels", "non-negative half-widths"),
    ]
    for ok, key, expected in checks:
        if not ok:
            raise ConfigError(f"{key}: invalid value; expected {expected}")
    for name in config.activations:
        canonical_activation(name)
    from gelus.experiments.custom_activations import activation_label

    labels = [activation_label(name) for name in config.activations]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(
            f"activations: {', '.join(repeated)} named twice; give a module:attribute activation "
            "its own label as label=module:attribute"
        )
    if config.task == "autoencode" and config.noise.levels:
        raise ConfigError("noise.levels: noise evaluation applies to classifiers only")
    if (config.task == "cnn") != (config.cnn is not None):
        raise ConfigError("cnn: a cnn task needs its network's config, and only a cnn task has one")
    if config.task == "cnn":
        stochastic = [a for a in config.activations if is_stochastic(a)]
        if stochastic:
            raise ConfigError(f"activation {stochastic[0]!r} is not available in the CNNs")


def check_batch_fits(config: ExperimentConfig, train_size: int) -> None:
    """Refuse a batch larger than the ``train_size`` samples a run trains on (no step per epoch)."""
    if config.train.batch_size > train_size:
        raise ConfigError(
            f"train.batch_size={config.train.batch_size} is larger than the {train_size} training "
            f"samples: no full batch, so no step per epoch; set train.batch_size to {train_size} or less"
        )
