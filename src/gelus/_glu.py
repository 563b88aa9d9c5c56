"""SwiGLU a·silu(b) and ReGLU a·relu(b), x = [a, b] split in halves on ``dim`` as in GEGLU
(:mod:`gelus._geglu`), saving only x: every route side by side.

Operators ``gelus::swiglu(x, dim)``, ``gelus::reglu(x, dim)`` and their backward
``gelus::swiglu_backward(grad, x, dim)``, ``gelus::reglu_backward(grad, x, dim)`` (the gradient
with respect to x, both halves): d/da a·g(b) = g(b), d/db = a·g'(b). Half types are computed in
float32 and rounded once. The gate keeps its member's edge cases (silu: −inf → 0, slope 1 / 0 at
±inf; relu: slope 1 above 0, 0 at and below it, nan at nan where torch's relu gives 0).
"""

from typing import NamedTuple

import torch
from torch import Tensor

from gelus import _swish
from gelus._common import check_floating, compute_dtype
from gelus._geglu import _batched, _logical_dim
from gelus._operator import NAMESPACE, cast, fast_apply, kernel_for, route, tangent_sum
from gelus._torch_compat import below_autograd

__all__ = ["reglu", "reglu_backward_op", "reglu_op", "swiglu", "swiglu_backward_op", "swiglu_op"]


class Gate(NamedTuple):
    """A gate g as the routes need it, each on a compute-dtype b."""

    value: object  # b -> g(b), the eager kernel
    grad: object  # (grad, b) -> grad·g'(b), the eager kernel
    slope: object  # b -> g'(b), a differentiable composition
    compiled: object  # b -> g(b) for compiled graphs
    onnx: object  # b -> g(b) for the ONNX exporter


def _relu_slope(b: Tensor) -> Tensor:
    # relu'(0) = 0 as torch's relu backward; nan at nan (torch's gives 0), as every member
    return torch.where(b.isnan(), b, (b > 0).to(b.dtype))


SILU = Gate(
    value=lambda b: _swish.forward(b, 1.0),
    grad=lambda grad, b: _swish.backward(grad, b, 1.0),
    slope=lambda b: _swish.slope(b, 1.0),
    compiled=lambda b: _swish.compiled(b, 1.0),
    onnx=lambda b: _swish.onnx(b, 1.0),
)
RELU = Gate(
    value=torch.relu,
    grad=lambda grad, b: grad * _relu_slope(b),
    slope=_relu_slope,
    compiled=torch.relu,
    onnx=torch.relu,
)


def _halves(x: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    dtype = compute_dtype(x.dtype)
    value, gate = x.chunk(2, dim=dim)
    return value.to(dtype), gate.to(dtype)


def _forward(gate: Gate, name: str, x: Tensor, dim: int) -> Tensor:
    check_floating(f"{NAMESPACE}::{name}", x)
    value, b = _halves(x, dim)
    out = torch.empty_like(x.chunk(2, dim=dim)[0])  # the layout the fake kernel promises
    return out.copy_(value * gate.value(b))


def _backward(gate: Gate, grad: Tensor, x: Tensor, dim: int) -> Tensor:
    value, b = _halves(x, dim)
    grad = grad.to(value.dtype)
    grad_x = torch.empty_like(x)  # x's memory format (channels_last stays channels_last)
    grad_value, grad_gate = grad_x.chunk(2, dim=dim)
    grad_value.copy_(grad * gate.value(b))
    grad_gate.copy_(gate.grad(grad * value, b))
    return grad_x


def _composed_backward(gate: Gate, grad: Tensor, x: Tensor, dim: int) -> Tensor:
    """The gradient as a differentiable composition (autograd records the backward). g(b) is the
    compiled route's composition: the eager kernel's edge check reads a value (``.item()``),
    which vmap cannot batch."""
    value, b = _halves(x, dim)
    grad = grad.to(value.dtype)
    terms = [grad * gate.compiled(b), grad * value * gate.slope(b)]
    return cast(torch.cat(terms, dim=dim), x.dtype)


# ------------------------------------------------------------------------------ operators


@torch.library.custom_op(f"{NAMESPACE}::swiglu", mutates_args=())
def swiglu_op(x: Tensor, dim: int = -1) -> Tensor:
    """a·silu(b), the forward operator (x's dtype)."""
    return _forward(SILU, "swiglu", x, dim)


@torch.library.custom_op(f"{NAMESPACE}::swiglu_backward", mutates_args=())
def swiglu_backward_op(grad: Tensor, x: Tensor, dim: int = -1) -> Tensor:
    """The gradient with respect to x = [a, b]: [grad·silu(b), grad·a·silu'(b)]."""
    return _backward(SILU, grad, x, dim)


@torch.library.custom_op(f"{NAMESPACE}::reglu", mutates_args=())
def reglu_op(x: Tensor, dim: int = -1) -> Tensor:
    """a·relu(b), the forward operator (x's dtype)."""
    return _forward(RELU, "reglu", x, dim)


@torch.library.custom_op(f"{NAMESPACE}::reglu_backward", mutates_args=())
def reglu_backward_op(grad: Tensor, x: Tensor, dim: int = -1) -> Tensor:
    """The gradient with respect to x = [a, b]: [grad·relu(b), grad·a·[b > 0]]."""
    return _backward(RELU, grad, x, dim)


class _Member(NamedTuple):
    name: str
    gate: Gate
    forward: object  # the operators
    backward: object


SWIGLU = _Member("swiglu", SILU, swiglu_op, swiglu_backward_op)
REGLU = _Member("reglu", RELU, reglu_op, reglu_backward_op)


def _register(member: _Member) -> None:
    forward_op, backward_op, gate = member.forward, member.backward, member.gate

    def forward_kernel(x, dim=-1):
        return _forward(gate, member.name, x, dim)

    def backward_kernel(grad, x, dim=-1):
        return _backward(gate, grad, x, dim)

    member_kernels[member.name] = (forward_kernel, backward_kernel)

    @forward_op.register_fake
    def _(x, dim=-1):
        check_floating(f"{NAMESPACE}::{member.name}", x)
        value, _ = x.chunk(2, dim=dim)
        return torch.empty_like(value)

    @backward_op.register_fake
    def _(grad, x, dim=-1):
        return torch.empty_like(x)

    @forward_op.register_vmap
    def _(info, in_dims, x, dim=-1):
        return forward_op(x.movedim(in_dims[0], 0), _logical_dim(dim)), 0

    @backward_op.register_vmap
    def _(info, in_dims, grad, x, dim=-1):
        if in_dims[0] is None and in_dims[1] is None:
            return backward_op(grad, x, dim), None
        grad = _batched(grad, in_dims[0], info.batch_size)
        x = _batched(x, in_dims[1], info.batch_size)
        return backward_op(grad, x, _logical_dim(dim)), 0

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.dim = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _grad(member, grad, x, ctx.dim), None

    forward_op.register_autograd(backward, setup_context=setup)


member_kernels: dict[str, tuple] = {}
_register(SWIGLU)
_register(REGLU)


def _grad(member: _Member, grad: Tensor, x: Tensor, dim: int) -> Tensor:
    if torch.is_grad_enabled():  # autograd records the backward: a differentiable composition
        return _composed_backward(member.gate, grad, x, dim)
    kernel = kernel_for(member.backward, member_kernels[member.name][1], x, grad)
    with below_autograd():
        return kernel(grad, x, dim)


class _Function(torch.autograd.Function):
    """The eager route: operators forward and backward, composed tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, dim: int, member: _Member) -> Tensor:
        kernel = kernel_for(member.forward, member_kernels[member.name][0], x)
        with below_autograd():  # this Function is the autograd
            return kernel(x, dim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dim, member = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        ctx.dim, ctx.member = dim, member

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _grad(ctx.member, grad, x, ctx.dim), None, None

    @staticmethod
    def jvp(ctx, x_t, *_):
        (x,) = ctx.saved_tensors
        gate = ctx.member.gate
        value, b = _halves(x, ctx.dim)
        value_t, b_t = _halves(x_t, ctx.dim)
        terms = [value_t * gate.value(b), value * gate.slope(b) * b_t]
        return cast(tangent_sum(terms), x.dtype)


def _apply(member: _Member, x: Tensor, dim: int) -> Tensor:
    way = route(x, member.name)
    if way == "eager":
        return fast_apply(_Function, x, dim, member)
    if way in ("compile", "onnx"):
        value, b = _halves(x, dim)
        act = member.gate.compiled if way == "compile" else member.gate.onnx
        return (value * act(b)).to(x.dtype)
    return member.forward(x, dim)


def swiglu(x: Tensor, dim: int = -1) -> Tensor:
    """a·silu(b) by route (arguments already checked)."""
    return _apply(SWIGLU, x, dim)


def reglu(x: Tensor, dim: int = -1) -> Tensor:
    """a·relu(b) by route (arguments already checked)."""
    return _apply(REGLU, x, dim)
