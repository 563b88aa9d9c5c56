"""Tables and target verdicts of ``gelus bench kernels --device cuda``: pure functions of the
:class:`~gelus.bench.kernels_cuda.Result` records and host rows that the measurement returns.

Issue 30's targets (item 6), on device time, forward + backward, paired rounds:

- every member ≤ 1.05× ``F.gelu`` at 2^28 and ≤ 1.10× at 2^24, fp32 and bf16; the Φ-based
  members in fp32 ≤ 1.10× at both;
- ``bias_gelu`` ≤ 0.8× ``F.gelu(x + b)`` with db, GEGLU ≤ 0.8× ``a * F.gelu(b)``, at 2^20 and up;
- the per-channel members (tensor-β Swish, generalized GELU, bias-GELU) ≤ 2× ``F.gelu`` at 2^16
  and 2^20, their host time beside;
- their host time per forward + backward, Triton launches stubbed, ≤ 40 µs.
"""

import math

from gelus.bench.kernels_cuda import MEMBERS, Result, size_label
from gelus.bench.timing import TARGETS_LEGEND, format_table, median, spread, verdict

__all__ = ["HOST_LIMIT_US", "format_host", "format_results", "format_targets", "target_rows"]

HOST_LIMIT_US = 40.0
_BY_KEY = {m.key: m for m in MEMBERS}
_INPUTS = {"normal": "N(0, 1)", "uniform": "uniform [−20, 20]"}


def _ratio_target(target: str, result: Result, against: str, limit: float) -> dict:
    member = _BY_KEY[result.key]
    return {
        "target": target,
        "key": result.key,
        "label": member.label,
        "dtype": result.dtype,
        "inputs": result.inputs,
        "size": result.size,
        "limit": limit,
        "value": None,
    } | spread(result.ratio(against))


def target_rows(results: list[Result], host: list[dict]) -> list[dict]:
    """One row per target, member, dtype, inputs and size measured: value, quartiles, limit."""
    rows = []
    for result in results:
        member = _BY_KEY[result.key]
        if result.size in (1 << 24, 1 << 28):
            wide = result.size == 1 << 24 or (member.phi and result.dtype == "float32")
            rows.append(_ratio_target("member ÷ F.gelu", result, "F.gelu", 1.10 if wide else 1.05))
        if member.key in ("bias-gelu", "geglu") and result.size >= 1 << 20:
            rows.append(_ratio_target("fused ÷ the torch it replaces", result, "torch", 0.8))
        if member.per_channel and result.size in (1 << 16, 1 << 20):
            row = _ratio_target("per-channel member ÷ F.gelu", result, "F.gelu", 2.0)
            row["host_us"] = median(result.host["member"]) * 1e6
            rows.append(row)
    for entry in host:
        if _BY_KEY[entry["key"]].per_channel:
            stubbed = [seconds * 1e6 for seconds in entry["stubbed"]]
            rows.append(
                {
                    "target": "host µs per fwd+bwd, Triton launches stubbed",
                    "key": entry["key"],
                    "label": entry["label"],
                    "dtype": entry["dtype"],
                    "inputs": "normal",
                    "size": entry["size"],
                    "limit": HOST_LIMIT_US,
                    "value": None,
                }
                | spread(stubbed)
            )
    return rows


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.1f}"


def _cell(row: dict) -> str:
    if row["value"] is None:
        return "not measured"
    cell = f"≤{_number(row['limit'])}: {_number(row['value'])} {verdict(row)}"
    cell += f" ({_number(row['q1'])}–{_number(row['q3'])})"
    if "host_us" in row:
        cell += f", host {row['host_us']:.0f} µs"
    return cell


def format_targets(rows: list[dict]) -> str:
    """One table per target: a line per member × dtype × inputs, a column per size."""
    blocks = []
    for target in dict.fromkeys(row["target"] for row in rows):
        selected = [row for row in rows if row["target"] == target]
        sizes = sorted({row["size"] for row in selected})
        lines: dict[tuple, dict[int, str]] = {}
        for row in selected:
            line = (row["label"], row["dtype"], _INPUTS.get(row["inputs"], row["inputs"]))
            lines.setdefault(line, {})[row["size"]] = _cell(row)
        table = format_table(
            ["row", "dtype", "inputs", *map(size_label, sizes)],
            [[*line, *(cells.get(s, "—") for s in sizes)] for line, cells in lines.items()],
        )
        blocks.append(f"**{target}**\n\n{table}")
    host = (
        "The host target's value is the median over calls, with their middle half, judged "
        "the same way."
    )
    return "\n\n".join(blocks) + "\n\n" + TARGETS_LEGEND + " " + host


_RESULT_HEADERS = (
    "row", "device µs", "÷ F.gelu", "torch it replaces", "its µs", "÷ it", "host µs",
    "its host µs", "× copy rate", "value ulp", "grad ulp",
)  # fmt: skip
_RESULTS_NOTE = (
    "device µs: CUDA graph replay between CUDA events (median of rounds); † timed eagerly "
    "between events (the call could not be captured: the larger of host and device time). "
    "÷: median of the rounds' paired ratios. host µs: wall clock of one eager call, the "
    "device drained before it (median). × copy rate: the bytes the member must move "
    "(÷ x's: 5, GEGLU 4) over its time, as a fraction of y.copy_(x)'s rate. ulp: against "
    "float64 on the first 4 M elements; n/a: no column for that row."
)


def _result_row(r: Result) -> list[str]:
    """One member's cells under :data:`_RESULT_HEADERS`."""
    member = _BY_KEY[r.key]
    device = _us(r.seconds()) + ("" if r.method in ("graph", "wall") else " †")
    against = median(r.ratio("torch")) if "torch" in r.rounds else None
    bandwidth = None
    if r.copy_seconds and r.seconds():
        bandwidth = member.moved * r.copy_seconds / (2 * r.seconds())
    return [
        member.label,
        device,
        _number(median(r.ratio("F.gelu"))),
        member.composition_label,
        _us(r.seconds("torch")) if against else "—",
        _number(against) if against else "—",
        _us(median(r.host["member"])),
        _us(median(r.host["torch"])) if "torch" in r.host else "—",
        _number(bandwidth),
        _number(r.value_ulp),
        _number(r.slope_ulp),
    ]


def format_results(results: list[Result]) -> str:
    """One Markdown table per size × dtype × input kind, with F.gelu's and the copy's times."""
    blocks = []
    cases = dict.fromkeys((r.size, r.dtype, r.inputs) for r in results)
    for size, dtype, inputs in cases:
        selected = [r for r in results if (r.size, r.dtype, r.inputs) == (size, dtype, inputs)]
        first = selected[0]
        gelu = median([t for r in selected for t in r.rounds.get("F.gelu", [])])
        gelu_host = median(first.host["F.gelu"])
        head = (
            f"{size_label(size)} elements, {dtype}, inputs {_INPUTS.get(inputs, inputs)}: "
            f"F.gelu fwd+bwd {_us(gelu)} µs device, {_us(gelu_host)} µs host; "
            f"y.copy_(x) {_us(first.copy_seconds)} µs"
        )
        table = format_table(_RESULT_HEADERS, [_result_row(r) for r in selected])
        uncaptured = [
            f"† {_BY_KEY[r.key].label}: {r.method}"
            for r in selected
            if r.method not in ("graph", "wall")
        ]
        blocks.append("\n\n".join([head, table, *uncaptured]))
    return "\n\n".join(blocks) + "\n\n" + _RESULTS_NOTE


def format_host(rows: list[dict]) -> str:
    """The host-time table: stubbed launches (with quartiles), real launches where measured."""
    table_rows = []
    for row in rows:
        stubbed = spread([seconds * 1e6 for seconds in row["stubbed"]])
        launched = median(row["launched"]) * 1e6 if "launched" in row else None
        judged = {
            "value": stubbed["value"],
            "limit": HOST_LIMIT_US,
            "q1": stubbed["q1"],
            "q3": stubbed["q3"],
        }
        mark = verdict(judged) if _BY_KEY[row["key"]].per_channel else "—"
        table_rows.append(
            [
                row["label"],
                str(row["launches"]),
                f"{stubbed['value']:.1f} ({stubbed['q1']:.1f}–{stubbed['q3']:.1f})",
                "n/a" if launched is None else f"{launched:.1f}",
                mark,
            ]
        )
    return format_table(
        [
            "row",
            "Triton launches",
            "host µs, launches stubbed (middle half)",
            "host µs, launched",
            f"per-channel ≤ {HOST_LIMIT_US:.0f} µs",
        ],
        table_rows,
    )
