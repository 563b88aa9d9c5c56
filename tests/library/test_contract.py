"""The contract every member keeps on the eager route (docs/NUMERICS.md; constants in
gelus/_common.py): edge cases in every dtype and layout, finite gradients, half types computed in
float32 and rounded once, only the inputs saved for backward, one dtype rule.

The compiled, exported and ONNX routes are held to the same contract in their own files.
"""

import math

import numpy as np
import pytest
import torch

import gelus.functional as G
from conftest import CONTRACT, MEMBERS
from gelus import _gelu, _swish
from gelus.conformance import EDGES

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INF = math.inf


def layouts(values: torch.Tensor):
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


def specials(dtype):
    """The contract table's inputs (gelus.conformance.EDGES: +inf, −inf, nan, −0, MAX, −MAX), then
    1 and −1; ``check_specials`` states what each must give."""
    big = torch.finfo(dtype).max
    edges = [big if e.x == "max" else -big if e.x == "-max" else e.x for e in EDGES]
    return torch.tensor([*edges, 1.0, -1.0], dtype=dtype)


def value_and_grad(fn, x):
    x = x.detach().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.detach(), g


def check_specials(where, y, g, big):
    assert y[0] == INF and g[0] == 1, where  # +inf -> +inf, slope 1
    assert y[1] == 0 and g[1] == 0, where  # −inf -> 0, slope 0
    assert y[2].isnan() and g[2].isnan(), where
    assert y[3] == 0 and y[3].signbit(), where  # −0 -> −0
    assert g[3] == 0.5, where
    assert y[4] == big and g[4] == 1, where  # FLT_MAX -> FLT_MAX
    assert y[5] == 0 and g[5] == 0, where
    assert torch.isfinite(g[[0, 1, 3, 4, 5, 6, 7]]).all(), where


TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CONTRACT)
def test_edge_cases_in_every_layout_and_dtype(name, dtype):
    member = MEMBERS[name]
    values = specials(dtype)
    big = torch.finfo(dtype).max
    singles = []
    for layout, x, where in layouts(values):
        y, g = value_and_grad(member.call, x)
        if layout.startswith("single"):
            singles.append((y, g))
            continue
        assert y.shape == x.shape and y.dtype == dtype, layout
        check_specials(f"{name} {layout}", y[where], g[where], big)
        # The specials leave their neighbours alone.
        others = torch.ones_like(x, dtype=torch.bool)
        others[where] = False
        xo = x.detach()[others].double().numpy()
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(y[others].double().numpy(), member.value(xo), rtol=tol, atol=tol)
        np.testing.assert_allclose(g[others].double().numpy(), member.slope(xo), rtol=tol, atol=tol)
    y1 = torch.cat([y for y, _ in singles])
    g1 = torch.cat([g for _, g in singles])
    check_specials(f"{name} single", y1, g1, big)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_half_types_computed_in_fp32_and_rounded_once(dtype, approximate):
    # Every finite value of the type; fp16 x³ would overflow above 40 (fairseq#2235).
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype)
    x = x[torch.isfinite(x)].detach().requires_grad_()
    y = G.gelu(x, approximate)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    x32 = x.detach().float()
    assert torch.equal(y, _gelu.kernel_forward(x32, approximate).to(dtype))
    assert torch.equal(g, _gelu.kernel_backward(torch.ones_like(x32), x32, approximate).to(dtype))
    assert torch.isfinite(y).all() and torch.isfinite(g).all()


def saved_tensors(fn, *inputs):
    """The tensors autograd keeps for backward (then runs the backward)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(*inputs)
    y.sum().backward()
    return saved


# members with contract=False are compositions of torch ops: autograd saves what torch's ops save
@pytest.mark.parametrize("name", [n for n, m in MEMBERS.items() if m.contract])
def test_only_the_inputs_are_saved(name):
    member = MEMBERS[name]
    inputs = [t.float().requires_grad_() for t in member.inputs(torch.float32)]
    saved = saved_tensors(member.function, *inputs)
    assert len(saved) == len(inputs), [tuple(t.shape) for t in saved]
    assert all(s is t for s, t in zip(saved, inputs, strict=True))


def test_stochastic_gelu_saves_only_a_bool_mask():
    x = torch.randn(64, 32, requires_grad=True)
    saved = saved_tensors(lambda t: G.stochastic_gelu(t, True), x)
    assert [(t.dtype, tuple(t.shape)) for t in saved] == [(torch.bool, (64, 32))]


# ------------------------------------------------------------------------------ the dtype rule


def _reference_dtype(x, *params):
    """torch's own promotion for the same operands (the one dtype rule)."""
    result = x
    for p in params:
        result = result + p  # as x + bias, x * weight, …
    return result.dtype


@pytest.mark.parametrize("name", list(MEMBERS))
@pytest.mark.parametrize(
    ("x_dtype", "param_dtype"),
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
        (torch.float32, torch.bfloat16),
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
    ],
    ids=str,
)
def test_result_dtype_is_torch_promotion_and_gradients_keep_input_dtypes(
    name, x_dtype, param_dtype
):
    member = MEMBERS[name]
    x, *params = member.inputs(torch.float64)
    x = x.to(x_dtype).requires_grad_()
    params = [p.to(param_dtype).requires_grad_() for p in params]
    y = member.function(x, *params)
    assert y.dtype == _reference_dtype(x, *params)
    grads = torch.autograd.grad(y.float().sum(), [x, *params])
    assert [g.dtype for g in grads] == [t.dtype for t in (x, *params)]


@pytest.mark.parametrize("name", list(MEMBERS))
def test_under_autocast_the_dtype_is_what_torch_gives_the_same_operands(name):
    member = MEMBERS[name]
    x, *params = member.inputs(torch.float32)
    linear = torch.nn.Linear(x.shape[-1], x.shape[-1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = linear(x)  # bf16 under autocast
        y = member.function(h, *params)
        reference = _reference_dtype(h, *params)
        plain = member.function(x, *params)  # an fp32 input stays fp32
    assert h.dtype == torch.bfloat16
    assert y.dtype == reference and plain.dtype == torch.float32
    y.float().sum().backward()
    assert linear.weight.grad is not None and torch.isfinite(linear.weight.grad).all()


def test_python_number_parameters_do_not_promote():
    x = torch.randn(8, dtype=torch.bfloat16)
    assert G.generalized_gelu(x, 0.1, 0.9).dtype == torch.bfloat16
    assert G.generalized_gelu(x[0], 0.1, 0.9).dtype == torch.bfloat16  # 0-dim x too
    assert G.swish(x, 1.5).dtype == torch.bfloat16
    # a 0-dim tensor parameter does not promote a dimensioned x either (as torch's x + p)
    assert G.bias_gelu(x, torch.tensor(0.5)).dtype == torch.bfloat16


@pytest.mark.parametrize(
    "call",
    [
        lambda x: G.gelu(x, "erf"),
        lambda x: G.bias_gelu(x, x, "fast"),
        lambda x: G.geglu(x.repeat(2), approximate="quick"),
    ],
)
def test_unknown_approximate_is_a_value_error_listing_the_forms(call):
    with pytest.raises(
        ValueError, match=r"is not a GELU form; use one of 'none', 'tanh', 'sigmoid'"
    ):
        call(torch.ones(2))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: G.gelu(x, "tanh", accurate=True),
        lambda x: G.bias_gelu(x, x, "sigmoid", accurate=True),
        lambda x: G.geglu(x.repeat(2), approximate="tanh", accurate=True),
    ],
)
def test_accurate_with_an_approximation_is_refused_as_by_the_module(call):
    with pytest.raises(ValueError, match="exact form only"):
        call(torch.ones(2))


def test_swish_float_beta_kernels_are_the_sigmoid_form_of_gelu():
    x = torch.linspace(-30, 30, 1001)
    assert torch.equal(G.gelu(x, "sigmoid"), _swish.forward(x, 1.702))
