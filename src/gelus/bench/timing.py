"""Timing utilities shared by the benchmark commands.

Absolute times drift by 15 % or more between runs on a shared machine, so a benchmark here reports
*ratios* against a baseline measured in the same process. Every candidate is timed once per round,
round-robin, so that slow drifts (another process waking up, thermal or frequency changes) hit all
candidates alike; the figure kept is the median over rounds.
"""

import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "calls_for",
    "format_table",
    "interleaved_rounds",
    "median",
    "parse_sizes",
    "time_calls",
]


def time_calls(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn()``, averaged over ``calls`` back-to-back calls."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls * 1e-9


def calls_for(
    fn: Callable[[], object], min_seconds: float, max_calls: int = 10_000, warm_up: bool = True
) -> int:
    """How many back-to-back calls of ``fn`` take at least ``min_seconds``.

    ``fn`` is called once first as a warm-up (first-touch page faults, lazy initialisation, caches)
    unless ``warm_up=False`` says the caller did it, then timed for one call, then for the
    estimated count until the calls add up to ``min_seconds``.
    """
    if warm_up:
        fn()
    calls = 1
    seconds = time_calls(fn, 1)
    while seconds * calls < min_seconds and calls < max_calls:
        calls = min(max_calls, max(calls + 1, math.ceil(min_seconds / max(seconds, 1e-9))))
        seconds = time_calls(fn, calls)
    return calls


def interleaved_rounds(
    candidates: Mapping[str, Callable[[], object]],
    rounds: int,
    min_seconds: float = 5e-3,
    calls: Mapping[str, int] | None = None,
) -> dict[str, list[float]]:
    """Time every candidate once per round, round-robin; returns seconds per call, one per round.

    Each measurement repeats the candidate ``calls[name]`` times (by default enough calls for
    ``min_seconds``, found with :func:`calls_for`). The starting candidate rotates from round to
    round so that no candidate always runs right after the same neighbour.
    """
    if rounds < 1:
        raise ValueError(f"rounds={rounds} must be at least 1")
    names = list(candidates)
    calls = dict(calls or {})
    for name in names:
        if name not in calls:
            calls[name] = calls_for(candidates[name], min_seconds)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        start = round_index % len(names) if names else 0
        for name in names[start:] + names[:start]:
            times[name].append(time_calls(candidates[name], calls[name]))
    return times


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the middle one, or the mean of the two middle ones)."""
    return statistics.median(values)


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
