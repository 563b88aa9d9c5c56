"""Timing utilities shared by the benchmark commands.

Absolute times drift by 15 % or more between runs on a shared machine, so a benchmark here reports
*ratios* against a baseline measured in the same process. The measurement is the harness's one
timer (:mod:`gelus.experiments.timing`, re-exported here): every candidate is timed once per
round, round-robin, so that slow drifts (another process waking up, thermal or frequency
changes) hit all candidates alike; the figure kept is the median over rounds. A comparison
against a baseline reads the *paired* ratios (each round's row ÷ the same round's baseline,
timed back to back): :func:`paired_ratios`, :func:`spread` and :func:`verdict` are the one place
that reads them.
"""

import re
import statistics
from collections.abc import Mapping, Sequence

from gelus.experiments.timing import Timer, calls_for, interleaved_rounds, median, time_calls

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
