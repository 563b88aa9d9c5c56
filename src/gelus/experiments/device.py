"""Where a run computes: the one place that turns "auto" / "cpu" / "cuda" into a device, the
stamp of the machine and code (``environment_metadata``) every run records, and whether the jobs
that run at once fit its memory (``check_memory``).

A run's resolution resolves the device once (:func:`jobs_device`: here, or through an executor's
``resolve_device`` when the jobs run on a cluster) and stamps it on every job; a trainer only
checks that it is there.
"""

import functools
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gelus.experiments.config import LIMITS
from gelus.experiments.errors import ConfigError, SettingError, size_text

__all__ = [
    "DEVICES",
    "WORKERS_PER_GPU",
    "check_jobs",
    "check_memory",
    "code_version",
    "default_workers",
    "environment_metadata",
    "jobs_device",
    "local_device",
    "memory_of",
    "run_count",
    "set_tf32",
]

DEVICES = ("auto", "cpu", "cuda")
# Runs sharing one GPU as worker processes when --workers is not given: one of the paper's runs
# leaves most of a GPU idle (batch 100-128; on an H200, 4 CIFAR-100 WRN runs trained at 3.76× one
# run's aggregate rate), and each process holds its own CUDA context (~0.5 GB), so a few per GPU,
# not one per core. `gelus bench training --device cuda --shared N` measures the aggregate rate of N.
WORKERS_PER_GPU = 4


def local_device(device: str) -> str:
    """``device`` on this machine: "auto" is "cuda" when torch sees a GPU, else "cpu".

    Raises ValueError for an unknown name, or for "cuda" where torch sees no CUDA device.
    """
    import torch

    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    available = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if available else "cpu"
    if device == "cuda" and not available:
        raise ValueError("--device cuda: torch sees no CUDA device here; use --device auto or cpu")
    return device


def jobs_device(device: str, executor: Any = None) -> str:
    """The device the jobs run on: ``device`` ("auto", "cpu" or "cuda") on this machine
    (:func:`local_device`), or in the executor's cluster when it has a ``resolve_device`` method;
    SettingError naming ``{device}`` for an unknown one or one that is not there."""
    if device not in DEVICES:
        raise SettingError(
            "device", f"unknown device {device[:60]!r}; valid devices: {', '.join(DEVICES)}"
        )
    if hasattr(executor, "resolve_device"):
        return executor.resolve_device(device)
    try:
        return local_device(device)
    except ValueError as error:
        raise SettingError("device", str(error)) from None


def check_jobs(
    experiment: str,
    config: Any,
    plugin: Any,
    settings: Mapping[str, Any],
    device: str,
    workers: int | None = None,
    here: bool = True,
) -> str:
    """The trainer of ``config``'s jobs on ``device`` (its engine ``plugin``'s ``job_engine``),
    once its runs are checked to fit, before anything is built: their count (learning rates ×
    seeds × each activation's ``settings``) at most ``LIMITS["runs"]`` (ConfigError); ``workers``
    at most the cores or the runs (SettingError); and where they run ``here``, on this machine,
    the jobs at once within its memory (:func:`check_memory`)."""
    runs = run_count(config, settings)
    if runs > LIMITS["runs"]:
        raise ConfigError(
            f"{runs:,} runs planned, more than {LIMITS['runs']:,}; use fewer seeds, learning "
            "rates or activations"
        )
    if workers is not None and workers > (most := max(os.cpu_count() or 1, runs)):
        raise SettingError(
            "workers", f"{{workers}} must be at most {most:,}, got {str(workers)[:60]}"
        )
    engine = plugin.job_engine(config, device)
    if here:  # else the jobs run on a cluster's machines; sizes the data cap: at their least
        memory = plugin.memory_config(config, None)
        check_memory(experiment, memory, plugin, engine, device, workers, runs)
    return engine


def run_count(config: Any, settings: Mapping[str, Any]) -> int:
    """The runs of ``config``: learning rates × seeds × each activation's ``settings``."""
    return len(config.optim.lr) * config.train.seeds * sum(map(len, settings.values()))


def check_memory(
    experiment: str,
    config: Any,
    plugin: Any,
    engine: str,
    device: str,
    workers: int | None,
    runs: int,
) -> None:
    """ConfigError when the jobs of ``runs`` that run at once here need more memory than this
    machine has: one job's estimate (its engine's ``memory_bytes``: of one run, or of an
    activation's seeds × learning rates where they train as one, its trainer ``engine``) times
    the jobs at once (the workers, default :func:`default_workers`, at most one per job; on CUDA
    per GPU). The message names the settings that drive the estimate and the way out."""
    members = 1
    if not plugin.one_run_per_job or engine != plugin.name:
        members = max(1, min(runs, config.train.seeds * len(config.optim.lr)))
    estimate, keys = plugin.memory_bytes(config, members)
    total, devices = memory_of(device)
    if not estimate or total is None:
        return
    workers = default_workers(device) if workers is None else workers
    at_once = max(1, min(workers, -(-runs // members)))
    per_device = -(-at_once // devices)
    if estimate * per_device <= total:
        return
    values = (functools.reduce(getattr, key.split("."), config) for key in keys)
    shown = (",".join(map(str, v)) if isinstance(v, list | tuple) else str(v)[:40] for v in values)
    settings = ", ".join(f"{key}={value}" for key, value in zip(keys, shown, strict=True))
    where = "this machine's memory" if device == "cpu" else "one GPU's memory"
    need = f"{per_device} jobs at once need" if per_device > 1 else "one job needs"
    fewer = ", or fewer {workers}" if per_device > 1 else ""
    need_bytes = estimate * per_device
    raise ConfigError(
        f"{experiment}: {need} about {size_text(need_bytes)}, more than {where} "
        f"({size_text(total)}) by {size_text(need_bytes - total)} ({need_bytes / total:,.1f}×); "
        f"it grows with {settings}: lower them{fewer}"
    )


def set_tf32(device: str, enabled: bool) -> None:
    """Allow or forbid TF32 (10-bit-mantissa) matmuls and convolutions on CUDA, in this process.

    Off by default (``train.tf32=false``) for fidelity: the paper's numbers come from fp32 training,
    and cuDNN would otherwise use TF32 for convolutions. A no-op on the CPU.
    """
    if device != "cuda":
        return
    import torch

    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def default_workers(device: str) -> int:
    """Worker processes when none are asked for: one per available core on the CPU; on CUDA
    ``WORKERS_PER_GPU`` per visible GPU (each worker takes the GPUs in turn), at most one per core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    if device != "cuda":
        return cores
    import torch

    return max(1, min(cores, WORKERS_PER_GPU * torch.cuda.device_count()))


def memory_of(device: str) -> tuple[int | None, int]:
    """(bytes of memory, the devices holding that much each) of ``device`` on this machine: the
    physical RAM on the CPU (one), one GPU's memory on CUDA (the GPUs visible); None for bytes
    where it cannot be read."""
    if device != "cuda":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), 1
        except (ValueError, OSError, AttributeError):
            return None, 1
    import torch

    gpus = torch.cuda.device_count()
    if not gpus:
        return None, 1
    return min(torch.cuda.get_device_properties(i).total_memory for i in range(gpus)), gpus


def code_version() -> str:
    """``git describe --always --dirty`` of the source tree, else the package version."""
    import gelus

    source = Path(gelus.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=source,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return f"{gelus.__version__}+git.{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return gelus.__version__


def environment_metadata(device: str, threads: int) -> dict[str, Any]:
    """Code version, package versions, device and threads, stamped on every run."""
    import numpy
    import torch

    return {
        "code_version": code_version(),
        "packages": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": numpy.__version__,
        },
        "device": device,
        "threads": threads,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }
