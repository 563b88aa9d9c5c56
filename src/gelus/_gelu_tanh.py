"""The tanh form of GELU, ½x·(1 + tanh(√(2/π)·(x + 0.044715x³))): every route side by side.

Written as x·σ(z), z = x·(a + b·x²) (1 + tanh(u) = 2σ(2u)), which does not cancel for negative
x. docs/NUMERICS.md, "The tanh form".

    eager          exp2 forward, sigmoid backward (torch's tanh backward is nan for |x| ≳ 1.8e19)
    compiled       the same formula on the input clamped to ±100, fused by inductor
    ONNX           the ONNX ``Gelu`` op with ``approximate="tanh"`` on the clamped input
    slope          σ(z) + x·z'·σ(z)·(1 − σ(z)), z' = a + 3b·x², as a composition
"""

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus._common import TANH_A, TANH_B, TANH_CLAMP, TANH_TAME, compute_dtype, is_tame
from gelus._gelu_exact import _direct, _finish

__all__ = ["backward", "compiled_slope", "compiled_value", "forward", "onnx_value", "slope"]

# The eager backward of a large contiguous input runs in blocks of _BLOCK elements, so that its
# temporaries stay small: a temporary as large as x is a fresh allocation on every call, whose
# first touch (page faults) can cost more than the arithmetic (docs/PERFORMANCE.md).
_BLOCK = 2**18
# 2^u = e^(−z) for u = x·(_A_EXP2 + _B_EXP2·x²)
_A_EXP2 = -TANH_A / math.log(2.0)
_B_EXP2 = -TANH_B / math.log(2.0)


@functools.cache
def _constant(value: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A 0-dim tensor for addcmul's first operand, made once (``new_tensor`` costs ~10 µs a call)."""
    return torch.tensor(value, dtype=dtype, device=device)


def forward(x: Tensor, *, tame: bool | None = None, out: Tensor | None = None) -> Tensor:
    """The tanh form in x's dtype; ``tame``: whether ``is_tame(x, TANH_TAME)`` holds, if known."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    if not (is_tame(x, TANH_TAME) if tame is None else tame):
        x = x.clamp(min=-TANH_CLAMP)  # −inf/(1 + inf) would be nan; below −100 the result is −0
    # x·σ(z) = x / (1 + 2^u), u = −z·log₂e: exp2 is the cheapest exponential torch has on CPU,
    # and the division replaces sigmoid's own (docs/PERFORMANCE.md).
    a = _constant(_A_EXP2, x.dtype, x.device)
    d = torch.addcmul(a, x, x, value=_B_EXP2).mul_(x).exp2_().add_(1.0)
    direct = _direct(out, x.dtype)
    return _finish(torch.div(x, d, out=d if direct is None else direct), dtype, out)


def backward(
    grad: Tensor, x: Tensor, *, tame: bool | None = None, out: Tensor | None = None
) -> Tensor:
    """``grad`` times σ(z) + x·z'·σ(z)·(1 − σ(z)), in x's dtype; finite at every finite x."""
    dtype = x.dtype
    x = x.to(compute_dtype(dtype))
    grad = grad.to(x.dtype)
    if not (is_tame(x, TANH_TAME) if tame is None else tame):
        # Beyond ±100 the slope is exactly 1 or 0; x·z' would overflow fp32 above ~1e12.
        x = x.clamp(-TANH_CLAMP, TANH_CLAMP)
    direct = _direct(out, x.dtype)
    if x.is_contiguous() and grad.is_contiguous() and x.numel() > _BLOCK:
        result = torch.empty_like(x) if direct is None else direct
        scratch = x.new_empty(2, _BLOCK)  # one allocation for every block's two temporaries
        flat_grad, flat_x, flat_result = grad.view(-1), x.view(-1), result.view(-1)
        for start in range(0, x.numel(), _BLOCK):
            block = slice(start, start + _BLOCK)
            n = min(_BLOCK, x.numel() - start)  # the last block may be short
            _slope_times(flat_grad[block], flat_x[block], flat_result[block], scratch[:, :n])
        return _finish(result, dtype, out)
    return _finish(_slope_times(grad, x, direct), dtype, out)


def _slope_times(
    grad: Tensor, x: Tensor, out: Tensor | None, scratch: Tensor | None = None
) -> Tensor:
    """``grad`` times the slope, into ``out`` if given (else into one of its two temporaries,
    z and σ(z), each the size of x: ``scratch[0]`` and ``scratch[1]`` if given). ``out`` may
    be ``grad`` or ``x``: it is written last."""
    z_buffer, s_buffer = (None, None) if scratch is None else scratch
    a = _constant(TANH_A, x.dtype, x.device)
    z = torch.addcmul(a, x, x, value=TANH_B, out=z_buffer).mul_(x)
    s = torch.sigmoid(z, out=s_buffer)
    # x·z' = a·x + 3b·x³ = 3z − 2a·x: one pass from z rather than two from x.
    third = z.add_(x, alpha=-2.0 * TANH_A / 3.0)  # x·z'/3
    torch.ops.aten.sigmoid_backward.grad_input(third, s, grad_input=third)  # ·σ(1 − σ), in place
    slope = s.add_(third, alpha=3.0)
    return slope.mul_(grad) if out is None else torch.mul(slope, grad, out=out)


def _slope_within_bound(t: Tensor) -> Tensor:
    t_squared = t * t
    s = torch.sigmoid(t * (TANH_A + TANH_B * t_squared))
    return s + t * s * (1.0 - s) * (TANH_A + 3.0 * TANH_B * t_squared)


def slope(x: Tensor) -> Tensor:
    """The derivative as a differentiable composition of torch ops, in x's compute dtype."""
    return _slope_within_bound(x.to(compute_dtype(x.dtype)).clamp(-TANH_CLAMP, TANH_CLAMP))


def compiled_value(t: Tensor) -> Tensor:
    """The tanh form of an input already clamped to ±100, in plain torch ops for inductor."""
    return t * torch.sigmoid(t * (TANH_A + TANH_B * t * t))


def compiled_slope(grad: Tensor, t: Tensor) -> Tensor:
    """``grad`` times the slope at an input already clamped to ±100."""
    return grad * _slope_within_bound(t)


def onnx_value(t: Tensor) -> Tensor:
    """The ONNX ``Gelu(approximate="tanh")`` op, of an input already clamped to ±100."""
    return F.gelu(t, approximate="tanh")
