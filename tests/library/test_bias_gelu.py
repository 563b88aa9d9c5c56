"""Bias-GELU (gelus/_bias_gelu.py): a broadcast bias, its summed gradient, its dtype."""

import pytest
import torch

import gelus.functional as G


@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_gradcheck_with_broadcast_bias_and_the_bias_gradient_is_the_sum(approximate):
    x = torch.randn(4, 3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x.requires_grad_()
    bias.requires_grad_()

    def fn(x, bias):
        return G.bias_gelu(x, bias, approximate)

    assert torch.autograd.gradcheck(fn, (x, bias))
    assert torch.autograd.gradgradcheck(fn, (x, bias))
    y = fn(x, bias)
    gx, gb = torch.autograd.grad(y, (x, bias), torch.randn_like(y))
    assert gb.shape == bias.shape
    torch.testing.assert_close(gb, gx.sum(dim=(0, 1)))
    torch.testing.assert_close(y, G.gelu(x + bias, approximate))


def test_accurate_bias_gelu_is_accurate_gelu_of_the_sum():
    x = torch.linspace(-12, 3, 301)
    bias = torch.full((301,), -0.5)
    assert torch.equal(G.bias_gelu(x, bias, accurate=True), G.gelu(x + bias, accurate=True))


def test_saves_input_and_bias_only():
    x = torch.randn(64, 32, requires_grad=True)
    bias = torch.randn(32, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = G.bias_gelu(x, bias)
    y.sum().backward()
    assert len(saved) == 2 and saved[0] is x and saved[1] is bias


def test_promotes_like_x_plus_bias():
    x = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
    bias = torch.zeros(8, requires_grad=True)
    y = G.bias_gelu(x, bias)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and bias.grad.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_types_add_in_fp32(dtype):
    """x + bias of half types is formed in fp32 (as the CUDA kernels form it), so the result is
    gelu of the exact sum rounded once: within half an ulp of the half type against float64
    (accurate=True, whose fp32 gelu is far below a half ulp). Adding in the half type first
    rounded h, which the GELU's condition number (~h² in the tail) magnified to several ulp."""
    import numpy as np
    from scipy import special

    from gelus import _bias_gelu

    rng = np.random.default_rng(12)
    x = torch.from_numpy(rng.uniform(-6, 4, (4096, 8))).to(dtype)
    bias = torch.tensor([0.1234, -0.777, 1e-3, 0.3333, -1.9, 2.5, -0.05, 0.6]).to(dtype)
    h = x.double().numpy() + bias.double().numpy()
    reference = h * special.ndtr(h)
    slope = special.ndtr(h) + h * np.exp(-h * h / 2) / np.sqrt(2 * np.pi)
    mantissa, tiny = {torch.float16: (10, 2.0**-14), torch.bfloat16: (7, 2.0**-126)}[dtype]
    y = _bias_gelu.kernel_forward(x, bias, accurate=True)
    g = _bias_gelu.kernel_backward(torch.ones_like(x), x, bias, accurate=True)
    assert y.dtype == g.dtype == dtype
    for got, want in ((y, reference), (g, slope)):
        spacing = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), tiny))) - mantissa)
        error = np.abs(got.double().numpy() - want) / spacing
        assert error.max() <= 0.5 + 1e-3, h.ravel()[error.argmax()]
