"""The stacked ensemble: each member is exactly the model trained alone (float64 oracle: nn.Linear + torch.optim.Adam)."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gelus.experiments.activation_spec import resolve_activation
from gelus.experiments.engines.mlp.engine import mlp_activation as engine_activation
from gelus.experiments.engines.mlp.engine import train_epoch, train_step
from gelus.experiments.engines.mlp.stacked import MemberRandomness, StackedAdam, StackedMLP


def mlp_activation(name: str, approximate: str):
    return engine_activation(resolve_activation(name, approximate))


SIZES = (12, 16, 8, 5)  # input, two hidden layers, output
LRS = (1e-2, 3e-3, 1e-3)
SEEDS = (3, 7, 11)


def _stacked(activation: str, keep: float, task: str):
    sizes = SIZES if task == "classify" else (12, 16, 8, 12)
    model = StackedMLP(
        len(SEEDS),
        sizes,
        mlp_activation(activation, "tanh"),
        keep=keep,
        stochastic=activation == "stochastic_gelu",
        dtype=torch.float64,
    )
    randomness = MemberRandomness(SEEDS)
    for member, generator in enumerate(randomness.generators):
        model.init_member(member, "unit_norm", generator)
    optimizer = StackedAdam(list(model.parameters()), torch.tensor(LRS, dtype=torch.float64))
    return model, optimizer, randomness


def _uniforms_from_bits(words, bits):
    """The documented map: n-bit signed b (little-endian bytes of the words) -> (b + 2^(n-1) + 1/2) / 2^n."""
    b = words.view(torch.int8 if bits == 8 else torch.int16).double()
    return (b + 2 ** (bits - 1) + 0.5) / 2**bits


def _reference_forward(layers, activation, x, u, keep):
    """A plain single MLP: nn.Linear layers, the same masks drawn from the member's uniforms ``u`` [count]."""
    offset = 0
    for i, layer in enumerate(layers):
        x = layer(x)
        if i < len(layers) - 1:
            count = x.numel()
            mask_u = u[offset : offset + count].view(x.shape)
            offset += count
            if activation == "stochastic_gelu":
                x = x * (mask_u < torch.special.ndtr(x).detach()).double()
            else:
                x = mlp_activation(activation, "tanh")(x)
                if keep < 1:
                    x = x * ((mask_u < keep).double() / keep)
    return x


@pytest.mark.parametrize(
    ("activation", "keep", "task"),
    [
        ("gelu", 0.5, "classify"),
        ("relu", 1.0, "classify"),
        ("elu", 0.75, "autoencode"),
        ("gelu", 0.8, "classify"),  # 16-bit uniforms
        ("stochastic_gelu", 1.0, "classify"),
    ],
)
def test_member_equals_model_trained_alone(activation, keep, task):
    model, optimizer, _ = _stacked(activation, keep, task)
    sizes = model.sizes
    references = []
    for k in range(len(SEEDS)):
        layers = nn.ModuleList(
            nn.Linear(i, o, dtype=torch.float64) for i, o in itertools.pairwise(sizes)
        )
        with torch.no_grad():
            for layer, w, b in zip(layers, model.weights, model.biases, strict=True):
                layer.weight.copy_(w[k].T)
                layer.bias.copy_(b[k, 0])
        references.append((layers, torch.optim.Adam(layers.parameters(), lr=LRS[k])))

    data_gen = torch.Generator().manual_seed(0)
    inputs = torch.rand(64, sizes[0], generator=data_gen, dtype=torch.float64)
    labels = torch.randint(0, sizes[-1], (64,), generator=data_gen)
    batch = 8
    for _ in range(12):
        index = torch.stack(
            [torch.randperm(64, generator=data_gen)[:batch] for _ in SEEDS]
        )  # own order per member
        x = inputs[index]  # [K, B, in]
        target = labels[index] if task == "classify" else x
        words = torch.randint(
            -(2**63), 2**63 - 1, (len(SEEDS), model.noise_words(batch)), generator=data_gen
        )
        noise = model.noise(words, batch) if model.needs_noise else None
        losses = train_step(model, optimizer, task, x, target, noise)
        uniforms = _uniforms_from_bits(words, model.noise_bits)
        for k, (layers, adam) in enumerate(references):
            out = _reference_forward(layers, activation, x[k], uniforms[k], keep)
            loss = F.cross_entropy(out, target[k]) if task == "classify" else F.mse_loss(out, x[k])
            adam.zero_grad()
            loss.backward()
            adam.step()
            assert abs(losses[k].item() - loss.item()) <= 1e-12
    for k, (layers, _) in enumerate(references):
        for layer, w, b in zip(layers, model.weights, model.biases, strict=True):
            torch.testing.assert_close(w[k].T, layer.weight, rtol=0, atol=1e-12)
            torch.testing.assert_close(b[k, 0], layer.bias, rtol=0, atol=1e-12)


class _Split:
    def __init__(self, x, y):
        self.x, self.labels = x, y

    def __len__(self):
        return len(self.labels)

    def inputs(self, index):
        return self.x[index]


def test_member_run_depends_on_its_seed_alone():
    """Seed 7 trained in an ensemble of 3 equals seed 7 trained alone: own init, order and masks."""
    gen = torch.Generator().manual_seed(1)
    split = _Split(
        torch.rand(80, SIZES[0], generator=gen), torch.randint(0, SIZES[-1], (80,), generator=gen)
    )
    index = torch.arange(80)

    def losses(seeds, lrs, dtype=torch.float64):
        model = StackedMLP(len(seeds), SIZES, nn.ReLU(), keep=0.5, dtype=dtype)
        randomness = MemberRandomness(seeds)
        for member, generator in enumerate(randomness.generators):
            model.init_member(member, "unit_norm", generator)
        optimizer = StackedAdam(list(model.parameters()), torch.tensor(lrs))
        return torch.cat(
            [
                train_epoch(model, optimizer, randomness, split, index, "classify", 16)
                for _ in range(2)
            ]
        )

    together = losses(list(SEEDS), list(LRS))
    alone = losses([SEEDS[1]], [LRS[1]])
    torch.testing.assert_close(together[:, 1], alone[:, 0], rtol=0, atol=1e-12)
    assert not torch.allclose(together[:, 0], together[:, 1])  # members really differ

    # float32 on one thread: bit-identical, so the sweep may regroup members (split by lr)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        together32 = losses(list(SEEDS), list(LRS), torch.float32)
        alone32 = losses([SEEDS[1]], [LRS[1]], torch.float32)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(together32[:, 1], alone32[:, 0])


def test_unit_norm_init_rows_and_zero_bias():
    model = StackedMLP(2, (30, 20, 10), nn.ReLU())
    for member, generator in enumerate(MemberRandomness([0, 1]).generators):
        model.init_member(member, "unit_norm", generator)
    for weight, bias in zip(model.weights, model.biases, strict=True):
        norms = weight.double().norm(dim=1)  # fan-in vectors: [K, in, out] -> norm over in
        torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-6)
        assert torch.all(bias == 0)
    assert not torch.equal(model.weights[0][0], model.weights[0][1])


def test_stochastic_mask_is_bernoulli_phi_and_eval_is_expectation():
    model = StackedMLP(1, (1, 1, 1), None, stochastic=True, dtype=torch.float64)
    with torch.no_grad():
        model.weights[0].fill_(1.0)
        model.weights[1].fill_(1.0)
    x = torch.full((1, 20000, 1), 0.5, dtype=torch.float64)
    words = MemberRandomness([0]).fill_bits(
        torch.empty(1, model.noise_words(20000), dtype=torch.int64)
    )
    kept = model(x, model.noise(words, 20000)) / 0.5  # 1 where the mask is on
    phi = torch.special.ndtr(torch.tensor(0.5, dtype=torch.float64)).item()
    assert abs(kept.mean().item() - phi) < 4 * (phi * (1 - phi) / 20000) ** 0.5
    assert abs(model(x[0]).mean().item() - 0.5 * phi) < 1e-15  # eval: x·Φ(x)


@pytest.mark.parametrize("keep", [0.5, 0.75, 0.8, 0.9, 1 / 3])
def test_dropout_mask_is_u_below_keep_for_every_bit_pattern(keep):
    """The integer threshold equals the float comparison u < keep on all 2^n patterns (float64 oracle)."""
    model = StackedMLP(1, (2, 2**16 // 4, 2), nn.ReLU(), keep=keep, dtype=torch.float64)
    bits = model.noise_bits
    assert bits == (8 if (keep * 256).is_integer() else 16)
    patterns = torch.arange(-(2 ** (bits - 1)), 2 ** (bits - 1), dtype=torch.int64)
    narrow = patterns.to(torch.int8 if bits == 8 else torch.int16)
    words = torch.zeros(1, model.noise_words(4), dtype=torch.int64)
    words.view(narrow.dtype)[0, : len(narrow)] = narrow
    mask = model.noise(words, 4)[0, : len(narrow)]
    u = (patterns.double() + 2 ** (bits - 1) + 0.5) / 2**bits
    assert torch.equal(mask, (u < keep).double() / keep)
    assert abs((u < keep).double().mean().item() - keep) <= 2.0**-bits


def test_fill_bits_uses_all_64_bits_and_depends_on_the_seed_alone():
    words = MemberRandomness([5, 6]).fill_bits(torch.empty(2, 4096, dtype=torch.int64))
    alone = MemberRandomness([6]).fill_bits(torch.empty(1, 4096, dtype=torch.int64))
    assert torch.equal(words[1], alone[0])
    byte_means = words.view(torch.uint8).view(2, -1, 8).double().mean(dim=(0, 1))
    assert torch.all((byte_means - 127.5).abs() < 3)  # every byte, the top one too, is uniform


def test_activation_must_be_parameter_free_and_elementwise():
    with pytest.raises(ValueError, match="learnable parameters"):
        mlp_activation("prelu", "tanh")
    assert mlp_activation("gelu", "tanh").approximate == "tanh"
    assert mlp_activation("gelu", "none").approximate == "none"
    assert mlp_activation("stochastic_gelu", "tanh") is None


def test_one_activation_spec_serves_both_engines():
    from gelus.experiments.engines.cnn.engine import CIFAR10AllConvConfig, build_cnn

    # one rule for names in both engines: any case; an alias keeps the form it names
    assert mlp_activation("GELU", "none").approximate == "none"
    assert resolve_activation("GELU", "none").build().approximate == "none"
    assert resolve_activation("gelu_new", "none").build().approximate == "tanh"
    model = build_cnn(CIFAR10AllConvConfig(widths=(4, 6)), resolve_activation("GELU", "none"), 10)
    gelus_in_cnn = [m for m in model.modules() if type(m).__name__ == "GELU"]
    assert gelus_in_cnn and all(m.approximate == "none" for m in gelus_in_cnn)
    spec = resolve_activation("relu")
    assert spec.build() is not spec.build()  # fresh modules
