"""``gelus bench kernels --device cuda``: the Triton kernels of every member against torch's F.gelu.

For each size, dtype and input distribution (N(0, 1), what activations look like, and the worst
case, uniform on [−20, 20]) it times, in one run:

- the baselines: a device-to-device copy ``y.copy_(x)`` (the HBM rate) and torch's eager
  ``F.gelu`` forward + backward (``aten.gelu`` + ``aten.gelu_backward``, no autograd overhead);
- every member's forward + backward through :mod:`gelus._triton.ops` (the same calls the operators
  make on CUDA tensors).

It prints, per member: time ÷ F.gelu's, the fraction of the copy bandwidth reached for the bytes
the member must move (each input read once, each output written once), and the largest error of
value and gradient in ulp of the dtype against a float64 evaluation on the same device.

Timing: ``triton.testing.do_bench`` (CUDA events, L2 flushed between calls, median of ≥ 50 calls).
On CPU (Triton's interpreter, for the tests) a wall-clock median instead: the figures then say
nothing about speed, only that the code path runs.
"""

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["MEMBERS", "Member", "Row", "format_rows", "run"]

SQRT_HALF = math.sqrt(0.5)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Member:
    """One row: how to run a member's forward + backward, and its float64 value and slope."""

    key: str
    label: str
    forward_backward: Callable  # (ops, x, grad, params) -> None
    reference: Callable | None  # float64 x -> (value, slope), or None (no ulp column)
    moved: int = (
        5  # bytes moved per element in units of the dtype's size (fwd: x, y; bwd: x, g, dx)
    )


def _exact(x: Tensor) -> tuple[Tensor, Tensor]:
    cdf = 0.5 * torch.special.erfc(x * -SQRT_HALF)
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


def _gelu_pair(approximate: str) -> Callable:
    def run(ops, x, grad, params):
        ops.gelu_forward(x, approximate)
        ops.gelu_backward(grad, x, approximate)

    return run


def _swish_pair(beta_kind: str) -> Callable:
    def run(ops, x, grad, params):
        beta = params["beta"] if beta_kind == "tensor" else float(beta_kind)
        ops.swish_forward(x, beta)
        ops.swish_backward(grad, x, beta)

    return run


def _generalized(ops, x, grad, params):
    ops.generalized_gelu_forward(x, params["mu"], params["sigma"])
    ops.generalized_gelu_backward(grad, x, params["mu"], params["sigma"])


def _bias(ops, x, grad, params):
    ops.bias_gelu_forward(x, params["bias"])
    ops.bias_gelu_backward(grad, x, params["bias"])


def _geglu(ops, x, grad, params):
    x = x.view(-1, 2 * params["width"])
    y = ops.geglu_forward(x)
    ops.geglu_backward(grad.view(-1)[: y.numel()].view(y.shape), x)  # dL/dy has y's size


def _stochastic(ops, x, grad, params):
    ops.stochastic_gelu_forward(x, seed=1234, offset=0)
    ops.stochastic_gelu_backward(grad, x, seed=1234, offset=0)


MEMBERS = (
    Member("gelu", "gelu (exact)", _gelu_pair("none"), _exact),
    Member("gelu-tanh", "gelu tanh", _gelu_pair("tanh"), _tanh),
    Member("gelu-sigmoid", "gelu sigmoid", _gelu_pair("sigmoid"), _swish(1.702)),
    Member("silu", "silu", _swish_pair("1.0"), _swish(1.0)),
    Member("swish", "swish β=1.5", _swish_pair("1.5"), _swish(1.5)),
    Member("swish-tensor", "swish β per channel (dβ)", _swish_pair("tensor"), None),
    Member("generalized", "generalized μ, σ per channel (dμ, dσ)", _generalized, None),
    Member("bias-gelu", "bias_gelu (db)", _bias, None),
    # GEGLU: fwd reads x (2n), writes n; bwd reads x (2n) and grad (n), writes dx (2n), per output n
    Member("geglu", "geglu (per output element)", _geglu, None, moved=8),
    Member("stochastic", "stochastic_gelu (train)", _stochastic, None),
)

WIDTH = 1024  # the channel count of the per-channel rows ([n / 1024, 1024], a transformer's hidden)


@dataclass
class Row:
    size: int
    dtype: str
    inputs: str
    key: str
    label: str
    seconds: float
    ratio: float  # ÷ F.gelu fwd+bwd in the same run
    bandwidth: float  # fraction of the copy rate for the bytes the member must move
    value_ulp: float | None = None
    slope_ulp: float | None = None


def _timer(device: str, rounds: int) -> Callable[[Callable[[], None]], float]:
    """Seconds per call: do_bench on CUDA (median of ≥ `rounds`), a wall-clock median on CPU."""
    if device == "cuda":
        from triton.testing import do_bench

        def measure(fn: Callable[[], None]) -> float:
            fn()  # compile and warm up outside the timed region
            return do_bench(fn, warmup=25, rep=max(100, rounds), return_mode="median") * 1e-3

        return measure

    def measure_cpu(fn: Callable[[], None]) -> float:
        fn()
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    return measure_cpu


def _ulp(result: Tensor, reference: Tensor) -> float:
    """Largest |result − reference| in units of the spacing of result's dtype at the reference
    (finite references only; subnormal spacing below the smallest normal)."""
    mantissa = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[result.dtype]
    magnitude = reference.abs().clamp(min=torch.finfo(result.dtype).tiny)
    spacing = torch.exp2(torch.floor(torch.log2(magnitude)) - mantissa)
    finite = reference.isfinite()
    error = (result.double() - reference).abs() / spacing
    return float(error[finite].max()) if finite.any() else 0.0


def _inputs(size: int, dtype: torch.dtype, kind: str, device: str) -> Tensor:
    generator = torch.Generator(device=device).manual_seed(size)
    if kind == "normal":
        x = torch.randn(size, generator=generator, device=device)
    else:
        x = torch.rand(size, generator=generator, device=device) * 40 - 20
    return x.to(dtype)


def _errors(ops, member: Member, x: Tensor) -> tuple[float, float]:
    """(value, slope) error in ulp of x's dtype against the member's float64 formula."""
    value, slope = member.reference(x.double())
    forms = {"gelu": "none", "gelu-tanh": "tanh", "gelu-sigmoid": "sigmoid"}
    ones = torch.ones_like(x)
    if member.key in forms:
        y = ops.gelu_forward(x, forms[member.key])
        dy = ops.gelu_backward(ones, x, forms[member.key])
    else:
        beta = 1.0 if member.key == "silu" else 1.5
        y, dy = ops.swish_forward(x, beta), ops.swish_backward(ones, x, beta)[0]
    return _ulp(y, value), _ulp(dy, slope)


# Members whose parameters are per channel take x as a [n / width, width] matrix.
_MATRIX_MEMBERS = ("swish-tensor", "generalized", "bias-gelu")


def run(sizes, dtypes, kinds=("normal", "uniform"), members=MEMBERS, rounds=50, device="cuda",
        log=print) -> list[Row]:  # fmt: skip
    """Measure every member at every size × dtype × input kind; returns the rows (baselines too)."""
    from gelus._triton import load

    ops = load()
    measure = _timer(device, rounds)
    rows = []
    for size in sizes:
        width = min(WIDTH, size // 2)
        params = {
            "beta": torch.full((width,), 1.5, device=device),
            "mu": torch.zeros(width, device=device),
            "sigma": torch.ones(width, device=device),
            "bias": torch.zeros(width, device=device),
            "width": width // 2,
        }
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            for kind in kinds:
                rows += _measure_case(ops, measure, members, size, dtype, kind, params, device, log)
    return rows


def _measure_case(ops, measure, members, size, dtype, kind, params, device, log) -> list[Row]:
    x = _inputs(size, dtype, kind, device)
    grad = torch.randn(size, device=device).to(dtype)
    out = torch.empty_like(x)
    nbytes = size * x.element_size()
    copy = measure(lambda: out.copy_(x))
    torch_gelu = measure(lambda: (torch.ops.aten.gelu(x), torch.ops.aten.gelu_backward(grad, x)))
    copy_rate = 2 * nbytes / copy  # bytes per second
    name = str(dtype).removeprefix("torch.")
    rows = [
        Row(size, name, kind, "copy", "y.copy_(x)", copy, copy / torch_gelu, 1.0),
        Row(size, name, kind, "torch-gelu", "torch F.gelu eager", torch_gelu, 1.0,
            5 * nbytes / torch_gelu / copy_rate),
    ]  # fmt: skip
    matrix = x.view(-1, params["width"] * 2)
    for member in members:
        argument = matrix if member.key in _MATRIX_MEMBERS else x
        g = grad.view(argument.shape)
        seconds = measure(lambda m=member, a=argument, g=g: m.forward_backward(ops, a, g, params))
        moved = member.moved * nbytes // (2 if member.key == "geglu" else 1)
        row = Row(size, name, kind, member.key, member.label, seconds, seconds / torch_gelu,
                  moved / seconds / copy_rate)  # fmt: skip
        if member.reference is not None:
            row.value_ulp, row.slope_ulp = _errors(ops, member, x)
        rows.append(row)
        log(f"{size_label(size)} {name} {kind} {member.key}: {row.ratio:.2f}x F.gelu")
    return rows


def size_label(size: int) -> str:
    exponent = size.bit_length() - 1
    return f"2^{exponent}" if size == 1 << exponent else str(size)


def _cell(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def format_rows(rows: list[Row]) -> str:
    """One Markdown table per size × dtype × input kind."""
    from gelus.bench.timing import format_table

    blocks = []
    cases = dict.fromkeys((r.size, r.dtype, r.inputs) for r in rows)
    for size, dtype, kind in cases:
        inputs = "N(0, 1)" if kind == "normal" else "uniform [−20, 20]"
        selected = [r for r in rows if (r.size, r.dtype, r.inputs) == (size, dtype, kind)]
        table = format_table(
            ["member", "µs", "÷ F.gelu", "× copy rate", "value ulp", "grad ulp"],
            [[r.label, f"{r.seconds * 1e6:.1f}", _cell(r.ratio), _cell(r.bandwidth),
              _cell(r.value_ulp, 1), _cell(r.slope_ulp, 1)] for r in selected],
        )  # fmt: skip
        blocks.append(f"{size_label(size)} elements, {dtype}, inputs {inputs}\n\n{table}")
    return "\n\n".join(blocks)


def main(args, out) -> int:
    """``gelus bench kernels --device cuda|cpu-interpreter``: print the tables to ``out``."""
    from gelus.bench.timing import parse_sizes
    from gelus.experiments.errors import CommandError

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise CommandError("--device cuda: no CUDA device is visible to torch; use --device cpu")
    from gelus._triton import available, interpreting

    if not (available(torch.empty(0, device=device)) or (device == "cpu" and interpreting())):
        raise CommandError(
            f"the Triton kernels cannot run on {device}: install triton (pip install triton); "
            "on CPU they run only in Triton's interpreter (TRITON_INTERPRET=1)"
        )
    sizes = parse_sizes(args.sizes or "2^16,2^20,2^28")
    rounds = args.rounds if args.rounds is not None else 50
    wanted = None if args.members is None else {m.strip() for m in args.members.split(",")}
    members = [m for m in MEMBERS if wanted is None or m.key in wanted]
    if wanted is not None and len(members) != len(wanted):
        known = ", ".join(m.key for m in MEMBERS)
        raise CommandError(f"unknown --members in {args.members!r}; choose from {known}")
    rows = run(sizes, ("float32", "bfloat16"), members=members, rounds=rounds, device=device,
               log=lambda message: None)  # fmt: skip
    header = f"gelus Triton kernels vs torch, {device}"
    if device == "cuda":
        header += f" ({torch.cuda.get_device_name()}, torch {torch.__version__})"
    else:
        header += " (Triton's interpreter: the times say nothing about speed)"
    print(f"{header}; fwd+bwd, median of ≥ {rounds} calls\n", file=out)
    print(format_rows(rows), file=out)
    return 0
