"""The parameter gradients of the Triton kernels (bias-GELU's dbias, Swish's dβ, generalized GELU's
dμ and dσ): summed on the device in one pass plus a finishing kernel, checked against float64
sums (numpy and scipy, sharing no code with the kernels), bit-reproducible from run to run.

Run in Triton's interpreter on CPU (tests/conftest.py sets TRITON_INTERPRET=1 without CUDA).
"""

import math

import numpy as np
import pytest
import torch
from scipy import special

from _triton_support import DEVICE, ops, triton_marks

pytestmark = triton_marks

CHANNELS = [1, 3, 64, 1024, 1025]
# (x shape for C channels, parameter shape, channels_last): NCHW per channel (the rows kernel),
# NCHW channels_last and [..., C] on the last dim (the columns kernel)
LAYOUTS = {
    "nchw": (lambda c: (2, c, 2, 3), lambda c: (c, 1, 1), False),
    "channels_last": (lambda c: (2, c, 2, 3), lambda c: (c, 1, 1), True),
    "last_dim": (lambda c: (5, c), lambda c: (c,), False),
}


def _tensor(shape, dtype, seed, scale=1.0, shift=0.0, channels_last=False):
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + shift).to(dtype)
    if channels_last:
        t = t.to(memory_format=torch.channels_last)
    return t.to(DEVICE)


def _np(t):
    return t.detach().cpu().double().numpy()


def _terms(member, x, grad, p, q):
    """(terms, relative error) for each parameter: the per-element gradient terms in float64
    (numpy, scipy), and what fp32 arithmetic may add to each beyond the sums' rounding: for
    generalized GELU z = (x − μ)·(1/σ) rounded three times before φ(z) sees it, (6 + 3z²)·2^-24
    (test_generalized_gelu_fp32_bound; per term measured 0.87 of it, and 1.30× the former
    (4 + 2z²), over 196,608 single-row channels)."""
    if member == "bias_gelu":
        h = x + p
        return [(grad * (special.ndtr(h) + h * np.exp(-h * h / 2) / math.sqrt(2 * math.pi)), 0.0)]
    if member == "swish":
        s = special.expit(p * x)
        return [(grad * x * x * s * (1 - s), 0.0)]
    z = (x - p) / q
    common = grad * x * np.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * q)
    error = (6 + 3 * z * z) * 2.0**-24
    return [(-common, error), (-common * z, error)]


def _kernel_grads(member, x, grad, p, q):
    if member == "bias_gelu":
        return ops.bias_gelu_backward(grad, x, p)[1:]
    if member == "swish":
        return ops.swish_backward(grad, x, p)[1:]
    return ops.generalized_gelu_backward(grad, x, p, q)[1:]


def _parameters(member, pshape, dtype):
    if member == "generalized":
        return _tensor(pshape, dtype, 3, 0.5), _tensor(pshape, dtype, 4, 0.25).abs() + 0.5
    scale, shift = (0.5, 1.0) if member == "swish" else (1.0, 0.0)
    p = _tensor(pshape, dtype, 3, scale, shift)
    return p, p


def _check_sums(got, terms, shape, dtype):
    """got (the kernel's gradient, in the parameter's dtype) against the float64 sum of the terms
    (``(values, relative error)`` from _terms) over the dimensions the parameter was broadcast
    along: within the terms' own error, the fp32 accumulation's rounding (2^-20 of the sum of
    |terms|) and the final rounding to dtype."""
    terms, terms_error = terms
    want = _sum_to(terms, shape)
    magnitude = _sum_to(np.abs(terms), shape)
    assert got.shape == shape and got.dtype == dtype
    error = np.abs(_np(got) - want)
    bound = 2.0**-20 * magnitude + torch.finfo(dtype).eps / 2 * np.abs(want) + 1e-30
    bound = bound + _sum_to(np.abs(terms) * terms_error, shape)
    worst = np.argmax(error / bound)
    assert (error <= bound).all(), (
        f"channel {worst}: {_np(got).ravel()[worst]!r} against {want.ravel()[worst]!r}"
    )


def _sum_to(a, shape):
    """a summed over the dimensions that broadcasting ``shape`` to a's shape adds or stretches."""
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


@pytest.mark.parametrize("member", ["bias_gelu", "swish", "generalized"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", CHANNELS)
def test_parameter_gradients_are_the_float64_sums(member, dtype, layout, channels):
    xshape, pshape, channels_last = LAYOUTS[layout]
    xshape, pshape = xshape(channels), pshape(channels)
    x = _tensor(xshape, dtype, 1, 2.0, channels_last=channels_last)
    grad = _tensor(xshape, dtype, 2, channels_last=channels_last)
    p, q = _parameters(member, pshape, dtype)
    got = _kernel_grads(member, x, grad, p, q)
    terms = _terms(member, _np(x), _np(grad), _np(p), _np(q))
    for gradient, term in zip(got, terms, strict=False):
        _check_sums(gradient, term, tuple(pshape), dtype)


# Many partial sums per channel (more than one finish_kernel step over the groups): 300 rows of
# 64 channels in the columns kernel, 600 images of 3 channels in the rows kernel.
MANY_GROUPS = [((300, 64), (64,), False), ((600, 3, 1, 2), (3, 1, 1), False)]


@pytest.mark.parametrize("member", ["bias_gelu", "swish", "generalized"])
@pytest.mark.parametrize("layout", MANY_GROUPS, ids=["columns", "rows"])
def test_many_partial_sums_per_channel(member, layout):
    xshape, pshape, _ = layout
    x = _tensor(xshape, torch.float32, 5, 2.0)
    grad = _tensor(xshape, torch.float32, 6)
    p, q = _parameters(member, pshape, torch.float32)
    got = _kernel_grads(member, x, grad, p, q)
    terms = _terms(member, _np(x), _np(grad), _np(p), _np(q))
    for gradient, term in zip(got, terms, strict=False):
        _check_sums(gradient, term, pshape, torch.float32)


@pytest.mark.parametrize(
    "xshape, mu_shape, sigma_shape",
    [((3, 1025), (1025,), ()), ((2, 64, 2, 3), (), (64, 1, 1))],
    ids=["scalar sigma", "scalar mu"],
)
def test_a_scalar_parameter_beside_a_per_channel_one_sums_over_the_channels(
    xshape, mu_shape, sigma_shape
):
    x = _tensor(xshape, torch.float32, 7, 2.0)
    grad = _tensor(xshape, torch.float32, 8)
    mu = _tensor(mu_shape, torch.float32, 9, 0.5)
    sigma = _tensor(sigma_shape, torch.float32, 10, 0.25).abs() + 0.5
    dmu, dsigma = ops.generalized_gelu_backward(grad, x, mu, sigma)[1:]
    terms = _terms("generalized", _np(x), _np(grad), _np(mu), _np(sigma))
    _check_sums(dmu, terms[0], mu_shape, torch.float32)
    _check_sums(dsigma, terms[1], sigma_shape, torch.float32)


@pytest.mark.parametrize("member", ["bias_gelu", "swish", "generalized"])
@pytest.mark.parametrize("layout", MANY_GROUPS, ids=["columns", "rows"])
def test_two_runs_are_bit_equal(member, layout):
    # No atomics: the partial sums are added in a fixed order, so a rerun gives the same bits.
    xshape, pshape, _ = layout
    x = _tensor(xshape, torch.bfloat16, 11, 2.0)
    grad = _tensor(xshape, torch.bfloat16, 12)
    p, q = (t.float() for t in _parameters(member, pshape, torch.bfloat16))
    first, second = (_kernel_grads(member, x, grad, p, q) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
        assert a.abs().sum() > 0  # (not an all-zero result, equal by accident)


def test_an_expanded_parameter_gets_a_gradient_per_channel():
    # One value read with stride 0 along the channels, but the gradient is per channel.
    x = _tensor((5, 64), torch.float32, 13, 2.0)
    grad = _tensor((5, 64), torch.float32, 14)
    bias = torch.full((1,), 0.3, device=DEVICE).expand(64)
    dbias = ops.bias_gelu_backward(grad, x, bias)[1]
    terms = _terms("bias_gelu", _np(x), _np(grad), _np(bias), None)
    _check_sums(dbias, terms[0], (64,), torch.float32)
