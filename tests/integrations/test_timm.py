"""gelus against the real timm: gelus.patch on timm's activation layers and on tiny ViT and
ConvNeXt models (the oracle is the unpatched model), gelus classes as ``act_layer``, and the
``gelus:`` names of gelus.integrations.timm in timm's activation factory. No weights, no network."""

import copy
import functools
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # create_model(pretrained=False) must not touch the network

import pytest
import torch
from torch import nn

import gelus
import gelus.integrations.timm as timm_gelus
from patch_checks import assert_same_function
from torchvision_stand_in import import_modules


@pytest.fixture(scope="module")
def timm():
    (timm,), _ = import_modules("timm")
    return timm


@pytest.fixture
def registered(timm):
    timm_gelus.register()
    yield
    timm_gelus.unregister()


def layer(timm, name):
    from timm.layers import activations, activations_me

    return getattr(activations, name, None) or getattr(activations_me, name)


# timm's activation layers: the gelus member patch gives each, or None (left alone and listed)
EXPECTED = {
    "GELU": (gelus.GELU, "none"),
    "GELUTanh": (gelus.GELU, "tanh"),
    "QuickGELU": (gelus.GELU, "sigmoid"),  # as gelus:quick_gelu builds it
    "Swish": (gelus.SiLU, None),
    "SwishMe": (gelus.SiLU, None),
    "HardMish": (gelus.HardMish, None),
    "HardMishMe": (gelus.HardMish, None),
    "Mish": None,
    "MishMe": None,
    "Sigmoid": None,
    "Tanh": None,
    "HardSwish": None,
    "HardSwishMe": None,
    "HardSigmoid": None,
    "HardSigmoidMe": None,
    "PReLU": None,
}


def test_every_activation_layer_of_timm_is_accounted_for(timm):
    from timm.layers import activations, activations_me

    layers = {
        name
        for module in (activations, activations_me)
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, nn.Module)
        and value.__module__ == module.__name__
    }
    assert layers == set(EXPECTED)  # a new layer in timm shows up here


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("inplace", [False, True])
def test_patch_maps_each_layer_to_the_member_with_its_function(timm, name, inplace):
    cls = layer(timm, name)
    act = cls(inplace=inplace)
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(4, 6), act, nn.Linear(6, 3))
    model = copy.deepcopy(original)
    report = gelus.patch(model)
    if EXPECTED[name] is None:
        assert report.replaced == [] and type(model[1]) is cls
        assert [a.name for a in report.left_alone] == ["1"]
        assert "gelus has no member" in report.left_alone[0].reason
        return
    member, form = EXPECTED[name]
    assert type(model[1]) is member and report.left_alone == []
    if form is not None:
        assert model[1].approximate == form
    assert model[1].inplace == getattr(act, "inplace", False)  # as the layer honoured it
    x = torch.linspace(-8, 8, 4 * 50).reshape(50, 4)
    assert_same_function(original, model, x)


def tiny_vit(timm, **kwargs):
    return timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=16,
        patch_size=8,
        embed_dim=16,
        depth=2,
        num_heads=2,
        num_classes=3,
        **kwargs,
    )


def tiny_convnext(timm, **kwargs):
    return timm.create_model(
        "convnext_atto",
        pretrained=False,
        depths=(1, 1, 1, 1),
        dims=(8, 8, 16, 16),
        num_classes=3,
        **kwargs,
    )


IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def output_and_grads(model, images):
    model.zero_grad(set_to_none=True)
    out = model(images)
    out.logsumexp(dim=1).sum().backward()
    return out.detach(), {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("build", "size", "old_class", "places"),
    [
        (tiny_vit, 16, nn.GELU, 2),  # one per block
        (tiny_convnext, 32, "timm.layers.activations.GELU", 4),  # act_layer="gelu": timm's GELU
    ],
    ids=["vit", "convnext"],
)
def test_patched_vit_and_convnext_give_the_originals_outputs_and_gradients(
    timm, build, size, old_class, places
):
    torch.manual_seed(0)
    original = build(timm)
    model = copy.deepcopy(original)
    keys = list(model.state_dict())
    report = gelus.patch(model)
    assert len(report.replaced) == places and report.left_alone == []
    for r in report.replaced:
        name = f"{type(r.old).__module__}.{type(r.old).__name__}"
        assert r.old.__class__ is old_class or name == old_class
        assert type(r.new) is gelus.GELU and r.new.approximate == "none"
    assert list(model.state_dict()) == keys
    images = IMAGES[..., :size, :size]
    out_a, grads_a = output_and_grads(original, images)
    out_b, grads_b = output_and_grads(model, images)
    torch.testing.assert_close(out_b, out_a)
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, msg=name)


@pytest.mark.parametrize("build", [tiny_vit, tiny_convnext], ids=["vit", "convnext"])
def test_gelus_classes_and_registered_names_are_act_layers(timm, registered, build):
    by_class = build(timm, act_layer=functools.partial(gelus.GELU, approximate="tanh"))
    by_name = build(timm, act_layer="gelus:gelu_tanh")
    reference = build(timm, act_layer="gelu_tanh")  # timm's own GELUTanh
    for model in (by_class, by_name):
        acts = [m for m in model.modules() if isinstance(m, gelus.GELU)]
        assert acts and all(a.approximate == "tanh" for a in acts)
        assert not any(type(m).__name__ == "GELUTanh" for m in model.modules())
        model.load_state_dict(reference.state_dict())  # same keys: the same weights load
    size = 16 if build is tiny_vit else 32
    images = IMAGES[..., :size, :size]
    with torch.no_grad():
        expected = reference(images)
        torch.testing.assert_close(by_class(images), expected)
        torch.testing.assert_close(by_name(images), expected)


def test_registered_names_resolve_through_timms_factory_and_unregister(timm, registered):
    from timm.layers import create_act_layer, get_act_layer

    act = create_act_layer("gelus:silu", inplace=True)
    assert type(act) is gelus.SiLU and act.inplace
    assert type(create_act_layer("gelus:quick_gelu")) is gelus.GELU
    assert get_act_layer("gelu") is layer(timm, "GELU")  # timm's own names untouched
    timm_gelus.unregister()
    with pytest.raises(KeyError, match="gelus:silu"):
        get_act_layer("gelus:silu")


# timm's names whose layer patch maps, with the gelus name of the same function: the same name
# (gelus:<name> is registered for each), except "swish", which timm builds as torch's nn.SiLU:
# gelus's "swish" is the β family (Swish)
PAIRS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu"}
PAIRS |= {"swish": "silu", "hard_mish": "hard_mish"}


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("inplace", [False, True])
def test_patch_builds_the_class_the_gelus_name_builds(timm, registered, name, inplace):
    from timm.layers import create_act_layer

    (entry,) = gelus.patch(nn.Sequential(create_act_layer(name, inplace=inplace))).replaced
    by_name = create_act_layer(f"gelus:{PAIRS[name]}", inplace=inplace)
    assert type(entry.new) is type(by_name)  # one class per function (quick_gelu: GELU)
    assert getattr(entry.new, "approximate", None) == getattr(by_name, "approximate", None)
