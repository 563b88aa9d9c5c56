"""What reproducing the paper costs here: each preset's work, priced by real training steps.

``gelus reproduce --plan`` prints, for every preset (default or ``--quick`` settings), its runs,
how the harness packs them into jobs (stacked ensembles for the MLPs, one run per job for the
CNNs), and the wall time on this device, on one device and on N devices (GPUs of a Ray cluster, or
worker processes), from a few timed training and evaluation steps of the preset's own network::

    work = [workload(preset) for preset in PRESETS.values()]
    costs = [price(w, device="cuda") for w in work]
    print(budget_table(costs, devices=(1, 8)))

The work is what ``plan_jobs`` plans for the preset, with the split sizes, sample shape and classes
of its dataset's ``DatasetSpec``; it is priced by the job's own engine (the engine protocol),
prepared on random data of those shapes: ``train_epoch`` over one batch is one step, ``evaluate``
over a known number of samples gives the cost of one. A job's epoch is priced as
``steps × t_step + eval_samples × t_eval``. Jobs are independent, so N devices finish in the makespan of the jobs
dealt largest-first to the least loaded device. What the estimate leaves out: data loading and
process start (seconds per job), ``torch.compile`` warm-up, and slowdown from sharing a device.
"""

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass

import torch

from gelus.experiments import timing
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.config import (
    ExperimentConfig,
    apply_overrides,
    expand_axes,
    plugin_for,
    trainer_for,
    with_default_axes,
)
from gelus.experiments.plan import Job, holds_out_validation, makespan, plan_jobs, train_size

__all__ = [
    "Cost",
    "Workload",
    "budget_table",
    "cached_price",
    "makespan",
    "price",
    "priced_plan",
    "step_functions",
    "workload",
    "workloads",
]

_EVAL_SAMPLES = 64  # random test samples the evaluation is timed on (its cost is per sample)


@dataclass(frozen=True)
class Workload:
    """A preset's runs as the planner plans them: ``planned`` jobs (``members`` runs each at most),
    every job ``epochs`` epochs of ``steps`` training steps and ``eval_samples`` evaluated samples."""

    experiment: str
    config: ExperimentConfig
    planned: tuple[Job, ...]
    steps: int
    eval_samples: int
    sample_shape: tuple[int, ...]
    num_classes: int
    point: str = ""  # the config's values of the preset's axes ("" for a preset without)

    @property
    def label(self) -> str:
        """The experiment, and the point of its axes where it has some."""
        return f"{self.experiment} {self.point}".strip()

    @property
    def engine(self) -> str:
        """Its engine's name (``EnginePlugin.name``)."""
        return plugin_for(self.config).name

    @property
    def jobs(self) -> int:
        return len(self.planned)

    @property
    def members(self) -> int:
        return max(len(job.members) for job in self.planned)

    @property
    def runs(self) -> int:
        return sum(len(job.members) for job in self.planned)

    @property
    def epochs(self) -> int:
        return self.config.train.epochs


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


def workloads(preset, quick: bool = False, device: str = "cpu", overrides=()) -> list[Workload]:
    """The :func:`workload` of each config of ``preset`` with ``overrides`` (a command's ``--set``
    values, axes among them): one per combination of their axes and the preset's default axes
    they and its ``--quick`` overrides leave (``Preset.axes``), one where there is none."""
    replaced = preset.quick if quick else ()
    points = expand_axes(preset.config, with_default_axes(preset.axes, overrides, replaced))
    varying = [
        o for o in dict.fromkeys(sum(points, ())) if sum(o in p for p in points) < len(points)
    ]
    return [
        workload(preset, quick, device, p, ",".join(o.partition("=")[2] for o in p if o in varying))
        for p in points
    ]


def workload(
    preset, quick: bool = False, device: str = "cpu", overrides=(), point: str = ""
) -> Workload:
    """The jobs ``plan_jobs`` makes of ``preset`` (with its ``--quick`` overrides if asked, then
    ``overrides``: a point of its axes) for one worker on ``device`` (where the transformers' runs
    may train stacked), sized by its dataset's spec; ``point`` labels it in the plan's table."""
    from gelus.data import get_spec

    config = apply_overrides(preset.config, [*(preset.quick if quick else ()), *overrides])
    spec = get_spec(config.dataset)
    sizes = spec.split_sizes
    kept_apart = holds_out_validation(config)
    n_train = train_size(config, sizes.train, sizes.val)
    activations = resolve_activations(config.activations, config.model.approximate)
    planned = plan_jobs(
        preset.name, config, activations, train_size=n_train, out_dir="budget", device=device
    )
    train_split = sizes.train if kept_apart else sizes.train + sizes.val
    eval_samples = plugin_for(config).evaluated_samples(
        config, train_split, sizes.val if kept_apart else 0, sizes.test
    )
    return Workload(
        preset.name,
        config,
        tuple(planned),
        n_train // config.train.batch_size,
        eval_samples,
        tuple(spec.sample_shape),
        spec.num_classes or 0,
        point,
    )


def _median_seconds(function, repeats: int, device: torch.device, warmups: int = 1) -> float:
    """The harness's timer (:func:`gelus.experiments.timing.median_seconds`) on ``device``'s wall
    clock: ``warmups`` calls (allocations, cuDNN autotuning, compilation, CUDA graph recording),
    then the median of ``repeats`` calls."""
    return timing.median_seconds(function, repeats, warmups, timing.wall_clock(device))


def step_functions(work: Workload, device: torch.device):
    """(one training step, one evaluation, the samples it reads) of ``work``'s largest job: its
    engine prepared on random data (``EnginePlugin.random_data``) with one batch of training
    samples."""
    batch = work.config.train.batch_size
    job = max(work.planned, key=lambda j: len(j.members))
    job = dataclasses.replace(job, train_size=batch)
    trainer = trainer_for(job.engine)
    data, (train, test) = plugin_for(work.config).random_data(
        work.config, (batch, _EVAL_SAMPLES), work.sample_shape, work.num_classes
    )
    engine = trainer(job, data, device)
    evaluated = trainer.evaluated_samples(job.config, train, 0, test)
    return (
        lambda: engine.train_epoch(1),  # one batch: one step
        lambda: engine.evaluate(0, lambda *record: None),
        evaluated,
    )


# A CPU calibration times a smaller step and scales it up: a stacked ensemble's step costs in
# proportion to its members (one batched matmul per layer for all), a CNN's to its batch
# (``EnginePlugin.cost_scales_with``). Timing the whole step of the largest presets (TIMIT's
# ensemble, the CIFAR-100 WRN) took minutes.
_PRICED_MEMBERS = 2
_PRICED_BATCH = 16


def _scaled_down(work: Workload) -> tuple[Workload, float]:
    """``work`` with its largest job cut to at most ``_PRICED_MEMBERS`` members (a stacked job)
    or its batch to ``_PRICED_BATCH`` (a CNN's), and the factor its step time is to be scaled
    by."""
    job = max(work.planned, key=lambda j: len(j.members))
    scales_with = plugin_for(work.config).cost_scales_with(job.engine)
    if scales_with == "members" and len(job.members) > _PRICED_MEMBERS:
        smaller = dataclasses.replace(job, members=job.members[:_PRICED_MEMBERS])
        return dataclasses.replace(work, planned=(smaller,)), len(job.members) / _PRICED_MEMBERS
    batch = work.config.train.batch_size
    if scales_with == "batch" and batch > _PRICED_BATCH:
        train = dataclasses.replace(work.config.train, batch_size=_PRICED_BATCH)
        config = dataclasses.replace(work.config, train=train)
        smaller = dataclasses.replace(job, config=config)
        return dataclasses.replace(work, config=config, planned=(smaller,)), batch / _PRICED_BATCH
    return work, 1.0


def price(work: Workload, device: str = "cpu", repeats: int = 3) -> Cost:
    """Time ``repeats`` training steps of one of ``work``'s jobs (its network, its ensemble size,
    its batch) and evaluations on ``device``, after a warm-up; medians. On the CPU the step is
    timed on a smaller job and scaled (``_scaled_down``)."""
    dev = torch.device(device)
    timed, scale = _scaled_down(work) if dev.type == "cpu" else (work, 1.0)
    step, evaluate, evaluated = step_functions(timed, dev)
    # a compiled step compiles on its first call and records its CUDA graphs on the next ones
    compiled = plugin_for(work.config).compiles(work.config)
    step_seconds = scale * _median_seconds(step, repeats, dev, warmups=3 if compiled else 1)
    # the step warmed the model up; an evaluation costs per sample, so one timing suffices
    eval_seconds = _median_seconds(evaluate, repeats, dev, warmups=0) / evaluated
    return Cost(work, str(dev), step_seconds, eval_seconds)


def _calibration_key(work: Workload, device: str) -> str:
    """What a price depends on: the job's shape and config, the code, torch, and the processor."""
    import hashlib
    import json
    import platform

    from gelus.experiments.config import config_hash
    from gelus.experiments.records import code_version

    job = max(work.planned, key=lambda j: len(j.members))
    parts = [
        work.experiment,
        config_hash(work.config),
        job.activation.label,
        len(job.members),
        device,
        code_version(),
        torch.__version__,
        platform.processor() or platform.machine(),
        _cpu_model(),
        "one thread per CPU worker",
    ]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cache_path():
    import os
    from pathlib import Path

    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "gelus" / "plan-prices.json"


# A price cache larger than this is not one we wrote (an entry is ~150 bytes): it is not read.
_CACHE_BYTES = 16 << 20


def _read_cache(path) -> tuple[dict, str | None]:
    """The price cache at ``path`` as a dict, and a warning when it could not be used (None when
    it is fine or absent). Only a regular file is read: it is opened without blocking and checked
    with fstat before any byte is read, so a FIFO or a directory in its place cannot hang."""
    import json
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        return {}, f"{path} cannot be read ({error.strerror}); priced again"
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _CACHE_BYTES:
        os.close(fd)
        if stat.S_ISREG(info.st_mode):
            return {}, f"{path} holds {info.st_size} bytes, not a price cache; priced again"
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else kind
        return {}, f"{path} is {kind}, not a price cache; priced again"
    with os.fdopen(fd, "rb") as handle:
        try:
            cache = json.loads(handle.read(_CACHE_BYTES + 1))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
            return {}, f"{path} is not a price cache (not JSON, or nested too deep); priced again"
    if not isinstance(cache, dict):
        return {}, f"{path} is a JSON {type(cache).__name__}, not a price cache; priced again"
    return cache, None


def _entry_problem(entry) -> str | None:
    """Why a cached calibration cannot be used (None when it can): ``step`` and ``eval`` must be
    finite positive numbers, ``load`` a non-negative number or NaN (no load average here),
    ``when`` a text."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    for name in ("step", "eval", "load"):
        value = entry.get(name)
        if value is None:
            return f"{name} is missing"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} is {str(value)[:40]!r}, not a number"
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            number = math.inf
        if name == "load" and math.isnan(number):
            continue
        if not math.isfinite(number) or number < 0 or (number == 0 and name != "load"):
            return f"{name} is {str(value)[:40]}, not a finite positive number"
    if not isinstance(entry.get("when", ""), str):
        return "when is not a text"
    return None


def cached_price(work: Workload, device: str = "cpu") -> tuple[Cost, dict]:
    """``price(work, device)``, calibrated once per job shape, config, code version, torch and
    processor and kept in ``~/.cache/gelus/plan-prices.json``; returns the cost and the
    calibration (when, and the load average it saw: prices taken under load are slower).

    What is stored is checked when read: a cache that is not a regular file, not JSON, or an entry
    whose numbers are not finite and positive is priced again, with one line saying why under the
    calibration's ``"warning"``; entries that are not valid are dropped when the cache is written.
    """
    import json
    import os

    from gelus.experiments.files import atomic_write

    path = _cache_path()
    key = _calibration_key(work, str(torch.device(device)))
    cache, warning = _read_cache(path)
    entry = cache.get(key)
    if entry is not None:
        problem = _entry_problem(entry)
        if problem is None:
            cost = Cost(work, str(torch.device(device)), float(entry["step"]), float(entry["eval"]))
            return cost, {"when": "?"} | entry | {"cached": True}
        warning = (
            f"{path}: the cached price of {work.experiment} is not valid ({problem}); priced again"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    threads = torch.get_num_threads()
    try:
        if torch.device(device).type == "cpu":
            torch.set_num_threads(1)  # as a CPU worker runs (PERFORMANCE.md: one thread each)
        cost = price(work, device, repeats=1)
    finally:
        torch.set_num_threads(threads)
    entry = {
        "step": cost.step_seconds,
        "eval": cost.eval_seconds_per_sample,
        "load": load,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    # only valid entries are written back: nothing damaged (or nested without bound) is kept
    cache = {k: v for k, v in cache.items() if _entry_problem(v) is None} | {key: entry}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(cache, indent=1))
    except OSError:
        pass  # a read-only home: price again next time
    calibration = entry | {"cached": False}
    return cost, calibration if warning is None else calibration | {"warning": warning}


def _hours(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def budget_table(
    costs: list[Cost], devices: tuple[int, ...] = (1,), total: str = "whole paper"
) -> str:
    """The plan as text: per preset its runs, jobs, epochs, one job's epoch time, and the wall time
    on each number of ``devices``; then the ``total`` (presets one after another, each spread
    over the devices)."""
    width = max([20, *(len(cost.work.label) for cost in costs)])
    head = f"{'experiment':<{width}} {'runs':>5} {'jobs':>5} {'r/job':>5} {'epochs':>6}"
    head += f" {'s/job-epoch':>11}"
    head += "".join(f" {f'{n} device' + ('s' if n > 1 else ''):>11}" for n in devices)
    lines = [head]
    totals = [0.0] * len(devices)
    for cost in costs:
        w = cost.work
        walls = [cost.seconds(n) for n in devices]
        totals = [t + s for t, s in zip(totals, walls, strict=True)]
        line = f"{w.label:<{width}} {w.runs:>5} {w.jobs:>5} {w.members:>5} {w.epochs:>6}"
        line += f" {cost.job_epoch_seconds:>11.2f}" + "".join(f" {_hours(s):>11}" for s in walls)
        lines.append(line)
    lines.append(
        f"{total:<{width}} {sum(c.work.runs for c in costs):>5} {'':>5} {'':>5} {'':>6}"
        + f" {'':>11}"
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


def priced_plan(
    work: list[Workload], device: str, devices: tuple[int, ...], total: str, command: str
) -> str:
    """``work`` priced (:func:`cached_price`) as :func:`budget_table`'s text, then when and under
    what load the prices were calibrated: what ``gelus reproduce --plan`` and ``gelus run --plan``
    print. Warnings of the calibration go to stderr, after ``command``."""
    priced = [cached_price(w, device) for w in work]
    for warning in dict.fromkeys(c["warning"] for _, c in priced if "warning" in c):
        print(f"{command}: warning: {warning}", file=sys.stderr)
    loads = sorted({round(c["load"], 1) for _, c in priced if c["load"] == c["load"]})
    when = sorted({c.get("when", "?") for _, c in priced})
    cached = sum(c["cached"] for _, c in priced)
    note = (
        f"\ncalibrated {when[0] if len(when) == 1 else f'{when[0]} to {when[-1]}'} at load average "
        f"{', '.join(map(str, loads)) or 'unknown'} on {os.cpu_count()} cores ({cached} of "
        f"{len(priced)} from the cache, delete {_cache_path()} to calibrate again); a calibration "
        "under load prices slower"
    )
    return budget_table([cost for cost, _ in priced], devices, total) + note
