"""Pointwise members of the family: exact GELU, its tanh and sigmoid forms, SiLU/Swish, bias-GELU, GEGLU.

Each member is a ``torch.autograd.Function`` that saves only its input (and the bias) and
recomputes in backward; the forward and backward kernels are the named functions of
:mod:`gelus._pointwise_kernels`.
"""

import torch
from torch import Tensor

from gelus._pointwise_composed import gelu_composed, swish_composed
from gelus._pointwise_kernels import (
    _SILU_CLAMP,
    SIGMOID_SCALE,
    TANH_CUBIC,
    gelu_backward,
    gelu_forward,
    gelu_tame_bound,
    is_tame,
    swish_backward,
    swish_forward,
)

__all__ = [
    "APPROXIMATIONS",
    "SIGMOID_SCALE",
    "TANH_CUBIC",
    "bias_gelu",
    "geglu",
    "gelu",
    "silu",
    "swish",
]

APPROXIMATIONS = ("none", "tanh", "sigmoid")


def _check_approximate(approximate: str) -> None:
    if approximate not in APPROXIMATIONS:
        raise ValueError(
            f"approximate={approximate!r} is not a GELU form; use one of "
            + ", ".join(repr(name) for name in APPROXIMATIONS)
        )


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _tame(x: Tensor, approximate: str = "none", beta: float = 1.0) -> bool | None:
    """Check once in forward whether torch's fused kernels may run, and reuse it in backward.

    None (the kernels decide) under compile, and for half types, which the kernels check after
    upcasting (a sum of squares in fp16 overflows at 65504).
    """
    if torch.compiler.is_compiling() or x.dtype not in (torch.float32, torch.float64):
        return None
    return is_tame(x, gelu_tame_bound(approximate, beta))


class _GELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, approximate: str, accurate: bool) -> Tensor:
        tame = None if accurate else _tame(x, approximate)
        ctx.save_for_backward(x)
        ctx.options = {"approximate": approximate, "accurate": accurate, "tame": tame}
        return gelu_forward(x, approximate, accurate=accurate, tame=tame)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return gelu_backward(grad, x, **ctx.options), None, None


class _Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, beta: float) -> Tensor:
        tame = _tame(x, beta=beta)
        ctx.save_for_backward(x)
        ctx.options = {"beta": beta, "tame": tame}
        return swish_forward(x, beta, tame=tame)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return swish_backward(grad, x, **ctx.options), None


class _SwishTensorBeta(torch.autograd.Function):
    """x·σ(β·x) with a tensor β: saves x and β; dL/dβ = Σ grad·x²·σ'(βx) over β's broadcast."""

    @staticmethod
    def forward(ctx, x: Tensor, beta: Tensor) -> Tensor:
        ctx.save_for_backward(x, beta)
        return swish_composed(x, beta)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, beta = ctx.saved_tensors
        dtype = torch.promote_types(_compute_dtype(x.dtype), beta.dtype)
        xc, betac, grad = x.to(dtype), beta.to(dtype), grad.to(dtype)
        z = betac * xc
        # Beyond |βx| = 1e4 the slope is exactly 1 or 0 and x²·σ'(βx) is 0 (not inf·0).
        outside = z.abs() > _SILU_CLAMP
        inside = torch.where(outside, 0.0, xc)
        s = torch.sigmoid(betac * inside)
        ds = s * (1.0 - s)  # σ'(βx)
        grad_x = grad_beta = None
        if ctx.needs_input_grad[0]:
            slope = torch.where(outside, (z > 0).to(dtype), s + betac * inside * ds)
            grad_x = (grad * slope).sum_to_size(x.shape).to(x.dtype)
        if ctx.needs_input_grad[1]:
            grad_beta = (grad * inside * inside * ds).sum_to_size(beta.shape).to(beta.dtype)
        return grad_x, grad_beta


class _BiasGELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor, approximate: str, accurate: bool) -> Tensor:
        h = x + bias  # a temporary the kernel overwrites; recomputed in backward, not saved
        tame = None if accurate else _tame(h, approximate)
        ctx.save_for_backward(x, bias)
        ctx.options = {"approximate": approximate, "accurate": accurate, "tame": tame}
        return gelu_forward(h, approximate, accurate=accurate, tame=tame, out=h)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, bias = ctx.saved_tensors
        h = x + bias
        # Overwrite the temporary h, unless autograd records this backward (double backward).
        grad_h = gelu_backward(grad, h, **ctx.options, out=None if torch.is_grad_enabled() else h)
        # x and the bias receive the sum over the dimensions they were broadcast along.
        grad_x = grad_h.sum_to_size(x.shape).to(x.dtype) if ctx.needs_input_grad[0] else None
        grad_bias = (
            grad_h.sum_to_size(bias.shape).to(bias.dtype) if ctx.needs_input_grad[1] else None
        )
        return grad_x, grad_bias, None, None


class _GEGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, dim: int, approximate: str, accurate: bool) -> Tensor:
        tame = None if accurate else _tame(x, approximate)  # x covers the gate half
        ctx.save_for_backward(x)
        ctx.dim = dim
        ctx.options = {"approximate": approximate, "accurate": accurate, "tame": tame}
        value, gate = x.chunk(2, dim=dim)
        return gelu_forward(gate, approximate, accurate=accurate, tame=tame).mul_(value)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        value, gate = x.chunk(2, dim=ctx.dim)
        # d/da a·gelu(b) = gelu(b); d/db = a·gelu'(b).
        options = ctx.options
        if torch.is_grad_enabled():  # double backward: differentiable, out of place
            gelu_gate = _GELU.apply(gate, options["approximate"], options["accurate"])
            grad_value = gelu_gate * grad
            grad_gate = gelu_backward(grad * value, gate, **options)
            return torch.cat([grad_value, grad_gate], dim=ctx.dim), None, None, None
        if torch.compiler.is_compiling():
            grad_value = gelu_forward(gate, **options) * grad
            grad_gate = gelu_backward(grad * value, gate, **options)
            return torch.cat([grad_value, grad_gate], dim=ctx.dim), None, None, None
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)
        grad_value, grad_gate = grad_x.chunk(2, dim=ctx.dim)
        torch.mul(gelu_forward(gate, **options), grad, out=grad_value)
        product = torch.mul(grad, value)
        grad_gate.copy_(gelu_backward(product, gate, **options, out=product))
        return grad_x, None, None, None


def gelu(x: Tensor, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    r"""Gaussian Error Linear Unit, GELU(x) = x·Φ(x), or one of its two classic approximations.

    .. math::
        \text{none:}\quad & x\,\Phi(x) = \tfrac{x}{2}\,\operatorname{erfc}(-x/\sqrt2) \\
        \text{tanh:}\quad & \tfrac{x}{2}\bigl(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715\,x^3))\bigr)
            = x\,\sigma\bigl(2\sqrt{2/\pi}\,(x + 0.044715\,x^3)\bigr) \\
        \text{sigmoid:}\quad & x\,\sigma(1.702\,x)

    Args:
        x: any shape, any float dtype. fp16/bf16 are computed in fp32 and rounded once.
        approximate: ``"none"`` (exact), ``"tanh"`` or ``"sigmoid"``.
        accurate: exact form only. ``True``: Φ without cancellation or argument rounding, down
            to underflow. Eager: Φ in float64 (0.5 ulp, value and gradient), ~15-30x the cost
            of ``F.gelu``. Under ``torch.compile``: an fp32 evaluation with the arguments of
            erfc and exp split into high and low parts (:mod:`gelus._pointwise_accurate`;
            ≤ 2.4 ulp value / 3.4 ulp gradient measured), fused by inductor into one loop
            forward and one backward, at ~2.6x (2^24 elements) to ~4.4x (2^20) the cost of
            compiled ``F.gelu`` (its erfc and the extra exp dominate). In eager that fp32 path
            runs as ~30 separate passes and is slower than float64, hence the two routes.
            ``False`` (default): torch's kernel (eager) or formula (compiled), patched at the
            edges: as fast as ``F.gelu`` but, like it, without relative accuracy below −3
            (absolute error ≤ 1.2e-6 there). The accurate path is not the compiled default
            because it costs more than the ~1.3x of compiled ``F.gelu`` we allow for a default.

    Accuracy in fp32, max error vs a float64 oracle (scipy), measured on every ~1e5th fp32 in
    [−20, 20] plus 2^20 random points; value in ulp of the fp32 result / gradient as abs error:

    =========================  ==================  ==================  ==================
    path                       x < −3              [−3, 3)             [3, 20]
    =========================  ==================  ==================  ==================
    exact, ``accurate=True``   0.5 ulp / 0.5 ulp   0.5 ulp / 0.5 ulp   0.5 ulp / 0.5 ulp
    same, compiled             2.4 ulp / 3.0 ulp   2.1 ulp / 3.4 ulp   1.0 ulp / 0.8 ulp
    exact (default)            1.7e7 ulp, 1.2e-6   1960 ulp / 3.1e-7   4.8 ulp / 1.8e-7
    tanh form                  200 ulp / 7.7e-9    11 ulp / 8.4e-7     1.7 ulp / 2.0e-6
    sigmoid form               40 ulp / 8.5e-9     5.7 ulp / 4.3e-7    1.9 ulp / 9.8e-7
    =========================  ==================  ==================  ==================

    (tanh form: ulp for x ≥ −10; below, fp32 σ(z) underflows and the result is −0 where the
    truth is above −3e-38. The exact default path's 1.7e7 ulp is the cancellation in
    1 + erf(x/√2) inside torch's kernel, whose result is −0 below −5.49.) The tanh and sigmoid
    forms are within 4.73e-4 and 2.03e-2 (absolute) of the exact GELU.

    Edge cases (every form, every dtype, any layout): +inf → +inf, −inf → 0, nan → nan,
    −0 → −0, finite → finite (FLT_MAX → FLT_MAX); the gradient is finite at every finite x
    (also for the tanh form at |x| > 1.8e19, where torch's is nan) and 1 / 0 at +inf / −inf.

    Only ``x`` is saved for backward; the backward recomputes. Under ``torch.compile`` every
    member is an autograd Function whose forward and backward are plain torch ops (edges handled
    by a clamp whose slope is exactly 0 or 1), which inductor fuses with its neighbours; the
    backward recomputes from the saved input, so no mask or intermediate is kept.

    Example::

        >>> import torch
        >>> from gelus.functional import gelu
        >>> gelu(torch.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.1587,  0.0000,  0.8413])
        >>> gelu(torch.tensor([-10.0]), accurate=True)  # F.gelu (and accurate=False) say -0.
        tensor([-7.6199e-23])
    """
    _check_approximate(approximate)
    if torch.compiler.is_compiling():
        return gelu_composed(x, approximate, accurate=accurate)
    return _GELU.apply(x, approximate, accurate)


def silu(x: Tensor) -> Tensor:
    """SiLU(x) = x·σ(x), with the edge cases of :func:`gelu` (torch's ``F.silu(-inf)`` is nan)."""
    return swish(x, 1.0)


def swish(x: Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """Swish(x) = x·σ(β·x); β = 1 is SiLU, β = 1.702 the sigmoid form of GELU.

    ``beta`` is a float, or a tensor broadcastable against ``x`` (e.g. a learnable scalar or
    per-channel ``[C]`` parameter) that receives the gradient
    dL/dβ = Σ grad·x²·σ'(βx), summed over the dimensions β was broadcast along. With a tensor
    β, only ``x`` and β are saved for backward; the result has ``x``'s dtype.

    For β > 0 the edge cases are those of :func:`gelu`; for β < 0 the limits are mirrored
    (+inf → 0, −inf → −inf); β = 0 gives x/2 (a float β = 0 also at ±inf; a tensor β = 0 gives
    nan there, where β·x is nan).
    """
    if isinstance(beta, Tensor):
        if torch.compiler.is_compiling():
            return swish_composed(x, beta)
        return _SwishTensorBeta.apply(x, beta)
    if torch.compiler.is_compiling():
        return swish_composed(x, float(beta))
    return _Swish.apply(x, float(beta))


def bias_gelu(
    x: Tensor, bias: Tensor, approximate: str = "none", *, accurate: bool = False
) -> Tensor:
    """gelu(x + bias), saving only ``x`` and ``bias`` for backward (the sum is recomputed).

    ``bias`` broadcasts against ``x`` (typically shape ``[features]``); its gradient is summed
    over the broadcast dimensions. ``approximate`` and ``accurate`` as in :func:`gelu`.
    """
    _check_approximate(approximate)
    if torch.compiler.is_compiling():
        return gelu_composed(x + bias, approximate, accurate=accurate)
    return _BiasGELU.apply(x, bias, approximate, accurate)


def geglu(x: Tensor, dim: int = -1, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    """GEGLU (Shazeer 2020): x = [a, b] split in halves on ``dim``; returns a · gelu(b).

    The second half is the gate, as in ``torch.nn.functional.glu`` (a·σ(b)) and the common
    ``x, gate = x.chunk(2, dim=-1); x * gelu(gate)``. The output has half of ``x``'s size on
    ``dim``; ``approximate`` and ``accurate`` as in :func:`gelu`. Only ``x`` is saved.
    """
    _check_approximate(approximate)
    if x.dim() == 0:
        raise ValueError("geglu needs a tensor with at least one dimension, got a scalar")
    size = x.shape[dim]
    if size % 2:
        raise ValueError(
            f"geglu splits dim={dim} into two halves, but its size is odd ({size}); "
            "give the projection an even number of output features"
        )
    if torch.compiler.is_compiling():
        value, gate = x.chunk(2, dim=dim)
        return value * gelu_composed(gate, approximate, accurate=accurate)
    return _GEGLU.apply(x, dim, approximate, accurate)
