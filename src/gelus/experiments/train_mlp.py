"""Train one stacked ensemble (one activation, one setting; members = seeds × learning rates).

The loop, per epoch: every member draws its own permutation of the training set; each step gathers
``[K, B, in]`` inputs by index, draws the members' random bits (dropout / SOI masks), and takes one
Adam step; nothing synchronises with Python inside the epoch. After the epoch every member is
evaluated (dropout off) on train, val and test, the records are committed, then a checkpoint saved.
A job started again resumes after its checkpoint's epoch; epochs between the checkpoint and the
kill are recomputed bit-identically and their records are ignored as duplicates.
"""

import functools
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus.experiments.activations import activation_factory
from gelus.experiments.checkpoint import load_checkpoint, save_checkpoint
from gelus.experiments.config import ConfigError, ExperimentConfig, is_stochastic
from gelus.experiments.plan import Job
from gelus.experiments.records import RecordStore
from gelus.experiments.stacked import (
    MemberRandomness,
    StackedAdam,
    StackedMLP,
    classification_loss,
    reconstruction_loss,
)

__all__ = [
    "build_ensemble",
    "compiled_train_step",
    "evaluate",
    "mlp_activation",
    "run_mlp_job",
    "train_epoch",
    "train_step",
]

Metrics = dict[tuple[str, str], Tensor]  # (split, metric) -> per-member values [K]


def mlp_activation(name: str, approximate: str) -> torch.nn.Module | None:
    """The one activation module every member of an ensemble shares (None for a stochastic one:
    the stacked model applies its mask itself). Raises ConfigError unless the module is
    elementwise and parameter-free, as one module serving K members must be."""
    if is_stochastic(name):
        return None
    module = activation_factory(name, approximate)()
    if any(True for _ in module.parameters()):
        raise ConfigError(
            f"activation {name!r} has learnable parameters, which one stacked ensemble would share "
            "between its members; the MLP engine takes parameter-free elementwise activations"
        )
    probe = torch.linspace(-3, 3, 24).view(2, 3, 4)
    if module(probe).shape != probe.shape:
        raise ConfigError(
            f"activation {name!r} changes the tensor shape; the MLP engine needs an elementwise one"
        )
    return module


def build_ensemble(
    config: ExperimentConfig,
    activation: str,
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
        mlp_activation(activation, config.model.approximate),
        keep=keep,
        stochastic=is_stochastic(activation),
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


def _evaluate_all(
    model: StackedMLP, config: ExperimentConfig, data, train_index: Tensor, final: bool
) -> Metrics:
    task, batch = config.task, config.train.eval_batch_size
    eval_train = train_index
    if config.train.eval_train_subset:
        eval_train = train_index[: config.train.eval_train_subset]
    splits = {"train": (data.train, eval_train), "test": (data.test, torch.arange(len(data.test)))}
    if data.val is not None:
        splits["val"] = (data.val, torch.arange(len(data.val)))
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


def run_mlp_job(job: Job, data, store: RecordStore, progress: Callable[[int], None]) -> None:
    """Train ``job``'s ensemble to ``config.train.epochs``, resuming from its checkpoint."""
    config = job.config
    keys = job.members
    seeds = [key.seed for key in keys]
    lrs = [key.lr for key in keys]
    in_features = 1
    for size in data.train.sample_shape:
        in_features *= size
    out_features = data.num_classes if config.task == "classify" else in_features
    model, optimizer, randomness = build_ensemble(
        config, job.activation, job.keep, seeds, lrs, in_features, out_features, job.device
    )
    train_index = torch.arange(len(data.train))
    if config.train.train_subset:
        train_index = train_index[: config.train.train_subset]
    if len(train_index) < config.train.batch_size:
        raise ValueError(
            f"{len(train_index)} training samples: fewer than one batch of {config.train.batch_size}"
        )

    checkpoint_path = Path(job.checkpoint_path)
    run_ids = [key.run_id for key in keys]
    state = load_checkpoint(checkpoint_path)
    if state is not None and state.get("run_ids") != run_ids:
        state = None  # another composition of members: start afresh
    start_epoch, seconds = 0, 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        randomness.load_state(state["generators"])
        start_epoch, seconds = int(state["epoch"]), float(state["seconds"])

    for key in keys:
        store.start_run(key, job.config_json, job.metadata_json)

    def log(epoch: int, metrics: Metrics) -> None:
        columns = {name: values.tolist() for name, values in metrics.items()}
        for member, key in enumerate(keys):
            for (split, metric), values in columns.items():
                store.add(key, epoch, split, metric, values[member])
        store.commit()

    epochs = config.train.epochs
    step = compiled_train_step(model, config.task) if config.train.compile else train_step
    if start_epoch == 0:
        log(0, _evaluate_all(model, config, data, train_index, final=False))
    progress(start_epoch)
    for epoch in range(start_epoch + 1, epochs + 1):
        began = time.perf_counter()
        train_epoch(
            model,
            optimizer,
            randomness,
            data.train,
            train_index,
            config.task,
            config.train.batch_size,
            step,
        )
        metrics = _evaluate_all(model, config, data, train_index, final=epoch == epochs)
        seconds += time.perf_counter() - began
        metrics[("train", "seconds")] = torch.full((len(keys),), seconds)
        log(epoch, metrics)
        if epoch % config.train.checkpoint_every == 0 or epoch == epochs:
            save_checkpoint(
                checkpoint_path,
                {
                    "run_ids": run_ids,
                    "epoch": epoch,
                    "seconds": seconds,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "generators": randomness.state(),
                },
            )
        progress(epoch)
    store.finish_runs(run_ids)
    checkpoint_path.unlink(missing_ok=True)
