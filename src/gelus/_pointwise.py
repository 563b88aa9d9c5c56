"""Pointwise members of the family: exact GELU, its tanh and sigmoid forms, SiLU/Swish, bias-GELU, GEGLU.

PLACEHOLDER IMPLEMENTATION (scaffold): plain torch compositions, to be replaced by the accurate,
memory-lean kernels of the numerics work.
"""

import math

import torch
from torch import Tensor

APPROXIMATIONS = ("none", "tanh", "sigmoid")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715  # coefficient of the paper's tanh form
_SIGMOID_SCALE = 1.702  # the paper's sigmoid form x·σ(1.702x)


def _check_approximate(approximate: str) -> None:
    if approximate not in APPROXIMATIONS:
        raise ValueError(
            f"approximate={approximate!r} is not a GELU form; use one of {', '.join(APPROXIMATIONS)}"
        )


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU(x) = x·Φ(x), or its tanh / sigmoid approximation."""
    _check_approximate(approximate)
    if approximate == "none":
        return x * 0.5 * torch.special.erfc(-x / math.sqrt(2.0))
    if approximate == "tanh":
        return 0.5 * x * (1 + torch.tanh(_SQRT_2_OVER_PI * (x + _TANH_CUBIC * x**3)))
    return x * torch.sigmoid(_SIGMOID_SCALE * x)


def silu(x: Tensor) -> Tensor:
    """SiLU(x) = x·σ(x)."""
    return x * torch.sigmoid(x)


def swish(x: Tensor, beta: float = 1.0) -> Tensor:
    """Swish(x) = x·σ(βx)."""
    return x * torch.sigmoid(beta * x)


def bias_gelu(x: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """gelu(x + bias)."""
    return gelu(x + bias, approximate)


def geglu(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    """GEGLU: x = [a, b] split in halves on ``dim``; returns a · gelu(b)."""
    a, b = x.chunk(2, dim=dim)
    return a * gelu(b, approximate)
