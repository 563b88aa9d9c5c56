"""Stochastic GELU mask. PLACEHOLDER IMPLEMENTATION (scaffold)."""

import torch
from torch import Tensor


def stochastic_gelu(
    x: Tensor, training: bool = True, generator: torch.Generator | None = None
) -> Tensor:
    """Training: x·m with m ~ Bernoulli(Φ(x)); eval: x·Φ(x)."""
    p = torch.special.ndtr(x)
    if not training:
        return x * p
    m = torch.bernoulli(p.detach(), generator=generator)
    return x * m
