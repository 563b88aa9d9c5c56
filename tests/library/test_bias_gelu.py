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
