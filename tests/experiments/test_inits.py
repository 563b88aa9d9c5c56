"""``model.init``: each scheme's weights against its formula from the fans, the defaults unchanged.

The oracle is the formula, computed here from each matrix's fan-in and fan-out (a Linear's weight
``[out, in]``, an Embedding's ``[num, d]`` with fan-in d; the stacked MLP's ``[in, out]``), and
float64 sample moments of the drawn weights.
"""

import hashlib
import math

import numpy as np
import pytest
import torch

from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.engines.mlp.stacked import MemberRandomness, StackedMLP
from gelus.experiments.engines.transformer.config import TransformerModelConfig
from gelus.experiments.engines.transformer.models import ByteGPT, init_parameters

LAYERS = 2


def _digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _gpt(scheme: str, d: int = 64, context: int = 64, seed: int = 3) -> ByteGPT:
    (spec,) = resolve_activations(("gelu",), "none")
    cfg = TransformerModelConfig(d_model=d, layers=LAYERS, heads=2, context=context)
    model = ByteGPT(cfg, spec)
    init_parameters(model, seed, 0.02, LAYERS, scheme)
    return model


def _expected_std(scheme: str, name: str, shape) -> float:
    fan_out, fan_in = shape  # [out, in]; an embedding [num, d]: fan-in d
    embedding = name in ("embed.weight", "position.weight")
    if scheme == "gpt2":
        residual = name.endswith(("attn.proj.weight", "ffn.down.weight"))
        return 0.02 / math.sqrt(2 * LAYERS) if residual else 0.02
    if scheme == "torch":
        return 1.0 if embedding else 1 / math.sqrt(fan_in) / math.sqrt(3)  # U(±b): std b/√3
    if scheme == "xavier":
        return math.sqrt(2 / (fan_in + fan_out))
    return math.sqrt(2 / fan_in)  # he


@pytest.mark.parametrize("scheme", ["gpt2", "torch", "xavier", "he"])
def test_each_transformer_init_draws_its_formula(scheme):
    model = _gpt(scheme)
    matrices = {n: p for n, p in model.named_parameters() if p.ndim == 2}
    assert len(matrices) == 2 + 4 * LAYERS  # embeddings, and qkv, proj, up, down per block
    for name, param in matrices.items():
        w = param.detach().double().numpy()
        expected = _expected_std(scheme, name, w.shape)
        # 4,096 values or more: the sample std is within 2.2 % (2 standard errors) of the true
        assert abs(w.mean()) < 4 * expected / math.sqrt(w.size), name
        assert w.std() == pytest.approx(expected, rel=0.05), name
        if scheme == "torch" and "embed" not in name and "position" not in name:
            bound = 1 / math.sqrt(w.shape[1])
            assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound, name
    norms = [p for n, p in model.named_parameters() if p.ndim == 1]
    assert all(torch.equal(p, torch.ones_like(p)) for p in norms)  # norms keep their ones


def test_every_init_of_a_seed_is_the_same_for_each_activation_and_differs_by_seed():
    (gelu, relu) = resolve_activations(("gelu", "relu"), "none")
    cfg = TransformerModelConfig(d_model=32, layers=LAYERS, heads=2, context=16)
    for scheme in ("torch", "he"):
        a, b = ByteGPT(cfg, gelu), ByteGPT(cfg, relu)
        init_parameters(a, 5, 0.02, LAYERS, scheme)
        init_parameters(b, 5, 0.02, LAYERS, scheme)
        assert _digest(a.parameters()) == _digest(b.parameters())
        assert _digest(a.parameters()) != _digest(_gpt(scheme, 32, 16, seed=6).parameters())


def test_the_default_inits_are_bit_equal_to_before():
    # digests of the weights the code before model.init had choices drew (same seeds and shapes)
    assert _digest(p for _, p in sorted(_gpt("gpt2", 32, 16).named_parameters())) == (
        "d39183bd0e46bb29"
    )
    for method, before in (("unit_norm", "646c1dd6d3982962"), ("torch", "ac1017a68f91dcf3")):
        mlp = StackedMLP(2, (20, 16, 16, 10), torch.nn.GELU())
        for member, generator in enumerate(MemberRandomness([0, 1]).init_generators()):
            mlp.init_member(member, method, generator)
        assert _digest(mlp.parameters()) == before, method


@pytest.mark.parametrize("method", ["unit_norm", "torch", "xavier", "he"])
def test_each_mlp_init_draws_its_formula(method):
    sizes = (300, 256, 128, 64)
    mlp = StackedMLP(1, sizes, torch.nn.GELU())
    (generator,) = MemberRandomness([0]).init_generators()
    mlp.init_member(0, method, generator)
    for weight, bias, fan_in, fan_out in zip(
        mlp.weights, mlp.biases, sizes[:-1], sizes[1:], strict=True
    ):
        w = weight[0].detach().double().numpy()  # [in, out]
        if method == "unit_norm":
            np.testing.assert_allclose(np.linalg.norm(w, axis=0), 1.0, rtol=1e-6)
            expected = 1 / math.sqrt(fan_in)
        elif method == "torch":
            expected = 1 / math.sqrt(fan_in) / math.sqrt(3)
            assert np.abs(bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
        else:
            expected = math.sqrt(2 / (fan_in + fan_out) if method == "xavier" else 2 / fan_in)
        assert w.std() == pytest.approx(expected, rel=0.05), (method, fan_in)
        if method != "torch":
            assert not bias.detach().any()


def test_the_engines_build_their_models_by_the_configs_init():
    from gelus.experiments.config import apply_overrides
    from gelus.experiments.engines.transformer.engine import build_model
    from gelus.experiments.engines.vit.engine import build_vit
    from gelus.experiments.presets import PRESETS

    (gelu,) = resolve_activations(("gelu",), "none")
    small = ["model.d_model=32", "model.layers=1", "model.heads=2"]
    for init, std in (("gpt2", 0.02), ("torch", 1.0), ("he", math.sqrt(2 / 32))):
        lm = apply_overrides(PRESETS["transformer-lm"].config, [*small, f"model.init={init}"])
        vit = apply_overrides(PRESETS["transformer-vit"].config, [*small, f"model.init={init}"])
        embed = build_model(lm, gelu, 0).embed.weight  # [256, 32]
        position = build_vit(vit, gelu, 0, (1, 28, 28), 10).position.weight  # [16, 32]
        assert embed.double().std().item() == pytest.approx(std, rel=0.05), init
        assert position.double().std().item() == pytest.approx(std, rel=0.15), init
