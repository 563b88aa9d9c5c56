"""SwiGLU a·silu(b) and ReGLU a·relu(b) (gelus/_glu.py): GEGLU's convention (the second half is
the gate, on any dim), against float64 oracles (tests/oracles.py)."""

import math

import numpy as np
import pytest
import torch

import gelus
import gelus.functional as G
from oracles import relu, relu_slope, swish, swish_slope

MEMBERS = {
    "swiglu": (G.swiglu, gelus.SwiGLU, swish(1.0), swish_slope(1.0)),
    "reglu": (G.reglu, gelus.ReGLU, relu, relu_slope),
}


def halves(x: np.ndarray, dim: int):
    return np.split(x, 2, axis=dim)


def sample(shape, dtype=torch.float64, seed=0):
    x = 3 * torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return (x + 0.05 * torch.sign(x)).to(dtype)  # away from relu's kink


@pytest.mark.parametrize("name", MEMBERS)
@pytest.mark.parametrize("dim", [-1, 0, 1, -3])
def test_value_and_gradient_against_float64_oracles(name, dim):
    function, _, gate, slope = MEMBERS[name]
    x = sample((4, 6, 2)).requires_grad_()
    y = function(x, dim)
    a, b = halves(x.detach().numpy(), dim)
    np.testing.assert_allclose(y.detach().numpy(), a * gate(b), rtol=1e-13, atol=1e-300)
    grad_y = sample(y.shape, seed=1)
    (grad,) = torch.autograd.grad(y, x, grad_y)
    g = grad_y.numpy()
    expected = np.concatenate([g * gate(b), g * a * slope(b)], axis=dim)
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("name", MEMBERS)
def test_gradcheck_double_backward_and_forward_ad(name):
    function = MEMBERS[name][0]
    x = sample((3, 8)).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: function(t, 1), (x,), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(lambda t: function(t, 1), (x,))
    assert torch.autograd.gradcheck(
        lambda t: function(t, 0), (sample((4, 3)).requires_grad_(),), check_batched_grad=True
    )


@pytest.mark.parametrize("name", MEMBERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_lower_precision_is_computed_in_float32_and_rounded_once(name, dtype):
    function, _, gate, _ = MEMBERS[name]
    x = sample((64, 256), dtype)
    y = function(x)
    assert y.dtype == dtype
    a, b = halves(x.double().numpy(), -1)
    expected = torch.from_numpy(a * gate(b)).to(dtype)  # the float64 value, rounded once
    # half types, computed in float32 then rounded: at most one unit in the last place from the
    # rounding of the float64 value, almost always identical; float32: a few roundings
    ulp = torch.finfo(dtype).eps * (4 if dtype == torch.float32 else 1)
    error = (y.double() - expected.double()).abs()
    assert (error <= ulp * expected.double().abs() + torch.finfo(dtype).tiny).all()
    if dtype != torch.float32:
        assert (y == expected).double().mean() > 0.99


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_gate_edge_cases_with_a_unit_value_half(dtype):
    """[1, b] split on dim 0: silu's and relu's edges of the gate, finite gradients."""
    inf, big = math.inf, torch.finfo(dtype).max
    b = torch.tensor([inf, -inf, math.nan, -0.0, big, -big, 1.0, -1.0], dtype=dtype)
    x = torch.stack([torch.ones_like(b), b]).requires_grad_()
    for name in MEMBERS:
        y = MEMBERS[name][0](x, 0).squeeze(0)
        (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
        slope = grad[1]
        assert y[0] == inf and slope[0] == 1, name
        assert y[1] == 0 and slope[1] == 0, name
        assert y[2].isnan() and slope[2].isnan(), name
        assert y[3] == 0, name
        assert y[4] == big and slope[4] == 1, name
        assert y[5] == 0 and slope[5] == 0, name
        assert torch.isfinite(slope[[0, 1, 3, 4, 5, 6, 7]]).all(), name
        # d/da a·g(b) = g(b)
        assert torch.equal(grad[0][[0, 4]], b[[0, 4]])
    assert G.swiglu(x, 0)[0, 3].signbit()  # silu(−0) = −0
    assert G.swiglu(x, 0)[0, 7].item() == pytest.approx(swish(1.0)(-1.0), rel=1e-2)


@pytest.mark.parametrize("name", MEMBERS)
def test_refusals(name):
    function = MEMBERS[name][0]
    with pytest.raises(
        TypeError, match=rf"^{name} expects a floating-point tensor, got torch.int64"
    ):
        function(torch.arange(6).reshape(2, 3))
    with pytest.raises(TypeError, match=rf"gelus::{name} expects a floating-point tensor"):
        getattr(torch.ops.gelus, name)(torch.ones(2, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match=rf"{name} splits dim=-1 .* odd \(7\)"):
        function(torch.randn(3, 7))
    with pytest.raises(ValueError, match="scalar"):
        function(torch.tensor(1.0))
    with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\], but got 5"):
        function(torch.randn(4, 6), 5)


@pytest.mark.parametrize("name", MEMBERS)
def test_operator_passes_opcheck_and_saves_only_its_input(name):
    op = getattr(torch.ops.gelus, name)
    for args in [(sample((3, 4)).requires_grad_(), -1), (sample((4, 3, 2)), 0)]:
        torch.library.opcheck(op, args)
    torch.library.opcheck(
        getattr(torch.ops.gelus, f"{name}_backward"), (sample((3, 2)), sample((3, 4)), -1)
    )
    x = torch.randn(8, 16, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = MEMBERS[name][0](x)
    y.sum().backward()
    assert len(saved) == 1 and saved[0] is x


@pytest.mark.parametrize("name", MEMBERS)
def test_torch_func_vmap_jacfwd_jacrev_and_hessian(name):
    function, _, gate, slope = MEMBERS[name]
    x = sample((5, 6))
    batched = torch.func.vmap(function)(x)
    torch.testing.assert_close(batched, function(x), rtol=0, atol=0)
    row = x[0]
    forward, reverse = torch.func.jacfwd(function)(row), torch.func.jacrev(function)(row)
    a, b = row[:3].numpy(), row[3:].numpy()
    expected = np.concatenate([np.diag(gate(b)), np.diag(a * slope(b))], axis=1)
    np.testing.assert_allclose(forward.numpy(), expected, rtol=1e-13)
    np.testing.assert_allclose(reverse.numpy(), expected, rtol=1e-13)
    assert torch.func.hessian(lambda t: function(t).sum())(row).shape == (6, 6)


@pytest.mark.parametrize("name", MEMBERS)
def test_compiled_and_exported_match_eager(name):
    function, module = MEMBERS[name][:2]
    x = sample((4, 8), torch.float32).requires_grad_()
    compiled = torch.compile(function, backend="inductor", fullgraph=True)
    y = compiled(x)
    torch.testing.assert_close(y, function(x), rtol=1e-6, atol=1e-7)
    (grad,) = torch.autograd.grad(y.sum(), x)
    (eager,) = torch.autograd.grad(function(x).sum(), x)
    torch.testing.assert_close(grad, eager, rtol=1e-6, atol=1e-7)
    program = torch.export.export(module(), (x.detach(),))
    assert f"gelus.{name}" in str(program.graph)
    torch.testing.assert_close(program.module()(x.detach()), function(x.detach()))


@pytest.mark.parametrize("name", MEMBERS)
def test_modules_registry_and_gain(name):
    module = MEMBERS[name][1]
    act = gelus.get_activation(name, dim=1)
    assert type(act) is module and act.dim == 1 and repr(act) == f"{module.__name__}(dim=1)"
    x = sample((2, 8, 3))
    torch.testing.assert_close(act(x), MEMBERS[name][0](x, 1), rtol=0, atol=0)
    assert name in gelus.list_activations() and module.__name__ in gelus.__all__
    assert name in G.__all__
    # E[(a·g(b))²] = E[g(b)²] for independent standard normal a, b: the gate's own gain
    expected = {"swiglu": gelus.init.calculate_gain("silu"), "reglu": math.sqrt(2.0)}[name]
    assert gelus.init.calculate_gain(name) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("name", MEMBERS)
def test_gradient_keeps_channels_last(name):
    x = sample((2, 8, 3, 5), torch.float32).to(memory_format=torch.channels_last)
    x.requires_grad_()
    y = MEMBERS[name][0](x, 1)
    (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert grad.is_contiguous(memory_format=torch.channels_last)
