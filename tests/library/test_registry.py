import math

import pytest
import torch
from torch import nn

import gelus
from gelus import _members
from gelus.registry import ACTIVATIONS, ALIASES, FunctionActivation, UnknownActivationError

F64 = torch.float64
X = torch.cat([torch.linspace(-8, 8, 321, dtype=F64), torch.tensor([12.0, 25.0], dtype=F64)])
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


# Each name's own definition, written out from its source library (not from gelus):
def hf_gelu(x):  # transformers GELUActivation._gelu_python; F.gelu by default
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def hf_gelu_new(x):  # transformers NewGELUActivation (GPT-2 / BERT)
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3.0))))


def hf_gelu_fast(x):  # transformers FastGELUActivation: note the truncated constant
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def hf_gelu_accurate(x):  # transformers AccurateGELUActivation (MEGA)
    return 0.5 * x * (1 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3))))


def torch_gelu_tanh(x):  # HF gelu_pytorch_tanh / GELUTanh, timm gelu_tanh
    return nn.functional.gelu(x, approximate="tanh")


def hf_gelu_python_tanh(x):  # transformers GELUTanh(use_gelu_tanh_python=True)
    return x * 0.5 * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3.0))))


def quick_gelu(x):  # HF QuickGELUActivation, timm quick_gelu, OpenAI CLIP, TE qgelu
    return x * torch.sigmoid(1.702 * x)


def hf_gelu_10(x):  # transformers ClippedGELUActivation(-10, 10)
    return torch.clip(hf_gelu(x), -10, 10)


def silu(x):
    return x * torch.sigmoid(x)


REFERENCE = {
    # aliases
    "gelu_python": hf_gelu,
    "gelu_new": hf_gelu_new,
    "gelu_fast": hf_gelu_fast,
    "gelu_accurate": hf_gelu_accurate,
    "gelu_pytorch_tanh": torch_gelu_tanh,
    "gelu_python_tanh": hf_gelu_python_tanh,
    "gelu_10": hf_gelu_10,
    "quick_gelu": quick_gelu,
    "linear": lambda x: x,
    "gelu_tanh": torch_gelu_tanh,
    "hard_swish": lambda x: x * nn.functional.relu6(x + 3.0) / 6.0,
    "hard_sigmoid": lambda x: nn.functional.relu6(x + 3.0) / 6.0,
    "qgelu": quick_gelu,
    "gelu_erf": hf_gelu,
    "gelu_exact": hf_gelu,
    "gelu_sigmoid": quick_gelu,
    "soi_map": hf_gelu,  # in eval: the expectation x·Φ(x)
    # canonical names users arrive with from HF / timm
    "gelu": hf_gelu,
    "silu": silu,
    "swish": silu,  # HF and timm: swish is SiLU
    "relu": lambda x: x.clamp_min(0),
    "leaky_relu": lambda x: torch.where(x > 0, x, 0.01 * x),
    "elu": lambda x: torch.where(x > 0, x, torch.expm1(x)),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "identity": lambda x: x,
    "mish": lambda x: x * torch.tanh(torch.log1p(torch.exp(x))),
    "stochastic_gelu": hf_gelu,
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_name_matches_its_own_definition(name):
    module = gelus.get_activation(name).double().eval()
    torch.testing.assert_close(module(X), REFERENCE[name](X), rtol=1e-9, atol=1e-12)


def test_every_alias_is_checked_and_resolves_to_a_canonical_name():
    assert set(ALIASES) <= set(REFERENCE)
    assert not set(ALIASES) & set(ACTIVATIONS)
    for alias in ALIASES.values():
        assert alias.canonical in ACTIVATIONS and alias.source


def test_the_tanh_names_are_not_the_exact_form():
    # the tolerance above is tight enough to tell the forms apart (they differ by up to 4.7e-4)
    assert (hf_gelu_new(X) - hf_gelu(X)).abs().max() > 1e-4
    assert (quick_gelu(X) - hf_gelu(X)).abs().max() > 1e-2


def test_names_users_arrive_with_are_all_known():
    names = [
        "gelu",
        "gelu_new",
        "gelu_fast",
        "gelu_accurate",
        "gelu_pytorch_tanh",
        "gelu_python_tanh",
        "quick_gelu",
        "gelu_10",
        "gelu_tanh",
        "qgelu",
        "swish",
        "silu",
        "geglu",
        "gelu_erf",
        "relu",
        "elu",
        "leaky_relu",
        "tanh",
        "sigmoid",
        "identity",
        "linear",
    ]
    known = set(gelus.list_activations(aliases=True))
    assert set(names) <= known


def test_matching_is_case_and_separator_insensitive():
    assert repr(gelus.get_activation("GELU-Tanh")) == repr(gelus.get_activation("gelu_tanh"))
    assert gelus.resolve_activation(" Quick-GELU ") == ("gelu", {"approximate": "sigmoid"})


def test_every_call_returns_a_fresh_module():
    a, b = gelus.get_activation("generalized_gelu"), gelus.get_activation("generalized_gelu")
    assert a is not b and a.mu is not b.mu
    prototype = gelus.GeneralizedGELU(num_channels=3)
    copies = [gelus.get_activation(prototype) for _ in range(2)]
    assert copies[0] is not prototype and copies[0].mu is not copies[1].mu
    torch.testing.assert_close(copies[0].mu, prototype.mu)


def test_classes_and_callables_pass_through():
    assert isinstance(gelus.get_activation(nn.Hardtanh, min_val=-2.0), nn.Hardtanh)
    wrapped = gelus.get_activation(torch.clamp, min=-1.0, max=1.0)
    assert isinstance(wrapped, FunctionActivation)
    torch.testing.assert_close(wrapped(X), X.clamp(-1, 1))
    with pytest.raises(TypeError, match="pass the class"):
        gelus.get_activation(nn.ReLU(), inplace=True)
    with pytest.raises(TypeError, match="expects a name"):
        gelus.get_activation(3)


def test_kwargs_reach_the_module_and_aliases_refuse_contradictions():
    assert gelus.get_activation("gelu", approximate="tanh").approximate == "tanh"
    assert gelus.get_activation("leaky_relu", negative_slope=0.2).negative_slope == 0.2
    assert gelus.get_activation("gelu_10", approximate="none").max == 10.0  # agreeing is fine
    with pytest.raises(ValueError, match="approximate='tanh'"):
        gelus.get_activation("gelu_new", approximate="none")
    with pytest.raises(TypeError, match="relu"):
        gelus.get_activation("relu", beta=2.0)


def test_unknown_name_raises_one_error_listing_the_names():
    with pytest.raises(UnknownActivationError) as info:
        gelus.get_activation("gleu")
    error = info.value
    assert isinstance(error, ValueError) and isinstance(error, KeyError)
    message = str(error)
    assert "Did you mean 'gelu'" in message
    for name in gelus.list_activations(aliases=True):
        assert name in message


def test_every_canonical_name_builds_and_runs():
    required = {"bias_gelu": {"num_features": 4}}
    x = torch.randn(3, 4)
    for name in gelus.list_activations():
        module = gelus.get_activation(name, **required.get(name, {}))
        assert isinstance(module, nn.Module)
        assert torch.isfinite(module(x)).all(), name
    assert gelus.list_activations() == sorted(ACTIVATIONS)
    for baseline in ("relu", "elu", "leaky_relu", "tanh", "sigmoid", "identity", "silu"):
        assert baseline in gelus.list_activations()


def test_inplace_reaches_every_gelus_module_as_torch_and_timm_pass_it():
    required = {"bias_gelu": {"num_features": 4}}
    for name in gelus.list_activations():
        module = gelus.get_activation(name, **required.get(name, {}))
        if type(module).__module__ != "gelus.modules":
            continue  # torch's own modules, as torch defines them
        module = gelus.get_activation(name, inplace=True, **required.get(name, {}))
        assert module.inplace or _members.by_name()[name].gated, name  # gated: no in-place
    assert gelus.get_activation("silu", inplace=True).inplace


def test_names_from_hugging_face_and_timm_are_canonical():
    for name in ("laplace", "relu2", "sqrtsoftplus", "xielu", "hard_mish"):
        assert name in gelus.list_activations()
