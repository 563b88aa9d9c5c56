"""Generalized GELU x·Φ((x − μ)/σ) (gelus/_generalized.py) and its module."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import special

import gelus
from gelus._generalized import backward as generalized_gelu_backward
from gelus._generalized import forward as generalized_gelu_forward
from gelus.functional import generalized_gelu
from oracles import generalized as oracle
from oracles import generalized_grads as oracle_grads

F64 = torch.float64


def leaf(values, dtype=F64):
    return torch.as_tensor(values, dtype=dtype).clone().requires_grad_()


@pytest.mark.parametrize(
    "mu_shape, sigma_shape",
    [((), ()), ((5,), (5,)), ((), (5,)), ((3, 1), (3, 1))],
    ids=["scalar", "per-channel-last", "mixed", "channels-first"],
)
def test_gradcheck_and_gradgradcheck(mu_shape, sigma_shape):
    g = torch.Generator().manual_seed(0)
    x = leaf(torch.randn(2, 3, 5, generator=g, dtype=F64) * 2)
    mu = leaf(torch.randn(mu_shape, generator=g, dtype=F64) * 0.5)
    sigma = leaf(torch.rand(sigma_shape, generator=g, dtype=F64) + 0.5)
    assert torch.autograd.gradcheck(generalized_gelu, (x, mu, sigma))
    assert torch.autograd.gradgradcheck(generalized_gelu, (x, mu, sigma))


def test_saves_only_x_mu_sigma():
    x = leaf(torch.randn(64, 16), torch.float32)
    mu, sigma = leaf(torch.zeros(16), torch.float32), leaf(torch.ones(16), torch.float32)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = generalized_gelu(x, mu, sigma)
    assert len(saved) == 3
    assert {t.data_ptr() for t in saved} == {x.data_ptr(), mu.data_ptr(), sigma.data_ptr()}
    y.sum().backward()
    assert x.grad is not None and mu.grad.shape == (16,) and sigma.grad.shape == (16,)


def test_float64_matches_scipy_oracle_values_and_gradients():
    x = np.concatenate([np.linspace(-14, 14, 1001), [-37.5, -20.0, 25.0]])
    for mu, sigma in [(0.0, 1.0), (0.7, 0.3), (-1.5, 2.5)]:
        xt, mut, sigt = leaf(x), leaf(mu), leaf(sigma)
        y = generalized_gelu(xt, mut, sigt)
        torch.testing.assert_close(
            y.detach().numpy(), oracle(x, mu, sigma), rtol=1e-12, atol=1e-300
        )
        grad_x, grad_mu, grad_sigma = oracle_grads(x, mu, sigma)
        gx, gmu, gsig = torch.autograd.grad(y.sum(), (xt, mut, sigt))
        torch.testing.assert_close(gx.numpy(), grad_x, rtol=1e-11, atol=1e-300)
        torch.testing.assert_close(gmu.item(), grad_mu.sum(), rtol=1e-11, atol=1e-12)
        torch.testing.assert_close(gsig.item(), grad_sigma.sum(), rtol=1e-11, atol=1e-12)


def test_named_backward_reduces_to_parameter_shapes():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 6, generator=g, dtype=F64)
    mu, sigma = (
        torch.randn(3, 1, generator=g, dtype=F64),
        torch.rand(6, generator=g, dtype=F64) + 0.5,
    )
    grad_out = torch.randn(4, 3, 6, generator=g, dtype=F64)
    gx, gmu, gsig = generalized_gelu_backward(grad_out, x, mu, sigma)
    dx, dmu, dsig = (torch.from_numpy(d) for d in oracle_grads(x, mu, sigma))
    torch.testing.assert_close(gx, grad_out * dx)
    torch.testing.assert_close(gmu, (grad_out * dmu).sum(dim=(0, 2)).reshape(3, 1))
    torch.testing.assert_close(gsig, (grad_out * dsig).sum(dim=(0, 1)))
    none = generalized_gelu_backward(grad_out, x, mu, sigma, (False, True, False))
    assert none[0] is None and none[2] is None and none[1].shape == (3, 1)


def test_float32_negative_tail_is_accurate():
    # where 1 + erf(z/√2) cancels (torch's F.gelu returns exactly -0.0 below x ≈ -5.5)
    x = torch.linspace(-13, -3, 20001, dtype=torch.float32)
    y = generalized_gelu(x, 0.0, 1.0).double().numpy()
    truth = oracle(x.double().numpy(), 0.0, 1.0)
    relative = np.abs(y / truth - 1)
    assert relative.max() < 200 * np.finfo(np.float32).eps  # docs/NUMERICS.md: erfc form ≤ 82 ulp


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_computed_in_float32_and_rounded_once(dtype):
    x = torch.linspace(-6, 6, 4001).to(dtype)
    mu, sigma = torch.tensor(0.25), torch.tensor(0.8)
    y = generalized_gelu(x, mu, sigma)
    assert y.dtype == dtype
    truth = torch.from_numpy(oracle(x.double().numpy(), 0.25, 0.8))
    # one rounding of the (nearly exact) float32 result: within half an ulp, plus a little
    ulp = torch.finfo(dtype).eps * truth.abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((y.double() - truth).abs() <= 0.5 * ulp * 1.01 + 1e-30).all()


def test_edge_cases_and_finite_gradients():
    x = leaf([math.inf, -math.inf, -0.0, 1e30, -1e30], torch.float32)
    mu, sigma = leaf(0.3, torch.float32), leaf(0.7, torch.float32)
    y = generalized_gelu(x, mu, sigma)
    assert y.tolist() == [math.inf, 0.0, 0.0, x[3].item(), 0.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, pytest.approx(special.ndtr(-0.3 / 0.7)), 1.0, 0.0]
    assert torch.isfinite(mu.grad) and torch.isfinite(sigma.grad)
    assert generalized_gelu(torch.tensor([math.nan]), mu, sigma).isnan().all()


def test_small_sigma_approaches_relu():
    # |f − relu| = σ·u·Φ(−u) with u = |x|/σ, whose maximum over u is GELU's depth 0.169971…
    x = torch.linspace(-3, 3, 600001, dtype=F64)
    relu = x.clamp_min(0)
    gaps = []
    for sigma in [1.0, 0.3, 0.1, 0.03, 0.01]:
        gap = (generalized_gelu(x, 0.0, sigma) - relu).abs().max().item()
        assert gap <= 0.17 * sigma
        assert gap == pytest.approx(0.169971 * sigma, rel=1e-3)
        gaps.append(gap)
    assert all(a > b for a, b in itertools.pairwise(gaps))


def test_bad_arguments():
    with pytest.raises(ValueError, match="sigma > 0"):
        generalized_gelu(torch.ones(3), 0.0, 0.0)
    with pytest.raises(TypeError, match="floating-point"):
        generalized_gelu(torch.ones(3, dtype=torch.int64))


def test_forward_function_alone():
    x = torch.tensor([-2.0, 0.0, 2.0], dtype=F64)
    y = generalized_gelu_forward(x, torch.tensor(0.0, dtype=F64), torch.tensor(1.0, dtype=F64))
    torch.testing.assert_close(y.numpy(), oracle(x.numpy(), 0.0, 1.0))


# --- the module -------------------------------------------------------------------------------


def test_module_per_channel_channels_first_matches_function():
    act = gelus.GeneralizedGELU(num_channels=3, mu=0.5, sigma=2.0, channel_dim=1)
    x = torch.randn(2, 3, 4, 4)
    with torch.no_grad():
        act.mu.copy_(torch.tensor([0.0, 0.5, -1.0]))
    expected = generalized_gelu(x, act.mu.detach().reshape(3, 1, 1), torch.full((3, 1, 1), 2.0))
    torch.testing.assert_close(act(x), expected)
    assert act.sigma.shape == (3,) and torch.allclose(act.sigma, torch.tensor(2.0))
    with pytest.raises(ValueError, match="3 channels"):
        act(torch.randn(2, 5, 4, 4))


def test_module_training_moves_mu_and_sigma_and_sigma_stays_positive():
    torch.manual_seed(0)
    act = gelus.GeneralizedGELU(num_channels=4)
    x = torch.randn(256, 4) * 2
    target = torch.relu(x)  # pulls σ towards 0
    optimizer = torch.optim.Adam(act.parameters(), lr=0.2)
    mu0, sigma0 = act.mu.detach().clone(), act.sigma.detach().clone()
    for _ in range(25):
        optimizer.zero_grad()
        loss = (act(x) - target).pow(2).mean()
        loss.backward()
        optimizer.step()
    assert not torch.allclose(act.mu, mu0)
    assert (act.sigma < 0.5 * sigma0).all() and (act.sigma > 0).all()


def test_module_not_learnable_uses_buffers_and_validates():
    act = gelus.GeneralizedGELU(mu=0.1, sigma=0.5, learnable=False)
    assert list(act.parameters()) == [] and set(dict(act.named_buffers())) == {"mu", "log_sigma"}
    assert "mu=0.1" in repr(act) and "sigma=0.5" in repr(act)
    with pytest.raises(ValueError, match="sigma > 0"):
        gelus.GeneralizedGELU(sigma=-1.0)


def test_module_with_channels_refuses_a_0_dim_input_with_a_value_error():
    act = gelus.GeneralizedGELU(num_channels=3)
    with pytest.raises(ValueError, match="0-dim"):
        act(torch.tensor(1.0))
    assert gelus.GeneralizedGELU()(torch.tensor(1.0)).shape == ()  # scalar μ, σ: fine


def test_module_output_dtype_is_torch_promotion_of_input_and_parameters():
    x = torch.randn(2, 3, dtype=torch.bfloat16)
    assert gelus.GeneralizedGELU(num_channels=3)(x).dtype == torch.float32  # [C] params promote
    assert gelus.GeneralizedGELU()(x).dtype == torch.bfloat16  # 0-dim params do not


# ------------------------------------------------------------------------------ tensor σ <= 0
# Refused in eager on CPU; nan wherever it cannot be checked: never x·Φ(−x) nor the step.

X = torch.linspace(-3, 3, 13, dtype=F64).reshape(13, 1).expand(13, 4).contiguous()
MU = torch.zeros(4, dtype=F64)
SIGMA = torch.tensor([1.0, -1.0, 0.0, 0.5], dtype=F64)  # channels 1 and 2 are invalid


@pytest.mark.parametrize("sigma", [-1.0, 0.0, -0.0, math.nan, -math.inf])
def test_tensor_sigma_not_positive_is_refused_in_eager_on_cpu(sigma):
    for shape in [(), (4,)]:
        bad = torch.full(shape, sigma, dtype=F64)
        with pytest.raises(ValueError, match=r"sigma > 0.*elements <= 0 or nan"):
            generalized_gelu(X, MU, bad)
    with pytest.raises(ValueError, match="1 of 4 elements"):
        generalized_gelu(X, MU, torch.tensor([1.0, sigma, 2.0, 3.0], dtype=F64))
    module = gelus.GeneralizedGELU(num_channels=4).double()
    with torch.no_grad():
        module.log_sigma[2] = -1e4  # exp underflows: σ = 0
    with pytest.raises(ValueError, match="sigma > 0"):
        module(X)


def check_nan_in_invalid_channels(y, grads=()):
    """Channels 0 and 3 as the oracle; channels 1 (σ = −1) and 2 (σ = 0) all nan."""
    y = y.detach()
    assert y[:, 1:3].isnan().all()
    expected = oracle(X[:, [0, 3]].numpy(), 0.0, SIGMA[[0, 3]].numpy())
    np.testing.assert_allclose(y[:, [0, 3]].numpy(), expected, rtol=1e-12, atol=1e-300)
    for g in grads:
        assert g.reshape(-1, 4)[:, 1:3].isnan().all()
        assert g.reshape(-1, 4)[:, [0, 3]].isfinite().all()


def value_and_grads(fn):
    x, sigma = X.clone().requires_grad_(), SIGMA.clone().requires_grad_()
    y = fn(x, MU, sigma)
    return y, torch.autograd.grad(y.sum(), (x, sigma))


def test_tensor_sigma_not_positive_is_nan_under_compile():
    compiled = torch.compile(generalized_gelu, backend="aot_eager", fullgraph=True)
    check_nan_in_invalid_channels(*value_and_grads(compiled))


def test_tensor_sigma_not_positive_is_nan_under_vmap():
    rows = torch.func.vmap(lambda s: generalized_gelu(X[:, 0], MU[0], s))(SIGMA)
    check_nan_in_invalid_channels(rows.t())
    grads = torch.func.vmap(torch.func.grad(lambda s: generalized_gelu(X[:, 0], MU[0], s).sum()))(
        SIGMA
    )
    assert grads[1:3].isnan().all() and grads[[0, 3]].isfinite().all()


def test_tensor_sigma_not_positive_is_nan_in_export_and_in_the_operator():
    class Layer(torch.nn.Module):
        def forward(self, x, mu, sigma):
            return generalized_gelu(x, mu, sigma)

    program = torch.export.export(Layer(), (X, MU, torch.ones(4, dtype=F64)))
    check_nan_in_invalid_channels(program.module()(X, MU, SIGMA))
    check_nan_in_invalid_channels(*value_and_grads(torch.ops.gelus.generalized_gelu))


def test_tensor_sigma_not_positive_is_nan_in_the_onnx_formula():
    from gelus import _generalized
    from gelus._phi import normal_cdf_rational

    y = _generalized._value(X, MU, SIGMA, cdf=normal_cdf_rational)
    assert y[:, 1:3].isnan().all()
