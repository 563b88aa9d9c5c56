"""Contract of the pointwise members (NUMERICS.md): edge cases, gradients, memory, errors.

Oracles are float64 formulas written here with numpy/scipy, independent of the code under test.
"""

import math

import numpy as np
import pytest
import torch
from scipy import special

import gelus.functional as G
from gelus import _pointwise_kernels as K

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INF = math.inf

# name -> (function of x, float64 numpy oracle of the value, of the derivative)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _exact(x):
    return x * 0.5 * special.erfc(-x / math.sqrt(2))


def _exact_slope(x):
    return 0.5 * special.erfc(-x / math.sqrt(2)) + x * np.exp(-0.5 * x * x) / _SQRT_2PI


def _tanh_z(x):
    return 2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)


def _tanh(x):
    return x * special.expit(_tanh_z(x))  # = x/2·(1 + tanh(z/2)), without the cancellation


def _tanh_slope(x):
    s = special.expit(_tanh_z(x))
    return s + x * 2 * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2) * s * (1 - s)


def _swish(beta):
    return lambda x: x * special.expit(beta * x)


def _swish_slope(beta):
    def slope(x):
        s = special.expit(beta * x)
        return s + beta * x * s * (1 - s)

    return slope


def _bias_gelu(x, approximate="none"):
    return G.bias_gelu(x, torch.full((), -0.0, dtype=x.dtype), approximate)  # x + (−0) = x


def _geglu(x):
    value = torch.ones_like(x)
    return G.geglu(torch.stack([value, x]), dim=0).squeeze(0)


MEMBERS = {
    "gelu": (lambda x: G.gelu(x), _exact, _exact_slope),
    "gelu-accurate": (lambda x: G.gelu(x, accurate=True), _exact, _exact_slope),
    "gelu-tanh": (lambda x: G.gelu(x, "tanh"), _tanh, _tanh_slope),
    "gelu-sigmoid": (lambda x: G.gelu(x, "sigmoid"), _swish(1.702), _swish_slope(1.702)),
    "silu": (G.silu, _swish(1.0), _swish_slope(1.0)),
    "swish-0.5": (lambda x: G.swish(x, 0.5), _swish(0.5), _swish_slope(0.5)),
    "swish-3": (lambda x: G.swish(x, 3.0), _swish(3.0), _swish_slope(3.0)),
    "bias-gelu": (_bias_gelu, _exact, _exact_slope),
    "bias-gelu-tanh": (lambda x: _bias_gelu(x, "tanh"), _tanh, _tanh_slope),
    "geglu": (_geglu, _exact, _exact_slope),
}


def _layouts(values: torch.Tensor):
    """The same values as: many contiguous, strided x[::2], a transposed 2-D, one element each."""
    n = values.numel()
    filler = torch.linspace(-4, 4, 64 * n, dtype=values.dtype)
    many = filler.clone()
    many[::64] = values  # specials among ordinary values
    yield "contiguous", many, slice(None, None, 64)
    strided = torch.stack([many, many], dim=1).reshape(-1)[::2]
    yield "strided", strided, slice(None, None, 64)
    transposed = many.reshape(n, 64).t()
    yield "transposed", transposed, (0, slice(None))
    for i in range(n):
        yield f"single{i}", values[i : i + 1].clone(), slice(None)


def _specials(dtype):
    big = torch.finfo(dtype).max
    return torch.tensor([INF, -INF, math.nan, -0.0, big, -big, 1.0, -1.0], dtype=dtype)


def _run(fn, x):
    x = x.detach().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.detach(), g


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(MEMBERS))
def test_edge_cases(name, dtype):
    fn, value_oracle, slope_oracle = MEMBERS[name]
    specials = _specials(dtype)
    big = torch.finfo(dtype).max
    results = []
    for layout, x, where in _layouts(specials):
        y, g = _run(fn, x)
        if layout.startswith("single"):
            results.append((y, g))
            continue
        assert y.shape == x.shape and y.dtype == dtype, layout
        results_y, results_g = y[where], g[where]
        _check_specials(name, layout, specials, results_y, results_g, big)
        # The specials leave their neighbours alone.
        others = torch.ones_like(x, dtype=torch.bool)
        others[where] = False
        xo = x.detach()[others].double().numpy()
        tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 2e-2}
        np.testing.assert_allclose(
            y[others].double().numpy(), value_oracle(xo), rtol=tol[dtype], atol=tol[dtype]
        )
        np.testing.assert_allclose(
            g[others].double().numpy(), slope_oracle(xo), rtol=tol[dtype], atol=tol[dtype]
        )
    y1 = torch.cat([y for y, _ in results])
    g1 = torch.cat([g for _, g in results])
    _check_specials(name, "single", specials, y1, g1, big)


def _check_specials(name, layout, specials, y, g, big):
    where = f"{name} {layout}"
    assert y[0] == INF and g[0] == 1, where  # +inf -> +inf, slope 1
    assert y[1] == 0 and g[1] == 0, where  # −inf -> 0, slope 0
    assert y[2].isnan() and g[2].isnan(), where
    assert y[3] == 0 and y[3].signbit(), where  # −0 -> −0
    assert g[3] == 0.5, where
    assert y[4] == big and g[4] == 1, where  # FLT_MAX -> FLT_MAX
    assert y[5] == 0 and g[5] == 0, where
    assert torch.isfinite(g[[0, 1, 3, 4, 5, 6, 7]]).all(), where


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_tanh_form_gradient_is_finite_for_huge_inputs(dtype):
    # torch's tanh-form backward forms x³ and returns nan beyond |x| ~ 1.8e19 in fp32.
    x = torch.tensor([1.8e19, 1e20, 1e30, -1.8e19, -1e20, -1e30, 1e12, -1e12], dtype=dtype)
    y, g = _run(lambda t: G.gelu(t, "tanh"), x)
    assert torch.equal(y[:3], x[:3]) and (y[3:6] == 0).all()
    assert torch.equal(g, torch.tensor([1.0, 1, 1, 0, 0, 0, 1, 0], dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_half_types_computed_in_fp32_and_rounded_once(dtype, approximate):
    # Every finite value of the type; fp16 x³ would overflow above 40 (fairseq#2235).
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype)
    x = x[torch.isfinite(x)]
    x = x.detach().requires_grad_()
    y = G.gelu(x, approximate)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    x32 = x.detach().float()
    assert torch.equal(y, K.gelu_forward(x32, approximate).to(dtype))
    assert torch.equal(g, K.gelu_backward(torch.ones_like(x32), x32, approximate).to(dtype))
    assert torch.isfinite(y).all() and torch.isfinite(g).all()


def test_swish_with_negative_and_zero_beta():
    x = torch.tensor([INF, -INF, 2.0, -0.0], dtype=torch.float64)
    y, g = _run(lambda t: G.swish(t, -1.5), x)
    assert y[0] == 0 and y[1] == -INF and g[0] == 0 and g[1] == 1
    assert y[2].item() == pytest.approx(2.0 * special.expit(-3.0), rel=1e-15)
    y, g = _run(lambda t: G.swish(t, 0.0), x)
    assert torch.equal(y, x / 2) and (g == 0.5).all()


@pytest.mark.parametrize("name", list(MEMBERS))
def test_gradcheck_and_gradgradcheck(name):
    fn = MEMBERS[name][0]
    x = torch.linspace(-6, 6, 13, dtype=torch.float64).add(0.05).requires_grad_()
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_bias_gelu_gradcheck_with_broadcast_bias(approximate):
    x = torch.randn(4, 3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x.requires_grad_()
    bias.requires_grad_()

    def fn(x, bias):
        return G.bias_gelu(x, bias, approximate)

    assert torch.autograd.gradcheck(fn, (x, bias))
    assert torch.autograd.gradgradcheck(fn, (x, bias))
    # The bias gradient is the sum over the broadcast dimensions.
    y = fn(x, bias)
    grad = torch.randn_like(y)
    gx, gb = torch.autograd.grad(y, (x, bias), grad)
    assert gb.shape == bias.shape
    torch.testing.assert_close(gb, gx.sum(dim=(0, 1)))
    torch.testing.assert_close(y, G.gelu(x + bias, approximate))


@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_geglu_is_value_times_gelu_of_gate(approximate, dim):
    x = torch.randn(4, 6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    if dim == 0:
        x = x.repeat(2, 1, 1)
    x.requires_grad_()
    size = x.shape[dim] // 2
    a = x.narrow(dim, 0, size)
    b = x.narrow(dim, size, size)
    forms = {"none": _exact, "tanh": _tanh, "sigmoid": _swish(1.702)}
    expected = a.detach().numpy() * forms[approximate](b.detach().numpy())
    y = G.geglu(x, dim, approximate)
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-12, atol=1e-15)
    assert torch.autograd.gradcheck(lambda t: G.geglu(t, dim, approximate), (x,))
    assert torch.autograd.gradgradcheck(lambda t: G.geglu(t, dim, approximate), (x,))


def test_geglu_rejects_odd_size():
    with pytest.raises(ValueError, match=r"dim=-1.*odd \(7\)"):
        G.geglu(torch.randn(3, 7))
    with pytest.raises(ValueError, match="scalar"):
        G.geglu(torch.tensor(1.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: G.gelu(x, "erf"),
        lambda x: G.bias_gelu(x, x, "fast"),
        lambda x: G.geglu(x.repeat(2), approximate="quick"),
    ],
)
def test_unknown_approximate_lists_the_forms(call):
    with pytest.raises(
        ValueError, match=r"is not a GELU form; use one of 'none', 'tanh', 'sigmoid'"
    ):
        call(torch.ones(2))


def _saved(fn, *inputs):
    """Count and bytes of the tensors autograd keeps for backward."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(*inputs)
    y.sum().backward()
    return len(saved), sum(t.numel() * t.element_size() for t in saved), saved


@pytest.mark.parametrize("name", list(MEMBERS))
def test_only_the_input_is_saved(name):
    x = torch.randn(64, 32, requires_grad=True)
    count, nbytes, saved = _saved(MEMBERS[name][0], x)
    if name.startswith("geglu"):  # the member sees the stacked [value, x]: that is its input
        assert count == 1 and nbytes == 2 * x.numel() * 4
    elif name.startswith("bias-gelu"):
        assert count == 2 and nbytes == x.numel() * 4 + 4  # x and the (scalar) bias
        assert saved[0] is x
    else:
        assert count == 1 and nbytes == x.numel() * 4 and saved[0] is x


def test_bias_gelu_saves_input_and_bias_only():
    x = torch.randn(64, 32, requires_grad=True)
    bias = torch.randn(32, requires_grad=True)
    count, nbytes, saved = _saved(G.bias_gelu, x, bias)
    assert count == 2 and nbytes == (64 * 32 + 32) * 4
    assert saved[0] is x and saved[1] is bias


def test_forward_and_backward_kernels_agree_with_autograd_of_the_formula():
    x = torch.linspace(-8, 8, 101, dtype=torch.float64)
    grad = torch.linspace(0.5, 1.5, 101, dtype=torch.float64)
    for approximate in ("none", "tanh", "sigmoid"):
        xr = x.clone().requires_grad_()
        slope = K.gelu_slope(xr, approximate)
        torch.testing.assert_close(K.gelu_backward(grad, x, approximate), grad * slope.detach())
    # The slope is the derivative of the value (autograd of an explicit float64 formula).
    xr = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(_torch_exact(xr).sum(), xr)
    torch.testing.assert_close(K.gelu_slope(x), expected)


def _torch_exact(x):
    return x * 0.5 * torch.special.erfc(-x / math.sqrt(2))


def test_is_tame_detects_every_kind_of_untame_element():
    x = torch.randn(4096)
    assert K.is_tame(x, 1e3)
    for bad in (INF, -INF, math.nan, 2e3, -2e3):
        for position in (0, 1234, 4095):
            y = x.clone()
            y[position] = bad
            assert not K.is_tame(y, 1e3), (bad, position)


@pytest.mark.parametrize("beta_shape", [(), (5,), (3, 1)])
def test_swish_tensor_beta_gradcheck_and_reduction(beta_shape):
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_swish_tensor_beta_edge_cases(dtype):
    specials = _specials(dtype)
    x = specials.clone().requires_grad_()
    beta = torch.tensor(1.5, requires_grad=True)
    y = G.swish(x, beta)
    gx, gb = torch.autograd.grad(y, (x, beta), torch.ones_like(y))
    assert y.dtype == dtype and gx.dtype == dtype and gb.dtype == torch.float32
    _check_specials(
        "swish tensor beta", "contiguous", specials, y.detach(), gx, torch.finfo(dtype).max
    )
    assert gb.isnan()  # the nan input propagates into dL/dβ ...
    finite = [0, 1, 3, 4, 5, 6, 7]
    _, gb = torch.autograd.grad(G.swish(x[finite], beta).sum(), (x, beta))
    assert torch.isfinite(gb)  # ... and ±inf, ±FLT_MAX add 0 to it, not inf·0
    # A negative β mirrors the limits.
    y = G.swish(x, -beta)
    assert y[0] == 0 and y[1] == -INF


def test_learnable_swish_module_uses_the_tensor_beta_path():
    import gelus

    act = gelus.Swish(beta=1.0, learnable=True)
    x = torch.tensor([-INF, INF, -3.0, 2.0], requires_grad=True)
    y = act(x)
    y.sum().backward()
    assert y[0] == 0 and y[1] == INF and x.grad[0] == 0 and x.grad[1] == 1
    s = special.expit(np.array([-3.0, 2.0]))
    expected = (np.array([9.0, 4.0]) * s * (1 - s)).sum()
    assert act.beta.grad.item() == pytest.approx(expected, rel=1e-6)
    count, _, saved = _saved(act, x)
    assert count == 2 and saved[0] is x and saved[1] is act.beta


@pytest.mark.slow
def test_swish_tensor_beta_compiles_and_matches_eager():
    x = torch.tensor([INF, -INF, -0.0, 3e38, -2.0, 0.5, 4.0, -7.0]).reshape(2, 4)
    beta = torch.tensor([1.0, 1.5, 0.5, 2.0])
    results = []
    for fn in (G.swish, torch.compile(G.swish, fullgraph=True, dynamic=False)):
        xr, br = x.clone().requires_grad_(), beta.clone().requires_grad_()
        y = fn(xr, br)
        y.sum().backward()
        results.append((y.detach(), xr.grad, br.grad))
    for eager, compiled in zip(*results, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-6, atol=1e-7)
