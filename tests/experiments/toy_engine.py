"""A toy engine: least squares by SGD on the dataset's pixels, in a few dozen lines.

It implements nothing but the engine protocol (``gelus.experiments.engine``): a config holding
only its own keys (those the harness reads of every config, and ``model.width``), a trainer, and a
plug-in registered from here; importing this module (which unpickling one of its jobs does in a
worker) registers it. No module of the harness names it.
"""

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from gelus.experiments.config import register_engine
from gelus.experiments.engine import EnginePlugin


@dataclass(frozen=True)
class ToyModel:
    approximate: str = "none"
    width: int = 4  # units of the one hidden layer


@dataclass(frozen=True)
class ToyOptim:
    lr: tuple[float, ...] = (1e-2, 1e-3)


@dataclass(frozen=True)
class ToyTrain:
    epochs: int = 4
    seeds: int = 2
    batch_size: int = 20


@dataclass(frozen=True)
class ToyConfig:
    task: str = "toy"
    dataset: str = "mnist"
    activations: tuple[str, ...] = ("relu", "gelu")
    model: ToyModel = field(default_factory=ToyModel)
    optim: ToyOptim = field(default_factory=ToyOptim)
    train: ToyTrain = field(default_factory=ToyTrain)


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
            width = job.config.model.width
            self.weights.append(torch.randn(features, width, generator=generator) / features**0.5)
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


class ToyPlugin(EnginePlugin):
    """The toy's answers: an activation's runs as one job (its trainer holds every member), one
    range check of its own; the rest the protocol's defaults."""

    name = "toy"
    config_type = ToyConfig
    tasks = ("toy",)
    trainers: ClassVar[dict[str, type]] = {"toy": ToyEngine}
    one_run_per_job = False

    def checks(self, config: ToyConfig) -> list[tuple[bool, str, str]]:
        return [(config.model.width >= 1, "model.width", "at least 1")]

    def describe_setup(self, flat, metadata) -> dict:
        """Its model in its own words, and an aspect no other engine has (the report's setup
        table shows both, naming none of its keys)."""
        return {"model": f"{flat['model.width']} hidden units", "loss": "squared error"}


register_engine(ToyPlugin())
