"""The ViT engine: one small vision transformer per run (Fashion-MNIST), behind the engine protocol.

:class:`ViTEngine` trains the :class:`~gelus.experiments.engines.transformer.models.PatchViT` of a job's
one run with the language model's recipe (:func:`gelus.experiments.engines.transformer.engine.make_optimizer`,
:func:`~gelus.experiments.engines.transformer.engine.lm_lr` per step): AdamW, warmup then cosine, decay on
matrices only, clipping, bf16 autocast on CUDA only. An epoch is one pass over the training images
in an order drawn from the run's seed (the last partial batch dropped); the images are
standardised with the training split's mean and standard deviation.

As for the LM, a seed fixes the init (each parameter from its own generator) and the batch order
for every activation and lr. After each epoch it logs ``loss`` (nats), ``error`` and
``trivial_loss`` (ln classes) for ``train`` (the epoch's steps, in training mode), ``val`` and
``test``; under the split ``model`` its ``parameters`` and training ``flops_per_token``.
"""

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.engine import Log
from gelus.experiments.engines.transformer.engine import (
    SteppedState,
    TransformerEngine,
    lm_lr,
    make_optimizer,
    model_size,
)
from gelus.experiments.engines.transformer.models import PatchViT, init_parameters
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job

__all__ = ["ViTEngine", "build_vit", "image_splits"]


def build_vit(config, activation: ActivationSpec, seed: int, image_shape, classes: int) -> PatchViT:
    """The run's ViT on the CPU, initialised from ``seed`` (the same for every activation)."""
    ViTEngine.check_activation(activation)
    try:
        model = PatchViT(config.model, activation, image_shape, classes)
    except ValueError as error:
        raise ConfigError(f"model.patch: {error}", "model") from None
    init_parameters(model, seed, config.model.init_std, config.model.layers, config.model.init)
    return model


def image_splits(data: Any, n_train: int, device: torch.device) -> tuple[dict, float, float]:
    """The dataset's splits on ``device`` and the mean and standard deviation of the first
    ``n_train`` training images, which standardise every split (a ViT run's, stacked or not)."""
    splits = {
        name: getattr(data, name).to(device)
        for name in ("train", "val", "test")
        if getattr(data, name) is not None
    }
    sample = splits["train"].inputs(torch.arange(n_train, device=device))
    return splits, sample.mean().item(), sample.std().item()


class ViTEngine(SteppedState):
    """The engine protocol for one ViT run (a job of one member)."""

    evaluates_before_training = False
    check_activation = staticmethod(TransformerEngine.check_activation)

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        config = self.config = job.config
        (self.key,) = job.members
        self.device, self.batch_size = device, config.train.batch_size
        shape = tuple(data.train.sample_shape)
        self.model = build_vit(config, job.activation, self.key.seed, shape, data.num_classes)
        self.model.to(device)
        self.optimizer = make_optimizer(config, self.model, self.key.lr)
        self.n_train = job.train_size
        self.steps = self.n_train // self.batch_size
        if self.steps == 0:
            raise ConfigError(f"{self.n_train} training images is less than one batch")
        self.total, self.step = job.epochs * self.steps, 0
        self.order = torch.Generator().manual_seed(self.key.seed)  # the batch order
        self.splits, self.mean, self.std = image_splits(data, self.n_train, device)
        self.classes = data.num_classes
        self.autocast = device.type == "cuda" and config.train.bf16
        self.train_metrics = (float("nan"), float("nan"))
        tokens = self.model.position.weight.shape[0]
        self.size = model_size(self.model, config.model.d_model, config.model.layers, tokens)

    def _batch(self, name: str, index: Tensor) -> tuple[Tensor, Tensor]:
        split = self.splits[name]
        index = index.to(self.device)
        return (split.inputs(index) - self.mean) / self.std, split.labels[index]

    def _logits(self, x: Tensor) -> Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            return self.model(x).float()

    def train_epoch(self, epoch: int) -> None:
        self.model.train()
        order = torch.randperm(self.n_train, generator=self.order)
        optim = self.config.optim
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        wrong = torch.zeros((), dtype=torch.int64, device=self.device)
        for i in range(self.steps):
            lr = lm_lr(self.step, self.total, self.key.lr, optim.warmup, optim.min_lr)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            x, y = self._batch("train", order[i * self.batch_size : (i + 1) * self.batch_size])
            logits = self._logits(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            if optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), optim.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
            wrong += (logits.argmax(1) != y).sum()
            self.step += 1
        self.train_metrics = (
            loss_sum.item() / self.steps,
            wrong.item() / (self.steps * self.batch_size),
        )

    @torch.no_grad()
    def _evaluate_split(self, name: str) -> tuple[float, float]:
        self.model.eval()
        n = len(self.splits[name])
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        wrong = torch.zeros((), dtype=torch.int64, device=self.device)
        for index in torch.arange(n).split(self.config.train.eval_batch_size):
            x, y = self._batch(name, index)
            logits = self._logits(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").double()
            wrong += (logits.argmax(1) != y).sum()
        return loss_sum.item() / n, wrong.item() / n

    def evaluate(self, epoch: int, log: Log) -> None:
        metrics = {"train": self.train_metrics}
        metrics |= {
            name: self._evaluate_split(name) for name in ("val", "test") if name in self.splits
        }
        for split, (loss, error) in metrics.items():
            log(self.key, epoch, split, "loss", loss)
            log(self.key, epoch, split, "error", error)
            log(self.key, epoch, split, "trivial_loss", math.log(self.classes))
        for metric, value in self.size.items():
            log(self.key, epoch, "model", metric, value)

    @classmethod
    def evaluated_samples(cls, config, train: int, val: int, test: int) -> int:
        """Images one ``evaluate`` reads (val and test: train's metrics come from its steps)."""
        return val + test
