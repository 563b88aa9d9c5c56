"""K independent MLPs trained as one stacked model: weights ``[K, in, out]``, one ``baddbmm`` per layer.

Member k is an ordinary MLP ``x -> act(x W_1 + b_1) -> ... -> x W_L + b_L`` with its own
initialization, learning rate, data order and dropout masks; stacking only batches the arithmetic.
Every member draws its randomness from its own ``torch.Generator`` (see ``MemberRandomness``), so a
member's run depends on its seed alone, not on which other members share the ensemble.

Shapes: ``x`` is ``[K, B, in]`` (each member its own batch) or ``[B, in]`` (one batch seen by every
member, for evaluation); hidden activations are ``[K, B, H]``; the output is ``[K, B, out]``.
"""

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gelus._torch_compat import fused_adam_, has_fused_adam

__all__ = [
    "MemberRandomness",
    "StackedAdam",
    "StackedMLP",
    "classification_loss",
    "reconstruction_loss",
]

# the normal inits' std of W from (fan_in, fan_out); unit_norm's N(0, 1) is then scaled per unit
_NORMAL_STD = {
    "unit_norm": lambda fan_in, fan_out: 1.0,
    "xavier": lambda fan_in, fan_out: math.sqrt(2.0 / (fan_in + fan_out)),
    "he": lambda fan_in, fan_out: math.sqrt(2.0 / fan_in),
}


class StackedMLP(nn.Module):
    """K MLPs of widths ``sizes`` (input, hidden..., output) with a shared elementwise activation.

    Dropout (``keep < 1``) multiplies each hidden activation by ``(u < keep) / keep``; a stochastic
    activation (the SOI map) multiplies the pre-activation ``h`` by ``u < Φ(h)`` and uses its
    expectation ``h·Φ(h)`` in evaluation.

    The uniforms come from random bits (``noise``): an ``n``-bit signed integer ``b`` (the
    little-endian bytes of int64 words) stands for ``u = (b + 2^(n-1) + 1/2) / 2^n``. Dropout uses
    ``n = 8`` when ``keep·256`` is an integer (then ``P(u < keep) = keep`` exactly), else ``n = 16``;
    the SOI map uses ``n = 16``. Eight-bit uniforms cost ~7× less than float uniforms here.
    """

    def __init__(
        self,
        num_members: int,
        sizes: Sequence[int],
        activation: nn.Module | None,
        *,
        keep: float = 1.0,
        stochastic: bool = False,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if stochastic and keep < 1.0:
            raise ValueError("the SOI map is its own regularizer: use keep=1.0 with it")
        self.num_members = num_members
        self.sizes = tuple(sizes)
        self.activation = activation
        self.keep = keep
        self.stochastic = stochastic
        self.weights = nn.ParameterList(
            nn.Parameter(torch.empty(num_members, fan_in, fan_out, dtype=dtype))
            for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:], strict=True)
        )
        self.biases = nn.ParameterList(
            nn.Parameter(torch.zeros(num_members, 1, fan_out, dtype=dtype))
            for fan_out in self.sizes[1:]
        )

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return self.sizes[1:-1]

    @property
    def needs_noise(self) -> bool:
        """Whether a training step needs random bits (dropout or a stochastic activation)."""
        return self.keep < 1.0 or self.stochastic

    @property
    def noise_bits(self) -> int:
        """Bits per uniform: 8 when that represents ``keep`` exactly, else 16 (see the class)."""
        if not self.stochastic and (self.keep * 256).is_integer():
            return 8
        return 16

    def noise_count(self, batch_size: int) -> int:
        """Uniforms per member per step: one per hidden unit per sample."""
        return batch_size * sum(self.hidden_sizes)

    def noise_words(self, batch_size: int) -> int:
        """int64 words of random bits per member per step."""
        return -(-self.noise_count(batch_size) * self.noise_bits // 64)

    def noise(self, words: Tensor, batch_size: int, out: Tensor | None = None) -> Tensor:
        """The step's masks (dropout: 0 or ``1/keep``) or uniforms (SOI map) ``[K, count]``.

        ``words``: int64 ``[K, noise_words(batch_size)]`` of uniform random bits; ``out``: an
        optional buffer to reuse (a fresh multi-megabyte tensor every step costs page faults).
        """
        dtype = self.weights[0].dtype
        n = self.noise_bits
        b = words.view(torch.int8 if n == 8 else torch.int16)[:, : self.noise_count(batch_size)]
        if out is None:
            out = torch.empty(b.shape, dtype=dtype, device=words.device)
        if self.stochastic:
            return out.copy_(b).add_(2 ** (n - 1) + 0.5).mul_(2.0**-n)
        # u < keep  <=>  b + 2^(n-1) + 1/2 < keep·2^n  <=>  b < ceil(keep·2^n - 2^(n-1) - 1/2)
        threshold = math.ceil(self.keep * 2**n - 2 ** (n - 1) - 0.5)
        return out.copy_(b < threshold).mul_(1.0 / self.keep)  # torch.where is 3x slower here

    def init_member(self, member: int, method: str, generator: torch.Generator) -> None:
        """Initialise member ``member`` from ``generator`` by ``method`` (``model.init``), every
        layer (the output layer too); a layer's weight is ``[fan_in, fan_out]``.

        - ``unit_norm`` (the paper's TF scripts): W ~ N(0, 1), then each output unit's fan-in
          vector ``W[:, j]`` scaled to unit L2 norm; zero biases.
        - ``torch``: nn.Linear's default, U(±1/√fan_in) for weights and biases.
        - ``xavier`` (Glorot & Bengio 2010, normal): W ~ N(0, 2/(fan_in + fan_out)), gain 1; zero
          biases.
        - ``he`` (He et al. 2015, normal, fan-in mode): W ~ N(0, 2/fan_in), ReLU's gain √2 for
          every activation (the init the folklore calls too aggressive for GELU; the activation's
          own gain, :func:`gelus.init.calculate_gain`, would give each activation of a seed
          different weights); zero biases.
        """
        with torch.no_grad():
            for weight, bias in zip(self.weights, self.biases, strict=True):
                w = weight[member]  # [in, out]
                fan_in, fan_out = w.shape
                if method == "torch":
                    bound = 1.0 / math.sqrt(fan_in)
                    w.uniform_(-bound, bound, generator=generator)
                    bias[member].uniform_(-bound, bound, generator=generator)
                    continue
                if method not in _NORMAL_STD:
                    raise ValueError(
                        f"unknown init {method!r}; use one of torch, {', '.join(_NORMAL_STD)}"
                    )
                w.copy_(torch.randn(w.shape, generator=generator, dtype=torch.float64))
                if method == "unit_norm":
                    w.div_(w.norm(dim=0, keepdim=True))
                else:
                    w.mul_(_NORMAL_STD[method](fan_in, fan_out))
                bias[member].zero_()

    def _hidden(self, h: Tensor, noise: Tensor | None) -> Tensor:
        if self.stochastic:
            p = torch.special.ndtr(h)
            if noise is None:  # evaluation: the expectation E[h·m] = h·Φ(h)
                return h * p
            return h * (noise < p.detach()).to(h.dtype)  # the mask is a constant for autograd
        h = self.activation(h)
        if noise is not None and self.keep < 1.0:
            h = h * noise  # the dropout mask, already 0 or 1/keep
        return h

    def forward(self, x: Tensor, noise: Tensor | None = None) -> Tensor:
        """Output ``[K, B, out]`` for ``x`` ``[K, B, in]`` or shared ``[B, in]``.

        ``noise`` ``[K, noise_count(B)]`` (from :meth:`noise`) switches on dropout / the stochastic
        mask (training); without it the forward pass is deterministic (evaluation).
        """
        last = len(self.weights) - 1
        offset = 0
        if x.dim() == 2:  # one batch for every member: a stride-0 view, no copy
            x = x.expand(self.num_members, *x.shape)
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(bias, x, weight)
            if layer < last:
                layer_noise = None
                if noise is not None:
                    count = x.shape[1] * x.shape[2]
                    layer_noise = noise[:, offset : offset + count].view(x.shape)
                    offset += count
                x = self._hidden(x, layer_noise)
        return x


def classification_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Per-member mean softmax cross-entropy ``[K]`` for logits ``[K, B, C]`` and labels ``[K, B]`` or ``[B]``."""
    num_members, batch, classes = logits.shape
    labels = labels.expand(num_members, batch)
    losses = F.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1), reduction="none")
    return losses.view(num_members, batch).mean(dim=1)


def reconstruction_loss(output: Tensor, target: Tensor) -> Tensor:
    """Per-member mean squared error over samples and pixels ``[K]``: mean((output - target)²)."""
    return (output - target).square().flatten(1).mean(dim=1)


class StackedAdam:
    """Adam over stacked parameters ``[K, ...]`` with a per-member learning rate ``lr`` ``[K]``.

    The update of member k is torch.optim.Adam's (Kingma & Ba 2015, bias-corrected)::

        m ← β1 m + (1 − β1) g            v ← β2 v + (1 − β2) g²
        θ ← θ − lr_k / (1 − β1^t) · m / (√v / √(1 − β2^t) + ε)

    computed by torch's fused Adam kernel (``torch.optim.Adam(fused=True)``) on each member's
    slices, grouped by learning rate; without that kernel, by eight elementwise ops in the order of
    torch's single-tensor implementation. Either way a member matches a model trained alone with
    torch.optim.Adam to rounding (≈1e-16 relative in float64).
    """

    def __init__(
        self,
        params: Sequence[Tensor],
        lr: Tensor,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = list(params)
        self.lr = lr.to(self.params[0].dtype)  # [K]
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.step_count = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self._groups = None  # per-lr lists of member slices for the fused kernel, built once
        # the fused kernel reads the step count from a tensor on the params' device; counting it
        # there keeps a CUDA step free of host-to-device copies (each one would wait for the GPU)
        self._step = torch.zeros((), device=self.params[0].device)

    @torch.no_grad()
    def step(self) -> None:
        self.step_count += 1
        if has_fused_adam():
            self._fused_step()
            return
        bias_correction1 = 1 - self.beta1**self.step_count
        bias_correction2_sqrt = (1 - self.beta2**self.step_count) ** 0.5
        for param, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            grad = param.grad
            m.lerp_(grad, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            denom = v.sqrt().div_(bias_correction2_sqrt).add_(self.eps)
            step_size = (self.lr / bias_correction1).view(-1, *([1] * (param.dim() - 1)))
            param.sub_(m.div(denom).mul_(step_size))

    def _fused_step(self) -> None:
        # torch.optim.Adam(fused=True)'s kernel, one call per distinct lr over the members' slices
        # (a member's slice of a [K, ...] tensor is contiguous): one pass over memory, not eight.
        if self._groups is None:
            members_by_lr: dict[float, list[int]] = {}
            for member, lr in enumerate(self.lr.tolist()):
                members_by_lr.setdefault(lr, []).append(member)
            self._groups = [
                (
                    lr,
                    members,
                    *(
                        [t[k] for t in tensors for k in members]
                        for tensors in (self.params, self.exp_avg, self.exp_avg_sq)
                    ),
                )
                for lr, members in members_by_lr.items()
            ]
        grads = [p.grad.contiguous() for p in self.params]
        step = self._step.fill_(float(self.step_count))
        for lr, members, params, exp_avgs, exp_avg_sqs in self._groups:
            fused_adam_(
                params,
                [g[k] for g in grads for k in members],
                exp_avgs,
                exp_avg_sqs,
                [step] * len(params),
                lr=lr,
                beta1=self.beta1,
                beta2=self.beta2,
                eps=self.eps,
            )

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def state_dict(self) -> dict:
        return {
            "step": self.step_count,
            "lr": self.lr.clone(),
            "exp_avg": [m.clone() for m in self.exp_avg],
            "exp_avg_sq": [v.clone() for v in self.exp_avg_sq],
        }

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step"])
        self.lr = state["lr"].to(self.lr)
        self._groups = None
        for mine, saved in zip(
            self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"], strict=True
        ):
            mine.copy_(saved)


class MemberRandomness:
    """One ``torch.Generator`` per member, seeded with the member's seed, on the training device.

    Draw order per member: initialization (always from a CPU generator, see ``init_generators``),
    then per epoch one permutation of the training set and per step one block of random bits
    (dropout / stochastic masks), drawn where the model trains so that no step waits for a
    host-to-device copy. CUDA's generator (Philox) draws other numbers than the CPU's (Mersenne
    twister): a run is reproducible on its device, and a member equals the same model trained
    alone on that device. Generator states are uint8 tensors, so they checkpoint with
    ``weights_only`` loading.
    """

    def __init__(self, seeds: Sequence[int], device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.seeds = [int(seed) for seed in seeds]
        self.generators = [
            torch.Generator(device=self.device).manual_seed(seed) for seed in self.seeds
        ]

    def init_generators(self) -> list[torch.Generator]:
        """CPU generators for the initial weights: the same initialization on every device."""
        if self.device.type == "cpu":
            return self.generators  # the draw order above: initialization comes first
        return [torch.Generator().manual_seed(seed) for seed in self.seeds]

    def permutations(self, n: int) -> Tensor:
        """``[K, n]``: each member's own shuffle of ``range(n)``, on the device."""
        return torch.stack(
            [torch.randperm(n, generator=g, device=self.device) for g in self.generators]
        )

    def fill_bits(self, out: Tensor) -> Tensor:
        """Fill ``out`` int64 ``[K, words]`` with each member's next uniform random 64-bit words."""
        for member, generator in enumerate(self.generators):
            out[member].random_(-(2**63), None, generator=generator)  # the full 64-bit range
        return out

    def state(self) -> list[Tensor]:
        return [g.get_state() for g in self.generators]

    def load_state(self, states: Sequence[Tensor]) -> None:
        for generator, state in zip(self.generators, states, strict=True):
            generator.set_state(state)
