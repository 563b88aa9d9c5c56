"""Swish x·σ(β·x): SiLU (β = 1), the sigmoid form of GELU (β = 1.702), any float β, a tensor β.

Every route side by side (docs/NUMERICS.md, "SiLU and Swish"):

    eager          torch's ``F.silu`` / ``aten.silu_backward`` on β·x, edges patched
    compiled       x·σ(β·x) on the input clamped to ±10⁴/|β|, fused by inductor
    ONNX           the compiled formula (Sigmoid, Mul, Clip, Where)
    slope          SiLU'(βx) = σ(z)·(1 + z·(1 − σ(z))), z = βx, as a composition

Operators: ``gelus::swish(x, beta)`` / ``gelus::swish_backward(grad, x, beta)`` for a float β,
``gelus::swish_tensor(x, beta)`` for a tensor β (whose backward, which also gives
dL/dβ = Σ grad·x²·σ'(βx), is a composition of torch ops).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus._common import (
    GELU_TAME,
    SILU_CLAMP,
    check_floating,
    compute_dtype,
    is_tame,
    result_dtype,
)
from gelus._gelu_exact import _direct, _finish
from gelus._operator import (
    NAMESPACE,
    Unary,
    apply_compiled,
    broadcast_fake,
    broadcast_vmap,
    cast,
    compiled_clamp,
    device_kernel,
    fast_apply,
    kernel_for,
    register_unary_autograd,
    route,
    tangent_sum,
    unary_backward_vmap,
    unary_vmap,
)
from gelus._torch_compat import below_autograd, silu_into

__all__ = ["backward", "forward", "slope", "swish", "tame_bound"]


def tame_bound(beta: float) -> float:
    """The bound for :func:`gelus._common.is_tame` under which β·x stays finite."""
    return GELU_TAME / max(1.0, abs(beta))


# ------------------------------------------------------------------------------ eager kernels


def forward(
    x: Tensor, beta: float = 1.0, *, tame: bool | None = None, out: Tensor | None = None
) -> Tensor:
    """x·σ(β·x) in x's dtype, edge cases patched; ``tame``: whether ``is_tame(x, tame_bound(β))``."""
    check_floating(f"{NAMESPACE}::swish", x)
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    direct = _direct(out, x.dtype)
    if beta == 0.0:
        y = torch.mul(x, 0.5, out=direct) if direct is not None else x * 0.5
    elif beta == 1.0:
        y = F.silu(x) if direct is None else silu_into(x, direct)
    else:
        y = torch.mul(x, beta).sigmoid_()
        y = y.mul_(x) if direct is None else torch.mul(y, x, out=direct)
    if beta != 0.0 and not (is_tame(x, tame_bound(beta)) if tame is None else tame):
        # x·σ(βx) is nan only where βx = −inf with x infinite; the limit there is ±0 (x's sign,
        # as the compiled and ONNX formulas give).
        y = torch.where(x * beta == -math.inf, torch.where(x < 0, -0.0, 0.0), y)
    return _finish(y, dtype, out)


def backward(
    grad: Tensor,
    x: Tensor,
    beta: float = 1.0,
    *,
    tame: bool | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """``grad`` times d/dx x·σ(βx) = σ(z) + z·σ(z)·(1 − σ(z)) with z = βx, i.e. SiLU'(βx)."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    grad = grad.to(x.dtype)
    direct = _direct(out, x.dtype)
    if beta == 0.0:
        g = torch.mul(grad, 0.5, out=direct) if direct is not None else grad * 0.5
        return _finish(g, dtype, out)
    z = x if beta == 1.0 else x * beta
    if not (is_tame(x, tame_bound(beta)) if tame is None else tame):
        # SiLU' is exactly 1 above 1e4 and 0 below −1e4 in every float dtype; nan at ±inf.
        z = z.clamp(-SILU_CLAMP, SILU_CLAMP)
    if direct is None and z is not x:
        direct = z  # z is our temporary: write the result over it
    if direct is None:
        g = torch.ops.aten.silu_backward(grad, z)
    else:
        g = torch.ops.aten.silu_backward.grad_input(grad, z, grad_input=direct)
    return _finish(g, dtype, out)


def slope(x: Tensor, beta: float = 1.0) -> Tensor:
    """d/dx x·σ(βx) as a differentiable composition of torch ops, in x's compute dtype."""
    x = x.to(compute_dtype(x.dtype))
    z = (beta * x).clamp(-SILU_CLAMP, SILU_CLAMP)
    s = torch.sigmoid(z)
    return s * (1.0 + z * (1.0 - s))


# ------------------------------------------------------------------------------ compiled, ONNX


def composed(x: Tensor, beta: float) -> Tensor:
    """x·σ(β·x) in plain torch ops, for a float β ≠ 0 (compiled and ONNX routes).

    The formula sees x clamped to ±10⁴/|β| (σ is exactly 0 or 1 beyond); x itself is returned
    beyond the bound on the side where σ(β·x) = 1 (above for β > 0, below for β < 0).
    """
    bound = SILU_CLAMP / abs(beta)
    t = compiled_clamp(x, bound)
    y = t * torch.sigmoid(beta * t)
    return torch.where(x > bound if beta > 0 else x < -bound, x, y)


class _Compiled(torch.autograd.Function):
    """The compiled route for a float β ≠ 0: saves only x; the backward recomputes."""

    @staticmethod
    def forward(ctx, x: Tensor, beta: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.beta = beta
        return composed(x, beta)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        beta = ctx.beta
        bound = SILU_CLAMP / abs(beta)
        t = x.clamp(-bound, bound)  # |β·t| ≤ 1e4: no second clamp (as in slope) needed
        s = torch.sigmoid(beta * t)
        return grad * (s + beta * t * s * (1.0 - s)), None


def compiled(x: Tensor, beta: float) -> Tensor:
    """x·σ(β·x) for compiled graphs (x of any dtype; computed in its compute dtype)."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    y = x * 0.5 if beta == 0.0 else apply_compiled(_Compiled, composed, x, float(beta))
    return y.to(dtype)


def onnx(x: Tensor, beta: float) -> Tensor:
    """x·σ(β·x) for the ONNX exporter (no gradient needed)."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    y = x * 0.5 if beta == 0.0 else composed(x, beta)
    return y.to(dtype)


# ------------------------------------------------------------------------------ operators


def kernel_forward(x: Tensor, beta: float = 1.0, tame: bool | None = None) -> Tensor:
    """The default kernel of ``gelus::swish``."""
    return forward(x, beta, tame=tame)


def kernel_backward(grad: Tensor, x: Tensor, beta: float = 1.0, tame: bool | None = None):
    """The default kernel of ``gelus::swish_backward``."""
    return backward(grad, x, beta, tame=tame)


@torch.library.custom_op(f"{NAMESPACE}::swish", mutates_args=())
def swish_op(x: Tensor, beta: float = 1.0) -> Tensor:
    """x·σ(β·x), the forward operator (x's dtype); a device kernel registers here."""
    return kernel_forward(x, beta)


@torch.library.custom_op(f"{NAMESPACE}::swish_backward", mutates_args=())
def swish_backward_op(grad: Tensor, x: Tensor, beta: float = 1.0) -> Tensor:
    """``grad`` times d/dx x·σ(β·x), the backward operator (x's dtype)."""
    return kernel_backward(grad, x, beta)


@swish_op.register_fake
def _(x, beta=1.0):
    check_floating(f"{NAMESPACE}::swish", x)
    return torch.empty_like(x)


@swish_backward_op.register_fake
def _(grad, x, beta=1.0):
    return torch.empty_like(x)


def _bound(beta: float) -> float | None:
    return None if beta == 0.0 else tame_bound(beta)


MEMBER = Unary(swish_op, swish_backward_op, slope, _bound, kernel_forward, kernel_backward)
swish_op.register_vmap(unary_vmap(swish_op))
swish_backward_op.register_vmap(unary_backward_vmap(swish_backward_op))
register_unary_autograd(swish_op, MEMBER)


def swish(x: Tensor, beta: float) -> Tensor:
    """x·σ(β·x) for a float β, by route (docs/ARCHITECTURE.md)."""
    way = route(x, "swish")
    if way == "eager":
        return MEMBER(x, float(beta))
    if way == "compile":
        return compiled(x, float(beta))
    if way == "onnx":
        return onnx(x, float(beta))
    return swish_op(x, float(beta))


# ------------------------------------------------------------------------------ tensor β


def tensor_composed(x: Tensor, beta: Tensor) -> Tensor:
    """x·σ(β·x) for a tensor β, x and β of the compute dtype, in plain torch ops (every route).

    β = 0 gives x/2 (and nan at ±inf, where β·x is nan); for β < 0 the limits are mirrored.
    """
    bound = SILU_CLAMP / beta.abs()  # inf at β = 0
    t = compiled_clamp(x, bound)
    return torch.where(beta * x > SILU_CLAMP, x, t * torch.sigmoid(beta * t))


def _tensor_partials(x: Tensor, beta: Tensor) -> tuple[Tensor, Tensor]:
    """∂/∂x and ∂/∂β of x·σ(βx) (compute dtype, broadcast shape), finite at ±inf."""
    z = beta * x
    # Beyond |βx| = 1e4 the slope is exactly 1 or 0 and x²·σ'(βx) is 0 (not inf·0).
    outside = z.abs() > SILU_CLAMP
    inside = torch.where(outside, 0.0, x)
    z_in = beta * inside
    s = torch.sigmoid(z_in)
    # σ'(βx) = σ(z)·σ(−z): s·(1 − s) would cancel where s rounds to 1 (βx ≳ 17 in fp32: dβ
    # lost entirely), each factor here is correctly computed
    ds = s * torch.sigmoid(-z_in)
    partial_x = torch.where(outside, (z > 0).to(x.dtype), s + beta * inside * ds)
    return partial_x, inside * inside * ds


def _tensor_grads(grad: Tensor, x: Tensor, beta: Tensor, needs: tuple[bool, bool]):
    # A backward autograd does not record takes gelus::swish_tensor_backward where a device
    # registers a kernel for it (on CUDA the Triton kernel: one pass, per-channel dβ).
    fused = (
        None if torch.is_grad_enabled() else device_kernel(swish_tensor_backward_op, x, grad, beta)
    )
    if fused is not None:
        grads = fused(grad, x, beta)
        return tuple(g if needed else None for g, needed in zip(grads, needs, strict=False))
    return tensor_composed_backward(grad, x, beta, needs)


def tensor_composed_backward(grad, x, beta, needs=(True, True)):
    """(dx, dβ) of tensor-β Swish, a composition of torch ops: the default kernel of
    ``gelus::swish_tensor_backward``; each summed to its tensor's shape, in its dtype."""
    dtype = compute_dtype(x.dtype, beta.dtype)
    xc, betac = x.to(dtype), beta.to(dtype)
    partial_x, partial_beta = _tensor_partials(xc, betac)
    grad = grad.to(dtype)
    grad_x = cast((grad * partial_x).sum_to_size(x.shape), x.dtype) if needs[0] else None
    grad_beta = (
        cast((grad * partial_beta).sum_to_size(beta.shape), beta.dtype) if needs[1] else None
    )
    return grad_x, grad_beta


def tensor_kernel(x: Tensor, beta: Tensor) -> Tensor:
    """The default kernel of ``gelus::swish_tensor``."""
    check_floating(f"{NAMESPACE}::swish_tensor", x, beta)
    dtype = compute_dtype(x.dtype, beta.dtype)
    return tensor_composed(x.to(dtype), beta.to(dtype)).to(result_dtype(x, beta))


@torch.library.custom_op(f"{NAMESPACE}::swish_tensor", mutates_args=())
def swish_tensor_op(x: Tensor, beta: Tensor) -> Tensor:
    """x·σ(β·x) for a tensor β broadcastable against x; promoted dtype (a device kernel here)."""
    return tensor_kernel(x, beta)


@swish_tensor_op.register_fake
def _(x, beta):
    check_floating(f"{NAMESPACE}::swish_tensor", x, beta)
    return broadcast_fake(x, beta)


@torch.library.custom_op(f"{NAMESPACE}::swish_tensor_backward", mutates_args=())
def swish_tensor_backward_op(grad: Tensor, x: Tensor, beta: Tensor) -> tuple[Tensor, Tensor]:
    """(dx, dβ) of tensor-β Swish in one operator, for a device kernel to register."""
    return tensor_composed_backward(grad, x, beta)


@swish_tensor_backward_op.register_fake
def _(grad, x, beta):
    return x.new_empty(x.shape), beta.new_empty(beta.shape)


swish_tensor_op.register_vmap(broadcast_vmap(swish_tensor_op, 2))


def _tensor_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _tensor_backward(ctx, grad):
    x, beta = ctx.saved_tensors
    return _tensor_grads(grad, x, beta, ctx.needs_input_grad[:2])


swish_tensor_op.register_autograd(_tensor_backward, setup_context=_tensor_setup)


class _TensorFunction(torch.autograd.Function):
    """The eager route for a tensor β: the operator forward, composed gradients and tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, beta: Tensor) -> Tensor:
        kernel = kernel_for(swish_tensor_op, tensor_kernel, x, beta, direct=True)
        with below_autograd():  # this Function is the autograd
            return kernel(x, beta)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        return _tensor_grads(grad, x, beta, ctx.needs_input_grad)

    @staticmethod
    def jvp(ctx, x_t, beta_t):
        x, beta = ctx.saved_tensors
        dtype = compute_dtype(x.dtype, beta.dtype)
        partial_x, partial_beta = _tensor_partials(x.to(dtype), beta.to(dtype))
        terms = [
            None if x_t is None else partial_x * x_t,
            None if beta_t is None else partial_beta * beta_t,
        ]
        return cast(tangent_sum(terms), result_dtype(x, beta))


class _TensorCompiled(torch.autograd.Function):
    """The compiled route for a tensor β: saves x and β only."""

    @staticmethod
    def forward(ctx, x: Tensor, beta: Tensor) -> Tensor:
        ctx.save_for_backward(x, beta)
        return tensor_composed(x, beta)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        partial_x, partial_beta = _tensor_partials(x, beta)
        grad_beta = (grad * partial_beta).sum_to_size(beta.shape)
        return (grad * partial_x).sum_to_size(x.shape), grad_beta


def swish_tensor(x: Tensor, beta: Tensor) -> Tensor:
    """x·σ(β·x) for a tensor β, by route."""
    way = route(x, "swish_tensor")
    if way == "eager":
        return fast_apply(_TensorFunction, x, beta)
    if way in ("compile", "onnx"):
        dtype = compute_dtype(x.dtype, beta.dtype)
        xc, betac = x.to(dtype), beta.to(dtype)
        if way == "compile":
            y = apply_compiled(_TensorCompiled, tensor_composed, xc, betac)
        else:
            y = tensor_composed(xc, betac)
        return y.to(result_dtype(x, beta))
    return swish_tensor_op(x, beta)
