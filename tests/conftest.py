"""The one table of the library's members and their oracles, shared by the library's tests.

Each :class:`Member` is one way to call a member (a form, a parameter kind): its function of
tensors ``(x, *params)``, example parameters, and float64 oracles of its value and slope as a
function of x, written here with numpy/scipy, independent of the code under test. Members with
``contract=True`` promise the edge cases of docs/NUMERICS.md (+inf → +inf, −inf → 0, nan →
nan, −0 → −0, FLT_MAX → FLT_MAX, finite gradients); ``neutral`` calls them with parameters
that make them functions of x alone (bias −0, a gate's value half 1, μ = 0, σ = 1).
"""

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# Triton decides at import time whether its kernels (and its own library functions) are compiled
# or interpreted, so the switch must come before anything imports triton. Without CUDA the kernels
# run in the interpreter on CPU tensors (tests/test_triton_kernels.py); this changes nothing else.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import gelus.functional as G  # after the switch above
from gelus import _members
from oracles import (
    exact,
    exact_slope,
    hard_mish,
    hard_mish_slope,
    laplace,
    laplace_slope,
    relu2,
    relu2_slope,
    sqrtsoftplus,
    sqrtsoftplus_slope,
    swish,
    swish_slope,
    tanh_form,
    tanh_slope,
    xielu,
    xielu_slope,
)

# ------------------------------------------------------------------------------ the table


def _none(dtype, generator):
    return ()


def _bias(dtype, generator):
    return (0.3 * torch.randn(4, dtype=dtype, generator=generator),)


def _mu_sigma(dtype, generator):
    mu = 0.4 * torch.randn(4, dtype=dtype, generator=generator)
    sigma = 0.5 + torch.rand(4, dtype=dtype, generator=generator)
    return mu, sigma


def _beta(dtype, generator):
    return (0.5 + torch.rand(4, dtype=dtype, generator=generator),)


def _neutral_bias(x):
    return G.bias_gelu(x, torch.full((), -0.0, dtype=x.dtype), "none")


def _neutral_bias_tanh(x):
    return G.bias_gelu(x, torch.full((), -0.0, dtype=x.dtype), "tanh")


def _neutral_geglu(x, approximate="none"):
    """x as the gate of a GEGLU whose value half is 1: the stacked [1, x] split on dim 0."""
    return G.geglu(torch.stack([torch.ones_like(x), x]), 0, approximate).squeeze(0)


def _neutral_clamped_swiglu(x):
    """x as the gate of GPT-OSS's gate with up = 0 and no clamp (limit = inf): x·σ(1.702x); the
    stacked [x, 0] split on dim 0 (the gate first)."""
    h = torch.stack([x, torch.zeros_like(x)])
    return G.clamped_swiglu(h, limit=float("inf"), interleaved=False, dim=0).squeeze(0)


def _neutral_generalized(x):
    return G.generalized_gelu(x, torch.zeros((), dtype=x.dtype), torch.ones((), dtype=x.dtype))


def _neutral_swish_tensor(x):
    return G.swish(x, torch.ones((), dtype=torch.float32))


@dataclass(frozen=True)
class Member:
    """One way to call a member: ``function(x, *params(dtype, generator))``."""

    name: str
    function: Callable[..., torch.Tensor]
    value: Callable[[np.ndarray], np.ndarray]  # oracle of neutral(x)
    slope: Callable[[np.ndarray], np.ndarray]
    params: Callable = _none
    neutral: Callable | None = None  # x -> y; None: function itself
    contract: bool = True
    smooth: bool = True  # differentiable everywhere (finite differences are valid anywhere)
    x_shape: tuple[int, ...] = (3, 4)

    def call(self, x: torch.Tensor) -> torch.Tensor:
        """The member as a function of x alone."""
        return (self.neutral or self.function)(x)

    def inputs(self, dtype=torch.float64, seed=0, scale=2.0):
        """Example inputs (x, *params), x of ``x_shape`` (away from kinks when not smooth)."""
        generator = torch.Generator().manual_seed(seed)
        x = scale * torch.randn(self.x_shape, dtype=dtype, generator=generator)
        if not self.smooth:
            x = x + 0.05 * torch.sign(x).where(x != 0, 1.0)
        return (x, *self.params(dtype, generator))


# table member (gelus._members) -> the ways the tests call it; MEMBERS follows the table's order
_CASES: dict[str, list[Member]] = {
    "gelu": [
        Member("gelu", lambda x: G.gelu(x), exact, exact_slope),
        Member("gelu-accurate", lambda x: G.gelu(x, accurate=True), exact, exact_slope),
        Member("gelu-tanh", lambda x: G.gelu(x, "tanh"), tanh_form, tanh_slope),
        Member("gelu-sigmoid", lambda x: G.gelu(x, "sigmoid"), swish(1.702), swish_slope(1.702)),
    ],
    "silu": [Member("silu", G.silu, swish(1.0), swish_slope(1.0))],
    "swish": [
        Member("swish-0.5", lambda x: G.swish(x, 0.5), swish(0.5), swish_slope(0.5)),
        Member("swish-3", lambda x: G.swish(x, 3.0), swish(3.0), swish_slope(3.0)),
        Member(
            "swish-tensor-beta",
            G.swish,
            swish(1.0),
            swish_slope(1.0),
            params=_beta,
            neutral=_neutral_swish_tensor,
        ),
    ],
    "generalized_gelu": [
        Member(
            "generalized-gelu",
            G.generalized_gelu,
            exact,
            exact_slope,
            params=_mu_sigma,
            neutral=_neutral_generalized,
        ),
    ],
    "bias_gelu": [
        Member(
            "bias-gelu",
            lambda x, b: G.bias_gelu(x, b),
            exact,
            exact_slope,
            params=_bias,
            neutral=_neutral_bias,
        ),
        Member(
            "bias-gelu-tanh",
            lambda x, b: G.bias_gelu(x, b, "tanh"),
            tanh_form,
            tanh_slope,
            params=_bias,
            neutral=_neutral_bias_tanh,
        ),
    ],
    "geglu": [
        Member("geglu", G.geglu, exact, exact_slope, neutral=_neutral_geglu),
        Member(
            "geglu-sigmoid",
            lambda x: G.geglu(x, approximate="sigmoid"),
            swish(1.702),
            swish_slope(1.702),
            neutral=lambda x: _neutral_geglu(x, "sigmoid"),
        ),
    ],
    "clamped_swiglu": [
        Member(
            "clamped-swiglu",
            G.clamped_swiglu,
            swish(1.702),
            swish_slope(1.702),
            neutral=_neutral_clamped_swiglu,
        ),
    ],
    "stochastic_gelu": [
        Member("stochastic-gelu-eval", lambda x: G.stochastic_gelu(x, False), exact, exact_slope),
    ],
    # names from other libraries: their sources' definitions, no edge-case contract
    "laplace": [Member("laplace", G.laplace, laplace, laplace_slope, contract=False)],
    "relu2": [Member("relu2", G.relu2, relu2, relu2_slope, contract=False, smooth=False)],
    "sqrtsoftplus": [
        Member("sqrtsoftplus", G.sqrtsoftplus, sqrtsoftplus, sqrtsoftplus_slope, contract=False)
    ],
    "xielu": [
        Member("xielu", lambda x: G.xielu(x), xielu, xielu_slope, contract=False, smooth=False)
    ],
    "hard_mish": [
        Member("hard-mish", G.hard_mish, hard_mish, hard_mish_slope, contract=False, smooth=False)
    ],
}
# members whose own test files call them instead (test_glu.py; ClippedGELU in test_modules.py)
CALLED_ELSEWHERE = ("clipped_gelu", "swiglu", "reglu")
_unknown = set(_CASES).union(CALLED_ELSEWHERE) ^ {m.name for m in _members.MEMBERS}
assert not _unknown, f"tests/conftest.py's cases and gelus._members disagree on {sorted(_unknown)}"
MEMBERS: dict[str, Member] = {c.name: c for m in _members.MEMBERS for c in _CASES.get(m.name, ())}

CONTRACT = [name for name, m in MEMBERS.items() if m.contract]
