"""gelus.patch on a tiny GPT-OSS built from transformers' GptOssConfig (no download): the experts'
gate (a method, ``GptOssExperts._apply_gate``) becomes gelus's ClampedSwiGLU on the instance;
logits and every parameter's gradient equal the original model's, with the clamps active."""

import copy
import io

import pytest
import torch

import gelus
from torchvision_stand_in import import_modules


@pytest.fixture(scope="module")
def gpt_oss():
    """transformers' GPT-OSS modeling module (one import for the module, as the other tests)."""
    (modeling,), _ = import_modules("transformers.models.gpt_oss.modeling_gpt_oss")
    return modeling


def tiny_gpt_oss(gpt_oss, seed=0):
    torch.manual_seed(seed)
    config = gpt_oss.GptOssConfig(
        vocab_size=64, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
    )  # fmt: skip
    model = gpt_oss.GptOssForCausalLM(config).float()
    with torch.no_grad():  # large gate_up projections: both clamps are active on many elements
        for experts in _experts(gpt_oss, model):
            experts.gate_up_proj.normal_(0.0, 2.0)
            experts.gate_up_proj_bias.normal_(0.0, 3.0)
    return model


def _experts(gpt_oss, model):
    return [m for m in model.modules() if isinstance(m, gpt_oss.GptOssExperts)]


def _run(model, ids):
    model.zero_grad()
    logits = model(input_ids=ids).logits
    logits.square().mean().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads


def test_patch_puts_the_gate_on_the_instance_with_logits_and_gradients_unchanged(gpt_oss):
    original = tiny_gpt_oss(gpt_oss)
    model = copy.deepcopy(original)
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    # the gate's inputs in the original: both clamps bite
    seen = []
    for experts in _experts(gpt_oss, original):
        method = experts._apply_gate
        experts._apply_gate = lambda h, f=method: (seen.append(h.detach()), f(h))[1]
    expected_logits, expected_grads = _run(original, ids)
    h = torch.cat([t.reshape(-1, t.shape[-1]) for t in seen])
    assert (h[:, ::2] > 7.0).float().mean() > 0.05 and (
        h[:, 1::2].abs() > 7.0
    ).float().mean() > 0.05

    parameters = [id(p) for p in model.parameters()]
    keys, names = list(model.state_dict()), [n for n, _ in model.named_modules()]
    report = gelus.patch(model)
    gates = [r for r in report.replaced if r.name.endswith("._apply_gate")]
    assert [r.name for r in gates] == [f"model.layers.{i}.mlp.experts._apply_gate" for i in (0, 1)]
    for r, experts in zip(gates, _experts(gpt_oss, model), strict=True):
        assert r.old is experts and type(experts) is gpt_oss.GptOssExperts  # class kept
        assert isinstance(experts._apply_gate, gelus.ClampedSwiGLU)
        assert (r.new.alpha, r.new.limit, r.new.interleaved) == (1.702, 7.0, True)
    # every Parameter object, the state_dict keys and the module tree are kept
    assert [id(p) for p in model.parameters()] == parameters
    assert list(model.state_dict()) == keys and [n for n, _ in model.named_modules()] == names

    logits, grads = _run(model, ids)
    torch.testing.assert_close(logits, expected_logits, rtol=1e-5, atol=1e-5)
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)
    assert "_apply_gate" in str(report)

    # patching again changes nothing; copies and pickles carry the gate
    assert not [r for r in gelus.patch(model).replaced if r.name.endswith("_apply_gate")]
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert isinstance(_experts(gpt_oss, loaded)[0].__dict__["_apply_gate"], gelus.ClampedSwiGLU)
    torch.testing.assert_close(loaded(input_ids=ids).logits, logits, rtol=0, atol=0)


def test_a_gate_set_on_the_instance_is_left_alone_and_a_failure_rolls_back(gpt_oss):
    model = tiny_gpt_oss(gpt_oss)
    experts = _experts(gpt_oss, model)
    experts[0]._apply_gate = lambda h: h[..., ::2]
    report = gelus.patch(model)
    assert [a.name for a in report.left_alone] == ["model.layers.0.mlp.experts"]
    assert [r.name for r in report.replaced] == ["model.layers.1.mlp.experts._apply_gate"]

    # all or nothing: a failure while making the replacements puts the gates back
    model = tiny_gpt_oss(gpt_oss)
    model.lm_head = torch.nn.Sequential(model.lm_head, torch.nn.GELU())

    class Refuses(dict):
        def __setitem__(self, key, value):
            raise RuntimeError("refused")

    sequential = model.lm_head
    sequential._modules = Refuses(sequential._modules)  # setattr of the GELU fails
    with pytest.raises(RuntimeError, match="refused"):
        gelus.patch(model)
    assert all("_apply_gate" not in e.__dict__ for e in _experts(gpt_oss, model))
