"""``gelus bench kernels --device cuda``: what users call, forward + backward, against torch.

Every row is a public call of :mod:`gelus.functional` with autograd — the member's forward, then
``torch.autograd.grad`` of it for the input and every learnable parameter (dβ, dμ, dσ, db) — and
is compared, in paired rounds, with two things timed the same way:

- torch's eager ``F.gelu`` forward + backward (autograd), the yardstick of issue 30's targets;
- the torch composition the member replaces: ``F.gelu(x + b)`` with db for ``bias_gelu``,
  ``a * F.gelu(b)`` for GEGLU, ``x * torch.sigmoid(beta * x)`` with dβ for Swish, x·Φ((x − μ)/σ)
  in torch ops with dμ, dσ, ``F.silu``, ``F.gelu(approximate="tanh")``, …

Inputs are ``[n / 1024, 1024]`` (a transformer's hidden layer: the per-channel parameters run
along the last dimension, in x's dtype, as the kernels take them); GEGLU splits the same n
elements into halves (n / 2 outputs, so it moves fewer bytes than F.gelu over n).

Clocks (:mod:`gelus.bench.device_timing`): *device time* is a CUDA graph of the call replayed
between CUDA events, the GPU's own time without the host's launch gaps; *host time* is the wall
clock of one eager call with the device drained before it. They are reported apart because at
2^16 a call's wall time is the host's and at 2^28 the device's. Rounds: the row, F.gelu and the
composition are timed back to back in each round (:func:`gelus.bench.timing.interleaved_rounds`
with the device clock), so each round gives a paired ratio; a target's value is the median of
those ratios with their middle half, judged as the CPU bench judges its targets
(:func:`gelus.bench.timing.verdict`).

On CPU the rows take the library's CUDA route (:func:`~gelus.bench.device_timing.cuda_route_on_cpu`):
in Triton's interpreter (the tests: every code path runs, the times say nothing about speed), or
with the launches stubbed (``--host-only``: the host's work alone). The command line is
:func:`gelus.bench.cli.kernels_cuda_main`, the tables and verdicts
:mod:`gelus.bench.kernels_cuda_report`.
"""

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus import functional as G
from gelus.bench import device_timing
from gelus.bench.timing import interleaved_rounds, median, paired_ratios

__all__ = ["MEMBERS", "WIDTH", "Member", "Result", "host_rows", "run", "size_label"]

SQRT_HALF = math.sqrt(0.5)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
WIDTH = 1024  # channels: x is [n / WIDTH, WIDTH]
ULP_ELEMENTS = 1 << 22  # the accuracy columns read the first 4 M elements: enough to see the error


# ---------------------------------------------------------------- rows


def _phi(z: Tensor) -> Tensor:
    return 0.5 * torch.special.erfc(-z * SQRT_HALF)


@dataclass(frozen=True)
class Member:
    """One row: the member's public call and the torch composition it replaces, each a function
    ``(x, params) -> y`` whose gradient is taken for x and the parameters named in ``params``."""

    key: str
    label: str
    call: Callable[[Tensor, dict], Tensor]
    composition: Callable[[Tensor, dict], Tensor] | None  # None: F.gelu is what it replaces
    composition_label: str = "F.gelu"
    params: tuple[str, ...] = ()  # learnable parameters, per channel: "beta", "mu", "sigma", "bias"
    phi: bool = False  # evaluates Φ (issue 30: fp32 ≤ 1.10× F.gelu at 2^24 and 2^28)
    reference: Callable | None = None  # float64 x -> (value, slope) for the ulp columns
    moved: int = 5  # bytes moved ÷ x's bytes (fwd: x, y; bwd: x, g, dx)

    @property
    def per_channel(self) -> bool:
        return bool(self.params)


def _exact(x: Tensor) -> tuple[Tensor, Tensor]:
    cdf = _phi(x)
    return x * cdf, cdf + x * torch.exp(-0.5 * x * x) * INV_SQRT_2PI


def _swish(beta: float) -> Callable:
    def reference(x: Tensor) -> tuple[Tensor, Tensor]:
        s = torch.sigmoid(beta * x)
        return x * s, s + beta * x * s * (1 - s)

    return reference


def _tanh(x: Tensor) -> tuple[Tensor, Tensor]:
    a = 2.0 * math.sqrt(2.0 / math.pi)
    s = torch.sigmoid(x * a * (1 + 0.044715 * x * x))
    return x * s, s + x * a * (1 + 3 * 0.044715 * x * x) * s * (1 - s)


def _gelu(approximate: str) -> Callable:
    return lambda x, p: G.gelu(x, approximate)


def _swish_composition(beta: float) -> Callable:
    return lambda x, p: x * torch.sigmoid(beta * x)


def _geglu_composition(x: Tensor, p: dict) -> Tensor:
    a, b = x.chunk(2, dim=-1)
    return a * F.gelu(b)


def _stochastic_composition(x: Tensor, p: dict) -> Tensor:
    # the mask m ~ Bernoulli(Φ(x)) drawn in torch ops; autograd's slope is the mask
    return torch.where(torch.rand_like(x) < _phi(x), x, 0.0)


MEMBERS = (
    Member("gelu", "gelu", _gelu("none"), None, phi=True, reference=_exact),
    Member("gelu-tanh", "gelu(tanh)", _gelu("tanh"),
           lambda x, p: F.gelu(x, approximate="tanh"), "F.gelu(tanh)", reference=_tanh),
    Member("gelu-sigmoid", "gelu(sigmoid)", _gelu("sigmoid"), _swish_composition(1.702),
           "x·σ(1.702x)", reference=_swish(1.702)),
    Member("silu", "silu", lambda x, p: G.silu(x), lambda x, p: F.silu(x), "F.silu",
           reference=_swish(1.0)),
    Member("swish", "swish(β=1.5)", lambda x, p: G.swish(x, 1.5),
           _swish_composition(1.5), "x·σ(1.5x)", reference=_swish(1.5)),
    Member("swish-tensor", "swish(β per channel; dβ)",
           lambda x, p: G.swish(x, p["beta"]),
           lambda x, p: x * torch.sigmoid(p["beta"] * x), "x·σ(βx), dβ", params=("beta",)),
    Member("generalized", "generalized_gelu(μ, σ per channel; dμ, dσ)",
           lambda x, p: G.generalized_gelu(x, p["mu"], p["sigma"]),
           lambda x, p: x * _phi((x - p["mu"]) / p["sigma"]), "x·Φ((x−μ)/σ), dμ dσ",
           params=("mu", "sigma"), phi=True),
    Member("bias-gelu", "bias_gelu (db)", lambda x, p: G.bias_gelu(x, p["bias"]),
           lambda x, p: F.gelu(x + p["bias"]), "F.gelu(x + b), db", params=("bias",), phi=True),
    # GEGLU over n input elements: fwd reads n, writes n/2; bwd reads n and n/2, writes n
    Member("geglu", "geglu (n → n/2)", lambda x, p: G.geglu(x), _geglu_composition,
           "a·F.gelu(b)", phi=True, moved=4),
    Member("stochastic", "stochastic_gelu (train)",
           lambda x, p: G.stochastic_gelu(x, training=True), _stochastic_composition,
           "where(rand < Φ(x), x, 0)", phi=True),
)  # fmt: skip


# ---------------------------------------------------------------- one case


@dataclass
class Case:
    """The tensors of one size × dtype × input kind, shared by every row."""

    size: int
    dtype: torch.dtype
    inputs: str
    x: Tensor  # [n / width, width], a leaf that requires grad
    grad: Tensor  # dL/dy, x's shape
    half_grad: Tensor  # dL/dy of GEGLU, [n / width, width / 2]
    params: dict[str, Tensor]  # per-channel leaves [width], x's dtype

    @classmethod
    def make(cls, size: int, dtype: torch.dtype, inputs: str, device: str) -> "Case":
        width = min(WIDTH, size)
        generator = torch.Generator(device=device).manual_seed(size)
        if inputs == "normal":
            x = torch.randn(size, generator=generator, device=device)
        else:  # the exact form's worst case: both tails
            x = torch.rand(size, generator=generator, device=device) * 40 - 20
        x = x.to(dtype).view(-1, width).requires_grad_()
        grad = torch.randn(x.shape, generator=generator, device=device).to(dtype)
        params = {
            "beta": torch.full((width,), 1.5, device=device, dtype=dtype),
            "mu": 0.1 * torch.randn(width, generator=generator, device=device).to(dtype),
            "sigma": torch.full((width,), 1.2, device=device, dtype=dtype),
            "bias": 0.1 * torch.randn(width, generator=generator, device=device).to(dtype),
        }
        params = {name: p.requires_grad_() for name, p in params.items()}
        return cls(size, dtype, inputs, x, grad, grad[:, : width // 2].contiguous(), params)

    def forward_backward(self, function: Callable, params: tuple[str, ...]) -> Callable:
        """A zero-argument call: y = function(x, params), then autograd.grad of y for x and the
        named parameters with the case's dL/dy (returned, so nothing accumulates in .grad)."""
        wrt = (self.x, *(self.params[name] for name in params))

        def run():
            y = function(self.x, self.params)
            grad = self.grad if y.shape == self.grad.shape else self.half_grad
            return torch.autograd.grad(y, wrt, grad)

        return run


@dataclass
class Result:
    """One member in one case: device seconds per round of it, F.gelu and its composition
    (timed back to back in each round), host seconds per call, and the accuracy columns."""

    size: int
    dtype: str
    inputs: str
    key: str
    rounds: dict[str, list[float]] = field(default_factory=dict)  # "member", "F.gelu", "torch"
    host: dict[str, list[float]] = field(default_factory=dict)  # same keys, s per eager call
    method: str = ""  # how device time was taken: graph, events or wall
    copy_seconds: float | None = None  # y.copy_(x) in the same case: the bandwidth column
    value_ulp: float | None = None
    slope_ulp: float | None = None

    def ratio(self, against: str) -> list[float]:
        return paired_ratios(self.rounds.get("member", []), self.rounds.get(against, []))

    def seconds(self, name: str = "member") -> float | None:
        values = self.rounds.get(name)
        return median(values) if values else None


def _ulp(result: Tensor, reference: Tensor) -> float:
    """Largest |result − reference| in units of the spacing of result's dtype at the reference
    (finite references only; subnormal spacing below the smallest normal)."""
    mantissa = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[result.dtype]
    magnitude = reference.abs().clamp(min=torch.finfo(result.dtype).tiny)
    spacing = torch.exp2(torch.floor(torch.log2(magnitude)) - mantissa)
    finite = reference.isfinite()
    error = (result.double() - reference).abs() / spacing
    return float(error[finite].max()) if finite.any() else 0.0


def _errors(member: Member, x: Tensor) -> tuple[float, float]:
    """(value, slope) error in ulp of x's dtype of the public call against float64."""
    leaf = x.detach().reshape(-1)[:ULP_ELEMENTS].clone().requires_grad_()
    y = member.call(leaf, {})
    (slope,) = torch.autograd.grad(y, leaf, torch.ones_like(y))
    value, reference_slope = member.reference(leaf.detach().double())
    return _ulp(y.detach(), value), _ulp(slope, reference_slope)


def _measure(
    case: Case,
    member: Member,
    baselines: dict,
    rounds: int,
    host_calls: int,
    min_seconds: float,
    device: str,
) -> Result:
    """Time one member, F.gelu and its composition in paired rounds, and their host times."""
    name = str(case.dtype).removeprefix("torch.")
    result = Result(case.size, name, case.inputs, member.key)
    calls = {"member": case.forward_backward(member.call, member.params)}
    if member.composition is not None:
        calls["torch"] = case.forward_backward(member.composition, member.params)
    # each host call waits for the previous one's device work first: fewer at 2^26 and above
    host_calls = host_calls if case.size < 1 << 26 else min(host_calls, 10)
    replays = {}
    for role, fn in calls.items():
        fn()  # Triton's compile and the allocator's warm-up, outside every timing
        replays[role] = device_timing.replayable(fn, device, case.size)
        result.host[role] = device_timing.host_times(fn, host_calls, device)
    replays["F.gelu"] = baselines["F.gelu"]
    result.host["F.gelu"] = baselines["host"]
    result.method = replays["member"].method
    result.rounds = interleaved_rounds(
        replays, rounds, min_seconds, timer=device_timing.device_timer(device)
    )
    result.copy_seconds = baselines["copy"]
    if member.reference is not None:
        result.value_ulp, result.slope_ulp = _errors(member, case.x)
    return result


def _baselines(case: Case, rounds: int, host_calls: int, min_seconds: float, device: str) -> dict:
    """F.gelu's replay and host times, and y.copy_(x)'s device time, for every row of a case."""
    gelu = case.forward_backward(lambda x, p: F.gelu(x), ())
    gelu()
    out = torch.empty_like(case.x, requires_grad=False)
    x = case.x.detach()
    copy = partial(out.copy_, x)
    copy()
    replays = {
        "F.gelu": device_timing.replayable(gelu, device, case.size),
        "copy": device_timing.replayable(copy, device, case.size),
    }
    times = interleaved_rounds(
        replays, rounds, min_seconds, timer=device_timing.device_timer(device)
    )
    return {
        "F.gelu": replays["F.gelu"],
        "host": device_timing.host_times(gelu, host_calls, device),
        "copy": median(times["copy"]),
    }


def _fits(size: int, dtype: torch.dtype, device: str) -> tuple[bool, str]:
    """Whether a case should fit in the GPU's free memory: x, dL/dy, and the graphs' pools of the
    member, F.gelu and the widest composition (x·Φ((x − μ)/σ) keeps several x-sized tensors)
    hold about 16 x-sized tensors at once."""
    if device != "cuda":
        return True, ""
    need = 16 * size * max(dtype.itemsize, 4)
    free, _ = torch.cuda.mem_get_info()
    return need <= free, f"needs ~{need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"


def run(
    sizes,
    dtypes=("float32", "bfloat16"),
    inputs=("normal", "uniform"),
    members=MEMBERS,
    rounds=15,
    device="cuda",
    host_calls=30,
    min_seconds=2e-3,
    log=print,
) -> list[Result]:
    """Measure every member at every size × dtype × input kind; returns one Result per row
    measured (a case that would not fit in memory is logged and skipped)."""
    results = []
    with _cpu_route(device):
        for size in sizes:
            for dtype_name in dtypes:
                dtype = getattr(torch, dtype_name)
                fits, why = _fits(size, dtype, device)
                if not fits:
                    log(f"{size_label(size)} {dtype_name}: skipped ({why}); choose --sizes")
                    continue
                for kind in inputs:
                    case = Case.make(size, dtype, kind, device)
                    baselines = _baselines(case, rounds, host_calls, min_seconds, device)
                    for member in members:
                        result = _measure(
                            case, member, baselines, rounds, host_calls, min_seconds, device
                        )
                        results.append(result)
                        ratio = median(result.ratio("F.gelu"))
                        log(
                            f"{size_label(size)} {dtype_name} {kind} {member.key}: "
                            f"{ratio:.2f}x F.gelu ({result.method})"
                        )
                    del case, baselines
                    if device == "cuda":
                        torch.cuda.empty_cache()  # the graphs' pools, before a larger case
    return results


@contextlib.contextmanager
def _cpu_route(device: str):
    """On CPU: the library's CUDA route (:func:`~gelus.bench.device_timing.cuda_route_on_cpu`),
    torch on one thread as the CPU bench runs (on a shared machine, threads waiting for busy
    cores make a 64 K-element reduction take milliseconds). On CUDA: nothing to set."""
    if device != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with device_timing.cuda_route_on_cpu():
            yield
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- host time, launches stubbed


def host_rows(
    device: str,
    members=MEMBERS,
    size: int = 1 << 16,
    calls: int = 200,
    dtype: torch.dtype = torch.float32,
) -> list[dict]:
    """Host seconds of one forward + backward of each member at ``size``: with the Triton
    launches stubbed (the library's own host work: issue 30's ≤ 40 µs), and on CUDA also with
    them (what the host pays); the Triton launches one call makes. On CPU the rows take the
    library's CUDA route (:func:`~gelus.bench.device_timing.cuda_route_on_cpu`)."""
    rows = []
    with _cpu_route(device):
        case = Case.make(size, dtype, "normal", device)
        for member in members:
            fn = case.forward_backward(member.call, member.params)
            row = {
                "key": member.key,
                "label": member.label,
                "size": size,
                "dtype": str(dtype).removeprefix("torch."),
            }
            if device == "cuda":
                fn()
                row["launched"] = device_timing.host_times(fn, calls, device)
            with device_timing.stubbed_launches() as launches:
                fn()
                row["launches"] = len(launches)
                row["stubbed"] = device_timing.host_times(fn, calls, device)
            rows.append(row)
    return rows


def size_label(size: int) -> str:
    """2^k for powers of two, the plain count otherwise."""
    exponent = size.bit_length() - 1
    return f"2^{exponent}" if size == 1 << exponent else str(size)
