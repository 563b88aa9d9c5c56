"""The Triton kernels of the members with parameters, GEGLU, stochastic GELU, layouts and errors.

Oracles: the same functions written as plain float64 torch compositions (erfc, sigmoid) and
differentiated by autograd, which shares no code with the kernels.
"""

import math
import subprocess
import sys

import pytest
import torch

from _triton_support import DEVICE, FLOATS, FORMS, on_device, ops, triton_marks

pytestmark = triton_marks

HALF = (torch.float16, torch.bfloat16)


def gelu64(h: torch.Tensor, approximate: str) -> torch.Tensor:
    if approximate == "none":
        return h * 0.5 * torch.special.erfc(-h / math.sqrt(2.0))
    if approximate == "tanh":
        return h * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (h + 0.044715 * h**3))
    return h * torch.sigmoid(1.702 * h)


def close(result: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype, scale=1.0) -> None:
    """result ≈ reference: within the rounding of result's dtype, or of the fp32 math of a half
    input (dtype); `scale` widens the absolute part for sums of many terms."""
    eps = torch.finfo(result.dtype).eps
    if dtype in HALF and result.dtype in HALF:
        rtol = atol = eps  # fp32 math rounded once
    else:
        rtol = atol = 64 * max(eps, torch.finfo(torch.float32).eps if dtype in HALF else 0.0)
    torch.testing.assert_close(
        result.double().cpu(), reference.detach().double().cpu(), rtol=rtol, atol=atol * scale
    )


def _input(shape, dtype, channels_last=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    return x.to(DEVICE)


# Parameter layouts: (x shape, parameter shape, channels_last): scalar, per channel on the last
# dim (the columns kernel), per channel on dim 1 of NCHW (the rows kernel), and channels_last.
LAYOUTS = [
    ((6, 40), (), False),
    ((6, 40), (40,), False),
    ((2, 5, 3, 7), (5, 1, 1), False),
    ((2, 5, 3, 7), (5, 1, 1), True),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_generalized_gelu_values_and_gradients(dtype, layout):
    shape, pshape, channels_last = layout
    x = _input(shape, dtype, channels_last)
    g = torch.Generator().manual_seed(1)
    mu = (torch.randn(pshape, generator=g) * 0.5).to(DEVICE)
    sigma = (torch.rand(pshape, generator=g) + 0.5).to(DEVICE)
    grad = _input(shape, dtype, channels_last, seed=2)

    x64, mu64, sigma64 = (t.detach().double().requires_grad_() for t in (x, mu, sigma))
    y64 = x64 * 0.5 * torch.special.erfc(-(x64 - mu64) / (sigma64 * math.sqrt(2.0)))
    y64.backward(grad.double())

    y = ops.generalized_gelu_forward(x, mu, sigma)
    assert y.dtype == dtype and y.stride() == x.stride()
    close(y, y64, dtype)
    dx, dmu, dsigma = ops.generalized_gelu_backward(grad, x, mu, sigma)
    close(dx, x64.grad, dtype)
    assert dmu.shape == mu.shape and dsigma.shape == sigma.shape
    # a sum of up to 240 terms of size ~3: its rounding grows with the count
    close(dmu, mu64.grad, dtype, scale=240)
    close(dsigma, sigma64.grad, dtype, scale=240)


def test_generalized_gelu_float_parameters_and_edges():
    x = on_device([math.inf, -math.inf, math.nan, -0.0, 1.0, -40.0])
    y = ops.generalized_gelu_forward(x, 0.5, 2.0).cpu()
    assert y[0] == math.inf and y[1] == 0 and math.isnan(y[2])
    assert math.copysign(1.0, y[3].item()) == -1.0
    dx, dmu, dsigma = ops.generalized_gelu_backward(torch.ones_like(x), x, 0.5, 2.0)
    assert dmu is None and dsigma is None
    assert dx[0].item() == 1.0 and dx[1].item() == 0.0
    mu, sigma = on_device([0.5]).reshape(()), on_device([2.0]).reshape(())
    _, dmu, dsigma = ops.generalized_gelu_backward(torch.ones_like(x[:2]), x[:2], mu, sigma)
    assert dmu.item() == 0.0 and dsigma.item() == 0.0  # not inf·0 = nan at ±inf


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_swish_tensor_beta_gradients(dtype, layout):
    shape, pshape, channels_last = layout
    x = _input(shape, dtype, channels_last)
    beta = (torch.rand(pshape, generator=torch.Generator().manual_seed(3)) + 0.5).to(DEVICE)
    grad = _input(shape, dtype, channels_last, seed=4)
    x64, beta64 = (t.detach().double().requires_grad_() for t in (x, beta))
    y64 = x64 * torch.sigmoid(beta64 * x64)
    y64.backward(grad.double())
    close(ops.swish_forward(x, beta), y64, dtype)
    dx, dbeta = ops.swish_backward(grad, x, beta)
    close(dx, x64.grad, dtype)
    close(dbeta, beta64.grad, dtype, scale=2000)  # a sum of up to 240 terms of size ~10


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", FORMS)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
def test_bias_gelu_gradients(dtype, approximate, layout):
    shape, pshape, channels_last = layout
    x = _input(shape, dtype, channels_last)
    bias = torch.randn(pshape, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    grad = _input(shape, dtype, channels_last, seed=6)
    x64, bias64 = (t.detach().double().requires_grad_() for t in (x, bias))
    y64 = gelu64(x64 + bias64, approximate)
    y64.backward(grad.double())
    y = ops.bias_gelu_forward(x, bias, approximate)
    assert y.stride() == x.stride()
    close(y, y64, dtype)
    dx, dbias = ops.bias_gelu_backward(grad, x, bias, approximate)
    close(dx, x64.grad, dtype)
    assert dbias.shape == bias.shape
    close(dbias, bias64.grad, dtype, scale=240)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", FORMS)
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_geglu_values_and_gradients(dtype, approximate, dim):
    x = _input((4, 6, 10), dtype)
    a64, b64 = x.detach().double().chunk(2, dim=dim)
    x64 = x.detach().double().requires_grad_()
    a64, b64 = x64.chunk(2, dim=dim)
    y64 = a64 * gelu64(b64, approximate)
    grad = _input(tuple(y64.shape), dtype, seed=7)
    y64.backward(grad.double())
    y = ops.geglu_forward(x, dim, approximate)
    assert y.shape == y64.shape and y.dtype == dtype
    close(y, y64, dtype, scale=10)
    close(ops.geglu_backward(grad, x, dim, approximate), x64.grad, dtype, scale=10)


@pytest.mark.parametrize("dtype", FLOATS)
def test_stochastic_gelu_mask(dtype):
    x = on_device([0.3] * 4000 + [math.inf, -math.inf, math.nan], dtype)
    y = ops.stochastic_gelu_forward(x, seed=123, offset=8)
    again = ops.stochastic_gelu_forward(x, seed=123, offset=8)
    other = ops.stochastic_gelu_forward(x, seed=124, offset=8)
    torch.testing.assert_close(y, again, rtol=0, atol=0, equal_nan=True)  # reproducible
    assert not torch.equal(y[:4000], other[:4000])
    kept = (y[:4000] != 0).double().mean().item()
    p = 0.5 * math.erfc(-0.3 / math.sqrt(2))  # Φ(0.3) = 0.618
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / 4000)  # 5 standard errors
    assert y[4000] == math.inf and y[4001] == 0 and math.isnan(y[4002].item())
    # backward: the same mask, regenerated from x, seed and offset
    grad = on_device([2.0] * 4003, dtype)
    dx = ops.stochastic_gelu_backward(grad, x, seed=123, offset=8)
    assert torch.equal(dx[:4000] != 0, y[:4000] != 0)
    assert dx[4000] == 2 and dx[4001] == 0
    # the stream is indexed by element: a shifted offset shifts the mask
    shifted = ops.stochastic_gelu_forward(x[4:4000], seed=123, offset=12)
    assert torch.equal(shifted != 0, y[4:4000] != 0)
    with pytest.raises(ValueError, match="multiple of 4"):
        ops.stochastic_gelu_forward(x, seed=1, offset=6)
    with pytest.raises(ValueError, match="seed"):
        ops.stochastic_gelu_forward(x, seed=2**31)


@pytest.mark.parametrize("approximate", FORMS)
def test_strided_and_channels_last_inputs(approximate):
    base = _input((2, 6, 5, 4), torch.float32)
    for x in (base.to(memory_format=torch.channels_last), base[:, ::2], base.transpose(1, 3)):
        y = ops.gelu_forward(x, approximate)
        assert torch.equal(y, ops.gelu_forward(x.contiguous(), approximate))
        grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(8)).to(DEVICE)
        dx = ops.gelu_backward(grad, x, approximate)
        assert torch.equal(dx, ops.gelu_backward(grad, x.contiguous(), approximate))
    channels_last = base.to(memory_format=torch.channels_last)
    assert ops.gelu_forward(channels_last).is_contiguous(memory_format=torch.channels_last)


def test_empty_tensors():
    x = torch.empty(0, 3, device=DEVICE)
    assert ops.gelu_forward(x).shape == (0, 3)
    dx, dbias = ops.bias_gelu_backward(x, x, torch.zeros(3, device=DEVICE))
    assert dx.shape == (0, 3) and dbias.tolist() == [0.0, 0.0, 0.0]
    empty = torch.empty(0, device=DEVICE)
    assert ops.generalized_gelu_forward(empty, 0.0, torch.ones(())).shape == (0,)
    dx, dmu, dsigma = ops.generalized_gelu_backward(empty, empty, torch.ones(()), torch.ones(()))
    assert dx.shape == (0,) and dmu.item() == 0.0 and dsigma.item() == 0.0


def test_bad_input_raises_one_clear_error():
    x = torch.ones(4, 6, device=DEVICE)
    with pytest.raises(TypeError, match=r"int64.*\.float\(\)"):
        ops.gelu_forward(torch.ones(3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match="approximate='erf' is not a GELU form"):
        ops.gelu_forward(x, "erf")
    with pytest.raises(ValueError, match="one dimension"):
        ops.generalized_gelu_forward(
            x, torch.zeros(4, 1, device=DEVICE), torch.ones(6, device=DEVICE)
        )
    assert not ops.supports_parameters(x, torch.zeros(4, 6, device=DEVICE))
    assert ops.supports_parameters(x, torch.zeros(6, device=DEVICE), 1.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        ops.bias_gelu_forward(x, torch.zeros(2, 4, 6, device=DEVICE))
    with pytest.raises(ValueError, match="odd"):
        ops.geglu_forward(torch.ones(4, 5, device=DEVICE))
    with pytest.raises(ValueError, match="shape"):
        ops.gelu_backward(torch.ones(3, device=DEVICE), x)


def test_import_gelus_does_not_import_triton():
    code = (
        "import sys, torch, gelus, gelus._triton\n"
        "gelus.functional.gelu(torch.randn(8)).sum()\n"
        "assert 'triton' not in sys.modules, 'import gelus imported triton'\n"
        "assert not gelus._triton.available(torch.randn(2)), 'CPU tensors keep their routes'\n"
        "assert not gelus._triton.available(torch.ones(2, dtype=torch.int64))\n"
    )
    # with the interpreter on, too: CPU tensors are never sent to the kernels
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("shape, pshape", [((150, 130), (130,)), ((2**17 + 5,), ())])
def test_parameter_reductions_span_several_programs(shape, pshape):
    # Several column blocks and row blocks (columns kernel), several chunks of one row (rows
    # kernel): the partial sums of every program must be added up once.
    x = _input(shape, torch.float32)
    mu = torch.full(pshape, 0.25, device=DEVICE)
    sigma = torch.full(pshape, 1.5, device=DEVICE)
    grad = _input(shape, torch.float32, seed=9)
    x64, mu64, sigma64 = (t.detach().double().requires_grad_() for t in (x, mu, sigma))
    y64 = x64 * 0.5 * torch.special.erfc(-(x64 - mu64) / (sigma64 * math.sqrt(2.0)))
    y64.backward(grad.double())
    _, dmu, dsigma = ops.generalized_gelu_backward(grad, x, mu, sigma)
    for result, reference in ((dmu, mu64.grad), (dsigma, sigma64.grad)):
        torch.testing.assert_close(result.double().cpu(), reference.cpu(), rtol=1e-5, atol=1e-3)


def test_geglu_rows_longer_than_a_block():
    x = _input((3, 2 * 9000), torch.float32)  # 9000 gate columns: several blocks per row
    x64 = x.detach().double().requires_grad_()
    a64, b64 = x64.chunk(2, dim=-1)
    y64 = a64 * gelu64(b64, "none")
    grad = _input(tuple(y64.shape), torch.float32, seed=10)
    y64.backward(grad.double())
    close(ops.geglu_forward(x), y64, torch.float32, scale=10)
    close(ops.geglu_backward(grad, x), x64.grad, torch.float32, scale=10)
