import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate, special
from torch import nn

import gelus
from gelus import _members
from gelus.init import _cached_gain, calculate_gain, init_layer_


def quad_gain(f, breakpoints=(0.0,)):
    """1/√E[f(z)²] by adaptive quadrature (scipy), split at the kinks: an independent oracle."""
    edges = [-40.0, *breakpoints, 40.0]
    total = 0.0
    for a, b in itertools.pairwise(edges):
        value, _ = integrate.quad(
            lambda z: f(z) ** 2 * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi),
            a,
            b,
            epsabs=1e-15,
            epsrel=1e-13,
            limit=200,
        )
        total += value
    return 1 / math.sqrt(total)


def test_gains_from_numerics_md():
    assert calculate_gain("gelu") == pytest.approx(1.5335, abs=5e-5)
    assert calculate_gain("gelu", approximate="tanh") == pytest.approx(1.5336, abs=5e-5)
    assert calculate_gain("gelu", approximate="sigmoid") == pytest.approx(1.5395, abs=5e-5)
    assert calculate_gain("silu") == pytest.approx(1.6765, abs=5e-5)
    assert calculate_gain("identity") == pytest.approx(1.0, rel=1e-14)


def test_relu_and_leaky_relu_match_torch():
    assert calculate_gain("relu") == pytest.approx(nn.init.calculate_gain("relu"), rel=1e-13)
    assert calculate_gain("leaky_relu", negative_slope=0.2) == pytest.approx(
        nn.init.calculate_gain("leaky_relu", 0.2), rel=1e-13
    )
    # torch's positional form
    assert calculate_gain("leaky_relu", 0.2) == pytest.approx(
        nn.init.calculate_gain("leaky_relu", 0.2), rel=1e-13
    )


def test_the_positional_param_is_leaky_relus_slope_only():
    with pytest.raises(ValueError, match="negative slope of 'leaky_relu'"):
        calculate_gain("tanh", 0.2)
    with pytest.raises(ValueError, match="once"):
        calculate_gain("leaky_relu", 0.2, negative_slope=0.1)


@pytest.mark.parametrize(
    "name, f, breakpoints",
    [
        ("gelu", lambda z: z * special.ndtr(z), (0.0,)),
        ("tanh", math.tanh, (0.0,)),
        ("sigmoid", special.expit, (0.0,)),
        ("elu", lambda z: z if z > 0 else math.expm1(z), (0.0,)),
        (
            "selu",
            lambda z: 1.0507009873554805 * (z if z > 0 else 1.6732632423543772 * math.expm1(z)),
            (0.0,),
        ),
        ("hardswish", lambda z: z * min(max(z + 3, 0), 6) / 6, (-3.0, 0.0, 3.0)),
        ("relu6", lambda z: min(max(z, 0), 6), (0.0, 6.0)),
        ("mish", lambda z: z * math.tanh(math.log1p(math.exp(z))) if z < 30 else z, (0.0,)),
    ],
)
def test_gain_matches_adaptive_quadrature(name, f, breakpoints):
    assert calculate_gain(name) == pytest.approx(quad_gain(f, breakpoints), rel=1e-9)


def test_aliases_stochastic_and_gated_gains():
    assert calculate_gain("gelu_new") == calculate_gain("gelu", approximate="tanh")
    assert calculate_gain("quick_gelu") == calculate_gain("gelu", approximate="sigmoid")
    # training-time moment E[z²·Φ(z)] = ½ by symmetry, so √2; in eval it is GELU's
    assert calculate_gain("stochastic_gelu") == pytest.approx(math.sqrt(2), rel=1e-13)
    assert calculate_gain(gelus.StochasticGELU().eval()) == pytest.approx(calculate_gain("gelu"))
    assert calculate_gain("geglu") == pytest.approx(calculate_gain("gelu"), rel=1e-13)
    assert calculate_gain("bias_gelu", num_features=8) == pytest.approx(calculate_gain("gelu"))
    # σ → small: the generalized GELU approaches ReLU, and so does its gain
    assert calculate_gain("generalized_gelu", sigma=1e-3) == pytest.approx(math.sqrt(2), rel=1e-3)


def test_gains_are_cached():
    calculate_gain("celu")
    hits = _cached_gain.cache_info().hits
    calculate_gain("CELU")
    assert _cached_gain.cache_info().hits == hits + 1


def test_init_layer_sets_std_and_zero_bias():
    layer = nn.Linear(400, 300)
    init_layer_(layer, "relu", generator=torch.Generator().manual_seed(0))
    assert layer.weight.std().item() == pytest.approx(math.sqrt(2 / 400), rel=0.02)
    assert (layer.bias == 0).all()
    conv = init_layer_(nn.Conv2d(8, 16, 3, bias=False), "gelu", mode="fan_out")
    assert conv.weight.std().item() == pytest.approx(
        calculate_gain("gelu") / math.sqrt(16 * 9), rel=0.1
    )
    init_layer_(layer, 2.0)
    assert layer.weight.std().item() == pytest.approx(2.0 / 20.0, rel=0.02)
    with pytest.raises(ValueError, match="fan_in"):
        init_layer_(layer, "gelu", mode="fan_avg")


NEEDS = {"bias_gelu": {"num_features": 512}}

# With the gain g, q = 1 is a fixed point of the layer-to-layer map of the second moment,
# q -> g²·E[f(√q·z)²]. For ReLU-like homogeneous f its slope there is 1 and for saturating f
# below 1 (stable), but for the GELU family it is above 1 (GELU 1.144, SiLU 1.173, hardswish
# 1.229; GEGLU, a product of two Gaussians, 2.14): the fixed point repels, and the finite-width
# fluctuation of each layer (≈ √(2/width)) grows by that factor per layer. Those are checked
# through 8 layers of width 1024 (GEGLU: 2), the others through 30 layers of width 512.
UNSTABLE = {
    "gelu", "bias_gelu", "clipped_gelu", "geglu", "generalized_gelu", "silu", "swish", "mish",
    "hardswish", "relu2", "xielu", "swiglu", "reglu", "clamped_swiglu",
}  # fmt: skip
# slope ≥ 1.7 per layer (GEGLU 2.14, relu² 2 — homogeneous of degree 2 —, xIELU 1.73, quadratic
# for x > 0): checked through 2 layers only
# SwiGLU 2.17, ReGLU 2 (as GEGLU), GPT-OSS's clamped SwiGLU 2.14
STEEP = {"geglu", "relu2", "xielu", "swiglu", "reglu", "clamped_swiglu"}
GATED = {m.name for m in _members.MEMBERS if m.gated}  # a·g(b): the input is twice the output


def variance_map_slope(name: str) -> float:
    """d/dq of g²·E[f(√q·z)²] at q = 1, by Gauss–Hermite in numpy (the training-time moment
    for the stochastic mask, a·GELU(b) with a, b ~ N(0, q) for GEGLU)."""
    from numpy.polynomial.hermite_e import hermegauss

    nodes, weights = hermegauss(120)
    weights = weights / weights.sum()
    gain = calculate_gain(name, **NEEDS.get(name, {}))
    module = gelus.get_activation(name, **NEEDS.get(name, {})).double()

    def second_moment(q):
        z = torch.from_numpy(math.sqrt(q) * nodes).reshape(-1, 1)
        with torch.no_grad():
            if name == "stochastic_gelu":
                squared = z * z * torch.from_numpy(special.ndtr(z.numpy()))
            elif name in GATED:
                squared = q * module.gate(z) ** 2  # a·g(b), E[a²] = q
            else:
                squared = module(z) ** 2
        return gain**2 * float(weights @ squared.mean(dim=1).numpy())

    return (second_moment(1.001) - second_moment(0.999)) / 0.002


def deep_mlp_second_moment_ratio(name: str, gain=None, depth=30, width=512, batch=32) -> float:
    """E[h²] of the last layer's pre-activations over E[x²] of layer 0's (no biases)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, width, generator=g)
    kwargs = {"num_features": width} if name == "bias_gelu" else {}
    widen = 2 if name in GATED else 1  # a gated unit halves its input
    h = torch.cat([x, torch.randn(batch, width, generator=g)][:widen], dim=1)  # layer 0
    for _ in range(depth):
        layer = nn.Linear(width, widen * width, bias=False)
        init_layer_(layer, gain if gain is not None else name, generator=g, **kwargs)
        with torch.no_grad():
            h = layer(gelus.get_activation(name, **kwargs)(h))
    return (h.pow(2).mean() / x.pow(2).mean()).item()


def test_unstable_set_is_where_the_variance_map_expands():
    slopes = {name: variance_map_slope(name) for name in gelus.list_activations()}
    assert {name for name, slope in slopes.items() if slope > 1 + 1e-6} == UNSTABLE
    assert slopes["gelu"] == pytest.approx(1.144, abs=1e-3)
    assert slopes["geglu"] == pytest.approx(1 + slopes["gelu"], abs=1e-6)
    assert slopes["swiglu"] == pytest.approx(1 + slopes["silu"], abs=1e-6)
    assert slopes["reglu"] == pytest.approx(1 + slopes["relu"], abs=1e-6)
    assert slopes["relu"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("name", gelus.list_activations())
def test_second_moment_is_preserved_through_a_deep_mlp(name):
    if name in UNSTABLE:
        depth, width = (2 if name in STEEP else 8), 1024
    else:
        depth, width = 30, 512
    ratio = deep_mlp_second_moment_ratio(name, depth=depth, width=width)
    assert 0.5 <= ratio <= 2.0, f"{name}: E[h²] ratio {ratio:.3g} after {depth} layers"


def test_without_the_gain_the_signal_drifts():
    assert deep_mlp_second_moment_ratio("gelu", gain=1.0) < 1e-6
    # ReLU's He gain (as in the paper's CIFAR-100 code) is too small for GELU
    assert deep_mlp_second_moment_ratio("gelu", gain=math.sqrt(2.0)) < 0.1
    assert deep_mlp_second_moment_ratio("elu", gain=math.sqrt(2.0)) > 2.0


def test_gain_quadrature_warns_but_stays_accurate_for_a_kink_off_the_grid():
    # clipped GELU with the clip at GELU = 0.3 has a kink near x = 0.45: not a multiple of 1/256
    with pytest.warns(RuntimeWarning, match="did not converge"):
        gain = calculate_gain("clipped_gelu", min=-10.0, max=0.3)
    x_kink = 0.4512  # approximately where GELU(x) = 0.3
    reference = quad_gain(lambda z: min(z * special.ndtr(z), 0.3), (0.0, x_kink))
    assert gain == pytest.approx(reference, rel=1e-7)
    assert np.isfinite(gain)
