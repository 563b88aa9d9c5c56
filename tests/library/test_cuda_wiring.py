"""The Triton kernels are the operators' CUDA implementation: registered on the "cuda" key (kept in
compiled CUDA graphs for stochastic GELU alone), and (run here on CPU tensors through Triton's
interpreter) computing what the default kernels compute, with the default kernels taking what the
Triton kernels refuse."""

import numpy as np
import pytest
import torch

import gelus  # registers the operators and their CUDA kernels
from gelus import _cuda, _triton
from gelus._operator import OPERATORS_UNDER_COMPILE


def test_every_kernel_is_registered_for_cuda_only():
    import os
    import subprocess
    import sys

    # In a fresh process: some tests register kernels for "cpu" to exercise the seam.
    code = (
        "import torch, gelus\n"
        "from gelus import _cuda\n"
        "for op in _cuda.CUDA_KERNELS:\n"
        "    name = op._qualname\n"
        "    assert torch._C._dispatch_has_kernel_for_dispatch_key(name, 'CUDA'), name\n"
        "    assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, 'CPU'), name\n"
        "print(len(_cuda.CUDA_KERNELS))\n"
    )
    # this checkout's gelus (the one under test), not another one installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["17"]
    # compiled CUDA graphs keep stochastic GELU's operator alone; the rest compile to aten ops
    assert dict(OPERATORS_UNDER_COMPILE) == {"stochastic_gelu": {"cuda"}}


def _needs_the_interpreter() -> None:
    # CPU tensors reach compiled kernels only through the interpreter; on the GPU machine
    # tools/gpu_session.sh runs this file a second time with TRITON_INTERPRET=1 for these tests.
    if not _triton.interpreting():
        pytest.skip(
            "runs the kernels on CPU tensors: needs TRITON_INTERPRET=1 (tests/conftest.py sets "
            "it without CUDA; tools/gpu_session.sh sets it for this file on the GPU machine)"
        )


@pytest.fixture
def triton_on_cpu(monkeypatch):
    """Send CPU tensors to the Triton kernels (in the interpreter) and count the calls."""
    _needs_the_interpreter()
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
    _close(_cuda.bias_gelu(X, C), _bias_gelu.kernel_forward(x, c))
    _close(_cuda.bias_gelu_backward(G, X, C), _bias_gelu.kernel_backward(g, x, c))
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
    _close(_cuda.geglu(x, -1, "none"), _geglu.kernel_forward(x64, -1, "none"))
    _close(
        _cuda.geglu_backward(grad, x, -1, "none"),
        _geglu.kernel_backward(grad64, x64, -1, "none"),
    )
    assert triton_on_cpu == ["geglu_forward", "geglu_backward"]


def test_geglu_gradient_keeps_channels_last_as_the_fake_kernel_says(triton_on_cpu):
    from gelus import _geglu

    x = torch.randn(2, 8, 3, 3).to(memory_format=torch.channels_last)
    grad = torch.randn(2, 4, 3, 3)
    got = _cuda.geglu_backward(grad, x, 1, "none")
    assert triton_on_cpu == ["geglu_backward"]
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = torch.ops.gelus.geglu_backward(mode.from_tensor(grad), mode.from_tensor(x), 1)
    assert got.stride() == fake.stride() == x.stride()
    _close(got, _geglu.kernel_backward(grad.double(), x.double(), 1, "none"))


def test_generalized_gelu_kernels_give_nan_for_sigma_not_positive(triton_on_cpu):
    """CUDA cannot refuse σ <= 0 without a sync: those channels are nan, value and gradients
    (never x·Φ(−x) for σ = −1, or the step for σ = 0); the others as the default kernel."""
    from gelus import _generalized

    sigma = torch.linspace(0.5, 2.0, 64)
    sigma[[3, 40]] = torch.tensor([-1.0, 0.0])
    valid = sigma > 0
    y = _cuda.generalized_gelu(X, C, sigma)
    dx, dmu, dsigma = _cuda.generalized_gelu_backward(G, X, C, sigma)
    assert triton_on_cpu == ["generalized_gelu_forward"]  # (the backward is not spied on)
    for t in (y, dx):
        assert t[:, ~valid].isnan().all()
    assert dmu[~valid].isnan().all() and dsigma[~valid].isnan().all()
    x, c, s = _d(X, C, sigma)
    _close(y[:, valid], _generalized.forward(x, c, s)[:, valid])
    want = _generalized.composed_backward(G.double(), x, c, s)
    _close(dx[:, valid], want[0][:, valid])
    _close(dsigma[valid], want[2][valid])


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


def _gelu_on_cuda(f):
    from scipy import special

    x = torch.linspace(-14, 6, 1 << 16, device="cuda", requires_grad=True)
    y = f(x)
    y.backward(torch.ones_like(y))
    x64 = x.detach().double().cpu().numpy()
    value = torch.from_numpy(x64 * special.ndtr(x64))
    slope = torch.from_numpy(special.ndtr(x64) + x64 * np.exp(-0.5 * x64**2) / np.sqrt(2 * np.pi))
    return y.detach().double().cpu(), x.grad.double().cpu(), value, slope


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_take_the_triton_kernels_eager():
    y, grad, value, _ = _gelu_on_cuda(gelus.functional.gelu)
    # the default kernel (torch's erf) loses the tail below -5; the Triton kernel keeps it (2 ulp)
    torch.testing.assert_close(y, value, rtol=2.4e-7, atol=3e-45)
    assert torch.isfinite(grad).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compiled_cuda_graphs_compute_the_compiled_composition():
    # Compiled, a CUDA graph holds the composition inductor fuses (not the Triton kernel): on CUDA
    # the kernels' float32 algorithm as aten ops (gelus._gelu_float32), within 2 ulp, tail included.
    torch._dynamo.reset()
    y, grad, value, slope = _gelu_on_cuda(torch.compile(gelus.functional.gelu, fullgraph=True))
    torch.testing.assert_close(y, value, rtol=2.4e-7, atol=3e-45)
    torch.testing.assert_close(grad, slope, rtol=2.4e-7, atol=3e-45)
    torch._dynamo.reset()


def test_the_cuda_route_is_the_table_with_no_hook_slots():
    """Parameter gradients and the stochastic mask are operators with CUDA kernels; the members
    keep no slots for a device module to fill."""
    from gelus import _generalized, _stochastic, _swish
    from gelus._operator import device_kernel

    for op in (
        _generalized.generalized_gelu_backward_op,
        _swish.swish_tensor_backward_op,
        _stochastic.stochastic_gelu_op,
        _stochastic.stochastic_gelu_backward_op,
    ):
        assert op in _cuda.CUDA_KERNELS
    assert not hasattr(_generalized, "fused_gradients")
    assert not hasattr(_swish, "fused_tensor_gradients")
    assert _stochastic.device_kernel is device_kernel  # the route's query, not a slot


@pytest.fixture
def kernels_on_cpu(monkeypatch):
    _needs_the_interpreter()
    monkeypatch.setattr(_triton, "available", lambda x: x.dtype.is_floating_point)


def test_parameter_gradients_in_one_pass_match_the_composed_backward(kernels_on_cpu):
    from gelus import _generalized, _swish

    x, g, c = _d(X, G, C)
    sigma = 0.5 + C.abs()
    dx, dmu, dsigma = _cuda.generalized_gelu_backward(G, X, C, sigma)
    want = _generalized.composed_backward(g, x, c, sigma.double())  # float64: the composed route
    for got, expected in zip((dx, dmu, dsigma), want, strict=True):
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    beta = C + 1.5
    dx, dbeta = _cuda.swish_tensor_backward(G, X, beta)
    want = _swish.tensor_composed_backward(g, x, beta.double())
    torch.testing.assert_close(dx.double(), want[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dbeta.double(), want[1], rtol=1e-5, atol=1e-5)
    # a gradient of another dtype: the composed default kernel, same values
    dx64 = _cuda.generalized_gelu_backward(g, X, C, sigma)[0]
    assert torch.equal(dx64, _generalized.composed_backward(g, X, C, sigma)[0])


@pytest.fixture
def as_cpu_kernels(monkeypatch, kernels_on_cpu):
    """Route operators on CPU tensors to given kernels, as register_kernel(op, "cpu", kernel)
    would, but undone after the test (a registration stays for the process): the kernel replaces
    the op's default and the members' device_kernel query sees a CPU kernel for it."""
    from gelus import _operator

    routed = set()

    def route(kernels):
        for op, kernel in kernels.items():
            monkeypatch.setitem(op._backend_fns, None, kernel)  # the default, looked up per call
            routed.add(op)

    real = _operator.has_device_kernel
    monkeypatch.setattr(
        _operator, "has_device_kernel", lambda op, device: op in routed or real(op, device)
    )
    return route


def test_a_device_with_a_gradient_kernel_takes_it_only_in_an_unrecorded_backward(as_cpu_kernels):
    from gelus import _generalized

    calls = []

    def spy(grad, x, mu, sigma):
        calls.append(torch.is_grad_enabled())
        return _cuda.generalized_gelu_backward(grad, x, mu, sigma)

    as_cpu_kernels({_generalized.generalized_gelu_backward_op: spy})
    x = X.clone().requires_grad_()
    mu, sigma = C.clone().requires_grad_(), (0.5 + C.abs()).requires_grad_()
    gelus.functional.generalized_gelu(x, mu, sigma).backward(G)
    assert calls == [False]  # the one-pass kernel
    grads = torch.autograd.grad(
        gelus.functional.generalized_gelu(x, mu, sigma), (x, mu, sigma), G, create_graph=True
    )
    assert calls == [False]  # create_graph: the differentiable composition
    want = _generalized.composed_backward(G, X, C, sigma.detach())
    for got, expected in zip((x.grad, mu.grad, sigma.grad), want, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for got, expected in zip(grads, want, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_stochastic_operator_keeps_x_and_the_seed_and_regenerates_its_mask(as_cpu_kernels):
    from scipy import special

    from gelus import _stochastic

    as_cpu_kernels(
        {
            _stochastic.stochastic_gelu_op: _cuda.stochastic_gelu,
            _stochastic.stochastic_gelu_backward_op: _cuda.stochastic_gelu_backward,
        }
    )
    x = torch.linspace(-3, 3, 1 << 14).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.manual_seed(7)
        y = _stochastic.stochastic_gelu_training(x)
    assert len(saved) == 2 and saved[0].data_ptr() == x.data_ptr()  # only x and the seed
    assert saved[1].dtype == torch.int64 and saved[1].numel() == 1 and saved[1].device.type == "cpu"
    kept = y.detach() != 0
    assert torch.equal(y.detach()[kept], x.detach()[kept])  # y = x·m
    (grad,) = torch.autograd.grad(y, x, torch.full_like(y, 2.0), create_graph=True)
    assert torch.equal(grad, 2.0 * kept.float())  # the same mask, regenerated
    torch.manual_seed(7)
    assert torch.equal(_stochastic.stochastic_gelu_training(x.detach()), y.detach())
    # the Triton kernel's Philox mask, not the default kernel's torch generator
    torch.manual_seed(7)
    seed = torch.randint(2**31, (1,))
    assert not torch.equal(_stochastic.seeded_forward(x.detach(), seed), y.detach())
    ones = torch.ones_like(x, dtype=torch.float64)  # another dtype: still the forward's mask
    assert torch.equal(_cuda.stochastic_gelu_backward(ones, x.detach(), seed), kept.float())
    # P(m = 1) = Φ(x): 4096 points per quarter, binomial error ≈ 0.008
    phi = special.ndtr(x.detach().numpy())
    for lo in range(0, 1 << 14, 4096):
        part = slice(lo, lo + 4096)
        assert abs(kept[part].float().mean().item() - phi[part].mean()) < 0.03


def test_stochastic_default_kernels_regenerate_the_same_mask():
    from gelus import _stochastic

    x = torch.randn(4096)
    seed = torch.tensor([3])
    y = _stochastic.seeded_forward(x, seed)
    assert torch.equal(_stochastic.seeded_backward(torch.ones_like(x), x, seed), (y != 0).float())
    assert torch.equal(_stochastic.seeded_forward(x, seed), y)


def test_fake_tensors_never_reach_the_kernels(kernels_on_cpu):
    """A backward runs while compile/export trace the autograd with fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gelus import _generalized
    from gelus._operator import device_kernel

    sigma = C.abs() + 1
    mode = FakeTensorMode()
    x, g, mu, s = (mode.from_tensor(t) for t in (X, G, C, sigma))
    assert _cuda._kernels(x) is None  # outside the mode: a fake tensor is not plain
    with mode:
        assert _cuda._kernels(x) is None
        assert device_kernel(_generalized.generalized_gelu_backward_op, x, g, mu, s) is None
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


_REDUCTIONS = {"aten::sum", "aten::sum_to_size", "aten::mean", "aten::nansum", "aten::cumsum"}


@pytest.mark.parametrize("member", ["bias_gelu", "swish", "generalized_gelu"])
def test_the_cuda_route_reduces_parameter_gradients_in_its_kernels(
    member, as_cpu_kernels, monkeypatch
):
    """One forward + backward of a member with per-channel parameters on the CUDA route: the
    parameter gradients come out of the kernels (one pass over the gradient, then finish_kernel)
    and no torch op reduces anything after them (before: a sum_to_size over the full-size
    gradient for bias-GELU, sums of the partials for all three)."""
    from torch.profiler import ProfilerActivity, profile

    from gelus import _bias_gelu, _generalized, _swish
    from gelus._triton import _kernels

    as_cpu_kernels(
        {
            _bias_gelu.bias_gelu_op: _cuda.bias_gelu,
            _bias_gelu.bias_gelu_grads_op: _cuda.bias_gelu_grads,
            _swish.swish_tensor_op: _cuda.swish_tensor,
            _swish.swish_tensor_backward_op: _cuda.swish_tensor_backward,
            _generalized.generalized_gelu_op: _cuda.generalized_gelu,
            _generalized.generalized_gelu_backward_op: _cuda.generalized_gelu_backward,
        }
    )
    launches = []

    class Counted:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            launches.append(self.kernel.__name__)
            return self.kernel[grid]

    for name in ("columns_kernel", "finish_kernel"):
        monkeypatch.setattr(_kernels, name, Counted(getattr(_kernels, name)))
    x = X.clone().requires_grad_()
    params = [C.clone().requires_grad_()]
    if member == "generalized_gelu":
        params.append((0.5 + C.abs()).requires_grad_())
    f = getattr(gelus.functional, member)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        f(x, *params).backward(G)
    reductions = [(e.name, e.input_shapes) for e in prof.events() if e.name in _REDUCTIONS]
    assert reductions == []
    assert launches == ["columns_kernel", "columns_kernel", "finish_kernel"]
    # the gradients of the composition, in float64
    x64, *p64 = (t.detach().double().requires_grad_() for t in (x, *params))
    f(x64, *p64).backward(G.double())
    for got, want in zip((x, *params), (x64, *p64), strict=True):
        torch.testing.assert_close(got.grad.double(), want.grad, rtol=1e-5, atol=1e-5)


def test_a_registered_kernel_is_called_without_the_dispatcher(kernels_on_cpu, monkeypatch):
    """The parameter members call the kernel registered for x's device directly (the
    dispatcher's Python layers cost ~20 µs a call): seen here through a kernel that only the
    operator's table holds, which a dispatched call would not reach."""
    from gelus import _bias_gelu

    calls = []
    for op, kernel in (
        (_bias_gelu.bias_gelu_op, _cuda.bias_gelu),
        (_bias_gelu.bias_gelu_grads_op, _cuda.bias_gelu_grads),
    ):

        def spy(*args, _kernel=kernel):
            calls.append(_kernel.__name__)
            return _kernel(*args)

        monkeypatch.setitem(op._backend_fns, "cpu", spy)
    x, bias = X.clone().requires_grad_(), C.clone().requires_grad_()
    gelus.functional.bias_gelu(x, bias).backward(G)
    assert calls == ["bias_gelu", "bias_gelu_grads"]
    x64, bias64 = (t.detach().double().requires_grad_() for t in (x, bias))
    torch.nn.functional.gelu(x64 + bias64).backward(G.double())  # torch's, in float64
    for got, want in ((x.grad, x64.grad), (bias.grad, bias64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
