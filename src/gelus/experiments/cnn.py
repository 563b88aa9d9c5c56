"""The paper's CIFAR experiments: one training run of the all-conv net (CIFAR-10) or WRN-40-4 (CIFAR-100).

``train_cnn_run(cfg, data, activation=..., seed=..., lr=..., device=..., log=..., checkpoint_path=...)``
trains one model by the protocol in ``cfg``, reports every epoch through ``log(epoch, split, metric,
value)`` and, given a checkpoint path, saves its whole state after each epoch and resumes from it:
an interrupted run continues exactly as if it had not stopped.

Data stay in memory as float32 tensors; batches are drawn by index and augmented as tensor ops.
Randomness comes from two seeded sources: torch's global generator (init, dropout, input noise) and
a CPU ``torch.Generator`` for the batch order and the crops and flips, so the order does not depend
on the device.
"""

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import gelus
from gelus.experiments.checkpoint import load_checkpoint, save_checkpoint
from gelus.experiments.cnn_data import (
    apply_zca,
    fit_zca,
    load_splits,
    mean_image,
    random_crop_flip,
)
from gelus.experiments.cnn_models import AllConvNet, WideResNet, make_activation

__all__ = [
    "CIFAR10AllConvConfig",
    "CIFAR100WRNConfig",
    "allconv_beta1",
    "allconv_lr",
    "build_cnn",
    "cosine_lr",
    "measure_training_step",
    "train_cnn_run",
]

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
GELU_FORMS = ("none", "tanh", "sigmoid")


@dataclass(frozen=True)
class _CNNRunOptions:
    """How a CNN run is split, evaluated and computed: the same for both CIFAR experiments."""

    val_size: int = 5000  # held out from the end of train when the dataset has no val split
    retrain_full: bool = (
        False  # train on train + val (no val metrics), as for the reported test error
    )
    train_eval_size: int | None = 10_000  # train loss/error on the first N train images; None: all
    eval_batch_size: int = 500
    amp_dtype: str | None = None  # None | "bf16" | "fp16" (fp16 on CUDA only, with a GradScaler)
    channels_last: bool | None = None  # NHWC; None: on CUDA only (slower on CPU oneDNN here)
    gelu_form: str = "tanh"  # "gelu" means GELU(approximate=gelu_form); the paper used tanh


@dataclass(frozen=True)
class CIFAR10AllConvConfig(_CNNRunOptions):
    """Salimans & Kingma's all-conv net on CIFAR-10, as the paper trained it (``all_convnet.py``)."""

    epochs: int = 200  # paper: 200
    batch_size: int = 100  # paper: 100
    lr: float = 1e-3  # Adam; the paper tuned it over {1e-3, 1e-4, 1e-5} on the 5k validation split
    lr_decay_start: int = 100  # lr constant for this many epochs, then linear to 0 at `epochs`
    beta1: float = 0.9  # Adam β₁ for epochs 1..beta1_switch_epoch
    beta1_late: float = 0.5  # Adam β₁ afterwards
    beta1_switch_epoch: int = 100
    beta2: float = 0.999
    adam_eps: float = 1e-8  # outside the √; the released g/√(v̂ + 1e-8) acts like ε ≈ 1e-4
    noise_std: float = 0.15  # Gaussian noise on the whitened input, training only
    dropout: float = 0.5  # after each max-pool
    widths: tuple[int, int] = (96, 192)  # channels of the first and second conv stacks
    zca_epsilon: float = 1e-5  # added to the covariance eigenvalues (Salimans & Kingma's nn.ZCA)
    bn_eps: float = 1e-4  # Lasagne's BatchNormLayer default
    logit_batchnorm: bool = True  # the released code batch-normalises the logits

    def __post_init__(self) -> None:
        _check_common(self)
        if not 0 <= self.lr_decay_start <= self.epochs:
            raise ValueError(f"lr_decay_start={self.lr_decay_start} must be in [0, epochs]")


@dataclass(frozen=True)
class CIFAR100WRNConfig(_CNNRunOptions):
    """WRN-40-4 on CIFAR-100, as the paper trained it (``SGDR_WRNs_gelu.py``, scenario 13)."""

    epochs: int = 50  # paper: 50 (one epoch = one pass over the 50k images, not the doubled set)
    batch_size: int = 128  # paper: 128
    lr: float = 0.1  # peak of the cosine schedule, decayed to 0 per batch over all epochs
    momentum: float = 0.9  # Nesterov
    weight_decay: float = 5e-4  # λ of the loss penalty λ·Σw² (conv/dense weights, BN scales)
    dropout: float = 0.3  # between the two convolutions of each block
    blocks_per_stage: int = 6  # depth 6n + 4 = 40
    widths: tuple[int, int, int, int] = (16, 64, 128, 256)  # stem, then 16k, 32k, 64k with k = 4
    crop_padding: int = 4  # random crops of the zero-padded (mean-subtracted) image
    flip: bool = True  # random horizontal flips
    bn_eps: float = 1e-4  # Lasagne's BatchNormLayer default

    def __post_init__(self) -> None:
        _check_common(self)
        if len(self.widths) != 4:
            raise ValueError(f"widths={self.widths} needs 4 entries: stem and three stages")


CNNConfig = CIFAR10AllConvConfig | CIFAR100WRNConfig


def _check_common(cfg: CNNConfig) -> None:
    for name in ("epochs", "batch_size", "eval_batch_size"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name}={getattr(cfg, name)} must be at least 1")
    if cfg.amp_dtype not in (None, *AMP_DTYPES):
        raise ValueError(f"amp_dtype={cfg.amp_dtype!r}: use None, 'bf16' or 'fp16'")
    if cfg.gelu_form not in GELU_FORMS:
        raise ValueError(f"gelu_form={cfg.gelu_form!r}: use one of {', '.join(GELU_FORMS)}")
    if cfg.val_size < 0:
        raise ValueError(f"val_size={cfg.val_size} must be non-negative")


# ---------------------------------------------------------------- schedules


def allconv_lr(epoch: int, cfg: CIFAR10AllConvConfig, base_lr: float) -> float:
    """The all-conv net's learning rate in 1-based ``epoch`` (constant within an epoch):

    lr = base_lr · min(1, (E − epoch + 1) / (E − D)),  E = cfg.epochs, D = cfg.lr_decay_start,

    i.e. base_lr through epoch D + 1, then falling by base_lr / (E − D) per epoch to base_lr / (E − D)
    in the last one (the released ``lr · min(2 − e/100, 1)`` with 0-based e).
    """
    if cfg.lr_decay_start == cfg.epochs:
        return base_lr
    return base_lr * min(1.0, (cfg.epochs - epoch + 1) / (cfg.epochs - cfg.lr_decay_start))


def allconv_beta1(epoch: int, cfg: CIFAR10AllConvConfig) -> float:
    """Adam's β₁ in 1-based ``epoch``: cfg.beta1 up to cfg.beta1_switch_epoch, cfg.beta1_late after."""
    return cfg.beta1 if epoch <= cfg.beta1_switch_epoch else cfg.beta1_late


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
    Returns the statistics, which the checkpoint keeps so a resumed run needs no refit.
    """
    x_train = splits["train"][0]
    if isinstance(cfg, CIFAR10AllConvConfig):
        for x, _ in splits.values():
            x.mul_(255).sub_(127.5).div_(128)
        if saved is None:
            mean, whitening = fit_zca(x_train, cfg.zca_epsilon)
            saved = {"mean": mean, "whitening": whitening}
        for x, _ in splits.values():
            apply_zca(x, saved["mean"], saved["whitening"])
    else:
        if saved is None:
            saved = {"pixel_mean": mean_image(x_train)}
        for x, _ in splits.values():
            x.sub_(saved["pixel_mean"])
    return saved


# ---------------------------------------------------------------- model and optimizer


def build_cnn(cfg: CNNConfig, activation: str, num_classes: int) -> nn.Module:
    """The network of ``cfg`` with ``activation`` (gelu meaning GELU(approximate=cfg.gelu_form))."""
    act = make_activation(activation, cfg.gelu_form)
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


def _optimizer(cfg: CNNConfig, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if isinstance(cfg, CIFAR10AllConvConfig):
        betas = (cfg.beta1, cfg.beta2)
        return torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=cfg.adam_eps)
    # The released code adds λ·Σw² over Lasagne's "regularizable" parameters (weights and BN
    # scales, not biases or BN shifts) to the loss: its gradient 2λw is SGD weight decay 2λ.
    decayed = [p for n, p in model.named_parameters() if n.endswith("weight")]
    others = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    groups = [
        {"params": decayed, "weight_decay": 2 * cfg.weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, nesterov=True)


def _resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: use 'auto', 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA device; use device='auto' or 'cpu'")
    return torch.device(device)


def _channels_last(cfg: CNNConfig, device: torch.device) -> bool:
    return device.type == "cuda" if cfg.channels_last is None else cfg.channels_last


def _to_device(x: Tensor, device: torch.device, channels_last: bool) -> Tensor:
    if device.type == "cuda":  # pinned host memory lets the copy run asynchronously
        x = x.pin_memory().to(device, non_blocking=True)
    if channels_last and x.ndim == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


@torch.no_grad()
def _evaluate(
    model: nn.Module, x: Tensor, y: Tensor, cfg: CNNConfig, device: torch.device
) -> tuple[float, float]:
    """(mean cross-entropy in nats, error fraction) of ``model`` in eval mode on (x, y)."""
    model.eval()
    loss_sum, wrong = 0.0, 0
    for start in range(0, len(y), cfg.eval_batch_size):
        xb = _to_device(x[start : start + cfg.eval_batch_size], device, _channels_last(cfg, device))
        yb = y[start : start + cfg.eval_batch_size].to(device)
        with _autocast(cfg, device):
            logits = model(xb)
        loss_sum += F.cross_entropy(logits.float(), yb, reduction="sum").item()
        wrong += (logits.argmax(1) != yb).sum().item()
    return loss_sum / len(y), wrong / len(y)


def _autocast(cfg: CNNConfig, device: torch.device) -> torch.autocast:
    dtype = AMP_DTYPES.get(cfg.amp_dtype) if cfg.amp_dtype else None
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


# ---------------------------------------------------------------- the run


def _run_identity(cfg: CNNConfig, activation: str, seed: int, lr: float) -> dict[str, Any]:
    return {
        "experiment": type(cfg).__name__,
        "config": dataclasses.asdict(cfg),
        "activation": activation,
        "seed": seed,
        "lr": lr,
    }


def train_cnn_run(
    cfg: CNNConfig,
    data: Any,
    *,
    activation: str,
    seed: int,
    lr: float,
    device: str,
    log: Callable[[int, str, str, float], None],
    checkpoint_path: Path | None,
) -> None:
    """Train one CIFAR model by the protocol of ``cfg`` on ``data`` (a ``gelus.data.Dataset``).

    After each 1-based epoch calls ``log(epoch, split, metric, value)`` for split in train / val /
    test (val absent with ``cfg.retrain_full``) and metric in loss (mean cross-entropy, nats) /
    error (fraction), with the model in eval mode (no dropout or noise; "train" is measured on the
    first ``cfg.train_eval_size`` training images, unaugmented), then ("train", "seconds", wall
    time since the run began, summed over resumptions). Then, given ``checkpoint_path``, saves the
    model, optimizer, epoch, random states and preprocessing statistics atomically; a run started
    with an existing checkpoint resumes after its epoch and ends with the same result as a run that
    was never interrupted. A checkpoint of another run (config, activation, seed or lr) is an error.
    """
    dev = _resolve_device(device)
    if cfg.amp_dtype == "fp16" and dev.type != "cuda":
        raise ValueError("amp_dtype='fp16' needs CUDA; use amp_dtype='bf16' on the CPU")
    identity = _run_identity(cfg, activation, seed, lr)
    state = load_checkpoint(checkpoint_path) if checkpoint_path is not None else None
    if state is not None and state["run"] != identity:
        raise ValueError(
            f"checkpoint {checkpoint_path} belongs to another run ({state['run']}); "
            "delete it or give this run its own checkpoint path"
        )
    if state is not None and state["epoch"] >= cfg.epochs:
        return

    torch.manual_seed(seed)  # init, dropout and input noise
    order_generator = torch.Generator().manual_seed(seed)  # batch order, crops, flips
    splits = load_splits(data, cfg.val_size, cfg.retrain_full)
    stats = _preprocess(cfg, splits, None if state is None else state["preprocessing"])
    model = build_cnn(cfg, activation, data.num_classes).to(dev)
    channels_last = _channels_last(cfg, dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = _optimizer(cfg, model, lr)
    scaler = torch.amp.GradScaler(dev.type, enabled=cfg.amp_dtype == "fp16")
    x_train, y_train = splits["train"]
    steps_per_epoch = len(y_train) // cfg.batch_size  # the last partial batch is dropped
    if steps_per_epoch == 0:
        raise ValueError(
            f"{len(y_train)} training images is less than one batch of {cfg.batch_size}"
        )
    n_eval = len(y_train) if cfg.train_eval_size is None else min(cfg.train_eval_size, len(y_train))
    eval_splits = {"train": (x_train[:n_eval], y_train[:n_eval])}
    eval_splits |= {name: splits[name] for name in ("val", "test") if name in splits}

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

    total_steps = cfg.epochs * steps_per_epoch
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        began = time.perf_counter()
        model.train()
        if isinstance(cfg, CIFAR10AllConvConfig):
            for group in optimizer.param_groups:
                group["lr"] = allconv_lr(epoch, cfg, lr)
                group["betas"] = (allconv_beta1(epoch, cfg), cfg.beta2)
        order = torch.randperm(len(y_train), generator=order_generator)
        for i in range(steps_per_epoch):
            index = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
            xb, yb = x_train[index], y_train[index]
            if isinstance(cfg, CIFAR100WRNConfig):
                xb = random_crop_flip(xb, cfg.crop_padding, cfg.flip, order_generator)
                step = (epoch - 1) * steps_per_epoch + i
                for group in optimizer.param_groups:
                    group["lr"] = cosine_lr(step, total_steps, lr)
            xb, yb = _to_device(xb, dev, channels_last), yb.to(dev, non_blocking=True)
            with _autocast(cfg, dev):
                loss = F.cross_entropy(model(xb).float(), yb)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

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


def measure_training_step(
    cfg: CNNConfig, activation: str = "gelu", *, batches: int = 3, device: str = "cpu"
) -> list[float]:
    """Wall seconds of each of ``batches`` training steps (after one warm-up step) of the full
    network of ``cfg`` on random 32×32 inputs: forward, backward and optimizer update, as in
    ``train_cnn_run``. For the cost table: seconds per epoch ≈ median × batches per epoch."""
    dev = _resolve_device(device)
    num_classes = 10 if isinstance(cfg, CIFAR10AllConvConfig) else 100
    model = build_cnn(cfg, activation, num_classes).to(dev)
    channels_last = _channels_last(cfg, dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = _optimizer(cfg, model, cfg.lr)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(cfg.batch_size, 3, 32, 32, generator=generator)
    y = torch.randint(0, num_classes, (cfg.batch_size,), generator=generator)
    times = []
    for _ in range(batches + 1):
        began = time.perf_counter()
        xb = x
        if isinstance(cfg, CIFAR100WRNConfig):
            xb = random_crop_flip(x, cfg.crop_padding, cfg.flip, generator)
        xb, yb = _to_device(xb, dev, channels_last), y.to(dev)
        with _autocast(cfg, dev):
            loss = F.cross_entropy(model(xb).float(), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return times[1:]
