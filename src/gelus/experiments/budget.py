"""What reproducing the paper costs here: each preset's work, priced by real training steps.

``gelus reproduce --plan`` prints, for every preset (default or ``--quick`` settings), its runs,
how the harness packs them into jobs (stacked ensembles for the MLPs, one run per job for the
CNNs), and the wall time on this device, on one device and on N devices (GPUs of a Ray cluster, or
worker processes), from a few timed training and evaluation steps of the preset's own network::

    work = [workload(preset) for preset in PRESETS.values()]
    costs = [price(w, device="cuda") for w in work]
    print(budget_table(costs, devices=(1, 8)))

A job's epoch is priced as ``steps × t_step + eval_samples × t_eval`` (``t_eval`` per sample, from
timed forward passes). Jobs are independent, so N devices finish in the makespan of the jobs
dealt largest-first to the least loaded device. What the estimate leaves out: data loading and
process start (seconds per job), ``torch.compile`` warm-up, and slowdown from sharing a device.
"""

import math
import statistics
import time
from dataclasses import dataclass

import torch

from gelus.experiments.config import ExperimentConfig, apply_overrides, is_stochastic

__all__ = ["Cost", "Workload", "budget_table", "makespan", "price", "step_functions", "workload"]

# (validation, test) samples of each dataset's standard split; evaluation reads them every epoch.
# Twitter POS: the oct27 dev and test sets (tokens); TIMIT: frames of the 400-utterance dev set and
# the 192-utterance core test set, at 10 ms per frame (approximate: the data decide).
EVAL_SPLITS = {
    "mnist": (5_000, 10_000),
    "fashion-mnist": (5_000, 10_000),
    "cifar10": (5_000, 10_000),
    "cifar100": (5_000, 10_000),
    "twitter-pos": (4_823, 7_152),
    "timit": (122_000, 57_900),
}
TIMIT_TRAIN_FRAMES = 1_124_800  # 3,696 utterances; the preset states utterances, not frames


@dataclass(frozen=True)
class Workload:
    """A preset's runs as the harness plans them: ``jobs`` jobs of ``members`` runs each, every
    job ``epochs`` epochs of ``steps`` training steps and ``eval_samples`` evaluated samples."""

    experiment: str
    config: ExperimentConfig
    engine: str  # "mlp" (stacked ensembles) | "cnn" (one run per job)
    jobs: int
    members: int
    epochs: int
    steps: int
    eval_samples: int

    @property
    def runs(self) -> int:
        return self.jobs * self.members


@dataclass(frozen=True)
class Cost:
    """A workload priced on a device: seconds per training step of one job and per evaluated sample."""

    work: Workload
    device: str
    step_seconds: float
    eval_seconds_per_sample: float

    @property
    def job_epoch_seconds(self) -> float:
        return self.work.steps * self.step_seconds + self.work.eval_samples * (
            self.eval_seconds_per_sample
        )

    @property
    def job_seconds(self) -> float:
        return self.work.epochs * self.job_epoch_seconds

    def seconds(self, devices: int = 1) -> float:
        """Wall time of all jobs on ``devices`` devices (one job at a time on each)."""
        return makespan([self.job_seconds] * self.work.jobs, devices)


def makespan(job_seconds: list[float], devices: int) -> float:
    """Longest device load when jobs go largest first to the least loaded of ``devices``."""
    loads = [0.0] * max(1, devices)
    for seconds in sorted(job_seconds, reverse=True):
        loads[loads.index(min(loads))] += seconds
    return max(loads)


def workload(preset, quick: bool = False) -> Workload:
    """The jobs of ``preset`` (with its ``--quick`` overrides if asked) as ``plan_jobs`` makes them
    (one ensemble per activation and dropout setting; the CNNs one job per run)."""
    config = apply_overrides(preset.config, preset.quick if quick else ())
    train = config.train
    n_train = TIMIT_TRAIN_FRAMES if config.dataset == "timit" else preset.train_size or 0
    if train.train_subset:
        n_train = min(n_train, train.train_subset)
    val, test = EVAL_SPLITS.get(config.dataset, (0, 0))
    runs_per_setting = len(config.optim.lr) * train.seeds
    settings = 0
    for activation in config.activations:
        if is_stochastic(activation) or config.task in ("autoencode", "cnn"):
            settings += 1
        else:
            settings += len(dict.fromkeys(train.keep))
    if config.task == "cnn":
        cnn = config.cnn
        if cnn.retrain_full:
            val = 0  # train_size already counts the validation images it trains on
        eval_train = n_train if cnn.train_eval_size is None else min(cnn.train_eval_size, n_train)
        return Workload(
            preset.name, config, "cnn", settings * runs_per_setting, 1, train.epochs,
            n_train // train.batch_size, eval_train + val + test,
        )  # fmt: skip
    eval_train = min(train.eval_train_subset or n_train, n_train)
    if config.train_on != "train":
        val = 0  # trains on train + val: no validation pass
    return Workload(
        preset.name, config, "mlp", settings, runs_per_setting, train.epochs,
        n_train // train.batch_size, eval_train + val + test,
    )  # fmt: skip


def _median_seconds(function, repeats: int, device: torch.device, warmups: int = 1) -> float:
    for _ in range(warmups):  # allocations, cuDNN autotuning, compilation, CUDA graph recording
        function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _mlp_functions(work: Workload, device: torch.device):
    from gelus.experiments.train_mlp import build_ensemble, train_step

    config = work.config
    features = {"twitter-pos": 150, "timit": 286}.get(config.dataset, 784)
    outputs = (
        features
        if config.task == "autoencode"
        else {"twitter-pos": 25, "timit": 39}.get(config.dataset, 10)
    )
    activation = config.activations[0]
    keep = min(config.train.keep) if not is_stochastic(activation) else 1.0
    seeds = list(range(work.members))
    lrs = [config.optim.lr[0]] * work.members
    model, optimizer, randomness = build_ensemble(
        config, activation, keep, seeds, lrs, features, outputs, str(device)
    )
    dtype, batch = model.weights[0].dtype, config.train.batch_size
    x = torch.rand(work.members, batch, features, dtype=dtype, device=device)
    target = (
        x
        if config.task == "autoencode"
        else torch.randint(0, outputs, (work.members, batch), device=device)
    )
    noise = None
    if model.needs_noise:
        bits = torch.empty(work.members, model.noise_words(batch), dtype=torch.int64, device=device)
        noise = model.noise(randomness.fill_bits(bits), batch)
    eval_x = torch.rand(config.train.eval_batch_size, features, dtype=dtype, device=device)

    def step():
        train_step(model, optimizer, config.task, x, target, noise)

    @torch.no_grad()
    def evaluate():
        model.eval()
        model(eval_x)
        model.train()

    return step, evaluate, config.train.eval_batch_size


def _cnn_functions(work: Workload, device: torch.device):
    from gelus.experiments.cnn import (
        _autocast,
        _channels_last,
        build_cnn,
        make_optimizer,
        make_training_step,
    )

    config = work.config
    cnn = config.cnn
    classes = 100 if config.dataset == "cifar100" else 10
    model = build_cnn(cnn, config.activations[0], classes, config.model.approximate).to(device)
    memory_format = torch.channels_last if _channels_last(cnn, device) else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = make_optimizer(cnn, model, config.optim.lr[0])
    scaler = torch.amp.GradScaler(device.type, enabled=cnn.amp_dtype == "fp16")
    train_step = make_training_step(cnn, model, optimizer, scaler, device)
    batch = config.train.batch_size
    x = torch.randn(batch, 3, 32, 32, device=device).contiguous(memory_format=memory_format)
    y = torch.randint(0, classes, (batch,), device=device)
    eval_x = torch.randn(cnn.eval_batch_size, 3, 32, 32, device=device).contiguous(
        memory_format=memory_format
    )

    def step():
        model.train()
        train_step(x, y)

    @torch.no_grad()
    def evaluate():
        model.eval()
        with _autocast(cnn, device):
            model(eval_x)

    return step, evaluate, cnn.eval_batch_size


def step_functions(work: Workload, device: torch.device):
    """(one training step, one evaluation batch, its size) of one of ``work``'s jobs: its network,
    ensemble size and batch, on random data on ``device``."""
    make = _cnn_functions if work.engine == "cnn" else _mlp_functions
    return make(work, device)


def price(work: Workload, device: str = "cpu", repeats: int = 3) -> Cost:
    """Time ``repeats`` training steps of one of ``work``'s jobs (its network, its ensemble size,
    its batch) and evaluation batches on ``device``, after a warm-up; medians."""
    dev = torch.device(device)
    step, evaluate, eval_batch = step_functions(work, dev)
    # a compiled step compiles on its first call and records its CUDA graphs on the next ones
    compiled = work.engine == "cnn" and work.config.cnn.compile is not None
    step_seconds = _median_seconds(step, repeats, dev, warmups=3 if compiled else 1)
    eval_seconds = _median_seconds(evaluate, repeats, dev) / eval_batch
    return Cost(work, str(dev), step_seconds, eval_seconds)


def _hours(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def budget_table(costs: list[Cost], devices: tuple[int, ...] = (1,)) -> str:
    """The plan as text: per preset its runs, jobs, epochs, one job's epoch time, and the wall time
    on each number of ``devices``; then the whole paper (presets one after another, each spread
    over the devices)."""
    head = (
        f"{'experiment':<20} {'runs':>5} {'jobs':>5} {'r/job':>5} {'epochs':>6} {'s/job-epoch':>11}"
    )
    head += "".join(f" {f'{n} device' + ('s' if n > 1 else ''):>11}" for n in devices)
    lines = [head]
    totals = [0.0] * len(devices)
    for cost in costs:
        w = cost.work
        walls = [cost.seconds(n) for n in devices]
        totals = [t + s for t, s in zip(totals, walls, strict=True)]
        line = f"{w.experiment:<20} {w.runs:>5} {w.jobs:>5} {w.members:>5} {w.epochs:>6}"
        line += f" {cost.job_epoch_seconds:>11.2f}" + "".join(f" {_hours(s):>11}" for s in walls)
        lines.append(line)
    lines.append(
        f"{'whole paper':<20} {sum(c.work.runs for c in costs):>5} {'':>5} {'':>5} {'':>6} {'':>11}"
        + "".join(f" {_hours(s):>11}" for s in totals)
    )
    device = costs[0].device if costs else "?"
    lines.append(
        f"priced on {device} from timed steps of each preset's network; excludes data loading, "
        "compile warm-up and contention between jobs sharing a device"
    )
    if any(not math.isfinite(c.job_seconds) for c in costs):
        lines.append("some presets could not be priced")
    return "\n".join(lines)
