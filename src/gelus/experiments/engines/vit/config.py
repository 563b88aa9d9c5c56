"""The ViT engine's config: the language model's blocks without the mask over image patches,
trained by its optimizer config (typed, frozen, torch-free: the presets import it). An epoch is
one pass over the training images."""

from dataclasses import dataclass, field

from gelus.experiments.config import positive_finite
from gelus.experiments.engines.transformer.config import (
    INITS,
    NORMS,
    STACK_MODES,
    TransformerOptimConfig,
    model_sizes,
    optim_checks,
)

__all__ = ["POOLS", "ViTExperimentConfig", "ViTModelConfig", "ViTTrainConfig", "vit_checks"]

POOLS = ("mean", "cls")


@dataclass(frozen=True)
class ViTModelConfig:
    approximate: str = "none"  # plain "gelu": exact x·Φ(x) ("tanh" via gelu_tanh)
    d_model: int = 64  # residual width d
    layers: int = 4  # pre-norm blocks, no mask
    heads: int = 4  # attention heads (d_model / heads per head)
    patch: int = 4  # square patches of patch × patch pixels (28 / 4: 49 tokens)
    pool: str = "mean"  # "mean" over the patches' outputs | "cls": a class token's
    norm: str = "layernorm"  # "layernorm" | "rmsnorm" (both without bias)
    ffn_mult: int = 4  # elementwise FFN width mult·d; gated: gated_hidden(d, mult)
    init_std: float = 0.02  # N(0, σ²) weights; residual projections σ/√(2·layers) (GPT-2)
    init: str = "gpt2"  # gpt2 (init_std) | torch | xavier | he: transformer models.init_parameters


@dataclass(frozen=True)
class ViTTrainConfig:
    epochs: int = 10  # passes over the training images
    batch_size: int = 128  # images per step; the last partial batch of an epoch is dropped
    seeds: int = 5  # runs per (activation, lr): init, batch order; seeds 0 .. seeds-1
    train_subset: int = 0  # train on the first N training images (0 = all); quick runs only
    eval_batch_size: int = 1000  # images per evaluation batch
    checkpoint_every: int = 1  # epochs between checkpoints (the last epoch always saves)
    bf16: bool = True  # CUDA only: bf16 autocast of the forward (the CPU always runs float32)
    tf32: bool = False  # CUDA only: allow TF32 matmuls
    stack: str = "auto"  # an activation's runs as one stacked job: on | off | auto (CUDA, small)


@dataclass(frozen=True)
class ViTExperimentConfig:
    """The ViT engine's config: a small vision transformer per run, its FFN activation the swept
    axis; the language model's optimizer config."""

    task: str = "vit"
    dataset: str = "fashion-mnist"  # gelus.data name of an image classification dataset
    activations: tuple[str, ...] = ("gelu", "relu")  # one run per activation, lr and seed
    model: ViTModelConfig = field(default_factory=ViTModelConfig)
    optim: TransformerOptimConfig = field(default_factory=TransformerOptimConfig)
    train: ViTTrainConfig = field(default_factory=ViTTrainConfig)


def vit_checks(config) -> list[tuple[bool, str, str]]:
    """(ok, key, expected) of every range a ViT config must satisfy (config.validate raises)."""
    model, train = config.model, config.train
    return [
        (config.task == "vit", "task", "vit"),
        *model_sizes(model, ("d_model", "layers", "heads", "patch", "ffn_mult")),
        (model.norm in NORMS, "model.norm", f"one of {', '.join(NORMS)}"),
        (model.pool in POOLS, "model.pool", f"one of {', '.join(POOLS)}"),
        (positive_finite([model.init_std]), "model.init_std", "finite and positive"),
        (model.init in INITS, "model.init", f"one of {', '.join(INITS)}"),
        (train.train_subset >= 0, "train.train_subset", "0 (all) or a positive count"),
        (train.eval_batch_size >= 1, "train.eval_batch_size", "at least 1"),
        (train.checkpoint_every >= 1, "train.checkpoint_every", "at least 1"),
        (train.stack in STACK_MODES, "train.stack", f"one of {', '.join(STACK_MODES)}"),
        *optim_checks(config.optim),
    ]
