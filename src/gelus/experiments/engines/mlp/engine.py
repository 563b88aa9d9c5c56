"""The MLP engine: one stacked ensemble (one activation, one setting; members = seeds × lrs).

The loop, per epoch: every member draws its own permutation of the training set; each step gathers
``[K, B, in]`` inputs by index, draws the members' random bits (dropout / SOI masks), and takes one
Adam step; nothing synchronises with Python inside the epoch. After the epoch every member is
evaluated (dropout off) on train, val and test. :class:`MLPEngine` is this loop behind the engine
protocol (:mod:`gelus.experiments.engine`); the driver commits the records and checkpoints.
"""

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.divergence import TRIVIAL_METRIC
from gelus.experiments.engine import Log
from gelus.experiments.engines.mlp.config import MLPExperimentConfig
from gelus.experiments.engines.mlp.stacked import (
    MemberRandomness,
    StackedAdam,
    StackedMLP,
    classification_loss,
    reconstruction_loss,
)
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job

__all__ = [
    "MLPEngine",
    "build_ensemble",
    "compiled_train_step",
    "evaluate",
    "mlp_activation",
    "train_epoch",
    "train_step",
]

Metrics = dict[tuple[str, str], Tensor]  # (split, metric) -> per-member values [K]


def mlp_activation(activation: ActivationSpec) -> torch.nn.Module | None:
    """The one activation module every member of an ensemble shares (None for a stochastic one:
    the stacked model applies its mask itself). Raises ConfigError unless the module is
    elementwise and parameter-free, as one module serving K members must be."""
    MLPEngine.check_activation(activation)
    return None if activation.stochastic else activation.build()


def build_ensemble(
    config: MLPExperimentConfig,
    activation: ActivationSpec,
    keep: float,
    seeds: list[int],
    lrs: list[float],
    in_features: int,
    out_features: int,
    device: str = "cpu",
) -> tuple[StackedMLP, StackedAdam, MemberRandomness]:
    """The stacked model (members initialised from their own generators), its Adam and randomness,
    on ``device`` (initialised on the CPU and moved, so every device starts from the same weights)."""
    dtype = getattr(torch, config.train.dtype)
    sizes = (in_features, *config.model.hidden, out_features)
    model = StackedMLP(
        len(seeds),
        sizes,
        mlp_activation(activation),
        keep=keep,
        stochastic=activation.stochastic,
        dtype=dtype,
    )
    randomness = MemberRandomness(seeds, device)
    for member, generator in enumerate(randomness.init_generators()):
        model.init_member(member, config.model.init, generator)
    model.to(device)
    optimizer = StackedAdam(
        list(model.parameters()),
        torch.tensor(lrs, dtype=dtype),
        betas=(config.optim.beta1, config.optim.beta2),
        eps=config.optim.eps,
    )
    return model, optimizer, randomness


def train_step(
    model: StackedMLP,
    optimizer: StackedAdam,
    task: str,
    x: Tensor,
    target: Tensor,
    noise: Tensor | None,
) -> Tensor:
    """One Adam step of every member on its own batch; returns the per-member losses ``[K]``.

    ``noise``: the step's masks or uniforms (``model.noise`` of the members' random bits), or
    None without dropout or stochastic activation.
    """
    losses = _losses(model, task, x, target, noise)
    optimizer.zero_grad()
    losses.sum().backward()  # members are independent: d(sum)/dθ_k = dloss_k/dθ_k
    optimizer.step()
    return losses.detach()


def _losses(
    model: StackedMLP, task: str, x: Tensor, target: Tensor, noise: Tensor | None
) -> Tensor:
    output = model(x, noise)
    if task == "classify":
        return classification_loss(output, target)
    return reconstruction_loss(output, target)


def compiled_train_step(model: StackedMLP, task: str) -> Callable:
    """``train_step`` with the forward pass and loss compiled by ``torch.compile`` (inductor).

    The backward pass is compiled with it (AOTAutograd); Adam stays torch's fused kernel and the
    masks come in as a float input (inductor's int8 loads and bool stores are slow on CPU). The
    first step compiles (10-40 s cold, docs/PERFORMANCE.md); every later step reuses the graph, since
    every training batch has the same shape (the last partial batch is dropped).
    """
    compiled = torch.compile(functools.partial(_losses, model, task), dynamic=False)

    def step(model, optimizer, task, x, target, noise) -> Tensor:
        per_member = compiled(x, target, noise)
        optimizer.zero_grad()
        per_member.sum().backward()
        optimizer.step()
        return per_member.detach()

    return step


_TABLE_BYTES = 1 << 30  # image splits up to this size (as dtype) are converted once per process
# split -> {(dtype, device): table}
_tables: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _input_table(split, dtype: torch.dtype, device: torch.device) -> Tensor | None:
    """``split.inputs`` of every sample as one ``[N, features]`` tensor on ``device``, for image
    splits (on a GPU, for every split: the data are uploaded once per process, not per batch).

    Converting once (uint8 -> float32 / 255 -> dtype, as ``inputs`` does) lets each batch be one
    ``index_select`` into a reused buffer instead of a gather, a conversion and fresh memory.
    """
    images = getattr(split, "images", None)
    on_cpu = device.type == "cpu"
    if on_cpu and (
        not isinstance(images, Tensor) or images.numel() * dtype.itemsize > _TABLE_BYTES
    ):
        return None
    per_split = _tables.setdefault(split, {})
    if (dtype, device) not in per_split:
        index = torch.arange(len(split))
        rows = [split.inputs(chunk).flatten(1).to(device, dtype) for chunk in index.split(10_000)]
        per_split[(dtype, device)] = torch.cat(rows)
    return per_split[(dtype, device)]


def _labels(split, device: torch.device) -> Tensor:
    """The split's labels on ``device`` (uploaded once per process)."""
    if device.type == "cpu":
        return split.labels
    per_split = _tables.setdefault(split, {})
    if ("labels", device) not in per_split:
        per_split[("labels", device)] = split.labels.to(device)
    return per_split[("labels", device)]


class _BatchGather:
    """``split.inputs(index).flatten(1).to(dtype)`` on ``device``, into one reused buffer when it can."""

    def __init__(self, split, dtype: torch.dtype, device: torch.device) -> None:
        self.split, self.dtype = split, dtype
        self.table = _input_table(split, dtype, device)
        self.out = None

    def __call__(self, index: Tensor) -> Tensor:
        if self.table is None:
            return self.split.inputs(index).flatten(1).to(self.dtype)
        if self.out is None or len(self.out) != len(index):
            self.out = self.table.new_empty(len(index), self.table.shape[1])
        return torch.index_select(self.table, 0, index, out=self.out)


def train_epoch(
    model: StackedMLP,
    optimizer: StackedAdam,
    randomness: MemberRandomness,
    split,
    train_index: Tensor,
    task: str,
    batch_size: int,
    step: Callable = train_step,
) -> Tensor:
    """One pass, each member in its own order; returns the per-step losses ``[steps, K]``."""
    num_members = model.num_members
    dtype, device = model.weights[0].dtype, model.weights[0].device
    train_index = train_index.to(device)
    order = train_index[randomness.permutations(len(train_index))]  # [K, n]
    steps = len(train_index) // batch_size  # drop the last partial batch: one shape, reused graphs
    gather = _BatchGather(split, dtype, device)
    labels = _labels(split, device)
    bits = noise = None
    if model.needs_noise:
        bits = torch.empty(
            num_members, model.noise_words(batch_size), dtype=torch.int64, device=device
        )
        noise = torch.empty(num_members, model.noise_count(batch_size), dtype=dtype, device=device)
    losses = torch.empty(steps, num_members, dtype=dtype, device=device)
    model.train()
    for s in range(steps):  # no step reads a value back to the host
        index = order[:, s * batch_size : (s + 1) * batch_size].reshape(-1)  # [K·B]
        x = gather(index).view(num_members, batch_size, -1)
        target = labels[index].view(num_members, batch_size) if task == "classify" else x
        if bits is not None:
            model.noise(randomness.fill_bits(bits), batch_size, out=noise)
        losses[s] = step(model, optimizer, task, x, target, noise)
    return losses


@torch.no_grad()
def evaluate(
    model: StackedMLP,
    split,
    index: Tensor,
    task: str,
    batch_size: int,
    noise: float = 0.0,
    noise_generator: torch.Generator | None = None,
) -> dict[str, Tensor]:
    """Per-member metrics ``[K]`` on ``split[index]``, dropout off; inputs plus Uniform[-noise, noise].

    Classification: ``loss`` (mean cross-entropy, nats) and ``error`` (fraction misclassified).
    Autoencoder: ``loss`` = ``recon_error`` = mean squared error per pixel.
    """
    model.eval()
    dtype, device = model.weights[0].dtype, model.weights[0].device
    num_members = model.num_members
    loss_sum = torch.zeros(num_members, dtype=torch.float64, device=device)
    wrong = torch.zeros(num_members, dtype=torch.int64, device=device)
    gather = _BatchGather(split, dtype, device)
    all_labels = _labels(split, device)
    for chunk in index.to(device).split(batch_size):
        x = gather(chunk)  # [B, in], shared by every member
        if noise > 0:
            # drawn on the CPU from the shared noise seed: the same noise on every device
            u = torch.rand(x.shape, generator=noise_generator, dtype=dtype).to(device)
            x = x + (u * 2 - 1) * noise
        output = model(x)  # [K, B, out]
        if task == "classify":
            labels = all_labels[chunk]
            ce = F.cross_entropy(output.flatten(0, 1), labels.repeat(num_members), reduction="none")
            loss_sum += ce.view(num_members, -1).sum(dim=1, dtype=torch.float64)
            wrong += (output.argmax(dim=-1) != labels).sum(dim=1)
        else:
            loss_sum += (output - x).square().flatten(1).sum(dim=1, dtype=torch.float64) / x.shape[
                1
            ]
    n = len(index)
    if task == "classify":
        return {"loss": (loss_sum / n).cpu(), "error": (wrong.double() / n).cpu()}
    return {"loss": (loss_sum / n).cpu(), "recon_error": (loss_sum / n).cpu()}


def _evaluated_splits(data, config: MLPExperimentConfig, train_index: Tensor) -> dict[str, tuple]:
    """{split name: (split, index)}: what ``evaluate`` reads after each epoch."""
    eval_train = train_index
    if config.train.eval_train_subset:
        eval_train = train_index[: config.train.eval_train_subset]
    splits = {"train": (data.train, eval_train), "test": (data.test, torch.arange(len(data.test)))}
    if data.val is not None:
        splits["val"] = (data.val, torch.arange(len(data.val)))
    return splits


@torch.no_grad()
def trivial_losses(data, config: MLPExperimentConfig, train_index: Tensor) -> dict[str, float]:
    """{split: mean squared error per pixel of the training set's mean sample}: the loss of the
    autoencoder that ignores its input, the reference of the divergence rule
    (:mod:`gelus.experiments.divergence`)."""
    batch = config.train.eval_batch_size

    def samples(split, chunk: Tensor) -> Tensor:
        return split.inputs(chunk).flatten(1).double()

    mean = sum(samples(data.train, c).sum(dim=0) for c in train_index.split(batch)) / len(
        train_index
    )
    losses = {}
    for name, (split, index) in _evaluated_splits(data, config, train_index).items():
        squared = sum(
            float((samples(split, c) - mean).square().mean(dim=1).sum()) for c in index.split(batch)
        )
        losses[name] = squared / len(index)
    return losses


def _evaluate_all(
    model: StackedMLP, config: MLPExperimentConfig, data, train_index: Tensor, final: bool
) -> Metrics:
    task, batch = config.task, config.train.eval_batch_size
    splits = _evaluated_splits(data, config, train_index)
    metrics: Metrics = {}
    for name, (split, index) in splits.items():
        for metric, values in evaluate(model, split, index, task, batch).items():
            metrics[(name, metric)] = values
    if final:
        for level in config.noise.levels:
            generator = torch.Generator().manual_seed(
                config.noise.seed * 1_000_003 + round(level * 1e6)
            )
            index = torch.arange(len(data.test))
            values = evaluate(
                model, data.test, index, task, batch, noise=level, noise_generator=generator
            )
            values["accuracy"] = 1 - values["error"]
            for metric, value in values.items():
                metrics[(f"test@noise={level:g}", metric)] = value
    return metrics


class MLPEngine:
    """The engine protocol for one stacked ensemble: every member of ``job`` trained at once."""

    evaluates_before_training = True  # the paper's curves start at the untrained nets

    @staticmethod
    def check_activation(activation: ActivationSpec) -> None:
        """Refuse what one module shared by K stacked members cannot be: learnable or gated."""
        if activation.parameters or activation.gated:
            what = "has learnable parameters" if activation.parameters else "is gated"
            raise ConfigError(
                f"activation {activation.label!r} {what}; the stacked MLP engine shares one module "
                "between its members and takes parameter-free elementwise activations",
                "activations",
            )

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        config = self.config = job.config
        self.job, self.data = job, data
        self.members = job.members
        in_features = math.prod(data.train.sample_shape)
        out_features = data.num_classes if config.task == "classify" else in_features
        self.model, self.optimizer, self.randomness = build_ensemble(
            config,
            job.activation,
            job.keep,
            [k.seed for k in job.members],
            [k.lr for k in job.members],
            in_features,
            out_features,
            str(device),
        )
        self.train_index = torch.arange(len(data.train))
        if config.train.train_subset:
            self.train_index = self.train_index[: config.train.train_subset]
        if len(self.train_index) < config.train.batch_size:
            raise ConfigError(
                f"{len(self.train_index)} training samples: fewer than one batch of "
                f"{config.train.batch_size}"
            )
        compiled = config.train.compile
        self.step = compiled_train_step(self.model, config.task) if compiled else train_step

    def train_epoch(self, epoch: int) -> None:
        train_epoch(
            self.model,
            self.optimizer,
            self.randomness,
            self.data.train,
            self.train_index,
            self.config.task,
            self.config.train.batch_size,
            self.step,
        )

    def evaluate(self, epoch: int, log: Log) -> None:
        final = epoch == self.config.train.epochs
        metrics = _evaluate_all(self.model, self.config, self.data, self.train_index, final)
        columns = {name: values.tolist() for name, values in metrics.items()}
        if epoch == 0 and self.config.task != "classify":  # once, with the untrained nets
            for split, value in trivial_losses(self.data, self.config, self.train_index).items():
                columns[(split, TRIVIAL_METRIC)] = [value] * len(self.members)
        for member, key in enumerate(self.members):
            for (split, metric), values in columns.items():
                log(key, epoch, split, metric, values[member])

    def state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generators": self.randomness.state(),
        }

    @classmethod
    def evaluated_samples(cls, config: MLPExperimentConfig, train: int, val: int, test: int) -> int:
        subset = config.train.train_subset
        train = min(train, subset) if subset else train
        eval_train = min(config.train.eval_train_subset or train, train)
        return eval_train + val + test

    def load_members(self, members: list[tuple[dict[str, Any], int]]) -> None:
        """Load member k's final model from ``members[k] = (kept state, index in it)``."""
        stacked = {
            name: torch.stack([state["model"][name][index] for state, index in members])
            for name in self.model.state_dict()
        }
        self.model.load_state_dict(stacked)

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.randomness.load_state(state["generators"])
