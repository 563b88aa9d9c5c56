"""GELU's forms (gelus/_gelu.py, _gelu_exact.py, _gelu_tanh.py): what the shared contract tests
do not cover. Oracles: float64 formulas in tests/conftest.py."""

import math

import numpy as np
import pytest
import torch

import gelus
import gelus.functional as G
from gelus import _common, _gelu, _gelu_exact
from oracles import exact, swish, tanh_form, tanh_slope

INF = math.inf


def value_and_grad(fn, x):
    x = x.detach().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.detach(), g


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_tanh_form_gradient_is_finite_for_huge_inputs(dtype):
    # torch's tanh-form backward forms x³ and returns nan beyond |x| ~ 1.8e19 in fp32.
    x = torch.tensor([1.8e19, 1e20, 1e30, -1.8e19, -1e20, -1e30, 1e12, -1e12], dtype=dtype)
    y, g = value_and_grad(lambda t: G.gelu(t, "tanh"), x)
    assert torch.equal(y[:3], x[:3]) and (y[3:6] == 0).all()
    assert torch.equal(g, torch.tensor([1.0, 1, 1, 0, 0, 0, 1, 0], dtype=dtype))


@pytest.mark.parametrize("size", [2**18 + 1, 3 * 2**18 - 7], ids=str)
def test_tanh_backward_of_a_large_input_runs_in_blocks_and_keeps_the_oracles_values(size):
    # Beyond _BLOCK elements the backward works block by block (small temporaries): every block,
    # the short last one included, must hold what the one-pass formula gives, and grad times the
    # float64 slope (absolute error: the slope is O(1) and cancels near its root); out= too.
    from gelus import _gelu_tanh

    assert size > _gelu_tanh._BLOCK
    x = torch.linspace(-12, 12, size)
    grad = torch.linspace(0.5, 1.5, size)
    expected = grad.double().numpy() * tanh_slope(x.double().numpy())
    one_pass = _gelu_tanh._slope_times(grad, x, None)
    for out in (None, "fresh", "grad", "x"):  # bias-GELU writes into x, GEGLU into grad
        g, v = grad.clone(), x.clone()
        buffer = {None: None, "fresh": torch.empty(size), "grad": g, "x": v}[out]
        result = _gelu_tanh.backward(g, v, out=buffer)
        assert buffer is None or result is buffer
        assert torch.equal(result, one_pass), out
        np.testing.assert_allclose(result.double().numpy(), expected, rtol=5e-6, atol=2e-7)


def test_backward_kernels_agree_with_the_composed_slopes_and_autograd_of_the_formula():
    x = torch.linspace(-8, 8, 101, dtype=torch.float64)
    grad = torch.linspace(0.5, 1.5, 101, dtype=torch.float64)
    for approximate in ("none", "tanh", "sigmoid"):
        kernel = _gelu.kernel_backward(grad, x, approximate)
        torch.testing.assert_close(kernel, grad * _gelu.slope(x, approximate))
    # The exact slope is the derivative of the value (autograd of an explicit float64 formula).
    xr = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad((xr * 0.5 * torch.special.erfc(-xr / math.sqrt(2))).sum(), xr)
    torch.testing.assert_close(_gelu_exact.slope(x), expected)
    torch.testing.assert_close(_gelu_exact.slope(x.float(), accurate=True).double(), expected)


def test_is_tame_detects_every_kind_of_untame_element():
    x = torch.randn(4096)
    assert _common.is_tame(x, 1e3)
    for bad in (INF, -INF, math.nan, 2e3, -2e3):
        for position in (0, 1234, 4095):
            y = x.clone()
            y[position] = bad
            assert not _common.is_tame(y, 1e3), (bad, position)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_has_negative_zero_finds_one_negative_zero_and_nothing_else(dtype):
    x = torch.randn(4099, dtype=dtype)
    assert not _common.has_negative_zero(x)
    tiny = torch.finfo(dtype).smallest_normal * 2.0**-20  # a subnormal: bits just above −0's
    for value in (0.0, -tiny, -INF, math.nan, -math.nan):
        y = x.clone()
        y[7] = value
        assert not _common.has_negative_zero(y), value
    for position in (0, 2048, 4098):
        y = x.clone()
        y[position] = -0.0
        assert _common.has_negative_zero(y), position
        assert _common.has_negative_zero(y[position:].view(1, -1).t())  # strided view
    assert not _common.has_negative_zero(x[:0])


@pytest.mark.parametrize("out", [False, True], ids=["alloc", "out"])
def test_exact_forward_keeps_a_lone_negative_zero_in_a_long_input(out):
    # The sign pass runs only when the input holds −0 (oneDNN's AVX2 kernel returns +0 there);
    # otherwise the result is torch's kernel's, bit for bit.
    x = torch.randn(2**16)
    y = torch.empty_like(x) if out else None
    assert torch.equal(_gelu_exact.forward(x, out=y), torch.nn.functional.gelu(x))
    x[12345] = -0.0
    result = _gelu_exact.forward(x, out=y)
    assert result[12345] == 0 and torch.equal(result.signbit(), x.signbit())
    torch.testing.assert_close(result, torch.nn.functional.gelu(x), rtol=0, atol=0)


@pytest.mark.parametrize("tame", [True, False, None])
@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_the_tame_hint_only_selects_a_path(approximate, tame):
    # A true hint takes torch's fused kernel, a false one the patched formula: the same values.
    x = torch.linspace(-12, 12, 4001)
    reference = _gelu.kernel_forward(x, approximate)
    y = _gelu.kernel_forward(x, approximate, False, tame)
    torch.testing.assert_close(y, reference, rtol=2e-6, atol=1.5e-6)
    g = _gelu.kernel_backward(torch.ones_like(x), x, approximate, False, tame)
    torch.testing.assert_close(g, _gelu.kernel_backward(torch.ones_like(x), x, approximate))


@pytest.mark.parametrize(
    ("approximate", "oracle"), [("none", exact), ("tanh", tanh_form), ("sigmoid", swish(1.702))]
)
def test_the_operator_and_the_functional_agree_with_the_formula(approximate, oracle):
    x = torch.linspace(-9, 9, 721, dtype=torch.float64)
    expected = oracle(x.numpy())
    # (the default exact form is torch's 1 + erf(x/√2), which cancels below −3: absolute error)
    for y in (G.gelu(x, approximate), torch.ops.gelus.gelu(x, approximate)):
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-13, atol=1e-15)


def test_accurate_path_keeps_the_negative_tail_where_the_default_flushes():
    x = torch.tensor([-9.5, -7.0, -4.0])
    truth = torch.from_numpy(exact(x.double().numpy()))
    assert (G.gelu(x) == 0).sum() >= 2  # torch's kernel: −0 below −5.49
    y = G.gelu(x, accurate=True)
    assert (y < 0).all()
    torch.testing.assert_close(y.double(), truth, rtol=2**-23, atol=0.0)


@pytest.mark.parametrize(
    ("approximate", "bound", "lower"),
    [("tanh", 4.74e-4, 4.72e-4), ("sigmoid", 2.04e-2, 2.02e-2)],
)
def test_approximation_error_against_exact_gelu(approximate, bound, lower):
    # docs/NUMERICS.md: max |form − exact| on [−10, 10] is 4.73e-4 (tanh) and 2.03e-2 (sigmoid).
    x = torch.linspace(-10, 10, 400_001, dtype=torch.float64)
    error = (G.gelu(x, approximate) - torch.from_numpy(exact(x.numpy()))).abs().max().item()
    assert lower < error < bound


def test_docstring_examples():
    torch.testing.assert_close(
        G.gelu(torch.tensor([-1.0, 0.0, 1.0])),
        torch.tensor([-0.1587, 0.0, 0.8413]),
        atol=1e-4,
        rtol=0,
    )
    assert G.gelu(torch.tensor([-10.0]), accurate=True).item() == pytest.approx(
        -7.6199e-23, rel=1e-4
    )
    assert gelus.GELU("tanh")(torch.randn(2, 3)).shape == (2, 3)
