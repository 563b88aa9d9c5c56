"""``gelus bench training --device cuda``: the paper's networks on one GPU, against its matmul rate.

In one process (and, for the shared-GPU row, N processes at once):

* the device's own dense matmul rate, bf16 and fp32 (TF32 off), [8192, 8192]²: the ceiling;
* per preset (default: the two CIFAR nets and the MNIST grid) the seconds per epoch of one run,
  from timed training and evaluation steps of the preset's own network (``gelus.experiments.budget``,
  the same pricing as ``gelus reproduce --plan``), fp32 and, for the CNNs, bf16 autocast, each eager
  and compiled (``--compile-mode``, default "reduce-overhead": inductor plus CUDA graphs);
* the useful rate: model FLOPs per training image (``torch.utils.flop_counter``, forward and
  backward) × images per second, and its fraction of the ceiling;
* several runs sharing the device: N processes training the same network at once, their aggregate
  images per second ÷ one run's;
* the whole paper's plan on this device (``gelus reproduce --plan``).

Targets (issue: the paper on one GPU) are printed beside the figures; the bench never asserts them.
"""

import argparse
import dataclasses

import torch

from gelus.experiments.timing import median_seconds, wall_clock

__all__ = ["TARGETS", "main", "matmul_rate", "training_flops_per_image"]

DEFAULT_EXPERIMENTS = ("cifar100-wrn", "cifar10-allconv", "mnist-classification")
# (experiment, autocast) -> target seconds per epoch of one run on one H100
TARGETS = {
    ("cifar100-wrn", "bf16"): 4.0,
    ("cifar100-wrn", None): 6.0,
    ("cifar10-allconv", None): 2.0,
    ("cifar10-allconv", "bf16"): 2.0,
}
GRID_TARGET_SECONDS = 180.0  # the MNIST grid, 90 runs × 50 epochs with per-epoch evaluation
SHARED_TARGET = 2.0  # aggregate rate of several runs sharing the GPU ÷ one run's


def matmul_rate(
    device: torch.device, dtype: torch.dtype, n: int = 8192, repeats: int = 10
) -> float:
    """FLOP/s of ``torch.mm`` on [n, n] × [n, n] in ``dtype`` (TF32 off for fp32), median."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        seconds = median_seconds(lambda: torch.mm(a, b), repeats, timer=wall_clock(device))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * n**3 / seconds


def training_flops_per_image(work, device: torch.device) -> float:
    """Forward + backward FLOPs of one training step of ``work``'s network, per training image
    (per member-sample for a stacked ensemble), counted by ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    from gelus.experiments.budget import step_functions

    step, _, _ = step_functions(work, device)
    with FlopCounterMode(display=False) as counter:
        step()
    samples = work.config.train.batch_size * work.members
    return counter.get_total_flops() / samples


def _variants(name: str, preset, compile_mode: str | None):
    """(label, autocast, workload) rows of one preset: the CNNs in fp32 and bf16, eager and, with
    ``compile_mode``, compiled in that mode."""
    from gelus.experiments.budget import workload
    from gelus.experiments.config import plugin_for

    work = workload(preset)
    variants = plugin_for(work.config).precision_variants(work.config, compile_mode)
    if variants is None:
        return [(name, None, work)]
    rows = []
    for amp, mode, config in variants:
        # the engines read their job's config: each planned job must carry the variant's
        planned = tuple(dataclasses.replace(job, config=config) for job in work.planned)
        label = f"{name} {amp or 'fp32'}" + (" compiled" if mode else "")
        rows.append((label, amp, dataclasses.replace(work, config=config, planned=planned)))
    return rows


def _price_in_process(work, device: str, repeats: int, barrier) -> float:
    from gelus.experiments.budget import price

    torch.set_num_threads(1)
    barrier.wait()  # every process starts timing at once
    return price(work, device, repeats).step_seconds


def shared_speedup(work, device: str, processes: int, repeats: int) -> float:
    """Aggregate training rate of ``processes`` runs of ``work`` sharing ``device`` ÷ one run's."""
    import multiprocessing

    from gelus.experiments.budget import price

    alone = price(work, device, repeats).step_seconds
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    with context.Manager() as manager:
        barrier = manager.Barrier(processes)
        with context.Pool(processes) as pool:
            steps = pool.starmap(_price_in_process, [(work, device, repeats, barrier)] * processes)
    return sum(alone / seconds for seconds in steps)


def _ceilings(device: torch.device) -> dict[str, float]:
    """The device's matmul rate in bf16 and fp32 (FLOP/s), printed."""
    size = 8192 if device.type == "cuda" else 1024
    ceilings = {
        "bf16": matmul_rate(device, torch.bfloat16, size),
        "fp32": matmul_rate(device, torch.float32, size),
    }
    print(
        f"ceiling: torch.mm [{size}]² bf16 {ceilings['bf16'] / 1e12:.1f} TFLOP/s, "
        f"fp32 {ceilings['fp32'] / 1e12:.1f} TFLOP/s (TF32 off)"
    )
    return ceilings


def _print_shared(experiment: str, device: torch.device, processes: int, repeats: int) -> None:
    """The aggregate rate of ``processes`` runs of ``experiment`` sharing the device, printed."""
    from gelus.experiments.presets import PRESETS

    _, amp, work = _variants(experiment, PRESETS[experiment], None)[-1]
    speedup = shared_speedup(work, str(device), processes, repeats)
    print(
        f"{processes} runs of {experiment} {amp or 'fp32'} sharing the device: aggregate "
        f"{speedup:.2f}× one run's rate (target ≥ {SHARED_TARGET:g}×)"
    )


def main(args: argparse.Namespace) -> int:
    """Print the device bench (see the module docstring); returns 0."""
    from gelus.experiments.budget import budget_table, price, workload
    from gelus.experiments.config import plugin_for
    from gelus.experiments.device import local_device
    from gelus.experiments.errors import CommandError
    from gelus.experiments.presets import PRESETS

    try:
        device = torch.device(local_device(args.device))
    except ValueError as error:
        raise CommandError(str(error)) from None
    names = args.experiments or list(DEFAULT_EXPERIMENTS)
    compile_mode = None if args.compile_mode == "none" else args.compile_mode
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise CommandError(f"unknown experiment {unknown[0]!r}; valid: {', '.join(PRESETS)}")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"gelus bench training on {name} ({device}), torch {torch.__version__}")
    ceilings = _ceilings(device)
    print(
        f"{'run':<34} {'s/epoch':>8} {'target':>7} {'img/s':>9} {'GFLOP/img':>9} "
        f"{'TFLOP/s':>8} {'of ceiling':>10}"
    )
    for experiment in names:
        for label, amp, work in _variants(experiment, PRESETS[experiment], compile_mode):
            cost = price(work, str(device), args.repeats)
            flops = training_flops_per_image(work, device)
            images = work.config.train.batch_size * work.members / cost.step_seconds
            rate = flops * images
            ceiling = ceilings["bf16" if amp else "fp32"]
            target = TARGETS.get((experiment, amp))
            target_text = f"≤ {target:g}" if target else ""
            if not plugin_for(work.config).one_run_per_job:  # the grid: its ensembles in turn
                epoch = cost.seconds(1) / work.epochs
                target_text = (
                    f"grid ≤ {GRID_TARGET_SECONDS / 60:g} min: {cost.seconds(1) / 60:.1f} min"
                )
            else:
                epoch = cost.job_epoch_seconds
            print(
                f"{label:<34} {epoch:>8.2f} {target_text:>7} {images:>9.0f} {flops / 1e9:>9.3f} "
                f"{rate / 1e12:>8.2f} {rate / ceiling:>10.1%}"
            )
    if args.shared > 1:
        _print_shared(names[0], device, args.shared, args.repeats)
    if args.plan:
        costs = [price(workload(p), str(device), args.repeats) for p in PRESETS.values()]
        print(budget_table(costs, (1, 4, 8)))
    return 0
