"""GEGLU a·gelu(b), x = [a, b] split in halves on ``dim``, saving only x: every route side by side.

Operators ``gelus::geglu(x, dim, approximate, accurate)`` and
``gelus::geglu_backward(grad, x, dim, approximate, accurate)`` (the gradient with respect to x,
both halves). d/da a·gelu(b) = gelu(b), d/db = a·gelu'(b).
"""

import torch
from torch import Tensor

from gelus import _gelu
from gelus._common import check_floating
from gelus._operator import (
    NAMESPACE,
    call_kernel,
    cast,
    fast_apply,
    kernel_for,
    register_input_only_autograd,
    route,
    tame_hint,
    tangent_sum,
)
from gelus._torch_compat import below_autograd

__all__ = ["check", "geglu", "geglu_backward_op", "geglu_op"]


def check(x: Tensor, dim: int, name: str = "geglu") -> None:
    """ValueError for a scalar, or an odd size along ``dim``; torch's IndexError for a ``dim``
    out of range."""
    if x.dim() == 0:
        raise ValueError(f"{name} needs a tensor with at least one dimension, got a scalar")
    if not -x.dim() <= dim < x.dim():
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-x.dim()}, {x.dim() - 1}], "
            f"but got {dim})"
        )
    size = x.shape[dim]
    if size % 2:
        raise ValueError(
            f"{name} splits dim={dim} into two halves, but its size is odd ({size}); "
            "give the projection an even number of output features"
        )


_HALF = (torch.float16, torch.bfloat16)


def _gate_gelu(gate: Tensor, approximate, accurate, tame) -> Tensor:
    """gelu(gate), kept in fp32 for a half-type gate: the product with a (or the upstream
    gradient) is then rounded once, not after gelu(b) was rounded to the half type too (fp16:
    10 ulp where gelu(b) is subnormal)."""
    if gate.dtype in _HALF:
        gate = gate.float()
    return _gelu.kernel_forward(gate, approximate, accurate, tame=tame)


def kernel_forward(x, dim=-1, approximate="none", accurate=False, tame=None) -> Tensor:
    """The default kernel of ``gelus::geglu``."""
    check_floating(f"{NAMESPACE}::geglu", x)
    value, gate = x.chunk(2, dim=dim)
    return _gate_gelu(gate, approximate, accurate, tame).mul_(value).to(x.dtype)


def kernel_backward(grad, x, dim=-1, approximate="none", accurate=False, tame=None) -> Tensor:
    """The default kernel of ``gelus::geglu_backward``."""
    value, gate = x.chunk(2, dim=dim)
    grad_x = torch.empty_like(x)  # x's memory format (channels_last stays channels_last)
    grad_value, grad_gate = grad_x.chunk(2, dim=dim)
    grad_value.copy_(_gate_gelu(gate, approximate, accurate, tame).mul_(grad))
    product = torch.mul(grad, value)
    grad_gate.copy_(
        _gelu.kernel_backward(product, gate, approximate, accurate, tame=tame, out=product)
    )
    return grad_x


@torch.library.custom_op(f"{NAMESPACE}::geglu", mutates_args=())
def geglu_op(
    x: Tensor,
    dim: int = -1,
    approximate: str = "none",
    accurate: bool = False,
) -> Tensor:
    """a·gelu(b), the forward operator (x's dtype); a device kernel registers here."""
    return kernel_forward(x, dim, approximate, accurate)


@torch.library.custom_op(f"{NAMESPACE}::geglu_backward", mutates_args=())
def geglu_backward_op(
    grad: Tensor,
    x: Tensor,
    dim: int = -1,
    approximate: str = "none",
    accurate: bool = False,
) -> Tensor:
    """The gradient with respect to x = [a, b]: [grad·gelu(b), grad·a·gelu'(b)]."""
    return kernel_backward(grad, x, dim, approximate, accurate)


@geglu_op.register_fake
def _(x, dim=-1, approximate="none", accurate=False):
    check_floating(f"{NAMESPACE}::geglu", x)
    value, _ = x.chunk(2, dim=dim)
    return torch.empty_like(value, memory_format=torch.contiguous_format)


@geglu_backward_op.register_fake
def _(grad, x, dim=-1, approximate="none", accurate=False):
    return torch.empty_like(x)


def _batched(t: Tensor, d: int | None, size: int) -> Tensor:
    return t.unsqueeze(0).expand(size, *t.shape) if d is None else t.movedim(d, 0)


def _logical_dim(dim: int) -> int:
    return dim if dim < 0 else dim + 1  # the batch dim goes first


@geglu_op.register_vmap
def _(info, in_dims, x, dim=-1, approximate="none", accurate=False):
    x = x.movedim(in_dims[0], 0)
    return geglu_op(x, _logical_dim(dim), approximate, accurate), 0


@geglu_backward_op.register_vmap
def _(info, in_dims, grad, x, dim=-1, approximate="none", accurate=False):
    if in_dims[0] is None and in_dims[1] is None:
        return geglu_backward_op(grad, x, dim, approximate, accurate), None
    grad = _batched(grad, in_dims[0], info.batch_size)
    x = _batched(x, in_dims[1], info.batch_size)
    return geglu_backward_op(grad, x, _logical_dim(dim), approximate, accurate), 0


def _grad(grad, x, dim, approximate, accurate, tame=None) -> Tensor:
    if not torch.is_grad_enabled():
        kernel = kernel_for(geglu_backward_op, kernel_backward, x, grad)
        with below_autograd():
            return call_kernel(
                kernel, geglu_backward_op, (grad, x, dim, approximate, accurate), tame
            )
    # autograd records the backward: a differentiable composition
    value, gate = x.chunk(2, dim=dim)
    grad_value = grad * _gelu.gelu(gate, approximate, accurate)
    grad_gate = cast(grad * value * _gelu.slope(gate, approximate, accurate), x.dtype)
    return torch.cat([grad_value, grad_gate], dim=dim)


_setup, _backward = register_input_only_autograd(geglu_op, _grad)  # only x is saved


class _Function(torch.autograd.Function):
    """The eager route: operators forward and backward, composed tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, dim: int, approximate: str, accurate: bool, tame) -> Tensor:
        kernel = kernel_for(geglu_op, kernel_forward, x)
        with below_autograd():  # this Function is the autograd
            return call_kernel(kernel, geglu_op, (x, dim, approximate, accurate), tame)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _setup(ctx, inputs, output)
        ctx.save_for_forward(inputs[0])

    backward = staticmethod(_backward)

    @staticmethod
    def jvp(ctx, x_t, *_):
        (x,) = ctx.saved_tensors
        dim, approximate, accurate = ctx.options[:3]
        value, gate = x.chunk(2, dim=dim)
        value_t, gate_t = x_t.chunk(2, dim=dim)
        terms = [
            value_t * _gelu.gelu(gate, approximate, accurate),
            value * _gelu.slope(gate, approximate, accurate) * gate_t,
        ]
        return cast(tangent_sum(terms), x.dtype)


def geglu(x: Tensor, dim: int = -1, approximate: str = "none", accurate: bool = False) -> Tensor:
    """a·gelu(b) by route (arguments already checked)."""
    way = route(x, "geglu")
    if way == "eager":
        tame = tame_hint(x, _gelu.tame_bound(approximate, accurate))  # x covers the gate
        return fast_apply(_Function, x, dim, approximate, accurate, tame)
    if way in ("compile", "onnx"):
        value, gate = x.chunk(2, dim=dim)
        act = _gelu.compiled if way == "compile" else _gelu.onnx
        return value * act(gate, approximate, accurate)
    return geglu_op(x, dim, approximate, accurate)
