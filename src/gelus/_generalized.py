"""Generalized GELU x·Φ((x − μ)/σ). PLACEHOLDER IMPLEMENTATION (scaffold)."""

import math

import torch
from torch import Tensor


def generalized_gelu(x: Tensor, mu: Tensor | float = 0.0, sigma: Tensor | float = 1.0) -> Tensor:
    """x·Φ((x − μ)/σ)."""
    return x * 0.5 * torch.special.erfc(-(x - mu) / (sigma * math.sqrt(2.0)))
