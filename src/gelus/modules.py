"""One ``nn.Module`` per member of the GELU family.

Each module stores its hyperparameters (or parameters) and calls the matching function of
:mod:`gelus.functional` in ``forward``. Shapes: input ``(*)``, output ``(*)`` of the same shape,
except :class:`GEGLU` which halves ``dim``.
"""

import math

import torch
from torch import Tensor, nn

from gelus import functional as F

__all__ = [
    "GEGLU",
    "GELU",
    "BiasGELU",
    "ClippedGELU",
    "GeneralizedGELU",
    "QuickGELU",
    "SiLU",
    "StochasticGELU",
    "Swish",
]


def _checked_approximate(approximate: str) -> str:
    if approximate not in F.APPROXIMATIONS:
        raise ValueError(
            f"approximate={approximate!r} is not a GELU form; use one of {', '.join(F.APPROXIMATIONS)}"
        )
    return approximate


class GELU(nn.Module):
    r"""GELU(x) = x·Φ(x) = x·½·(1 + erf(x/√2)), or one of its classic approximations.

    ``approximate="tanh"``: ½x·(1 + tanh(√(2/π)·(x + 0.044715x³)));
    ``approximate="sigmoid"``: x·σ(1.702x).
    ``accurate=True`` (exact form only) takes the path that is within 1 ulp in float32 over the
    whole range, negative tail included, at a higher cost (see :func:`gelus.functional.gelu`).

    Example::

        >>> act = GELU(approximate="tanh")
        >>> y = act(torch.randn(2, 3))
    """

    def __init__(self, approximate: str = "none", *, accurate: bool = False) -> None:
        super().__init__()
        self.approximate = _checked_approximate(approximate)
        if accurate and self.approximate != "none":
            raise ValueError(
                f"accurate=True applies to the exact form only, not approximate={approximate!r}"
            )
        self.accurate = accurate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate, accurate=self.accurate)

    def extra_repr(self) -> str:
        accurate = ", accurate=True" if self.accurate else ""
        return f"approximate={self.approximate!r}{accurate}"


class QuickGELU(GELU):
    r"""QuickGELU(x) = x·σ(1.702x), the sigmoid form of GELU (OpenAI CLIP, HF and timm ``quick_gelu``).

    Same as ``GELU(approximate="sigmoid")``.

    Example::

        >>> y = QuickGELU()(torch.randn(2, 3))
    """

    def __init__(self) -> None:
        super().__init__(approximate="sigmoid")

    def extra_repr(self) -> str:
        return ""


class ClippedGELU(nn.Module):
    r"""ClippedGELU(x) = clamp(GELU(x), min, max).

    The default range [−10, 10] with the exact form is Hugging Face's ``gelu_10``
    (``ClippedGELUActivation``), used to bound activations for quantization.

    Example::

        >>> y = ClippedGELU(min=-10.0, max=10.0)(torch.randn(2, 3) * 20)
    """

    def __init__(self, min: float = -10.0, max: float = 10.0, approximate: str = "none") -> None:
        super().__init__()
        if not min < max:
            raise ValueError(f"ClippedGELU needs min < max, got min={min}, max={max}")
        self.min = float(min)
        self.max = float(max)
        self.approximate = _checked_approximate(approximate)

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate).clamp(self.min, self.max)

    def extra_repr(self) -> str:
        return f"min={self.min}, max={self.max}, approximate={self.approximate!r}"


class SiLU(nn.Module):
    r"""SiLU(x) = x·σ(x), the sigmoid-weighted linear unit introduced in the GELU paper.

    Example::

        >>> y = SiLU()(torch.randn(2, 3))
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Swish(nn.Module):
    r"""Swish(x) = x·σ(βx); β = 1 is SiLU, β → ∞ is ReLU, β = 1.702 is QuickGELU.

    Args:
        beta: initial β.
        learnable: make β an ``nn.Parameter`` (a scalar) trained with the network.

    Example::

        >>> act = Swish(beta=1.0, learnable=True)
        >>> y = act(torch.randn(2, 3))
    """

    def __init__(self, beta: float = 1.0, learnable: bool = False) -> None:
        super().__init__()
        self.learnable = learnable
        if learnable:
            self.beta = nn.Parameter(torch.tensor(float(beta)))
        else:
            self.beta = float(beta)

    def forward(self, x: Tensor) -> Tensor:
        return F.swish(x, self.beta)

    def extra_repr(self) -> str:
        beta = self.beta.item() if self.learnable else self.beta
        return f"beta={beta:g}, learnable={self.learnable}"


class GeneralizedGELU(nn.Module):
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
    ) -> None:
        super().__init__()
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
        dim = self.channel_dim % x.ndim
        if x.shape[dim] != self.num_channels:
            raise ValueError(
                f"GeneralizedGELU has {self.num_channels} channels but the input has "
                f"{x.shape[dim]} along channel_dim={self.channel_dim} (shape {tuple(x.shape)})"
            )
        return value.reshape((self.num_channels,) + (1,) * (x.ndim - dim - 1))

    def forward(self, x: Tensor) -> Tensor:
        return F.generalized_gelu(
            x, self._per_channel(self.mu, x), self._per_channel(self.sigma, x)
        )

    def extra_repr(self) -> str:
        if self.num_channels is None:
            values = f"mu={self.mu.item():g}, sigma={self.sigma.item():g}"
        else:
            values = f"num_channels={self.num_channels}, channel_dim={self.channel_dim}"
        return f"{values}, learnable={self.learnable}"


class StochasticGELU(nn.Module):
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

    def __init__(self, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.generator = generator

    def forward(self, x: Tensor) -> Tensor:
        return F.stochastic_gelu(x, self.training, self.generator)


class BiasGELU(nn.Module):
    r"""BiasGELU(x) = GELU(x + b) with a learnable bias b of shape ``[num_features]`` (last dim).

    The fused bias-add + GELU of Megatron-style MLPs: use it after a ``Linear(bias=False)``.
    The bias starts at zero.

    Example::

        >>> act = BiasGELU(num_features=16, approximate="tanh")
        >>> y = act(torch.randn(4, 16))
    """

    def __init__(self, num_features: int, approximate: str = "none") -> None:
        super().__init__()
        self.num_features = num_features
        self.approximate = _checked_approximate(approximate)
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x: Tensor) -> Tensor:
        return F.bias_gelu(x, self.bias, self.approximate)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}, approximate={self.approximate!r}"


class GEGLU(nn.Module):
    r"""GEGLU(x) = a·GELU(b) where x = [a, b] is split in two halves along ``dim`` (Shazeer 2020).

    The output has half the size of the input along ``dim``. Note: NVIDIA Transformer Engine's
    ``geglu`` gates the other half (GELU on the first half) and uses the tanh form.

    Example::

        >>> act = GEGLU(dim=-1)
        >>> act(torch.randn(4, 32)).shape
        torch.Size([4, 16])
    """

    def __init__(self, dim: int = -1, approximate: str = "none") -> None:
        super().__init__()
        self.dim = dim
        self.approximate = _checked_approximate(approximate)

    def forward(self, x: Tensor) -> Tensor:
        return F.geglu(x, self.dim, self.approximate)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, approximate={self.approximate!r}"
