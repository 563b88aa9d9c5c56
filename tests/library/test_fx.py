"""torch.fx: every member traces with ``torch.fx.symbolic_trace`` into a graph that calls the
gelus function as one node (gelus._operator.fx_leaf), runs, and gives eager's values and
gradients; the FX tools built on it work on patched models as on the originals: timm's
``create_feature_extractor`` and torch's FX quantization (``prepare_fx`` / ``convert_fx``,
dynamic and static). The oracle is the same module run eagerly, and the edge-case contract's
values written out."""

import copy
import math
import os
import warnings

import pytest
import torch
from torch import nn
from torch.fx import symbolic_trace

import gelus
import gelus.functional as G
import gelus.modules
from conftest import MEMBERS
from gelus import _members
from torchvision_stand_in import import_modules

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # create_model(pretrained=False): no network

INF = math.inf

# module -> the gelus function its traced graph calls as one node
MODULES = {
    "GELU": (gelus.GELU(), G.gelu),
    "GELU-tanh": (gelus.GELU("tanh"), G.gelu),
    "GELU-accurate": (gelus.GELU(accurate=True), G.gelu),
    "QuickGELU": (gelus.QuickGELU(), G.gelu),
    "ClippedGELU": (gelus.ClippedGELU(), G.gelu),
    "SiLU": (gelus.SiLU(), G.silu),
    "SiLU-inplace": (gelus.SiLU(inplace=True), G.silu),
    "Swish": (gelus.Swish(1.5), G.swish),
    "Swish-learnable": (gelus.Swish(learnable=True), G.swish),
    "GeneralizedGELU": (gelus.GeneralizedGELU(mu=0.1, sigma=0.8), G.generalized_gelu),
    "GeneralizedGELU-channels": (
        gelus.GeneralizedGELU(4, mu=0.1, sigma=0.8, channel_dim=1),
        G.generalized_gelu,
    ),
    "StochasticGELU-eval": (gelus.StochasticGELU().eval(), G.stochastic_gelu),
    "StochasticGELU-train": (gelus.StochasticGELU(), G.stochastic_gelu),
    "BiasGELU": (gelus.BiasGELU(4), G.bias_gelu),
    "GEGLU": (gelus.GEGLU(), G.geglu),
    "SwiGLU": (gelus.SwiGLU(), G.swiglu),
    "ReGLU": (gelus.ReGLU(), G.reglu),
    "ClampedSwiGLU": (gelus.ClampedSwiGLU(), G.clamped_swiglu),
    "Laplace": (gelus.Laplace(), G.laplace),
    "ReLU2": (gelus.ReLU2(), G.relu2),
    "SqrtSoftplus": (gelus.SqrtSoftplus(), G.sqrtsoftplus),
    "XIELU": (gelus.XIELU(), G.xielu),
    "HardMish": (gelus.HardMish(), G.hard_mish),
}

# an unfolded activation in a graph: what the leaf node must replace
UNFOLDED = {torch.erf, torch.special.erfc, torch.special.erf, torch.tanh, torch.sigmoid}
UNFOLDED_METHODS = {"erf", "erfc", "tanh", "sigmoid"}


def test_every_module_class_is_traced_here():
    """Every member's classes (gelus._members; tests/library/test_members.py: all of them)."""
    classes = {getattr(gelus.modules, c) for m in _members.MEMBERS for c in m.modules}
    assert classes == {type(module) for module, _ in MODULES.values()}


def _inputs(seed=0):
    """x (3, 4, 4) with the edges in its last row; the parameters' shapes broadcast against it."""
    x = 2.0 * torch.randn(
        3, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )
    x[-1, -1] = torch.tensor([INF, -INF, -0.0, 30.0])
    return x


def _run(module, x, seed):
    """Output and gradients (x's, then every parameter's) of ``module`` at ``x``."""
    x = x.clone().requires_grad_()
    torch.manual_seed(seed)  # StochasticGELU in training draws from the global generator
    y = module(x.clone())  # a non-leaf input: an in-place module may write into it
    weights = torch.linspace(0.5, 1.5, y.numel(), dtype=y.dtype).reshape(y.shape)
    loss = (y.masked_fill(~y.isfinite(), 0) * weights).sum()
    grads = torch.autograd.grad(loss, [x, *module.parameters()], allow_unused=True)
    return y.detach(), grads


def _calls(graph):
    return [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]


@pytest.mark.parametrize("name", MODULES)
def test_module_traces_into_one_gelus_call_with_eager_values_and_gradients(name):
    module, function = MODULES[name]
    module = copy.deepcopy(module).double()
    with torch.no_grad():  # parameters away from their neutral start, so their gradients vary
        for p in module.parameters():
            p.add_(
                0.1
                * torch.randn(p.shape, dtype=p.dtype, generator=torch.Generator().manual_seed(1))
            )
    traced = symbolic_trace(module)
    x = _inputs()
    targets = [n.target for n in _calls(traced.graph)]
    assert targets.count(function) == 1, traced.code
    assert not UNFOLDED & set(targets) and not UNFOLDED_METHODS & set(targets), traced.code
    y, grads = _run(traced, x, seed=5)
    y_eager, grads_eager = _run(module, x, seed=5)
    torch.testing.assert_close(y, y_eager, rtol=0, atol=0, equal_nan=True)
    for a, b in zip(grads, grads_eager, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert y.isfinite()[:-1].all()  # finite x: finite y
    if function in (G.gelu, G.silu, G.stochastic_gelu) and name != "ClippedGELU":
        # the contract (docs/NUMERICS.md), which unfolded torch ops miss (F.gelu(±inf) is nan)
        edges = y[-1, -1].tolist()
        assert edges[0] == INF and edges[1] == 0.0 and edges[3] > 29.0, edges
        assert math.copysign(1.0, edges[2]) == -1.0 and edges[2] == 0.0  # −0 → −0


@pytest.mark.parametrize("name", [n for n, m in MEMBERS.items()])
def test_function_traces_with_tensor_parameters_as_graph_inputs(name):
    """The functions themselves (conftest's table), their tensor parameters held as buffers
    (FX get_attr proxies): one gelus call per graph, eager's values and input gradient."""
    member = MEMBERS[name]
    x, *params = member.inputs()

    class Call(nn.Module):
        def __init__(self):
            super().__init__()
            for i, p in enumerate(params):
                self.register_buffer(f"p{i}", p)

        def forward(self, x):
            return member.function(x, *(getattr(self, f"p{i}") for i in range(len(params))))

    module = Call()
    traced = symbolic_trace(module)
    leaves = [n.target for n in _calls(traced.graph) if getattr(n.target, "__module__", "")]
    assert any(t.__module__.startswith("gelus") for t in leaves), traced.code
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, y_eager = traced(x_ours), module(x_theirs)
    torch.testing.assert_close(y, y_eager, rtol=0, atol=0)
    (grad,) = torch.autograd.grad(y.sum(), x_ours)
    (grad_eager,) = torch.autograd.grad(y_eager.sum(), x_theirs)
    torch.testing.assert_close(grad, grad_eager, rtol=0, atol=0)
    # traced again, as prepare_fx traces what create_feature_extractor returns
    torch.testing.assert_close(symbolic_trace(traced)(x), module(x), rtol=0, atol=0)


def test_functional_imported_by_name_is_one_node_too():
    from gelus.functional import bias_gelu, gelu  # not through the module's globals

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            return gelu(bias_gelu(self.linear(x), self.linear.bias, "tanh"), approximate="sigmoid")

    block = Block()
    traced = symbolic_trace(block)
    assert [n.target for n in traced.graph.nodes if n.op == "call_function"] == [bias_gelu, gelu]
    x = torch.randn(5, 4)
    torch.testing.assert_close(traced(x), block(x), rtol=0, atol=0)


def test_traced_graph_exports_to_the_gelus_operator():
    """What the graph's node runs is the gelus function with its routes: torch.export of the
    traced graph holds the operator, not a decomposition."""
    traced = symbolic_trace(nn.Sequential(nn.Linear(4, 4), gelus.GELU("tanh")))
    program = torch.export.export(traced, (torch.randn(2, 4),))
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "gelus.gelu.default" in targets, targets
    assert not {t for t in targets if "tanh" in t or "erf" in t}, targets


# ------------------------------------------------------------------------------ FX quantization


def _mlp(*activations):
    torch.manual_seed(0)
    layers = [nn.Linear(8, 16), activations[0], nn.Linear(16, 16), activations[1], nn.Linear(16, 4)]
    return nn.Sequential(*layers).eval()


def _quantized(model, mapping, x):
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FX quantization's deprecation notice (to torchao)
        prepared = prepare_fx(copy.deepcopy(model), mapping, (x,))
        prepared(x)  # calibration
        return convert_fx(prepared)


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_fx_quantization_of_a_patched_model_matches_the_original(kind):
    from torch.ao.quantization import (
        QConfigMapping,
        default_dynamic_qconfig,
        get_default_qconfig_mapping,
    )

    if kind == "dynamic":
        mapping = QConfigMapping().set_global(default_dynamic_qconfig)
    else:
        mapping = get_default_qconfig_mapping("x86")
    original = _mlp(nn.GELU(approximate="tanh"), nn.SiLU())
    patched = copy.deepcopy(original)
    report = gelus.patch(patched)
    assert len(report.replaced) == 2
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(2))
    ours, theirs = _quantized(patched, mapping, x), _quantized(original, mapping, x)

    def linear_kinds(graph_module):
        return [
            type(m).__module__ + "." + type(m).__name__
            for m in graph_module.modules()
            if "Linear" in type(m).__name__
        ]

    # the same quantized linear layers in both (Dynamic or static quantized Linear)
    assert linear_kinds(ours) == linear_kinds(theirs)
    assert all("quantized" in k for k in linear_kinds(ours)), linear_kinds(ours)
    targets = [n.target for n in ours.graph.nodes if n.op == "call_function"]
    assert G.gelu in targets and G.silu in targets
    y, y_theirs, y_float = ours(x), theirs(x), original(x)
    # the quantized graphs agree with each other well inside their distance to float (a value
    # that rounds to the other side of a quantization step may differ by one step)
    error = (y_theirs - y_float).abs()
    assert 0 < error.max().item() < 0.05
    difference = (y - y_theirs).abs()
    assert difference.mean().item() <= 0.1 * error.mean().item()
    assert difference.max().item() <= error.max().item()


# ------------------------------------------------------------------------------ timm


@pytest.fixture(scope="module")
def timm():
    (timm,), _ = import_modules("timm")
    return timm


def _tiny(timm, name):
    if name == "vit":
        return timm.create_model(
            "vit_tiny_patch16_224",
            pretrained=False,
            img_size=16,
            patch_size=8,
            embed_dim=16,
            depth=2,
            num_heads=2,
            num_classes=3,
        )
    return timm.create_model(
        "convnext_atto", pretrained=False, depths=(1, 1, 1, 1), dims=(8, 8, 16, 16), num_classes=3
    )


@pytest.mark.parametrize(
    ("name", "nodes"), [("convnext", ["stages.1", "stages.3"]), ("vit", ["blocks.0", "blocks.1"])]
)
def test_timm_feature_extraction_of_a_patched_model_matches_the_original(timm, name, nodes):
    from timm.models import create_feature_extractor, get_graph_node_names

    original = _tiny(timm, name).eval()
    patched = copy.deepcopy(original)
    assert gelus.patch(patched).replaced
    size = 16 if name == "vit" else 32
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(3))
    ours = create_feature_extractor(patched, nodes)
    theirs = create_feature_extractor(original, nodes)
    # timm's node names: the gelus call where the original traced into F.gelu
    names = get_graph_node_names(patched)[1]
    assert any(n.endswith("gelu") for n in names), names
    assert G.gelu in [n.target for n in ours.graph.nodes if n.op == "call_function"]
    features, expected = ours(x), theirs(x)
    assert list(features) == nodes
    for key in nodes:
        torch.testing.assert_close(features[key], expected[key], rtol=1e-5, atol=1e-6)
    # and the gradient flows through the extracted graph as through the original's
    first, first_theirs = next(iter(ours.parameters())), next(iter(theirs.parameters()))
    (grad,) = torch.autograd.grad(features[nodes[-1]].square().sum(), first)
    (expected_grad,) = torch.autograd.grad(expected[nodes[-1]].square().sum(), first_theirs)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-6)
