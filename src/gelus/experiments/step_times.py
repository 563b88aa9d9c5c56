"""Each activation's time per training step, measured interleaved, for the report's cost columns.

The sweep's own epoch times (the ``train seconds`` records) are taken under its load: workers
share cores, memory bandwidth and caches, and a job's time depends on what ran beside it. A reader
weighing quality per second needs every activation's cost under the same conditions, so after a
sweep of an engine whose steps are timed (``EnginePlugin.steps_timed``: the transformers)
``gelus run`` builds one engine per activation (seed 0, the first lr, the sweep's
config and data, on its device) and, round by round, lets each take ``steps`` optimizer steps in
turn (repeated until a round lasts half a second; the starting activation rotating), in this one
process at one torch thread on a CPU, as a worker runs. The median over rounds is the activation's seconds per step; every round is stored in
the records' ``step_times`` table beside the runs it prices.
"""

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gelus.experiments import timing
from gelus.experiments.activation_spec import ActivationSpec

__all__ = [
    "ROUNDS",
    "STEPS",
    "measure_jobs",
    "measure_step_times",
    "time_steps",
]

ROUNDS = 5  # interleaved rounds; the report takes the median
STEPS = 5  # optimizer steps per activation per round (repeated up to MIN_ROUND_SECONDS)
MIN_ROUND_SECONDS = 0.5


def time_steps(run: Any, jobs: Sequence[Any], say: Callable[[str], None] | None = None) -> None:
    """Time the step of every activation of ``run`` (a resolved :class:`~gelus.experiments.run.Run`)
    on its ``jobs`` (``plan.step_time_jobs``) together, as interleaving needs them in one
    measurement, and store the rounds in its records; nothing where its engine's steps are not
    timed, or where the records held all their timings at this config and device already
    (``run.timed``: a resumed sweep). ``say`` announces the measurement."""
    from gelus.experiments.records import RecordStore

    if not run.plugin.steps_timed:  # its engine's step is not "one optimizer step of a run"
        return
    if torch.device(run.device).type == "cuda" and not torch.cuda.is_available():
        print(f"{run.name}: no step times: this machine has no CUDA device (the runs' was cuda)")
        return  # the runs went to a cluster's GPUs
    if {spec.label for spec in run.activations} <= run.timed:
        return
    if say is not None:
        say(
            f"{run.name}: timing each activation's step ({ROUNDS} interleaved rounds of {STEPS} "
            f"steps{', one thread' if run.device == 'cpu' else ''})"
        )
    times = measure_jobs(jobs, run.data, run.device)
    threads = 1 if torch.device(run.device).type == "cpu" else torch.get_num_threads()
    store = RecordStore(run.out_dir)
    try:
        store.add_step_times(run.name, run.config_hash, run.device, threads, times)
    finally:
        store.close()


def measure_step_times(
    experiment: str,
    config: Any,
    activations: Sequence[ActivationSpec],
    data: Any,
    device: str | torch.device = "cpu",
    *,
    rounds: int = ROUNDS,
    steps: int = STEPS,
) -> dict[str, list[float]]:
    """``{activation label: seconds per step in each round}``: ``steps`` optimizer steps of each
    activation's engine per round, ``rounds`` rounds, interleaved (one warm-up epoch first), on
    the planner's jobs of ``plan.timed_config`` (:func:`measure_jobs`).

    Where the sweep stacks its runs (``train.stack``), the stacked job of all its seeds × lrs is
    timed and the time divided by its runs: seconds per run-step.
    """
    from gelus.experiments.plan import job_engine, plan_jobs, timed_config

    device = str(torch.device(device))
    timed, n = timed_config(config, job_engine(config, device)), steps * config.train.batch_size
    jobs = [
        job
        for spec in activations
        for job in plan_jobs(experiment, timed, [spec], train_size=n, out_dir=".", device=device)
    ]
    return measure_jobs(jobs, data, device, rounds=rounds, steps=steps)


def measure_jobs(
    jobs: Sequence[Any],
    data: Any,
    device: str | torch.device = "cpu",
    *,
    rounds: int = ROUNDS,
    steps: int = STEPS,
) -> dict[str, list[float]]:
    """``{activation label: seconds per step in each round}`` of ``jobs`` (one per activation,
    ``steps`` steps an epoch): ``rounds`` rounds, interleaved, each job's time divided by its
    runs. On a CPU the measurement runs at one torch thread, as a sweep's worker does, and
    restores the caller's setting; on CUDA each epoch ends in a ``.item()``, which waits for the
    device."""
    from gelus.experiments.config import TRAINERS

    if rounds < 1 or steps < 1:
        raise ValueError(f"rounds={rounds} and steps={steps} must both be at least 1")
    device = torch.device(device)
    epoch, members = {}, {}
    threads = torch.get_num_threads()
    try:
        if device.type == "cpu":
            torch.set_num_threads(1)
        for job in jobs:
            engine = TRAINERS[job.engine](job, data, device)
            epoch[job.activation.label] = lambda engine=engine: engine.train_epoch(1)
            members[job.activation.label] = len(job.members)
        times = _interleaved(epoch, rounds, steps)
        return {label: [t / members[label] for t in ts] for label, ts in times.items()}
    finally:
        torch.set_num_threads(threads)


def _interleaved(epoch: dict[str, Any], rounds: int, steps: int) -> dict[str, list[float]]:
    """Seconds per step of each ``epoch[label]()`` (``steps`` steps), one figure per round, by the
    harness's timer (:func:`gelus.experiments.timing.interleaved_rounds`: round-robin, the
    starting label rotating).

    A timed warm-up epoch first (first-touch allocation, lazy initialisation) also sizes each
    round: epochs are repeated until a round lasts ``MIN_ROUND_SECONDS``, as a small model's few
    steps are otherwise within the timer's and the scheduler's noise.
    """
    # at most as many repeats as 1 µs epochs fill a round
    most = max(1, math.ceil(MIN_ROUND_SECONDS / 1e-6))
    repeats = {
        label: timing.calls_for(fn, MIN_ROUND_SECONDS, most, warm_up=False, refine=False)
        for label, fn in epoch.items()
    }
    times = timing.interleaved_rounds(epoch, rounds, calls=repeats)
    return {label: [t / steps for t in ts] for label, ts in times.items()}
