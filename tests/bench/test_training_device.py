"""`gelus bench training --device`: the device bench's code path, run on the CPU at small sizes.

Its figures are for a GPU (docs/HARNESS.md); here the rows, the FLOP count and the shared-device
measurement are checked to be computed, against independent counts where there is one.
"""

import argparse
import itertools

import torch

from gelus.bench.training_device import (
    _variants,
    main,
    matmul_rate,
    training_flops_per_image,
)
from gelus.experiments import PRESETS
from gelus.experiments.budget import workload


def test_mlp_flops_per_sample_are_the_matmul_count():
    work = workload(PRESETS["twitter-pos"], quick=True)
    sizes = (150, *work.config.model.hidden, 25)
    matmul = sum(2 * a * b for a, b in itertools.pairwise(sizes))
    # forward once; backward: every weight gradient, and every input gradient but the first
    # layer's (the data need none)
    expected = 3 * matmul - 2 * sizes[0] * sizes[1]
    assert training_flops_per_image(work, torch.device("cpu")) == expected


def test_matmul_rate_is_a_positive_flop_rate():
    assert 1e8 < matmul_rate(torch.device("cpu"), torch.float32, n=256, repeats=2) < 1e15


def test_the_device_bench_prints_every_row_and_the_shared_ratio(capsys):
    args = argparse.Namespace(
        device="cpu",
        experiments=["twitter-pos"],
        repeats=1,
        shared=2,
        plan=False,
        compile_mode="none",
    )
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ceiling: torch.mm" in out and "twitter-pos" in out
    assert "2 runs of twitter-pos fp32 sharing the device: aggregate" in out


def test_each_cnn_variant_reaches_the_jobs_the_engines_read():
    # The engines read job.config, not the workload's: a variant set on the workload alone timed
    # the preset's default four times over (seen on the GPU: fp32, bf16, compiled all equal).
    rows = _variants("cifar10-allconv", PRESETS["cifar10-allconv"], "reduce-overhead")
    seen = set()
    for label, amp, work in rows:
        for job in work.planned:
            assert (job.config.cnn.amp_dtype, job.config.cnn.compile) == (
                work.config.cnn.amp_dtype,
                work.config.cnn.compile,
            ), label
        seen.add((amp, work.planned[0].config.cnn.compile))
    assert seen == {
        (None, None),
        ("bf16", None),
        (None, "reduce-overhead"),
        ("bf16", "reduce-overhead"),
    }
