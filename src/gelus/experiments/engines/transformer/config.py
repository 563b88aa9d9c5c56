"""The transformer engines' own configs: typed, frozen, torch-free (the presets import them).

A byte-level decoder-only language model trained by a modern recipe (AdamW with β₂ 0.95, linear
warmup then cosine decay, weight decay on matrices only, gradient clipping, bf16 autocast on CUDA).
An "epoch" here is a fixed number of optimizer steps (``train.steps_per_epoch``), each on
``train.batch_size`` windows of ``model.context + 1`` bytes at random offsets of the training
split: the model is evaluated after every epoch, and the token budget of a run is
``epochs × steps_per_epoch × batch_size × context`` bytes, whatever the activation.

A budget tied to the model's size: ``train.tokens_per_param`` r > 0 derives the steps per epoch
from the model's weights N (:func:`weight_count`) so that a run predicts about r · N bytes,
capped at ``train.max_tokens`` T when set (:func:`budget_steps`):
``steps_per_epoch = max(1, round(min(r · N, T) / (epochs · batch_size · context)))``, in place
of the value set. At 0 (the default) the budget is ``epochs × steps_per_epoch`` as set, and
neither key is stored or hashed, so configs from before the rule keep their hashes.

The ViT (:mod:`gelus.experiments.engines.vit.config`) is the same blocks without the causal mask
over image patches, trained by the same optimizer config.
"""

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, field

from gelus.experiments.config import drivers, positive_finite

__all__ = [
    "INITS",
    "LM_OMITTED_DEFAULTS",
    "MAX_STEPS_PER_EPOCH",
    "NORMS",
    "OMITTED_DEFAULTS",
    "STACK_MODES",
    "TransformerExperimentConfig",
    "TransformerModelConfig",
    "TransformerOptimConfig",
    "TransformerTrainConfig",
    "budget_steps",
    "gated_hidden",
    "lm_checks",
    "memory_bytes",
    "model_sizes",
    "optim_checks",
    "stacks_runs",
    "step_flops",
    "stored_dict",
    "weight_count",
]

NORMS = ("layernorm", "rmsnorm")
INITS = ("gpt2", "torch", "xavier", "he")  # model.init (models.init_parameters defines each)
# keys added after runs were recorded: stored (and hashed) only when not at these defaults, so the
# configs of those runs keep their hashes
OMITTED_DEFAULTS = {"model.init": "gpt2"}
# the language model's own such keys, the budget rule's (its runs were recorded before it)
LM_OMITTED_DEFAULTS = {**OMITTED_DEFAULTS, "train.tokens_per_param": 0.0, "train.max_tokens": 0}
STACK_MODES = ("auto", "on", "off")
# train.stack=auto stacks on CUDA while one run's training step is below this many FLOPs: the
# preset's (1.1e10) is far less arithmetic than its kernel launches cost a GPU; the GPT-2-small
# shape's (9e12) fills one, and 15 such members would not fit in its memory (not measured on a GPU)
STACK_MAX_STEP_FLOPS = 1e12
# The most optimizer steps an epoch may take, set or derived (train.tokens_per_param): 10⁷ steps
# of the smallest model are about a day on one CPU thread; more is a typo, not a run.
MAX_STEPS_PER_EPOCH = 10_000_000


def gated_hidden(d_model: int, mult: int = 4) -> int:
    """The hidden width of a gated FFN with the parameters of the elementwise one of width
    ``mult · d``: 8 · round(2 · mult · d / 3 / 8), i.e. 8·round(8d/3/8) for mult = 4.

    Without biases the elementwise FFN holds 2 · mult · d² weights (d → mult·d → d) and the gated
    one 3 · d · h (d → 2h, h → d), equal at h = 2 · mult · d / 3, rounded to a multiple of 8.
    """
    return 8 * max(1, round(2 * mult * d_model / 3 / 8))


@dataclass(frozen=True)
class TransformerModelConfig:
    approximate: str = "none"  # plain "gelu": exact x·Φ(x) ("tanh" via gelu_tanh)
    d_model: int = 128  # residual width d
    layers: int = 4  # pre-norm blocks
    heads: int = 4  # attention heads (d_model / heads per head)
    context: int = 128  # bytes of context; windows of context + 1 bytes give inputs and targets
    norm: str = "layernorm"  # "layernorm" | "rmsnorm" (both without bias)
    ffn_mult: int = 4  # elementwise FFN width mult·d; gated: gated_hidden(d, mult)
    init_std: float = 0.02  # N(0, σ²) weights; residual projections σ/√(2·layers) (GPT-2)
    init: str = "gpt2"  # gpt2 (init_std) | torch | xavier | he: models.init_parameters


@dataclass(frozen=True)
class TransformerOptimConfig:
    lr: tuple[float, ...] = (1e-3, 2e-3, 4e-3)  # peak learning-rate grid, every point a run
    beta1: float = 0.9  # AdamW β₁
    beta2: float = 0.95  # AdamW β₂ (the GPT recipe)
    eps: float = 1e-8  # AdamW ε
    weight_decay: float = 0.1  # decoupled, on weight matrices and embeddings only (ndim ≥ 2)
    warmup: float = 0.05  # fraction of all steps with a linear warmup from 0 to the peak lr
    min_lr: float = 0.1  # cosine decay to this fraction of the peak lr at the last step
    grad_clip: float = 1.0  # clip the global gradient norm to this (0: no clipping)


@dataclass(frozen=True)
class TransformerTrainConfig:
    epochs: int = 10  # evaluations; each after steps_per_epoch optimizer steps
    steps_per_epoch: int = 200  # optimizer steps per "epoch" (the corpus is sampled)
    batch_size: int = 16  # windows per step, at random offsets of the training split
    seeds: int = 5  # runs per (activation, lr): init, batch order; seeds 0 .. seeds-1
    eval_bytes: int = 0  # evaluate val and test on their first N bytes (0: the whole splits)
    eval_batch_size: int = 64  # windows per evaluation batch
    checkpoint_every: int = 1  # epochs between checkpoints (the last epoch always saves)
    bf16: bool = True  # CUDA only: bf16 autocast of the forward (the CPU always runs float32)
    tf32: bool = False  # CUDA only: allow TF32 matmuls
    stack: str = "auto"  # an activation's runs as one stacked job: on | off | auto (CUDA, small)
    tokens_per_param: float = 0.0  # > 0: steps_per_epoch derived for r·N training bytes (0: off)
    max_tokens: int = 0  # the cap on those bytes (0: none); read only when tokens_per_param > 0


@dataclass(frozen=True)
class TransformerExperimentConfig:
    """The transformer engine's config: a byte-level decoder-only language model per run, its FFN
    activation the swept axis (keys ``model.*``, ``optim.*``, ``train.*`` above). With
    ``train.tokens_per_param`` set, ``train.steps_per_epoch`` is derived (:func:`budget_steps`)
    whenever the config is made or replaced, so it always follows the model's size."""

    task: str = "lm"
    dataset: str = "fortunes"  # gelus.data name of a byte corpus (fortunes, text)
    activations: tuple[str, ...] = ("gelu", "relu")  # one run per activation, lr and seed
    model: TransformerModelConfig = field(default_factory=TransformerModelConfig)
    optim: TransformerOptimConfig = field(default_factory=TransformerOptimConfig)
    train: TransformerTrainConfig = field(default_factory=TransformerTrainConfig)

    def __post_init__(self) -> None:
        steps = budget_steps(self.model, self.train)
        if steps is not None and steps != self.train.steps_per_epoch:
            # frozen: the derived count replaces the set one as the config is built
            object.__setattr__(
                self, "train", dataclasses.replace(self.train, steps_per_epoch=steps)
            )


def budget_steps(model: TransformerModelConfig, train: TransformerTrainConfig) -> int | None:
    """The steps per epoch of the size-tied budget, None when it is off (``tokens_per_param`` 0)
    or its inputs are out of range (the range checks name them):
    ``max(1, round(min(r · N, T) / (epochs · batch_size · context)))``, r the tokens per
    parameter, N :func:`weight_count`, T ``max_tokens`` (0: no cap).

    >>> budget_steps(TransformerModelConfig(), TransformerTrainConfig(epochs=5, tokens_per_param=2.5))
    200
    """
    rate, cap = train.tokens_per_param, train.max_tokens
    per_step = train.epochs * train.batch_size * model.context
    if not (math.isfinite(rate) and rate > 0 and per_step > 0 and cap >= 0):
        return None
    tokens = rate * weight_count(model)
    steps = (min(tokens, cap) if cap else tokens) / per_step
    # past MAX_STEPS_PER_EPOCH (an infinite product too) the range check names tokens_per_param
    return max(1, round(steps)) if steps <= MAX_STEPS_PER_EPOCH else MAX_STEPS_PER_EPOCH + 1


def stored_dict(config) -> dict:
    """A transformer config (the LM's or the ViT's) as its runs store and hash it: its fields as
    nested plain dicts, without the keys of ``OMITTED_DEFAULTS`` that hold their defaults."""
    tree = json.loads(json.dumps(dataclasses.asdict(config)))
    for key, default in LM_OMITTED_DEFAULTS.items():  # the ViT has no budget keys: none removed
        *path, name = key.split(".")
        branch = functools.reduce(lambda node, part: node.get(part, {}), path, tree)
        if branch.get(name, None) == default:
            del branch[name]
    return tree


def optim_checks(optim: TransformerOptimConfig) -> list[tuple[bool, str, str]]:
    """(ok, key, expected) of the optimizer's ranges (the ViT's too)."""
    return [
        (0 <= optim.beta1 < 1 and 0 <= optim.beta2 < 1, "optim.beta1/beta2", "in [0, 1)"),
        (positive_finite([optim.eps]), "optim.eps", "finite and positive"),
        (
            math.isfinite(optim.weight_decay) and optim.weight_decay >= 0,
            "optim.weight_decay",
            "finite and non-negative",
        ),
        (0 <= optim.warmup < 1, "optim.warmup", "a fraction in [0, 1)"),
        (0 <= optim.min_lr <= 1, "optim.min_lr", "a fraction in [0, 1]"),
        (
            math.isfinite(optim.grad_clip) and optim.grad_clip >= 0,
            "optim.grad_clip",
            "finite and non-negative (0: no clipping)",
        ),
    ]


def model_sizes(model, names: tuple[str, ...]) -> list[tuple[bool, str, str]]:
    """Each size at least 1, then the heads dividing the width (only once both are positive: the
    checks are evaluated together, so the division must not run on a zero)."""
    heads_ok = model.heads >= 1 and model.d_model >= 1 and model.d_model % model.heads == 0
    return [
        *((getattr(model, name) >= 1, f"model.{name}", "at least 1") for name in names),
        (heads_ok, "model.heads", "a divisor of model.d_model"),
    ]


def lm_checks(config) -> list[tuple[bool, str, str]]:
    """(ok, key, expected) of every range a language-model config must satisfy."""
    model, train = config.model, config.train
    return [
        (config.task == "lm", "task", "lm"),
        *model_sizes(model, ("d_model", "layers", "heads", "context", "ffn_mult")),
        (model.norm in NORMS, "model.norm", f"one of {', '.join(NORMS)}"),
        (positive_finite([model.init_std]), "model.init_std", "finite and positive"),
        (model.init in INITS, "model.init", f"one of {', '.join(INITS)}"),
        (train.steps_per_epoch >= 1, "train.steps_per_epoch", "at least 1"),
        (
            math.isfinite(train.tokens_per_param) and train.tokens_per_param >= 0,
            "train.tokens_per_param",
            "0 (off: the steps as set) or a finite positive number of bytes per weight",
        ),
        (
            train.steps_per_epoch <= MAX_STEPS_PER_EPOCH,
            "train.tokens_per_param" if train.tokens_per_param > 0 else "train.steps_per_epoch",
            f"a budget of at most {MAX_STEPS_PER_EPOCH:,} steps per epoch"
            + (" (it derives more for this model)" if train.tokens_per_param > 0 else ""),
        ),
        (train.max_tokens >= 0, "train.max_tokens", "0 (no cap) or a positive number of bytes"),
        (
            train.eval_bytes == 0 or train.eval_bytes > model.context,
            "train.eval_bytes",
            "0 (all) or more than model.context (one window of context + 1 bytes at least)",
        ),
        (train.eval_batch_size >= 1, "train.eval_batch_size", "at least 1"),
        (train.checkpoint_every >= 1, "train.checkpoint_every", "at least 1"),
        (train.stack in STACK_MODES, "train.stack", f"one of {', '.join(STACK_MODES)}"),
        *optim_checks(config.optim),
    ]


def weight_count(model) -> int:
    """N ≈ layers·(4 + 2·ffn_mult)·d² + 256·d: the weights of the blocks (attention's four d × d
    matrices, the FFN's two d × mult·d, a gated FFN matched to them) and of the byte embedding
    tied to the head, without norms, biases or the position table (Kaplan et al. 2020's N)."""
    d = model.d_model
    return model.layers * (4 + 2 * model.ffn_mult) * d * d + 256 * d


def step_flops(config) -> float:
    """Training FLOPs of one step of a run, from the config alone: 6·N + 6·layers·tokens·d per
    token (``flops_per_token``), N ≈ layers·(4 + 2·ffn_mult)·d² + 256·d weights; tokens the
    language model's context, or the ViT's patches of a 28 × 28 image (its preset's: an estimate
    for other images)."""
    model = config.model
    d, layers = model.d_model, model.layers
    tokens = model.context if config.task == "lm" else (28 // model.patch) ** 2
    weights = weight_count(model)
    return (6 * weights + 6 * layers * tokens * d) * tokens * config.train.batch_size


def memory_bytes(config, tokens: int, members: int = 1) -> tuple[float, tuple[str, ...]]:
    """(bytes, the keys that drive them) of one job of ``members`` runs of a transformer over
    ``tokens`` tokens, from the config alone, in float32: per run 16·N for the N weights (weights,
    gradients and AdamW's two moments), plus what one training batch keeps for the backward pass,
    4·B·layers·tokens·(10·d + 2·h + 2·heads·tokens) bytes (h the FFN width; the attention
    probabilities per head), or one evaluation batch's forward if larger. An estimate to refuse
    the impossible before anything is allocated, not a measurement."""
    model, train = config.model, config.train
    d, layers, h = model.d_model, model.layers, model.ffn_mult * model.d_model
    weights = weight_count(model) + tokens * d
    per_token = 10 * d + 2 * h + 2 * model.heads * tokens
    batch = 4 * train.batch_size * layers * tokens * per_token
    evaluation = 4 * train.eval_batch_size * tokens * (4 * d + h + model.heads * tokens)
    terms = {
        ("model.layers", "model.d_model", "model.ffn_mult"): 16 * weights,
        ("train.batch_size", "model.context", "model.layers", "model.d_model"): batch,
        ("train.eval_batch_size", "model.context", "model.heads"): evaluation,
    }
    keys = drivers(terms)
    if config.task != "lm":  # the ViT: its tokens are the patches, set by model.patch
        keys = tuple("model.patch" if key == "model.context" else key for key in keys)
    return members * (16 * weights + max(batch, evaluation)), keys


def stacks_runs(config, device: str) -> bool:
    """Whether a transformer's runs of one activation train as one stacked job on ``device``:
    ``train.stack`` on or off, or auto: on CUDA while a run's step is small (below
    ``STACK_MAX_STEP_FLOPS``). On one CPU thread stacking lost to one model per job."""
    if config.train.stack != "auto":
        return config.train.stack == "on"
    return device.startswith("cuda") and step_flops(config) < STACK_MAX_STEP_FLOPS
