"""gelus.patch on torch models: which modules it replaces and with what, that the patched model
computes what the original did (the oracle is the unpatched copy, torch's own modules), and what it
keeps: state_dict keys, parameters, shared instances, containers, in-place flags, dtype, mode.
Hugging Face's and timm's classes: tests/integrations/."""

import copy
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import gelus
from patch_checks import assert_same_function

F64 = torch.float64


def mlp(act: nn.Module, width: int = 6) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, width), act, nn.Linear(width, 3))


TORCH_CASES = [
    (nn.GELU(), gelus.GELU, "none"),
    (nn.GELU(approximate="tanh"), gelus.GELU, "tanh"),
    (nn.SiLU(), gelus.SiLU, None),
]


@pytest.mark.parametrize(("act", "member", "form"), TORCH_CASES, ids=repr)
def test_torch_activations_become_the_member_with_the_same_function(act, member, form):
    original = mlp(act)
    model = copy.deepcopy(original)
    report = gelus.patch(model)
    (entry,) = report.replaced
    assert entry.name == "1"
    assert entry.old is original[1] or type(entry.old) is type(act)
    assert type(model[1]) is member and entry.new is model[1]
    if form is not None:
        assert model[1].approximate == form  # the tanh form stays the tanh form
    assert report.left_alone == []
    x = torch.linspace(-8, 8, 4 * 50).reshape(50, 4)
    assert_same_function(original, model, x)
    assert_same_function(original.double(), model.double(), x.to(F64))


def test_state_dict_keys_parameters_and_training_mode_are_kept():
    torch.manual_seed(0)
    original = nn.Sequential(
        nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.SiLU(), nn.Linear(8, 2)
    ).eval()
    model = copy.deepcopy(original)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert len(gelus.patch(model).replaced) == 2
    after = model.state_dict()
    assert list(after) == list(before)
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, rtol=0, atol=0)
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in original.parameters()
    )
    assert not model[1].training and not model[3].training  # eval mode carried over


def test_a_shared_instance_is_replaced_once_by_one_new_module():
    shared = nn.GELU(approximate="tanh")
    model = nn.Module()
    model.a = nn.Sequential(nn.Linear(3, 3), shared)
    model.b = nn.ModuleList([nn.Linear(3, 3), shared])
    model.c = shared
    report = gelus.patch(model)
    assert [r.name for r in report.replaced] == ["a.1", "b.1", "c"]
    assert all(r.old is shared for r in report.replaced)
    new = report.replaced[0].new
    assert model.a[1] is new and model.b[1] is new and model.c is new
    assert isinstance(new, gelus.GELU) and new.approximate == "tanh"


def test_a_shared_container_is_patched_once_and_seen_under_its_first_name():
    block = nn.Sequential(nn.Linear(3, 3), nn.SiLU())
    model = nn.Sequential(block, block)
    report = gelus.patch(model)
    assert [r.name for r in report.replaced] == ["0.1"]
    assert isinstance(model[1][1], gelus.SiLU) and model[0][1] is model[1][1]


def test_modules_in_module_list_and_module_dict_are_replaced():
    torch.manual_seed(0)
    original = nn.ModuleDict(
        {
            "acts": nn.ModuleList([nn.GELU(), nn.GELU(approximate="tanh")]),
            "gate": nn.SiLU(),
            "proj": nn.Linear(5, 5),
        }
    )
    model = copy.deepcopy(original)
    report = gelus.patch(model)
    assert [r.name for r in report.replaced] == ["acts.0", "acts.1", "gate"]
    assert isinstance(model["acts"], nn.ModuleList) and len(model["acts"]) == 2
    assert [type(m) for m in model["acts"]] == [gelus.GELU, gelus.GELU]
    assert [m.approximate for m in model["acts"]] == ["none", "tanh"]
    assert isinstance(model["gate"], gelus.SiLU)
    assert list(model.state_dict()) == list(original.state_dict())
    x = torch.randn(7, 5)
    for original_act, act in zip(original["acts"], model["acts"], strict=True):
        torch.testing.assert_close(act(x), original_act(x))


def test_inplace_modules_stay_inplace_and_compute_the_same():
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(4, 6), nn.SiLU(inplace=True), nn.Linear(6, 2))
    model = copy.deepcopy(original)
    (entry,) = gelus.patch(model).replaced
    assert isinstance(entry.new, gelus.SiLU) and entry.new.inplace
    h = torch.randn(3, 6) * 3
    h_copy = h.clone()
    y = model[1](h)
    assert y is h  # written into its input, as nn.SiLU(inplace=True)
    torch.testing.assert_close(y, nn.functional.silu(h_copy))
    assert_same_function(original, model, torch.randn(9, 4) * 4)


def test_dtype_and_device_are_kept():
    model = nn.Sequential(nn.Linear(4, 4, dtype=F64), nn.GELU())
    gelus.patch(model)
    x = torch.randn(2, 4, dtype=F64)
    assert model(x).dtype == F64
    meta = nn.Sequential(nn.Linear(4, 4, device="meta"), nn.SiLU())
    gelus.patch(meta)  # touches no tensor: a model on the meta device patches too
    assert isinstance(meta[1], gelus.SiLU) and meta[0].weight.device.type == "meta"


class ScaledGELU(nn.GELU):
    def forward(self, x):
        return 2 * super().forward(x)


class MyGELU(nn.Module):  # a model's own GELU with another constant
    def forward(self, x):
        return x * torch.sigmoid(1.6 * x)


class GELUBlock(nn.Module):  # a block, not an activation: patch looks inside
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


def test_what_is_not_an_exact_match_is_left_alone_and_listed():
    hooked = nn.GELU()
    hooked.register_forward_hook(lambda module, args, out: out * 0)
    model = nn.Sequential(
        ScaledGELU(), MyGELU(), hooked, nn.ReLU(), nn.Mish(), GELUBlock(), gelus.GELU("tanh")
    )
    report = gelus.patch(model)
    assert [r.name for r in report.replaced] == ["5.act"]
    assert [(a.name, type(a.module)) for a in report.left_alone] == [
        ("0", ScaledGELU),
        ("1", MyGELU),
        ("2", nn.GELU),
    ]
    reasons = [a.reason for a in report.left_alone]
    assert "subclass of torch.nn.modules.activation.GELU" in reasons[0]
    assert "MyGELU is not a class patch knows" in reasons[1]
    assert "hooks" in reasons[2]
    assert type(model[0]) is ScaledGELU and type(model[1]) is MyGELU and model[2] is hooked
    assert type(model[3]) is nn.ReLU and type(model[4]) is nn.Mish  # not of the family: unlisted
    text = str(report)
    assert text.startswith("gelus.patch: 1 replaced, 3 left alone")
    assert (
        "5.act: torch.nn.modules.activation.GELU(approximate='none') -> "
        "gelus.GELU(approximate='none')"
    ) in text
    assert "1: test_patch.MyGELU() left alone: test_patch.MyGELU is not a class" in text


def test_patching_twice_changes_nothing_more():
    model = mlp(nn.GELU(approximate="tanh"))
    gelus.patch(model)
    act = model[1]
    report = gelus.patch(model)
    assert report.replaced == [] and report.left_alone == [] and model[1] is act


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match=r"itself is one \(GELU\).*get_activation.*Sequential"):
        gelus.patch(nn.GELU())
    with pytest.raises(TypeError, match=r"expects an nn\.Module, got str"):
        gelus.patch("model")


# a model as a tree: leaves are activations (some shared), inner nodes Sequential/ModuleList/Dict
ACTS = [
    lambda: nn.GELU(),
    lambda: nn.GELU(approximate="tanh"),
    lambda: nn.SiLU(),
    lambda: nn.SiLU(inplace=True),
    lambda: nn.Tanh(),
    lambda: gelus.GELU("sigmoid"),
]


@st.composite
def models(draw):
    pool = [draw(st.sampled_from(ACTS))() for _ in range(draw(st.integers(1, 3)))]

    def node(depth):
        if depth == 0 or draw(st.booleans()):
            return draw(st.sampled_from(pool))  # the pool's modules are shared among leaves
        children = [node(depth - 1) for _ in range(draw(st.integers(1, 3)))]
        kind = draw(st.sampled_from(["seq", "list", "dict"]))
        if kind == "seq":
            return nn.Sequential(*children)
        if kind == "list":
            return nn.ModuleList(children)
        return nn.ModuleDict({f"k{i}": c for i, c in enumerate(children)})

    return nn.Sequential(nn.Linear(2, 2), *[node(3) for _ in range(draw(st.integers(1, 3)))])


def leaves(module, prefix=""):
    """(qualified name, module) of every leaf slot, shared modules at every place."""
    for name, child in module._modules.items():
        if next(child.children(), None) is None:
            yield prefix + name, child
        else:
            yield from leaves(child, f"{prefix}{name}.")


FAMILY = {nn.GELU: gelus.GELU, nn.SiLU: gelus.SiLU}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_any_tree_of_containers_and_shared_modules_is_patched_at_every_place(model):
    before = list(leaves(model))
    report = gelus.patch(model)
    after = dict(leaves(model))
    new_of = {}
    for name, old in before:
        new = after[name]
        if type(old) in FAMILY:
            assert type(new) is FAMILY[type(old)]
            assert getattr(new, "approximate", None) == getattr(old, "approximate", None)
            assert new.inplace == getattr(old, "inplace", False)
            assert new_of.setdefault(id(old), new) is new  # one new module per old instance
        else:
            assert new is old
    assert {id(r.old) for r in report.replaced} == set(new_of)
    for r in report.replaced:
        assert after[r.name] is r.new is new_of[id(r.old)]
    x = torch.randn(3, 2)
    for (name, old), new in zip(before, (after[n] for n, _ in before), strict=True):
        torch.testing.assert_close(new(x.clone()), old(x.clone()), msg=name)


def test_import_gelus_and_patch_import_neither_transformers_nor_timm():
    code = (
        "import sys, torch, gelus\n"
        "m = torch.nn.Sequential(torch.nn.GELU(), torch.nn.SiLU())\n"
        "assert len(gelus.patch(m).replaced) == 2\n"
        "print(sorted(n for n in ('transformers', 'timm', 'gelus.integrations') if n in sys.modules))"
    )
    src = os.path.join(os.path.dirname(gelus.__file__), os.pardir)
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------ objects kept, all or nothing


def place_ids(model):
    """(name, id) of every module place, parameter and buffer: what "the same objects" means."""
    return (
        [(n, id(m)) for n, m in model.named_modules(remove_duplicate=False)],
        [(n, id(p)) for n, p in model.named_parameters()],
        [(n, id(b)) for n, b in model.named_buffers()],
    )


def test_every_parameter_and_buffer_object_is_kept():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.GELU(), nn.Linear(6, 2), nn.SiLU())
    model[3].weight.requires_grad_(False)
    before = place_ids(model)
    gelus.patch(model)
    after = place_ids(model)
    assert after[1:] == before[1:]  # the same Parameter and buffer objects, under the same names
    assert not model[3].weight.requires_grad  # frozen stays frozen


def deep_model(depth):
    """A chain ``depth`` Sequentials deep, an activation at every level (built without recursion)."""
    model = nn.Sequential(nn.GELU(approximate="tanh"))
    for _ in range(depth - 1):
        model = nn.Sequential(nn.SiLU(), model)
    return model


def test_a_ten_thousand_deep_model_is_patched_completely():
    model = deep_model(10_000)
    report = gelus.patch(model)  # the recursive walk stopped with RecursionError at depth ~985
    assert len(report.replaced) == 10_000 and report.left_alone == []
    level, kinds = model, []
    while len(level) == 2:
        kinds.append(type(level[0]))
        level = level[1]
    assert kinds == [gelus.SiLU] * 9_999
    assert type(level[0]) is gelus.GELU and level[0].approximate == "tanh"
    assert report.replaced[-1].name == "1." * 9_999 + "0"


class Refusing(nn.Sequential):
    """A container whose slot "2" cannot be set: a failure in the middle of the replacements."""

    def __setattr__(self, name, value):
        if name == "2" and isinstance(value, gelus.SiLU):
            raise RuntimeError("injected: this slot refuses")
        super().__setattr__(name, value)


def test_a_failure_in_the_middle_leaves_the_model_as_it_was():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 4),
        nn.GELU(),  # replaced before the failure
        nn.Sequential(nn.SiLU(), nn.Linear(4, 4)),  # replaced before the failure
        Refusing(nn.Linear(4, 4), nn.GELU(approximate="tanh"), nn.SiLU()),  # "3.2" fails
        nn.GELU(),  # after it
    )
    before = place_ids(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(5, 4)
    expected = model(x)
    with pytest.raises(RuntimeError, match="injected"):
        gelus.patch(model, functional=True)
    assert place_ids(model) == before  # the same module objects at every place, params, buffers
    assert type(model[1]) is nn.GELU and type(model[3][1]) is nn.GELU
    assert "forward" not in model.__dict__  # no functional routing installed either
    after = model.state_dict()
    assert list(after) == list(state)
    assert all(torch.equal(after[k], v) for k, v in state.items())
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)


def test_a_failure_while_planning_changes_nothing(monkeypatch):
    from gelus import _patch

    def broken(module):
        raise RuntimeError("injected: building the member failed")

    monkeypatch.setitem(_patch._MEMBERS, ("torch.nn.modules.activation", "SiLU"), broken)
    model = nn.Sequential(nn.GELU(), nn.Linear(3, 3), nn.SiLU(), nn.GELU())
    before = place_ids(model)
    with pytest.raises(RuntimeError, match="injected"):
        gelus.patch(model)
    assert place_ids(model) == before and type(model[0]) is nn.GELU


def test_settings_the_class_does_not_support_and_state_dict_hooks_are_left_alone():
    by_hand = nn.GELU()
    by_hand.approximate = (
        "sigmoid"  # nn.GELU's forward raises on it; gelus would compute x·σ(1.702x)
    )
    hooked = nn.SiLU()
    hooked.register_state_dict_post_hook(lambda module, state, prefix, local: None)
    own_forward = nn.GELU()
    own_forward.forward = lambda x: 2 * x
    model = nn.Sequential(by_hand, hooked, own_forward, nn.GELU())
    report = gelus.patch(model)
    assert [r.name for r in report.replaced] == ["3"]
    assert [(a.name, a.module) for a in report.left_alone] == [
        ("0", by_hand),
        ("1", hooked),
        ("2", own_forward),
    ]
    reasons = [a.reason for a in report.left_alone]
    assert "approximate='sigmoid' is not a form nn.GELU computes" in reasons[0]
    assert "state_dict hooks" in reasons[1]
    assert "forward is replaced on the instance" in reasons[2]
    assert model[0] is by_hand and model[1] is hooked and model[2] is own_forward
    with pytest.raises(RuntimeError, match="approximate"):
        model[0](torch.randn(2))  # still torch's, still refusing


@pytest.mark.parametrize(
    ("act", "name"),
    [(nn.GELU(), "gelu"), (nn.GELU(approximate="tanh"), "gelu_tanh"), (nn.SiLU(), "silu")],
    ids=["gelu", "gelu_tanh", "silu"],
)
def test_patch_builds_the_class_the_registered_name_builds(act, name):
    (entry,) = gelus.patch(nn.Sequential(act)).replaced
    by_name = gelus.get_activation(name)
    assert type(entry.new) is type(by_name)
    assert getattr(entry.new, "approximate", None) == getattr(by_name, "approximate", None)


# ------------------------------------------------------------------ functional calls (functional=True)

# at -inf torch's functions give nan (x·Φ(x) and x·σ(x) as 0·inf); gelus's give 0 (its edge
# contract, docs/NUMERICS.md): a value that tells whose function ran, eager, compiled or exported
EDGES = torch.tensor([[-float("inf"), -2.0, -0.5, 0.0, 0.5, 2.0, 7.0, 30.0]])


class Inner(nn.Module):
    def forward(self, x):
        y = nn.functional.silu(x)
        return y + nn.functional.silu(input=x)  # a second site, keyword spelling


class FunctionalNet(nn.Module):
    """A model calling the functional spellings directly, one of them from a submodule."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.inner = Inner()

    def forward(self, x):
        h = nn.functional.gelu(x) + nn.functional.gelu(x, approximate="tanh")
        h = h + self.inner(x) + nn.functional.silu(x.clone(), inplace=True)
        return h + self.fc(torch.nan_to_num(h, nan=0.0)).sum() * 0  # the Linear's grads: zeros


def reference(x):
    """What the routed model computes: gelus's functions in place of torch's."""
    g = gelus.functional
    return g.gelu(x) + g.gelu(x, "tanh") + 2 * g.silu(x) + g.silu(x)


def test_functional_calls_are_routed_counted_by_site_and_form_and_removable():
    torch.manual_seed(0)
    model = FunctionalNet()
    report = gelus.patch(model, functional=True)
    assert report.replaced == [] and report.functional.calls == {}
    assert "counted in the first eager forward: none run yet" in str(report)
    x = torch.randn(6, 8) * 3
    torch.testing.assert_close(model(x), FunctionalNet.forward(model, x))  # values unchanged
    assert torch.isnan(FunctionalNet.forward(model, EDGES)).any()  # torch's: nan at -inf
    torch.testing.assert_close(model(EDGES), reference(EDGES))  # gelus's: 0 at -inf
    assert report.functional.counts() == {
        "F.gelu(approximate='none')": 1,
        "F.gelu(approximate='tanh')": 1,
        "F.silu": 2,  # two sites in Inner.forward
        "F.silu(inplace=True)": 1,
    }
    sites = {(c.name, c.function) for c in report.functional.calls}
    assert ("inner", "F.silu") in sites and ("", "F.silu(inplace=True)") in sites
    assert all(c.code.startswith("test_patch:") for c in report.functional.calls)
    text = str(report)
    assert "functional calls routed to gelus: F.gelu(approximate='none') ×1" in text
    assert "  inner: F.silu at test_patch:" in text and "(Inner.forward)" in text
    # patching again reuses the routing; removing it gives torch's functions back
    assert gelus.patch(model, functional=True).functional is report.functional
    report.functional.remove()
    assert not report.functional.active and "forward" not in model.__dict__
    assert torch.isnan(model(EDGES)).any()
    assert "routing removed" in str(report)


@pytest.mark.slow
def test_routing_under_compile_fullgraph_and_export_is_gelus():
    torch.manual_seed(0)
    model = FunctionalNet()
    gelus.patch(model, functional=True)
    expected = reference(EDGES)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(EDGES), expected)  # compiled first: nothing counted
    x = (torch.randn(5, 8) * 3).requires_grad_()
    y = compiled(x)
    (gx,) = torch.autograd.grad(y.sum(), x)
    x2 = x.detach().requires_grad_()
    (gx_ref,) = torch.autograd.grad(reference(x2).sum(), x2)
    torch.testing.assert_close(gx, gx_ref)
    exported = torch.export.export(model, (EDGES,))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert {"gelus.gelu.default", "gelus.swish.default"} <= targets
    assert not any(t.startswith(("aten.gelu", "aten.silu")) for t in targets)
    torch.testing.assert_close(exported.module()(EDGES), expected)


def test_routing_leaves_what_torch_refuses_to_torch_and_gelus_own_calls_alone():
    class Refused(nn.Module):
        def forward(self, x):
            return nn.functional.gelu(x, approximate="sigmoid")

    model = nn.Sequential(Refused())
    gelus.patch(model, functional=True)
    with pytest.raises(RuntimeError, match="approximate"):
        model(torch.randn(3))  # torch's error, not gelus's sigmoid form
    # a routed submodule inside a routed model: gelus's own calls to torch stay torch's
    outer = nn.Sequential(FunctionalNet())
    inner_report = gelus.patch(outer[0], functional=True)
    outer_report = gelus.patch(outer, functional=True)
    torch.testing.assert_close(outer(EDGES), reference(EDGES))
    # the inner mode, entered last, routes the model's calls; the outer one then sees only the
    # calls gelus's functions make to torch's, which it must neither route again nor count
    assert sum(inner_report.functional.counts().values()) == 5
    assert outer_report.functional.counted and outer_report.functional.calls == {}


def test_a_copy_of_a_routed_model_routes_on_its_own():
    model = FunctionalNet()
    report = gelus.patch(model, functional=True)
    twin = copy.deepcopy(model)
    twin_routing = gelus.patch(twin, functional=True).functional
    assert twin_routing is not report.functional
    torch.testing.assert_close(twin(EDGES), reference(EDGES))
    assert twin_routing.counted and not report.functional.counted
    twin_routing.remove()
    assert report.functional.active and torch.isnan(twin(EDGES)).any()
