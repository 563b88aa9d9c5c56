"""Smaller behaviours where the library now does what torch (or Hugging Face) does, or pins where it
chooses to differ: half types of xIELU, forward-over-reverse dtypes, the registry's error for
None, geglu's dim error, channels_last (issue 21, point 4)."""

import math

import numpy as np
import pytest
import torch

import gelus
import gelus.functional as G
from oracles import exact, exact_slope, swish_slope, tanh_slope
from oracles import xielu as xielu_oracle


def every_finite(dtype, bound):
    """Every finite value of a 16-bit float type with |x| <= bound."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return bits[torch.isfinite(bits) & (bits.abs() <= bound)]


@pytest.mark.parametrize(
    ("dtype", "bound"),
    # fp16 overflows at 65504: α_p·x² + β·x stays below it for x <= 250
    [(torch.bfloat16, 1e3), (torch.float16, 250.0)],
    ids=str,
)
def test_xielu_half_types_are_computed_in_float32_and_rounded_once(dtype, bound):
    x = every_finite(dtype, bound)
    y = G.xielu(x)
    assert y.dtype == dtype
    expected = xielu_oracle(x.double().numpy())
    error = np.abs(y.double().numpy() - expected)
    # one rounding of the float32 result: within one unit in the last place (2^-8 relative for
    # bf16, 2^-11 for fp16; bf16 in bf16 arithmetic was off by up to 100 %)
    # (and one spacing of the subnormals near zero)
    ulp = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    tiny = 2 * ulp * torch.finfo(dtype).smallest_normal
    assert (error <= ulp * np.abs(expected) + tiny).all()


def test_xielu_module_keeps_torch_promotion_of_its_float32_parameters():
    module = gelus.XIELU()
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    assert module(x).dtype == torch.float32  # [1]-shaped float32 parameters promote, as in torch
    assert G.xielu(x).dtype == torch.bfloat16  # Python-float parameters do not


# ------------------------------------------------------------------------------ jvp of vjp

MEMBERS_0DIM = {
    "gelu": (G.gelu, exact_slope),
    "gelu-accurate": (lambda t: G.gelu(t, accurate=True), exact_slope),
    "gelu-tanh": (lambda t: G.gelu(t, "tanh"), tanh_slope),
    "gelu-sigmoid": (lambda t: G.gelu(t, "sigmoid"), swish_slope(1.702)),
    "silu": (G.silu, swish_slope(1.0)),
    "swish": (lambda t: G.swish(t, 0.5), swish_slope(0.5)),
    "swish-tensor-beta": (lambda t: G.swish(t, torch.tensor(0.5)), swish_slope(0.5)),
    "generalized_gelu": (lambda t: G.generalized_gelu(t, 0.0, 1.0), exact_slope),
    "generalized_gelu-tensor": (
        lambda t: G.generalized_gelu(t, torch.zeros(()), torch.ones(())),
        exact_slope,
    ),
    "bias_gelu": (lambda t: G.bias_gelu(t, torch.zeros(())), exact_slope),
    "bias_gelu-tanh": (lambda t: G.bias_gelu(t, torch.zeros(()), "tanh"), tanh_slope),
    "geglu": (lambda t: G.geglu(torch.stack([torch.ones_like(t), t])).squeeze(0), exact_slope),
}


@pytest.mark.parametrize("name", MEMBERS_0DIM)
def test_forward_over_reverse_keeps_float32_for_a_0dim_input(name):
    """jvp of vjp (op_db's test_jvpvjp): a float32 tangent, as torch's F.gelu gives, equal to
    the second derivative (central difference of the float64 slope oracle)."""
    member, slope = MEMBERS_0DIM[name]
    for value in (-1.3, 0.4, 2.2):
        x = torch.tensor(value)

        def gradient(t):
            y, pull = torch.func.vjp(member, t)
            return pull(torch.ones_like(y))[0]

        primal, tangent = torch.func.jvp(gradient, (x,), (torch.ones(()),))
        assert primal.dtype == tangent.dtype == torch.float32, name
        h = 1e-5
        second = (slope(np.float64(value) + h) - slope(np.float64(value) - h)) / (2 * h)
        assert tangent.item() == pytest.approx(second, rel=1e-4, abs=1e-6), name
        assert primal.item() == pytest.approx(slope(np.float64(value)), rel=1e-5), name


# ------------------------------------------------------------------------------ registry, dims


def test_get_activation_none_is_a_key_error_listing_the_names():
    """Hugging Face's get_activation(None) raises KeyError; its test_get_activation expects it."""
    with pytest.raises(KeyError, match=r"unknown activation None\. Valid names: .*gelu.*silu"):
        gelus.get_activation(None)
    with pytest.raises(ValueError):  # UnknownActivationError is both, as for an unknown name
        gelus.get_activation(None)


@pytest.mark.parametrize(("shape", "dim"), [((4, 6), 5), ((4, 6), -3), ((2, 2, 4), 3)])
def test_geglu_dim_out_of_range_is_torch_index_error(shape, dim):
    x = torch.randn(shape)
    with pytest.raises(IndexError) as ours:
        G.geglu(x, dim)
    with pytest.raises(IndexError) as theirs:
        torch.nn.functional.glu(x, dim)
    assert str(ours.value) == str(theirs.value)
    assert str(ours.value).startswith("Dimension out of range (expected to be in range of [")


# ------------------------------------------------------------------------------ channels_last

CHANNELS_LAST = torch.channels_last


def channels_last_input(channels=8):
    x = torch.randn(2, channels, 3, 5, generator=torch.Generator().manual_seed(0))
    return x.to(memory_format=CHANNELS_LAST).requires_grad_()


def test_stochastic_gelu_training_keeps_channels_last():
    x = channels_last_input()
    y = G.stochastic_gelu(x, True, torch.Generator().manual_seed(1))
    assert y.is_contiguous(memory_format=CHANNELS_LAST)
    (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert grad.is_contiguous(memory_format=CHANNELS_LAST)
    # still x·m with ∂/∂x = m, m in {0, 1}
    mask = grad.detach()
    assert set(mask.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(y.detach(), x.detach() * mask, rtol=0, atol=0)


def test_stochastic_gelu_mask_of_a_contiguous_input_is_unchanged():
    """The mask is drawn in x's memory order: for a contiguous x, as torch.rand draws it."""
    x = torch.randn(64, 32)
    y = G.stochastic_gelu(x, True, torch.Generator().manual_seed(5))
    uniform = torch.rand(x.shape, generator=torch.Generator().manual_seed(5))
    phi = 0.5 * torch.special.erfc(-x.double() / math.sqrt(2))
    expected = torch.where(uniform.double() < phi, x, 0.0)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dim", [1, -3])
def test_geglu_gradient_keeps_channels_last(dim):
    x = channels_last_input()
    y = G.geglu(x, dim)
    assert y.is_contiguous(memory_format=CHANNELS_LAST)
    grad_y = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
    (grad,) = torch.autograd.grad(y, x, grad_y)
    assert grad.is_contiguous(memory_format=CHANNELS_LAST)
    # the values: [grad·gelu(b), grad·a·gelu'(b)] against the float64 oracles
    a, b = x.detach().double().chunk(2, dim=dim)
    gelu_b = torch.from_numpy(exact(b.numpy()))
    slope_b = torch.from_numpy(exact_slope(b.numpy()))
    expected = torch.cat([grad_y.double() * gelu_b, grad_y.double() * a * slope_b], dim=dim)
    torch.testing.assert_close(grad.double(), expected, rtol=1e-5, atol=1e-6)
