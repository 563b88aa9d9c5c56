"""The pointwise members as autograd Functions of plain torch ops, for ``torch.compile``.

Dynamo traces a ``torch.autograd.Function`` into the graph: its forward and its backward are
fused by inductor with their neighbours, and the backward sees only what the forward saves, the
input ``x`` (and β). Letting autograd derive the backward of the edge-case patches instead makes
the partitioner keep their boolean masks for backward, input-sized tensors that on CPU cost more
to store than the whole activation; here the backward recomputes everything from ``x``.

The edge cases (NUMERICS.md): beyond a bound past which each form equals its limit exactly, the
formula sees the input clamped to the bound (finite, with finite derivatives: the slope there is
exactly 1 or 0) and a ``where`` returns x itself above it. ``clamp`` keeps nan, so nan flows
through the formula, value and gradient.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus._pointwise_accurate import gelu_accurate, gelu_accurate_slope

__all__ = ["gelu_accurate_composed", "gelu_composed", "swish_composed"]

_TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
_TANH_B = _TANH_A * 0.044715
# Beyond these the forms equal their limits, and their slopes are exactly 1 or 0, in every float
# dtype (see _pointwise_kernels).
_GELU_CLAMP = 40.0
_TANH_CLAMP = 100.0
_SILU_CLAMP = 1e4
_SIGMOID_SCALE = 1.702


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _tanh_form(t: Tensor) -> Tensor:
    # x/2·(1 + tanh(u)) = x·σ(2u): no cancellation for negative x
    return t * torch.sigmoid(t * (_TANH_A + _TANH_B * t * t))


def _tanh_form_slope(t: Tensor) -> Tensor:
    t_squared = t * t
    s = torch.sigmoid(t * (_TANH_A + _TANH_B * t_squared))
    return s + t * s * (1.0 - s) * (_TANH_A + 3.0 * _TANH_B * t_squared)


def _gelu_value(t: Tensor, approximate: str, accurate: bool) -> Tensor:
    if approximate == "tanh":
        return _tanh_form(t)
    if accurate:
        return gelu_accurate(t)
    # torch's formula, which inductor fuses as cheaply as F.gelu (its 1 + erf(x/√2) cancels for
    # x < −3 like the eager kernel: small absolute, large relative error).
    return F.gelu(t)


def _gelu_grad(grad: Tensor, t: Tensor, approximate: str, accurate: bool) -> Tensor:
    if approximate == "tanh":
        return grad * _tanh_form_slope(t)
    if accurate:
        return grad * gelu_accurate_slope(t)
    return torch.ops.aten.gelu_backward(grad, t)  # F.gelu's own gradient formula


class _ComposedGELU(torch.autograd.Function):
    """GELU (exact or tanh form) of a compute-dtype x, saving only x for backward."""

    @staticmethod
    def forward(ctx, x: Tensor, approximate: str, accurate: bool) -> Tensor:
        ctx.save_for_backward(x)
        ctx.options = (approximate, accurate)
        bound = _TANH_CLAMP if approximate == "tanh" else _GELU_CLAMP
        y = _gelu_value(x.clamp(-bound, bound), approximate, accurate)
        return torch.where(x > bound, x, y)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        approximate, accurate = ctx.options
        bound = _TANH_CLAMP if approximate == "tanh" else _GELU_CLAMP
        return _gelu_grad(grad, x.clamp(-bound, bound), approximate, accurate), None, None


def gelu_composed(x: Tensor, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    """GELU in the given form for compiled graphs (see the module docstring).

    Exact form: ``accurate=True`` is Φ with the argument split into high and low parts
    (:mod:`gelus._pointwise_accurate`, ≤ 4 ulp); ``False`` is torch's ``F.gelu`` formula.
    """
    if approximate == "sigmoid":
        return swish_composed(x, _SIGMOID_SCALE)
    dtype = x.dtype
    y = _ComposedGELU.apply(x.to(_compute_dtype(dtype)), approximate, accurate)
    return y.to(dtype)


def gelu_accurate_composed(x: Tensor) -> Tensor:
    """x·Φ(x) to ≤ 4 ulp in fp32 (float64: in float64), differentiable; x of compute dtype."""
    return _ComposedGELU.apply(x, "none", True)


class _ComposedSwish(torch.autograd.Function):
    """x·σ(β·x) for a float β ≠ 0, saving only x for backward.

    The formula sees x clamped to ±10⁴/|β|; x itself is returned beyond, on the side where
    σ(β·x) = 1 (above for β > 0, below for β < 0).
    """

    @staticmethod
    def forward(ctx, x: Tensor, beta: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.beta = beta
        bound = _SILU_CLAMP / abs(beta)
        t = x.clamp(-bound, bound)
        y = t * torch.sigmoid(beta * t)
        return torch.where(x > bound if beta > 0 else x < -bound, x, y)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        beta = ctx.beta
        bound = _SILU_CLAMP / abs(beta)
        t = x.clamp(-bound, bound)
        s = torch.sigmoid(beta * t)
        return grad * (s + beta * t * s * (1.0 - s)), None


class _ComposedSwishTensorBeta(torch.autograd.Function):
    """x·σ(β·x) for a tensor β, saving x and β; dL/dβ = Σ grad·x²·σ'(βx) over β's broadcast."""

    @staticmethod
    def forward(ctx, x: Tensor, beta: Tensor) -> Tensor:
        ctx.save_for_backward(x, beta)
        bound = _SILU_CLAMP / beta.abs()  # inf at β = 0
        t = torch.clamp(x, -bound, bound)
        return torch.where(beta * x > _SILU_CLAMP, x, t * torch.sigmoid(beta * t))

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, beta = ctx.saved_tensors
        t = torch.clamp(x, -_SILU_CLAMP / beta.abs(), _SILU_CLAMP / beta.abs())
        z = beta * t
        s = torch.sigmoid(z)
        ds = s * (1.0 - s)  # σ'(βx), exactly 0 at the bound
        grad_x = grad_beta = None
        if ctx.needs_input_grad[0]:
            grad_x = grad * (s + z * ds)
        if ctx.needs_input_grad[1]:
            grad_beta = (grad * t * t * ds).sum_to_size(beta.shape)
        return grad_x, grad_beta


def swish_composed(x: Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """x·σ(β·x) for compiled graphs; ``beta`` a float or a broadcastable tensor.

    For β > 0 the limits are those of GELU; for β < 0 they are mirrored (+inf → 0,
    −inf → −inf); β = 0 gives x/2.
    """
    dtype = x.dtype
    x = x.to(_compute_dtype(dtype))
    if isinstance(beta, Tensor):
        beta = beta.to(torch.promote_types(beta.dtype, x.dtype))
        y = _ComposedSwishTensorBeta.apply(x, beta)
    elif beta == 0.0:
        y = x * 0.5
    else:
        y = _ComposedSwish.apply(x, float(beta))
    return y.to(dtype)
