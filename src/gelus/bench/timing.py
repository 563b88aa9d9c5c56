"""Timing utilities shared by the benchmark commands.

Absolute times drift by 15 % or more between runs on a shared machine, so a benchmark here reports
*ratios* against a baseline measured in the same process. Every candidate is timed once per round,
round-robin, so that slow drifts (another process waking up, thermal or frequency changes) hit all
candidates alike; the figure kept is the median over rounds. A comparison against a baseline
reads the *paired* ratios (each round's row ÷ the same round's baseline, timed back to back):
:func:`paired_ratios`, :func:`spread` and :func:`verdict` are the one place that reads them.
"""

import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "TARGETS_LEGEND",
    "Timer",
    "calls_for",
    "format_table",
    "interleaved_rounds",
    "median",
    "paired_ratios",
    "parse_sizes",
    "spread",
    "time_calls",
    "verdict",
]

# (fn, calls) -> seconds per call of ``calls`` back-to-back calls of fn
Timer = Callable[[Callable[[], object], int], float]


def time_calls(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn()``, averaged over ``calls`` back-to-back calls."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls * 1e-9


def calls_for(
    fn: Callable[[], object],
    min_seconds: float,
    max_calls: int = 10_000,
    warm_up: bool = True,
    timer: Timer = time_calls,
) -> int:
    """How many back-to-back calls of ``fn`` take at least ``min_seconds``.

    ``fn`` is called once first as a warm-up (first-touch page faults, lazy initialisation, caches)
    unless ``warm_up=False`` says the caller did it, then timed for one call, then for the
    estimated count until the calls add up to ``min_seconds``, by ``timer`` (the wall clock
    unless given, e.g. a device's clock).
    """
    if warm_up:
        fn()
    calls = 1
    seconds = timer(fn, 1)
    while seconds * calls < min_seconds and calls < max_calls:
        calls = min(max_calls, max(calls + 1, math.ceil(min_seconds / max(seconds, 1e-9))))
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
    ``min_seconds``, found with :func:`calls_for`). The starting candidate rotates from round to
    round so that no candidate always runs right after the same neighbour. ``timer`` measures
    one candidate's calls (the wall clock unless given, e.g. CUDA events on the device).
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
    """The median of ``values`` (the middle one, or the mean of the two middle ones)."""
    return statistics.median(values)


def paired_ratios(times: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Round by round, a row's time ÷ its reference's in the same round: interleaving timed the
    two back to back, so each ratio is free of the slow drifts between rounds."""
    return [t / r for t, r in zip(times, reference, strict=False) if r > 0]


def spread(values: Sequence[float]) -> dict[str, float | list[float]]:
    """The median of ``values`` with the middle half (quartiles, inclusive method) and the values
    themselves: ``{"value", "q1", "q3", "rounds"}``, empty without values. One value is its own
    spread (quartiles need two)."""
    if not values:
        return {}
    q1, _, q3 = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else list(values) * 3
    )
    return {"value": median(values), "q1": q1, "q3": q3, "rounds": list(values)}


TARGETS_LEGEND = (
    "A timing target's value is the median over rounds of the row's time ÷ the reference's in "
    "the same round, with the middle half of those ratios in brackets: ✓ when at least three "
    "rounds in four meet the limit, ✗ when at least three in four miss it, ≈ when the limit "
    "falls inside the middle half (met in some rounds, not reliably)."
)


def verdict(row: Mapping[str, object]) -> str:
    """✓, ✗ or ≈ for a target row ``{"value", "limit"[, "q1", "q3"]}`` (see TARGETS_LEGEND);
    a row without quartiles is judged on its value alone, one without a value or limit is —."""
    value, limit = row.get("value"), row.get("limit")
    if value is None or limit is None:
        return "—"
    tolerance = limit * (1 + 1e-9)
    low, high = row.get("q1", value), row.get("q3", value)
    if high <= tolerance:
        return "✓"
    return "✗" if low > tolerance else "≈"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (pipes, a header rule, columns padded to line up), ready to paste."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            + " |"
        )

    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def parse_sizes(text: str) -> list[int]:
    """'2^16,2^20,1000' -> [65536, 1048576, 1000]; raises CommandError on anything else."""
    from gelus.experiments.errors import CommandError

    sizes = []
    for token in filter(None, (t.strip() for t in text.split(","))):
        match = re.fullmatch(r"2\s*(?:\^|\*\*)\s*(\d+)|(\d+)", token)
        if not match:
            raise CommandError(
                f"size {token!r} is not an element count; write e.g. 2^20 or 1048576"
            )
        size = 2 ** int(match[1]) if match[1] else int(match[2])
        if not 2 <= size <= 2**28:
            raise CommandError(f"size {token} is out of range; use 2 to 2^28 elements")
        sizes.append(size)
    if not sizes:
        raise CommandError("--sizes is empty; write e.g. --sizes 2^16,2^20")
    return sizes
