"""torch.compile(fullgraph=True) runs every pointwise member without graph breaks, agreeing with eager.

One compiled graph (forward and backward) exercises all members, to keep compile time small.
"""

import math

import pytest
import torch

import gelus.functional as G


def _all_members(x, bias):
    gated = torch.cat([x, x.flip(-1)], dim=-1)
    return torch.stack(
        [
            G.gelu(x),  # accurate (float64 Φ) under compile by default
            G.gelu(x, accurate=False),
            G.gelu(x, "tanh"),
            G.gelu(x, "sigmoid"),
            G.silu(x),
            G.swish(x, 0.5),
            G.bias_gelu(x, bias),
            G.bias_gelu(x, bias, "tanh"),
            G.geglu(gated),
        ]
    )


def _eager_reference(x, bias):
    gated = torch.cat([x, x.flip(-1)], dim=-1)
    return torch.stack(
        [
            G.gelu(x, accurate=True),
            G.gelu(x, accurate=False),
            G.gelu(x, "tanh"),
            G.gelu(x, "sigmoid"),
            G.silu(x),
            G.swish(x, 0.5),
            G.bias_gelu(x, bias, accurate=True),
            G.bias_gelu(x, bias, "tanh"),
            G.geglu(gated, accurate=True),
        ]
    )


@pytest.mark.slow
def test_compiled_members_match_eager_including_edge_cases():
    specials = [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        3.4028234663852886e38,
        -3.4028234663852886e38,
        1e20,
        -1e20,
    ]
    x = torch.cat([torch.tensor(specials), torch.linspace(-12, 12, 56)]).reshape(4, 16)
    bias = torch.linspace(-0.5, 0.5, 16)
    compiled = torch.compile(_all_members, fullgraph=True, dynamic=False)

    outputs = {}
    for name, fn in (("eager", _eager_reference), ("compiled", compiled)):
        xr = x.clone().requires_grad_()
        br = bias.clone().requires_grad_()
        y = fn(xr, br)
        grad_out = torch.ones_like(y)
        y.backward(grad_out)
        outputs[name] = (y.detach(), xr.grad, br.grad)

    for eager, compiled_result in zip(outputs["eager"], outputs["compiled"], strict=True):
        torch.testing.assert_close(compiled_result, eager, rtol=2e-6, atol=1e-6, equal_nan=True)
    y = outputs["compiled"][0]
    # The contract holds inside the graph too: +inf, −inf, −0, FLT_MAX.
    assert (y[:6, 0, 0] == math.inf).all() and (y[:6, 0, 1] == 0).all()
    assert y[:6, 0, 3].signbit().all() and (y[:6, 0, 4] == 3.4028234663852886e38).all()
