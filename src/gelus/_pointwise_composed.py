"""The pointwise members as plain differentiable compositions of torch ops, for ``torch.compile``.

Under compile a ``torch.autograd.Function`` is an opaque unit that inductor cannot fuse with its
neighbours, and its recomputing backward runs as separate kernels. A composition of torch ops
instead lets autograd derive the backward and inductor fuse forward and backward into one loop
each, recomputing from the input (saving only ``x``, and the bias or μ, σ).

The edge cases (NUMERICS.md) are written with ``torch.where`` instead of ``clamp``: clamp's
gradient is 0 at nan, where it must stay nan. Beyond a bound past which each form equals its
limit exactly, the inner formula sees 0 (finite, with finite derivatives) and an outer ``where``
returns the limit: x itself above, 0 below; ``where`` routes the gradient (1 or 0) accordingly.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus._pointwise_accurate import gelu_accurate, gelu_accurate_slope

__all__ = ["gelu_accurate_composed", "gelu_composed", "swish_composed"]

_TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
_TANH_B = _TANH_A * 0.044715
# Beyond these the forms equal their limits in every float dtype (see _pointwise_kernels).
_GELU_CLAMP = 40.0
_TANH_CLAMP = 100.0
_SILU_CLAMP = 1e4
_SIGMOID_SCALE = 1.702


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _limited(x: Tensor, z: Tensor, bound: float, inner) -> Tensor:
    """``inner(x)`` where |z| <= bound (and at nan), x above, 0 below; z is x scaled by the form."""
    outside = z.abs() > bound  # False at nan, which flows through inner
    y = inner(torch.where(outside, 0.0, x))
    return torch.where(outside, torch.where(z > 0, x, 0.0), y)


def gelu_composed(x: Tensor, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    """GELU in the given form as a differentiable composition (see the module docstring).

    Exact form: ``accurate=True`` is Φ with the argument split into high and low parts
    (:mod:`gelus._pointwise_accurate`, ≤ 4 ulp); ``False`` is torch's ``F.gelu`` formula.
    """
    if approximate == "sigmoid":
        return swish_composed(x, _SIGMOID_SCALE)
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    if approximate == "tanh":

        def inner(t: Tensor) -> Tensor:
            return t * torch.sigmoid(t * (_TANH_A + _TANH_B * t * t))

        y = _limited(x, x, _TANH_CLAMP, inner)
    elif accurate:
        y = gelu_accurate_composed(x)
    else:
        # torch's formula, which inductor fuses as cheaply as F.gelu (its 1 + erf(x/√2)
        # cancels for x < −3 like the eager kernel: small absolute, large relative error).
        y = _limited(x, x, _GELU_CLAMP, F.gelu)
    return y.to(dtype)


def _limited_slope(x: Tensor, bound: float, inner) -> Tensor:
    """The slope matching :func:`_limited` with z = x: 1 above, 0 below, ``inner`` between."""
    outside = x.abs() > bound
    return torch.where(outside, (x > 0).to(x.dtype), inner(torch.where(outside, 0.0, x)))


class _AccurateGELU(torch.autograd.Function):
    """x·Φ(x) with the accurate slope (autograd through the hi/lo split would lose it).

    Its forward and backward are plain torch ops, so under compile each fuses into one loop.
    """

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _limited(x, x, _GELU_CLAMP, gelu_accurate)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * _limited_slope(x, _GELU_CLAMP, gelu_accurate_slope)


def gelu_accurate_composed(x: Tensor) -> Tensor:
    """x·Φ(x) to ≤ 4 ulp in fp32 (float64: in float64), differentiable; x of compute dtype."""
    return _AccurateGELU.apply(x)


def swish_composed(x: Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """x·σ(β·x) as a differentiable composition; ``beta`` a float or a broadcastable tensor.

    For β > 0 the limits are those of GELU; for β < 0 they are mirrored (+inf → 0,
    −inf → −inf); β = 0 gives x/2.
    """
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    if isinstance(beta, Tensor):
        beta = beta.to(torch.promote_types(beta.dtype, x.dtype))
        y = _limited(x, beta * x, _SILU_CLAMP, lambda t: t * torch.sigmoid(beta * t))
    elif beta == 0.0:
        y = x * 0.5
    else:
        y = _limited(x, beta * x, _SILU_CLAMP, lambda t: t * torch.sigmoid(beta * t))
    return y.to(dtype)
