"""The harness's one timer: the bench, the step times and the planner's prices all measure through
:mod:`gelus.experiments.timing`, each with its own warm-up and sizing, on one algorithm."""

import pytest

from gelus.bench import timing as bench_timing
from gelus.experiments import budget, step_times, timing


@pytest.fixture
def clock(monkeypatch):
    """A wall clock that advances 1 s per reading."""
    ticks = iter(range(100_000))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))


@pytest.fixture
def rounds(monkeypatch):
    """Every ``interleaved_rounds`` measurement: (candidates, rounds, calls)."""
    seen = []
    measure = timing.interleaved_rounds

    def spy(candidates, rounds, min_seconds=5e-3, calls=None, timer=timing.time_calls):
        seen.append((list(candidates), rounds, dict(calls or {})))
        return measure(candidates, rounds, min_seconds, calls, timer)

    monkeypatch.setattr(timing, "interleaved_rounds", spy)
    return seen


def test_the_bench_reads_the_one_timer():
    for name in ("Timer", "calls_for", "interleaved_rounds", "median", "time_calls"):
        assert getattr(bench_timing, name) is getattr(timing, name), name


def test_the_step_times_and_the_prices_measure_through_the_one_timer(clock, rounds, monkeypatch):
    monkeypatch.setattr(step_times, "MIN_ROUND_SECONDS", 3.0)
    calls = {"a": 0, "b": 0, "priced": 0}

    def counting(label):
        return lambda: calls.__setitem__(label, calls[label] + 1)

    per_step = step_times._interleaved({"a": counting("a"), "b": counting("b")}, 2, steps=4)
    # a timed 1 s warm-up sizes a round to 3 epochs; a round reads the clock 1 s apart around them
    assert per_step == {"a": [1 / 12, 1 / 12], "b": [1 / 12, 1 / 12]}
    assert rounds[-1] == (["a", "b"], 2, {"a": 3, "b": 3})
    assert budget._median_seconds(counting("priced"), 3, "cpu", warmups=2) == 1.0
    assert rounds[-1] == (["fn"], 3, {"fn": 1})
    assert calls == {"a": 1 + 2 * 3, "b": 1 + 2 * 3, "priced": 2 + 3}


def test_sizing_refines_its_estimate_unless_told_to_trust_it(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def warming():  # the first call costs 1 s, every later one 0.25 s
        now[0] += 1.0 if now[0] == 0 else 0.25

    # trusted: the first (cold) call's 1 s says 3 calls fill 3 s
    assert timing.calls_for(warming, 3.0, warm_up=False, refine=False) == 3
    now[0] = 0.0
    # refined: 3 calls then take 0.75 s, so 12 are timed, and their 3 s suffice
    assert timing.calls_for(warming, 3.0, warm_up=False) == 12
    now[0] = 0.0
    assert timing.calls_for(warming, 3.0, max_calls=5) == 5  # warmed up first: 0.25 s a call


def test_a_cuda_clock_waits_for_the_device_around_the_calls(monkeypatch):
    import torch

    order = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: order.append("wait"))
    timer = timing.wall_clock("cuda")
    assert timer(lambda: order.append("call"), 2) >= 0
    assert order == ["wait", "call", "call", "wait"]
    assert timing.wall_clock("cpu") is timing.time_calls
