"""Stochastic GELU (the paper's "SOI map"): x·m, m ~ Bernoulli(Φ(x)) in training, x·Φ(x) in eval.

A composition of torch ops on every route: the mask is drawn without gradient tracking and the
output is ``torch.where(mask, x, 0)``, so autograd keeps only the boolean mask (1 byte per
element) and ∂/∂x = m. A device with a kernel for ``gelus::stochastic_gelu`` (CUDA) takes that
operator in eager training instead, and in compiled training where
:data:`gelus._operator.OPERATORS_UNDER_COMPILE` keeps it (CUDA): the mask is a function of
(x, seed), regenerated in backward. In eval it is the exact GELU. Under ``torch.func.vmap`` pass
``randomness="different"`` (or ``"same"``), as for dropout.

Mask drawing: ``torch.rand(...) < Φ(x)`` rather than ``torch.bernoulli(Φ(x))``: on the project's
CPU (torch 2.13, 1 thread, 2^20 float32) the comparison took 0.26× the time of
``torch.bernoulli``, which has no fast path there (docs/PERFORMANCE.md). P(u < p) = p for u
uniform on [0, 1) up to the generator's resolution (2^-24 in float32).
"""

import torch
from torch import Tensor

from gelus._common import check_floating, compute_dtype
from gelus._operator import NAMESPACE, device_kernel, route
from gelus._phi import normal_cdf
from gelus._torch_compat import functorch_active

__all__ = [
    "seed_value",
    "seeded_backward",
    "seeded_forward",
    "stochastic_gelu_backward_op",
    "stochastic_gelu_mask",
    "stochastic_gelu_op",
    "stochastic_gelu_training",
]


def stochastic_gelu_mask(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """The boolean mask m ~ Bernoulli(Φ(x)) elementwise, drawn without tracking gradients.

    Φ(x) = ½·erfc(−x/√2) is computed in at least float32. nan inputs get m = True so that
    x·m stays nan (the comparison is written as ``not u >= Φ(x)``, false for nan).
    """
    with torch.no_grad():
        dtype = compute_dtype(x.dtype)
        prob = normal_cdf(x.detach().to(dtype))
        # drawn in x's memory order and format (a channels_last x gives a channels_last mask)
        uniform = torch.empty_like(x, dtype=dtype).uniform_(generator=generator)
        return uniform.ge(prob).logical_not_()


def _seeded_route(x: Tensor, generator: torch.Generator | None) -> bool:
    """Whether this call takes ``gelus::stochastic_gelu(x, seed)``: in eager, where a device
    registers a kernel for it; compiled, where OPERATORS_UNDER_COMPILE keeps it on x's device
    (not under a torch.func transform, whose ``randomness`` the composition follows)."""
    if generator is not None and generator.device.type != "cpu":
        return False  # the seed is drawn on the host
    way = route(x, "stochastic_gelu")  # export and ONNX: the composition, no fixed seed
    if way == "operator":
        return not functorch_active()
    return way == "eager" and device_kernel(stochastic_gelu_op, x) is not None


def stochastic_gelu_training(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """x·m with a fresh mask: ``torch.where(mask, x, 0)`` (+inf → +inf, −inf → 0, nan → nan).

    Where a device registers a kernel for ``gelus::stochastic_gelu`` (CUDA: the Triton kernel
    draws the mask from a Philox seed and regenerates it in backward), eager calls take that
    operator, keeping only x and the seed, and so do compiled graphs that keep it. The seed, a
    one-element int64 CPU tensor below 2^31, comes from ``generator`` (torch's default CPU
    generator when None: reproducible under ``torch.manual_seed``, no device sync), also in a
    compiled graph, which draws it at run time (torch 2.13's inductor runs ``aten.randint`` on
    torch's generator): the same seed, and mask, as eager."""
    if _seeded_route(x, generator):
        seed = torch.randint(2**31, (1,), generator=generator, device="cpu")
        return stochastic_gelu_op(x, seed)
    return torch.where(stochastic_gelu_mask(x, generator), x, 0.0)


# ---------------------------------------------------------------- the seeded operators
# x·m and grad·m with m a function of (x, seed), so that backward regenerates the mask and keeps
# no mask tensor. The seed is a tensor (one int64 element, on the CPU: read without a device
# sync), so that a compiled graph draws it at run time; an int would be a constant of the graph.
# The default kernels draw the mask with a torch generator seeded on x's device.


def seed_value(seed: Tensor) -> int:
    """The seed tensor's value, an int below 2^31 (the kernels' contract; the member draws it so)."""
    return int(seed.reshape(()))


def _seeded_mask(x: Tensor, seed: Tensor) -> Tensor:
    return stochastic_gelu_mask(x, torch.Generator(device=x.device).manual_seed(seed_value(seed)))


def seeded_forward(x: Tensor, seed: Tensor) -> Tensor:
    """The default kernel of ``gelus::stochastic_gelu``."""
    check_floating(f"{NAMESPACE}::stochastic_gelu", x)
    return torch.where(_seeded_mask(x, seed), x, 0.0)


def seeded_backward(grad: Tensor, x: Tensor, seed: Tensor) -> Tensor:
    """The default kernel of ``gelus::stochastic_gelu_backward``."""
    return torch.where(_seeded_mask(x, seed), grad.to(x.dtype), 0.0)


@torch.library.custom_op(f"{NAMESPACE}::stochastic_gelu", mutates_args=())
def stochastic_gelu_op(x: Tensor, seed: Tensor) -> Tensor:
    """x·m, m ~ Bernoulli(Φ(x)) drawn from ``seed`` (one int64 element; a device kernel
    registers here)."""
    return seeded_forward(x, seed)


@torch.library.custom_op(f"{NAMESPACE}::stochastic_gelu_backward", mutates_args=())
def stochastic_gelu_backward_op(grad: Tensor, x: Tensor, seed: Tensor) -> Tensor:
    """grad·m with the mask of ``stochastic_gelu(x, seed)`` regenerated (x's dtype)."""
    return seeded_backward(grad, x, seed)


@stochastic_gelu_op.register_fake
def _(x, seed):
    check_floating(f"{NAMESPACE}::stochastic_gelu", x)
    return torch.empty_like(x)


@stochastic_gelu_backward_op.register_fake
def _(grad, x, seed):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    x, seed = inputs[-2], inputs[-1]
    ctx.save_for_backward(x, seed)


def _backward(ctx, grad):
    x, seed = ctx.saved_tensors
    return stochastic_gelu_backward_op(grad.to(x.dtype), x, seed), None


def _backward_backward(ctx, grad):  # linear in grad: its own derivative is the same mask
    x, seed = ctx.saved_tensors
    return stochastic_gelu_backward_op(grad, x, seed), None, None


stochastic_gelu_op.register_autograd(_backward, setup_context=_setup)
stochastic_gelu_backward_op.register_autograd(_backward_backward, setup_context=_setup)
