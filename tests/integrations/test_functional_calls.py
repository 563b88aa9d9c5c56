"""gelus.patch(model, functional=True) on real transformers models whose forward calls F.gelu or
F.silu directly (LFM2's MLP, Whisper's convolution stem, Mamba's gated scan and the activation it
builds per call): the report names each call site, and the patched model's logits and gradients
equal the unpatched model's (the oracle), eagerly, compiled with fullgraph=True, and exported.
Tiny configurations, no weights, no network."""

import copy
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers reads it: nothing may touch the network

import pytest
import torch

import gelus
from torchvision_stand_in import import_modules

TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8, 4], [6, 2, 3, 11, 1, 0, 9, 5]])


@pytest.fixture(scope="module")
def hf():
    modules, _ = import_modules(
        "transformers.models.lfm2.modeling_lfm2",
        "transformers.models.whisper.modeling_whisper",
        "transformers.models.mamba.modeling_mamba",
    )
    return dict(zip(("lfm2", "whisper", "mamba"), modules, strict=True))


def lfm2(hf):
    config = hf["lfm2"].Lfm2Config(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        layer_types=["conv", "full_attention"],
        conv_L_cache=3,
        block_auto_adjust_ff_dim=False,
    )
    return hf["lfm2"].Lfm2ForCausalLM(config), {"input_ids": TOKENS, "labels": TOKENS}


def whisper(hf):
    config = hf["whisper"].WhisperConfig(
        vocab_size=40,
        num_mel_bins=8,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_source_positions=8,  # 16 input frames: two convolutions, the second of stride 2
        max_target_positions=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    features = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(3))
    model = hf["whisper"].WhisperForConditionalGeneration(config)
    return model, {"input_features": features, "labels": TOKENS}


def mamba(hf):
    config = hf["mamba"].MambaConfig(
        vocab_size=40,
        hidden_size=16,
        state_size=4,
        num_hidden_layers=2,
        expand=2,
        conv_kernel=4,
        time_step_rank=4,
    )
    return hf["mamba"].MambaForCausalLM(config), {"input_ids": TOKENS, "labels": TOKENS}


# per model: what the report must say (modules replaced; functional sites by function and form)
EXPECTED = {
    lfm2: (0, {"F.silu": 2}),  # Lfm2MLP: w2(F.silu(w1(x)) * w3(x)), one per layer
    # the convolution stem, two F.gelu calls; the layers' GELUActivation modules are replaced
    whisper: (2, {"F.gelu(approximate='none')": 2}),
    # the gated scan's F.silu(z), and the SiLUActivation the convolution fallback builds per call
    # (ACT2FN[activation](out): a module that is not in the model, so only routing reaches it)
    mamba: (2, {"F.silu": 4}),
}
IDS = ["lfm2", "whisper", "mamba"]


def logits_and_grads(model, inputs, run=None):
    """Logits and every parameter's gradient of the loss; ``run``: a compiled ``model``."""
    model.zero_grad(set_to_none=True)
    out = (model if run is None else run)(**inputs, use_cache=False)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad for n, p in model.named_parameters()}


def assert_same(result, expected):
    (logits, grads), (logits_ref, grads_ref) = result, expected
    torch.testing.assert_close(logits, logits_ref)
    assert grads.keys() == grads_ref.keys()
    for name, grad in grads_ref.items():
        torch.testing.assert_close(grads[name], grad, msg=name)


@pytest.mark.parametrize("build", list(EXPECTED), ids=IDS)
def test_eager_values_gradients_and_the_report(hf, build):
    torch.manual_seed(0)
    original, inputs = build(hf)
    original.eval()
    model = copy.deepcopy(original)
    report = gelus.patch(model, functional=True)
    expected = logits_and_grads(original, inputs)
    replaced, counts = EXPECTED[build]
    assert len(report.replaced) == replaced and report.left_alone == []
    assert_same(logits_and_grads(model, inputs), expected)  # the first eager forward: counted
    assert report.functional.counts() == counts
    text = str(report)
    assert all(f"{function} ×{n}" in text for function, n in counts.items())
    assert all(c.code.startswith("transformers.") for c in report.functional.calls)


def patched_copy(hf, build):
    """A model, its patched copy (functional=True) and its inputs."""
    torch.manual_seed(0)
    original, inputs = build(hf)
    original.eval()
    model = copy.deepcopy(original)
    gelus.patch(model, functional=True)
    return original, model, inputs


# Mamba's reference scan is a Python loop over the sequence, which dynamo unrolls: compiling it
# takes as long as the two others together, so the compiled and exported checks run on these two
@pytest.mark.slow
@pytest.mark.parametrize("build", [lfm2, whisper], ids=["lfm2", "whisper"])
def test_compiled_fullgraph_gives_the_same_values_and_gradients(hf, build):
    original, model, inputs = patched_copy(hf, build)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    assert_same(logits_and_grads(model, inputs, compiled), logits_and_grads(original, inputs))


@pytest.mark.slow
@pytest.mark.parametrize("build", [lfm2, whisper], ids=["lfm2", "whisper"])
def test_exported_graph_holds_gelus_operators_and_gives_the_same_logits(hf, build):
    original, model, inputs = patched_copy(hf, build)
    inputs = {**inputs, "use_cache": False}
    exported = torch.export.export(model, (), inputs)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    ours = {"gelus.swish.default"} if build is lfm2 else {"gelus.gelu.default"}
    assert ours <= targets
    assert not any(t.startswith(("aten.gelu", "aten.silu")) for t in targets)
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(**inputs).logits, original(**inputs).logits)


def test_a_routed_lfm2_generates_the_same_tokens(hf):
    original, model, _ = patched_copy(hf, lfm2)
    prompt = TOKENS[:, :4]
    expected = original.generate(prompt, max_new_tokens=5, do_sample=False)
    assert torch.equal(model.generate(prompt, max_new_tokens=5, do_sample=False), expected)
