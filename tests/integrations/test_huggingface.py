"""gelus against the real Hugging Face transformers: gelus.patch on its activation classes and on
tiny BERT / GPT-2 models (the oracle is the unpatched model), and the ``gelus:`` names of
gelus.integrations.huggingface through save_pretrained -> from_pretrained. No weights, no network."""

import copy
import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers reads it: nothing may touch the network

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import gelus
import gelus.integrations.huggingface as hf_gelus
from gelus._patch import _MEMBERS
from patch_checks import assert_same_function
from torchvision_stand_in import import_modules


@pytest.fixture(scope="module")
def hf():
    """transformers' activations, auto classes, BERT and GPT-2 (one import for the module)."""
    (activations, auto, bert, gpt2), _ = import_modules(
        "transformers.activations",
        "transformers.models.auto.modeling_auto",
        "transformers.models.bert.modeling_bert",
        "transformers.models.gpt2.modeling_gpt2",
    )
    return activations, auto, bert, gpt2


@pytest.fixture
def registered(hf):
    hf_gelus.register()
    yield
    hf_gelus.unregister()


# every name of transformers' ACT2CLS: the gelus member patch gives it, or None (left alone)
EXPECTED = {
    "gelu": (gelus.GELU, "none"),
    "gelu_python": (gelus.GELU, "none"),
    "gelu_new": (gelus.GELU, "tanh"),
    "gelu_fast": (gelus.GELU, "tanh"),
    "gelu_accurate": (gelus.GELU, "tanh"),
    "gelu_pytorch_tanh": (gelus.GELU, "tanh"),
    "gelu_python_tanh": (gelus.GELU, "tanh"),
    "quick_gelu": (gelus.GELU, "sigmoid"),  # as gelus:quick_gelu builds it
    "gelu_10": (gelus.ClippedGELU, "none"),
    "silu": (gelus.SiLU, None),
    "swish": (gelus.SiLU, None),  # nn.SiLU
    "laplace": (gelus.Laplace, None),
    "relu2": (gelus.ReLU2, None),
    "sqrtsoftplus": (gelus.SqrtSoftplus, None),
    "xielu": (gelus.XIELU, None),
    "mish": None,  # MishActivation: listed
    "linear": None,  # LinearActivation: listed
    # torch's own classes, not of the family: neither replaced nor listed
    "hardswish": None,
    "leaky_relu": None,
    "relu": None,
    "relu6": None,
    "sigmoid": None,
    "tanh": None,
    "prelu": None,
}


def test_every_name_of_act2cls_is_accounted_for(hf):
    activations, *_ = hf
    assert set(activations.ACT2CLS) == set(EXPECTED)  # a new name in transformers shows up here
    mapped_classes = {key[1] for key in _MEMBERS if key[0] == "transformers.activations"}
    mapped_classes -= {"PytorchGELUTanh"}  # an alias of GELUTanh in this transformers
    assert mapped_classes <= {
        cls.__name__ for cls in vars(activations).values() if isinstance(cls, type)
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_patch_maps_each_activation_to_the_member_with_its_function(hf, name):
    activations, *_ = hf
    act = activations.ACT2FN[name]
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(4, 6), act, nn.Linear(6, 3))
    model = copy.deepcopy(original)
    report = gelus.patch(model)
    expected = EXPECTED[name]
    if expected is None:
        assert report.replaced == [] and type(model[1]) is type(act)
        family = type(act).__module__ == "transformers.activations"
        assert [a.name for a in report.left_alone] == (["1"] if family else [])
        return
    member, form = expected
    assert [r.name for r in report.replaced] == ["1"] and type(model[1]) is member
    if form is not None:
        assert model[1].approximate == form  # the tanh form stays the tanh form
    assert list(model.state_dict()) == list(original.state_dict())
    for (key, a), b in zip(original.state_dict().items(), model.state_dict().values(), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b), key  # XIELU's bfloat16 parameters
    # values and gradients over [-12, 12], beyond gelu_10's clip and into the tails
    x = torch.linspace(-12, 12, 4 * 60).reshape(60, 4)
    assert_same_function(original, model, x)


def tiny_bert_config(hf, **kwargs):
    return hf[2].BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        **kwargs,
    )


def tiny_gpt2_config(hf, **kwargs):
    return hf[3].GPT2Config(
        vocab_size=40,
        n_embd=16,
        n_layer=2,
        n_head=2,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
        **kwargs,
    )


TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8, 4], [6, 2, 3, 11, 1, 0, 9, 5]])


def logits_and_grads(model):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=TOKENS, labels=TOKENS)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("build", "places", "form"),
    [  # places: one activation per layer, and BERT's masked-LM head has one
        (lambda hf: hf[2].BertForMaskedLM(tiny_bert_config(hf, hidden_act="gelu")), 3, "none"),
        (
            lambda hf: hf[2].BertForMaskedLM(tiny_bert_config(hf, hidden_act="gelu_new")),
            3,
            "tanh",
        ),
        (lambda hf: hf[3].GPT2LMHeadModel(tiny_gpt2_config(hf)), 2, "tanh"),  # gelu_new
    ],
    ids=["bert-gelu", "bert-gelu_new", "gpt2"],
)
def test_patched_bert_and_gpt2_give_the_originals_logits_and_gradients(hf, build, places, form):
    torch.manual_seed(0)
    original = build(hf).train()
    model = copy.deepcopy(original)
    keys = list(model.state_dict())
    count = sum(p.numel() for p in model.parameters())
    report = gelus.patch(model)
    assert len(report.replaced) == places and report.left_alone == []
    # the form is the old class's: at this initialisation (weights ~ N(0, 0.02²)) the forms'
    # difference is below the logits' tolerance, and the per-class test checks the function
    assert all(type(r.new) is gelus.GELU and r.new.approximate == form for r in report.replaced)
    assert list(model.state_dict()) == keys and sum(p.numel() for p in model.parameters()) == count
    torch.manual_seed(1)  # the same dropout masks in both
    logits_a, grads_a = logits_and_grads(original)
    torch.manual_seed(1)
    logits_b, grads_b = logits_and_grads(model)
    torch.testing.assert_close(logits_b, logits_a)
    assert grads_b.keys() == grads_a.keys()
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, msg=name)


def test_a_gelus_name_builds_gelus_and_survives_save_and_load(hf, registered, tmp_path):
    activations, auto, bert, _ = hf
    assert activations.ACT2FN["gelu_new"].__class__ is activations.NewGELUActivation  # untouched
    assert isinstance(activations.ACT2CLS["gelus:gelu_tanh"](), gelus.GELU)
    torch.manual_seed(0)
    model = bert.BertModel(tiny_bert_config(hf, hidden_act="gelus:gelu_tanh")).eval()
    acts = [layer.intermediate.intermediate_act_fn for layer in model.encoder.layer]
    assert all(type(a) is gelus.GELU and a.approximate == "tanh" for a in acts)
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["hidden_act"] == "gelus:gelu_tanh"
    loaded = auto.AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is bert.BertModel
    acts = [layer.intermediate.intermediate_act_fn for layer in loaded.encoder.layer]
    assert all(type(a) is gelus.GELU and a.approximate == "tanh" for a in acts)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(input_ids=TOKENS).last_hidden_state, model(input_ids=TOKENS).last_hidden_state
        )
    # the same weights under Hugging Face's name for the same function: the same outputs
    reference = bert.BertModel(tiny_bert_config(hf, hidden_act="gelu_new")).eval()
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(
            reference(input_ids=TOKENS).last_hidden_state,
            model(input_ids=TOKENS).last_hidden_state,
        )
    # in a process without register(), the name is unknown: loud, never transformers' own GELU
    hf_gelus.unregister()
    assert not any(name.startswith("gelus:") for name in activations.ACT2FN)
    with pytest.raises(KeyError, match="gelus:gelu_tanh"):
        auto.AutoModel.from_pretrained(tmp_path)
    hf_gelus.register()  # and once the call is made, the saved model loads on gelus again
    again = auto.AutoModel.from_pretrained(tmp_path)
    assert type(again.encoder.layer[0].intermediate.intermediate_act_fn) is gelus.GELU


def test_gpt2_activation_function_takes_a_gelus_name(hf, registered):
    _, _, _, gpt2 = hf
    torch.manual_seed(0)
    model = gpt2.GPT2LMHeadModel(tiny_gpt2_config(hf, activation_function="gelus:quick_gelu"))
    acts = [block.mlp.act for block in model.transformer.h]
    assert all(type(a) is gelus.GELU and a.approximate == "sigmoid" for a in acts)
    assert "gelus:gelu" in hf_gelus.register() and "gelus:geglu" not in hf_gelus.register()


# the gelus name of each mapped ACT2CLS name: the same name (gelus:<name> is registered for each),
# except HF's "swish", which builds torch's nn.SiLU: gelus's "swish" is the β family (Swish)
GELUS_NAME = {"swish": "silu"}
SETTINGS = ("approximate", "min", "max", "inplace")


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e is not None))
def test_patch_builds_the_class_the_gelus_name_builds(hf, registered, name):
    activations, *_ = hf
    (entry,) = gelus.patch(nn.Sequential(activations.ACT2FN[name])).replaced
    by_name = activations.ACT2FN[f"gelus:{GELUS_NAME.get(name, name)}"]  # as a config names it
    assert type(entry.new) is type(by_name)  # one class per function (quick_gelu: GELU)
    for setting in SETTINGS:
        assert getattr(entry.new, setting, None) == getattr(by_name, setting, None), setting


def test_xielu_keeps_its_parameter_and_buffer_objects_and_frozen_stays_frozen(hf):
    activations, *_ = hf
    model = nn.Sequential(nn.Linear(4, 4), activations.ACT2FN["xielu"])
    model[1].alpha_n.requires_grad_(False)
    before = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)  # built before the patch
    assert len(gelus.patch(model).replaced) == 1 and type(model[1]) is gelus.XIELU
    after = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    assert after.keys() == before.keys() and all(after[k] is v for k, v in before.items())
    assert model[1].alpha_p.dtype == torch.bfloat16 and not model[1].alpha_n.requires_grad
    alpha_p, alpha_n = model[1].alpha_p.detach().clone(), model[1].alpha_n.detach().clone()
    model(torch.linspace(-3, 3, 8).reshape(2, 4)).square().sum().backward()
    optimizer.step()
    assert not torch.equal(model[1].alpha_p, alpha_p)  # the optimizer moves the patched module's
    assert torch.equal(model[1].alpha_n, alpha_n)


def test_a_parametrized_xielu_is_left_alone_and_listed(hf):
    activations, *_ = hf

    class Doubled(nn.Module):
        def forward(self, rho):
            return 2 * rho

    act = activations.ACT2FN["xielu"]
    parametrize.register_parametrization(act, "alpha_p", Doubled())
    model = nn.Sequential(nn.Linear(4, 4), act)
    report = gelus.patch(model)
    assert report.replaced == [] and model[1] is act
    ((name, module, reason),) = report.left_alone
    assert (name, module) == ("1", act)
    assert "parametrized (alpha_p)" in reason


def test_patched_mid_training_the_loss_curve_is_the_unpatched_ones(hf):
    """An optimizer built before the patch trains on: the same losses as the unpatched model's
    step by step, every trainable parameter (XIELU's too) moving after the patch, frozen ones not."""
    torch.manual_seed(0)
    config = tiny_bert_config(
        hf, hidden_act="xielu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    original = hf[2].BertForMaskedLM(config).train()
    original.bert.embeddings.position_embeddings.weight.requires_grad_(False)  # frozen
    model = copy.deepcopy(original)
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (original, model)]
    losses: tuple[list[float], list[float]] = ([], [])
    for step in range(6):
        if step == 2:
            report = gelus.patch(model)
            # one per layer and the masked-LM head's
            assert [type(r.new) for r in report.replaced] == [gelus.XIELU] * 3
            at_patch = {n: p.detach().clone() for n, p in model.named_parameters()}
        for m, optimizer, curve in zip((original, model), optimizers, losses, strict=True):
            optimizer.zero_grad()
            loss = m(input_ids=TOKENS, labels=TOKENS).loss
            loss.backward()
            optimizer.step()
            curve.append(loss.item())
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=0)
    assert losses[1][-1] < losses[1][0]  # it trains
    for name, p in model.named_parameters():
        moved = not torch.equal(p, at_patch[name])
        assert moved == p.requires_grad, name  # XIELU's alpha_p/alpha_n among the moving
    frozen = model.bert.embeddings.position_embeddings.weight
    assert not frozen.requires_grad
    torch.testing.assert_close(frozen, original.bert.embeddings.position_embeddings.weight)
