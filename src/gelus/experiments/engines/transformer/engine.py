"""The transformer engine: one byte-level language model per run, behind the engine protocol.

:class:`TransformerEngine` trains the :class:`~gelus.experiments.engines.transformer.models.ByteGPT` of a
job's one run by the recipe of :mod:`gelus.experiments.engines.transformer.config`: AdamW (β₂ 0.95,
decoupled weight decay on matrices only), linear warmup then cosine decay per step, global
gradient-norm clipping, bf16 autocast on CUDA only. An epoch is ``job.train_size //
batch_size`` steps (the planner sets ``train_size = steps_per_epoch · batch_size`` windows).

Pairs are pairs: the run's seed alone draws its init (each parameter from its own generator,
``init_parameters``) and its batches (a CPU generator of window offsets), so every activation and
learning rate of one seed sees the same initial embeddings and attention and the same bytes in
the same order. After each epoch the engine logs, per split, ``loss`` (nats per byte), ``bpb``
(bits per byte, loss / ln 2) and ``trivial_loss`` (ln 256, the uniform predictor, for the
divergence rule): ``train`` from the epoch's steps (their mean), ``val`` and ``test`` over
consecutive windows that predict each byte of the split once (after the first); and under the
split ``model`` its ``parameters`` and training ``flops_per_token``, for the report's setup.
"""

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.engine import Log, check_optimizer_state
from gelus.experiments.engines.transformer.models import (
    VOCAB,
    ByteGPT,
    flops_per_token,
    init_parameters,
)
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job

__all__ = [
    "TransformerEngine",
    "build_model",
    "eval_starts",
    "lm_lr",
    "make_optimizer",
    "model_size",
]

LN2 = math.log(2)
MIN_WINDOWS = 4  # each split must hold this many windows of the model's context


def lm_lr(step: int, total: int, peak: float, warmup: float, min_lr: float) -> float:
    """The learning rate of 0-based ``step`` of ``total``: linear from peak/W to peak over the first
    W = round(warmup · total) steps, then cosine from peak to min_lr · peak at the last step."""
    warm = round(warmup * total)
    if step < warm:
        return peak * (step + 1) / warm
    span = max(1, total - warm - 1)
    progress = min(1.0, (step - warm) / span)
    return peak * (min_lr + (1 - min_lr) * 0.5 * (1 + math.cos(math.pi * progress)))


def build_model(config, activation: ActivationSpec, seed: int) -> ByteGPT:
    """The run's model on the CPU, initialised from ``seed`` (the same for every activation)."""
    TransformerEngine.check_activation(activation)
    model = ByteGPT(config.model, activation)
    init_parameters(model, seed, config.model.init_std, config.model.layers, config.model.init)
    return model


def make_optimizer(config, model: torch.nn.Module, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices (weights, embeddings) and none on the vectors
    (norm gains, an activation's scalars); fused on CUDA."""
    optim = config.optim
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": optim.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    fused = True if next(model.parameters()).is_cuda else None
    return torch.optim.AdamW(
        groups, lr=lr, betas=(optim.beta1, optim.beta2), eps=optim.eps, fused=fused
    )


def eval_starts(n_bytes: int, context: int, limit: int = 0) -> Tensor:
    """Offsets of consecutive windows of ``context + 1`` bytes, each sharing its first byte with
    the last of the one before: every byte after the first of the (first ``limit``) bytes is a
    target once."""
    n = min(n_bytes, limit) if limit else n_bytes
    return torch.arange(0, n - context, context)


def model_size(model: torch.nn.Module, d_model: int, layers: int, tokens: int) -> dict[str, float]:
    """{"parameters": all of them, "flops_per_token": training FLOPs per token}."""
    return {
        "parameters": float(sum(p.numel() for p in model.parameters())),
        "flops_per_token": float(flops_per_token(model, d_model, layers, tokens)),
    }


def _check_fits(data: Any, context: int) -> None:
    """ConfigError naming model.context and the largest context the corpus admits, unless every
    split holds ``MIN_WINDOWS`` windows of ``context + 1`` bytes (the corpus is fine: the
    setting is what to change)."""
    splits = [(name, getattr(data, name)) for name in ("train", "val", "test")]
    sizes = {name: len(split) for name, split in splits if split is not None}
    short = [name for name, size in sizes.items() if size < MIN_WINDOWS * (context + 1)]
    if short:
        largest = min(sizes.values()) // MIN_WINDOWS - 1
        name = short[0]
        raise ConfigError(
            f"model.context={context} is too long for {data.name}: its {name} split has "
            f"{sizes[name]:,} bytes, fewer than {MIN_WINDOWS} windows of {context + 1} bytes; "
            + (
                f"set model.context to {largest:,} or less, or use a longer text"
                if largest >= 1
                else "use a longer text"
            )
        )


class SteppedState:
    """The checkpoint of an engine with one ``model``, one ``optimizer``, a batch-order generator
    ``order`` and a step count ``step`` (the LM's and the ViT's)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    order: torch.Generator
    step: int

    def state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "order_rng": self.order.get_state(),
            "step": torch.tensor(self.step),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        check_optimizer_state(self.optimizer)
        self.order.set_state(state["order_rng"])
        self.step = int(state["step"])


class TransformerEngine(SteppedState):
    """The engine protocol for one language-model run (a job of one member)."""

    evaluates_before_training = False

    @staticmethod
    def check_activation(activation: ActivationSpec) -> None:
        """Refuse a stochastic activation; elementwise and gated ones (``[..., 2h] -> [..., h]``)
        both train, the gated at the FFN width of equal parameters."""
        if activation.stochastic:
            raise ConfigError(
                f"activation {activation.label!r} is stochastic, which the transformer does not "
                "support",
                "activations",
            )

    @staticmethod
    def check_data(config, data: Any) -> None:
        """Raise ConfigError unless every split holds a few windows of the model's context
        (checked before any job starts, and again by each engine)."""
        _check_fits(data, config.model.context)

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        config = self.config = job.config
        (self.key,) = job.members
        self.device, self.data = device, data
        self.context, self.batch_size = config.model.context, config.train.batch_size
        _check_fits(data, self.context)
        self.model = build_model(config, job.activation, self.key.seed).to(device)
        self.optimizer = make_optimizer(config, self.model, self.key.lr)
        self.steps = job.train_size // self.batch_size
        if self.steps == 0:
            raise ConfigError(f"{job.train_size} windows per epoch is less than one batch")
        self.total = job.epochs * self.steps
        self.step = 0  # optimizer steps taken
        self.order = torch.Generator().manual_seed(self.key.seed)  # the windows' offsets
        self.train_bytes = data.train.data.to(device)
        self.eval_data = {
            name: getattr(data, name).data.to(device)
            for name in ("val", "test")
            if getattr(data, name) is not None
        }
        self.train_loss = float("nan")
        self.autocast = device.type == "cuda" and config.train.bf16
        self.size = model_size(self.model, config.model.d_model, config.model.layers, self.context)

    def _windows(self, data: Tensor, starts: Tensor) -> Tensor:
        offsets = torch.arange(self.context + 1, device=self.device)
        return data[starts.to(self.device)[:, None] + offsets].long()  # [B, context + 1]

    def _loss(self, windows: Tensor, reduction: str = "mean") -> Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.model(windows[:, :-1])
        return F.cross_entropy(
            logits.float().reshape(-1, VOCAB), windows[:, 1:].reshape(-1), reduction=reduction
        )

    def train_epoch(self, epoch: int) -> None:
        self.model.train()
        high = len(self.train_bytes) - self.context  # offsets 0 .. len - context - 1
        starts = torch.randint(0, high, (self.steps, self.batch_size), generator=self.order)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        optim = self.config.optim
        for i in range(self.steps):
            lr = lm_lr(self.step, self.total, self.key.lr, optim.warmup, optim.min_lr)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            loss = self._loss(self._windows(self.train_bytes, starts[i]))
            loss.backward()
            if optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), optim.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            total += loss.detach()
            self.step += 1
        self.train_loss = total.item() / self.steps

    @torch.no_grad()
    def _evaluate_split(self, data: Tensor) -> float:
        """Mean cross-entropy in nats per predicted byte."""
        self.model.eval()
        starts = eval_starts(len(data), self.context, self.config.train.eval_bytes)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for chunk in starts.split(self.config.train.eval_batch_size):
            total += self._loss(self._windows(data, chunk), reduction="sum").double()
        return total.item() / (len(starts) * self.context)

    def evaluate(self, epoch: int, log: Log) -> None:
        losses = {"train": self.train_loss}
        losses |= {name: self._evaluate_split(data) for name, data in self.eval_data.items()}
        for split, loss in losses.items():
            log(self.key, epoch, split, "loss", loss)
            log(self.key, epoch, split, "bpb", loss / LN2)
            log(self.key, epoch, split, "trivial_loss", math.log(VOCAB))
        for metric, value in self.size.items():
            log(self.key, epoch, "model", metric, value)

    @classmethod
    def evaluated_samples(cls, config, train: int, val: int, test: int) -> int:
        """Windows one ``evaluate`` reads (val and test)."""
        context, limit = config.model.context, config.train.eval_bytes
        return sum(len(eval_starts(n, context, limit)) for n in (val, test) if n > context)
