"""The CIFAR experiments: network shapes and sizes, preprocessing, schedules, and resumable runs."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import torch
from torch import nn

import gelus
from gelus.experiments.activation_spec import ActivationError, resolve_activation
from gelus.experiments.driver import train_job
from gelus.experiments.engines.cnn import engine as cnn
from gelus.experiments.engines.cnn.config import CNNExperimentConfig, CNNTrainConfig
from gelus.experiments.engines.cnn.data import apply_zca, fit_zca, random_crop_flip
from gelus.experiments.engines.cnn.engine import (
    CIFAR10AllConvConfig,
    CIFAR100WRNConfig,
    allconv_beta1,
    allconv_lr,
    build_cnn,
    cosine_lr,
)
from gelus.experiments.engines.cnn.models import AllConvNet, WideResNet
from gelus.experiments.plan import plan_jobs


def act(name: str, approximate: str = "tanh"):
    return resolve_activation(name, approximate)


class _LogStore:
    """A record store that hands each record to ``log(epoch, split, metric, value)``."""

    def __init__(self, log):
        self.log = log

    def start_run(self, *args):
        pass

    def add(self, key, epoch, split, metric, value):
        self.log(epoch, split, metric, value)

    def commit(self):
        pass

    def finish_runs(self, run_ids, epochs=None):
        pass


def train_cnn_run(cfg, data, *, epochs, batch_size, activation, seed, lr, device, log,
                  checkpoint_path, approximate="tanh"):  # fmt: skip
    """One CNN run through the engine protocol and the driver, as a job of one member."""
    import tempfile
    from pathlib import Path

    config = CNNExperimentConfig(
        activations=(activation,), train=CNNTrainConfig(epochs, batch_size, seeds=seed + 1), cnn=cfg
    )
    config = dataclasses.replace(config, optim=dataclasses.replace(config.optim, lr=(lr,)))
    specs = [act(activation, approximate)]
    with tempfile.TemporaryDirectory() as scratch:
        (job,) = [
            j
            for j in plan_jobs(
                "cnn", config, specs, train_size=len(data.train), out_dir=scratch, device=device
            )
            if j.members[0].seed == seed
        ]
        path = Path(checkpoint_path) if checkpoint_path is not None else Path(scratch) / "c.pt"
        job = dataclasses.replace(job, checkpoint_path=str(path))
        train_job(job, data, _LogStore(log), lambda epoch: None)


class FakeSplit:
    """The data interface of ``gelus.data``: labels int64 [N], inputs(index) float32 in [0, 1]."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.images.shape[1:])

    def inputs(self, index: torch.Tensor) -> torch.Tensor:
        return self.images[index].float() / 255


class FakeDataset:
    def __init__(self, n_train, n_test, num_classes, size, with_val=True, seed=0):
        g = torch.Generator().manual_seed(seed)

        def split(n):
            images = torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8)
            return FakeSplit(images, torch.randint(0, num_classes, (n,), generator=g))

        self.train, self.test = split(n_train), split(n_test)
        self.val = split(20) if with_val else None
        self.num_classes = num_classes


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # On a shared machine two OpenMP threads stall on each other's barriers (eigh, batch norm).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# Tiny versions of both protocols: 12×12 images for the all-conv net (the smallest that survives
# two poolings and a valid 3×3 conv), 8×8 for the WRN.
# Both run 3 epochs of batches of 10 (``run_logged``); the all-conv schedule switches after epoch 1.
TINY_ALLCONV = CIFAR10AllConvConfig(
    lr_decay_from=1 / 3, beta1_switch_at=1 / 3, widths=(4, 6),
    train_eval_size=30, eval_batch_size=25, channels_last=False,
)  # fmt: skip
TINY_WRN = CIFAR100WRNConfig(
    blocks_per_stage=1, widths=(4, 4, 8, 8), retrain_full=False, train_eval_size=None,
    eval_batch_size=25,
)  # fmt: skip


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- networks


def test_allconv_output_shape_and_layers():
    model = AllConvNet(10)
    x = torch.randn(2, 3, 32, 32)
    assert model.eval()(x).shape == (2, 10)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [96] * 3 + [192] * 6
    assert [c.kernel_size[0] for c in convs] == [3] * 7 + [1] * 2
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 9
    # Before the global pool the valid 3×3 conv leaves a 6×6 map.
    assert model.features[:-4](x).shape == (2, 192, 6, 6)


def test_allconv_parameter_count_matches_hand_count():
    conv = 3 * 9 * 96 + 2 * 96 * 9 * 96 + 96 * 9 * 192 + 3 * 192 * 9 * 192 + 2 * 192 * 192
    bn = 2 * (3 * 96 + 6 * 192) + 2 * 10  # scale and shift of every BN, logits included
    assert n_params(AllConvNet(10)) == conv + bn + 192 * 10


def wrn_hand_count(n: int, widths: tuple[int, ...], classes: int) -> int:
    w0, *ws = widths
    count = 27 * w0 + 2 * 2 * w0  # stem conv, two BNs
    c_in = w0
    for w in ws:
        count += 9 * c_in * w + w + 9 * w * w + w + 2 * w + c_in * w  # first block, projection
        count += (n - 1) * (2 * (9 * w * w + w) + 2 * w)
        c_in = w
    return count + 2 * c_in + c_in * classes + classes


def test_wrn_40_4_shape_and_size():
    model = WideResNet(100)
    assert model.eval()(torch.randn(2, 3, 32, 32)).shape == (2, 100)
    count = n_params(model)
    assert count == wrn_hand_count(6, (16, 64, 128, 256), 100)
    # Zagoruyko & Komodakis (2016), Table 1: WRN-40-4 has "8.9M" parameters; their table truncates
    # (the pre-activation net's convs alone hold 8.94M). Ours adds conv biases and two BNs: 8.97M.
    assert 8.9e6 <= count < 9.0e6
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) == 1 + 2 * 18  # depth 40 = 37 convs + 3 projections


def test_wrn_block_order_is_the_released_one():
    model = WideResNet(100, blocks_per_stage=2, widths=(4, 6, 8, 10), dropout=0.0).eval()
    block = model.blocks[1]  # an identity block
    x = torch.randn(3, 6, 8, 8)
    expected = block.bn(block.act2(block.conv2(block.act1(block.conv1(x))))) + x
    torch.testing.assert_close(block(x), expected)
    assert isinstance(model.blocks[0].shortcut, nn.Conv2d)  # 4 → 6 channels
    assert model.blocks[2].shortcut.stride == (2, 2)  # second stage halves the map


def tanh_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(
    "name, f",
    [
        ("relu", lambda x: max(x, 0.0)),
        ("gelu", tanh_gelu),
        ("elu", lambda x: x if x > 0 else math.expm1(x)),
    ],
)
def test_wrn_init_uses_the_activation_gain(name, f):
    # Oracle: gain = 1/√E[f(z)²], z ~ N(0, 1), by scipy quadrature (√2 for ReLU, He et al.).
    second_moment = scipy.integrate.quad(lambda z: f(z) ** 2 * np.exp(-z * z / 2), -40, 40)[0]
    gain = 1 / math.sqrt(second_moment / math.sqrt(2 * math.pi))
    torch.manual_seed(0)
    model = build_cnn(CIFAR100WRNConfig(), act(name), 100)
    conv = model.blocks[10].conv2  # 128 → 128 channels, fan_in 1152, 147k weights
    assert conv.weight.std().item() == pytest.approx(gain / math.sqrt(128 * 9), rel=0.01)


def test_gelu_means_the_configured_form():
    for form in ("tanh", "none"):
        model = build_cnn(TINY_ALLCONV, act("gelu", form), 10)
        acts = [m for m in model.modules() if isinstance(m, gelus.GELU)]
        assert len(acts) == 9 and all(a.approximate == form for a in acts)


def test_unknown_activation_lists_the_names():
    with pytest.raises(ActivationError, match="relu"):
        build_cnn(TINY_ALLCONV, act("relux"), 10)


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match="amp_dtype"):
        CIFAR10AllConvConfig(amp_dtype="fp8")
    with pytest.raises(ValueError, match="lr_decay_from"):
        CIFAR10AllConvConfig(lr_decay_from=1.5)
    assert not any(
        hasattr(CIFAR100WRNConfig(), k) for k in ("epochs", "lr", "gelu_form", "val_size")
    )


# ---------------------------------------------------------------- preprocessing


def test_zca_whitens_to_identity_and_matches_inverse_square_root():
    rng = np.random.default_rng(0)
    d, n = 48, 4000
    mixing = rng.normal(size=(d, d)) * np.linspace(0.05, 2.0, d)  # correlated, uneven scales
    x = rng.normal(size=(n, d)) @ mixing.T + rng.normal(size=d)
    epsilon = 1e-8
    mean, whitening = fit_zca(torch.from_numpy(x).float().view(n, 3, 4, 4), epsilon)
    # Independent oracle: Σ^(-1/2) by scipy in float64.
    sigma = np.cov(x, rowvar=False, bias=True)
    oracle = np.real(scipy.linalg.sqrtm(np.linalg.inv(sigma + epsilon * np.eye(d))))
    np.testing.assert_allclose(
        whitening.double().numpy(), oracle, rtol=2e-3, atol=2e-3 * np.abs(oracle).max()
    )
    white = apply_zca(torch.from_numpy(x).float().clone(), mean, whitening).double().numpy()
    np.testing.assert_allclose(np.cov(white, rowvar=False, bias=True), np.eye(d), atol=2e-3)
    np.testing.assert_allclose(white.mean(0), 0, atol=1e-3)


def test_zca_epsilon_damps_the_small_directions():
    x = torch.randn(500, 2, dtype=torch.float64) * torch.tensor([1.0, 1e-3])
    _, whitening = fit_zca(x.float(), epsilon=1e-2)
    # Variance 1e-6 in the second direction: its gain is 1/√(1e-6 + 1e-2) ≈ 10, not 1000.
    assert whitening[1, 1].item() == pytest.approx(1 / math.sqrt(1e-6 + 1e-2), rel=0.05)


def test_preprocessing_uses_training_statistics_only():
    g = torch.Generator().manual_seed(1)
    raw = {name: (torch.rand(n, 3, 4, 4, generator=g), torch.zeros(n)) for name, n in [("train", 400), ("test", 50)]}  # fmt: skip
    # WRN: subtract the per-pixel mean of the training images.
    splits = {name: (x.clone(), y) for name, (x, y) in raw.items()}
    cnn._preprocess(TINY_WRN, splits, None)
    pixel_mean = raw["train"][0].double().numpy().mean(0)
    for name in raw:
        expected = raw[name][0].double().numpy() - pixel_mean
        np.testing.assert_allclose(splits[name][0].numpy(), expected, atol=1e-6)
    # All-conv: (255x − 127.5) / 128, then ZCA fitted on the scaled training images.
    splits = {name: (x.clone(), y) for name, (x, y) in raw.items()}
    stats = cnn._preprocess(TINY_ALLCONV, splits, None)
    scaled = {
        name: (raw[name][0].double().numpy().reshape(-1, 48) * 255 - 127.5) / 128 for name in raw
    }
    np.testing.assert_allclose(stats["mean"].numpy(), scaled["train"].mean(0), atol=1e-6)
    w = stats["whitening"].double().numpy()
    for name in raw:
        expected = (scaled[name] - scaled["train"].mean(0)) @ w
        np.testing.assert_allclose(splits[name][0].reshape(-1, 48).numpy(), expected, atol=1e-4)


def test_crop_and_flip_match_a_per_sample_loop():
    x = torch.randn(64, 3, 8, 8)
    generator = torch.Generator().manual_seed(5)
    out = random_crop_flip(x, 2, True, generator)
    # Replay the same draws and build each sample by explicit slicing.
    replay = torch.Generator().manual_seed(5)
    offsets = torch.randint(0, 5, (2, 64), generator=replay)
    flips = torch.randint(0, 2, (64,), generator=replay)
    padded = torch.zeros(64, 3, 12, 12)
    padded[:, :, 2:10, 2:10] = x
    for b in range(64):
        dy, dx = offsets[:, b].tolist()
        window = padded[b, :, dy : dy + 8, dx : dx + 8]
        expected = window.flip(-1) if flips[b] else window
        torch.testing.assert_close(out[b], expected, rtol=0, atol=0)
    assert 0 < flips.sum() < 64 and len(set(offsets[0].tolist())) == 5  # draws are varied


def test_crop_without_flip_never_flips():
    x = torch.arange(16.0).view(1, 1, 4, 4).expand(32, 1, 4, 4)
    out = random_crop_flip(x, 0, False, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, x)


# ---------------------------------------------------------------- schedules


def test_allconv_lr_and_beta1_schedule():
    cfg = CIFAR10AllConvConfig()  # over 200 epochs: constant to 100, β₁ switch after 100
    # The released code: lr · min(2 − e/100, 1) for 0-based e = epoch − 1.
    for epoch, factor in [(1, 1.0), (100, 1.0), (101, 1.0), (102, 0.99), (150, 0.51), (200, 0.01)]:
        assert allconv_lr(epoch, 200, cfg, 2e-3) == pytest.approx(2e-3 * factor, rel=1e-12)
    assert [allconv_beta1(e, 200, cfg) for e in (1, 100, 101, 200)] == [0.9, 0.9, 0.5, 0.5]
    # a shorter run keeps the shape: 20 epochs decay over the second 10
    assert allconv_lr(11, 20, cfg, 1.0) == 1.0 and allconv_lr(12, 20, cfg, 1.0) == pytest.approx(
        0.9
    )


def test_cosine_lr_by_hand():
    total = 50 * 390
    assert cosine_lr(0, total, 0.1) == 0.1
    assert cosine_lr(total // 2, total, 0.1) == pytest.approx(0.05, rel=1e-12)
    assert cosine_lr(total // 4, total, 0.1) == pytest.approx(0.1 * (1 + 0.5**0.5) / 2, rel=1e-12)
    assert cosine_lr(total, total, 0.1) == pytest.approx(0.0, abs=1e-15)


def test_run_sets_lr_and_beta1_per_step(monkeypatch):
    seen = []
    original = torch.optim.Adam.step

    def recording_step(self, *args, **kwargs):
        group = self.param_groups[0]
        seen.append((group["lr"], group["betas"][0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", recording_step)
    data = FakeDataset(40, 20, 10, 12)
    train_cnn_run(TINY_ALLCONV, data, epochs=3, batch_size=10, activation="relu", seed=0, lr=1e-3,
                  device="cpu", log=lambda *a: None, checkpoint_path=None)  # fmt: skip
    # 40 training images, batch 10: 4 steps per epoch; 3 epochs, decay after epoch 1.
    assert [lr for lr, _ in seen] == pytest.approx([1e-3] * 8 + [0.5e-3] * 4)
    assert [b1 for _, b1 in seen] == [0.9] * 4 + [0.5] * 8


# ---------------------------------------------------------------- runs


def run_logged(cfg, data, checkpoint_path, activation="gelu", seed=3, epochs=3):
    logged = {}
    train_cnn_run(cfg, data, epochs=epochs, batch_size=10, activation=activation, seed=seed,
                  lr=1e-3, device="cpu", log=lambda e, s, m, v: logged.__setitem__((e, s, m), v),
                  checkpoint_path=checkpoint_path)  # fmt: skip
    return logged


def without_seconds(logged):
    return {k: v for k, v in logged.items() if k[2] != "seconds"}


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("cfg", [TINY_ALLCONV, TINY_WRN], ids=["allconv", "wrn"])
def test_resume_equals_uninterrupted(cfg, tmp_path, monkeypatch):
    from gelus.experiments import driver

    saved = {}  # path -> the last state checkpointed there (the driver deletes a finished job's)
    real_save = driver.save_checkpoint
    monkeypatch.setattr(
        driver, "save_checkpoint", lambda path, state: (saved.__setitem__(str(path), state),
                                                        real_save(path, state))
    )  # fmt: skip
    size = 12 if isinstance(cfg, CIFAR10AllConvConfig) else 8
    data = FakeDataset(60, 20, 10, size)
    whole = run_logged(cfg, data, tmp_path / "whole.pt")
    assert without_seconds(run_logged(cfg, data, None)) == without_seconds(whole)  # deterministic

    path = tmp_path / "resumed.pt"
    first_epoch = {}

    def log_then_crash(epoch, split, metric, value):
        if epoch == 2:
            raise Interrupted
        first_epoch[(epoch, split, metric)] = value

    with pytest.raises(Interrupted):
        train_cnn_run(cfg, data, epochs=3, batch_size=10, activation="gelu", seed=3, lr=1e-3,
                      device="cpu", log=log_then_crash, checkpoint_path=path)  # fmt: skip
    assert torch.load(path, weights_only=True)["epoch"] == 1
    resumed = run_logged(cfg, data, path)

    assert set(resumed) == {key for key in whole if key[0] > 1}
    assert without_seconds(first_epoch) == without_seconds(
        {k: v for k, v in whole.items() if k[0] == 1}
    )
    for key, value in without_seconds(resumed).items():
        assert value == whole[key], key
    assert resumed[(2, "train", "seconds")] > first_epoch[(1, "train", "seconds")]
    final_whole = saved[str(tmp_path / "whole.pt")]["engine"]["model"]
    final_resumed = saved[str(path)]["engine"]["model"]
    for name, tensor in final_whole.items():
        torch.testing.assert_close(final_resumed[name], tensor, rtol=0, atol=0)

    # A finished job's checkpoint is gone; another run's checkpoint is not resumed into this one.
    assert not path.exists()
    real_save(path, saved[str(path)])
    assert run_logged(cfg, data, path) == {}
    assert {e for e, _, _ in run_logged(cfg, data, path, seed=4)} == {1, 2, 3}


def test_logs_every_split_and_metric_per_epoch():
    data = FakeDataset(60, 20, 10, 12)
    logged = run_logged(TINY_ALLCONV, data, None)
    splits = {"train", "val", "test"}
    expected = {(e, s, m) for e in (1, 2, 3) for s in splits for m in ("loss", "error")}
    assert set(logged) == expected | {(e, "train", "seconds") for e in (1, 2, 3)}
    for (_, _, metric), value in logged.items():
        assert math.isfinite(value) and value >= 0
        if metric == "error":
            assert value * 30 == pytest.approx(round(value * 30)) or value * 20 == pytest.approx(
                round(value * 20)
            )  # a fraction of the 30 train-eval or 20 val/test images


def test_retrain_full_uses_train_and_val_and_logs_no_val(monkeypatch):
    sizes = []
    original = cnn.load_splits

    def spy(*args):
        splits = original(*args)
        sizes.append({name: len(y) for name, (_, y) in splits.items()})
        return splits

    monkeypatch.setattr(cnn, "load_splits", spy)
    full = dataclasses.replace(TINY_WRN, retrain_full=True)
    logged = run_logged(full, FakeDataset(60, 20, 10, 8, with_val=False), None, "relu", epochs=1)
    assert sizes[-1] == {"train": 60, "test": 20}
    assert not any(split == "val" for _, split, _ in logged)
    # With the dataset's own val split: val is that split, and retrain_full appends it.
    run_logged(full, FakeDataset(60, 20, 10, 8), None, activation="relu", epochs=1)
    assert sizes[-1] == {"train": 80, "test": 20}
    held_out = dataclasses.replace(full, retrain_full=False)
    run_logged(held_out, FakeDataset(60, 20, 10, 8), None, activation="relu", epochs=1)
    assert sizes[-1] == {"train": 60, "val": 20, "test": 20}
    assert CIFAR100WRNConfig().retrain_full and not CIFAR10AllConvConfig().retrain_full


def test_bf16_autocast_runs_on_cpu(monkeypatch):
    logit_dtypes = set()
    original = cnn.build_cnn

    def hooked(*args):
        model = original(*args)
        model.register_forward_hook(lambda module, inputs, output: logit_dtypes.add(output.dtype))
        return model

    monkeypatch.setattr(cnn, "build_cnn", hooked)
    cfg = dataclasses.replace(TINY_WRN, amp_dtype="bf16", channels_last=True)
    logged = run_logged(cfg, FakeDataset(60, 20, 10, 8), None, epochs=1)
    assert logit_dtypes == {torch.bfloat16}
    assert all(math.isfinite(v) for v in logged.values())
    with pytest.raises(ValueError, match="fp16"):
        run_logged(
            dataclasses.replace(cfg, amp_dtype="fp16"), FakeDataset(60, 20, 10, 8), None, epochs=1
        )


def test_wrn_weight_decay_is_the_released_l2_penalty():
    # loss + λ·Σw² over weights and BN scales (not biases or BN shifts) has gradient 2λw. With zero
    # data gradients, the first Nesterov step moves w by lr·(1 + momentum)·2λw.
    cfg = dataclasses.replace(TINY_WRN, weight_decay=0.01)
    model = build_cnn(cfg, act("relu"), 10)
    optimizer = cnn.make_optimizer(cfg, model, 0.1)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    decayable = nn.Conv2d | nn.Linear | nn.BatchNorm2d
    decayed = {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, decayable)}
    assert decayed < set(before) and any(".bn." in name for name in decayed)
    for name, p in model.named_parameters():
        factor = 1 - 0.1 * 1.9 * 2 * 0.01 if name in decayed else 1.0
        torch.testing.assert_close(p.detach(), before[name] * factor)


def test_compiled_training_step_equals_the_eager_one():
    # No dropout: inductor draws its own random numbers. Everything else (batch norm and its
    # running statistics, Nesterov SGD with weight decay) must agree to float32 rounding.
    cfg = dataclasses.replace(TINY_WRN, dropout=0.0, channels_last=False)
    generator = torch.Generator().manual_seed(0)
    batches = [
        (
            torch.randn(10, 3, 8, 8, generator=generator),
            torch.randint(0, 10, (10,), generator=generator),
        )
        for _ in range(3)
    ]
    trained = []
    for mode in (None, "default"):
        torch.manual_seed(0)
        model = build_cnn(dataclasses.replace(cfg, compile=mode), act("gelu"), 10)
        optimizer = cnn.make_optimizer(cfg, model, lr=0.1)
        scaler = torch.amp.GradScaler("cpu", enabled=False)
        step = cnn.make_training_step(
            dataclasses.replace(cfg, compile=mode), model, optimizer, scaler, torch.device("cpu")
        )
        model.train()
        for x, y in batches:
            step(x, y)
        trained.append(model.state_dict())
    eager, compiled = trained
    assert eager.keys() == compiled.keys()
    for name in eager:
        torch.testing.assert_close(compiled[name], eager[name], rtol=1e-4, atol=1e-5, msg=name)


def test_an_unknown_compile_mode_lists_the_modes():
    with pytest.raises(ValueError, match="reduce-overhead"):
        CIFAR100WRNConfig(compile="fastest")


def test_runs_on_the_data_layer_dataset():
    from gelus.data import Dataset, TensorSplit

    fake = FakeDataset(60, 20, 10, 12)
    data = Dataset(
        "cifar10",
        *(TensorSplit(s.images, s.labels) for s in (fake.train, fake.val, fake.test)),
        num_classes=10,
        source="memory",
    )
    assert without_seconds(run_logged(TINY_ALLCONV, data, None, epochs=1)) == without_seconds(
        run_logged(TINY_ALLCONV, fake, None, epochs=1)
    )
