"""Measure what the paper's experiments cost on this machine, for the table in docs/CLUSTER.md.

    python docs/cluster_cost.py [--seeds 5] [--repeats 3] [--only NAME ...]

One torch thread throughout (one Ray task = one CPU). For each preset, with ``--seeds`` seeds:

- MLP presets: the engine's own ``train_epoch`` and ``evaluate`` on one full-size ensemble (the
  preset's members = lrs × seeds, its network, batch size and dropout) over synthetic inputs of
  the real shapes. Seconds per epoch = training steps per epoch × measured seconds per step +
  evaluated samples per epoch (train subset, val, test) × measured seconds per sample.
- CNN presets: ``gelus.experiments.engines.cnn.engine.measure_training_step`` (forward, backward, update on a
  full batch) and a timed evaluation batch; seconds per epoch = steps × step + evaluated images ×
  seconds per image. FLOPs per training step are counted with ``torch.utils.flop_counter`` for
  the GPU order of magnitude.

Medians over ``--repeats`` timed rounds after a warm-up. Prints one Markdown table row per preset.
"""

import argparse
import itertools
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from gelus.data import TensorSplit
from gelus.experiments import PRESETS
from gelus.experiments.engines.cnn import engine as cnn
from gelus.experiments.engines.mlp.engine import build_ensemble, evaluate, train_epoch
from gelus.experiments.plan import plan_jobs
from gelus.experiments.run import resolve_config

# (train, val, test) sizes, inputs per sample, classes. POS: Gimpel et al.'s Twitter set (1,000 /
# 327 / 547 tweets); TIMIT: 3,696 / 400 / 192 utterances at 100 frames per second, approximately.
SHAPES = {
    "mnist": ((55_000, 5_000, 10_000), (1, 28, 28), 10),
    "mnist+val": ((60_000, 0, 10_000), (1, 28, 28), 10),
    "twitter-pos": ((14_619, 4_823, 7_152), (150,), 25),
    "timit": ((1_124_823, 122_487, 57_919), (286,), 39),
}
CIFAR = {"cifar10-allconv": 10, "cifar100-wrn": 100}


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _synthetic_split(n: int, sample_shape: tuple[int, ...], classes: int) -> TensorSplit:
    generator = torch.Generator().manual_seed(0)
    if len(sample_shape) == 3:  # images: uint8, converted per batch as the real loader does
        images = torch.randint(0, 256, (n, *sample_shape), dtype=torch.uint8, generator=generator)
    else:
        images = torch.randn(n, *sample_shape, generator=generator)
    return TensorSplit(images, torch.randint(0, classes, (n,), generator=generator))


def mlp_cost(name: str, seeds: int, repeats: int) -> dict:
    _, config, _ = resolve_config(name, seeds=seeds)
    jobs = plan_jobs(
        name,
        config,
        out_dir=Path("unused"),
        data_dir=None,
        verify=False,
        metadata={},
        done=set(),
    )
    shape_key = "mnist+val" if config.dataset == "mnist" and config.train_on != "train" else None
    (n_train, n_val, n_test), sample_shape, classes = SHAPES[shape_key or config.dataset]
    in_features = 1
    for size in sample_shape:
        in_features *= size
    out_features = in_features if config.task == "autoencode" else classes
    job = min(jobs, key=lambda j: (-len(j.members), j.keep))  # the largest, with most dropout
    members = len(job.members)
    model, optimizer, randomness = build_ensemble(
        config,
        job.activation,
        job.keep,
        [k.seed for k in job.members],
        [k.lr for k in job.members],
        in_features,
        out_features,
    )
    batch = config.train.batch_size
    sizes = (in_features, *config.model.hidden, out_features)
    weights = sum(a * b for a, b in itertools.pairwise(sizes)) * members
    # a few seconds per timed round: ~2e11 multiply-adds for training, 1e11 for evaluation
    timed_steps = max(2, min(50, round(2e11 / (3 * weights * batch))))
    train = _synthetic_split(timed_steps * batch, sample_shape, classes)
    index = torch.arange(len(train))

    def steps() -> None:
        train_epoch(model, optimizer, randomness, train, index, config.task, batch)

    step_seconds = _median_seconds(steps, repeats) / timed_steps
    eval_samples = max(256, min(config.train.eval_batch_size, round(1e11 / weights)))
    eval_batch = min(config.train.eval_batch_size, eval_samples)
    evaluated = _synthetic_split(eval_samples, sample_shape, classes)
    eval_index = torch.arange(len(evaluated))
    sample_seconds = _median_seconds(
        lambda: evaluate(model, evaluated, eval_index, config.task, eval_batch), repeats
    ) / len(evaluated)

    steps_per_epoch = n_train // batch
    eval_train = config.train.eval_train_subset or n_train
    per_epoch = steps_per_epoch * step_seconds + (eval_train + n_val + n_test) * sample_seconds
    final = len(config.noise.levels) * n_test * sample_seconds  # noise evaluation, once per run
    ensemble_epochs = sum(j.epochs for j in jobs)
    return {
        "name": name,
        "runs": sum(len(j.members) for j in jobs),
        "tasks": f"{len(jobs)} ensembles of {members}",
        "epochs": config.train.epochs,
        "per_epoch": per_epoch,
        "detail": f"{steps_per_epoch} steps × {step_seconds:.3g} s + "
        f"{eval_train + n_val + n_test} evaluated × {sample_seconds * 1e3:.3g} ms",
        "cpu_hours": (ensemble_epochs * per_epoch + len(jobs) * final) / 3600,
        "task_hours": config.train.epochs * per_epoch / 3600,
    }


def cnn_cost(name: str, seeds: int, repeats: int) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    _, config, _ = resolve_config(name, seeds=seeds)
    cfg = config.cnn
    classes = CIFAR[name]
    runs = len(config.activations) * len(config.optim.lr) * seeds
    batch_size, epochs = config.train.batch_size, config.train.epochs
    step_seconds = statistics.median(
        cnn.measure_training_step(
            cfg, "gelu", batch_size=batch_size, lr=config.optim.lr[0], batches=repeats
        )
    )
    model = cnn.build_cnn(cfg, "gelu", classes).eval()
    images = torch.randn(cfg.eval_batch_size, 3, 32, 32)

    @torch.no_grad()
    def forward() -> None:
        model(images)

    image_seconds = _median_seconds(forward, repeats) / cfg.eval_batch_size
    model.train()
    counter = FlopCounterMode(display=False)
    with counter:
        x = torch.randn(batch_size, 3, 32, 32)
        torch.nn.functional.cross_entropy(model(x), torch.zeros(batch_size).long()).backward()
    n_val = 0 if cfg.retrain_full else 5_000  # CIFAR's validation split: the last 5,000
    n_train = 50_000 - n_val
    steps = n_train // batch_size
    evaluated = (cfg.train_eval_size or n_train) + n_val + 10_000
    per_epoch = steps * step_seconds + evaluated * image_seconds
    return {
        "name": name,
        "runs": runs,
        "tasks": f"{runs} runs",
        "epochs": epochs,
        "per_epoch": per_epoch,
        "detail": f"{steps} steps × {step_seconds:.3g} s + {evaluated} evaluated × "
        f"{image_seconds * 1e3:.3g} ms; {counter.get_total_flops() / 1e12:.2f} TFLOP per step",
        "cpu_hours": runs * epochs * per_epoch / 3600,
        "task_hours": epochs * per_epoch / 3600,
        "tflop_per_epoch": steps * counter.get_total_flops() / 1e12,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="presets to measure")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.1f} at start"
    )
    print(
        "| experiment | runs | Ray tasks | epochs | s / epoch / task | CPU-hours | one task, hours |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, preset in PRESETS.items():
        if args.only and name not in args.only:
            continue
        measure = cnn_cost if preset.cnn_config else mlp_cost
        row = measure(name, args.seeds, args.repeats)
        print(
            f"| {name} | {row['runs']} | {row['tasks']} | {row['epochs']} | "
            f"{row['per_epoch']:.0f} | {row['cpu_hours']:.1f} | {row['task_hours']:.2f} |",
            f"<!-- {row['detail']}"
            + (
                f"; {row['tflop_per_epoch']:.0f} TFLOP per epoch"
                if "tflop_per_epoch" in row
                else ""
            )
            + " -->",
            flush=True,
        )
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
