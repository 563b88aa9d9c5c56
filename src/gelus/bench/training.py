"""``gelus bench training``: the experiment engine against the seed-004 loop, and against GEMM.

In one process, round by round (interleaved, median of rounds), on the ``mnist-classification``
grid shape (784 → 8 × 128 → 10, batch 128, K = 15 members = 3 lrs × 5 seeds per ensemble, as the
sweep plans it):

* seed-004 loop: a DataLoader over a Python list of (image, label) pairs, batch 64, ``.item()``
  per batch, one test pass per epoch; at torch's default thread count (as the script ran) and at
  1 thread (on a shared 2-core machine the default stalls whenever anything else runs);
* the engine: one stacked ensemble on one thread (one worker), including its per-epoch evaluation
  (train loss with dropout off, validation, test), and its training steps alone;
* optionally the engine with the step compiled (``--compile``; compile time reported apart);
* a batched matmul ``torch.bmm`` of [8, 512, 512] × [8, 512, 512] on one thread, in the same rounds,
  and one at the engine's own shape [K, 128, 128]² (its ceiling: small GEMMs run slower).

Each epoch uses ``--samples`` training images (evaluation sets scaled alike); times are scaled to
a full 55k-image epoch. Reported: s/model-epoch, the speed-up over each seed-004 row, the engine's
achieved GFLOP/s (matmul FLOPs of training and evaluation) against the bmm rate, and the implied
time of the paper's grid (90 runs × 50 epochs). Grid time: a 1-thread method runs one process per
core (the engine's real configuration: 2 workers × 1 thread), assumed to keep its measured
single-process speed — docs/PERFORMANCE.md records two 1-thread workers 6 % faster than one 2-thread
process, and one 2-thread process is at best 2× one thread; a multi-threaded seed-004 run has the
machine to itself.
"""

import argparse
import itertools
import os
import time

from gelus.experiments.device import default_workers
from gelus.experiments.engines.cnn.config import COMPILE_MODES

__all__ = ["add_arguments", "main"]

HIDDEN = (128,) * 8
TRAIN_SIZE, VAL_SIZE, TEST_SIZE = 55_000, 5_000, 10_000  # the paper's MNIST splits
GRID_RUNS, GRID_EPOCHS = 90, 50  # 3 activations × 2 dropout settings × 3 lrs × 5 seeds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gelus bench training``."""
    parser.add_argument(
        "--models", type=int, default=15, help="ensemble size K (default 15: 3 lrs × 5 seeds)"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=6400,
        help="training images per measured epoch (default 6400)",
    )
    parser.add_argument(
        "--epochs", type=int, default=1, help="epochs per method per round (default 1)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--activation", default="gelu", help="activation (default gelu, tanh form as the paper)"
    )
    parser.add_argument(
        "--keep", type=float, default=0.5, help="dropout keep probability (default 0.5)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="workers assumed for the grid time (default: cores)",
    )
    parser.add_argument(
        "--seed-default-threads",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the seed-004 loop at torch's default thread count (default: yes)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="also measure the engine with torch.compile"
    )
    parser.add_argument(
        "--dataset", default="fashion-mnist", help="dataset (default fashion-mnist)"
    )
    parser.add_argument("--data-dir", default=None, help="directory holding NAME/ dataset folders")
    _device_arguments(parser)


def _device_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the device bench (``--device``, :mod:`gelus.bench.training_device`)."""
    device = parser.add_argument_group(
        "the device bench (--device): the paper's networks on a GPU against its matmul rate"
    )
    device.add_argument(
        "--device",
        default=None,
        help="cuda, auto or cpu: run the device bench (gelus.bench.training_device) instead",
    )
    device.add_argument(
        "--experiments",
        nargs="+",
        default=None,
        metavar="NAME",
        help="presets to time (default: cifar100-wrn cifar10-allconv mnist-classification)",
    )
    device.add_argument(
        "--repeats", type=int, default=20, help="timed steps per measurement (default 20)"
    )
    device.add_argument(
        "--shared", type=int, default=4, help="runs sharing the device at once (default 4; 1: skip)"
    )
    device.add_argument(
        "--plan", action="store_true", help="also price the whole paper on this device"
    )
    device.add_argument(
        "--compile-mode",
        default="reduce-overhead",
        choices=("none", *COMPILE_MODES),
        help="torch.compile mode of the compiled CNN rows (default reduce-overhead: CUDA graphs; "
        "none: eager rows only)",
    )


def _matmul_flops_per_sample(sizes: tuple[int, ...]) -> tuple[int, int]:
    """(training, evaluation) matmul FLOPs per sample: forward 2·Σ in·out; backward adds the weight
    gradients (2·Σ in·out) and the input gradients of every layer but the first."""
    products = [i * o for i, o in itertools.pairwise(sizes)]
    forward = 2 * sum(products)
    return forward + 2 * sum(products) + 2 * sum(products[1:]), forward


def _seed004(data, samples: int, keep: float, test_samples: int, threads: int):
    """The seed-004 loop: returns one-epoch callable (model built once, trained on)."""
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    train_x = data.train.inputs(torch.arange(samples)).reshape(samples, -1).numpy() * 2 - 1
    train_y = data.train.labels[:samples].numpy()
    test_x = torch.from_numpy(
        data.test.inputs(torch.arange(test_samples)).reshape(test_samples, -1).numpy() * 2 - 1
    )
    test_y = data.test.labels[:test_samples]
    loader = DataLoader(
        [[train_x[i], train_y[i]] for i in range(samples)], batch_size=64, shuffle=True
    )

    class GELU(nn.Module):
        def forward(self, x):
            return x * 0.5 * (1 + torch.erf(x / np.sqrt(2.0)))

    layers = []
    for fan_in in (784, *HIDDEN[:-1]):
        layers += [nn.Linear(fan_in, 128), GELU(), nn.Dropout(p=1 - keep)]
    model = nn.Sequential(*layers, nn.Linear(128, 10), nn.LogSoftmax(dim=-1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fct = nn.NLLLoss()

    def epoch() -> None:
        torch.set_num_threads(threads)
        batch_loss = []
        for x, y in loader:
            loss = loss_fct(model(x.reshape(-1, 28 * 28)), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batch_loss.append(loss.item())
        model.train(False)
        loss_fct(model(test_x), test_y).item()
        model.train(True)

    return epoch


def _engine(data, args, samples: int, compiled: bool):
    """One epoch of the engine: train_epoch + the per-epoch evaluation, on one thread."""
    import torch

    from gelus.experiments.activation_spec import resolve_activation
    from gelus.experiments.engines.mlp.config import MLPExperimentConfig
    from gelus.experiments.engines.mlp.engine import (
        build_ensemble,
        compiled_train_step,
        evaluate,
        train_epoch,
        train_step,
    )

    k = args.models
    lrs = [(1e-3, 1e-4, 1e-5)[i % 3] for i in range(k)]
    config = MLPExperimentConfig()
    activation = resolve_activation(args.activation, config.model.approximate)
    model, optimizer, randomness = build_ensemble(
        config, activation, args.keep, list(range(k)), lrs, 784, 10
    )
    step = compiled_train_step(model, "classify") if compiled else train_step
    train_index = torch.arange(samples)
    val_index = torch.arange(round(VAL_SIZE * samples / TRAIN_SIZE))
    test_index = torch.arange(round(TEST_SIZE * samples / TRAIN_SIZE))

    def train() -> None:
        torch.set_num_threads(1)
        train_epoch(model, optimizer, randomness, data.train, train_index, "classify", 128, step)

    def epoch() -> None:
        train()
        evaluate(model, data.train, train_index, "classify", 1000)
        evaluate(model, data.val, val_index, "classify", 1000)
        evaluate(model, data.test, test_index, "classify", 1000)

    eval_samples = samples + len(val_index) + len(test_index)
    return epoch, train, eval_samples


def _bmm(shape: tuple[int, int, int], seconds: float = 0.3):
    """A callable doing about ``seconds`` of ``torch.bmm`` of two ``shape`` tensors on one thread, and its FLOPs."""
    import torch

    from gelus.bench.timing import calls_for

    batch, rows, inner = shape
    a, b = torch.randn(batch, rows, inner), torch.randn(batch, inner, inner)
    out = torch.empty(batch, rows, inner)
    torch.set_num_threads(1)
    calls = calls_for(lambda: torch.bmm(a, b, out=out), seconds)

    def run() -> None:
        torch.set_num_threads(1)
        for _ in range(calls):
            torch.bmm(a, b, out=out)

    return run, calls * 2 * batch * rows * inner * inner


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures (the device bench with ``--device``)."""
    if getattr(args, "device", None) is not None:
        from gelus.bench.training_device import main as device_main

        return device_main(args)
    import torch

    from gelus.bench.timing import interleaved_rounds, median

    data = _checked_data(args)
    samples = min(args.samples, len(data.train))
    default_threads = torch.get_num_threads()
    seed_threads = {"seed-004 loop, 1 thread": 1}
    if args.seed_default_threads and default_threads > 1:
        seed_threads[f"seed-004 loop, {default_threads} threads"] = default_threads
    print(
        f"bench training: K={args.models} members, {samples} training images per epoch, "
        f"keep={args.keep}, {args.activation}, {args.rounds} rounds; engine on 1 thread, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    candidates, flops, eval_samples, compile_seconds = _candidates(
        data, args, samples, seed_threads
    )
    for epoch in candidates.values():
        epoch()  # warm-up: first-touch allocations, lazy init
    times = interleaved_rounds(
        candidates,
        args.rounds,
        calls={name: 1 if name.endswith("bmm") else args.epochs for name in candidates},
    )
    torch.set_num_threads(default_threads)
    rates = {name: flops[name] / median(times.pop(name)) / 1e9 for name in flops}
    _print_table(args, samples, seed_threads, times, eval_samples, rates["bmm"])
    bmm, small_bmm = rates["bmm"], rates["small bmm"]
    workers = args.workers or default_workers("cpu")
    print(
        f"bmm [8,512,512]² on 1 thread, same rounds: {bmm:.1f} GFLOP/s (at the engine's shape "
        f"[{args.models},128,128]²: {small_bmm:.1f}, {small_bmm / bmm:.0%}). FLOPs: matmuls of training "
        f"and the per-epoch evaluation. Grid: {GRID_RUNS} runs × {GRID_EPOCHS} epochs on "
        f"{workers} cores: 1-thread methods as {workers} processes at the measured speed each "
        "(the engine: 2 workers × 1 thread), multi-threaded ones as one process."
    )
    if compile_seconds is not None:
        print(f"compile (first compiled epoch, including its training): {compile_seconds:.1f} s")
    return 0


def _checked_data(args: argparse.Namespace):
    """The bench's dataset, after the options' ranges are checked."""
    from gelus.data import load
    from gelus.experiments.errors import CommandError

    if args.models < 1 or args.samples < 128 or args.rounds < 1 or args.epochs < 1:
        raise CommandError(
            "--models, --epochs and --rounds must be at least 1 and --samples at least 128"
        )
    try:
        return load(args.dataset, args.data_dir)
    except Exception as error:
        raise CommandError(f"bench training needs {args.dataset}: {error}") from None


def _candidates(data, args, samples: int, seed_threads: dict[str, int]):
    """The timed rows ``{name: one epoch (or bmm run)}``, the FLOPs of the two bmm rows, the
    engine's evaluated samples per epoch and the compile time (None without ``--compile``)."""
    test_samples = round(TEST_SIZE * samples / 60_000)
    candidates = {
        name: _seed004(data, samples, args.keep, test_samples, threads)
        for name, threads in seed_threads.items()
    }
    engine_epoch, engine_train, eval_samples = _engine(data, args, samples, compiled=False)
    candidates["engine"] = engine_epoch
    candidates["engine, training only"] = engine_train
    flops = {}
    candidates["bmm"], flops["bmm"] = _bmm((8, 512, 512))
    # the ceiling at the engine's own matmul shape (batch 128, width 128): smaller GEMMs run slower
    candidates["small bmm"], flops["small bmm"] = _bmm((args.models, 128, 128))
    compile_seconds = None
    if args.compile:
        compiled_epoch, _, _ = _engine(data, args, samples, compiled=True)
        began = time.perf_counter()
        compiled_epoch()  # the first epoch compiles
        compile_seconds = time.perf_counter() - began
        candidates["engine compiled"] = compiled_epoch
    return candidates, flops, eval_samples, compile_seconds


def _print_table(args, samples: int, seed_threads, times, eval_samples: int, bmm: float) -> None:
    """Per method: seconds per model-epoch (scaled to a full epoch), speed-up over each seed-004
    row, achieved GFLOP/s and its share of the ``bmm`` rate, and the paper's grid in minutes."""
    from gelus.bench.timing import format_table, median

    workers = args.workers or default_workers("cpu")
    train_flops, eval_flops = _matmul_flops_per_sample((784, *HIDDEN, 10))
    steps = samples // 128
    train_only_flops = args.models * steps * 128 * train_flops
    engine_flops = train_only_flops + args.models * eval_samples * eval_flops
    scale = TRAIN_SIZE / samples  # to a full 55k-image epoch
    per_model = {}
    for name, values in times.items():
        models = 1 if name in seed_threads else args.models
        per_model[name] = median(values) / args.epochs / models * scale
    headers = ["method", "s/model-epoch"]
    headers += [f"× {name.removeprefix('seed-004 loop, ')} seed" for name in seed_threads]
    headers += ["GFLOP/s", "of bmm", "grid minutes"]
    rows = []
    for name, seconds in per_model.items():
        threads = seed_threads.get(name, 1)
        processes = max(1, workers // threads)
        row = [name, f"{seconds:.3f}"]
        row += [f"{per_model[seed] / seconds:.1f}×" for seed in seed_threads]
        if name in seed_threads:
            row += ["", ""]
        else:
            flops = train_only_flops if name.endswith("training only") else engine_flops
            rate = flops / (seconds / scale * args.models) / 1e9  # flops: one epoch
            row += [f"{rate:.1f}", f"{rate / bmm:.0%}"]
        row.append(f"{GRID_RUNS * GRID_EPOCHS * seconds / processes / 60:.0f}")
        rows.append(row)
    print(format_table(headers, rows))
