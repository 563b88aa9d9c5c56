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
