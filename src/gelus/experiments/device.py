"""Where a run computes: the one place that turns "auto" / "cpu" / "cuda" into a device, and the
stamp of the machine and code (``environment_metadata``) every run records.

The driver resolves the device once (here, or through an executor's ``resolve_device`` when the
jobs run on a cluster) and stamps it on every job; a trainer only checks that it is there.
"""

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "DEVICES",
    "WORKERS_PER_GPU",
    "code_version",
    "default_workers",
    "environment_metadata",
    "local_device",
    "memory_of",
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
