"""The CNN engine's config and the CIFAR networks' own: typed, frozen, torch-free (the presets
import them).

:class:`CNNExperimentConfig` holds the knobs every experiment has (``train.epochs``,
``train.batch_size``, ``optim.lr``, the sweep axis, and ``model.approximate``, the GELU form);
its ``cnn`` is the network's config (:class:`CIFAR10AllConvConfig`, :class:`CIFAR100WRNConfig`):
what only a CNN run reads. Schedule points are fractions of the epochs, so a shorter run keeps
the schedule's shape.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from gelus.experiments.config import config_to_dict, positive_finite
from gelus.experiments.engines.mlp.config import (
    MLPExperimentConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
)

__all__ = [
    "AMP_DTYPE_NAMES",
    "COMPILE_MODES",
    "CIFAR10AllConvConfig",
    "CIFAR100WRNConfig",
    "CNNConfig",
    "CNNExperimentConfig",
    "CNNModelConfig",
    "CNNOptimConfig",
    "CNNTrainConfig",
    "cnn_checks",
    "stored_shape",
]

AMP_DTYPE_NAMES = ("bf16", "fp16")
# torch.compile modes of the training step; "reduce-overhead" replays it as a CUDA graph
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class _CNNRunOptions:
    """How a CNN run is split, evaluated and computed: the same for both CIFAR experiments."""

    retrain_full: bool = False  # train on train + val = all 50k (no val metrics), else 45k + 5k val
    train_eval_size: int | None = 10_000  # train loss/error on the first N train images; None: all
    eval_batch_size: int = 500  # images per evaluation batch
    amp_dtype: str | None = None  # None | "bf16" | "fp16" (fp16 on CUDA only, with a GradScaler)
    channels_last: bool | None = None  # NHWC; None: on CUDA only (slower on CPU, and wrong on some)
    compile: str | None = None  # None: eager; else the torch.compile mode of the loss + backward

    def __post_init__(self) -> None:
        if self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size={self.eval_batch_size} must be at least 1")
        if self.amp_dtype not in (None, *AMP_DTYPE_NAMES):
            raise ValueError(f"amp_dtype={self.amp_dtype!r}: use None, 'bf16' or 'fp16'")
        if self.compile not in (None, *COMPILE_MODES):
            modes = ", ".join(repr(m) for m in COMPILE_MODES)
            raise ValueError(f"compile={self.compile!r}: use None (eager) or a mode: {modes}")
        if self.train_eval_size is not None and self.train_eval_size < 1:
            raise ValueError(
                f"train_eval_size={self.train_eval_size}: give None (all) or at least 1"
            )


@dataclass(frozen=True)
class CIFAR10AllConvConfig(_CNNRunOptions):
    """Salimans & Kingma's all-conv net on CIFAR-10, as the paper trained it (``all_convnet.py``)."""

    lr_decay_from: float = (
        0.5  # lr constant for this fraction of the epochs, then linear to 0 (paper: 100 of 200)
    )
    beta1: float = 0.9  # Adam β₁ for the first beta1_switch_at of the epochs
    beta1_late: float = 0.5  # Adam β₁ afterwards
    beta1_switch_at: float = 0.5  # fraction of the epochs run with beta1 (paper: 100 of 200)
    beta2: float = 0.999  # Adam β₂
    adam_eps: float = (
        1e-8  # torch's ε outside the √; the released g/√(v̂ + 1e-8) acts like ε up to ≈ 1e-4
    )
    noise_std: float = 0.15  # Gaussian noise on the whitened input, training only
    dropout: float = 0.5  # after each max-pool
    widths: tuple[int, int] = (96, 192)  # channels of the first and second conv stacks
    zca_epsilon: float = 1e-5  # added to the covariance eigenvalues (Salimans & Kingma's nn.ZCA)
    bn_eps: float = 1e-4  # Lasagne's BatchNormLayer default
    logit_batchnorm: bool = True  # the released code batch-normalises the logits

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("lr_decay_from", "beta1_switch_at"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)} must be a fraction in [0, 1]")


@dataclass(frozen=True)
class CIFAR100WRNConfig(_CNNRunOptions):
    """WRN-40-4 on CIFAR-100, as the paper trained it (``SGDR_WRNs_gelu.py``, scenario 13).

    Trains on all 50,000 images by default: one lr (nothing to tune), as the released script does.
    """

    retrain_full: bool = True  # all 50k images; the WRN has no hyperparameter to choose on val
    momentum: float = 0.9  # Nesterov
    weight_decay: float = 5e-4  # λ of the loss penalty λ·Σw² (conv/dense weights, BN scales)
    dropout: float = 0.3  # between the two convolutions of each block
    blocks_per_stage: int = 6  # depth 6n + 4 = 40
    widths: tuple[int, int, int, int] = (16, 64, 128, 256)  # stem, then 16k, 32k, 64k with k = 4
    crop_padding: int = 4  # random crops of the zero-padded (mean-subtracted) image
    flip: bool = True  # random horizontal flips
    bn_eps: float = 1e-4  # Lasagne's BatchNormLayer default

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.widths) != 4:
            raise ValueError(f"widths={self.widths} needs 4 entries: stem and three stages")


CNNConfig = CIFAR10AllConvConfig | CIFAR100WRNConfig


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


def stored_shape(config: CNNExperimentConfig) -> dict[str, Any]:
    """The config in the one shape every version of the harness has stored and hashed: the MLP
    keys it does not read at their defaults, and ``cnn``, so that run folders made before the
    configs were split keep their hashes and resume."""
    shared = MLPExperimentConfig(
        task=config.task,
        dataset=config.dataset,
        activations=config.activations,
        model=ModelConfig(approximate=config.model.approximate),
        optim=OptimConfig(lr=config.optim.lr),
        train=TrainConfig(**dataclasses.asdict(config.train)),
    )
    return config_to_dict(shared) | {"cnn": config_to_dict(config.cnn)}


def cnn_checks(config: CNNExperimentConfig) -> list[tuple[bool, str, str]]:
    """(ok, key, expected) of every range a CNN config must satisfy beyond the shared ones."""
    cnn = config.cnn
    task = (config.task == "cnn", "task", "cnn")
    if isinstance(cnn, CIFAR10AllConvConfig):
        betas = (cnn.beta1, cnn.beta1_late, cnn.beta2)
        return [
            task,
            (all(0 <= b < 1 for b in betas), "cnn.beta1/beta1_late/beta2", "in [0, 1)"),
            (positive_finite([cnn.adam_eps]), "cnn.adam_eps", "finite and positive"),
        ]
    decay_ok = math.isfinite(cnn.weight_decay) and cnn.weight_decay >= 0
    return [
        task,
        (decay_ok, "cnn.weight_decay", "finite and non-negative"),
        (0 <= cnn.momentum < 1, "cnn.momentum", "in [0, 1)"),
    ]
