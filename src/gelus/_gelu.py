"""GELU in its three forms as one operator, ``gelus::gelu(x, approximate, accurate)``.

The forms' kernels live in :mod:`gelus._gelu_exact` (x·Φ(x)), :mod:`gelus._gelu_tanh` and
:mod:`gelus._swish` (the sigmoid form is x·σ(1.702x)); this module makes them one operator with
its backward ``gelus::gelu_backward``, and routes a call (docs/ARCHITECTURE.md):

    eager     UnaryFunction: the operators, composed slope for jvp / double backward
    compile   _Compiled: clamp, the form's formula, where; saves only x (inductor fuses it);
              under a torch.func transform the formula without the Function. The exact form's
              fp32 and half-type algorithms take x unclamped (they handle ±inf and nan)
    export    the operators (torch.export, torch.jit.trace)
    onnx      the form's formula with the ONNX ``Gelu`` op
"""

import torch
from torch import Tensor

from gelus import _gelu_exact as exact
from gelus import _gelu_tanh as tanh_form
from gelus import _swish as swish_form
from gelus._common import (
    GELU_CLAMP,
    GELU_TAME,
    SIGMOID_SCALE,
    TANH_CLAMP,
    TANH_TAME,
    check_floating,
    compute_dtype,
)
from gelus._operator import (
    NAMESPACE,
    Unary,
    apply_compiled,
    compiled_clamp,
    register_unary_autograd,
    route,
    unary_backward_vmap,
    unary_vmap,
)

__all__ = ["MEMBER", "gelu", "gelu_backward_op", "gelu_op", "kernel_backward", "kernel_forward"]


def kernel_forward(
    x: Tensor,
    approximate: str = "none",
    accurate: bool = False,
    tame: bool | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """The default (any-device) kernel of ``gelus::gelu``, x's dtype (``out=``: into a temporary
    the caller owns)."""
    check_floating(f"{NAMESPACE}::gelu", x)
    if approximate == "tanh":
        return tanh_form.forward(x, tame=tame, out=out)
    if approximate == "sigmoid":
        return swish_form.forward(x, SIGMOID_SCALE, tame=tame, out=out)
    return exact.forward(x, accurate, tame=tame, out=out)


def kernel_backward(
    grad: Tensor,
    x: Tensor,
    approximate: str = "none",
    accurate: bool = False,
    tame: bool | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """The default kernel of ``gelus::gelu_backward``: ``grad`` times the form's derivative."""
    if approximate == "tanh":
        return tanh_form.backward(grad, x, tame=tame, out=out)
    if approximate == "sigmoid":
        return swish_form.backward(grad, x, SIGMOID_SCALE, tame=tame, out=out)
    return exact.backward(grad, x, accurate, tame=tame, out=out)


def slope(x: Tensor, approximate: str = "none", accurate: bool = False) -> Tensor:
    """The form's derivative as a differentiable composition, in x's compute dtype."""
    if approximate == "tanh":
        return tanh_form.slope(x)
    if approximate == "sigmoid":
        return swish_form.slope(x, SIGMOID_SCALE)
    return exact.slope(x, accurate)


def tame_bound(approximate: str = "none", accurate: bool = False) -> float | None:
    """The bound of the default kernels' fast path (None: the accurate path needs no check)."""
    if approximate == "tanh":
        return TANH_TAME
    if approximate == "sigmoid":
        return swish_form.tame_bound(SIGMOID_SCALE)
    return None if accurate else GELU_TAME


@torch.library.custom_op(f"{NAMESPACE}::gelu", mutates_args=())
def gelu_op(x: Tensor, approximate: str = "none", accurate: bool = False) -> Tensor:
    """GELU in the given form, the forward operator (x's dtype); a device kernel registers here."""
    return kernel_forward(x, approximate, accurate)


@torch.library.custom_op(f"{NAMESPACE}::gelu_backward", mutates_args=())
def gelu_backward_op(
    grad: Tensor,
    x: Tensor,
    approximate: str = "none",
    accurate: bool = False,
) -> Tensor:
    """``grad`` times the derivative of the form at ``x``, the backward operator (x's dtype)."""
    return kernel_backward(grad, x, approximate, accurate)


@gelu_op.register_fake
def _(x, approximate="none", accurate=False):
    check_floating(f"{NAMESPACE}::gelu", x)
    return torch.empty_like(x)


@gelu_backward_op.register_fake
def _(grad, x, approximate="none", accurate=False):
    return torch.empty_like(x)


MEMBER = Unary(gelu_op, gelu_backward_op, slope, tame_bound, kernel_forward, kernel_backward)
gelu_op.register_vmap(unary_vmap(gelu_op))
gelu_backward_op.register_vmap(unary_backward_vmap(gelu_backward_op))
register_unary_autograd(gelu_op, MEMBER)


# ------------------------------------------------------------------------------ compiled, ONNX


def _bound(approximate: str) -> float:
    return TANH_CLAMP if approximate == "tanh" else GELU_CLAMP


def _composed(
    x: Tensor, approximate: str, accurate: bool, dtype: torch.dtype | None = None
) -> Tensor:
    """Exact or tanh form of a compute-dtype x in plain torch ops (the compiled route); ``dtype``
    is the type the result is rounded to (the exact form picks its algorithm by it).

    Beyond the bound each form equals its limit and its slope is exactly 1 or 0: the formula sees
    x clamped there (finite, also at ±inf) and a ``where`` returns x itself above it; ``clamp``
    keeps nan.
    """
    if approximate == "none" and exact.half_algorithm(x, dtype):
        return exact.compiled_half_value(x)  # takes ±inf and nan itself
    if approximate == "none" and exact.float32_algorithm_unclamped(x, accurate):
        return exact.gelu_accurate(x)  # so does the float32 algorithm
    bound = _bound(approximate)
    t = compiled_clamp(x, bound)
    y = tanh_form.compiled_value(t) if approximate == "tanh" else exact.compiled_value(t, accurate)
    return torch.where(x > bound, x, y)


def composed_backward(
    grad: Tensor, x: Tensor, approximate: str, accurate: bool, dtype: torch.dtype | None = None
) -> Tensor:
    """``grad`` times the slope at x (both of the compute dtype), the compiled route's backward;
    ``dtype`` as for :func:`_composed`."""
    if approximate == "none" and exact.half_algorithm(x, dtype):
        return exact.compiled_half_slope(grad, x)
    if approximate == "none" and exact.float32_algorithm_unclamped(x, accurate):
        return grad * exact.gelu_accurate_slope(x)
    bound = _bound(approximate)
    t = x.clamp(-bound, bound)
    if approximate == "tanh":
        return tanh_form.compiled_slope(grad, t)
    return exact.compiled_slope(grad, t, accurate)


class _Compiled(torch.autograd.Function):
    """:func:`_composed` for compiled graphs, saving only x; the backward recomputes.

    Returns fresh tensors only: torch 2.11 mis-routes the gradient of a Function whose forward
    returns an alias of an intermediate (pytorch/pytorch#180642).
    """

    @staticmethod
    def forward(ctx, x: Tensor, approximate: str, accurate: bool, dtype: torch.dtype) -> Tensor:
        ctx.save_for_backward(x)
        ctx.options = (approximate, accurate, dtype)
        return _composed(x, approximate, accurate, dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return composed_backward(grad, x, *ctx.options), None, None, None


def compiled(x: Tensor, approximate: str = "none", accurate: bool = False) -> Tensor:
    """GELU in the given form for compiled graphs, x of any dtype."""
    if approximate == "sigmoid":
        return swish_form.compiled(x, SIGMOID_SCALE)
    dtype = x.dtype
    y = apply_compiled(
        _Compiled, _composed, x.to(compute_dtype(dtype)), approximate, accurate, dtype
    )
    return y.to(dtype)


def onnx(x: Tensor, approximate: str = "none", accurate: bool = False) -> Tensor:
    """GELU in ops the dynamo ONNX exporter translates faithfully (ONNX ``Gelu``, edge fix)."""
    if approximate == "sigmoid":
        return swish_form.onnx(x, SIGMOID_SCALE)
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    bound = _bound(approximate)
    t = x.clamp(-bound, bound)
    y = tanh_form.onnx_value(t) if approximate == "tanh" else exact.onnx_value(t, accurate)
    return torch.where(x > bound, x, y).to(dtype)


def gelu(x: Tensor, approximate: str = "none", accurate: bool = False) -> Tensor:
    """GELU by route (arguments already checked)."""
    way = route(x, "gelu")
    if way == "eager":
        return MEMBER(x, approximate, accurate)
    if way == "compile":
        return compiled(x, approximate, accurate)
    if way == "onnx":
        return onnx(x, approximate, accurate)
    return gelu_op(x, approximate, accurate)
