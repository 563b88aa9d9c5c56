"""The compile route: torch.compile(fullgraph=True) runs every member without graph breaks,
agreeing with eager, keeping the contract, fusing, and saving only the inputs.

One compiled graph (forward and backward) exercises all members, to keep compile time small.
"""

import math

import numpy as np
import pytest
import torch

import gelus.functional as G
from conftest import CONTRACT, MEMBERS
from test_contract import saved_tensors

SPECIALS = [math.inf, -math.inf, math.nan, -0.0, 3.4028234663852886e38, -3.4028234663852886e38]


def _contract_members(x):
    return torch.stack([MEMBERS[name].call(x) for name in CONTRACT])


@pytest.mark.slow
def test_compiled_members_match_eager_including_edge_cases():
    x = torch.cat([torch.tensor([*SPECIALS, 1e20, -1e20]), torch.linspace(-12, 12, 56)])
    x = x.reshape(4, 16)
    compiled = torch.compile(_contract_members, fullgraph=True, dynamic=False)
    outputs = {}
    for name, fn in (("eager", _contract_members), ("compiled", compiled)):
        xr = x.clone().requires_grad_()
        y = fn(xr)
        y.backward(torch.ones_like(y))
        outputs[name] = (y.detach(), xr.grad)
    for eager, compiled_result in zip(outputs["eager"], outputs["compiled"], strict=True):
        # The exact default form is oneDNN's kernel in eager and inductor's erf formula compiled:
        # both within 1.2e-6 absolute of the truth, times |a| <= 2 in GEGLU.
        torch.testing.assert_close(compiled_result, eager, rtol=2e-6, atol=3e-5, equal_nan=True)
    y = outputs["compiled"][0]
    # The contract holds inside the graph too: +inf, −inf, nan, −0, FLT_MAX, −FLT_MAX.
    assert (y[:, 0, 0] == math.inf).all() and (y[:, 0, 1] == 0).all()
    assert y[:, 0, 2].isnan().all() and y[:, 0, 3].signbit().all()
    assert (y[:, 0, 4] == 3.4028234663852886e38).all() and (y[:, 0, 5] == 0).all()
    g = outputs["compiled"][1]  # the gradient of the sum over members: finite, 1 / 0 at ±inf
    n = len(CONTRACT)
    assert g[0, 0] == n and g[0, 1] == 0 and g[0, 2].isnan() and torch.isfinite(g[0, 3:]).all()


PARAM_COUNTS = {name: len(member.inputs()) - 1 for name, member in MEMBERS.items()}


def _members_with_parameters(x, *params):
    results, start = [], 0
    for name, member in MEMBERS.items():
        count = PARAM_COUNTS[name]
        results.append(member.function(x, *params[start : start + count]).sum())
        start += count
    return torch.stack(results)


@pytest.mark.slow
def test_compiled_gradients_of_parameters_match_eager():
    generator = torch.Generator().manual_seed(0)
    x = 2 * torch.randn(3, 4, generator=generator) + 0.05
    params = [p.float() for name in MEMBERS for p in MEMBERS[name].params(torch.float64, generator)]
    compiled = torch.compile(_members_with_parameters, fullgraph=True, dynamic=False)
    results = []
    for fn in (_members_with_parameters, compiled):
        leaves = [x.clone().requires_grad_()] + [p.clone().requires_grad_() for p in params]
        y = fn(*leaves)
        y.sum().backward()
        results.append((y.detach(), *(t.grad for t in leaves)))
    for eager, compiled_result in zip(*results, strict=True):
        torch.testing.assert_close(compiled_result, eager, rtol=2e-6, atol=3e-5)


def _saved_shapes(fn, *inputs):
    """Shapes of the tensors autograd keeps for backward (the compiled graph's saved values)."""
    return sorted(tuple(t.shape) for t in saved_tensors(fn, *inputs))


def _compiled_members(x, bias, gated):
    return (
        G.gelu(x).sum()
        + G.gelu(x, "tanh").sum()
        + G.gelu(x, accurate=True).sum()
        + G.bias_gelu(x, bias).sum()
        + G.geglu(gated).sum()
    )


@pytest.mark.slow
def test_compiled_members_keep_only_their_inputs():
    # Each member is a composition inductor fuses; the partitioner recomputes the activation in
    # backward from the inputs instead of keeping intermediates.
    x = torch.randn(64, 32, requires_grad=True)
    bias = torch.randn(32, requires_grad=True)
    gated = torch.randn(64, 64, requires_grad=True)
    compiled = torch.compile(_compiled_members, fullgraph=True, dynamic=False)
    assert _saved_shapes(compiled, x, bias, gated) == [(32,), (64, 32), (64, 64)]


@pytest.mark.slow
def test_compiled_accurate_gelu_within_two_ulp():
    # Under compile accurate=True takes the float32 algorithm (gelus._gelu_float32) as torch ops,
    # which inductor's C++ code computes (compiled with its unsafe-math flags) within 2 ulp.
    from scipy import special

    rng = np.random.default_rng(7)
    top = np.float32(20.0).view(np.int32)
    bits = rng.integers(0, top, 2**18, dtype=np.int32).view(np.float32)
    x = np.concatenate([bits, -bits, rng.uniform(-20, 20, 2**18).astype(np.float32)])
    x = np.concatenate([x, np.linspace(-1.6, -0.3, 2**16, dtype=np.float32)])
    xt = torch.from_numpy(x).requires_grad_()
    compiled = torch.compile(lambda t: G.gelu(t, accurate=True), fullgraph=True, dynamic=False)
    y = compiled(xt)
    (g,) = torch.autograd.grad(y, xt, torch.ones_like(y))
    xd = x.astype(np.float64)
    value = xd * 0.5 * special.erfc(-xd / math.sqrt(2))
    slope = 0.5 * special.erfc(-xd / math.sqrt(2)) + xd * np.exp(-0.5 * xd * xd) / math.sqrt(
        2 * math.pi
    )

    def ulp(result, reference):
        spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
        return np.abs(result.detach().numpy().astype(np.float64) - reference) / spacing

    # measured 1.83 (value) and 1.68 (slope) ulp
    assert ulp(y, value).max() <= 2.0
    assert ulp(g, slope).max() <= 2.0


def _three_layers(x, weights, biases, act):
    """Stacked layers as in the ensemble engine: the second activation's input depends on the
    first one's output, the graph in which masks of the edge cases were kept for backward."""
    for layer, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
        x = torch.baddbmm(bias, x, weight)
        if layer < len(weights) - 1:
            x = act(x)
    return x


@pytest.mark.slow
def test_compiled_members_in_a_network_keep_what_torch_gelu_keeps():
    # Reference: the same network with torch's F.gelu, which keeps only its input. Every member
    # must keep as many activation-sized tensors (its input), and no boolean mask.
    generator = torch.Generator().manual_seed(0)
    k, batch, width = 2, 24, 16  # activations (768 elements) larger than weights
    weights = [torch.randn(k, width, width, generator=generator) for _ in range(3)]
    biases = [torch.randn(k, 1, width, generator=generator) for _ in range(3)]
    beta, bias, mu = (torch.randn(width, generator=generator) for _ in range(3))
    sigma = torch.rand(width, generator=generator) + 0.5
    for tensor in (*weights, *biases, beta, bias, mu, sigma):
        tensor.requires_grad_()

    def geglu(act):  # the gate is the flipped input, so the layer keeps its width
        return lambda h: act(torch.cat([h, h.flip(-1)], dim=-1))

    members = [
        G.gelu,
        lambda h: G.gelu(h, "tanh"),
        lambda h: G.gelu(h, "sigmoid"),
        lambda h: G.gelu(h, accurate=True),
        G.silu,
        lambda h: G.swish(h, -0.5),
        lambda h: G.swish(h, beta),
        lambda h: G.bias_gelu(h, bias),
        lambda h: G.bias_gelu(h, bias, "tanh"),
        lambda h: G.generalized_gelu(h, mu, sigma),
    ]
    reference = [torch.nn.functional.gelu] * len(members)
    members.append(geglu(G.geglu))
    reference.append(geglu(lambda t: t[..., :width] * torch.nn.functional.gelu(t[..., width:])))

    def networks(acts):  # each on its own input, so that no two networks are merged as equal
        return lambda x: sum(
            _three_layers(x + i, weights, biases, act).sum() for i, act in enumerate(acts)
        )

    x = torch.randn(k, batch, width, generator=generator)
    kept = {"members": [], "reference": []}
    for name, acts in (("members", members), ("reference", reference)):
        compiled = torch.compile(networks(acts), fullgraph=True, dynamic=False)
        saved = kept[name]
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t, to=saved: to.append(t) or t, lambda t: t
        ):
            y = compiled(x)
        y.backward()
    assert all(t.dtype == torch.float32 for t in kept["members"])

    def activation_sized(saved):  # the partitioner may keep an activation transposed
        return sorted(t.numel() for t in saved if t.numel() >= k * batch * width)

    assert activation_sized(kept["members"]) == activation_sized(kept["reference"])


@pytest.mark.slow
def test_compiled_generalized_gelu_gradients_equal_eager():
    # torch 2.11 gave every element of x's gradient wrong here (by up to 1.13), while 2.13 was
    # right: the compiled Function returned a no-op x.to(x.dtype), an alias of an intermediate,
    # which 2.11's Dynamo mistakes for an extra output and routes the incoming gradient away
    # from (pytorch/pytorch#180642); its backward was traced with a zero tangent.
    torch._dynamo.reset()
    compiled = torch.compile(G.generalized_gelu, fullgraph=True)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 4, generator=generator)
    mu, sigma = torch.zeros(4), torch.full((4,), 0.5)
    grad = torch.randn(8, 4, generator=generator)
    results = []
    for fn in (G.generalized_gelu, compiled):
        leaves = [t.clone().requires_grad_() for t in (x, mu, sigma)]
        y = fn(*leaves)
        y.backward(grad)
        results.append((y.detach(), *(t.grad for t in leaves)))
    for eager, compiled_result in zip(*results, strict=True):
        torch.testing.assert_close(compiled_result, eager)


@pytest.mark.slow
def test_compiled_generalized_gelu_keeps_only_x_mu_sigma_and_holds_the_edge_cases():
    torch._dynamo.reset()
    compiled = torch.compile(G.generalized_gelu, fullgraph=True, dynamic=False)
    x = torch.tensor([[math.inf, -math.inf, math.nan, -0.0], [1.0, -1.0, 3e38, -3e38]])
    x.requires_grad_()
    mu = torch.zeros(4, requires_grad=True)
    sigma = torch.full((4,), 0.5, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = compiled(x, mu, sigma)
    y.sum().backward()
    assert sorted(tuple(t.shape) for t in saved) == [(2, 4), (4,), (4,)]
    assert y[0, 0] == math.inf and y[0, 1] == 0 and y[0, 2].isnan() and y[0, 3].signbit()
    assert y[1, 2] == 3e38 and y[1, 3] == 0
    assert torch.equal(x.grad[0, [0, 1, 3]], torch.tensor([1.0, 0.0, 0.5]))
    assert x.grad[0, 2].isnan() and torch.equal(x.grad[1, 2:], torch.tensor([1.0, 0.0]))
    assert torch.isfinite(mu.grad[[0, 1, 3]]).all() and torch.isfinite(sigma.grad[[0, 1, 3]]).all()


@pytest.mark.slow
def test_swish_tensor_beta_compiles_and_matches_eager():
    x = torch.tensor([math.inf, -math.inf, -0.0, 3e38, -2.0, 0.5, 4.0, -7.0]).reshape(2, 4)
    beta = torch.tensor([1.0, 1.5, 0.5, 2.0])
    results = []
    for fn in (G.swish, torch.compile(G.swish, fullgraph=True, dynamic=False)):
        xr, br = x.clone().requires_grad_(), beta.clone().requires_grad_()
        y = fn(xr, br)
        y.sum().backward()
        results.append((y.detach(), xr.grad, br.grad))
    for eager, compiled in zip(*results, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ what the compiled graph holds


def _recording_backend(graphs: list):
    """A torch.compile backend that keeps the aten graphs AOTAutograd makes (forward, and the
    backward when autograd records) and runs them as they are, with no inductor."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def record(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=record, bw_compiler=record)


def _operators(graphs) -> list:
    """The OpOverloads the graphs call, in order."""
    return [
        node.target
        for gm in graphs
        for node in gm.graph.nodes
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
    ]


def _every_member(x, gated, *params):
    outputs, start = [], 0
    for name, member in MEMBERS.items():
        count = PARAM_COUNTS[name]
        outputs.append(member.function(x, *params[start : start + count]))
        start += count
    return (*outputs, G.swiglu(gated), G.reglu(gated), G.stochastic_gelu(x, training=True))


@pytest.mark.slow
def test_compiled_graph_on_cuda_holds_compositions_and_only_the_stochastic_operator():
    """The compiled route for a CUDA tensor, shown without a GPU: x and the parameters are fake
    CUDA tensors (``FakeTensorMode``: metadata only, no storage, no CUDA runtime needed), and a
    backend records the aten graph AOTAutograd makes. Every pointwise member is a composition of
    aten ops (which inductor fuses with its neighbours); only stochastic GELU keeps its operator
    (gelus._cuda.COMPILED_AS_OPERATORS), with its seed drawn in the graph.

    Forward only: autograd cannot record on a fake CUDA tensor in a CPU-only torch (building
    the leaf's AccumulateGrad asks for a CUDA device guard, and the process aborts). The backward
    of the compile route is the same composition on every device (its Function's backward): the
    same members on CPU tensors that require grad give forward and backward graphs of aten ops
    alone (stochastic GELU is a composition there)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(0)
    shapes = [p.shape for name in MEMBERS for p in MEMBERS[name].params(torch.float64, generator)]
    mode = FakeTensorMode()
    graphs = []
    compiled = torch.compile(_every_member, backend=_recording_backend(graphs), fullgraph=True)
    with mode:
        x, gated = torch.empty(3, 4, device="cuda"), torch.empty(3, 8, device="cuda")
        params = [torch.rand(shape, device="cuda") + 0.5 for shape in shapes]
        outputs = compiled(x, gated, *params)
    assert all(y.device.type == "cuda" for y in outputs)
    operators = _operators(graphs)
    assert len(graphs) == 1 and len(operators) > 100
    gelus_operators = [op for op in operators if op.namespace == "gelus"]
    assert gelus_operators == [torch.ops.gelus.stochastic_gelu.default]
    assert {op.namespace for op in operators} == {"aten", "gelus"}
    assert torch.ops.aten.randint.generator in operators  # the seed, drawn at run time

    torch._dynamo.reset()
    graphs.clear()
    leaves = [torch.randn(3, 4), torch.randn(3, 8)] + [torch.rand(shape) + 0.5 for shape in shapes]
    leaves = [t.requires_grad_() for t in leaves]
    outputs = compiled(*leaves)
    torch.autograd.grad(sum(y.sum() for y in outputs), leaves)
    operators = _operators(graphs)
    assert len(graphs) == 2 and {op.namespace for op in operators} == {"aten"}
    torch._dynamo.reset()


@pytest.mark.slow
def test_compiled_stochastic_operator_draws_the_mask_eager_draws(monkeypatch):
    # Where OPERATORS_UNDER_COMPILE keeps stochastic GELU's operator (CUDA; here CPU, through
    # its default kernel), the compiled graph draws the seed from torch's generator at run time
    # and calls the operators forward and backward: the same mask as an eager call of the
    # operator after the same torch.manual_seed, different from call to call.
    from gelus import _operator, _stochastic

    monkeypatch.setattr(_operator, "OPERATORS_UNDER_COMPILE", {"stochastic_gelu": {"cpu"}})
    torch._dynamo.reset()
    graphs = []
    compiled = torch.compile(
        lambda t: 2 * G.stochastic_gelu(t, training=True),
        backend=_recording_backend(graphs),
        fullgraph=True,
    )
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    results = []
    for run in ("eager", "compiled", "compiled again"):
        xr = x.clone().requires_grad_()
        torch.manual_seed(3 if run != "compiled again" else 4)
        if run == "eager":
            y = 2 * _stochastic.stochastic_gelu_op(xr, torch.randint(2**31, (1,)))
        else:
            y = compiled(xr)
        (g,) = torch.autograd.grad(y.sum(), xr)
        results.append((y.detach(), g))
    (y, g), (yc, gc), (yd, _) = results
    assert torch.equal(yc, y) and torch.equal(gc, g)
    assert torch.equal(g, 2.0 * (y != 0))  # the backward regenerated the forward's mask
    assert not torch.equal(yd, y)  # another seed, another mask
    gelus_operators = [op for op in _operators(graphs) if op.namespace == "gelus"]
    assert gelus_operators == [
        torch.ops.gelus.stochastic_gelu.default,
        torch.ops.gelus.stochastic_gelu_backward.default,
    ]
    # inductor too: it runs aten.randint as a fallback, on torch's generator
    inductor = torch.compile(lambda t: 2 * G.stochastic_gelu(t, training=True), fullgraph=True)
    xr = x.clone().requires_grad_()
    torch.manual_seed(3)
    yi = inductor(xr)
    (gi,) = torch.autograd.grad(yi.sum(), xr)
    assert torch.equal(yi.detach(), y) and torch.equal(gi, g)
    torch._dynamo.reset()


# ------------------------------------------------------------------ torch.func inside compile


def _per_sample_loss(xs, gated, params):
    """Every member on its own input (gradients kept apart), with its parameters."""
    total, start = 0.0, 0
    for (name, member), x in zip(MEMBERS.items(), xs, strict=True):
        count = PARAM_COUNTS[name]
        total = total + member.function(x, *params[start : start + count]).sum()
        start += count
    return total + G.swiglu(gated[0]).sum() + G.reglu(gated[1]).sum()


@pytest.mark.slow
def test_compiled_vmap_of_grad_matches_eager_for_every_member():
    # torch 2.13 raised InternalTorchDynamoError here for every member (Dynamo cannot vmap the
    # compile route's autograd.Function): under a transform the route is the plain composition.
    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(0)
    batch = 3
    xs = [2 * torch.randn(batch, *m.x_shape, generator=generator) + 0.05 for m in MEMBERS.values()]
    for x, name in zip(xs, MEMBERS, strict=True):
        # The edge cases in the first sample: slopes 1 / 0 at ±inf, nan at nan, finite parameter
        # gradients at ±FLT_MAX, as eager. Not for GEGLU, whose value half would be ±inf with
        # the gate ±0: inf·0 = nan in the sigmoid gate's product rule, ±inf in eager's slope.
        if name in CONTRACT and not name.startswith("geglu"):
            x[0].view(-1)[: len(SPECIALS)] = torch.tensor(SPECIALS)
    gated = tuple(torch.randn(batch, 3, 8, generator=generator) for _ in range(2))
    params = tuple(
        p.float() for name in MEMBERS for p in MEMBERS[name].params(torch.float64, generator)
    )
    # per-sample gradients of x and of the (shared) parameters
    per_sample = torch.func.vmap(
        torch.func.grad(_per_sample_loss, argnums=(0, 1, 2)), in_dims=(0, 0, None)
    )
    eager = per_sample(xs, gated, params)
    compiled = torch.compile(per_sample, fullgraph=True, dynamic=False)(xs, gated, params)
    flat_eager, flat_compiled = (torch.utils._pytree.tree_leaves(r) for r in (eager, compiled))
    assert len(flat_eager) == len(MEMBERS) + 2 + len(params)
    for want, got in zip(flat_eager, flat_compiled, strict=True):
        assert got.shape == want.shape and got.shape[0] == batch
        torch.testing.assert_close(got, want, rtol=2e-6, atol=3e-6, equal_nan=True)
    slopes = flat_compiled[0][0].reshape(-1)[: len(SPECIALS)]  # gelu's, at the edge cases
    assert slopes[0] == 1 and slopes[1] == 0 and slopes[2].isnan() and slopes[3] == 0.5
    for grad_param in flat_compiled[-len(params) :]:  # per channel; channel 2 met the nan
        assert torch.isfinite(grad_param[0, [0, 1, 3]]).all()

    # stochastic GELU in training: a mask per sample, and the gradient is that mask
    def stochastic(t):
        y = G.stochastic_gelu(t, training=True)
        return y.sum(), y

    x = torch.randn(4, 64, generator=generator)
    sampled = torch.func.vmap(torch.func.grad(stochastic, has_aux=True), randomness="different")
    g, y = torch.compile(sampled, fullgraph=True, dynamic=False)(x)
    assert torch.equal(y, torch.where(g == 1, x, 0.0)) and ((g == 0) | (g == 1)).all()
    assert not torch.equal(g[0], g[1])  # a mask per sample
    torch._dynamo.reset()
