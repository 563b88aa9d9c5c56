"""The GPT-OSS gate (clamped SwiGLU), saving only x: every route side by side.

From the two halves of x on ``dim`` (``interleaved``: gate = x[..., 0::2], up = x[..., 1::2], as
GPT-OSS checkpoints store them; else [gate, up] = x.chunk(2), the gate first):

    g = min(gate, L),  u = clamp(up, −L, L)
    y = (u + 1) · g · σ(α·g)                        α = 1.702, L = 7 in GPT-OSS

    dy/dgate = (u + 1) · (σ(z) + z·σ(z)(1 − σ(z))),  z = α·g,   0 where gate > L
    dy/dup   = g · σ(α·g),                                       0 where |up| > L

The clamps' derivatives are those of torch's ``clamp`` (transformers' ``GptOssExperts`` code):
1 at the bounds themselves, 0 beyond them. Deliberate differences from that code: gate = −inf
gives ±0 (its g·σ(α·g) is −inf·0 = nan), and a nan input has a nan gradient (torch's clamp
gives 0 there), as every member's nan does. Half types are computed in float32 and rounded once.

Operators ``gelus::clamped_swiglu(x, alpha, limit, interleaved, dim)`` and
``gelus::clamped_swiglu_backward(grad, x, alpha, limit, interleaved, dim)`` (the gradient with
respect to x, both halves, from one call).
"""

import importlib
import math

import torch
from torch import Tensor

from gelus import _geglu, _swish, _triton
from gelus._common import check_floating, compute_dtype
from gelus._geglu import _batched, _logical_dim
from gelus._operator import (
    NAMESPACE,
    apply_compiled,
    call_kernel,
    cast,
    fast_apply,
    kernel_for,
    register_input_only_autograd,
    route,
    tangent_sum,
)
from gelus._torch_compat import below_autograd, functorch_active

__all__ = [
    "ALPHA",
    "LIMIT",
    "check",
    "check_options",
    "clamped_swiglu",
    "clamped_swiglu_backward_op",
    "clamped_swiglu_op",
    "cuda_backward",
    "cuda_forward",
    "halves",
]

ALPHA = 1.702  # GPT-OSS's swiglu_alpha
LIMIT = 7.0  # GPT-OSS's swiglu_limit
_NAME = "clamped_swiglu"


def check(x: Tensor, alpha: float, limit: float, dim: int) -> None:
    """:func:`check_options`; ValueError for a scalar x or an odd size on ``dim``; IndexError
    for ``dim`` out of range."""
    check_options(alpha, limit)
    _geglu.check(x, dim, _NAME)


def check_options(alpha: float, limit: float) -> None:
    """ValueError for an α that is not finite and positive, a limit that is not positive (inf:
    no clamp)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise ValueError(f"{_NAME}: alpha must be a float, got {type(alpha).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, (int, float)):
        raise ValueError(f"{_NAME}: limit must be a float, got {type(limit).__name__}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"{_NAME}: alpha must be finite and positive, got {alpha}")
    if not limit > 0:  # nan fails too
        raise ValueError(f"{_NAME}: limit must be positive (inf: no clamp), got {limit}")


def halves(x: Tensor, interleaved: bool, dim: int) -> tuple[Tensor, Tensor]:
    """(gate, up): views of x's two halves on ``dim``."""
    d = dim % x.dim()
    if interleaved:
        # element 2i + k of dim -> (i, k): a view for any strides (vmap has no unflatten rule)
        pairs = x.view(*x.shape[:d], x.shape[d] // 2, 2, *x.shape[d + 1 :])
        return pairs.select(d + 1, 0), pairs.select(d + 1, 1)
    gate, up = x.chunk(2, dim=d)
    return gate, up


def _joined(gate: Tensor, up: Tensor, interleaved: bool, dim: int) -> Tensor:
    """The inverse of :func:`halves`: one tensor of the halves' gradients."""
    d = dim % gate.dim()
    if interleaved:
        return torch.stack([gate, up], dim=d + 1).flatten(d, d + 1)
    return torch.cat([gate, up], dim=d)


# ------------------------------------------------------------------------------ eager kernels


def kernel_forward(x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1, tame=None) -> Tensor:
    """The default kernel of ``gelus::clamped_swiglu``: (u + 1)·g·σ(α·g) in x's dtype."""
    check_floating(f"{NAMESPACE}::{_NAME}", x)
    gate, up = halves(x, interleaved, dim)
    dtype = compute_dtype(x.dtype)
    g = gate.to(dtype).clamp(max=limit)
    u = up.to(dtype).clamp(-limit, limit).add_(1.0)
    y = _swish.forward(g, alpha).mul_(u)  # σ without overflow, −inf -> ±0 (_swish)
    return torch.empty(gate.shape, dtype=x.dtype, device=x.device).copy_(y)


def kernel_backward(
    grad, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1, tame=None
) -> Tensor:
    """The default kernel of ``gelus::clamped_swiglu_backward``: both halves' gradients."""
    gate, up = halves(x, interleaved, dim)
    dtype = compute_dtype(x.dtype)
    grad = grad.to(dtype)
    raw_gate, raw_up = gate.to(dtype), up.to(dtype)
    g = raw_gate.clamp(max=limit)
    grad_x = torch.empty_like(x)  # x's memory format, as the fake kernel promises
    grad_gate, grad_up = halves(grad_x, interleaved, dim)
    # dy/dup = g·σ(αg), 0 beyond ±L (torch's clamp: the bounds pass), nan at nan
    glu = _swish.forward(g, alpha)
    outside = raw_up.abs() > limit
    grad_up.copy_(torch.where(outside, 0.0, torch.where(raw_up.isnan(), raw_up, glu.mul_(grad))))
    # dy/dgate = (u + 1)·swish'(g), 0 above L (nan > L is False: nan stays nan)
    factor = raw_up.clamp(-limit, limit).add_(1.0).mul_(grad)  # raw_up may be x itself
    slope = _swish.backward(factor, g, alpha)
    grad_gate.copy_(torch.where(raw_gate > limit, 0.0, slope))
    return grad_x


# ------------------------------------------------------------------------------ CUDA kernels
# The operators' "cuda" implementation (gelus._members names them; gelus._cuda registers them):
# the Triton kernel of gelus._triton._clamped_swiglu, imported with Triton on first use.


def _device_kernel(x: Tensor, alpha: float, limit: float):
    """The Triton kernel's module when it takes this call (fp16, bf16, fp32), else None."""
    if _triton.host_functions(x) is None:
        return None
    kernel = importlib.import_module("gelus._triton._clamped_swiglu")
    return kernel if kernel.supports(x, alpha, limit) else None


def cuda_forward(x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1) -> Tensor:
    """``gelus::clamped_swiglu`` on CUDA: the Triton kernel, or the default kernel where it does
    not take the call."""
    kernel = _device_kernel(x, alpha, limit)
    if kernel is None:
        return kernel_forward(x, alpha, limit, interleaved, dim)
    return kernel.forward(x, alpha, limit, interleaved, dim)


def cuda_backward(grad, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1) -> Tensor:
    """``gelus::clamped_swiglu_backward`` on CUDA, in x's memory format (as the default and
    fake kernels give it)."""
    kernel = _device_kernel(x, alpha, limit)
    if kernel is None or grad.dtype != x.dtype:
        return kernel_backward(grad, x, alpha, limit, interleaved, dim)
    grad_x = kernel.backward(grad, x, alpha, limit, interleaved, dim)  # contiguous
    return grad_x if x.is_contiguous() else torch.empty_like(x).copy_(grad_x)


# ------------------------------------------------------------------------------ compositions


def composed(x: Tensor, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1) -> Tensor:
    """(u + 1)·g·σ(α·g) in plain torch ops (compiled and ONNX routes; inductor fuses it)."""
    gate, up = halves(x, interleaved, dim)
    dtype = compute_dtype(x.dtype)
    gate = gate.to(dtype)
    g = gate.clamp(max=limit)
    if functorch_active():  # a transform differentiates this: nan's slope stays nan (clamp: 0)
        g = torch.where(gate.isnan(), gate, g)
    u = up.to(dtype).clamp(-limit, limit)
    return ((u + 1.0) * _swish.composed(g, alpha)).to(x.dtype)


def composed_backward(grad, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1) -> Tensor:
    """Both halves' gradients as a differentiable composition of torch ops (the compiled route's
    backward, and the backward that autograd records)."""
    gate, up = halves(x, interleaved, dim)
    dtype = compute_dtype(x.dtype)
    grad, gate, up = grad.to(dtype), gate.to(dtype), up.to(dtype)
    g = gate.clamp(max=limit)
    u = up.clamp(-limit, limit)
    grad_gate = torch.where(gate > limit, 0.0, grad * (u + 1.0) * _swish.slope(g, alpha))
    glu = grad * _swish.composed(g, alpha)
    grad_up = torch.where(up.abs() > limit, 0.0, torch.where(up.isnan(), up, glu))
    return cast(_joined(grad_gate, grad_up, interleaved, dim), x.dtype)


def _tangent(x, x_t, alpha, limit, interleaved, dim) -> Tensor:
    """Forward-mode AD: the backward's two factors applied to x's tangent."""
    gate, up = halves(x, interleaved, dim)
    gate_t, up_t = halves(x_t, interleaved, dim)
    dtype = compute_dtype(x.dtype)
    gate, up = gate.to(dtype), up.to(dtype)
    g = gate.clamp(max=limit)
    u = up.clamp(-limit, limit)
    terms = [
        torch.where(up.abs() > limit, 0.0, up_t) * _swish.composed(g, alpha),
        (u + 1.0) * _swish.slope(g, alpha) * torch.where(gate > limit, 0.0, gate_t),
    ]
    return cast(tangent_sum(terms), x.dtype)


# ------------------------------------------------------------------------------ operators


@torch.library.custom_op(f"{NAMESPACE}::{_NAME}", mutates_args=())
def clamped_swiglu_op(
    x: Tensor,
    alpha: float = ALPHA,
    limit: float = LIMIT,
    interleaved: bool = True,
    dim: int = -1,
) -> Tensor:
    """(u + 1)·g·σ(α·g), the forward operator (x's dtype); a device kernel registers here."""
    return kernel_forward(x, alpha, limit, interleaved, dim)


@torch.library.custom_op(f"{NAMESPACE}::{_NAME}_backward", mutates_args=())
def clamped_swiglu_backward_op(
    grad: Tensor,
    x: Tensor,
    alpha: float = ALPHA,
    limit: float = LIMIT,
    interleaved: bool = True,
    dim: int = -1,
) -> Tensor:
    """The gradient with respect to x, both halves in one tensor of x's shape."""
    return kernel_backward(grad, x, alpha, limit, interleaved, dim)


@clamped_swiglu_op.register_fake
def _(x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1):
    check_floating(f"{NAMESPACE}::{_NAME}", x)
    gate, _ = halves(x, interleaved, dim)
    return x.new_empty(gate.shape)


@clamped_swiglu_backward_op.register_fake
def _(grad, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1):
    return torch.empty_like(x)


@clamped_swiglu_op.register_vmap
def _(info, in_dims, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1):
    x = x.movedim(in_dims[0], 0)
    return clamped_swiglu_op(x, alpha, limit, interleaved, _logical_dim(dim)), 0


@clamped_swiglu_backward_op.register_vmap
def _(info, in_dims, grad, x, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1):
    if in_dims[0] is None and in_dims[1] is None:
        return clamped_swiglu_backward_op(grad, x, alpha, limit, interleaved, dim), None
    grad = _batched(grad, in_dims[0], info.batch_size)
    x = _batched(x, in_dims[1], info.batch_size)
    return clamped_swiglu_backward_op(grad, x, alpha, limit, interleaved, _logical_dim(dim)), 0


def _grad(grad, x, alpha, limit, interleaved, dim) -> Tensor:
    if torch.is_grad_enabled():  # autograd records the backward: a differentiable composition
        return composed_backward(grad, x, alpha, limit, interleaved, dim)
    op = clamped_swiglu_backward_op
    kernel = kernel_for(op, kernel_backward, x, grad)
    with below_autograd():
        return call_kernel(kernel, op, (grad, x, alpha, limit, interleaved, dim), None)


_setup, _backward = register_input_only_autograd(clamped_swiglu_op, _grad)  # only x is saved


class _Function(torch.autograd.Function):
    """The eager route: operators forward and backward, composed tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, alpha: float, limit: float, interleaved: bool, dim: int) -> Tensor:
        kernel = kernel_for(clamped_swiglu_op, kernel_forward, x)
        with below_autograd():  # this Function is the autograd
            args = (x, alpha, limit, interleaved, dim)
            return call_kernel(kernel, clamped_swiglu_op, args, None)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _setup(ctx, inputs, output)
        ctx.save_for_forward(inputs[0])

    backward = staticmethod(_backward)

    @staticmethod
    def jvp(ctx, x_t, *_):
        (x,) = ctx.saved_tensors
        return _tangent(x, x_t, *ctx.options)


class _Compiled(torch.autograd.Function):
    """The compiled route: a composition inductor fuses, saving only x; the backward recomputes
    both halves' gradients in one fused composition."""

    @staticmethod
    def forward(ctx, x, alpha, limit, interleaved, dim):
        ctx.save_for_backward(x)
        ctx.options = (alpha, limit, interleaved, dim)
        return composed(x, alpha, limit, interleaved, dim)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (composed_backward(grad, x, *ctx.options),) + (None,) * 4


def clamped_swiglu(x: Tensor, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1) -> Tensor:
    """(u + 1)·g·σ(α·g) by route (arguments already checked)."""
    way = route(x, _NAME)
    if way == "eager":
        return fast_apply(_Function, x, alpha, limit, interleaved, dim)
    if way == "compile":
        return apply_compiled(_Compiled, composed, x, alpha, limit, interleaved, dim)
    if way == "onnx":
        return composed(x, alpha, limit, interleaved, dim)
    return clamped_swiglu_op(x, alpha, limit, interleaved, dim)
