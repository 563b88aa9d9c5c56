"""GEGLU (gelus/_geglu.py): the gate is the second half, on any dim; shapes it refuses."""

import numpy as np
import pytest
import torch

import gelus.functional as G
from oracles import exact, swish, tanh_form


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
    forms = {"none": exact, "tanh": tanh_form, "sigmoid": swish(1.702)}
    expected = a.detach().numpy() * forms[approximate](b.detach().numpy())
    y = G.geglu(x, dim, approximate)
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-12, atol=1e-15)
    assert torch.autograd.gradcheck(lambda t: G.geglu(t, dim, approximate), (x,))
    assert torch.autograd.gradgradcheck(lambda t: G.geglu(t, dim, approximate), (x,))


def test_geglu_rejects_odd_size_and_scalars():
    with pytest.raises(ValueError, match=r"dim=-1.*odd \(7\)"):
        G.geglu(torch.randn(3, 7))
    with pytest.raises(ValueError, match="scalar"):
        G.geglu(torch.tensor(1.0))


def test_geglu_saves_only_its_input():
    x = torch.randn(8, 16, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = G.geglu(x)
    y.sum().backward()
    assert len(saved) == 1 and saved[0] is x


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_type_geglu_rounds_the_product_once(dtype):
    """a·gelu(b) of half types (the CPU kernel, accurate=True, whose fp32 gelu is far below a
    half ulp): every finite gate b with |b| < 30 times a = 3 and a = 2^10, and the backward's
    grad·gelu(b), against float64, within half an ulp of the half type (correctly rounded: the
    product is formed in fp32 and rounded once; rounding gelu(b) to the half type first gave
    1.5 ulp at a = 3 and ~a/2 ulp where gelu(b) is subnormal), plus a times half an fp32
    subnormal ulp where the fp32 gelu(b) is itself subnormal (bf16's range is fp32's)."""
    from gelus import _geglu

    bits = torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(dtype)
    b = bits[torch.isfinite(bits)]
    b = b[b.float().abs() < 30]
    mantissa, tiny = {torch.float16: (10, 2.0**-14), torch.bfloat16: (7, 2.0**-126)}[dtype]
    gate = exact(b.double().numpy())
    for factor in (3.0, 2.0**10):
        a = torch.full_like(b, factor)
        reference = factor * gate
        spacing = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(reference), tiny))) - mantissa)
        y = _geglu.kernel_forward(torch.cat([a, b]), 0, accurate=True)
        grad = _geglu.kernel_backward(a, torch.cat([torch.ones_like(a), b]), 0, accurate=True)
        assert y.dtype == grad.dtype == dtype
        # plus the fp32 gelu(b)'s own rounding where it is an fp32 subnormal (bf16, b < −13)
        allowed = (0.5 + 1e-3) * spacing + factor * 2.0**-150
        for got in (y, grad[: b.numel()]):
            error = np.abs(got.double().numpy() - reference) / allowed
            assert error.max() <= 1, float(b[int(error.argmax())])
