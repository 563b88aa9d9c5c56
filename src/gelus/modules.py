"""One ``nn.Module`` per member of the GELU family, and per name users arrive with.

Each module stores its hyperparameters (or parameters) and calls the matching function of
:mod:`gelus.functional` in ``forward``. Shapes: input ``(*)``, output ``(*)`` of the same shape,
except :class:`GEGLU` which halves ``dim``.

``inplace``: every module accepts it, so that any gelus class works as timm's
``act_layer(inplace=True)``. ``inplace=True`` writes the result into the input and returns it,
as torch's ``nn.SiLU(inplace=True)`` does (the dtype is the input's); it saves no memory while
autograd records, since the backward needs the input (a copy is kept). :class:`GEGLU` changes
the shape, so it accepts and ignores the flag.

TorchScript is deprecated in torch (``torch.jit.trace`` too, from torch 2.15): use
``torch.compile`` or ``torch.export``. ``torch.jit.script`` raises
:class:`TorchScriptUnsupportedError`, which says so; ``torch.jit.trace`` still records the
``gelus::`` operators where torch allows it (call ``import gelus`` before ``torch.jit.load``).
"""

import math

import torch
from torch import Tensor, nn

from gelus import functional as F
from gelus._clamped_swiglu import check_options
from gelus._common import apply_inplace, check_approximate
from gelus._extra import LAPLACE_MU, LAPLACE_SIGMA, _softplus_inverse
from gelus._operator import fx_leaf

__all__ = [
    "GEGLU",
    "GELU",
    "XIELU",
    "BiasGELU",
    "ClampedSwiGLU",
    "ClippedGELU",
    "GatedMember",
    "GeneralizedGELU",
    "HardMish",
    "Laplace",
    "QuickGELU",
    "ReGLU",
    "ReLU2",
    "SiLU",
    "SqrtSoftplus",
    "StochasticGELU",
    "SwiGLU",
    "Swish",
    "TorchScriptUnsupportedError",
]


class TorchScriptUnsupportedError(RuntimeError):
    """``torch.jit.script`` of a gelus module: unsupported (trace, compile or export instead)."""


class _Member(nn.Module):
    """What every module shares: ``inplace``, and the one TorchScript error."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def activation(self, x: Tensor) -> Tensor:  # the member, out of place
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        if self.inplace:
            return apply_inplace(self.activation, x)
        return self.activation(x)

    def __prepare_scriptable__(self):
        raise TorchScriptUnsupportedError(
            f"torch.jit.script does not support gelus modules ({type(self).__name__}): "
            "TorchScript is deprecated in torch. Use torch.compile or torch.export."
        )

    def _inplace_repr(self) -> str:
        return ", inplace=True" if self.inplace else ""


class GELU(_Member):
    r"""GELU(x) = x·Φ(x) = x·½·(1 + erf(x/√2)), or one of its classic approximations.

    ``approximate="tanh"``: ½x·(1 + tanh(√(2/π)·(x + 0.044715x³)));
    ``approximate="sigmoid"``: x·σ(1.702x).
    ``accurate=True`` (exact form only) takes the path without cancellation, accurate over the
    whole range, negative tail included, at a higher cost (see :func:`gelus.functional.gelu`).
    Accuracy of every path: docs/NUMERICS.md, "Accuracy" (CUDA: docs/CUDA.md).

    Example::

        >>> act = GELU(approximate="tanh")
        >>> y = act(torch.randn(2, 3))
    """

    def __init__(
        self, approximate: str = "none", *, accurate: bool = False, inplace: bool = False
    ) -> None:
        super().__init__(inplace)
        check_approximate(approximate, accurate)
        self.approximate = approximate
        self.accurate = accurate

    def activation(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate, accurate=self.accurate)

    def extra_repr(self) -> str:
        accurate = ", accurate=True" if self.accurate else ""
        return f"approximate={self.approximate!r}{accurate}{self._inplace_repr()}"


class QuickGELU(GELU):
    r"""QuickGELU(x) = x·σ(1.702x), the sigmoid form of GELU (OpenAI CLIP, HF and timm ``quick_gelu``).

    Same as ``GELU(approximate="sigmoid")``.

    Example::

        >>> y = QuickGELU()(torch.randn(2, 3))
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(approximate="sigmoid", inplace=inplace)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")


class ClippedGELU(_Member):
    r"""ClippedGELU(x) = clamp(GELU(x), min, max).

    The default range [−10, 10] with the exact form is Hugging Face's ``gelu_10``
    (``ClippedGELUActivation``), used to bound activations for quantization.

    Example::

        >>> y = ClippedGELU(min=-10.0, max=10.0)(torch.randn(2, 3) * 20)
    """

    def __init__(
        self,
        min: float = -10.0,
        max: float = 10.0,
        approximate: str = "none",
        inplace: bool = False,
    ) -> None:
        super().__init__(inplace)
        if not min < max:
            raise ValueError(f"ClippedGELU needs min < max, got min={min}, max={max}")
        check_approximate(approximate)
        self.min = float(min)
        self.max = float(max)
        self.approximate = approximate

    def activation(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate).clamp(self.min, self.max)

    def extra_repr(self) -> str:
        return (
            f"min={self.min}, max={self.max}, approximate={self.approximate!r}"
            f"{self._inplace_repr()}"
        )


class SiLU(_Member):
    r"""SiLU(x) = x·σ(x), the sigmoid-weighted linear unit introduced in the GELU paper.

    Example::

        >>> y = SiLU()(torch.randn(2, 3))
    """

    def activation(self, x: Tensor) -> Tensor:
        return F.silu(x)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")


class Swish(_Member):
    r"""Swish(x) = x·σ(βx); β = 1 is SiLU, β → ∞ is ReLU, β = 1.702 is QuickGELU.

    Args:
        beta: initial β.
        learnable: make β an ``nn.Parameter`` (a scalar) trained with the network.

    Example::

        >>> act = Swish(beta=1.0, learnable=True)
        >>> y = act(torch.randn(2, 3))
    """

    def __init__(self, beta: float = 1.0, learnable: bool = False, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.learnable = learnable
        if learnable:
            self.beta = nn.Parameter(torch.tensor(float(beta)))
        else:
            self.beta = float(beta)

    def activation(self, x: Tensor) -> Tensor:
        return F.swish(x, self.beta)

    def extra_repr(self) -> str:
        beta = self.beta.item() if self.learnable else self.beta
        return f"beta={beta:g}, learnable={self.learnable}{self._inplace_repr()}"


@fx_leaf  # one node under torch.fx: x's dims are known only when the graph runs
def _along_channels(value: Tensor, x: Tensor, num_channels: int, channel_dim: int) -> Tensor:
    """GeneralizedGELU's ``[C]`` parameter as ``[C, 1, ..., 1]``, broadcasting along
    ``channel_dim`` of x (whose size there must be C)."""
    if x.dim() == 0:
        raise ValueError(
            f"GeneralizedGELU has {num_channels} channels along channel_dim="
            f"{channel_dim}, but the input is a 0-dim tensor"
        )
    dim = channel_dim % x.dim()
    if x.shape[dim] != num_channels:
        raise ValueError(
            f"GeneralizedGELU has {num_channels} channels but the input has "
            f"{x.shape[dim]} along channel_dim={channel_dim} (shape {tuple(x.shape)})"
        )
    return value.reshape((num_channels,) + (1,) * (x.dim() - dim - 1))


class GeneralizedGELU(_Member):
    r"""GeneralizedGELU(x) = x·Φ((x − μ)/σ) with learnable μ and σ, scalar or per channel.

    σ is parametrized as σ = exp(ρ) with ρ = ``log_sigma`` the stored parameter. Why exp and not
    softplus: σ is a scale, and the interesting direction (σ → 0 tends to ReLU) spans orders of
    magnitude; a step in ρ changes σ by the same factor at any size, the inverse is exactly
    log σ, and no extra constant is introduced. The ``sigma`` property returns exp(ρ) (> 0).

    Args:
        num_channels: ``None`` for one scalar μ and σ, or C for per-channel μ, σ of shape ``[C]``.
        mu: initial μ (the paper's GELU: 0).
        sigma: initial σ > 0 (the paper's GELU: 1).
        learnable: μ and ρ are ``nn.Parameter`` (True) or buffers (False).
        channel_dim: the dimension of the input that holds the C channels: −1 (the default,
            ``[N, C]`` or ``[B, T, C]``) or 1 for channels-first input such as ``[N, C, H, W]``.

    The output dtype is torch's promotion of the input's and the parameters' (float32
    parameters and a bf16 input give float32 per channel; scalar μ, σ are 0-dim and do not
    promote), as for ``x * weight``.

    Example::

        >>> act = GeneralizedGELU(num_channels=16, channel_dim=1)
        >>> y = act(torch.randn(8, 16, 5, 5))
        >>> act.sigma.shape
        torch.Size([16])
    """

    def __init__(
        self,
        num_channels: int | None = None,
        mu: float = 0.0,
        sigma: float = 1.0,
        learnable: bool = True,
        channel_dim: int = -1,
        inplace: bool = False,
    ) -> None:
        super().__init__(inplace)
        if not sigma > 0:
            raise ValueError(f"GeneralizedGELU needs sigma > 0, got sigma={sigma}")
        if num_channels is not None and num_channels < 1:
            raise ValueError(f"num_channels must be a positive int or None, got {num_channels}")
        self.num_channels = num_channels
        self.channel_dim = channel_dim
        self.learnable = learnable
        shape = () if num_channels is None else (num_channels,)
        mu_init = torch.full(shape, float(mu))
        log_sigma_init = torch.full(shape, math.log(sigma))
        if learnable:
            self.mu = nn.Parameter(mu_init)
            self.log_sigma = nn.Parameter(log_sigma_init)
        else:
            self.register_buffer("mu", mu_init)
            self.register_buffer("log_sigma", log_sigma_init)

    @property
    def sigma(self) -> Tensor:
        """σ = exp(log_sigma), always positive."""
        return self.log_sigma.exp()

    def _per_channel(self, value: Tensor, x: Tensor) -> Tensor:
        # [C] -> [C, 1, ..., 1] so that it broadcasts along channel_dim of x
        if self.num_channels is None:
            return value
        return _along_channels(value, x, self.num_channels, self.channel_dim)

    def activation(self, x: Tensor) -> Tensor:
        return F.generalized_gelu(
            x, self._per_channel(self.mu, x), self._per_channel(self.sigma, x)
        )

    def extra_repr(self) -> str:
        if self.num_channels is None:
            values = f"mu={self.mu.item():g}, sigma={self.sigma.item():g}"
        else:
            values = f"num_channels={self.num_channels}, channel_dim={self.channel_dim}"
        return f"{values}, learnable={self.learnable}{self._inplace_repr()}"


class StochasticGELU(_Member):
    r"""StochasticGELU(x) = x·m, m ~ Bernoulli(Φ(x)) in training; x·Φ(x) in eval (follows ``self.training``).

    The mask is a constant for autograd; E[x·m] = GELU(x). This is the paper's stochastic
    "SOI map", a regularizer in place of dropout.

    Args:
        generator: optional ``torch.Generator`` for reproducible masks (default: the global RNG).

    Example::

        >>> act = StochasticGELU()
        >>> y_train = act(torch.randn(2, 3))
        >>> y_eval = act.eval()(torch.randn(2, 3))
    """

    def __init__(self, generator: torch.Generator | None = None, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.generator = generator

    def activation(self, x: Tensor) -> Tensor:
        return F.stochastic_gelu(x, self.training, self.generator)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")


class BiasGELU(_Member):
    r"""BiasGELU(x) = GELU(x + b) with a learnable bias b of shape ``[num_features]`` (last dim).

    The fused bias-add + GELU of Megatron-style MLPs: use it after a ``Linear(bias=False)``.
    The bias starts at zero.

    Example::

        >>> act = BiasGELU(num_features=16, approximate="tanh")
        >>> y = act(torch.randn(4, 16))
    """

    def __init__(self, num_features: int, approximate: str = "none", inplace: bool = False) -> None:
        super().__init__(inplace)
        check_approximate(approximate)
        self.num_features = num_features
        self.approximate = approximate
        self.bias = nn.Parameter(torch.zeros(num_features))

    def activation(self, x: Tensor) -> Tensor:
        return F.bias_gelu(x, self.bias, self.approximate)

    def extra_repr(self) -> str:
        return (
            f"num_features={self.num_features}, approximate={self.approximate!r}"
            f"{self._inplace_repr()}"
        )


class GatedMember(_Member):
    """What the gated units share (x = [a, b] → a·g(b)): ``dim``, and the gate g itself, for
    :func:`gelus.init.calculate_gain` (E[(a·g(b))²] = E[g(b)²] for independent unit a, b)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__(inplace=False)  # the shape changes: accepted and ignored
        self.dim = dim

    def gate(self, b: Tensor) -> Tensor:
        raise NotImplementedError


class GEGLU(GatedMember):
    r"""GEGLU(x) = a·GELU(b) where x = [a, b] is split in two halves along ``dim`` (Shazeer 2020).

    The output has half the size of the input along ``dim``, so ``inplace`` is accepted (for
    ``act_layer(inplace=True)`` factories) and ignored. Note: NVIDIA Transformer Engine's
    ``geglu`` gates the other half (GELU on the first half) and uses the tanh form.

    Example::

        >>> act = GEGLU(dim=-1)
        >>> act(torch.randn(4, 32)).shape
        torch.Size([4, 16])
    """

    def __init__(self, dim: int = -1, approximate: str = "none", inplace: bool = False) -> None:
        super().__init__(dim)
        check_approximate(approximate)
        self.approximate = approximate

    def activation(self, x: Tensor) -> Tensor:
        return F.geglu(x, self.dim, self.approximate)

    def gate(self, b: Tensor) -> Tensor:
        return F.gelu(b, self.approximate)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, approximate={self.approximate!r}"


class SwiGLU(GatedMember):
    r"""SwiGLU(x) = a·SiLU(b) where x = [a, b] is split in two halves along ``dim`` (Shazeer 2020;
    LLaMA's feed-forward), the second half gated as in :class:`GEGLU`.

    The output has half the size of the input along ``dim``; ``inplace`` is accepted and ignored.

    Example::

        >>> SwiGLU(dim=-1)(torch.randn(4, 32)).shape
        torch.Size([4, 16])
    """

    def __init__(self, dim: int = -1, inplace: bool = False) -> None:
        super().__init__(dim)

    def activation(self, x: Tensor) -> Tensor:
        return F.swiglu(x, self.dim)

    def gate(self, b: Tensor) -> Tensor:
        return F.silu(b)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class ReGLU(GatedMember):
    r"""ReGLU(x) = a·ReLU(b) where x = [a, b] is split in two halves along ``dim`` (Shazeer 2020),
    the second half gated as in :class:`GEGLU`.

    The output has half the size of the input along ``dim``; ``inplace`` is accepted and ignored.

    Example::

        >>> ReGLU(dim=-1)(torch.randn(4, 32)).shape
        torch.Size([4, 16])
    """

    def __init__(self, dim: int = -1, inplace: bool = False) -> None:
        super().__init__(dim)

    def activation(self, x: Tensor) -> Tensor:
        return F.reglu(x, self.dim)

    def gate(self, b: Tensor) -> Tensor:
        return torch.relu(b)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class ClampedSwiGLU(GatedMember):
    r"""GPT-OSS's expert gate: from the two halves of x on ``dim``,
    g = min(gate, limit), u = clamp(up, −limit, limit), y = (u + 1)·g·σ(alpha·g).

    ``interleaved=True`` (GPT-OSS's checkpoints): gate = x[..., 0::2], up = x[..., 1::2];
    ``interleaved=False``: [gate, up] = x.chunk(2, dim), the gate first. Defaults alpha = 1.702,
    limit = 7.0 (transformers' ``GptOssConfig``). See
    :func:`gelus.functional.clamped_swiglu`; ``inplace`` is accepted and ignored.

    Example::

        >>> ClampedSwiGLU()(torch.randn(4, 32)).shape
        torch.Size([4, 16])
    """

    def __init__(
        self,
        alpha: float = 1.702,
        limit: float = 7.0,
        interleaved: bool = True,
        dim: int = -1,
        inplace: bool = False,
    ) -> None:
        super().__init__(dim)
        self.alpha, self.limit, self.interleaved = float(alpha), float(limit), bool(interleaved)
        check_options(self.alpha, self.limit)  # ValueError here, not at the first call

    def activation(self, x: Tensor) -> Tensor:
        return F.clamped_swiglu(
            x, alpha=self.alpha, limit=self.limit, interleaved=self.interleaved, dim=self.dim
        )

    def gate(self, b: Tensor) -> Tensor:
        # init's gain takes E[y²] = E[gate(b)²] for unit a; here the linear half is u + 1, so
        # the gate carries √E[(u + 1)²] = √(E[clamp(a, ±L)²] + 1), a ~ N(0, 1)
        limit = self.limit
        clamped = 1.0  # E[clamp(a, ±L)²] = E[a²; |a| ≤ L] + L²·P(|a| > L); 1 for L = inf
        if math.isfinite(limit):
            density = math.exp(-limit * limit / 2.0) / math.sqrt(2.0 * math.pi)
            clamped = math.erf(limit / math.sqrt(2.0)) - 2.0 * limit * density
            clamped += limit * limit * math.erfc(limit / math.sqrt(2.0))
        scale = math.sqrt(clamped + 1.0)
        g = b.clamp(max=limit)
        return scale * g * torch.sigmoid(self.alpha * g)

    def extra_repr(self) -> str:
        return (
            f"alpha={self.alpha}, limit={self.limit}, interleaved={self.interleaved}, "
            f"dim={self.dim}"
        )


# --------------------------------------------------------------- names from other libraries


class Laplace(_Member):
    r"""Laplace(x) = Φ((x − μ)/σ), μ = 0.707107, σ = 0.282095 (MEGA; Hugging Face ``laplace``).

    A normal CDF (not a GELU): bounded in [0, 1], "inspired by squared ReLU". Computed with
    erfc, so the lower tail does not cancel to 0 as HF's ``0.5·(1 + erf(·))`` does.

    Example::

        >>> y = Laplace()(torch.randn(2, 3))
    """

    def __init__(
        self, mu: float = LAPLACE_MU, sigma: float = LAPLACE_SIGMA, inplace: bool = False
    ) -> None:
        super().__init__(inplace)
        if not sigma > 0:
            raise ValueError(f"Laplace needs sigma > 0, got sigma={sigma}")
        self.mu = float(mu)
        self.sigma = float(sigma)

    def activation(self, x: Tensor) -> Tensor:
        return F.laplace(x, self.mu, self.sigma)

    def extra_repr(self) -> str:
        return f"mu={self.mu:g}, sigma={self.sigma:g}{self._inplace_repr()}"


class ReLU2(_Member):
    r"""ReLU2(x) = relu(x)² (So et al. 2021, Primer; Hugging Face ``relu2``).

    Example::

        >>> y = ReLU2()(torch.randn(2, 3))
    """

    def activation(self, x: Tensor) -> Tensor:
        return F.relu2(x)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")


class SqrtSoftplus(_Member):
    r"""SqrtSoftplus(x) = √softplus(x) (Hugging Face ``sqrtsoftplus``, DeepSeek-V4's router).

    Example::

        >>> y = SqrtSoftplus()(torch.randn(2, 3))
    """

    def activation(self, x: Tensor) -> Tensor:
        return F.sqrtsoftplus(x)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")


class XIELU(_Member):
    r"""xIELU (Huang et al. 2024, arXiv:2411.13010; Hugging Face ``xielu``, Apertus).

    x > 0: α_p·x² + β·x; x ≤ 0: (expm1(min(x, ε)) − x)·α_n + β·x, with α_p = softplus(ρ_p) and
    α_n = β + softplus(ρ_n) learnable. Parameters and buffers have Hugging Face's names and
    shapes (``alpha_p``, ``alpha_n`` of shape ``[1]`` holding ρ; buffers ``beta``, ``eps``), so
    an HF state dict loads; they are float32 here (HF defaults to bfloat16).

    Example::

        >>> y = XIELU()(torch.randn(2, 3))
    """

    def __init__(
        self,
        alpha_p_init: float = 0.8,
        alpha_n_init: float = 0.8,
        beta: float = 0.5,
        eps: float = -1e-6,
        inplace: bool = False,
    ) -> None:
        super().__init__(inplace)
        if not alpha_p_init > 0 or not alpha_n_init > beta:
            raise ValueError(
                f"XIELU needs alpha_p_init > 0 and alpha_n_init > beta, got "
                f"{alpha_p_init}, {alpha_n_init}, beta={beta}"
            )
        # log(expm1(v)) in the default dtype, as HF computes it (the same bits for its dtype)
        self.alpha_p = nn.Parameter(_softplus_inverse(torch.tensor(alpha_p_init)).unsqueeze(0))
        self.alpha_n = nn.Parameter(
            _softplus_inverse(torch.tensor(alpha_n_init - beta)).unsqueeze(0)
        )
        self.register_buffer("beta", torch.tensor(float(beta)))
        self.register_buffer("eps", torch.tensor(float(eps)))

    def activation(self, x: Tensor) -> Tensor:
        alpha_p = nn.functional.softplus(self.alpha_p)
        alpha_n = self.beta + nn.functional.softplus(self.alpha_n)
        return F.xielu(x, alpha_p, alpha_n, self.beta, self.eps)

    def extra_repr(self) -> str:
        return f"beta={self.beta.item():g}, eps={self.eps.item():g}{self._inplace_repr()}"


class HardMish(_Member):
    r"""HardMish(x) = ½·x·clamp(x + 2, 0, 2) (timm ``hard_mish``).

    Example::

        >>> y = HardMish()(torch.randn(2, 3))
    """

    def activation(self, x: Tensor) -> Tensor:
        return F.hard_mish(x)

    def extra_repr(self) -> str:
        return self._inplace_repr().removeprefix(", ")
