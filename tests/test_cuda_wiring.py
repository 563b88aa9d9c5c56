"""The Triton kernels are the operators' CUDA implementation: registered on the "cuda" key, kept in
compiled CUDA graphs, and (run here on CPU tensors through Triton's interpreter) computing what
the default kernels compute, with the default kernels taking what the Triton kernels refuse."""

import pytest
import torch

import gelus  # registers the operators and their CUDA kernels
from gelus import _cuda, _triton
from gelus._operator import OPERATOR_DEVICES_UNDER_COMPILE


def test_every_kernel_is_registered_for_cuda_only():
    for op in _cuda.CUDA_KERNELS:
        name = op._qualname  # e.g. "gelus::gelu"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"), name
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"), name
    assert "cuda" in OPERATOR_DEVICES_UNDER_COMPILE  # compiled CUDA graphs keep the operators
    assert len(_cuda.CUDA_KERNELS) == 10


@pytest.fixture
def triton_on_cpu(monkeypatch):
    """Send CPU tensors to the Triton kernels (in the interpreter) and count the calls."""
    if not _triton.interpreting() and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 (tests/conftest.py sets it without CUDA)")
    ops = _triton.load()
    calls = []
    monkeypatch.setattr(_triton, "available", lambda x: x.dtype.is_floating_point)
    for name in ("gelu_forward", "gelu_backward", "swish_forward", "swish_backward",
                 "generalized_gelu_forward", "bias_gelu_forward", "bias_gelu_backward",
                 "geglu_forward", "geglu_backward"):  # fmt: skip
        original = getattr(ops, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(ops, name, spy)
    return calls


X = torch.linspace(-12, 6, 4096, dtype=torch.float64).float().view(64, 64)
G = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
C = torch.linspace(-1, 1, 64)  # per-channel parameter on the last dim


def _close(got, want):
    """``got`` (fp32, through the wiring) against the default kernel run on float64 copies: the
    wiring (arguments, forms, which output) is checked here; the kernels' accuracy against
    independent oracles in tests/test_triton_kernels.py."""
    assert got.dtype == torch.float32 and want.dtype == torch.float64
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-7)


def _d(*tensors):
    return [t.double() for t in tensors]


@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_gelu_kernels_match_the_default_kernels(triton_on_cpu, approximate):
    from gelus import _gelu

    x, g = _d(X, G)
    _close(_cuda.gelu(X, approximate), _gelu.kernel_forward(x, approximate, True))
    _close(_cuda.gelu_backward(G, X, approximate), _gelu.kernel_backward(g, x, approximate, True))
    assert triton_on_cpu == ["gelu_forward", "gelu_backward"]


def test_parameter_members_match_and_refuse_what_they_cannot_take(triton_on_cpu):
    from gelus import _bias_gelu, _generalized, _swish

    x, g, c = _d(X, G, C)
    _close(_cuda.swish(X, 1.5), _swish.forward(x, 1.5))
    _close(_cuda.swish_backward(G, X, 1.5), _swish.backward(g, x, 1.5))
    sigma = 0.5 + C.abs()
    _close(_cuda.generalized_gelu(X, C, sigma), _generalized.forward(x, c, sigma.double()))
    _close(_cuda.bias_gelu(X, C), _bias_gelu.bias_gelu_op._init_fn(x, c))
    _close(_cuda.bias_gelu_backward(G, X, C), _bias_gelu.bias_gelu_backward_op._init_fn(g, x, c))
    assert triton_on_cpu == [
        "swish_forward", "swish_backward", "generalized_gelu_forward", "bias_gelu_forward",
        "bias_gelu_backward",
    ]  # fmt: skip
    triton_on_cpu.clear()
    # promotion (fp32 x, fp64 bias) and a bias that broadcasts x up: the default kernel
    assert _cuda.bias_gelu(X, C.double()).dtype == torch.float64
    assert _cuda.bias_gelu(X[:1], C.view(64, 1)).shape == (64, 64)
    assert triton_on_cpu == []


def test_geglu_kernels_match_the_default_kernels(triton_on_cpu):
    from gelus import _geglu

    x = torch.cat([G, X], dim=-1)  # [value, gate]
    grad = torch.randn(64, 64, generator=torch.Generator().manual_seed(1))
    x64, grad64 = _d(x, grad)
    _close(_cuda.geglu(x, -1, "none"), _geglu.geglu_op._init_fn(x64, -1, "none"))
    _close(
        _cuda.geglu_backward(grad, x, -1, "none"),
        _geglu.geglu_backward_op._init_fn(grad64, x64, -1, "none"),
    )
    assert triton_on_cpu == ["geglu_forward", "geglu_backward"]


def test_without_the_kernels_the_cuda_entries_are_the_default_kernels(monkeypatch):
    from gelus import _gelu

    monkeypatch.setattr(_triton, "available", lambda x: False)
    assert torch.equal(_cuda.gelu(X), _gelu.kernel_forward(X))
    assert torch.equal(_cuda.gelu_backward(G, X), _gelu.kernel_backward(G, X))


def test_import_gelus_does_not_import_triton():
    import subprocess
    import sys

    code = "import sys, gelus, torch; gelus.GELU()(torch.ones(3)); print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_tensors_take_the_triton_kernels_eager_and_compiled(compiled):
    from scipy import special

    x = torch.linspace(-14, 6, 1 << 16, device="cuda", requires_grad=True)
    f = gelus.functional.gelu
    if compiled:
        f = torch.compile(f, fullgraph=True)
    y = f(x)
    y.backward(torch.ones_like(y))
    x64 = x.detach().double().cpu().numpy()
    want = torch.from_numpy(x64 * special.ndtr(x64))
    # the default kernel (torch's erf) loses the tail below -5; the Triton kernel keeps it
    torch.testing.assert_close(y.detach().double().cpu(), want, rtol=2e-7, atol=1e-45)
    assert torch.isfinite(x.grad).all()


def test_backward_hooks_and_stochastic_kernel_are_installed():
    from gelus import _generalized, _stochastic, _swish

    assert _generalized.fused_gradients is _cuda.generalized_gelu_gradients
    assert _swish.fused_tensor_gradients is _cuda.swish_tensor_gradients
    assert _stochastic.device_kernel is _cuda.stochastic_gelu


@pytest.fixture
def kernels_on_cpu(monkeypatch):
    if not _triton.interpreting() and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 (tests/conftest.py sets it without CUDA)")
    monkeypatch.setattr(_triton, "available", lambda x: x.dtype.is_floating_point)


def test_parameter_gradients_in_one_pass_match_the_composed_backward(kernels_on_cpu):
    from gelus import _generalized, _swish

    x, g, c = _d(X, G, C)
    sigma = 0.5 + C.abs()
    with torch.no_grad():  # a backward autograd does not record
        dx, dmu, dsigma = _cuda.generalized_gelu_gradients(G, X, C, sigma)
        want = _generalized.backward(g, x, c, sigma.double())  # float64: the composed route
        for got, expected in zip((dx, dmu, dsigma), want, strict=True):
            torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
        beta = C + 1.5
        dx, dbeta = _cuda.swish_tensor_gradients(G, X, beta)
        want = _swish._tensor_grads(g, x, beta.double(), (True, True))
        torch.testing.assert_close(dx.double(), want[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(dbeta.double(), want[1], rtol=1e-5, atol=1e-5)
    # a recorded backward (create_graph) stays the differentiable composition
    assert _cuda.generalized_gelu_gradients(G, X, C, sigma) is None


def test_stochastic_kernel_keeps_x_and_the_seed_and_regenerates_its_mask(kernels_on_cpu):
    from scipy import special

    x = torch.linspace(-3, 3, 1 << 14).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.manual_seed(7)
        y = _cuda.stochastic_gelu(x, None)
    assert [t.data_ptr() for t in saved] == [x.data_ptr()]  # only x (the seed is an int)
    kept = y.detach() != 0
    assert torch.equal(y.detach()[kept], x.detach()[kept])  # y = x·m
    y.backward(torch.full_like(y, 2.0))
    assert torch.equal(x.grad, 2.0 * kept.float())  # the same mask, regenerated
    # P(m = 1) = Φ(x): 4096 points per quarter, binomial error ≈ 0.008
    phi = special.ndtr(x.detach().numpy())
    for lo in range(0, 1 << 14, 4096):
        part = slice(lo, lo + 4096)
        assert abs(kept[part].float().mean().item() - phi[part].mean()) < 0.03
    torch.manual_seed(7)
    again = _cuda.stochastic_gelu(x.detach(), None)
    assert torch.equal(again, y.detach())  # reproducible under torch.manual_seed


def test_fake_tensors_never_reach_the_kernels(kernels_on_cpu):
    """A backward hook runs while compile/export trace the autograd with fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    sigma = C.abs() + 1
    mode = FakeTensorMode()
    x, g, mu, s = (mode.from_tensor(t) for t in (X, G, C, sigma))
    assert _cuda._kernels(x) is None  # outside the mode: a fake tensor is not plain
    with mode:
        assert _cuda._kernels(x) is None
        assert _cuda.generalized_gelu_gradients(g, x, mu, s) is None
    assert _cuda._kernels(X) is not None  # the same call on real tensors takes the kernels


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compiled_generalized_gelu_on_cuda_trains_like_eager():
    x = torch.randn(256, 64, device="cuda")
    results = []
    for compiled in (False, True):
        mu = torch.zeros(64, device="cuda", requires_grad=True)
        sigma = torch.ones(64, device="cuda", requires_grad=True)
        xs = x.clone().requires_grad_()
        f = gelus.functional.generalized_gelu
        if compiled:
            f = torch.compile(f, fullgraph=True)
        f(xs, mu, sigma).square().sum().backward()
        results.append((xs.grad, mu.grad, sigma.grad))
    for eager, compiled in zip(*results, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
