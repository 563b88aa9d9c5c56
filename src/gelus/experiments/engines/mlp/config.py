"""The stacked-MLP engine's config: classifiers and the autoencoder of the MNIST, Twitter POS and
TIMIT experiments (typed, frozen, torch-free: the presets import it)."""

import math
from dataclasses import dataclass, field

from gelus.experiments.config import positive_finite

__all__ = [
    "INITS",
    "MLPExperimentConfig",
    "ModelConfig",
    "NoiseConfig",
    "OptimConfig",
    "TrainConfig",
    "mlp_checks",
]

INITS = ("unit_norm", "torch", "xavier", "he")  # stacked.StackedMLP.init_member defines each


@dataclass(frozen=True)
class ModelConfig:
    hidden: tuple[int, ...] = (128,) * 8  # hidden layer widths (the paper's MNIST net: 8 × 128)
    init: str = "unit_norm"  # "unit_norm": normal weights, each unit's fan-in scaled to L2 norm 1 (paper); "torch": nn.Linear default; "xavier", "he": Glorot's and He's normal
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
    keep: tuple[float, ...] = (1.0,)  # dropout keep probabilities, one setting each (1.0 = none)
    train_subset: int = 0  # train on the first N training samples (0 = all); quick runs only
    eval_train_subset: int = 0  # evaluate the train loss on the first N of those (0 = all)
    eval_batch_size: int = 1000  # samples per evaluation batch
    checkpoint_every: int = 1  # epochs between checkpoints (the last epoch always saves)
    keep_models: bool = False  # keep each finished job's final state in OUT/models/ (for reuse)
    compile: bool = False  # torch.compile the training step (pays only on long runs: ~15 s cold)
    dtype: str = "float32"  # parameter and activation dtype ("float32" or "float64")
    tf32: bool = (
        False  # CUDA only: allow TF32 matmuls/convs (faster, 10-bit mantissa); off: fidelity
    )


@dataclass(frozen=True)
class NoiseConfig:
    levels: tuple[
        float, ...
    ] = ()  # half-widths a of Uniform[-a, a] test noise, after the last epoch
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


def mlp_checks(config: MLPExperimentConfig) -> list[tuple[bool, str, str]]:
    """(ok, key, expected) of every range an MLP config must satisfy beyond the shared ones."""
    train, optim = config.train, config.optim
    autoencoder = config.task == "autoencode"
    return [
        (config.task in ("classify", "autoencode"), "task", "classify or autoencode"),
        (config.train_on in ("train", "train+val"), "train_on", "train or train+val"),
        (config.model.init in INITS, "model.init", f"one of {', '.join(INITS)}"),
        (all(h > 0 for h in config.model.hidden), "model.hidden", "positive widths"),
        (optim.name == "adam", "optim.name", "adam"),
        (0 <= optim.beta1 < 1 and 0 <= optim.beta2 < 1, "optim.beta1/beta2", "in [0, 1)"),
        (positive_finite([optim.eps]), "optim.eps", "finite and positive"),
        (len(train.keep) > 0 and all(0 < k <= 1 for k in train.keep), "train.keep", "in (0, 1]"),
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
            not autoencoder or tuple(train.keep) == (1.0,),
            "train.keep",
            "1.0: the autoencoder trains without dropout",
        ),
        (
            not autoencoder or not config.noise.levels,
            "noise.levels",
            "empty: noise evaluation applies to classifiers only",
        ),
    ]
