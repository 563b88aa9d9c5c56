"""Generalized GELU x·Φ((x − μ)/σ) with learnable location μ and scale σ.

The paper's GELU is the case μ = 0, σ = 1; as σ → 0 with μ = 0 the function tends to ReLU
(the gap max |f − relu| is exactly σ · 0.16997…, the depth of GELU's minimum).

Memory: a naive composition keeps four input-sized intermediates for backward. Here a
``torch.autograd.Function`` saves only x, μ and σ and recomputes z = (x − μ)/σ in backward.
"""

import math

import torch
from torch import Tensor

__all__ = [
    "GeneralizedGELUFunction",
    "generalized_gelu",
    "generalized_gelu_backward",
    "generalized_gelu_forward",
]

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # normalizer of the standard normal density φ


def _compute_dtype(*tensors: Tensor) -> torch.dtype:
    # Half types are evaluated in float32 and rounded once at the end; float64 stays float64.
    dtype = torch.float32
    for tensor in tensors:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype


def _normal_cdf(z: Tensor) -> Tensor:
    # Φ(z) = ½·erfc(−z/√2): no cancellation in 1 + erf(z/√2) for negative z.
    return 0.5 * torch.special.erfc(-z * _INV_SQRT_2)


def generalized_gelu_forward(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """x·Φ((x − μ)/σ), evaluated in at least float32 and returned in ``x.dtype``.

    Limits: x = +inf gives +inf, x = −inf gives −0.0 (not inf·0 = nan), nan propagates.
    """
    dtype = _compute_dtype(x, mu, sigma)
    xc, muc, sigmac = x.to(dtype), mu.to(dtype), sigma.to(dtype)
    cdf = _normal_cdf((xc - muc) / sigmac)
    # Where Φ underflows to 0 (including x = −inf) the product is a signed zero, never nan.
    out = torch.where(cdf == 0, -0.0, xc * cdf)
    return out.to(x.dtype)


def generalized_gelu_backward(
    grad_output: Tensor,
    x: Tensor,
    mu: Tensor,
    sigma: Tensor,
    needs_input_grad: tuple[bool, bool, bool] = (True, True, True),
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of x·Φ(z), z = (x − μ)/σ, for x, μ and σ.

        ∂f/∂x = Φ(z) + x·φ(z)/σ      ∂f/∂μ = −x·φ(z)/σ      ∂f/∂σ = −x·φ(z)·z/σ

    The μ and σ gradients are summed over the broadcast dimensions down to the shapes of μ and
    σ; each gradient has the dtype of its input. Where φ(z) underflows (x = ±inf) the terms with
    x·φ(z) are 0 instead of inf·0 = nan, so the gradient is 1 at +inf and 0 at −inf.
    Written with differentiable torch ops, so double backward works.
    """
    dtype = _compute_dtype(x, mu, sigma)
    xc, muc, sigmac = x.to(dtype), mu.to(dtype), sigma.to(dtype)
    grad = grad_output.to(dtype)
    z = (xc - muc) / sigmac
    pdf = torch.exp(-0.5 * z * z) * _INV_SQRT_2PI
    vanishing = pdf == 0
    # x·φ(z)/σ, the common factor of all three gradients
    slope = torch.where(vanishing, 0.0, xc * pdf / sigmac)

    grad_x = grad_mu = grad_sigma = None
    if needs_input_grad[0]:
        grad_x = (grad * (_normal_cdf(z) + slope)).to(x.dtype)
    if needs_input_grad[1]:
        grad_mu = (-grad * slope).sum_to_size(mu.shape).to(mu.dtype)
    if needs_input_grad[2]:
        slope_z = torch.where(vanishing, 0.0, slope * z)
        grad_sigma = (-grad * slope_z).sum_to_size(sigma.shape).to(sigma.dtype)
    return grad_x, grad_mu, grad_sigma


class GeneralizedGELUFunction(torch.autograd.Function):
    """Autograd for x·Φ((x − μ)/σ) that saves only x, μ and σ and recomputes in backward."""

    @staticmethod
    def forward(ctx, x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
        ctx.save_for_backward(x, mu, sigma)
        return generalized_gelu_forward(x, mu, sigma)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        x, mu, sigma = ctx.saved_tensors
        return generalized_gelu_backward(grad_output, x, mu, sigma, ctx.needs_input_grad)


def generalized_gelu(x: Tensor, mu: Tensor | float = 0.0, sigma: Tensor | float = 1.0) -> Tensor:
    """Generalized GELU: x·Φ((x − μ)/σ), Φ the standard normal CDF.

    Args:
        x: input of any shape, floating point.
        mu: location μ, a float or a tensor broadcastable against ``x`` (ordinary broadcasting,
            so a shape ``[C]`` tensor is per-channel along the **last** dimension; for
            channels-first input ``[N, C, H, W]`` pass shape ``[C, 1, 1]``, or use
            :class:`gelus.GeneralizedGELU` with ``channel_dim=1``).
        sigma: scale σ > 0, a float or a tensor broadcastable against ``x`` like ``mu``.

    Returns:
        A tensor of ``x``'s shape and dtype. Half types are computed in float32 and rounded once.
        Gradients flow to ``x``, ``mu`` and ``sigma`` (summed down to their shapes); only x, μ
        and σ are kept for backward.

    Example::

        >>> x = torch.randn(8, 16)
        >>> y = generalized_gelu(x, mu=0.0, sigma=0.5)               # scalar μ, σ
        >>> y = generalized_gelu(x, torch.zeros(16), torch.ones(16))  # per channel, last dim
    """
    if not x.is_floating_point():
        raise TypeError(f"generalized_gelu expects a floating-point input, got {x.dtype}")
    if not isinstance(sigma, Tensor) and not sigma > 0:
        raise ValueError(f"generalized_gelu needs sigma > 0, got sigma={sigma}")
    # Python floats become 0-d tensors in the compute dtype (not rounded to a half type).
    if not isinstance(mu, Tensor):
        mu = torch.tensor(float(mu), dtype=_compute_dtype(x), device=x.device)
    if not isinstance(sigma, Tensor):
        sigma = torch.tensor(float(sigma), dtype=_compute_dtype(x), device=x.device)
    # Also under torch.compile: dynamo traces the Function's forward and backward (plain torch
    # ops, fused by inductor), and the backward sees only the saved x, μ and σ; a composition
    # differentiated by autograd would have the partitioner keep its masks for backward.
    return GeneralizedGELUFunction.apply(x, mu, sigma)
