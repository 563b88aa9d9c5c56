"""Initialization gains for every registered activation, and a layer initializer that uses them.

The rule: the gain g of an activation f is

    g = 1 / √E[f(z)²],   z ~ N(0, 1),

so that a layer y = W·f(x) with i.i.d. weights of standard deviation g/√fan_in maps unit-variance
Gaussian pre-activations x to pre-activations y with E[y²] = 1 again. For ReLU this is He et al.'s
√2 and for the identity 1, as in ``torch.nn.init.calculate_gain``; for the other nonlinearities
torch uses different rules (tanh 5/3, sigmoid 1, SELU 3/4), which is why the numbers below differ
from torch's for those.

E[f(z)²] is computed in float64 by Gauss–Hermite quadrature (``numpy.polynomial.hermite_e``,
200 nodes, checked against 100 nodes): exact to rounding for the smooth members of the family.
Functions with a kink (ELU, hardswish, relu6, …) make Gauss–Hermite converge slowly (ELU: 1e-5
relative with 200 nodes), so when the two node counts disagree the integral is recomputed by
Gauss–Legendre panels on [−16, 16] whose edges fall on multiples of 1/4 (where the kinks of the
registered activations lie), halving the panels until two widths agree.

What the gain does and does not promise: q = 1 is a fixed point of the layer-to-layer map of the
second moment, q -> g²·E[f(√q·z)²]. Its slope there is 1 for ReLU-like f and below 1 for
saturating f (tanh, sigmoid, ELU, SELU), but above 1 for the GELU family (GELU 1.144, SiLU 1.173,
hardswish 1.229, GEGLU 2.14): the fixed point repels, so in a deep net without normalization the
finite-width fluctuations (≈ √(2/width) per layer) grow geometrically with depth.
"""

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from gelus.functional import gelu
from gelus.modules import GatedMember, StochasticGELU
from gelus.registry import get_activation, resolve_activation

__all__ = ["calculate_gain", "init_layer_"]

_HERMITE_NODES = 200  # nodes reach |z| ≈ 27; numpy's hermegauss overflows beyond ~350 nodes
_LEGENDRE_NODES = 20  # per panel
_PANEL_RANGE = 16.0  # the N(0,1) mass beyond ±16 is ~1e-57: invisible in float64
_TOLERANCE = 1e-12  # relative agreement required between two quadrature rules

_SquaredResponse = Callable[[Any], Any]  # numpy array of z -> numpy array of f(z)² (numpy is lazy)


def _hermite_expectation(squared: _SquaredResponse, nodes: int) -> float:
    from numpy.polynomial.hermite_e import hermegauss

    z, weights = hermegauss(nodes)  # weight exp(−z²/2); the weights sum to √(2π)
    return float(weights @ squared(z)) / math.sqrt(2.0 * math.pi)


def _panel_expectation(squared: _SquaredResponse, width: float) -> float:
    import numpy as np
    from numpy.polynomial.legendre import leggauss

    t, weights = leggauss(_LEGENDRE_NODES)
    left = np.arange(-_PANEL_RANGE, _PANEL_RANGE, width)[:, None]
    z = left + 0.5 * width * (t + 1.0)
    density = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    values = squared(z.ravel()).reshape(z.shape)
    return float((0.5 * width * weights * density * values).sum())


def _gaussian_second_moment(squared: _SquaredResponse) -> float:
    """E[h(z)], z ~ N(0, 1), for h = f², checking that the quadrature has converged."""
    estimate = _hermite_expectation(squared, _HERMITE_NODES)
    if abs(estimate - _hermite_expectation(squared, _HERMITE_NODES // 2)) <= _TOLERANCE * estimate:
        return estimate
    width = 0.25
    estimate = _panel_expectation(squared, width)
    while width > 1 / 256:
        width /= 2
        finer = _panel_expectation(squared, width)
        if abs(finer - estimate) <= _TOLERANCE * abs(finer):
            return finer
        estimate = finer
    warnings.warn(
        f"the gain quadrature did not converge to {_TOLERANCE:g} (a kink off the 1/256 grid?); "
        "the result is accurate to about 1e-8",
        RuntimeWarning,
        stacklevel=3,
    )
    return estimate


def _squared_response(module: nn.Module) -> _SquaredResponse:
    """z -> f(z)² (averaged over the module's features) in float64, for a fresh module."""
    module = module.double()
    # modules with per-feature parameters get the same z in every feature (input [n, features])
    width = 1
    for attribute in ("num_features", "num_channels", "num_parameters"):
        if getattr(module, attribute, None):
            width = getattr(module, attribute)
            break

    def squared(z):
        x = torch.from_numpy(z).reshape(-1, 1).expand(-1, width).contiguous()
        with torch.no_grad():
            if isinstance(module, StochasticGELU) and module.training:
                values = x * gelu(x)  # E_m[(x·m)²] = x²·Φ(x): the training-time moment
            elif isinstance(module, GatedMember):
                values = module.gate(x) ** 2  # a·g(b) with E[a²] = 1
            else:
                values = module(x) ** 2
        return values.mean(dim=1).numpy()

    return squared


def _gain(module: nn.Module) -> float:
    second_moment = _gaussian_second_moment(_squared_response(module))
    if not second_moment > 0:
        raise ValueError(f"{module!r} has E[f(z)²] = {second_moment}; no gain normalizes it")
    return 1.0 / math.sqrt(second_moment)


@functools.cache
def _cached_gain(canonical: str, arguments: tuple[tuple[str, Any], ...]) -> float:
    return _gain(get_activation(canonical, **dict(arguments)))


def calculate_gain(
    activation: str | nn.Module | type[nn.Module], param: float | None = None, **kwargs: Any
) -> float:
    """The gain 1/√E[f(z)²], z ~ N(0, 1), of an activation, for weights of std gain/√fan_in.

    ``activation`` is anything :func:`gelus.get_activation` accepts (a name or alias with its
    keyword arguments, a module class or instance). ``param`` is torch's positional form
    ``calculate_gain("leaky_relu", 0.2)``: the negative slope, for ``leaky_relu`` only (a
    ``ValueError`` for any other activation; pass hyperparameters by name). Results for names
    are cached. A
    :class:`~gelus.StochasticGELU` in training mode uses the training-time moment
    E[(z·m)²] = E[z²Φ(z)] = ½ (gain √2); GEGLU uses E[(a·GELU(b))²] = E[GELU(b)²]; modules with
    per-feature parameters use their current values (BiasGELU's bias starts at 0).

    =====================  =========  ==============================
    activation             gain       torch.nn.init.calculate_gain
    =====================  =========  ==============================
    gelu (exact)           1.5335     (none)
    gelu, tanh form        1.5336     (none)
    gelu, sigmoid form     1.5395     (none)
    silu / swish β=1       1.6765     (none)
    stochastic_gelu        1.4142     (none)
    relu                   √2=1.4142  √2
    leaky_relu (a=0.01)    1.4141     √(2/(1+a²)), the same
    elu                    1.2452     (none)
    selu                   1.0000     3/4
    tanh                   1.5925     5/3
    sigmoid                1.8462     1
    softplus               1.0419     (none)
    mish                   1.4868     (none)
    hardswish              1.7367     (none)
    identity               1          1
    =====================  =========  ==============================

    Example::

        >>> round(calculate_gain("gelu"), 4)
        1.5335
        >>> round(calculate_gain("gelu_new"), 4)   # the tanh form, by its Hugging Face name
        1.5336
    """
    if param is not None:
        canonical = resolve_activation(activation)[0] if isinstance(activation, str) else None
        if canonical != "leaky_relu":
            raise ValueError(
                f"calculate_gain's positional param is the negative slope of 'leaky_relu' (as in "
                f"torch.nn.init.calculate_gain); for {activation!r} pass keyword arguments"
            )
        if "negative_slope" in kwargs:
            raise ValueError("give the negative slope once: param or negative_slope=")
        kwargs["negative_slope"] = float(param)
    if isinstance(activation, str):
        canonical, arguments = resolve_activation(activation, **kwargs)
        key = tuple(sorted(arguments.items()))
        try:
            hash(key)
        except TypeError:  # e.g. a tensor argument: compute without caching
            return _gain(get_activation(canonical, **arguments))
        return _cached_gain(canonical, key)
    return _gain(get_activation(activation, **kwargs))


def _fan(weight: Tensor, mode: str) -> int:
    # as torch.nn.init: dim 1 is the input dim, dims 2+ the receptive field
    if weight.dim() < 2:
        raise ValueError(
            f"a fan needs a weight with at least 2 dims, got shape {tuple(weight.shape)}"
        )
    receptive_field = math.prod(weight.shape[2:])
    return (
        weight.shape[1] * receptive_field if mode == "fan_in" else weight.shape[0] * receptive_field
    )


def init_layer_(
    layer: nn.Module,
    activation: str | nn.Module | type[nn.Module] | float = "gelu",
    mode: str = "fan_in",
    generator: torch.Generator | None = None,
    **kwargs: Any,
) -> nn.Module:
    """Initialize ``layer.weight`` ~ N(0, (gain/√fan)²) and ``layer.bias`` = 0, in place.

    For a Linear or Conv layer followed by ``activation``; ``gain`` is
    :func:`calculate_gain(activation, **kwargs) <calculate_gain>`, or ``activation`` itself if it
    is a number. ``mode="fan_in"`` keeps forward activations at unit scale, ``"fan_out"`` the
    gradients. Returns the layer.

    Example::

        >>> layer = init_layer_(nn.Linear(256, 256), "gelu")
    """
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    weight = getattr(layer, "weight", None)
    if not isinstance(weight, Tensor):
        raise TypeError(
            f"init_layer_ needs a layer with a weight tensor, got {type(layer).__name__}"
        )
    if isinstance(activation, (int, float)):
        gain = float(activation)
    else:
        gain = calculate_gain(activation, **kwargs)
    std = gain / math.sqrt(_fan(weight, mode))
    with torch.no_grad():
        weight.normal_(0.0, std, generator=generator)
        if getattr(layer, "bias", None) is not None:
            layer.bias.zero_()
    return layer
