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
