"""The harness on a GPU: the stacked MLP engine and the CNN batches on CUDA, TF32 off by default.

Everything here needs CUDA and is skipped on a CPU-only machine (CI); it runs on the GPU machine.
What can be shown on the CPU (the device-resident batch plan, the device plumbing of the engine
with device="cpu", the tf32 switch's validation) is tested in the other files.
"""

import pytest
import torch
from torch import nn

from gelus.experiments.activation_spec import resolve_activation
from gelus.experiments.engines.mlp.engine import train_epoch
from gelus.experiments.engines.mlp.stacked import MemberRandomness, StackedAdam, StackedMLP

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SIZES = (12, 16, 8, 5)
SEEDS, LRS = (3, 7, 11), (1e-2, 3e-3, 1e-3)


class _Split:
    def __init__(self, x, y):
        self.images, self.labels = x, y
        self.sample_shape = tuple(x.shape[1:])

    def __len__(self):
        return len(self.labels)

    def inputs(self, index):
        return self.images[index]


def _losses(seeds, lrs, device, keep=0.5):
    gen = torch.Generator().manual_seed(1)
    split = _Split(
        torch.rand(80, SIZES[0], generator=gen), torch.randint(0, SIZES[-1], (80,), generator=gen)
    )
    model = StackedMLP(len(seeds), SIZES, nn.GELU(approximate="tanh"), keep=keep)
    randomness = MemberRandomness(seeds, device)
    for member, generator in enumerate(randomness.init_generators()):
        model.init_member(member, "unit_norm", generator)
    model.to(device)
    optimizer = StackedAdam(list(model.parameters()), torch.tensor(lrs, device=device))
    index = torch.arange(80)
    epochs = [
        train_epoch(model, optimizer, randomness, split, index, "classify", 16) for _ in range(2)
    ]
    return torch.cat(epochs).cpu()


def test_a_member_on_cuda_equals_the_model_trained_alone_on_cuda():
    together = _losses(list(SEEDS), list(LRS), "cuda")
    alone = _losses([SEEDS[1]], [LRS[1]], "cuda")
    torch.testing.assert_close(together[:, 1], alone[:, 0], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(together[:, 0], together[:, 1])


def test_the_same_seed_reproduces_a_cuda_run_and_starts_from_the_cpu_weights():
    torch.testing.assert_close(
        _losses([5], [1e-3], "cuda"), _losses([5], [1e-3], "cuda"), rtol=0, atol=0
    )
    # the initial weights come from CPU generators on every device; the batch order does not
    # (CUDA's generator draws its own permutations), so only the start is the CPU's
    start = {}
    for device in ("cpu", "cuda"):
        model = StackedMLP(1, SIZES, nn.GELU(approximate="tanh"))
        (generator,) = MemberRandomness([5], device).init_generators()
        model.init_member(0, "unit_norm", generator)
        start[device] = model.to(device).state_dict()
    for name, weights in start["cpu"].items():
        assert torch.equal(start["cuda"][name].cpu(), weights), name


def test_a_cnn_run_trains_on_cuda_through_its_engine():
    # The engine keeps the splits on the device: its batches are CUDA tensors already (neither
    # copied nor pinned again), and the run logs finite errors.
    from test_cnn import TINY_ALLCONV, FakeDataset, train_cnn_run

    logged = {}
    train_cnn_run(TINY_ALLCONV, FakeDataset(60, 20, 10, 12), epochs=2, batch_size=10,
                  activation="gelu", seed=3, lr=1e-3, device="cuda", checkpoint_path=None,
                  log=lambda e, s, m, v: logged.__setitem__((e, s, m), v))  # fmt: skip
    errors = {key: v for key, v in logged.items() if key[2] == "error"}
    assert {(2, "test", "error"), (2, "train", "error")} <= errors.keys()
    assert all(0 <= v <= 1 for v in errors.values())


def test_run_job_keeps_tf32_off_unless_asked(tmp_path):
    from gelus.experiments.device import set_tf32

    torch.backends.cuda.matmul.allow_tf32 = True
    set_tf32("cuda", False)
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    set_tf32("cuda", True)
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    set_tf32("cuda", False)


def test_mnist_classification_on_cuda_end_to_end(tmp_path):
    from gelus.experiments import read_records, read_runs, run_experiment
    from test_run import TINY, write_tiny_mnist

    write_tiny_mnist(tmp_path / "data" / "mnist")
    run_experiment(
        "mnist-classification", out_dir=tmp_path / "out", data_dir=tmp_path / "data", workers=0,
        verify=False, device="cuda", activations=["gelu", "relu"], seeds=2,
        epochs=1, overrides=[*TINY, "train.train_subset=300", "train.keep=1,0.5"],
    )  # fmt: skip
    runs = read_runs(tmp_path / "out")
    assert {r.metadata["device"] for r in runs} == {"cuda"}
    assert all(r.status == "done" for r in runs)
    assert any(r.metric == "error" and r.split == "test" for r in read_records(tmp_path / "out"))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_the_compiled_cnn_step_on_cuda_equals_the_eager_one(mode, monkeypatch):
    # "reduce-overhead" replays the step as CUDA graphs; the batch norm statistics it updates and
    # the fused Nesterov SGD must end where eager fp32 ends (no dropout: inductor draws its own).
    import dataclasses

    from gelus.experiments.engines.cnn.config import CIFAR100WRNConfig
    from gelus.experiments.engines.cnn.engine import build_cnn, make_optimizer, make_training_step

    cfg = CIFAR100WRNConfig(blocks_per_stage=1, widths=(8, 16, 16, 32), dropout=0.0)
    device = torch.device("cuda")
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    gen = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(32, 3, 32, 32, generator=gen), torch.randint(0, 100, (32,), generator=gen))
        for _ in range(4)
    ]
    trained = []
    for compile_mode in (None, mode):
        run_cfg = dataclasses.replace(cfg, compile=compile_mode)
        torch.manual_seed(0)
        model = (
            build_cnn(run_cfg, resolve_activation("gelu"), 100)
            .to(device)
            .to(memory_format=torch.channels_last)
        )
        optimizer = make_optimizer(run_cfg, model, lr=0.1)
        scaler = torch.amp.GradScaler("cuda", enabled=False)
        step = make_training_step(run_cfg, model, optimizer, scaler, device)
        model.train()
        for x, y in batches:
            step(x.to(device).contiguous(memory_format=torch.channels_last), y.to(device))
        trained.append({k: v.detach().cpu() for k, v in model.state_dict().items()})
    eager, compiled = trained
    for name in eager:
        torch.testing.assert_close(compiled[name], eager[name], rtol=1e-3, atol=1e-4, msg=name)


def test_zca_fitted_on_cuda_equals_the_cpu_fit():
    from gelus.experiments.engines.cnn.data import apply_zca, fit_zca

    x = torch.rand(3000, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    mean_cpu, w_cpu = fit_zca(x, 1e-2)
    mean_gpu, w_gpu = fit_zca(x.cuda(), 1e-2)
    assert mean_gpu.is_cuda and w_gpu.is_cuda
    torch.testing.assert_close(mean_gpu.cpu(), mean_cpu)
    torch.testing.assert_close(w_gpu.cpu(), w_cpu, rtol=1e-4, atol=1e-5)
    whitened = apply_zca(x.cuda(), mean_cpu, w_cpu)  # saved statistics come back on the CPU
    torch.testing.assert_close(
        whitened.cpu(), apply_zca(x.clone(), mean_cpu, w_cpu), rtol=1e-4, atol=1e-4
    )


def test_a_cnn_training_batch_never_waits_on_the_host():
    # The run's per-batch work (the planned gather of crops and flips, the labels, forward,
    # backward, fused SGD with the lr set from Python) must not synchronise with the host:
    # CUDA's sync debug mode turns any synchronising call into an error.
    from gelus.experiments.device_batches import draw_epoch, pad_once
    from gelus.experiments.engines.cnn.config import CIFAR100WRNConfig
    from gelus.experiments.engines.cnn.engine import (
        build_cnn,
        cosine_lr,
        make_optimizer,
        make_training_step,
    )

    cfg = CIFAR100WRNConfig(blocks_per_stage=1, widths=(8, 16, 16, 32))
    device = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    x = pad_once(torch.rand(256, 3, 32, 32, generator=gen).to(device), cfg.crop_padding)
    y = torch.randint(0, 100, (256,), generator=gen).to(device)
    model = (
        build_cnn(cfg, resolve_activation("gelu"), 100)
        .to(device)
        .to(memory_format=torch.channels_last)
    )
    optimizer = make_optimizer(cfg, model, lr=0.1)
    step = make_training_step(
        cfg, model, optimizer, torch.amp.GradScaler("cuda", enabled=False), device
    )
    plan = draw_epoch(256, 32, gen, cfg.crop_padding, device)
    model.train()
    step(*_planned_batch(plan, x, y, 0))  # first use: handles and workspaces are created
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for i in range(1, plan.steps):
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(i, plan.steps, 0.1)
            step(*_planned_batch(plan, x, y, i))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _planned_batch(plan, padded, labels, step):
    index, inputs = plan.batch(padded, step, flip=True)
    return inputs.contiguous(memory_format=torch.channels_last), labels[index]
