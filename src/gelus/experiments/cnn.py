"""The paper's CIFAR experiments: one training run of the all-conv net (CIFAR-10) or WRN-40-4 (CIFAR-100).

``train_cnn_run(cfg, data, activation=..., seed=..., lr=..., device=..., log=..., checkpoint_path=...)``
trains one model by the protocol in ``cfg``, reports every epoch through ``log(epoch, split, metric,
value)`` and, given a checkpoint path, saves its whole state after each epoch and resumes from it:
an interrupted run continues exactly as if it had not stopped.

Data live on the training device as float32 tensors, uploaded once and normalised (and
ZCA-whitened) there, so on a GPU no batch crosses the bus; each epoch's batch order, crops and
flips are drawn at its start and each batch is one gather (:mod:`gelus.experiments.device_batches`),
so no step waits on the host. Randomness comes from two
seeded sources: torch's global generator (init, dropout, input noise) and a CPU
``torch.Generator`` for the batch order and the crops and flips, so the batches do not depend on
the device.
"""

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import gelus
from gelus.experiments.activations import activation_factory
from gelus.experiments.checkpoint import load_checkpoint, save_checkpoint
from gelus.experiments.cnn_config import CIFAR10AllConvConfig, CIFAR100WRNConfig, CNNConfig
from gelus.experiments.cnn_data import (
    apply_zca,
    fit_zca,
    load_splits,
    mean_image,
)
from gelus.experiments.cnn_models import AllConvNet, WideResNet
from gelus.experiments.device import local_device
from gelus.experiments.device_batches import draw_epoch, pad_once

__all__ = [
    "CIFAR10AllConvConfig",
    "CIFAR100WRNConfig",
    "CNNConfig",
    "allconv_beta1",
    "allconv_lr",
    "build_cnn",
    "cosine_lr",
    "make_optimizer",
    "make_training_step",
    "train_cnn_run",
]

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


# ---------------------------------------------------------------- schedules


def allconv_lr(epoch: int, epochs: int, cfg: CIFAR10AllConvConfig, base_lr: float) -> float:
    """The all-conv net's learning rate in 1-based ``epoch`` of ``epochs`` (constant within one):

    lr = base_lr · min(1, (E − epoch + 1) / (E − D)),  E = epochs, D = round(cfg.lr_decay_from · E),

    i.e. base_lr through epoch D + 1, then falling by base_lr / (E − D) per epoch to base_lr / (E − D)
    in the last one (the released ``lr · min(2 − e/100, 1)`` with 0-based e, E = 200, D = 100).
    """
    decay_start = round(cfg.lr_decay_from * epochs)
    if decay_start == epochs:
        return base_lr
    return base_lr * min(1.0, (epochs - epoch + 1) / (epochs - decay_start))


def allconv_beta1(epoch: int, epochs: int, cfg: CIFAR10AllConvConfig) -> float:
    """Adam's β₁ in 1-based ``epoch``: cfg.beta1 for the first round(cfg.beta1_switch_at · epochs)
    epochs, cfg.beta1_late after."""
    return cfg.beta1 if epoch <= round(cfg.beta1_switch_at * epochs) else cfg.beta1_late


def cosine_lr(step: int, total_steps: int, base_lr: float) -> float:
    """Cosine decay to 0, set per batch: lr = base_lr · (1 + cos(π · step / total_steps)) / 2.

    ``step`` counts the updates already made (0 for the first batch), as in the released SGDR code.
    """
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * step / total_steps))


# ---------------------------------------------------------------- preprocessing


def _preprocess(
    cfg: CNNConfig, splits: dict[str, tuple[Tensor, Tensor]], saved: dict[str, Tensor] | None
) -> dict[str, Tensor]:
    """Normalise every split in place with statistics of the training split (or the saved ones).

    All-conv: x ← (255x − 127.5) / 128 ≈ [−1, 1], then ZCA. WRN: x ← x − per-pixel train mean.
    Runs on the splits' device; returns the statistics (on the CPU), which the checkpoint keeps so
    a resumed run needs no refit.
    """
    x_train = splits["train"][0]
    if isinstance(cfg, CIFAR10AllConvConfig):
        for x, _ in splits.values():
            x.mul_(255).sub_(127.5).div_(128)
        if saved is None:
            mean, whitening = fit_zca(x_train, cfg.zca_epsilon)
            saved = {"mean": mean.cpu(), "whitening": whitening.cpu()}
        for x, _ in splits.values():
            apply_zca(x, saved["mean"], saved["whitening"])
    else:
        if saved is None:
            saved = {"pixel_mean": mean_image(x_train).cpu()}
        for x, _ in splits.values():
            x.sub_(saved["pixel_mean"].to(x.device))
    return saved


# ---------------------------------------------------------------- model and optimizer


def build_cnn(
    cfg: CNNConfig, activation: str, num_classes: int, approximate: str = "tanh"
) -> nn.Module:
    """The network of ``cfg`` with ``activation`` (gelu meaning GELU(approximate=approximate))."""
    act = activation_factory(activation, approximate)
    if isinstance(cfg, CIFAR10AllConvConfig):
        return AllConvNet(
            num_classes,
            cfg.widths,
            act,
            cfg.noise_std,
            cfg.dropout,
            cfg.bn_eps,
            cfg.logit_batchnorm,
        )
    return WideResNet(
        num_classes,
        cfg.blocks_per_stage,
        cfg.widths,
        act,
        init_gain=gelus.init.calculate_gain(act()),  # 1/√E[f(z)²], √2 for ReLU
        dropout=cfg.dropout,
        bn_eps=cfg.bn_eps,
    )


def make_optimizer(cfg: CNNConfig, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    """The network's optimizer at peak learning rate ``lr``: Adam (all-conv) or Nesterov SGD with
    the released L2 penalty as weight decay (WRN). On CUDA the fused implementation: one kernel
    launch per step instead of several per parameter tensor."""
    fused = True if next(model.parameters()).is_cuda else None
    if isinstance(cfg, CIFAR10AllConvConfig):
        betas = (cfg.beta1, cfg.beta2)
        return torch.optim.Adam(
            model.parameters(), lr=lr, betas=betas, eps=cfg.adam_eps, fused=fused
        )
    # The released code adds λ·Σw² over Lasagne's "regularizable" parameters (weights and BN
    # scales, not biases or BN shifts) to the loss: its gradient 2λw is SGD weight decay 2λ.
    decayed = [p for n, p in model.named_parameters() if n.endswith("weight")]
    others = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    groups = [
        {"params": decayed, "weight_decay": 2 * cfg.weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, nesterov=True, fused=fused)


def make_training_step(
    cfg: CNNConfig,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    device: torch.device,
) -> Callable[[Tensor, Tensor], None]:
    """``step(x, y)``: one update of ``model`` (in train mode) on a batch.

    loss = mean cross-entropy of model(x) against y, the forward in ``cfg.amp_dtype`` autocast;
    backward through ``scaler`` (a no-op unless fp16); optimizer step; gradients set to None.
    With ``cfg.compile`` the forward and loss are one ``torch.compile`` graph in that mode, its
    backward compiled with it (AOTAutograd); "reduce-overhead" replays both as CUDA graphs, the
    lever where a step is launch-bound. The optimizer stays eager (fused on CUDA).
    """

    def loss_of(x: Tensor, y: Tensor) -> Tensor:
        with _autocast(cfg, device):
            return F.cross_entropy(model(x).float(), y)

    if cfg.compile is not None:
        loss_of = torch.compile(loss_of, mode=cfg.compile, dynamic=False)

    def step(x: Tensor, y: Tensor) -> None:
        loss = loss_of(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return step


def _channels_last(cfg: CNNConfig, device: torch.device) -> bool:
    return device.type == "cuda" if cfg.channels_last is None else cfg.channels_last


def _to_device(x: Tensor, device: torch.device, channels_last: bool) -> Tensor:
    if x.device != device:  # pinned host memory lets the copy run asynchronously
        x = x.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else x.to(device)
    if channels_last and x.ndim == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


@torch.no_grad()
def _evaluate(
    model: nn.Module, x: Tensor, y: Tensor, cfg: CNNConfig, device: torch.device
) -> tuple[float, float]:
    """(mean cross-entropy in nats, error fraction) of ``model`` in eval mode on (x, y); sums stay
    on the device and are read once at the end (one host sync per split, not per batch)."""
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    wrong = torch.zeros((), dtype=torch.int64, device=device)
    for start in range(0, len(y), cfg.eval_batch_size):
        xb = _to_device(x[start : start + cfg.eval_batch_size], device, _channels_last(cfg, device))
        yb = y[start : start + cfg.eval_batch_size].to(device)
        with _autocast(cfg, device):
            logits = model(xb)
        loss_sum += F.cross_entropy(logits.float(), yb, reduction="sum")
        wrong += (logits.argmax(1) != yb).sum()
    return loss_sum.item() / len(y), wrong.item() / len(y)


def _autocast(cfg: CNNConfig, device: torch.device) -> torch.autocast:
    dtype = AMP_DTYPES.get(cfg.amp_dtype) if cfg.amp_dtype else None
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


# ---------------------------------------------------------------- the run


def _run_identity(cfg: CNNConfig, **run: Any) -> dict[str, Any]:
    return {"experiment": type(cfg).__name__, "config": dataclasses.asdict(cfg), **run}


def train_cnn_run(
    cfg: CNNConfig,
    data: Any,
    *,
    epochs: int,
    batch_size: int,
    activation: str,
    approximate: str = "tanh",
    seed: int,
    lr: float,
    device: str,
    log: Callable[[int, str, str, float], None],
    checkpoint_path: Path | None,
) -> None:
    """Train one CIFAR model by the protocol of ``cfg`` on ``data`` (a ``gelus.data.Dataset``) for
    ``epochs`` passes of ``batch_size`` images at peak learning rate ``lr``.

    After each 1-based epoch calls ``log(epoch, split, metric, value)`` for split in train / val /
    test (val absent with ``cfg.retrain_full``) and metric in loss (mean cross-entropy, nats) /
    error (fraction), with the model in eval mode (no dropout or noise; "train" is measured on the
    first ``cfg.train_eval_size`` training images, unaugmented), then ("train", "seconds", wall
    time since the run began, summed over resumptions). Then, given ``checkpoint_path``, saves the
    model, optimizer, epoch, random states and preprocessing statistics atomically; a run started
    with an existing checkpoint resumes after its epoch and ends with the same result as a run that
    was never interrupted. A checkpoint of another run (config, activation, seed or lr) is an error.
    """
    dev = torch.device(local_device(device))
    if cfg.amp_dtype == "fp16" and dev.type != "cuda":
        raise ValueError("amp_dtype='fp16' needs CUDA; use amp_dtype='bf16' on the CPU")
    identity = _run_identity(
        cfg, epochs=epochs, batch_size=batch_size, activation=activation,
        approximate=approximate, seed=seed, lr=lr,
    )  # fmt: skip
    state = load_checkpoint(checkpoint_path) if checkpoint_path is not None else None
    if state is not None and state.get("run") != identity:
        raise ValueError(
            f"checkpoint {checkpoint_path} belongs to another run ({state.get('run')}); "
            "delete it or give this run its own checkpoint path"
        )
    if state is not None and state["epoch"] >= epochs:
        return

    torch.manual_seed(seed)  # init, dropout and input noise
    order_generator = torch.Generator().manual_seed(seed)  # batch order, crops, flips
    # uploaded once, then normalised and whitened where they train: no batch crosses the bus
    splits = {
        name: (x.to(dev), y.to(dev)) for name, (x, y) in load_splits(data, cfg.retrain_full).items()
    }
    stats = _preprocess(cfg, splits, None if state is None else state["preprocessing"])
    model = build_cnn(cfg, activation, data.num_classes, approximate).to(dev)
    channels_last = _channels_last(cfg, dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = make_optimizer(cfg, model, lr)
    scaler = torch.amp.GradScaler(dev.type, enabled=cfg.amp_dtype == "fp16")
    train_step = make_training_step(cfg, model, optimizer, scaler, dev)
    x_train, y_train = splits["train"]
    steps_per_epoch = len(y_train) // batch_size  # the last partial batch is dropped
    if steps_per_epoch == 0:
        raise ValueError(f"{len(y_train)} training images is less than one batch of {batch_size}")
    n_eval = len(y_train) if cfg.train_eval_size is None else min(cfg.train_eval_size, len(y_train))
    eval_splits = {"train": (x_train[:n_eval], y_train[:n_eval])}
    eval_splits |= {name: splits[name] for name in ("val", "test") if name in splits}
    crops = isinstance(cfg, CIFAR100WRNConfig)
    padding = cfg.crop_padding if crops else None
    # zero-padded once for the crops: a batch is one gather on the device
    x_train = pad_once(x_train, padding or 0)

    start_epoch, seconds = 0, 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["torch_rng"])
        if dev.type == "cuda":
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        order_generator.set_state(state["order_rng"])
        start_epoch, seconds = state["epoch"], state["seconds"]

    total_steps = epochs * steps_per_epoch
    for epoch in range(start_epoch + 1, epochs + 1):
        began = time.perf_counter()
        model.train()
        if isinstance(cfg, CIFAR10AllConvConfig):
            for group in optimizer.param_groups:
                group["lr"] = allconv_lr(epoch, epochs, cfg, lr)
                group["betas"] = (allconv_beta1(epoch, epochs, cfg), cfg.beta2)
        # the draws of a per-batch loop (order, then each batch's crops and flips), made up front
        plan = draw_epoch(len(y_train), batch_size, order_generator, padding, dev)
        for i in range(steps_per_epoch):
            index, xb = plan.batch(x_train, i, flip=crops and cfg.flip)
            yb = y_train[index]
            if crops:
                step = (epoch - 1) * steps_per_epoch + i
                for group in optimizer.param_groups:
                    group["lr"] = cosine_lr(step, total_steps, lr)
            train_step(_to_device(xb, dev, channels_last), yb)

        results = {name: _evaluate(model, x, y, cfg, dev) for name, (x, y) in eval_splits.items()}
        seconds += time.perf_counter() - began
        for name, (loss_value, error) in results.items():
            log(epoch, name, "loss", loss_value)
            log(epoch, name, "error", error)
        log(epoch, "train", "seconds", seconds)
        if checkpoint_path is not None:
            state = {
                "run": identity,
                "epoch": epoch,
                "seconds": seconds,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if dev.type == "cuda" else [],
                "order_rng": order_generator.get_state(),
                "preprocessing": stats,
            }
            save_checkpoint(checkpoint_path, state)
