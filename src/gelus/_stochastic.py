"""Stochastic GELU (the paper's "SOI map"): x·m, m ~ Bernoulli(Φ(x)) in training, x·Φ(x) in eval.

A composition of torch ops on every route (a random mask has no kernel worth an operator): the
mask is drawn without gradient tracking and the output is ``torch.where(mask, x, 0)``, so
autograd keeps only the boolean mask (1 byte per element) and ∂/∂x = m. In eval it is the exact
GELU operator. Under ``torch.func.vmap`` pass ``randomness="different"`` (or ``"same"``), as for
dropout.

Mask drawing: ``torch.rand(...) < Φ(x)`` rather than ``torch.bernoulli(Φ(x))``: on the project's
CPU (torch 2.13, 1 thread, 2^20 float32) the comparison took 0.26× the time of
``torch.bernoulli``, which has no fast path there (docs/PERFORMANCE.md). P(u < p) = p for u
uniform on [0, 1) up to the generator's resolution (2^-24 in float32).
"""

import torch
from torch import Tensor

from gelus._common import compute_dtype
from gelus._phi import normal_cdf

__all__ = ["stochastic_gelu_mask", "stochastic_gelu_training"]


def stochastic_gelu_mask(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """The boolean mask m ~ Bernoulli(Φ(x)) elementwise, drawn without tracking gradients.

    Φ(x) = ½·erfc(−x/√2) is computed in at least float32. nan inputs get m = True so that
    x·m stays nan (the comparison is written as ``not u >= Φ(x)``, false for nan).
    """
    with torch.no_grad():
        dtype = compute_dtype(x.dtype)
        prob = normal_cdf(x.detach().to(dtype))
        uniform = torch.rand(x.shape, generator=generator, dtype=dtype, device=x.device)
        return uniform.ge(prob).logical_not_()


# A device's training-mode kernel, (x, generator) -> x·m or None for "not this call"; set by
# gelus._cuda.register() (the Triton kernel with an in-kernel Philox mask on CUDA).
device_kernel = None


def stochastic_gelu_training(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """x·m with a fresh mask: ``torch.where(mask, x, 0)`` (+inf → +inf, −inf → 0, nan → nan).

    On CUDA (eager) the mask is drawn in the Triton kernel from a Philox seed and regenerated in
    backward, so only x and the seed are kept (:func:`gelus._cuda.stochastic_gelu`)."""
    if device_kernel is not None and x.device.type != "cpu" and not torch.compiler.is_compiling():
        y = device_kernel(x, generator)
        if y is not None:
            return y
    return torch.where(stochastic_gelu_mask(x, generator), x, 0.0)
