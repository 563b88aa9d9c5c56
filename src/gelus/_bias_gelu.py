"""Bias-GELU gelu(x + bias), saving only x and the bias: every route side by side.

Operators ``gelus::bias_gelu(x, bias, approximate, accurate)`` and
``gelus::bias_gelu_backward(grad, x, bias, approximate, accurate)``; the backward operator
returns the gradient with respect to h = x + bias (the broadcast shape), which the caller sums
down to x's and the bias's shapes. The default kernels recompute h into a temporary and run the
form's kernel over it in place. ``gelus::bias_gelu_grads(grad, x, bias, approximate, accurate)``
returns (dx, dbias) already summed, for a device kernel that reduces the bias gradient itself
(CUDA: one pass); its default kernel is the composition.
"""

import torch
from torch import Tensor

from gelus import _gelu
from gelus._common import check_floating, compute_dtype
from gelus._operator import (
    NAMESPACE,
    broadcast_fake,
    broadcast_vmap,
    cast,
    device_kernel,
    fast_apply,
    kernel_for,
    route,
    tangent_sum,
)
from gelus._torch_compat import below_autograd

__all__ = ["bias_gelu", "bias_gelu_backward_op", "bias_gelu_grads_op", "bias_gelu_op"]


def _sum(x: Tensor, bias: Tensor) -> tuple[Tensor, torch.dtype]:
    """(h = x + bias in the compute dtype, the result dtype): half types add in fp32, as the CUDA
    kernels do, so that h is not rounded to 8 or 11 bits before the GELU sees it."""
    dtype = torch.result_type(x, bias)  # x + bias's dtype: a 0-dim bias does not promote x
    compute = compute_dtype(dtype)
    return x.to(compute) + bias.to(compute), dtype


def kernel_forward(x: Tensor, bias: Tensor, approximate="none", accurate=False) -> Tensor:
    """The default kernel of ``gelus::bias_gelu``."""
    check_floating(f"{NAMESPACE}::bias_gelu", x, bias)
    h, dtype = _sum(x, bias)  # a temporary the kernel overwrites; recomputed in backward
    return _gelu.kernel_forward(h, approximate, accurate, out=h).to(dtype)


def kernel_backward(grad, x, bias, approximate="none", accurate=False) -> Tensor:
    """The default kernel of ``gelus::bias_gelu_backward``."""
    h, dtype = _sum(x, bias)
    return _gelu.kernel_backward(grad.to(h.dtype), h, approximate, accurate, out=h).to(dtype)


@torch.library.custom_op(f"{NAMESPACE}::bias_gelu", mutates_args=())
def bias_gelu_op(
    x: Tensor, bias: Tensor, approximate: str = "none", accurate: bool = False
) -> Tensor:
    """gelu(x + bias), the forward operator (promoted dtype); a device kernel registers here."""
    return kernel_forward(x, bias, approximate, accurate)


@torch.library.custom_op(f"{NAMESPACE}::bias_gelu_backward", mutates_args=())
def bias_gelu_backward_op(
    grad: Tensor, x: Tensor, bias: Tensor, approximate: str = "none", accurate: bool = False
) -> Tensor:
    """``grad`` times gelu'(x + bias): the gradient with respect to h = x + bias."""
    return kernel_backward(grad, x, bias, approximate, accurate)


@bias_gelu_op.register_fake
def _(x, bias, approximate="none", accurate=False):
    check_floating(f"{NAMESPACE}::bias_gelu", x, bias)
    return broadcast_fake(x, bias)


@bias_gelu_backward_op.register_fake
def _(grad, x, bias, approximate="none", accurate=False):
    return broadcast_fake(x, bias)


bias_gelu_op.register_vmap(broadcast_vmap(bias_gelu_op, 2))
bias_gelu_backward_op.register_vmap(broadcast_vmap(bias_gelu_backward_op, 3))


def _grad_h(grad: Tensor, x: Tensor, bias: Tensor, approximate: str, accurate: bool) -> Tensor:
    if torch.is_grad_enabled():  # autograd records the backward: a differentiable composition
        h, dtype = _sum(x, bias)
        return cast(grad * _gelu.slope(h, approximate, accurate), dtype)
    kernel = kernel_for(bias_gelu_backward_op, kernel_backward, x, grad, bias, direct=True)
    with below_autograd():
        return kernel(grad, x, bias, approximate, accurate)


def composed_grads(grad, x, bias, approximate="none", accurate=False, needs=(True, True)):
    """(dx, dbias): the gradient with respect to h = x + bias summed over the dimensions x and
    the bias were broadcast along, in their dtypes (the default kernel of
    ``gelus::bias_gelu_grads``; differentiable when autograd records it)."""
    grad_h = _grad_h(grad, x, bias, approximate, accurate)
    grad_x = cast(grad_h.sum_to_size(x.shape), x.dtype) if needs[0] else None
    grad_bias = cast(grad_h.sum_to_size(bias.shape), bias.dtype) if needs[1] else None
    if grad_bias is not None and grad_bias is grad_x:
        # x and the bias of the broadcast shape and dtype: both are grad_h itself. An operator's
        # outputs must not alias each other (torch.library), so the bias gets a copy.
        grad_bias = grad_bias.clone()
    return grad_x, grad_bias


@torch.library.custom_op(f"{NAMESPACE}::bias_gelu_grads", mutates_args=())
def bias_gelu_grads_op(
    grad: Tensor, x: Tensor, bias: Tensor, approximate: str = "none", accurate: bool = False
) -> tuple[Tensor, Tensor]:
    """(dx, dbias) of gelu(x + bias), each summed to its tensor's shape, in its dtype: for a
    device kernel that reduces the bias gradient in the pass that computes dx."""
    return composed_grads(grad, x, bias, approximate, accurate)


@bias_gelu_grads_op.register_fake
def _(grad, x, bias, approximate="none", accurate=False):
    # dx keeps x's layout where x has the broadcast shape (x + bias follows x's strides)
    shape = torch.broadcast_shapes(x.shape, bias.shape)
    grad_x = torch.empty_like(x) if shape == x.shape else x.new_empty(x.shape)
    return grad_x, bias.new_empty(bias.shape)


def _grads(ctx, grad: Tensor, x: Tensor, bias: Tensor, approximate: str, accurate: bool):
    needs = tuple(ctx.needs_input_grad[:2])
    # A backward autograd does not record, with the bias's gradient wanted, takes
    # gelus::bias_gelu_grads where a device registers a kernel for it (on CUDA the Triton kernel:
    # dbias summed in the pass that computes dx, no second pass over the gradient).
    fused = None
    if needs[1] and not torch.is_grad_enabled():
        fused = device_kernel(bias_gelu_grads_op, x, grad, bias)
    if fused is not None:
        grad_x, grad_bias = fused(grad, x, bias, approximate, accurate)
        return grad_x if needs[0] else None, grad_bias
    return composed_grads(grad, x, bias, approximate, accurate, needs)


def _setup(ctx, inputs, output):
    x, bias, approximate, accurate = inputs
    ctx.save_for_backward(x, bias)
    ctx.options = (approximate, accurate)


def _backward(ctx, grad):
    x, bias = ctx.saved_tensors
    return (*_grads(ctx, grad, x, bias, *ctx.options), None, None)


bias_gelu_op.register_autograd(_backward, setup_context=_setup)


class _Function(torch.autograd.Function):
    """The eager route: operators forward and backward, composed tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, bias: Tensor, approximate: str, accurate: bool) -> Tensor:
        kernel = kernel_for(bias_gelu_op, kernel_forward, x, bias, direct=True)
        with below_autograd():  # this Function is the autograd
            return kernel(x, bias, approximate, accurate)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, bias, approximate, accurate = inputs
        ctx.save_for_backward(x, bias)
        ctx.save_for_forward(x, bias)
        ctx.options = (approximate, accurate)

    backward = staticmethod(_backward)

    @staticmethod
    def jvp(ctx, x_t, bias_t, *_):
        x, bias = ctx.saved_tensors
        h, dtype = _sum(x, bias)
        return cast(tangent_sum([x_t, bias_t]) * _gelu.slope(h, *ctx.options), dtype)


def bias_gelu(x: Tensor, bias: Tensor, approximate: str = "none", accurate: bool = False):
    """gelu(x + bias) by route (arguments already checked)."""
    way = route(x, "bias_gelu")
    if way == "eager":
        return fast_apply(_Function, x, bias, approximate, accurate)
    if way == "compile":
        # inductor fuses the add into the activation and recomputes it in backward
        return _gelu.compiled(x + bias, approximate, accurate)
    if way == "onnx":
        return _gelu.onnx(x + bias, approximate, accurate)
    return bias_gelu_op(x, bias, approximate, accurate)
