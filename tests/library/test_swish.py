"""Swish and SiLU (gelus/_swish.py): negative and zero β, a tensor β and its gradient."""

import math

import numpy as np
import pytest
import torch
from scipy import special

import gelus
import gelus.functional as G
from test_contract import check_specials, specials

INF = math.inf


def value_and_grad(fn, x):
    x = x.detach().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.detach(), g


def test_swish_with_negative_and_zero_beta():
    x = torch.tensor([INF, -INF, 2.0, -0.0], dtype=torch.float64)
    y, g = value_and_grad(lambda t: G.swish(t, -1.5), x)
    assert y[0] == 0 and y[1] == -INF and g[0] == 0 and g[1] == 1
    assert y[2].item() == pytest.approx(2.0 * special.expit(-3.0), rel=1e-15)
    y, g = value_and_grad(lambda t: G.swish(t, 0.0), x)
    assert torch.equal(y, x / 2) and (g == 0.5).all()


def test_limit_at_minus_inf_is_a_zero_of_x_sign_on_every_route():
    x = torch.tensor([-INF, INF])
    assert G.silu(x)[0].signbit() and not G.silu(x)[1].signbit()
    assert G.swish(x, -2.0)[1] == 0 and not G.swish(x, -2.0)[1].signbit()


@pytest.mark.parametrize("beta_shape", [(), (5,), (3, 1)])
def test_tensor_beta_gradcheck_and_reduction(beta_shape):
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, dtype=torch.float64, generator=generator).mul(3).requires_grad_()
    beta = (0.5 + torch.rand(beta_shape, dtype=torch.float64, generator=generator)).requires_grad_()
    assert torch.autograd.gradcheck(G.swish, (x, beta))
    assert torch.autograd.gradgradcheck(G.swish, (x, beta))
    y = G.swish(x, beta)
    xd, bd = x.detach().numpy(), np.broadcast_to(beta.detach().numpy(), (3, 5))
    np.testing.assert_allclose(y.detach().numpy(), xd * special.expit(bd * xd), rtol=1e-14)
    grad = torch.randn(3, 5, dtype=torch.float64, generator=generator)
    _, gb = torch.autograd.grad(y, (x, beta), grad)
    s = special.expit(bd * xd)
    expected = grad.numpy() * xd * xd * s * (1 - s)  # d/dβ x·σ(βx), reduced to β's shape
    reduce = {(): {"axis": None}, (5,): {"axis": 0}, (3, 1): {"axis": 1, "keepdims": True}}
    expected = expected.sum(**reduce[beta_shape])
    np.testing.assert_allclose(gb.numpy(), expected, rtol=1e-12)


def test_tensor_beta_partials_fp32_do_not_cancel_for_large_beta_x():
    """∂/∂β = x²·σ'(βx) and ∂/∂x = σ + βx·σ' in fp32 against float64, per element (β of x's
    shape): σ' computed as σ(z)·σ(−z), never s·(1 − s), which is 0 once s rounds to 1 (βx ≳ 17)
    and off by ~2^-24/σ'(z) relative before that."""
    from gelus import _swish

    rng = np.random.default_rng(41)
    z = np.concatenate([rng.uniform(-60, 60, 4000), np.linspace(8, 80, 2000)])
    beta32 = rng.uniform(0.5, 1.5, z.size).astype(np.float32)
    x32 = (z / beta32).astype(np.float32)
    x, beta = torch.from_numpy(x32), torch.from_numpy(beta32)
    gx, gb = _swish.tensor_composed_backward(torch.ones_like(x), x, beta)
    x64, b64 = x32.astype(np.float64), beta32.astype(np.float64)
    z64 = b64 * x64
    ds = special.expit(z64) * special.expit(-z64)
    expected_b, expected_x = x64 * x64 * ds, special.expit(z64) + z64 * ds
    tiny = np.finfo(np.float32).tiny
    normal = expected_b > 1e3 * tiny  # not in (or next to) the subnormal range
    rel = np.abs(gb.double().numpy() - expected_b)[normal] / expected_b[normal]
    # fl(βx) is off by up to |z|·2^-24 relative and σ'(z)'s log-slope is |1 − 2σ| ≤ 1: allowed
    # (6 + |z|)·2^-24 (measured max ratio 0.89); s·(1 − s) is 100% off at βx ≥ 17
    assert (rel / (6 + np.abs(z64[normal]))).max() <= 2.0**-24
    assert np.abs(gx.double().numpy() - expected_x).max() <= 4e-7


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_tensor_beta_edge_cases(dtype):
    values = specials(dtype)
    x = values.clone().requires_grad_()
    beta = torch.tensor(1.5, requires_grad=True)
    y = G.swish(x, beta)
    gx, gb = torch.autograd.grad(y, (x, beta), torch.ones_like(y))
    assert y.dtype == dtype and gx.dtype == dtype and gb.dtype == torch.float32
    check_specials("swish tensor beta", y.detach(), gx, torch.finfo(dtype).max)
    assert gb.isnan()  # the nan input propagates into dL/dβ ...
    finite = [0, 1, 3, 4, 5, 6, 7]
    _, gb = torch.autograd.grad(G.swish(x[finite], beta).sum(), (x, beta))
    assert torch.isfinite(gb)  # ... and ±inf, ±FLT_MAX add 0 to it, not inf·0
    y = G.swish(x, -beta)  # a negative β mirrors the limits
    assert y[0] == 0 and y[1] == -math.inf


def test_learnable_swish_module_uses_the_tensor_beta_path_and_saves_x_and_beta():
    act = gelus.Swish(beta=1.0, learnable=True)
    x = torch.tensor([-INF, INF, -3.0, 2.0], requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = act(x)
    y.sum().backward()
    assert y[0] == 0 and y[1] == INF and x.grad[0] == 0 and x.grad[1] == 1
    s = special.expit(np.array([-3.0, 2.0]))
    expected = (np.array([9.0, 4.0]) * s * (1 - s)).sum()
    assert act.beta.grad.item() == pytest.approx(expected, rel=1e-6)
    assert len(saved) == 2 and saved[0] is x and saved[1] is act.beta


def test_silu_inplace_writes_into_the_input_like_torch():
    a = torch.randn(6, requires_grad=True)
    x = a * 2
    y = G.silu(x, inplace=True)
    assert y is x
    y.sum().backward()
    b = a.detach().clone().requires_grad_()
    torch.nn.functional.silu(b * 2).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)
    with torch.no_grad():
        x = torch.randn(6)
        expected = torch.nn.functional.silu(x)
        assert G.silu(x, inplace=True) is x and torch.allclose(x, expected)
