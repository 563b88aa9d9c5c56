"""The CNN engine: one training run of the all-conv net (CIFAR-10) or WRN-40-4 (CIFAR-100).

:class:`CNNEngine` trains one model of a job by the recipe of its network config behind the engine
protocol (:mod:`gelus.experiments.engine`): the all-conv recipe sets lr and Adam's β₁ per epoch,
the WRN recipe a cosine lr per step and draws crops and flips. Its state (model, optimizer, scaler,
random streams, preprocessing statistics) lets an interrupted run continue exactly.

Data live on the training device as float32 tensors, uploaded once and normalised (and
ZCA-whitened) there, so on a GPU no batch crosses the bus; each epoch's batch order, crops and
flips are drawn at its start and each batch is one gather (:mod:`gelus.experiments.device_batches`),
so no step waits on the host. Randomness comes from two
seeded sources: torch's global generator (init, dropout, input noise) and a CPU
``torch.Generator`` for the batch order and the crops and flips, so the batches do not depend on
the device.
"""

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import gelus
from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.device_batches import draw_epoch, pad_once
from gelus.experiments.engine import Log, check_optimizer_state
from gelus.experiments.engines.cnn.config import CIFAR10AllConvConfig, CIFAR100WRNConfig, CNNConfig
from gelus.experiments.engines.cnn.data import (
    apply_zca,
    fit_zca,
    load_splits,
    mean_image,
)
from gelus.experiments.engines.cnn.models import AllConvNet, WideResNet
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job

__all__ = [
    "CIFAR10AllConvConfig",
    "CIFAR100WRNConfig",
    "CNNConfig",
    "CNNEngine",
    "allconv_beta1",
    "allconv_lr",
    "build_cnn",
    "channels_last",
    "cosine_lr",
    "make_optimizer",
    "make_training_step",
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


def build_cnn(cfg: CNNConfig, activation: ActivationSpec, num_classes: int) -> nn.Module:
    """The network of ``cfg`` with ``activation`` (one fresh module per place it is used)."""
    CNNEngine.check_activation(activation)
    act = activation.build
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

    if cfg.compile == "default" and device.type == "cpu" and not channels_last(cfg, device):
        # NCHW, as configured: left to itself inductor turns the convolutions NHWC, and torch's CPU
        # weight gradient of a 1×1 stride-2 convolution in NHWC is wrong on some processors (off
        # by ~20 on an AMD EPYC with torch 2.13; docs/ARCHITECTURE.md)
        loss_of = torch.compile(loss_of, dynamic=False, options={"layout_optimization": False})
    elif cfg.compile is not None:
        loss_of = torch.compile(loss_of, mode=cfg.compile, dynamic=False)

    def step(x: Tensor, y: Tensor) -> None:
        loss = loss_of(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return step


def channels_last(cfg: CNNConfig, device: torch.device) -> bool:
    """Whether the network runs NHWC on ``device`` (``cfg.channels_last``; None: on CUDA only)."""
    return device.type == "cuda" if cfg.channels_last is None else cfg.channels_last


def _to_device(x: Tensor, device: torch.device, channels_last: bool) -> Tensor:
    if x.device.type == "cpu" and device.type == "cuda":  # pinned: the copy runs asynchronously
        x = x.pin_memory().to(device, non_blocking=True)
    else:  # no copy where x already is ("cuda" names the tensors' "cuda:0" too)
        x = x.to(device)
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
        xb = _to_device(x[start : start + cfg.eval_batch_size], device, channels_last(cfg, device))
        yb = y[start : start + cfg.eval_batch_size].to(device)
        with _autocast(cfg, device):
            logits = model(xb)
        loss_sum += F.cross_entropy(logits.float(), yb, reduction="sum")
        wrong += (logits.argmax(1) != yb).sum()
    return loss_sum.item() / len(y), wrong.item() / len(y)


def _autocast(cfg: CNNConfig, device: torch.device) -> torch.autocast:
    dtype = AMP_DTYPES.get(cfg.amp_dtype) if cfg.amp_dtype else None
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


# ---------------------------------------------------------------- the recipes


class _AllConvRecipe:
    """All-conv: lr constant then linear decay, β₁ switched, set once per epoch; no augmentation."""

    padding, flip = None, False

    def __init__(self, cfg: CIFAR10AllConvConfig, lr: float, epochs: int, steps: int) -> None:
        self.cfg, self.lr, self.epochs = cfg, lr, epochs

    def start_epoch(self, optimizer: torch.optim.Optimizer, epoch: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = allconv_lr(epoch, self.epochs, self.cfg, self.lr)
            group["betas"] = (allconv_beta1(epoch, self.epochs, self.cfg), self.cfg.beta2)

    def start_step(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        pass


class _WRNRecipe:
    """WRN: cosine lr set per step (SGDR without restarts); random crops and flips."""

    def __init__(self, cfg: CIFAR100WRNConfig, lr: float, epochs: int, steps: int) -> None:
        self.lr, self.total = lr, epochs * steps
        self.padding, self.flip = cfg.crop_padding, cfg.flip

    def start_epoch(self, optimizer: torch.optim.Optimizer, epoch: int) -> None:
        pass

    def start_step(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step, self.total, self.lr)


# ---------------------------------------------------------------- the engine


class CNNEngine:
    """The engine protocol for one CNN run (a job of one member).

    Two seeded random sources: torch's global generator (init, dropout, input noise) and a CPU
    generator for the batch order, crops and flips, so the batches do not depend on the device.
    """

    evaluates_before_training = False

    @staticmethod
    def check_activation(activation: ActivationSpec) -> None:
        """Refuse a stochastic or gated activation: the CNNs apply elementwise ones."""
        if activation.stochastic or activation.gated:
            what = "stochastic" if activation.stochastic else "gated"
            raise ConfigError(
                f"activation {activation.label!r} is {what}, which the CNNs do not support",
                "activations",
            )

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        cfg = self.cfg = job.config.cnn
        (self.key,) = job.members
        if cfg.amp_dtype == "fp16" and device.type != "cuda":
            raise ConfigError("amp_dtype='fp16' needs CUDA; use amp_dtype='bf16' on the CPU", "amp")
        self.device, self.batch_size = device, job.config.train.batch_size
        torch.manual_seed(self.key.seed)  # init, dropout and input noise
        self.order = torch.Generator().manual_seed(self.key.seed)  # batch order, crops, flips
        self.data = data
        self._upload(None)
        self.model = build_cnn(cfg, job.activation, data.num_classes).to(device)
        self.channels_last = channels_last(cfg, device)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = make_optimizer(cfg, self.model, self.key.lr)
        self.scaler = torch.amp.GradScaler(device.type, enabled=cfg.amp_dtype == "fp16")
        self.step = make_training_step(cfg, self.model, self.optimizer, self.scaler, device)
        self.steps = len(self.y_train) // self.batch_size  # the last partial batch is dropped
        if self.steps == 0:
            raise ConfigError(
                f"{len(self.y_train)} training images is less than one batch of {self.batch_size}"
            )
        recipe = _AllConvRecipe if isinstance(cfg, CIFAR10AllConvConfig) else _WRNRecipe
        self.recipe = recipe(cfg, self.key.lr, job.epochs, self.steps)
        self.x_train = pad_once(self.x_train, self.recipe.padding or 0)  # crops: one gather

    def _upload(self, saved: dict[str, Tensor] | None) -> None:
        """The splits on the device, normalised and whitened there (with ``saved`` statistics or
        fitted on train): uploaded once, so no batch crosses the bus."""
        cfg = self.cfg
        splits = {
            name: (x.to(self.device), y.to(self.device))
            for name, (x, y) in load_splits(self.data, cfg.retrain_full).items()
        }
        self.preprocessing = _preprocess(cfg, splits, saved)
        self.x_train, self.y_train = splits["train"]
        n_eval = len(self.y_train) if cfg.train_eval_size is None else cfg.train_eval_size
        self.eval_splits = {"train": (self.x_train[:n_eval], self.y_train[:n_eval])}
        self.eval_splits |= {n: splits[n] for n in ("val", "test") if n in splits}

    def train_epoch(self, epoch: int) -> None:
        self.model.train()
        self.recipe.start_epoch(self.optimizer, epoch)
        # the draws of a per-batch loop (order, then each batch's crops and flips), made up front
        plan = draw_epoch(
            len(self.y_train), self.batch_size, self.order, self.recipe.padding, self.device
        )
        for i in range(self.steps):
            index, xb = plan.batch(self.x_train, i, flip=self.recipe.flip)
            self.recipe.start_step(self.optimizer, (epoch - 1) * self.steps + i)
            self.step(_to_device(xb, self.device, self.channels_last), self.y_train[index])

    def evaluate(self, epoch: int, log: Log) -> None:
        for name, (x, y) in self.eval_splits.items():
            loss, error = _evaluate(self.model, x, y, self.cfg, self.device)
            log(self.key, epoch, name, "loss", loss)
            log(self.key, epoch, name, "error", error)

    def state(self) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if cuda else [],
            "order_rng": self.order.get_state(),
            "preprocessing": self.preprocessing,
        }

    @classmethod
    def evaluated_samples(cls, config, train: int, val: int, test: int) -> int:
        cnn = config.cnn
        if cnn.retrain_full:
            train, val = train + val, 0
        return min(cnn.train_eval_size or train, train) + val + test

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        check_optimizer_state(self.optimizer)
        self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["torch_rng"])
        if self.device.type == "cuda":
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.order.set_state(state["order_rng"])
        saved = state["preprocessing"]
        if any(not torch.equal(saved[k], v) for k, v in self.preprocessing.items()):
            self._upload(saved)  # preprocess as the run began, not with a refit
            self.x_train = pad_once(self.x_train, self.recipe.padding or 0)
