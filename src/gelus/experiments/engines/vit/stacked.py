"""The ViT runs of one activation trained at once (:class:`StackedViTEngine`), as the language
model's are (:mod:`gelus.experiments.engines.transformer.stacked`, which says why and how)."""

import math
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from gelus.experiments.engine import Log
from gelus.experiments.engines.transformer.engine import model_size
from gelus.experiments.engines.transformer.stacked import StackedMembers
from gelus.experiments.engines.vit.engine import ViTEngine, build_vit, image_splits
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job

__all__ = ["StackedViTEngine"]


class StackedViTEngine(StackedMembers):
    """The engine protocol for the ViT runs of one job (one activation; members = seeds ×
    learning rates), trained stacked: each member its single-run engine's model
    (``build_vit``), AdamW, clipping, lr schedule and ``randperm`` batch order, so it logs what
    :class:`~gelus.experiments.engines.vit.engine.ViTEngine` logs, to float tolerance."""

    evaluates_before_training = False
    check_activation = staticmethod(ViTEngine.check_activation)
    evaluated_samples = ViTEngine.evaluated_samples

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        config = self.config = job.config
        self.device, self.batch_size = device, config.train.batch_size
        shape = tuple(data.train.sample_shape)
        self._start(
            job,
            [
                build_vit(config, job.activation, key.seed, shape, data.num_classes)
                for key in job.members
            ],
        )
        self.n_train = job.train_size
        self.steps = self.n_train // self.batch_size
        if self.steps == 0:
            raise ConfigError(f"{self.n_train} training images is less than one batch")
        self.total = job.epochs * self.steps
        self.splits, self.mean, self.std = image_splits(data, self.n_train, device)
        self.classes = data.num_classes
        self.train_metrics = [(float("nan"), float("nan"))] * len(self.members)
        tokens = self.template.position.weight.shape[0]
        self.size = model_size(self.template, config.model.d_model, config.model.layers, tokens)

    def _batch(self, name: str, index: Tensor) -> tuple[Tensor, Tensor]:
        """Standardised images and labels at ``index`` [..., B] (any leading shape)."""
        split, flat = self.splits[name], index.to(self.device).reshape(-1)
        images = (split.inputs(flat) - self.mean) / self.std
        return images.view(*index.shape, *images.shape[1:]), split.labels[flat].view(index.shape)

    def _member_loss(self, params, images: Tensor, labels: Tensor, reduction: str):
        """One member's (loss, wrong predictions) on its batch (the single engine's step)."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = functional_call(self.template, params, (images,)).float()
        loss = F.cross_entropy(logits, labels, reduction=reduction)
        return loss, (logits.argmax(1) != labels).sum()

    def train_epoch(self, epoch: int) -> None:
        self._train_mode(True)
        orders = torch.stack(
            [torch.randperm(self.n_train, generator=m.order) for m in self.members]
        )
        loss_sum = torch.zeros(len(self.members), dtype=torch.float64, device=self.device)
        wrong = torch.zeros(len(self.members), dtype=torch.int64, device=self.device)
        mean_loss = partial(self._member_loss, reduction="mean")
        for i in range(self.steps):
            x, y = self._batch("train", orders[:, i * self.batch_size : (i + 1) * self.batch_size])
            losses, mistakes = self._vmap(mean_loss, (0, 0, 0), x, y)
            self._update(losses)
            loss_sum += losses.detach()
            wrong += mistakes
        seen = self.steps * self.batch_size
        self.train_metrics = [
            (total / self.steps, mistakes / seen)
            for total, mistakes in zip(loss_sum.tolist(), wrong.tolist(), strict=True)
        ]

    @torch.no_grad()
    def _evaluate_split(self, name: str) -> list[tuple[float, float]]:
        """Each member's (mean loss, error) on the split."""
        self._train_mode(False)
        n = len(self.splits[name])
        loss_sum = torch.zeros(len(self.members), dtype=torch.float64, device=self.device)
        wrong = torch.zeros(len(self.members), dtype=torch.int64, device=self.device)
        summed = partial(self._member_loss, reduction="sum")
        for index in torch.arange(n).split(self.config.train.eval_batch_size):
            losses, mistakes = self._vmap(summed, (0, None, None), *self._batch(name, index))
            loss_sum += losses.double()
            wrong += mistakes
        return [
            (total / n, mistakes / n)
            for total, mistakes in zip(loss_sum.tolist(), wrong.tolist(), strict=True)
        ]

    def evaluate(self, epoch: int, log: Log) -> None:
        metrics = {"train": self.train_metrics}
        metrics |= {
            name: self._evaluate_split(name) for name in ("val", "test") if name in self.splits
        }
        for m, member in enumerate(self.members):
            for split, per_member in metrics.items():
                loss, error = per_member[m]
                log(member.key, epoch, split, "loss", loss)
                log(member.key, epoch, split, "error", error)
                log(member.key, epoch, split, "trivial_loss", math.log(self.classes))
            for metric, value in self.size.items():
                log(member.key, epoch, "model", metric, value)
