"""The harness's one timer: the benchmarks, the step times and the planner's prices read it.

A measurement warms a function up, sizes how many back-to-back calls one timing takes (enough to
rise above the clock's and the scheduler's noise), then times every candidate once per round,
round-robin, the starting candidate rotating, so that slow drifts (another process waking up,
thermal or frequency changes) hit all candidates alike; the figure kept is the median over
rounds. Its callers differ only in their settings:

* ``gelus bench`` (:mod:`gelus.bench.timing`): a warm-up call, then calls re-timed until they add
  up to ``min_seconds`` (:func:`calls_for`), on the wall clock or a device's clock;
* the step times (:mod:`gelus.experiments.step_times`): the warm-up epoch itself timed and its
  estimate trusted (``refine=False``): an epoch is long, and re-timing it costs a round;
* the planner's prices (:mod:`gelus.experiments.budget`): a few warm-ups (compilation, CUDA
  graphs), then one call per round with a CUDA device drained around it (:func:`median_seconds`).
"""

import functools
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "Timer",
    "calls_for",
    "interleaved_rounds",
    "median",
    "median_seconds",
    "time_calls",
    "wall_clock",
]

# (fn, calls) -> seconds per call of ``calls`` back-to-back calls of fn
Timer = Callable[[Callable[[], object], int], float]


def time_calls(
    fn: Callable[[], object], calls: int, wait: Callable[[], object] | None = None
) -> float:
    """Seconds per call of ``fn()``, averaged over ``calls`` back-to-back calls on the wall clock;
    ``wait()`` (a device's synchronize) is called before the first call and inside the timed
    region after the last."""
    if wait is not None:
        wait()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if wait is not None:
        wait()
    return (time.perf_counter() - start) / calls


def wall_clock(device: Any) -> Timer:
    """:func:`time_calls` on ``device``: a CUDA device is drained before the calls and waited for
    after them (its work is queued, not done, when a call returns); the plain wall clock
    elsewhere."""
    import torch

    if torch.device(device).type != "cuda":
        return time_calls
    return functools.partial(time_calls, wait=torch.cuda.synchronize)


def calls_for(
    fn: Callable[[], object],
    min_seconds: float,
    max_calls: int = 10_000,
    warm_up: bool = True,
    timer: Timer = time_calls,
    refine: bool = True,
) -> int:
    """How many back-to-back calls of ``fn`` take at least ``min_seconds`` (at most ``max_calls``).

    ``fn`` is called once first as a warm-up (first-touch page faults, lazy initialisation, caches)
    unless ``warm_up=False`` says the caller did it or wants the first timed call to be the
    warm-up, then timed for one call by ``timer``, then for the estimated count
    ``⌈min_seconds / seconds per call⌉`` until the calls add up to ``min_seconds``; with
    ``refine=False`` the first estimate is kept without timing it.
    """
    if warm_up:
        fn()
    calls = 1
    seconds = timer(fn, 1)
    while seconds * calls < min_seconds and calls < max_calls:
        calls = min(max_calls, max(calls + 1, math.ceil(min_seconds / max(seconds, 1e-9))))
        if not refine:
            break
        seconds = timer(fn, calls)
    return calls


def interleaved_rounds(
    candidates: Mapping[str, Callable[[], object]],
    rounds: int,
    min_seconds: float = 5e-3,
    calls: Mapping[str, int] | None = None,
    timer: Timer = time_calls,
) -> dict[str, list[float]]:
    """Time every candidate once per round, round-robin; returns seconds per call, one per round.

    Each measurement repeats the candidate ``calls[name]`` times (by default enough calls for
    ``min_seconds``, found with :func:`calls_for`, warm-up included). The starting candidate
    rotates from round to round so that no candidate always runs right after the same neighbour.
    ``timer`` measures one candidate's calls (the wall clock unless given, e.g. CUDA events).
    """
    if rounds < 1:
        raise ValueError(f"rounds={rounds} must be at least 1")
    names = list(candidates)
    calls = dict(calls or {})
    for name in names:
        if name not in calls:
            calls[name] = calls_for(candidates[name], min_seconds, timer=timer)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        start = round_index % len(names) if names else 0
        for name in names[start:] + names[:start]:
            times[name].append(timer(candidates[name], calls[name]))
    return times


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the middle one, or the mean of the two middle ones): the figure
    a timing keeps of its rounds."""
    return statistics.median(values)


def median_seconds(
    fn: Callable[[], object], rounds: int, warm_ups: int = 1, timer: Timer = time_calls
) -> float:
    """Seconds of one call of ``fn``: ``warm_ups`` untimed calls (allocation, autotuning,
    compilation, CUDA graph recording), then ``rounds`` rounds of one call each; the median."""
    for _ in range(warm_ups):
        fn()
    return median(interleaved_rounds({"fn": fn}, rounds, calls={"fn": 1}, timer=timer)["fn"])
