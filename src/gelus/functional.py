"""The GELU family as functions of tensors: the documented front door, as ``torch.nn.functional``.

    gelu(x, approximate="none" | "tanh" | "sigmoid", *, accurate=False)   x·Φ(x) and two forms
    silu(x, inplace=False), swish(x, beta)                                x·σ(x), x·σ(βx)
    generalized_gelu(x, mu, sigma)                                        x·Φ((x − μ)/σ)
    stochastic_gelu(x, training, generator)                               x·m, m ~ Bernoulli(Φ(x))
    bias_gelu(x, bias, approximate, *, accurate)                          gelu(x + bias)
    geglu(x, dim, approximate, *, accurate)                               a·gelu(b), x = [a, b]
    swiglu(x, dim), reglu(x, dim)                                         a·silu(b), a·relu(b)
    clamped_swiglu(x, *, alpha, limit, interleaved, dim)                  GPT-OSS's gate
    laplace, relu2, sqrtsoftplus, xielu, hard_mish                        names from HF and timm

Every member is an operator (``torch.ops.gelus.*``; docs/ARCHITECTURE.md): it works in eager,
under ``torch.compile(fullgraph=True)`` (fused by inductor), with ``torch.func`` (``vmap``,
``grad``, ``jacrev``, ``jacfwd``, ``jvp``, ``hessian``), forward-mode AD, double backward,
``torch.export`` (strict or not), ``torch.jit.trace`` (+ save/load after ``import gelus``) and
the dynamo ONNX exporter. ``torch.jit.script`` is not supported (TorchScript is deprecated).

The contract of every member and route (docs/NUMERICS.md): +inf → +inf, −inf → 0, nan → nan,
−0 → −0, finite → finite (FLT_MAX → FLT_MAX); the gradient is finite at every finite x and 1 / 0
at ±inf; fp16 and bf16 are computed in float32 and rounded once. Dtypes follow torch's type
promotion over the tensor operands (``bias_gelu(bf16, fp32 bias)`` is float32). Invalid
arguments raise ``ValueError`` (one error type across the library); an unknown ``approximate``
raises one that is also the ``RuntimeError`` torch's ``F.gelu`` raises there.
"""

import torch
from torch import Tensor

from gelus import _bias_gelu, _clamped_swiglu, _geglu, _gelu, _generalized, _glu, _swish
from gelus._common import (
    APPROXIMATIONS,
    apply_inplace,
    check_approximate,
    check_floating,
    compute_dtype,
)
from gelus._extra import hard_mish, laplace, relu2, sqrtsoftplus, xielu
from gelus._operator import fx_leaf
from gelus._stochastic import stochastic_gelu_training

__all__ = [
    "APPROXIMATIONS",
    "bias_gelu",
    "clamped_swiglu",
    "geglu",
    "gelu",
    "generalized_gelu",
    "hard_mish",
    "laplace",
    "reglu",
    "relu2",
    "silu",
    "sqrtsoftplus",
    "stochastic_gelu",
    "swiglu",
    "swish",
    "xielu",
]


@fx_leaf
def gelu(x: Tensor, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    r"""Gaussian Error Linear Unit, GELU(x) = x·Φ(x), or one of its two classic approximations.

    .. math::
        \text{none:}\quad & x\,\Phi(x) = \tfrac{x}{2}\,\operatorname{erfc}(-x/\sqrt2) \\
        \text{tanh:}\quad & \tfrac{x}{2}\bigl(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715\,x^3))\bigr)
            = x\,\sigma\bigl(2\sqrt{2/\pi}\,(x + 0.044715\,x^3)\bigr) \\
        \text{sigmoid:}\quad & x\,\sigma(1.702\,x)

    Args:
        x: any shape, any float dtype. fp16/bf16 are computed in fp32 and rounded once.
        approximate: ``"none"`` (exact), ``"tanh"`` or ``"sigmoid"``; anything else raises
            ``ValueError`` (also a ``RuntimeError``, as torch's).
        accurate: exact form only (``ValueError`` with another form). ``True``: Φ without
            cancellation or argument rounding, down to underflow: eager in float64, rounded
            once; compiled in fp32 with split arguments; several times the cost of ``F.gelu``
            (docs/PERFORMANCE.md). ``False`` (default): torch's kernel (eager) or formula
            (compiled), patched at the edges: as fast as ``F.gelu`` and, like it, without
            relative accuracy below −3 (only a small absolute error there).

    Accuracy of every path and form, and how far each form is from the exact GELU: one table,
    docs/NUMERICS.md ("Accuracy"; CUDA: docs/CUDA.md). Not repeated here.

    Only ``x`` is saved for backward; the backward recomputes.

    Example::

        >>> import torch
        >>> from gelus.functional import gelu
        >>> gelu(torch.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.1587,  0.0000,  0.8413])
        >>> gelu(torch.tensor([-10.0]), accurate=True)  # F.gelu (and accurate=False) say -0.
        tensor([-7.6199e-23])
    """
    check_approximate(approximate, accurate)
    check_floating("gelu", x)
    return _gelu.gelu(x, approximate, bool(accurate))


@fx_leaf
def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """SiLU(x) = x·σ(x), with the edge cases of :func:`gelu` (torch's ``F.silu(-inf)`` is nan).

    ``inplace=True`` writes the result into ``x`` and returns it, as ``F.silu`` does; it saves
    no memory when autograd records (the backward needs the input, so a copy is kept).
    """
    if x.is_complex():  # torch's complex SiLU, x·σ(x) with the complex sigmoid
        return torch.nn.functional.silu(x, inplace)
    check_floating("silu", x)
    if inplace:
        return apply_inplace(silu, x)
    return _swish.swish(x, 1.0)


@fx_leaf
def swish(x: Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """Swish(x) = x·σ(β·x); β = 1 is SiLU, β = 1.702 the sigmoid form of GELU.

    ``beta`` is a float, or a tensor broadcastable against ``x`` (e.g. a learnable scalar or
    per-channel ``[C]`` parameter) that receives the gradient dL/dβ = Σ grad·x²·σ'(βx), summed
    over the dimensions β was broadcast along. Only ``x`` (and a tensor β) is saved for
    backward. The result's dtype is torch's promotion of x and a tensor β.

    For β > 0 the edge cases are those of :func:`gelu`; for β < 0 the limits are mirrored
    (+inf → 0, −inf → −inf); β = 0 gives x/2 (a float β = 0 also at ±inf; a tensor β = 0 gives
    nan there, where β·x is nan).
    """
    if isinstance(beta, Tensor):
        check_floating("swish", x, beta)
        return _swish.swish_tensor(x, beta)
    if x.is_complex():  # as silu: torch's complex sigmoid
        return torch.nn.functional.silu(x) if beta == 1.0 else x * torch.sigmoid(beta * x)
    check_floating("swish", x)
    return _swish.swish(x, float(beta))


@fx_leaf
def generalized_gelu(x: Tensor, mu: Tensor | float = 0.0, sigma: Tensor | float = 1.0) -> Tensor:
    """Generalized GELU: x·Φ((x − μ)/σ), Φ the standard normal CDF.

    Args:
        x: input of any shape, floating point.
        mu: location μ, a float or a tensor broadcastable against ``x`` (ordinary broadcasting,
            so a shape ``[C]`` tensor is per-channel along the **last** dimension; for
            channels-first input ``[N, C, H, W]`` pass shape ``[C, 1, 1]``, or use
            :class:`gelus.GeneralizedGELU` with ``channel_dim=1``).
        sigma: scale σ > 0, a float or a tensor broadcastable against ``x`` like ``mu``. A
            float σ ≤ 0 raises ``ValueError``; so does a tensor σ with an element ≤ 0 (or nan)
            on a CPU tensor in eager mode. Where that check would need a device sync or meet a
            tracer (``torch.compile``, ``torch.func.vmap``, ``torch.export``, ONNX, CUDA) such
            an element gives nan (value and gradients), never a different function: σ = −1
            does not compute x·Φ(−x), σ = 0 does not return the step limit.

    Returns:
        The broadcast shape, in torch's promotion of the tensor operands' dtypes (Python floats
        do not promote: a bf16 ``x`` with float μ, σ gives bf16). Half types are computed in
        float32 and rounded once. Gradients flow to ``x``, ``mu`` and ``sigma`` (summed down to
        their shapes); only x, μ and σ are kept for backward. Φ is ½·erfc(−z/√2), accurate in
        the negative tail (docs/NUMERICS.md, "Accuracy"), also in ONNX.

    Example::

        >>> x = torch.randn(8, 16)
        >>> y = generalized_gelu(x, mu=0.0, sigma=0.5)               # scalar μ, σ
        >>> y = generalized_gelu(x, torch.zeros(16), torch.ones(16))  # per channel, last dim
    """
    check_floating("generalized_gelu", x, mu, sigma)
    if isinstance(sigma, Tensor):
        _generalized.check_sigma(sigma)
    elif not sigma > 0:
        raise ValueError(f"generalized_gelu needs sigma > 0, got sigma={sigma}")
    dtype = x.dtype if not isinstance(mu, Tensor) and not isinstance(sigma, Tensor) else None
    # Python floats become 0-d tensors in the compute dtype (not rounded to a half type).
    scalar = compute_dtype(x.dtype)
    if not isinstance(mu, Tensor):
        mu = torch.tensor(float(mu), dtype=scalar, device=x.device)
    if not isinstance(sigma, Tensor):
        sigma = torch.tensor(float(sigma), dtype=scalar, device=x.device)
    y = _generalized.generalized_gelu(x, mu, sigma)
    if dtype is not None and y.dtype != dtype:  # a 0-dim x: the float parameters must not promote
        y = y.to(dtype)
    return y


@fx_leaf
def stochastic_gelu(
    x: Tensor, training: bool = True, generator: torch.Generator | None = None
) -> Tensor:
    """Stochastic GELU: x·m with m ~ Bernoulli(Φ(x)) when training, E[x·m] = x·Φ(x) otherwise.

    In training the mask is a constant for autograd (∂/∂x = m) and E[x·m] = GELU(x),
    Var[x·m] = x²·Φ(x)·(1 − Φ(x)); only the boolean mask is saved. In eval this is the exact
    ``gelu(x)``. Under ``torch.func.vmap`` pass ``randomness="different"``, as for dropout.

    Edge cases: +inf -> +inf (Φ = 1), −inf -> 0 (Φ = 0, and not inf·0 = nan), nan -> nan.

    Args:
        x: input of any shape, floating point.
        training: draw a mask (True) or return the expectation x·Φ(x) (False).
        generator: a ``torch.Generator`` for a reproducible mask.

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> y = stochastic_gelu(torch.randn(4, 8), training=True, generator=g)
    """
    check_floating("stochastic_gelu", x)
    if not training:
        return gelu(x)
    return stochastic_gelu_training(x, generator)


@fx_leaf
def bias_gelu(
    x: Tensor, bias: Tensor, approximate: str = "none", *, accurate: bool = False
) -> Tensor:
    """gelu(x + bias), saving only ``x`` and ``bias`` for backward (the sum is recomputed).

    ``bias`` broadcasts against ``x`` (typically shape ``[features]``); its gradient is summed
    over the broadcast dimensions. The result has ``x + bias``'s dtype (torch's promotion).
    ``approximate`` and ``accurate`` as in :func:`gelu`.
    """
    check_approximate(approximate, accurate)
    check_floating("bias_gelu", x, bias)
    return _bias_gelu.bias_gelu(x, bias, approximate, bool(accurate))


@fx_leaf
def geglu(x: Tensor, dim: int = -1, approximate: str = "none", *, accurate: bool = False) -> Tensor:
    """GEGLU (Shazeer 2020): x = [a, b] split in halves on ``dim``; returns a · gelu(b).

    The second half is the gate, as in ``torch.nn.functional.glu`` (a·σ(b)) and the common
    ``x, gate = x.chunk(2, dim=-1); x * gelu(gate)``. The output has half of ``x``'s size on
    ``dim``; ``approximate`` and ``accurate`` as in :func:`gelu`. Only ``x`` is saved.
    """
    check_approximate(approximate, accurate)
    check_floating("geglu", x)
    _geglu.check(x, dim)
    return _geglu.geglu(x, dim, approximate, bool(accurate))


@fx_leaf
def swiglu(x: Tensor, dim: int = -1) -> Tensor:
    """SwiGLU (Shazeer 2020): x = [a, b] split in halves on ``dim``; returns a · silu(b).

    The convention of :func:`geglu`: the second half is the gate. The output has half of ``x``'s
    size on ``dim``; half types are computed in float32 and rounded once; only ``x`` is saved.
    silu's edge cases hold for the gate (silu(−inf) = 0, slope 1 / 0 at ±inf).
    """
    check_floating("swiglu", x)
    _geglu.check(x, dim, "swiglu")
    return _glu.swiglu(x, dim)


@fx_leaf
def reglu(x: Tensor, dim: int = -1) -> Tensor:
    """ReGLU (Shazeer 2020): x = [a, b] split in halves on ``dim``; returns a · relu(b).

    The convention of :func:`geglu`: the second half is the gate. The output has half of ``x``'s
    size on ``dim``; half types are computed in float32 and rounded once; only ``x`` is saved.
    The gate's slope is 1 above 0 and 0 at and below it, as torch's relu.
    """
    check_floating("reglu", x)
    _geglu.check(x, dim, "reglu")
    return _glu.reglu(x, dim)


@fx_leaf
def clamped_swiglu(
    x: Tensor,
    *,
    alpha: float = _clamped_swiglu.ALPHA,
    limit: float = _clamped_swiglu.LIMIT,
    interleaved: bool = True,
    dim: int = -1,
) -> Tensor:
    """GPT-OSS's expert gate (clamped SwiGLU) from the two halves of x on ``dim``:

        g = min(gate, limit),  u = clamp(up, −limit, limit),  y = (u + 1) · g · σ(alpha · g)

    ``interleaved=True`` (GPT-OSS's checkpoints): gate = x[..., 0::2], up = x[..., 1::2] along
    ``dim``; ``interleaved=False``: [gate, up] = x.chunk(2, dim), the gate *first* (unlike
    :func:`swiglu`, whose gate is the second half). Defaults: GPT-OSS's alpha = 1.702 and
    limit = 7.0 (limit = inf clamps nothing). The output has half of x's size on ``dim``.

    Gradients: dy/dgate = (u + 1)·(σ(z) + z·σ(z)(1 − σ(z))), z = alpha·g, and dy/dup = g·σ(z);
    each is 0 where its clamp is active (gate > limit, |up| > limit) and passes at the bounds
    themselves, as torch's clamp. Edge cases: gate = −inf gives ±0 (the original code's
    −inf·0 = nan), nan gives nan in the value and in the gradient (torch's clamp gives a 0
    gradient there). One fused pass each way (a Triton kernel on CUDA); only x is saved; half
    types are computed in float32 and rounded once.
    """
    check_floating("clamped_swiglu", x)
    _clamped_swiglu.check(x, alpha, limit, dim)
    return _clamped_swiglu.clamped_swiglu(x, float(alpha), float(limit), bool(interleaved), dim)
