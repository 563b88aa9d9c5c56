"""Generalized GELU x·Φ((x − μ)/σ) with learnable location μ and scale σ: every route side by side.

The paper's GELU is μ = 0, σ = 1; as σ → 0 with μ = 0 it tends to ReLU (max |f − relu| is
σ·0.16997…, the depth of GELU's minimum). docs/NUMERICS.md, "Generalized GELU".

σ must be > 0. A tensor σ that is not (σ ≤ 0 or nan) is refused with ValueError where that can
be checked without a device sync or a tracer (:func:`check_sigma`: eager, CPU, outside
torch.func); everywhere else (compile, vmap, export, ONNX, CUDA) such an element gives nan, in
value and gradients, through :func:`positive_sigma`: never x·Φ(−x) (σ = −1) or the step (σ = 0).

    operator   ``gelus::generalized_gelu(x, mu, sigma)``: Φ = ½·erfc(−z/√2), z = (x − μ)/σ
    backward   a composition of torch ops (differentiable to any order), saving only x, μ, σ:
               ∂f/∂x = Φ(z) + x·φ(z)/σ,  ∂f/∂μ = −x·φ(z)/σ,  ∂f/∂σ = −x·φ(z)·z/σ
    compiled   the same formulas in a Function that saves x, μ, σ (inductor fuses them)
    ONNX       Φ from :func:`gelus._phi.normal_cdf_rational` in float64: no erfc, no cancellation
"""

import torch
from torch import Tensor

from gelus._common import GELU_CLAMP, check_floating, compute_dtype, result_dtype
from gelus._operator import (
    NAMESPACE,
    apply_compiled,
    broadcast_fake,
    broadcast_vmap,
    cast,
    device_kernel,
    fast_apply,
    kernel_device,
    kernel_for,
    route,
    tangent_sum,
)
from gelus._phi import normal_cdf, normal_cdf_rational, normal_pdf
from gelus._torch_compat import below_autograd, dispatch_mode_active, functorch_active, is_plain

__all__ = [
    "backward",
    "check_sigma",
    "composed_backward",
    "forward",
    "generalized_gelu",
    "generalized_gelu_backward_op",
    "generalized_gelu_op",
    "positive_sigma",
]


def positive_sigma(sigma: Tensor) -> Tensor:
    """σ where σ > 0, nan elsewhere: a σ ≤ 0 makes the result nan, not a different function."""
    return torch.where(sigma > 0, sigma, torch.nan)


def check_sigma(sigma: Tensor) -> None:
    """ValueError for a tensor σ with an element that is not > 0, on the eager route for a plain
    CPU tensor outside torch.func (elsewhere the check would sync a device or meet a tracer;
    :func:`positive_sigma` gives nan there), and not while CPU takes the CUDA route."""
    if (
        route(sigma) != "eager"
        or kernel_device(sigma) != "cpu"
        or functorch_active()
        or dispatch_mode_active()
        or not is_plain(sigma)
    ):
        return
    valid = sigma.detach() > 0
    if not bool(valid.all()):
        bad = sigma.detach()[~valid]
        raise ValueError(
            f"generalized_gelu needs sigma > 0, got a tensor sigma with {bad.numel()} of "
            f"{sigma.numel()} elements <= 0 or nan (the first: {bad[0].item()})"
        )


def _value(x: Tensor, mu: Tensor, sigma: Tensor, cdf=normal_cdf) -> Tensor:
    cdf_z = cdf((x - mu) / positive_sigma(sigma))
    # Where Φ underflows to 0 (including x = −inf) the product is a signed zero, never nan.
    return torch.where(cdf_z == 0, -0.0, x * cdf_z)


def forward(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """x·Φ((x − μ)/σ) in the compute dtype of the three, returned in their promoted dtype.

    Limits: x = +inf gives +inf, x = −inf gives −0.0 (not inf·0 = nan), nan propagates.
    """
    check_floating(f"{NAMESPACE}::generalized_gelu", x, mu, sigma)
    dtype = compute_dtype(x.dtype, mu.dtype, sigma.dtype)
    return _value(x.to(dtype), mu.to(dtype), sigma.to(dtype)).to(result_dtype(x, mu, sigma))


def _partials(
    x: Tensor, mu: Tensor, sigma: Tensor, by_reciprocal: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    """∂f/∂x, ∂f/∂μ, ∂f/∂σ (broadcast shape), 1 / 0 at x = ±inf instead of inf·0 = nan.

    ``by_reciprocal``: z = (x − μ)·(1/σ), a different expression from the forward's (x − μ)/σ, so
    that a compiled graph cannot share z between forward and backward; torch 2.14's partitioner
    then kept z for backward beside x (one more input-sized tensor), where 2.13 recomputed it.
    """
    sigma = positive_sigma(sigma)
    inverse = torch.reciprocal(sigma) if by_reciprocal else None
    z = (x - mu) * inverse if by_reciprocal else (x - mu) / sigma
    pdf = normal_pdf(z)
    vanishing = pdf == 0
    scaled = x * pdf * inverse if by_reciprocal else x * pdf / sigma
    slope = torch.where(vanishing, 0.0, scaled)  # x·φ(z)/σ, common to all three
    slope_z = torch.where(vanishing, 0.0, slope * z)
    return normal_cdf(z) + slope, -slope, -slope_z


def backward(
    grad: Tensor,
    x: Tensor,
    mu: Tensor,
    sigma: Tensor,
    needs_input_grad: tuple[bool, ...] = (True, True, True),
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Gradients for x, μ and σ, each summed down to its shape and in its dtype.

    A composition of torch ops: differentiable (double backward, torch.func). A backward that
    autograd does not record calls ``gelus::generalized_gelu_backward`` instead where a device
    registers a kernel for it (on CUDA the Triton kernel: one pass, per-channel sums).
    """
    fused = None
    if not torch.is_grad_enabled():
        fused = device_kernel(generalized_gelu_backward_op, x, grad, mu, sigma)
    if fused is not None:
        grads = fused(grad, x, mu, sigma)
        return tuple(
            g if needed else None for g, needed in zip(grads, needs_input_grad, strict=False)
        )
    return composed_backward(grad, x, mu, sigma, needs_input_grad)


def composed_backward(grad, x, mu, sigma, needs_input_grad=(True, True, True)):
    """:func:`backward` as a composition of torch ops (the default kernel of the backward op)."""
    dtype = compute_dtype(x.dtype, mu.dtype, sigma.dtype)
    partials = _partials(x.to(dtype), mu.to(dtype), sigma.to(dtype))
    grad = grad.to(dtype)
    return tuple(
        cast((grad * partial).sum_to_size(t.shape), t.dtype) if needed else None
        for partial, t, needed in zip(partials, (x, mu, sigma), needs_input_grad, strict=False)
    )


@torch.library.custom_op(f"{NAMESPACE}::generalized_gelu_backward", mutates_args=())
def generalized_gelu_backward_op(
    grad: Tensor, x: Tensor, mu: Tensor, sigma: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dμ, dσ), each in its tensor's shape and dtype: the gradients in one operator, for a
    device kernel to register (its default kernel is :func:`backward`'s composition)."""
    return composed_backward(grad, x, mu, sigma)


@generalized_gelu_backward_op.register_fake
def _(grad, x, mu, sigma):
    return x.new_empty(x.shape), mu.new_empty(mu.shape), sigma.new_empty(sigma.shape)


@torch.library.custom_op(f"{NAMESPACE}::generalized_gelu", mutates_args=())
def generalized_gelu_op(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """x·Φ((x − μ)/σ), the forward operator (promoted dtype); a device kernel registers here."""
    return forward(x, mu, sigma)


@generalized_gelu_op.register_fake
def _(x, mu, sigma):
    check_floating(f"{NAMESPACE}::generalized_gelu", x, mu, sigma)
    return broadcast_fake(x, mu, sigma)


generalized_gelu_op.register_vmap(broadcast_vmap(generalized_gelu_op, 3))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, mu, sigma = ctx.saved_tensors
    return backward(grad, x, mu, sigma, ctx.needs_input_grad)


generalized_gelu_op.register_autograd(_backward, setup_context=_setup)


class _Function(torch.autograd.Function):
    """The eager route: the operator forward, composed gradients and tangents."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
        kernel = kernel_for(generalized_gelu_op, forward, x, mu, sigma, direct=True)
        with below_autograd():  # this Function is the autograd
            return kernel(x, mu, sigma)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    backward = staticmethod(_backward)

    @staticmethod
    def jvp(ctx, *tangents):
        x, mu, sigma = ctx.saved_tensors
        dtype = compute_dtype(x.dtype, mu.dtype, sigma.dtype)
        partials = _partials(x.to(dtype), mu.to(dtype), sigma.to(dtype))
        terms = [None if t is None else p * t for p, t in zip(partials, tangents, strict=True)]
        return cast(tangent_sum(terms), result_dtype(x, mu, sigma))


def _composed(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """:func:`_value` as a torch.func transform differentiates it (:func:`apply_compiled`).

    Beyond |z| = 40 Φ(z) is exactly 1 or 0 (float32 and float64), the value x or −0 and the
    partials 1 / 0: there the limit comes from a ``where`` whose other branch sees x = μ
    (z = 0), so that autograd never forms inf·0 (at x = ±inf, or (x − μ)/σ² overflowing near
    FLT_MAX) and the gradients are the eager route's. nan (in x, or σ ≤ 0) stays inside.
    """
    outside = (x - mu).abs() > GELU_CLAMP * positive_sigma(sigma)
    y = _value(torch.where(outside, mu, x), mu, sigma)
    return torch.where(outside, torch.where(x > mu, x, -0.0), y)


class _Compiled(torch.autograd.Function):
    """The compiled route (x, μ, σ of the compute dtype): saves only them.

    Returns a fresh tensor: torch 2.11 mis-routes the gradient of a Function whose forward
    returns an alias of an intermediate, e.g. a no-op ``.to(dtype)`` (pytorch/pytorch#180642).
    """

    @staticmethod
    def forward(ctx, x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
        ctx.save_for_backward(x, mu, sigma)
        return _value(x, mu, sigma)

    @staticmethod
    def backward(ctx, grad):
        x, mu, sigma = ctx.saved_tensors
        partials = _partials(x, mu, sigma, by_reciprocal=True)
        return tuple(
            (grad * partial).sum_to_size(t.shape) if needed else None
            for partial, t, needed in zip(
                partials, (x, mu, sigma), ctx.needs_input_grad, strict=True
            )
        )


def generalized_gelu(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """x·Φ((x − μ)/σ) by route (μ and σ tensors; arguments already checked)."""
    way = route(x, "generalized_gelu")
    if way == "eager":
        return fast_apply(_Function, x, mu, sigma)
    if way in ("compile", "onnx"):
        dtype = compute_dtype(x.dtype, mu.dtype, sigma.dtype)
        if way == "onnx":
            dtype = torch.float64  # Φ without erfc: rational in float64, rounded once
        xc, muc, sigmac = x.to(dtype), mu.to(dtype), sigma.to(dtype)
        if way == "compile":
            y = apply_compiled(_Compiled, _composed, xc, muc, sigmac)
        else:
            y = _value(xc, muc, sigmac, cdf=normal_cdf_rational)
        return y.to(result_dtype(x, mu, sigma))
    return generalized_gelu_op(x, mu, sigma)
