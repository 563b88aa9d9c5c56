"""Many transformer runs of one activation trained at once, where one small model leaves the
device idle: :class:`StackedTransformerEngine` (the language model) and
:class:`~gelus.experiments.engines.vit.stacked.StackedViTEngine` (on :class:`StackedMembers`),
each a job of M members (seeds × learning rates).

Why: at the preset's shape (d 128, 4 layers, batch 16 × 128 bytes) one model's step is far less
arithmetic than its kernel launches cost a GPU, so M members in one forward and backward should
cost little more than one: on an H200 (bf16), 15 stacked members took 0.30–0.33× the plain loop's
step per member (``gelus bench transformer --stack 15``, two runs). On one CPU thread a stacked
member's step took 1.06× the plain loop's (3 stacked, idle; 1.17–1.22× under load) against the
one-run engine's 1.004×, so
``train.stack=auto`` stacks on CUDA only (:func:`~gelus.experiments.engines.transformer.config.stacks_runs`
decides, the planner groups the jobs).

How: each member holds exactly what its single-run engine would build — ``build_model(config,
activation, seed)`` (``build_vit``), ``make_optimizer`` (AdamW, decay on matrices only), a
batch-order generator ``torch.Generator().manual_seed(seed)`` drawing the same ``randint``
(``randperm``) shapes — so a checkpoint holds each member's single-run state. A step stacks the
members' parameters (``torch.stack``: the gradients flow back to each member's own leaves), runs
one member's module on the stacked weights under ``vmap(functional_call)``, each member on its own
batch, and backpropagates the sum of the members' losses (each member's gradient is its own
loss's). Then each member clips its own global gradient norm and steps its own AdamW at its own
``lm_lr``. A member thus equals its run trained alone to float tolerance: only the batched
kernels' order of summation differs.

Logs per member what :class:`~gelus.experiments.engines.transformer.engine.TransformerEngine` (the
:class:`~gelus.experiments.engines.vit.engine.ViTEngine`) logs.
"""

import contextlib
import math
import warnings
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, vmap

from gelus.experiments.engine import Log
from gelus.experiments.engines.transformer.engine import (
    LN2,
    SteppedState,
    TransformerEngine,
    _check_fits,
    build_model,
    eval_starts,
    lm_lr,
    make_optimizer,
    model_size,
)
from gelus.experiments.engines.transformer.models import VOCAB
from gelus.experiments.errors import ConfigError
from gelus.experiments.plan import Job
from gelus.experiments.records import RunKey

__all__ = ["StackedMembers", "StackedTransformerEngine"]


class _Member(SteppedState):
    """One run of a stacked job: its model, optimizer, batch-order generator and step, as its
    single-run engine holds them (so its checkpoint is that engine's)."""

    def __init__(self, key: RunKey, model: torch.nn.Module, optimizer, order) -> None:
        self.key, self.model, self.optimizer, self.order = key, model, optimizer, order
        self.step = 0


class StackedMembers:
    """What a stacked transformer engine shares, whatever its model: the members, their stacked
    parameters, the per-member update and the checkpoint."""

    config: Any
    device: torch.device
    members: list[_Member]
    total: int  # optimizer steps of the whole run, for the lr schedule

    def _start(self, job: Job, models: list[torch.nn.Module]) -> None:
        self.members = []
        for key, model in zip(job.members, models, strict=True):
            model.to(self.device)  # before its optimizer, which is fused on CUDA
            optimizer = make_optimizer(self.config, model, key.lr)
            order = torch.Generator().manual_seed(key.seed)
            self.members.append(_Member(key, model, optimizer, order))
        self.template = self.members[0].model  # the module vmap runs on the stacked weights
        self.autocast = self.device.type == "cuda" and self.config.train.bf16

    @property
    def step(self) -> int:
        return self.members[0].step

    def _stacked(self) -> dict[str, Tensor]:
        """{name: the members' parameters stacked [M, ...]}: under autograd each member's
        leaves receive their slice of the gradient."""
        named = [dict(m.model.named_parameters()) for m in self.members]
        return {name: torch.stack([params[name] for params in named]) for name in named[0]}

    def _vmap(self, function, in_dims, *args) -> Tensor:
        # the CPU's SDPA kernel has no batching rule: vmap loops over the members there and says
        # so on every call; the CUDA kernels have one
        with warnings.catch_warnings(), self._attention_kernels():
            warnings.filterwarnings("ignore", message=".*batching rule.*scaled_dot_product")
            return vmap(function, in_dims=in_dims)(self._stacked(), *args)

    def _attention_kernels(self):
        """On CUDA, SDPA under vmap without the memory-efficient kernel: its backward refused
        vmap's layout on an H200 (torch 2.11, float32: "LSE is not correctly aligned (strideH)").
        bf16 can take the flash kernel; float32 takes the math path."""
        if self.device.type != "cuda":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])

    def _train_mode(self, training: bool) -> None:
        for member in self.members:
            member.model.train(training)

    def _update(self, losses: Tensor) -> None:
        """Backpropagate the members' losses [M], then each member clips its own gradients and
        steps its own AdamW at its own learning rate, as its single-run engine does."""
        optim = self.config.optim
        for member in self.members:
            lr = lm_lr(member.step, self.total, member.key.lr, optim.warmup, optim.min_lr)
            for group in member.optimizer.param_groups:
                group["lr"] = lr
        losses.sum().backward()
        for member in self.members:
            if optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(member.model.parameters(), optim.grad_clip)
            member.optimizer.step()
            member.optimizer.zero_grad(set_to_none=True)
            member.step += 1

    def state(self) -> dict[str, Any]:
        """Each member's single-run checkpoint state."""
        return {"members": [member.state() for member in self.members]}

    def load_state(self, state: dict[str, Any]) -> None:
        for member, saved in zip(self.members, state["members"], strict=True):
            member.load_state(saved)


class StackedTransformerEngine(StackedMembers):
    """The engine protocol for the language-model runs of one job (one activation; members =
    seeds × learning rates), trained stacked."""

    evaluates_before_training = False
    check_activation = staticmethod(TransformerEngine.check_activation)
    check_data = staticmethod(TransformerEngine.check_data)
    evaluated_samples = TransformerEngine.evaluated_samples

    def __init__(self, job: Job, data: Any, device: torch.device) -> None:
        config = self.config = job.config
        self.device, self.data = device, data
        self.context, self.batch_size = config.model.context, config.train.batch_size
        _check_fits(data, self.context)
        self._start(job, [build_model(config, job.activation, key.seed) for key in job.members])
        self.steps = job.train_size // self.batch_size
        if self.steps == 0:
            raise ConfigError(f"{job.train_size} windows per epoch is less than one batch")
        self.total = job.epochs * self.steps
        self.train_bytes = data.train.data.to(device)
        self.eval_data = {
            name: getattr(data, name).data.to(device)
            for name in ("val", "test")
            if getattr(data, name) is not None
        }
        self.train_loss = [float("nan")] * len(self.members)
        self.size = model_size(
            self.template, config.model.d_model, config.model.layers, self.context
        )

    def _windows(self, data: Tensor, starts: Tensor) -> Tensor:
        """Windows of ``context + 1`` bytes at ``starts`` [..., B]: int64 [..., B, context + 1]."""
        offsets = torch.arange(self.context + 1, device=self.device)
        return data[starts.to(self.device)[..., None] + offsets].long()

    def _member_loss(self, params: dict[str, Tensor], windows: Tensor, reduction: str) -> Tensor:
        """One member's loss on its windows [B, context + 1] (the single engine's ``_loss``)."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = functional_call(self.template, params, (windows[:, :-1],))
        return F.cross_entropy(
            logits.float().reshape(-1, VOCAB), windows[:, 1:].reshape(-1), reduction=reduction
        )

    def train_epoch(self, epoch: int) -> None:
        self._train_mode(True)
        high = len(self.train_bytes) - self.context  # offsets 0 .. len - context - 1
        starts = torch.stack(
            [
                torch.randint(0, high, (self.steps, self.batch_size), generator=member.order)
                for member in self.members
            ],
            dim=1,
        )  # [steps, M, B]: each member's own draws, as its single engine's
        total = torch.zeros(len(self.members), dtype=torch.float64, device=self.device)
        train_loss = partial(self._member_loss, reduction="mean")
        for i in range(self.steps):
            losses = self._vmap(train_loss, (0, 0), self._windows(self.train_bytes, starts[i]))
            self._update(losses)
            total += losses.detach()
        self.train_loss = [t / self.steps for t in total.tolist()]

    @torch.no_grad()
    def _evaluate_split(self, data: Tensor) -> list[float]:
        """Each member's mean cross-entropy in nats per predicted byte, on the same windows."""
        self._train_mode(False)
        starts = eval_starts(len(data), self.context, self.config.train.eval_bytes)
        total = torch.zeros(len(self.members), dtype=torch.float64, device=self.device)
        summed = partial(self._member_loss, reduction="sum")
        for chunk in starts.split(self.config.train.eval_batch_size):
            total += self._vmap(summed, (0, None), self._windows(data, chunk)).double()
        return [t / (len(starts) * self.context) for t in total.tolist()]

    def evaluate(self, epoch: int, log: Log) -> None:
        losses = {"train": self.train_loss}
        losses |= {name: self._evaluate_split(data) for name, data in self.eval_data.items()}
        for m, member in enumerate(self.members):
            for split, per_member in losses.items():
                log(member.key, epoch, split, "loss", per_member[m])
                log(member.key, epoch, split, "bpb", per_member[m] / LN2)
                log(member.key, epoch, split, "trivial_loss", math.log(VOCAB))
            for metric, value in self.size.items():
                log(member.key, epoch, "model", metric, value)
