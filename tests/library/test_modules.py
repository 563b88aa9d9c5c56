"""The modules (gelus/modules.py): definitions, hyperparameters, state dicts, ``inplace``, and
timm's ``act_layer(inplace=True)`` contract."""

import copy
import math

import pytest
import torch

import gelus
import oracles
from torchvision_stand_in import import_modules

F64 = torch.float64
X = torch.linspace(-6, 6, 241, dtype=F64)


def exact_gelu(x):
    return torch.from_numpy(oracles.exact(x.numpy()))


def tanh_gelu(x):
    return torch.from_numpy(oracles.tanh_form(x.numpy()))


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
        gelus.Laplace(),
        gelus.ReLU2(),
        gelus.SqrtSoftplus(),
        gelus.XIELU(),
        gelus.HardMish(),
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


# --- inplace, and timm's act_layer(inplace=True) ------------------------------------------

ALL_MODULES = [
    gelus.GELU,
    gelus.QuickGELU,
    gelus.ClippedGELU,
    gelus.SiLU,
    gelus.Swish,
    lambda inplace: gelus.Swish(learnable=True, inplace=inplace),
    gelus.GeneralizedGELU,
    lambda inplace: gelus.GeneralizedGELU(num_channels=6, inplace=inplace),
    gelus.StochasticGELU,
    lambda inplace: gelus.BiasGELU(6, inplace=inplace),
    gelus.GEGLU,
    gelus.Laplace,
    gelus.ReLU2,
    gelus.SqrtSoftplus,
    gelus.XIELU,
    gelus.HardMish,
]


@pytest.mark.parametrize("factory", ALL_MODULES, ids=lambda f: getattr(f, "__name__", "lambda"))
def test_every_module_accepts_inplace_and_honours_it_as_torch_does(factory):
    torch.manual_seed(0)
    out_of_place = factory(inplace=False).eval()
    in_place = factory(inplace=True).eval()
    in_place.load_state_dict(out_of_place.state_dict())
    assert ("inplace=True" in repr(in_place)) == in_place.inplace
    a = torch.randn(4, 6, requires_grad=True)
    x = a * 1.5  # a non-leaf, as after a conv or a norm
    expected = out_of_place(x)
    y = in_place(x)
    torch.testing.assert_close(y, expected)
    if isinstance(in_place, gelus.GEGLU):
        assert not in_place.inplace  # halves the shape: the flag is accepted and ignored
    else:
        assert y is x  # written into the input, as nn.SiLU(inplace=True)
    # the gradient through the in-place call is the out-of-place one
    (grad,) = torch.autograd.grad(y.sum(), a)
    (reference,) = torch.autograd.grad(out_of_place(a * 1.5).sum(), a)
    torch.testing.assert_close(grad, reference)
    with torch.no_grad():  # without autograd, no copy of the input is made
        x = torch.randn(4, 6)
        expected = out_of_place(x)
        torch.testing.assert_close(in_place(x), expected)


def _import_timm():
    """timm, with torchvision's stand-in where torchvision is broken (torchvision_stand_in)."""
    (timm,), used = import_modules("timm")
    return timm, used


TIMM_ACTS = [
    gelus.GELU,
    gelus.QuickGELU,
    gelus.SiLU,
    gelus.Swish,
    gelus.GeneralizedGELU,
    gelus.StochasticGELU,
    gelus.ClippedGELU,
    gelus.HardMish,
]


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["resnet18", "mobilenetv3_small_100"])
@pytest.mark.parametrize("act", TIMM_ACTS, ids=lambda c: c.__name__)
def test_timm_models_build_with_gelus_act_layer_and_train(model_name, act):
    timm, _ = _import_timm()
    model = timm.create_model(model_name, pretrained=False, num_classes=10, act_layer=act)
    kinds = {type(m) for m in model.modules()}
    assert act in kinds  # timm built the model with our class, as act_layer(inplace=True)
    assert all(m.inplace for m in model.modules() if isinstance(m, act) and act is not gelus.GEGLU)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    loss = model(x).logsumexp(dim=1).mean()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
