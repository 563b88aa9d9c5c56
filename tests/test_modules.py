import copy
import math

import pytest
import torch
from scipy import special

import gelus

F64 = torch.float64
X = torch.linspace(-6, 6, 241, dtype=F64)


def exact_gelu(x):
    return x * torch.from_numpy(special.ndtr(x.numpy()))


def tanh_gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def sigmoid_gelu(x):
    return x * torch.sigmoid(1.702 * x)


@pytest.mark.parametrize(
    "module, definition",
    [
        (gelus.GELU(), exact_gelu),
        (gelus.GELU("tanh"), tanh_gelu),
        (gelus.GELU("sigmoid"), sigmoid_gelu),
        (gelus.QuickGELU(), sigmoid_gelu),
        (gelus.SiLU(), lambda x: x * torch.sigmoid(x)),
        (gelus.Swish(beta=2.0), lambda x: x * torch.sigmoid(2 * x)),
        (gelus.Swish(beta=0.5, learnable=True), lambda x: x * torch.sigmoid(0.5 * x)),
        (gelus.ClippedGELU(), lambda x: exact_gelu(x).clamp(-10, 10)),
        (gelus.ClippedGELU(-0.1, 2.0, "tanh"), lambda x: tanh_gelu(x).clamp(-0.1, 2.0)),
        (gelus.GeneralizedGELU(), exact_gelu),
        (gelus.StochasticGELU().eval(), exact_gelu),
    ],
    ids=lambda value: repr(value) if isinstance(value, torch.nn.Module) else "",
)
def test_module_matches_its_definition(module, definition):
    module = module.double()
    torch.testing.assert_close(module(X), definition(X), rtol=1e-12, atol=1e-14)


def test_clipped_gelu_clips_large_inputs():
    y = gelus.ClippedGELU()(torch.tensor([20.0, 1e6, -20.0]))
    assert y.tolist() == [10.0, 10.0, 0.0]


def test_bias_gelu_has_a_bias_parameter_that_learns():
    act = gelus.BiasGELU(num_features=4, approximate="tanh").double()
    assert [name for name, _ in act.named_parameters()] == ["bias"] and act.bias.shape == (4,)
    with torch.no_grad():
        act.bias.copy_(torch.tensor([0.0, 1.0, -1.0, 0.5], dtype=F64))
    x = torch.randn(8, 4, dtype=F64)
    torch.testing.assert_close(act(x), tanh_gelu(x + act.bias.detach()))
    act(x).sum().backward()
    assert act.bias.grad is not None and (act.bias.grad != 0).all()


def test_geglu_gates_the_second_half():
    x = torch.randn(3, 10, dtype=F64)
    y = gelus.GEGLU(dim=-1).double()(x)
    assert y.shape == (3, 5)
    torch.testing.assert_close(y, x[:, :5] * exact_gelu(x[:, 5:]))
    y = gelus.GEGLU(dim=0, approximate="tanh")(x[:2])
    torch.testing.assert_close(y, x[:1] * tanh_gelu(x[1:2]))


def test_learnable_swish_gets_a_gradient():
    act = gelus.Swish(beta=1.0, learnable=True)
    act(torch.randn(16)).pow(2).sum().backward()
    assert act.beta.grad is not None and act.beta.grad != 0
    assert list(gelus.Swish(beta=1.0).parameters()) == []


@pytest.mark.parametrize(
    "module, text",
    [
        (gelus.GELU("tanh"), "approximate='tanh'"),
        (gelus.ClippedGELU(-1.0, 5.0), "min=-1.0, max=5.0"),
        (gelus.Swish(beta=1.5), "beta=1.5"),
        (gelus.BiasGELU(7), "num_features=7"),
        (gelus.GEGLU(dim=1), "dim=1"),
        (gelus.GeneralizedGELU(num_channels=3), "num_channels=3"),
    ],
)
def test_extra_repr_shows_hyperparameters(module, text):
    assert text in repr(module)


def test_bad_hyperparameters_raise_one_clear_error():
    with pytest.raises(ValueError, match="not a GELU form"):
        gelus.GELU("erf")
    with pytest.raises(ValueError, match="not a GELU form"):
        gelus.BiasGELU(4, approximate="fast")
    with pytest.raises(ValueError, match="min < max"):
        gelus.ClippedGELU(min=1.0, max=1.0)


@pytest.mark.parametrize(
    "module",
    [
        gelus.GELU(),
        gelus.SiLU(),
        gelus.Swish(learnable=True),
        gelus.GeneralizedGELU(num_channels=2),
        gelus.StochasticGELU(),
        gelus.BiasGELU(2),
        gelus.GEGLU(),
        gelus.QuickGELU(),
        gelus.ClippedGELU(),
    ],
    ids=lambda m: type(m).__name__,
)
def test_modules_copy_and_round_trip_state_dict(module):
    clone = copy.deepcopy(module)
    clone.load_state_dict(module.state_dict())
    x = torch.randn(4, 2)
    module.eval(), clone.eval()
    torch.testing.assert_close(clone(x), module(x))
    assert module.__doc__ and "Example" in module.__doc__


def test_gelu_module_accurate_path_keeps_the_negative_tail():
    # float64 oracle: x·½·erfc(−x/√2); the fast path rounds these to −0 in float32
    x64 = torch.tensor([-9.5, -7.0, -4.0], dtype=torch.float64)
    oracle = x64 * 0.5 * torch.special.erfc(-x64 / math.sqrt(2.0))
    module = gelus.GELU(accurate=True)
    y = module(x64.float())
    assert torch.all(y < 0)
    torch.testing.assert_close(y.double(), oracle, rtol=2**-23, atol=0.0)
    assert "accurate=True" in repr(module)


def test_gelu_module_refuses_accurate_with_an_approximation():
    with pytest.raises(ValueError, match="exact form only"):
        gelus.GELU("tanh", accurate=True)
