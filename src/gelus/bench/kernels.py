"""``gelus bench kernels``: speed and saved memory of every member of the family against torch.

Each member is timed forward (allocating, and with a preallocated output where its API takes
``out=``) and forward + backward, eager and under ``torch.compile``, at a few sizes. Times are
reported as ratios to torch's ``F.gelu`` of the same mode and to a plain copy ``y.copy_(x)``, all
measured in the same process with rounds interleaved across every candidate of a size (see
:mod:`gelus.bench.timing`). The bytes an op keeps alive for backward are counted with
``torch.autograd.graph.saved_tensors_hooks`` (distinct storages, as a multiple of the input's bytes).
"""

import inspect
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus.bench.timing import (
    TARGETS_LEGEND,
    calls_for,
    interleaved_rounds,
    median,
    paired_ratios,
    spread,
    verdict,
)

__all__ = ["MEASURES", "Candidate", "candidates", "run", "saved_bytes"]

MEASURES = ("fwd", "fwd_out", "fwd_bwd")  # allocating forward, forward into out=, forward+backward
# partial(gelu, approximate=...) rows share gelu's code object, each compiled for grad and no-grad
# inputs: leave room for all of them, and fail loudly rather than fall back to eager silently.
_DYNAMO_SETTINGS = {"recompile_limit": 64, "fail_on_recompile_limit_hit": True}
LAST_DIM = 1024  # inputs are [n / 1024, 1024]; bias-GELU's bias and GEGLU's halves run along it


@dataclass(frozen=True)
class Candidate:
    """One row of the benchmark: a function of ``(x, *params)`` and what it is compared with."""

    key: str  # name for --members
    label: str  # row label in the tables
    function: Callable[..., Tensor]
    reference: str  # key of the torch F.gelu row of the same mode ("" for the copy)
    kind: str = "member"  # "member" (gelus' public API) | "baseline" (torch, naive compositions)
    params: tuple[str, ...] = ()  # learnable inputs, by name: "bias", "mu", "sigma"
    doubled_input: bool = False  # GEGLU: the input's last dim is twice the output's
    out_function: Callable[..., Tensor] | None = None  # f(x, *params, out=y), if the API has it
    backward: bool = True
    compile: bool = True


def _naive_sigmoid_gelu(x: Tensor) -> Tensor:
    """x·σ(1.702x) in plain torch ops."""
    return x * torch.sigmoid(1.702 * x)


def _naive_generalized_gelu(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """x·Φ((x − μ)/σ) in plain torch ops, Φ(z) = ½·erfc(−z/√2)."""
    return x * 0.5 * torch.special.erfc(-(x - mu) / (sigma * math.sqrt(2.0)))


def _torch_gelu(x: Tensor) -> Tensor:
    """torch's exact GELU (a Python function, so that torch.compile can trace it)."""
    return F.gelu(x)


def _torch_gelu_tanh(x: Tensor) -> Tensor:
    """torch's tanh-form GELU."""
    return F.gelu(x, approximate="tanh")


def _torch_silu(x: Tensor) -> Tensor:
    """torch's SiLU x·σ(x)."""
    return F.silu(x)


def _copy_into(x: Tensor, *, out: Tensor) -> Tensor:
    return out.copy_(x)


def _torch_gelu_into(x: Tensor, approximate: str = "none", *, out: Tensor) -> Tensor:
    return F.gelu(x, approximate=approximate, out=out)


def _takes(function: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _baselines() -> list[Candidate]:
    """The rows every ratio is taken against: a copy, torch's GELUs and SiLU, naive compositions."""
    return [
        Candidate("copy", "copy (clone / y.copy_(x))", torch.clone, "", "baseline",
                  out_function=_copy_into, backward=False, compile=False),
        Candidate("torch-gelu", "torch F.gelu", _torch_gelu, "torch-gelu", "baseline",
                  out_function=_torch_gelu_into),
        Candidate("torch-gelu-tanh", "torch F.gelu(tanh)", _torch_gelu_tanh,
                  "torch-gelu-tanh", "baseline",
                  out_function=partial(_torch_gelu_into, approximate="tanh")),
        Candidate("torch-silu", "torch F.silu", _torch_silu, "torch-gelu", "baseline"),
        Candidate("naive-sigmoid", "naive x·σ(1.702x)", _naive_sigmoid_gelu, "torch-gelu",
                  "baseline"),
        Candidate("naive-generalized", "naive x·Φ((x−μ)/σ)", _naive_generalized_gelu,
                  "torch-gelu", "baseline", params=("mu", "sigma")),
    ]  # fmt: skip


def candidates() -> list[Candidate]:
    """Every row the benchmark knows, references first; then each member's rows, as its record
    in ``gelus._members`` gives them (the function, its arguments, learnable inputs, reference)."""
    from gelus import _members
    from gelus import functional as G

    def member(row: _members.Bench, name: str) -> Candidate:
        function = getattr(G, name)
        bound = partial(function, **row.kwargs) if row.kwargs else function
        out = partial(function, **row.kwargs) if _takes(function, "out") else None
        return Candidate(
            row.key, row.label, bound, row.reference, "member", row.params, row.doubled_input, out
        )

    rows = [member(row, m.functional) for m in _members.MEMBERS for row in m.bench]
    return [*_baselines(), *rows]


def saved_bytes(function: Callable[..., Tensor], *args: Tensor) -> int:
    """Bytes of the distinct storages that one call of ``function(*args)`` keeps for backward."""
    storages: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function(*args)
    return sum(storages.values())


@dataclass
class _Inputs:
    """The tensors of one size, shared by every candidate (one copy of each in memory)."""

    numel: int
    x: Tensor  # [rows, last], requires grad
    x2: Tensor  # [rows, 2·last] for GEGLU, requires grad
    params: dict[str, Tensor]
    out: Tensor  # preallocated output, the shape of x
    grad: Tensor  # preallocated output gradient, the shape of x

    @classmethod
    def make(cls, numel: int, generator: torch.Generator) -> "_Inputs":
        last = LAST_DIM if numel % LAST_DIM == 0 else numel
        shape = (numel // last, last)
        x = torch.randn(shape, generator=generator).requires_grad_()
        x2 = torch.randn(shape[0], 2 * last, generator=generator).requires_grad_()
        params = {
            "bias": (0.1 * torch.randn(last, generator=generator)).requires_grad_(),
            "mu": torch.tensor(0.1, requires_grad=True),
            "sigma": torch.tensor(1.2, requires_grad=True),
        }
        return cls(
            numel, x, x2, params, torch.empty(shape), torch.randn(shape, generator=generator)
        )

    def args(self, candidate: Candidate, detached: bool = False) -> tuple[Tensor, ...]:
        args = (self.x2 if candidate.doubled_input else self.x,)
        args += tuple(self.params[name] for name in candidate.params)
        return tuple(a.detach() for a in args) if detached else args


@dataclass
class Result:
    """Everything measured for one candidate at one size, eager or compiled."""

    size: int
    key: str
    compiled: bool
    seconds: dict[str, float] = field(default_factory=dict)  # measure -> median s/call
    rounds: dict[str, list[float]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    saved_bytes: int | None = None
    input_bytes: int = 0
    param_bytes: int = 0
    compile_seconds: float | None = None
    error: str | None = None


def _measurements(candidate: Candidate, function: Callable, inputs: _Inputs, compiled: bool):
    """The zero-argument closures to time for one candidate: measure -> closure."""
    plain = inputs.args(candidate, detached=True)  # no autograd graph for forward-only timing
    closures = {"fwd": partial(function, *plain)}
    if candidate.out_function is not None and not compiled:
        closures["fwd_out"] = partial(candidate.out_function, *plain, out=inputs.out)
    if candidate.backward:
        args = inputs.args(candidate)

        def forward_backward() -> None:
            for tensor in args:
                tensor.grad = None  # fresh gradients each call, as in a training step
            function(*args).backward(inputs.grad)

        closures["fwd_bwd"] = forward_backward
    return closures


def _prepare(candidate, inputs, compiled, backend, result):
    """Compile (if asked) and warm up every measurement of ``candidate``; fill the saved bytes."""
    function = candidate.function
    if compiled:
        function = torch.compile(function, dynamic=False, backend=backend)
    closures = _measurements(candidate, function, inputs, compiled)
    start = time.perf_counter()
    for closure in closures.values():
        closure()  # compiles each graph (grad and no-grad) outside the timing
    if compiled:
        result.compile_seconds = time.perf_counter() - start
    args = inputs.args(candidate)
    result.input_bytes = args[0].numel() * args[0].element_size()
    result.param_bytes = sum(a.untyped_storage().nbytes() for a in args[1:])
    if candidate.backward:
        result.saved_bytes = saved_bytes(function, *args)
    return closures


def run(
    selected: list[Candidate],
    sizes: list[int],
    rounds: int,
    compile: bool = True,
    backend: str = "inductor",
    min_seconds: float = 5e-3,
    log: Callable[[str], None] = print,
) -> list[Result]:
    """Measure every candidate at every size; one interleaved set of rounds per size."""
    from gelus._torch_compat import compile_settings

    results = []
    generator = torch.Generator().manual_seed(0)
    for size in sizes:
        inputs = _Inputs.make(size, generator)
        timed: dict[str, Callable] = {}
        calls: dict[str, int] = {}
        at_size: dict[tuple[str, bool], Result] = {}
        if compile:
            torch.compiler.reset()  # one compiled graph per member, mode and size; nothing stale
        for compiled in (False, True) if compile else (False,):
            for candidate in selected:
                if compiled and not candidate.compile:
                    continue
                result = Result(size, candidate.key, compiled)
                try:
                    with compile_settings(_DYNAMO_SETTINGS):
                        closures = _prepare(candidate, inputs, compiled, backend, result)
                        for measure, closure in closures.items():
                            name = f"{candidate.key}/{int(compiled)}/{measure}"
                            calls[name] = calls_for(closure, min_seconds, warm_up=False)
                            timed[name] = closure
                except Exception as error:  # a broken member must not hide the other rows
                    result.error = f"{type(error).__name__}: {error}".splitlines()[0][:200]
                    log(
                        f"  {candidate.key} ({'compiled' if compiled else 'eager'}): {result.error}"
                    )
                results.append(result)
                at_size[candidate.key, compiled] = result
        log(f"  2^{math.log2(size):g}: timing {len(timed)} measurements x {rounds} rounds")
        with compile_settings(_DYNAMO_SETTINGS):
            times = interleaved_rounds(timed, rounds, calls=calls)
        for name, values in times.items():
            key, compiled, measure = name.split("/")
            result = at_size[key, bool(int(compiled))]
            result.rounds[measure] = values
            result.calls[measure] = calls[name]
            result.seconds[measure] = median(values)
        del inputs, timed
    return results


def environment() -> dict[str, object]:
    """What the figures depend on: the records' environment metadata (code version, packages,
    CPU, threads), the load average (other work adds noise), dtype and date."""
    from gelus.experiments.records import environment_metadata

    return environment_metadata("cpu", torch.get_num_threads()) | {
        "load_average_1min": os.getloadavg()[0],
        "dtype": "float32",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


# (label, member key, compiled, reference key, reference compiled, limit), all on fwd+bwd time
TARGETS = (
    ("exact GELU, eager ÷ F.gelu", "exact", False, "torch-gelu", False, 1.25),
    # the tanh form as fast as torch's own tanh form, which it replaces (docs/PERFORMANCE.md)
    ("tanh form, eager ÷ F.gelu(tanh)", "tanh", False, "torch-gelu-tanh", False, 1.0),
    ("tanh form, compiled ÷ compiled F.gelu(tanh)", "tanh", True, "torch-gelu-tanh", True, 1.1),
    ("sigmoid form, eager ÷ F.gelu", "sigmoid", False, "torch-gelu", False, 1.5),
    ("sigmoid form, compiled ÷ compiled F.gelu", "sigmoid", True, "torch-gelu", True, 1.1),
    ("bias-GELU, eager ÷ F.gelu", "bias-gelu", False, "torch-gelu", False, 1.5),
    ("bias-GELU, compiled ÷ compiled F.gelu", "bias-gelu", True, "torch-gelu", True, 1.1),
    ("GEGLU, eager ÷ F.gelu", "geglu", False, "torch-gelu", False, 1.5),
    ("GEGLU, compiled ÷ compiled F.gelu", "geglu", True, "torch-gelu", True, 1.1),
    # "≤ 1.5× compiled": the compiled member against F.gelu as users call it (eager); the naive
    # eager composition is the 8–12× this replaces
    ("generalized GELU, compiled ÷ F.gelu", "generalized", True, "torch-gelu", False, 1.5),
)
TARGET_SIZES = (2**20, 2**24)


def size_name(size: int) -> str:
    """2^k for powers of two, the plain count otherwise."""
    exponent = math.log2(size)
    return f"2^{int(exponent)}" if exponent.is_integer() else f"{size:,}"


def duration(seconds: float) -> str:
    """A time with a unit that keeps three significant digits: 41.2 µs, 3.08 ms, 1.20 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


class Report:
    """Ratios and tables computed from a list of :class:`Result` (a pure function of them)."""

    def __init__(self, results: list[Result], selected: list[Candidate]) -> None:
        self.selected = selected
        self.by_key = {(r.size, r.key, r.compiled): r for r in results}
        self.sizes = sorted({r.size for r in results})

    def seconds(self, size: int, key: str, compiled: bool, measure: str) -> float | None:
        result = self.by_key.get((size, key, compiled))
        return None if result is None else result.seconds.get(measure)

    def ratio(self, size, key, compiled, measure, ref_key, ref_compiled, ref_measure=None):
        return _ratio(
            self.seconds(size, key, compiled, measure),
            self.seconds(size, ref_key, ref_compiled, ref_measure or measure),
        )

    def round_ratios(self, size, key, compiled, measure, ref_key, ref_compiled) -> list[float]:
        """Round by round, the row's time ÷ the reference's: interleaving timed the two of a
        round back to back, so each ratio is free of the slow drifts between rounds."""
        result = self.by_key.get((size, key, compiled))
        reference = self.by_key.get((size, ref_key, ref_compiled))
        if result is None or reference is None:
            return []
        return paired_ratios(result.rounds.get(measure, []), reference.rounds.get(measure, []))

    def saved_ratio(self, size: int, key: str, compiled: bool) -> float | None:
        result = self.by_key.get((size, key, compiled))
        if result is None or result.saved_bytes is None:
            return None
        return result.saved_bytes / result.input_bytes

    def eager_table(self, size: int) -> str:
        from gelus.bench.timing import format_table

        headers = [
            "row",
            "vs",
            "fwd",
            "fwd out=",
            "fwd+bwd",
            "fwd ×copy",
            "fwd out= ×copy",
            "fwd+bwd ×copy",
            "saved ×input",
        ]
        rows = []
        for c in self.selected:
            ref = c.reference
            rows.append(
                [
                    c.label,
                    self._label(ref),
                    _number(self.ratio(size, c.key, False, "fwd", ref, False)) if ref else "—",
                    _number(self.ratio(size, c.key, False, "fwd_out", ref, False)) if ref else "—",
                    _number(self.ratio(size, c.key, False, "fwd_bwd", ref, False)) if ref else "—",
                    _number(self.ratio(size, c.key, False, "fwd", "copy", False, "fwd_out")),
                    _number(self.ratio(size, c.key, False, "fwd_out", "copy", False, "fwd_out")),
                    _number(self.ratio(size, c.key, False, "fwd_bwd", "copy", False, "fwd_out")),
                    _number(self.saved_ratio(size, c.key, False)),
                ]
            )
        return format_table(headers, rows)

    def compiled_table(self, size: int) -> str:
        from gelus.bench.timing import format_table

        headers = [
            "row",
            "vs",
            "fwd ÷compiled",
            "fwd ÷eager",
            "fwd+bwd ÷compiled",
            "fwd+bwd ÷eager",
            "saved ×input",
            "compile s",
        ]
        rows = []
        for c in self.selected:
            result = self.by_key.get((size, c.key, True))
            if result is None:
                continue
            ref = c.reference
            rows.append(
                [
                    c.label,
                    self._label(ref),
                    _number(self.ratio(size, c.key, True, "fwd", ref, True)),
                    _number(self.ratio(size, c.key, True, "fwd", ref, False)),
                    _number(self.ratio(size, c.key, True, "fwd_bwd", ref, True)),
                    _number(self.ratio(size, c.key, True, "fwd_bwd", ref, False)),
                    _number(self.saved_ratio(size, c.key, True)),
                    _number(result.compile_seconds),
                ]
            )
        return format_table(headers, rows) if rows else ""

    def target_sizes(self) -> list[int]:
        measured = [s for s in TARGET_SIZES if s in self.sizes]
        return measured or self.sizes[-1:]

    def target_rows(self) -> list[dict[str, object]]:
        rows = []
        keys = {c.key for c in self.selected}
        for label, key, compiled, ref_key, ref_compiled, limit in TARGETS:
            if key not in keys:
                continue
            for size in self.target_sizes():
                paired = self.round_ratios(size, key, compiled, "fwd_bwd", ref_key, ref_compiled)
                row = {"target": label, "limit": limit, "size": size, "value": None}
                rows.append(row | spread(paired))
        for size in self.target_sizes() if "generalized" in keys else ():
            result = self.by_key.get((size, "generalized", False))
            value = limit = None
            if result is not None and result.saved_bytes is not None:
                value = result.saved_bytes / result.input_bytes
                limit = (result.input_bytes + result.param_bytes) / result.input_bytes
            rows.append(
                {
                    "target": "generalized GELU, eager, saved ÷ input bytes (+ params)",
                    "limit": limit,
                    "size": size,
                    "value": value,
                }
            )
        return rows

    def targets_table(self) -> str:
        from gelus.bench.timing import format_table

        sizes = self.target_sizes()
        cells: dict[str, list[str]] = {}
        limits: dict[str, object] = {}
        for row in self.target_rows():
            value, limit = row["value"], row["limit"]
            cell = f"{_number(value)} {verdict(row)}"
            if "q1" in row:
                cell += f" ({_number(row['q1'])}–{_number(row['q3'])})"
            cells.setdefault(row["target"], []).append(cell)
            if limit is not None:
                limits[row["target"]] = limit
        headers = ["target (fwd+bwd)", "≤", *(size_name(s) for s in sizes)]
        rows = [[t, _number(limits.get(t)), *v] for t, v in cells.items()]
        return format_table(headers, rows) + "\n\n" + TARGETS_LEGEND

    def _label(self, key: str) -> str:
        return {"torch-gelu": "F.gelu", "torch-gelu-tanh": "F.gelu(tanh)"}.get(key, "—")

    def text(self, compile: bool) -> str:
        parts = []
        for size in self.sizes:
            copy = self.seconds(size, "copy", False, "fwd_out")
            gelu = self.seconds(size, "torch-gelu", False, "fwd")
            gelu_bwd = self.seconds(size, "torch-gelu", False, "fwd_bwd")
            times = ", ".join(
                f"{name} {duration(s)}"
                for name, s in (
                    ("y.copy_(x)", copy),
                    ("F.gelu", gelu),
                    ("F.gelu fwd+bwd", gelu_bwd),
                )
                if s is not None
            )
            parts.append(f"### {size_name(size)} elements ({times})\n")
            parts.append("Eager; time ÷ the `vs` row (same mode), or ÷ `y.copy_(x)`:\n")
            parts.append(self.eager_table(size) + "\n")
            compiled = self.compiled_table(size)
            if compiled:
                parts.append(
                    "torch.compile (dynamic=False); time ÷ the `vs` row compiled / eager:\n"
                )
                parts.append(compiled + "\n")
        where = ", ".join(size_name(s) for s in self.target_sizes())
        parts.append(f"### Targets at {where}\n")
        parts.append(self.targets_table())
        if not compile:
            parts.append("\n(compiled targets not measured: --no-compile)")
        return "\n".join(parts)
