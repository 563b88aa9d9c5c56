"""Where runs compute: the device names, the default number of workers, GPUs taken in turn.

The CUDA side is shown on the CPU through torch's device count (monkeypatched); the workers'
actual ``torch.cuda.set_device`` runs on the GPU machine (test_runs_on_cuda.py).
"""

import multiprocessing
import os

import pytest
import torch

from gelus.experiments.device import WORKERS_PER_GPU, default_workers, local_device
from gelus.experiments.sweep import claim_gpu


def test_an_unknown_device_lists_the_valid_ones():
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        local_device("tpu")


def test_cuda_without_a_gpu_says_what_to_use(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert local_device("auto") == "cpu"
    with pytest.raises(ValueError, match="--device auto or cpu"):
        local_device("cuda")


def test_cpu_runs_take_one_worker_per_available_core():
    assert default_workers("cpu") == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("gpus", [1, 2, 64])
def test_cuda_runs_take_a_few_workers_per_gpu_but_not_more_than_the_cores(monkeypatch, gpus):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    cores = len(os.sched_getaffinity(0))
    assert default_workers("cuda") == min(cores, WORKERS_PER_GPU * gpus)


def test_workers_take_the_gpus_in_turn():
    turn = multiprocessing.get_context("spawn").Value("i", 0)
    assert [claim_gpu(turn, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert claim_gpu(turn, 0) == 0  # no GPU visible: device 0, and CUDA's own error follows
