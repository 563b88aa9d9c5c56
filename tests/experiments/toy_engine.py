"""A toy engine: least squares by SGD on the dataset's pixels, in a few dozen lines.

It implements nothing but the engine protocol (``gelus.experiments.engine``); importing this
module (which unpickling one of its jobs does in a worker) adds it to the driver's engines.
"""

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from gelus.experiments.driver import ENGINES


@dataclass(frozen=True)
class ToyModel:
    approximate: str = "none"


@dataclass(frozen=True)
class ToyOptim:
    lr: tuple[float, ...] = (1e-2, 1e-3)


@dataclass(frozen=True)
class ToyTrain:
    epochs: int = 4
    seeds: int = 2
    keep: tuple[float, ...] = (1.0,)
    batch_size: int = 20
    train_subset: int = 0
    tf32: bool = False
    checkpoint_every: int = 1


@dataclass(frozen=True)
class ToyConfig:
    task: str = "toy"
    dataset: str = "mnist"
    activations: tuple[str, ...] = ("relu", "gelu")
    train_on: str = "train"
    model: ToyModel = field(default_factory=ToyModel)
    optim: ToyOptim = field(default_factory=ToyOptim)
    train: ToyTrain = field(default_factory=ToyTrain)

    engine: ClassVar[str] = "toy"


class ToyEngine:
    """Each run: y ≈ act(x·w)·v for the pixels x and the label y, plain SGD, one run per member."""

    evaluates_before_training = False

    def __init__(self, job, data, device) -> None:
        self.job, self.data = job, data
        features = math.prod(data.train.sample_shape)
        self.act = job.activation.build()
        self.weights = []
        for key in job.members:
            generator = torch.Generator().manual_seed(key.seed)
            self.weights.append(torch.randn(features, 4, generator=generator) / features**0.5)
        self.order = torch.Generator().manual_seed(job.members[0].seed)

    @staticmethod
    def check_activation(activation) -> None:
        pass

    def _loss(self, w, split, n):
        x = split.inputs(torch.arange(n)).flatten(1)
        return (self.act(x @ w).sum(1) - split.labels[:n].float()).square().mean()

    def train_epoch(self, epoch: int) -> None:
        order = torch.randperm(self.job.train_size, generator=self.order)
        for w, key in zip(self.weights, self.job.members, strict=True):
            for start in range(0, len(order), self.job.config.train.batch_size):
                index = order[start : start + self.job.config.train.batch_size]
                x = self.data.train.inputs(index).flatten(1)
                w.requires_grad_(True)
                loss = (self.act(x @ w).sum(1) - self.data.train.labels[index].float()).square()
                (grad,) = torch.autograd.grad(loss.mean(), w)
                w.requires_grad_(False)
                w.sub_(key.lr * grad)

    def evaluate(self, epoch: int, log) -> None:
        for w, key in zip(self.weights, self.job.members, strict=True):
            for name in ("train", "val", "test"):
                split = getattr(self.data, name)
                if split is None:
                    continue
                n = self.job.train_size if name == "train" else len(split)
                log(key, epoch, name, "loss", self._loss(w, split, n).item())

    def state(self) -> dict:
        return {"weights": list(self.weights), "order": self.order.get_state()}

    def load_state(self, state: dict) -> None:
        self.weights = [w.clone() for w in state["weights"]]
        self.order.set_state(state["order"])

    @classmethod
    def evaluated_samples(cls, config, train: int, val: int, test: int) -> int:
        return train + val + test


ENGINES["toy"] = ToyEngine
