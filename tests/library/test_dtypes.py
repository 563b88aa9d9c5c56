"""Every member refuses a tensor that is not real floating point (integer, bool, complex) with a
TypeError naming the dtype and the way out; SiLU (and Swish with a float β) of a complex tensor is
torch's complex SiLU. Before, an integer input came back silently truncated (issue 21)."""

import pytest
import torch

import gelus
import gelus.functional as G

NON_FLOATING = [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]

# name -> a call of the member on x (its other arguments floating point)
FUNCTIONS = {
    "gelu": G.gelu,
    "gelu-tanh": lambda x: G.gelu(x, "tanh"),
    "gelu-sigmoid": lambda x: G.gelu(x, "sigmoid"),
    "gelu-accurate": lambda x: G.gelu(x, accurate=True),
    "silu": G.silu,
    "silu-inplace": lambda x: G.silu(x, inplace=True),
    "swish": lambda x: G.swish(x, 0.5),
    "swish-tensor-beta": lambda x: G.swish(x, torch.tensor(1.5)),
    "generalized_gelu": lambda x: G.generalized_gelu(x, 0.0, 1.0),
    "generalized_gelu-tensor": lambda x: G.generalized_gelu(x, torch.zeros(()), torch.ones(())),
    "stochastic_gelu-training": lambda x: G.stochastic_gelu(x, True),
    "stochastic_gelu-eval": lambda x: G.stochastic_gelu(x, False),
    "bias_gelu": lambda x: G.bias_gelu(x, torch.zeros(x.shape[-1])),
    "geglu": G.geglu,
    "xielu": G.xielu,
    "laplace": G.laplace,
    "relu2": G.relu2,
    "sqrtsoftplus": G.sqrtsoftplus,
    "hard_mish": G.hard_mish,
}

MODULES = {
    "GELU": gelus.GELU,
    "GELU-tanh": lambda: gelus.GELU("tanh"),
    "QuickGELU": gelus.QuickGELU,
    "ClippedGELU": gelus.ClippedGELU,
    "SiLU": gelus.SiLU,
    "Swish": gelus.Swish,
    "Swish-learnable": lambda: gelus.Swish(learnable=True),
    "GeneralizedGELU": gelus.GeneralizedGELU,
    "StochasticGELU": gelus.StochasticGELU,
    "BiasGELU": lambda: gelus.BiasGELU(4),
    "GEGLU": gelus.GEGLU,
    "XIELU": gelus.XIELU,
    "Laplace": gelus.Laplace,
    "ReLU2": gelus.ReLU2,
    "SqrtSoftplus": gelus.SqrtSoftplus,
    "HardMish": gelus.HardMish,
}


def integers(dtype):
    return torch.arange(-4, 4).reshape(2, 4).to(dtype)


def message(dtype):
    return rf"floating-point tensor, got {dtype}; convert with x\.float\(\)"


@pytest.mark.parametrize("dtype", NON_FLOATING, ids=str)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_functions_refuse_integer_and_bool_inputs(name, dtype):
    member = name.split("-")[0]
    with pytest.raises(TypeError, match=rf"^{member} expects a " + message(dtype)):
        FUNCTIONS[name](integers(dtype))


@pytest.mark.parametrize("name", MODULES)
def test_modules_refuse_integer_inputs(name):
    module = MODULES[name]()
    with pytest.raises(TypeError, match=message(torch.int64)):
        module(integers(torch.int64))
    module.train(False)
    with pytest.raises(TypeError, match=message(torch.bool)):
        module(integers(torch.bool))


OPERATORS = {
    "gelu": lambda x: torch.ops.gelus.gelu(x),
    "swish": lambda x: torch.ops.gelus.swish(x, 1.0),
    "swish_tensor": lambda x: torch.ops.gelus.swish_tensor(x, torch.ones(())),
    "generalized_gelu": lambda x: torch.ops.gelus.generalized_gelu(
        x, torch.zeros(()), torch.ones(())
    ),
    "bias_gelu": lambda x: torch.ops.gelus.bias_gelu(x, torch.zeros(4)),
    "geglu": lambda x: torch.ops.gelus.geglu(x),
    "stochastic_gelu": lambda x: torch.ops.gelus.stochastic_gelu(
        x, torch.zeros(1, dtype=torch.int64)
    ),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_operators_refuse_integer_inputs_eager_and_traced(name):
    with pytest.raises(TypeError, match=rf"gelus::{name} expects a " + message(torch.int32)):
        OPERATORS[name](integers(torch.int32))
    # the fake kernel, which torch.compile and torch.export run, refuses too
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode, pytest.raises(TypeError, match=message(torch.int32)):
        OPERATORS[name](mode.from_tensor(integers(torch.int32)))


def test_integer_parameters_are_refused_as_well():
    x = torch.randn(2, 4)
    with pytest.raises(TypeError, match=message(torch.int64)):
        G.bias_gelu(x, torch.zeros(4, dtype=torch.int64))
    with pytest.raises(TypeError, match=message(torch.int64)):
        G.generalized_gelu(x, torch.zeros(4, dtype=torch.int64), 1.0)
    with pytest.raises(TypeError, match=message(torch.int64)):
        G.swish(x, torch.ones((), dtype=torch.int64))


@pytest.mark.parametrize("name", ["gelu", "geglu", "xielu", "bias_gelu"])
def test_complex_inputs_are_refused_with_their_own_way_out(name):
    with pytest.raises(TypeError, match=r"got torch\.complex64; take x\.real or x\.abs\(\) first"):
        FUNCTIONS[name](torch.randn(2, 4, dtype=torch.complex64))


def test_refused_under_torch_compile_too():
    compiled = torch.compile(G.gelu, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match=message(torch.int64)):
        compiled(integers(torch.int64))


# ------------------------------------------------------------------------------ complex SiLU


def complex_silu_oracle(z):
    """z·σ(z) = z / (1 + e^(−z)) in complex128 arithmetic, written out."""
    return z / (1 + torch.exp(-z))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_silu_of_complex_is_torch_silu(dtype):
    generator = torch.Generator().manual_seed(0)
    z = torch.complex(
        3 * torch.randn(64, dtype=torch.float64, generator=generator),
        3 * torch.randn(64, dtype=torch.float64, generator=generator),
    ).to(dtype)
    expected = torch.nn.functional.silu(z)
    for got in (G.silu(z), G.swish(z, 1.0), gelus.SiLU()(z)):
        assert got.dtype == dtype
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    tolerance = 1e-12 if dtype == torch.complex128 else 1e-5
    torch.testing.assert_close(
        G.silu(z).to(torch.complex128),
        complex_silu_oracle(z.to(torch.complex128)),
        rtol=tolerance,
        atol=tolerance,
    )
    # swish with another float β is z·σ(βz)
    torch.testing.assert_close(
        G.swish(z, 0.5).to(torch.complex128),
        z.to(torch.complex128) / (1 + torch.exp(-0.5 * z.to(torch.complex128))),
        rtol=tolerance,
        atol=tolerance,
    )
    inplace = z.clone()
    assert G.silu(inplace, inplace=True) is inplace
    torch.testing.assert_close(inplace, expected, rtol=0, atol=0)


def test_silu_of_complex_under_autograd_is_refused_as_torch_refuses_it():
    z = torch.randn(5, dtype=torch.complex128, requires_grad=True)
    with pytest.raises(RuntimeError, match="silu does not support automatic differentiation"):
        torch.nn.functional.silu(z)
    with pytest.raises(RuntimeError, match="silu does not support automatic differentiation"):
        G.silu(z)
