"""Experiment configs, one per engine: frozen dataclasses with one commented default per line.

A task config is a tagged union: :class:`MLPExperimentConfig` (tasks ``classify`` and
``autoencode``, the stacked-MLP engine), :class:`CNNExperimentConfig` (task ``cnn``) or
:class:`TransformerExperimentConfig` (task ``lm``, the transformer engine) or
:class:`ViTExperimentConfig` (task ``vit``), each
holding only what its engine reads, so a key an engine does not read does not exist for its
presets. An override is ``key=value`` with a dotted key into the config (``optim.lr=1e-3``,
``train.epochs=10``, ``activations=gelu,relu``); tuple fields take comma-separated values. An
unknown key or a value of the wrong type is a :class:`ConfigError` that lists the valid keys;
:func:`validate` then checks ranges. Activation names are resolved elsewhere
(:mod:`gelus.experiments.activation_spec`): here they are strings.
"""

import dataclasses
import difflib
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gelus._common import APPROXIMATIONS
from gelus.experiments.engines.cnn.config import CIFAR10AllConvConfig, CNNConfig
from gelus.experiments.engines.transformer.config import (
    TransformerModelConfig,
    TransformerOptimConfig,
    TransformerTrainConfig,
    ViTModelConfig,
    ViTTrainConfig,
    lm_checks,
    vit_checks,
)
from gelus.experiments.errors import ConfigError

__all__ = [
    "BOOKKEEPING_KEYS",
    "LIMITS",
    "ONE_RUN_PER_JOB",
    "SWEEP_KEYS",
    "TASKS",
    "CNNExperimentConfig",
    "CNNModelConfig",
    "CNNOptimConfig",
    "CNNTrainConfig",
    "ConfigError",
    "ExperimentConfig",
    "MLPExperimentConfig",
    "ModelConfig",
    "NoiseConfig",
    "OptimConfig",
    "TrainConfig",
    "TransformerExperimentConfig",
    "ViTExperimentConfig",
    "apply_overrides",
    "config_hash",
    "config_keys",
    "config_to_dict",
    "failed_checks",
    "flat_config",
    "identity_keys",
    "validate",
]

TASKS = ("classify", "autoencode", "cnn", "lm", "vit")
INITS = ("unit_norm", "torch")
# Upper bounds on counts: beyond these a value is a typo, and planning it would exhaust memory.
LIMITS = {"seeds": 10_000, "epochs": 100_000, "runs": 1_000_000}


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
    keep_models: bool = False  # keep each finished job's final state in OUT/models/ (for reuse)
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
class MLPExperimentConfig:
    """The stacked-MLP engine's config: classifiers and the autoencoder of the MNIST, Twitter POS
    and TIMIT experiments."""

    task: str = "classify"  # "classify" (softmax cross-entropy) or "autoencode" (MSE)
    dataset: str = "mnist"  # gelus.data name; a preset may allow a substitute when it is absent
    activations: tuple[str, ...] = ("gelu", "relu", "elu")  # one stacked ensemble per activation
    train_on: str = "train"  # "train", or "train+val" (the autoencoder trains on all 60k)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)

    engine: typing.ClassVar[str] = "mlp"


@dataclass(frozen=True)
class CNNModelConfig:
    approximate: str = "tanh"  # "gelu" means gelu(x, approximate=...); the paper used "tanh"


@dataclass(frozen=True)
class CNNOptimConfig:
    lr: tuple[float, ...] = (1e-3, 1e-4, 1e-5)  # peak learning-rate grid, every point a run


@dataclass(frozen=True)
class CNNTrainConfig:
    epochs: int = 50  # passes over the training set
    batch_size: int = 128  # images per step; the last partial batch of an epoch is dropped
    seeds: int = 5  # runs per (activation, lr), seeds 0 .. seeds-1
    tf32: bool = False  # CUDA only: allow TF32 matmuls/convs (faster, 10-bit mantissa)


@dataclass(frozen=True)
class CNNExperimentConfig:
    """The CNN engine's config: one network of the CIFAR experiments per run (``cnn``: its typed
    network config, schedule and augmentation included, keys ``cnn.KEY``)."""

    task: str = "cnn"
    dataset: str = "cifar10"  # gelus.data name
    activations: tuple[str, ...] = ("gelu", "relu", "elu")  # one run per activation, lr and seed
    model: CNNModelConfig = field(default_factory=CNNModelConfig)
    optim: CNNOptimConfig = field(default_factory=CNNOptimConfig)
    train: CNNTrainConfig = field(default_factory=CNNTrainConfig)
    cnn: CNNConfig = field(default_factory=CIFAR10AllConvConfig)

    engine: typing.ClassVar[str] = "cnn"


@dataclass(frozen=True)
class TransformerExperimentConfig:
    """The transformer engine's config: a byte-level decoder-only language model per run, its FFN
    activation the swept axis (keys ``model.*``, ``optim.*``, ``train.*`` of
    :mod:`gelus.experiments.engines.transformer.config`)."""

    task: str = "lm"
    dataset: str = "fortunes"  # gelus.data name of a byte corpus (fortunes, text)
    activations: tuple[str, ...] = ("gelu", "relu")  # one run per activation, lr and seed
    model: TransformerModelConfig = field(default_factory=TransformerModelConfig)
    optim: TransformerOptimConfig = field(default_factory=TransformerOptimConfig)
    train: TransformerTrainConfig = field(default_factory=TransformerTrainConfig)

    engine: typing.ClassVar[str] = "transformer"


@dataclass(frozen=True)
class ViTExperimentConfig:
    """The ViT engine's config: a small vision transformer per run, the LM's blocks without the
    mask over image patches, its FFN activation the swept axis; the LM's optimizer config."""

    task: str = "vit"
    dataset: str = "fashion-mnist"  # gelus.data name of an image classification dataset
    activations: tuple[str, ...] = ("gelu", "relu")  # one run per activation, lr and seed
    model: ViTModelConfig = field(default_factory=ViTModelConfig)
    optim: TransformerOptimConfig = field(default_factory=TransformerOptimConfig)
    train: ViTTrainConfig = field(default_factory=ViTTrainConfig)

    engine: typing.ClassVar[str] = "vit"


ExperimentConfig = (
    MLPExperimentConfig | CNNExperimentConfig | TransformerExperimentConfig | ViTExperimentConfig
)
# the engines that train one network per run (one job each), with a validation split kept apart
ONE_RUN_PER_JOB = (CNNExperimentConfig, TransformerExperimentConfig, ViTExperimentConfig)

# Sweep axes: each value is its own run, so they are not part of a run's identity hash.
SWEEP_KEYS = ("activations", "optim.lr", "train.seeds", "train.keep")
# Keys that do not change a run's results (``train.stack``: a run trained stacked equals the same
# run trained alone to float tolerance).
BOOKKEEPING_KEYS = (
    "train.checkpoint_every", "train.eval_batch_size", "train.keep_models", "train.stack",
)  # fmt: skip
# Keys users reach for that live elsewhere, for the "did you mean" of an unknown key.
_SEE_ALSO = {
    "optim.eps": "cnn.adam_eps",
    "optim.beta1": "cnn.beta1",
    "optim.beta2": "cnn.beta2",
    "train.keep": "cnn.dropout",
    "train.compile": "cnn.compile",
    "train.dtype": "cnn.amp_dtype",
    "train.eval_batch_size": "cnn.eval_batch_size",
    "train.eval_train_subset": "cnn.train_eval_size",
    "model.gelu_form": "model.approximate",
    "model.d": "model.d_model",
    "model.n_layer": "model.layers",
    "model.block_size": "model.context",
    "train.steps": "train.steps_per_epoch",
    "cnn.gelu_form": "model.approximate",
}


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as nested plain dicts and lists (JSON-ready).

    A task config gives the one shape every version of the harness has stored and hashed: the MLP
    keys, ``cnn`` (None for an MLP), and for a CNN the MLP keys it does not read at their defaults,
    so that run folders made before the configs were split keep their hashes and resume.
    """
    if isinstance(config, CNNExperimentConfig):
        shared = MLPExperimentConfig(
            task=config.task,
            dataset=config.dataset,
            activations=config.activations,
            model=ModelConfig(approximate=config.model.approximate),
            optim=OptimConfig(lr=config.optim.lr),
            train=TrainConfig(**dataclasses.asdict(config.train)),
        )
        return config_to_dict(shared) | {"cnn": config_to_dict(config.cnn)}
    tree = json.loads(json.dumps(dataclasses.asdict(config)))
    if isinstance(config, TransformerExperimentConfig | ViTExperimentConfig):
        return tree  # a new engine: its own shape, no earlier one to keep
    if isinstance(config, MLPExperimentConfig):
        tree["cnn"] = None
    return tree


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
    """Every overridable dotted key of a config dataclass (nested dataclasses expanded)."""
    keys = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            keys.extend(config_keys(value, f"{prefix}{f.name}."))
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _quote(text: str) -> str:
    """``text`` for a message: at most its first 60 characters."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"


def _parse_scalar(text: str, kind: type, key: str) -> Any:
    text = text.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true or false, got {_quote(text)}")
    if kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            raise ConfigError(f"{key}: expected {kind.__name__}, got {_quote(text)}") from None
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{key}: expected a finite number, got {_quote(text)}")
        return value
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
            raise ConfigError(
                f"{key}: expected {len(args)} comma-separated values, got {_quote(text)}"
            )
        return values
    return _parse_scalar(text, annotation, key)


def _unknown_key(key: str, all_keys: list[str]) -> ConfigError:
    close = [_SEE_ALSO[key]] if _SEE_ALSO.get(key) in all_keys else []
    close = close or difflib.get_close_matches(key, all_keys, n=2)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return ConfigError(f"unknown config key {_quote(key)}{hint}; valid keys: {', '.join(all_keys)}")


def _set(config: Any, path: list[str], text: str, full_key: str, all_keys: list[str]) -> Any:
    names = {f.name: f for f in dataclasses.fields(config)}
    name = path[0]
    if name not in names or (len(path) == 1 and dataclasses.is_dataclass(getattr(config, name))):
        raise _unknown_key(full_key, all_keys)
    value = getattr(config, name)
    if len(path) > 1:
        if not dataclasses.is_dataclass(value):
            raise _unknown_key(full_key, all_keys)
        return dataclasses.replace(
            config, **{name: _set(value, path[1:], text, full_key, all_keys)}
        )
    hints = typing.get_type_hints(type(config))
    try:
        return dataclasses.replace(config, **{name: _parse_value(text, hints[name], full_key)})
    except ConfigError:
        raise
    except ValueError as error:  # a network config's own range check
        raise ConfigError(f"{full_key}: {error}") from None


def apply_overrides(config: Any, overrides: typing.Iterable[str]) -> Any:
    """``config`` with each ``key=value`` override applied (dotted keys, tuples comma-separated).

    >>> apply_overrides(MLPExperimentConfig(), ["optim.lr=1e-3"]).optim.lr
    (0.001,)
    """
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.strip()
        all_keys = config_keys(config)
        if not sep or not key:
            raise ConfigError(
                f"override {_quote(override)} is not key=value; valid keys: {', '.join(all_keys)}"
            )
        config = _set(config, key.split("."), text, key, all_keys)
    return config


def _positive_finite(values) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def _shared_checks(config: ExperimentConfig) -> list[tuple[bool, str, str]]:
    seeds, epochs = LIMITS["seeds"], LIMITS["epochs"]
    return [
        (config.task in TASKS, "task", f"one of {', '.join(TASKS)}"),
        (len(config.activations) > 0, "activations", "at least one name"),
        (
            config.model.approximate in APPROXIMATIONS,
            "model.approximate",
            f"one of {', '.join(APPROXIMATIONS)}",
        ),
        (
            len(config.optim.lr) > 0 and _positive_finite(config.optim.lr),
            "optim.lr",
            "finite positive learning rates",
        ),
        (1 <= config.train.epochs <= epochs, "train.epochs", f"from 1 to {epochs:,}"),
        (config.train.batch_size >= 1, "train.batch_size", "at least 1"),
        (1 <= config.train.seeds <= seeds, "train.seeds", f"from 1 to {seeds:,}"),
    ]


def _mlp_checks(config: MLPExperimentConfig) -> list[tuple[bool, str, str]]:
    train, optim = config.train, config.optim
    return [
        (config.task in ("classify", "autoencode"), "task", "classify or autoencode"),
        (config.train_on in ("train", "train+val"), "train_on", "train or train+val"),
        (config.model.init in INITS, "model.init", f"one of {', '.join(INITS)}"),
        (all(h > 0 for h in config.model.hidden), "model.hidden", "positive widths"),
        (optim.name == "adam", "optim.name", "adam"),
        (0 <= optim.beta1 < 1 and 0 <= optim.beta2 < 1, "optim.beta1/beta2", "in [0, 1)"),
        (_positive_finite([optim.eps]), "optim.eps", "finite and positive"),
        (
            len(train.keep) > 0 and all(0 < k <= 1 for k in train.keep),
            "train.keep",
            "in (0, 1]",
        ),
        (train.train_subset >= 0, "train.train_subset", "0 (all) or a positive count"),
        (train.eval_train_subset >= 0, "train.eval_train_subset", "0 (all) or a positive count"),
        (train.eval_batch_size >= 1, "train.eval_batch_size", "at least 1"),
        (train.checkpoint_every >= 1, "train.checkpoint_every", "at least 1"),
        (train.dtype in ("float32", "float64"), "train.dtype", "float32 or float64"),
        (
            all(math.isfinite(a) and a >= 0 for a in config.noise.levels),
            "noise.levels",
            "finite non-negative half-widths",
        ),
        (
            config.task != "autoencode" or tuple(train.keep) == (1.0,),
            "train.keep",
            "1.0: the autoencoder trains without dropout",
        ),
        (
            config.task != "autoencode" or not config.noise.levels,
            "noise.levels",
            "empty: noise evaluation applies to classifiers only",
        ),
    ]


def _cnn_checks(config: CNNExperimentConfig) -> list[tuple[bool, str, str]]:
    cnn = config.cnn
    checks = [(config.task == "cnn", "task", "cnn")]
    if isinstance(cnn, CIFAR10AllConvConfig):
        betas = (cnn.beta1, cnn.beta1_late, cnn.beta2)
        checks += [
            (all(0 <= b < 1 for b in betas), "cnn.beta1/beta1_late/beta2", "in [0, 1)"),
            (_positive_finite([cnn.adam_eps]), "cnn.adam_eps", "finite and positive"),
        ]
    else:
        checks += [
            (math.isfinite(cnn.weight_decay) and cnn.weight_decay >= 0, "cnn.weight_decay",
             "finite and non-negative"),
            (0 <= cnn.momentum < 1, "cnn.momentum", "in [0, 1)"),
        ]  # fmt: skip
    return checks


def failed_checks(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(key, expected) of each range check ``config`` fails, in the order :func:`validate` makes
    them (a command with its own flags for config keys, e.g. ``gelus bench``, names its flags)."""
    engine_checks = (
        _cnn_checks if isinstance(config, CNNExperimentConfig)
        else lm_checks if isinstance(config, TransformerExperimentConfig)
        else vit_checks if isinstance(config, ViTExperimentConfig)
        else _mlp_checks
    )  # fmt: skip
    checks = _shared_checks(config) + engine_checks(config)
    return [(key, expected) for ok, key, expected in checks if not ok]


def validate(config: ExperimentConfig) -> None:
    """Check ranges; raise ConfigError naming the key and the valid values."""
    for key, expected in failed_checks(config)[:1]:
        raise ConfigError(f"{key}: invalid value; expected {expected}")
