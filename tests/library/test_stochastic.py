import math

import pytest
import torch
from scipy import special

import gelus
from gelus._stochastic import stochastic_gelu_mask
from gelus.functional import stochastic_gelu

POINTS = torch.tensor([-3.0, -1.5, -0.75, -0.2, 0.3, 1.0, 2.0, 3.5], dtype=torch.float64)
DRAWS = 100_000
Z = 5.0  # tolerance in standard errors: a seeded test, and no seed should ever fail it


def draws(seed: int, dtype=torch.float64) -> torch.Tensor:
    """[DRAWS, len(POINTS)] samples of x·m, one column per point."""
    g = torch.Generator().manual_seed(seed)
    x = POINTS.to(dtype).expand(DRAWS, -1).contiguous()
    return stochastic_gelu(x, training=True, generator=g).double()


def phi(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(special.ndtr(x.double().numpy()))


def test_mean_is_gelu_within_binomial_standard_error():
    samples = draws(seed=1)
    p = phi(POINTS)
    expected = POINTS * p
    standard_error = POINTS.abs() * torch.sqrt(p * (1 - p) / DRAWS)
    assert ((samples.mean(0) - expected).abs() <= Z * standard_error).all()


def test_variance_is_x2_p_q_within_standard_error():
    samples = draws(seed=2)
    p = phi(POINTS)
    pq = p * (1 - p)
    expected = POINTS**2 * pq
    # sample variance of x·m: Var(s²) ≈ x⁴·pq·(1 − 4pq)/N (fourth central moment of a Bernoulli)
    standard_error = POINTS**2 * torch.sqrt(pq * (1 - 4 * pq) / DRAWS)
    assert ((samples.var(0) - expected).abs() <= Z * standard_error + 1e-12).all()


def test_float32_mask_has_the_same_statistics():
    samples = draws(seed=3, dtype=torch.float32)
    p = phi(POINTS)
    standard_error = POINTS.abs() * torch.sqrt(p * (1 - p) / DRAWS)
    assert ((samples.mean(0) - POINTS * p).abs() <= Z * standard_error + 1e-6).all()


def test_generator_reproduces_the_mask():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    a = stochastic_gelu(x, generator=torch.Generator().manual_seed(7))
    b = stochastic_gelu(x, generator=torch.Generator().manual_seed(7))
    c = stochastic_gelu(x, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    mask = stochastic_gelu_mask(x, torch.Generator().manual_seed(7))
    assert mask.dtype == torch.bool and torch.equal(a, torch.where(mask, x, 0.0))


def test_mask_is_a_constant_for_autograd_and_is_all_that_is_saved():
    x = torch.randn(500, generator=torch.Generator().manual_seed(0), requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = stochastic_gelu(x, generator=torch.Generator().manual_seed(3))
    assert [(t.dtype, t.shape) for t in saved] == [(torch.bool, x.shape)]
    y.backward(torch.full_like(y, 2.0))
    mask = stochastic_gelu_mask(x.detach(), torch.Generator().manual_seed(3))
    assert torch.equal(x.grad, 2.0 * mask.float())


def test_edge_cases_in_training():
    x = torch.tensor([math.inf, -math.inf, math.nan] * 100)
    y = stochastic_gelu(x, training=True, generator=torch.Generator().manual_seed(0))
    assert (y[0::3] == math.inf).all() and (y[1::3] == 0).all() and y[2::3].isnan().all()


def test_eval_is_exact_gelu():
    x = torch.linspace(-8, 8, 1001, dtype=torch.float64)
    y = stochastic_gelu(x, training=False)
    assert torch.equal(y, gelus.functional.gelu(x, approximate="none"))  # delegates to gelu
    torch.testing.assert_close(y, x * phi(x), rtol=1e-12, atol=1e-15)
    edges = stochastic_gelu(torch.tensor([math.inf, -math.inf, math.nan]), training=False)
    assert edges[0] == math.inf and edges[1] == 0 and edges[2].isnan()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(dtype):
    x = torch.linspace(-4, 4, 101).to(dtype)
    y = stochastic_gelu(x, generator=torch.Generator().manual_seed(0))
    assert y.dtype == dtype and ((y == x) | (y == 0)).all()


def test_module_follows_training_flag():
    act = gelus.StochasticGELU(generator=torch.Generator().manual_seed(0))
    x = torch.linspace(-2, 2, 10_000)
    y = act(x)
    assert ((y == x) | (y == 0)).all() and (y == 0).any() and (y == x).any()
    act.eval()
    torch.testing.assert_close(act(x), gelus.functional.gelu(x))


def test_integer_input_is_rejected():
    with pytest.raises(TypeError, match="floating-point"):
        stochastic_gelu(torch.arange(3))


def test_training_mode_with_torch_func_gradcheck_and_forward_mode():
    from torch.func import grad, jvp, vmap

    x = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def fixed_mask(t):  # the same mask on every call: a function gradcheck can differentiate
        return stochastic_gelu(t, True, torch.Generator().manual_seed(0))

    xr = x.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        fixed_mask, (xr,), check_batched_grad=True, check_forward_ad=True
    )
    assert torch.autograd.gradgradcheck(fixed_mask, (xr,), check_batched_grad=True)
    mask = stochastic_gelu_mask(x, torch.Generator().manual_seed(0))
    _, tangent = jvp(fixed_mask, (x,), (torch.ones_like(x),))
    assert torch.equal(tangent, mask.double())  # ∂/∂x = m
    # vmap draws a mask per sample (randomness="different"), as dropout does
    y = vmap(lambda t: stochastic_gelu(t, True), randomness="different")(x)
    assert ((y == x) | (y == 0)).all()
    g = vmap(grad(lambda t: stochastic_gelu(t, True).sum()), randomness="different")(x)
    assert ((g == 0) | (g == 1)).all()
