"""What only a GPU can show about the Triton kernels: compiled code (not the interpreter) on CUDA
tensors, its fast fp32 division and exp, CUDA graphs and torch.compile. Skipped without CUDA;
the same kernels are tested on CPU in Triton's interpreter (test_triton_kernels.py)."""

import math

import numpy as np
import pytest
import torch

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
pytestmark = [cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def ops():
    from gelus._triton import load

    return load()


def _ulp32(result: torch.Tensor, reference: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    return np.abs(result.double().cpu().numpy() - reference) / spacing


def test_exact_gelu_fp32_within_two_ulp_on_the_gpu(ops):
    """The interpreter's sets on the GPU (its fma, its division, its rsqrt), and the compiled
    composition of the same algorithm (inductor's Triton code, which may contract a·b + c)."""
    from _fp32_gelu_sets import EXACT_ULP, dense_grid, spot_sets
    from gelus import _gelu_float32

    compiled_value = torch.compile(_gelu_float32.value)
    compiled_slope = torch.compile(_gelu_float32.slope)
    for sample, value, slope in (dense_grid(), spot_sets()):
        x = torch.from_numpy(sample).cuda()
        assert _ulp32(ops.gelu_forward(x), value).max() <= EXACT_ULP
        assert _ulp32(ops.gelu_backward(torch.ones_like(x), x), slope).max() <= EXACT_ULP
        assert _ulp32(compiled_value(x), value).max() <= EXACT_ULP
        assert _ulp32(compiled_slope(x), slope).max() <= EXACT_ULP


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh", "sigmoid"])
def test_edges_on_the_gpu(ops, dtype, approximate):
    big = torch.finfo(dtype).max
    x = torch.tensor([math.inf, -math.inf, math.nan, -0.0, big, -big], dtype=dtype, device="cuda")
    y = ops.gelu_forward(x, approximate).double().cpu().tolist()
    g = ops.gelu_backward(torch.ones_like(x), x, approximate).double().cpu().tolist()
    assert y[0] == math.inf and y[1] == 0 and math.isnan(y[2]) and y[4] == big and y[5] == 0
    assert math.copysign(1.0, y[3]) == -1.0
    assert g[0] == 1 and g[1] == 0 and g[4] == 1 and g[5] == 0


def test_every_member_runs_on_channels_last_cuda_tensors(ops):
    x = torch.randn(4, 16, 8, 8, device="cuda").to(memory_format=torch.channels_last)
    grad = torch.randn_like(x)
    channel = torch.rand(16, 1, 1, device="cuda") + 0.5
    reference = torch.nn.functional.gelu(x.double())
    torch.testing.assert_close(ops.gelu_forward(x).double(), reference, rtol=1e-6, atol=1e-7)
    dx, dmu, dsigma = ops.generalized_gelu_backward(grad, x, channel - 1, channel)
    assert dx.is_contiguous(memory_format=torch.channels_last)
    assert dmu.shape == dsigma.shape == (16, 1, 1)
    dx, dbias = ops.bias_gelu_backward(grad, x, channel)
    torch.testing.assert_close(dbias, dx.sum((0, 2, 3)).view(16, 1, 1), rtol=1e-4, atol=1e-4)
    dx, dbeta = ops.swish_backward(grad, x, channel)
    assert dbeta.shape == channel.shape
    y = ops.stochastic_gelu_forward(x, seed=7)
    assert torch.equal(ops.stochastic_gelu_backward(torch.ones_like(x), x, seed=7) != 0, y != 0)
    assert ops.geglu_backward(grad[:, :8], x, dim=1).shape == x.shape


def test_forward_backward_capture_in_a_cuda_graph(ops):
    x = torch.randn(1 << 16, device="cuda")
    grad = torch.randn_like(x)
    ops.gelu_forward(x), ops.gelu_backward(grad, x)  # compile before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.gelu_forward(x)
        dx = ops.gelu_backward(grad, x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.testing.assert_close(y, ops.gelu_forward(x))
    torch.testing.assert_close(dx, ops.gelu_backward(grad, x))


def test_host_functions_compile_without_graph_break(ops):
    # The wiring may call the host functions inside torch.compile'd code: dynamo must trace the
    # Triton launches (user-defined Triton kernels) with no graph break.
    def f(x):
        return ops.gelu_forward(x * 2.0) + 1.0

    x = torch.randn(4096, device="cuda")
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x))


def _parameter_terms(member, x, grad, p, q):
    """The per-element terms of each parameter gradient, in float64 torch (erfc, sigmoid)."""
    if member == "bias_gelu":
        h = x + p
        pdf = torch.exp(-h * h / 2) / math.sqrt(2 * math.pi)
        return [grad * (0.5 * torch.special.erfc(-h / math.sqrt(2)) + h * pdf)]
    if member == "swish":
        s = torch.sigmoid(p * x)
        return [grad * x * x * s * (1 - s)]
    z = (x - p) / q
    common = grad * x * torch.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * q)
    return [-common, -common * z]


@pytest.mark.parametrize("member", ["bias_gelu", "swish", "generalized"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["nchw", "channels_last", "last_dim"])
def test_parameter_gradients_on_the_gpu(ops, member, dtype, layout):
    """dβ, dμ, dσ, dbias at 2^20 elements: the float64 sums (within the fp32 accumulation's
    rounding), and the same bits on a second run (no atomics)."""
    shape, pshape = (
        ((1024, 1000), (1000,)) if layout == "last_dim" else ((16, 64, 32, 32), (64, 1, 1))
    )
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(shape, generator=g, device="cuda") * 2).to(dtype)
    grad = torch.randn(shape, generator=g, device="cuda").to(dtype)
    if layout == "channels_last":
        x, grad = (t.to(memory_format=torch.channels_last) for t in (x, grad))
    p = (torch.randn(pshape, generator=g, device="cuda") * 0.5 + (member == "swish")).to(dtype)
    q = (torch.rand(pshape, generator=g, device="cuda") + 0.5).to(dtype)
    call = {
        "bias_gelu": lambda: ops.bias_gelu_backward(grad, x, p)[1:],
        "swish": lambda: ops.swish_backward(grad, x, p)[1:],
        "generalized": lambda: ops.generalized_gelu_backward(grad, x, p, q)[1:],
    }[member]
    first, second = call(), call()
    terms = _parameter_terms(member, x.double(), grad.double(), p.double(), q.double())
    dims = (0, 2, 3) if len(shape) == 4 else (0,)
    for got, again, term in zip(first, second, terms, strict=False):
        assert torch.equal(got, again)
        want = term.sum(dims).view(pshape)
        bound = (
            2.0**-18 * term.abs().sum(dims).view(pshape) + torch.finfo(dtype).eps / 2 * want.abs()
        )
        assert ((got.double() - want).abs() <= bound).all()
