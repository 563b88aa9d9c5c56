"""GPT-OSS's gate (clamped SwiGLU): values and gradients against a float64 oracle, the clamped
regions and their zero gradients, ±inf and nan, both layouts; gradcheck, forward AD and vmap;
compiled, exported and FX-traced; the Triton kernel in the interpreter.

The oracle is transformers' ``GptOssExperts._apply_gate`` written again in float64 torch ops
(tests/oracles.py: ``clamped_swiglu``) and differentiated by autograd (torch's clamp: the gradient passes at the bounds, 0 beyond).
"""

import math

import pytest
import torch

import gelus
import oracles
from gelus import _clamped_swiglu, _triton
from gelus.functional import clamped_swiglu

ALPHA, LIMIT = 1.702, 7.0
INF, NAN = math.inf, math.nan


def oracle(x: torch.Tensor, alpha=ALPHA, limit=LIMIT, interleaved=True, dim=-1):
    """GPT-OSS's formula in float64 (x float64, any requires_grad): y, from the halves on dim."""
    return oracles.clamped_swiglu(x, alpha, limit, interleaved, dim)


def oracle_with_grad(x, grad, **options):
    x64 = x.detach().double().requires_grad_()
    y = oracle(x64, **options)
    y.backward(grad.double())
    return y.detach(), x64.grad


def inputs(shape, dtype, seed=0, scale=6.0):
    """Normal draws ×6 (a third of them beyond ±7), with the bounds ±7 themselves in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    flat = x.view(-1)
    flat[: min(8, flat.numel())] = torch.tensor([7.0, -7.0, 7.0, 7.0, -7.0, 6.5, 7.5, -7.5])[
        : min(8, flat.numel())
    ]
    return x.to(dtype)


TOLERANCE = {  # (rtol, atol): fp32 math rounded once for the half types
    torch.float64: (1e-13, 1e-13),
    torch.float32: (2e-6, 2e-6),
    torch.bfloat16: (2**-8, 2**-8),
    torch.float16: (2**-10, 2**-10),
}
LAYOUTS = [(True, -1, (4, 16)), (False, -1, (4, 16)), (True, 1, (3, 6, 5)), (False, 0, (8, 3))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("interleaved", "dim", "shape"), LAYOUTS)
def test_values_and_gradients_match_the_float64_oracle(dtype, interleaved, dim, shape):
    x = inputs(shape, dtype).requires_grad_()
    y = clamped_swiglu(x, interleaved=interleaved, dim=dim)
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    y.backward(grad)
    y64, g64 = oracle_with_grad(x, grad, interleaved=interleaved, dim=dim)
    rtol, atol = TOLERANCE[dtype]
    assert y.dtype == x.grad.dtype == dtype and y.shape == y64.shape
    torch.testing.assert_close(y.double(), y64, rtol=rtol, atol=atol)
    torch.testing.assert_close(x.grad.double(), g64, rtol=rtol, atol=atol * 8)
    assert (x.grad == 0).sum() >= 4  # clamped elements are in this sample


def test_clamped_regions_have_zero_gradients_and_the_bounds_pass():
    # rows: (gate, up); interleaved on the last dim
    pairs = [
        (7.5, 0.3),
        (1e30, -2.0),
        (7.0, 0.3),
        (2.0, 7.0),
        (2.0, -7.0),
        (2.0, 7.01),
        (2.0, -8.0),
    ]
    x = torch.tensor(pairs, dtype=torch.float64).reshape(1, -1).requires_grad_()
    clamped_swiglu(x).sum().backward()
    d_gate, d_up = x.grad[0, ::2], x.grad[0, 1::2]
    _, g64 = oracle_with_grad(x, torch.ones(1, len(pairs)))
    torch.testing.assert_close(x.grad, g64, rtol=1e-14, atol=0)
    assert d_gate[0] == 0 and d_gate[1] == 0  # gate above the limit
    assert d_gate[2] != 0  # gate at the limit: torch's clamp passes the gradient there
    assert d_up[3] != 0 and d_up[4] != 0  # up at ±limit
    assert d_up[5] == 0 and d_up[6] == 0  # up beyond ±limit
    assert d_up[0] != 0 and d_gate[3] != 0


def test_infinities_nan_and_huge_inputs():
    big = torch.finfo(torch.float32).max
    pairs = [(INF, 0.5), (-INF, 0.5), (-INF, -3.0), (0.5, INF), (0.5, -INF), (NAN, 0.5),
             (0.5, NAN), (-big, 2.0), (big, 2.0), (-1e4, 1.0)]  # fmt: skip
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(pairs, dtype=dtype).reshape(1, -1).requires_grad_()
        y = clamped_swiglu(x)
        y.sum().backward()
        y, d_gate, d_up = y[0].double(), x.grad[0, ::2].double(), x.grad[0, 1::2].double()
        glu7 = 7.0 / (1.0 + math.exp(-ALPHA * 7.0))
        glu05 = 0.5 / (1.0 + math.exp(-ALPHA * 0.5))
        tol = dict(rtol=2e-6, atol=0.0)
        torch.testing.assert_close(y[0], torch.tensor(1.5 * glu7, dtype=torch.float64), **tol)
        assert y[1] == 0 and y[2] == 0  # gate = −inf: 0 (the original's −inf·0 is nan)
        assert y[1].signbit() and not y[2].signbit()  # −0·1.5, −0·(−2)
        torch.testing.assert_close(y[3], torch.tensor(8.0 * glu05, dtype=torch.float64), **tol)
        torch.testing.assert_close(y[4], torch.tensor(-6.0 * glu05, dtype=torch.float64), **tol)
        assert y[5].isnan() and y[6].isnan()
        assert y[7] == 0 and torch.isfinite(y[8]) and y[9] == 0
        # gradients: 0 in the clamped regions and at gate = −inf; nan at nan
        assert d_gate[0] == 0 and d_gate[8] == 0 and d_up[3] == 0 and d_up[4] == 0
        assert d_gate[1] == 0 and d_up[1] == 0 and d_gate[7] == 0 and d_up[7] == 0
        assert d_gate[5].isnan() and d_up[5].isnan() and d_up[6].isnan() and d_gate[6].isnan()
        assert torch.isfinite(
            x.grad[0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 18, 19]]
        ).all()


def test_gradcheck_gradgradcheck_forward_ad_and_vmap():
    for interleaved, dim, shape in LAYOUTS:
        x = inputs(shape, torch.float64, seed=3, scale=3.0)
        # the bounds (here 4) are kinks: finite differences need x away from them
        x = torch.where(((x.abs() - 4.0).abs() < 1e-3), x + 0.01, x).requires_grad_()

        def f(t, interleaved=interleaved, dim=dim):
            return clamped_swiglu(t, interleaved=interleaved, dim=dim, limit=4.0)

        assert torch.autograd.gradcheck(f, (x,), check_forward_ad=True, check_batched_grad=True)
        assert torch.autograd.gradgradcheck(f, (x,))
    # vmap of grad over a batch of inputs equals the loop
    xs = inputs((3, 4, 8), torch.float64, seed=4)
    per = torch.func.vmap(torch.func.grad(lambda t: clamped_swiglu(t).sum()))(xs)
    loop = torch.stack([torch.func.grad(lambda t: clamped_swiglu(t).sum())(t) for t in xs])
    torch.testing.assert_close(per, loop, rtol=0, atol=0)


def test_module_registry_and_arguments():
    module = gelus.get_activation("clamped_swiglu")
    assert isinstance(module, gelus.ClampedSwiGLU) and "ClampedSwiGLU" in gelus.__all__
    assert (module.alpha, module.limit, module.interleaved, module.dim) == (ALPHA, LIMIT, True, -1)
    x = inputs((2, 6), torch.float32)
    torch.testing.assert_close(module(x), clamped_swiglu(x), rtol=0, atol=0)
    split = gelus.ClampedSwiGLU(alpha=1.0, limit=3.0, interleaved=False, dim=0)
    y64 = oracle(inputs((4, 3), torch.float64), 1.0, 3.0, False, 0)
    torch.testing.assert_close(split(inputs((4, 3), torch.float64)), y64, rtol=1e-14, atol=0)
    for bad in (dict(alpha=0.0), dict(alpha=INF), dict(limit=0.0), dict(limit=NAN)):
        with pytest.raises(ValueError):
            clamped_swiglu(x, **bad)
        with pytest.raises(ValueError):
            gelus.ClampedSwiGLU(**bad)
    with pytest.raises(ValueError, match="odd"):
        clamped_swiglu(torch.ones(2, 5))
    with pytest.raises(TypeError):
        clamped_swiglu(torch.ones(2, 4, dtype=torch.int32))


def test_saves_only_the_input():
    x = inputs((4, 8), torch.float32).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        clamped_swiglu(x * 1.0)
    assert len(saved) == 1 and saved[0].shape == x.shape


def test_compile_export_and_fx_agree_with_eager():
    module = gelus.ClampedSwiGLU()
    edges = torch.tensor([INF, 0.5, -INF, 2.0, 7.0, 7.0, 9.0, -9.0, -1e30, 3.0, NAN, 1.0])
    x = torch.cat([edges, inputs((36,), torch.float32).reshape(-1)]).reshape(4, 12)
    grad = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))

    def run(f):
        t = x.clone().requires_grad_()
        y = f(t)
        y.backward(grad)
        return y.detach(), t.grad

    y, g = run(module)
    torch._dynamo.reset()
    yc, gc = run(torch.compile(module, fullgraph=True))
    torch.testing.assert_close(yc, y, rtol=2e-6, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(gc, g, rtol=2e-6, atol=1e-6, equal_nan=True)
    assert yc[0, 1] == 0 and gc[0, 2] == 0  # gate = −inf compiled too
    torch._dynamo.reset()
    program = torch.export.export(module, (x,))
    assert "clamped_swiglu" in str(program.graph)
    ye, ge = run(program.module())
    torch.testing.assert_close(ye, y, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(ge, g, rtol=0, atol=0, equal_nan=True)
    traced = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Identity(), module))
    calls = [n for n in traced.graph.nodes if n.op == "call_function"]
    assert len(calls) == 1
    torch.testing.assert_close(traced(x), y, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------- the Triton kernel


def _interpreter():
    if not _triton.interpreting() and not torch.cuda.is_available():
        pytest.skip("the kernel on CPU needs TRITON_INTERPRET=1 (tests/conftest.py sets it)")
    pytest.importorskip("triton")
    from gelus._triton import _clamped_swiglu as kernel

    return kernel, ("cuda" if torch.cuda.is_available() else "cpu")


KERNEL_LAYOUTS = [(True, -1, (5, 40)), (False, -1, (5, 40)), (True, 1, (3, 10, 7)),
                  (False, 1, (3, 10, 7)), (True, 0, (6, 3))]  # fmt: skip


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's inf/nan arithmetic, discarded
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_triton_kernel_matches_the_oracle(dtype):
    kernel, device = _interpreter()
    for interleaved, dim, shape in KERNEL_LAYOUTS:
        x = inputs(shape, dtype)
        x.view(-1)[8:14] = torch.tensor([INF, -INF, NAN, 1.0, -1e4, 0.5], dtype=dtype)
        x = x.to(device)
        out_shape = list(shape)
        out_shape[dim] //= 2
        grad = torch.randn(out_shape, generator=torch.Generator().manual_seed(5)).to(dtype)
        y = kernel.forward(x, ALPHA, LIMIT, interleaved, dim)
        dx = kernel.backward(grad.to(device), x, ALPHA, LIMIT, interleaved, dim)
        # where gate and up are finite: the oracle; the edges as the float64 member has them
        x64 = x.cpu().double()
        keep = _pairs_finite(x64, interleaved, dim)
        y64, g64 = oracle_with_grad(torch.where(torch.isfinite(x64), x64, 0.0), grad,
                                    interleaved=interleaved, dim=dim)  # fmt: skip
        rtol, atol = TOLERANCE[dtype]
        torch.testing.assert_close(y.cpu().double()[keep], y64[keep], rtol=rtol, atol=atol)
        gate_keep, up_keep = (k & keep for k in _pairs_finite_each(x64, interleaved, dim))
        d_gate, d_up = _clamped_swiglu.halves(dx.cpu().double(), interleaved, dim)
        o_gate, o_up = _clamped_swiglu.halves(g64, interleaved, dim)
        torch.testing.assert_close(d_gate[gate_keep], o_gate[gate_keep], rtol=rtol, atol=8 * atol)
        torch.testing.assert_close(d_up[up_keep], o_up[up_keep], rtol=rtol, atol=8 * atol)
        member = x64.clone().requires_grad_()
        reference = clamped_swiglu(member, interleaved=interleaved, dim=dim)
        reference.backward(grad.double())
        torch.testing.assert_close(y.cpu().double(), reference.detach(), rtol=rtol, atol=atol,
                                   equal_nan=True)  # fmt: skip
        torch.testing.assert_close(dx.cpu().double(), member.grad, rtol=rtol, atol=8 * atol,
                                   equal_nan=True)  # fmt: skip
        assert y.isnan().any() and dx.isnan().any()  # the edges reached the kernel
        assert y.dtype == dx.dtype == dtype and dx.shape == x.shape


def _pairs_finite(x64, interleaved, dim):
    gate, up = _pairs_finite_each(x64, interleaved, dim)
    return gate & up


def _pairs_finite_each(x64, interleaved, dim):
    gate, up = _clamped_swiglu.halves(x64, interleaved, dim)
    return torch.isfinite(gate), torch.isfinite(up)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_cuda_route_takes_the_kernel_and_grids_stay_within_limits(monkeypatch):
    kernel, device = _interpreter()
    monkeypatch.setattr(_triton, "available", lambda x: x.dtype.is_floating_point)
    calls = []
    for name in ("forward", "backward"):
        original = getattr(kernel, name)
        monkeypatch.setattr(kernel, name, lambda *a, o=original, n=name: calls.append(n) or o(*a))
    x = inputs((4, 12), torch.float32).to(device)
    grad = torch.ones(4, 6, device=device)
    y = _clamped_swiglu.cuda_forward(x, ALPHA, LIMIT, True, -1)
    dx = _clamped_swiglu.cuda_backward(grad, x, ALPHA, LIMIT, True, -1)
    assert calls == ["forward", "backward"]
    torch.testing.assert_close(
        y.cpu(), _clamped_swiglu.kernel_forward(x.cpu()), rtol=2e-6, atol=1e-6
    )
    torch.testing.assert_close(dx.cpu(), _clamped_swiglu.kernel_backward(grad.cpu(), x.cpu()),
                               rtol=2e-6, atol=1e-6)  # fmt: skip
    # float64 takes the default kernel (α and L are fp32 arguments of the kernel)
    calls.clear()
    _clamped_swiglu.cuda_forward(x.double(), ALPHA, LIMIT, True, -1)
    assert calls == []
    # grids for tensors up to 2^39 bytes: x within 2^31 − 1, y and z within 65,535
    for shape, interleaved, dim in [((2**37,), True, 0), ((2**37,), False, 0), ((2, 2**36), False, 1),
                                    ((2**35, 4), True, 1), ((2**30, 2, 64), True, 1)]:  # fmt: skip
        outer, inner = kernel.view(shape, interleaved, dim)
        config = kernel.launch_config(torch.float32, True, pairs=inner == 1, length=inner,
                                      interpreted=False)  # fmt: skip
        grid = kernel._grid(outer, inner, config)
        assert grid[0] <= 2**31 - 1 and all(size <= 65535 for size in grid[1:]), (shape, grid)
