"""gelus's numerical contract (docs/NUMERICS.md) applied to any callable: ``gelus check IMPL``.

``check(impl, function="gelu")`` evaluates ``impl`` (a callable from tensor to tensor, or a name
``resolve`` understands) and its gradient by autograd, in each dtype, and returns a
:class:`ConformanceReport` with one :class:`Clause` per (clause, dtype):

* the edges (:data:`EDGES`, the contract's table): f(+inf) = +inf, f'(+inf) = 1;
  f(−inf) = 0 (either sign), f' = 0; f(nan) = nan, f' = nan; f(−0) = −0, f' = ½;
  f(MAX) = MAX, f' = 1; f(−MAX) = 0, f' = 0, MAX the dtype's largest finite value;
* ``subnormal``: f(s) = s/2 within one step of the smallest subnormal, the sign of s kept,
  f'(s) = ½ within one ulp of 1 (Φ(s) = ½ + s·φ(0) + …, so x·Φ(x) = s/2 to far below a step);
* ``finite``: every finite input gives a finite value and gradient;
* ``ulp x<-3``, ``ulp [-3,3)``, ``ulp [3,20]`` (from −20, fp64 from −38.5; docs/NUMERICS.md's
  "Where a result is flushed to −0" lies below): the value's error in ulp of the dtype at the
  oracle's value (counted where |oracle| ≥ the smallest normal: a subnormal's ulp say nothing)
  and the gradient's absolute error, against the bounds of :data:`BOUNDS`.

The points: fp32 on docs/NUMERICS.md's accuracy grid (:func:`grid`: every ~1e5th fp32 in
[−20, 20] and 2^20 random ones); bf16 and fp16 every finite value of the type; fp64 1,601 points
of [−38.5, 20], where Φ(−38.5) is near float64's underflow.

The oracles: float64 for fp32, bf16 and fp16 (scipy's ``ndtr`` and ``expit`` when scipy is
installed, else ``math.erfc`` and ``math.exp`` element by element: both relative-accurate in the
tail, each ~1e-16, far below an fp32 ulp); for fp64 40-digit mpmath when installed, else the
same float64 oracle (whose own error is then that of an accurate float64 implementation: the
fp64 bounds are doubled). The
report names the oracle used for each dtype.

Nothing here is imported by ``import gelus``; numpy and torch only at import (scipy, mpmath,
transformers and jax where a check uses them).
"""

import ast
import dataclasses
import functools
import importlib
import importlib.util
import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "BOUNDS",
    "DTYPES",
    "EDGES",
    "FUNCTIONS",
    "IMPL_FORMS",
    "REGIONS",
    "BadImplError",
    "Clause",
    "ConformanceReport",
    "Edge",
    "JaxMissingError",
    "check",
    "grid",
    "register",
    "resolve",
]

INF = math.inf
DTYPES = {
    "fp32": torch.float32,
    "fp64": torch.float64,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


class Edge(NamedTuple):
    """One row of the contract's table: input, value, gradient. ``"max"`` / ``"-max"`` stand for
    the dtype's largest finite value; ``signed`` says whether the value's sign is part of it."""

    label: str
    x: float | str
    value: float | str
    slope: float
    signed: bool = True


# docs/NUMERICS.md, "The contract" (tests/library/test_conformance.py reads that table against this)
EDGES = (
    Edge("+inf", INF, INF, 1.0),
    Edge("-inf", -INF, 0.0, 0.0, signed=False),  # 0 of either sign
    Edge("nan", math.nan, math.nan, math.nan),
    Edge("-0", -0.0, -0.0, 0.5),
    Edge("max", "max", "max", 1.0),
    Edge("-max", "-max", 0.0, 0.0, signed=False),
)

# the accuracy table's columns: (clause, lower, upper); [3, 20] includes 20
REGIONS = (("ulp x<-3", -INF, -3.0), ("ulp [-3,3)", -3.0, 3.0), ("ulp [3,20]", 3.0, INF))

# fp32 bounds by function and region: (value ulp, gradient absolute error). docs/NUMERICS.md,
# "Accuracy": the exact form's fp32 promise is ≤ 2 ulp (the float32 algorithm, the CUDA kernels;
# its gradient cells are the compiled row's); the other forms' cells are their rows.
BOUNDS = {
    "gelu": ((2.0, 1.9e-9), (2.0, 2.4e-7), (2.0, 2.4e-7)),
    "gelu_tanh": ((158.0, 6.4e-9), (12.4, 9.0e-7), (1.5, 2.0e-6)),
    "quick_gelu": ((39.0, 9.1e-9), (6.9, 4.6e-7), (1.8, 9.8e-7)),
    "silu": ((2.4, 1.8e-8), (2.0, 2.6e-7), (1.5, 9.8e-7)),
}
# the rows of docs/NUMERICS.md's accuracy table the bounds above come from
TABLE_ROWS = {
    "gelu": "same, compiled (fp32 algorithm)",
    "gelu_tanh": "tanh form",
    "quick_gelu": "sigmoid form (β = 1.702)",
    "silu": "SiLU (β = 1)",
}
# bf16 / fp16: computed in fp32 and rounded once, so ≤ 1 ulp of the type; the gradient within one
# ulp of 1 in the type. fp64 (docs/NUMERICS.md, "float64"): value ≤ 2x² + 2 ulp, gradient
# ≤ x² + 1 ulp or 1e-16 absolute (near the slope's zero).
HALF_ULP = 1.0
TANH_ULP_FROM = -10.0  # the tanh form's ulp are counted for x ≥ −10 (fp32 σ(z) underflows below)
TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
SIGMOID_SCALE = 1.702


class Form(NamedTuple):
    """A function an implementation may claim: its formula, float64 and mpmath evaluations."""

    formula: str
    beta: float | None  # x·σ(β·x) forms; None: the exact form; 0: the tanh form's z(x)


FUNCTIONS = {
    "gelu": Form("x·Φ(x) (exact)", None),
    "gelu_tanh": Form("x·σ(z), z = 2√(2/π)·(x + 0.044715x³)", 0.0),
    "silu": Form("x·σ(x)", 1.0),
    "quick_gelu": Form("x·σ(1.702x)", SIGMOID_SCALE),
}


# ------------------------------------------------------------------------------ oracles


def _sigmoid_argument(x: np.ndarray, form: Form) -> tuple[np.ndarray, np.ndarray]:
    """(z, dz/dx) of the sigmoid forms: z = β·x, or the tanh form's x·(a + a·0.044715·x²)."""
    if form.beta:
        return form.beta * x, np.full_like(x, form.beta)
    return x * TANH_A * (1.0 + TANH_CUBIC * x * x), TANH_A * (1.0 + 3.0 * TANH_CUBIC * x * x)


def float64_oracle(x: np.ndarray, function: str) -> tuple[np.ndarray, np.ndarray, str]:
    """(f(x), f'(x), name) in float64: f = x·Φ(x), f' = Φ(x) + x·φ(x) with Φ(x) = ½·erfc(−x/√2);
    f = x·σ(z), f' = σ(z) + x·z'·σ(z)·(1 − σ(z)) for the sigmoid forms. scipy where installed."""
    form = FUNCTIONS[function]
    with np.errstate(all="ignore"):
        try:
            from scipy import special

            erfc, expit, name = special.erfc, special.expit, "float64 (scipy)"
        except ImportError:
            erfc = np.frompyfunc(math.erfc, 1, 1)
            expit = np.frompyfunc(lambda z: 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0, 1, 1)
            name = "float64 (math.erfc)"
        if form.beta is None:
            cdf = 0.5 * np.asarray(erfc(-x / math.sqrt(2.0)), dtype=np.float64)
            pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
            return x * cdf, cdf + x * pdf, name
        z, dz = _sigmoid_argument(x, form)
        s = np.asarray(expit(z), dtype=np.float64)
        return x * s, s + x * dz * s * (1.0 - s), name


def mpmath_oracle(x: np.ndarray, function: str, digits: int = 40):
    """The same (f, f') to ``digits`` digits with mpmath (ncdf, npdf, exp), rounded to float64;
    None when mpmath is not installed."""
    try:
        import mpmath
    except ImportError:
        return None
    form = FUNCTIONS[function]
    value, slope = np.empty(len(x)), np.empty(len(x))
    with mpmath.workdps(digits):
        a, b = mpmath.sqrt(8 / mpmath.pi), mpmath.sqrt(8 / mpmath.pi) * mpmath.mpf(TANH_CUBIC)
        for i, p in enumerate(x):
            t = mpmath.mpf(float(p))
            if form.beta is None:
                cdf = mpmath.ncdf(t)
                value[i], slope[i] = float(t * cdf), float(cdf + t * mpmath.npdf(t))
                continue
            z, dz = (
                (form.beta * t, form.beta)
                if form.beta
                else (t * (a + b * t * t), a + 3 * b * t * t)
            )
            s = 1 / (1 + mpmath.exp(-z))
            value[i], slope[i] = float(t * s), float(s + t * dz * s * (1 - s))
    return value, slope, f"mpmath {digits} digits"


# ------------------------------------------------------------------------------ points


# The worst inputs of docs/NUMERICS.md's exhaustive sweeps of the [−3, 3) cells (tanh form value
# and slope, sigmoid form value and slope, SiLU's slope, generalized GELU's value and slope).
SWEPT_WORST = (-2.97835636138916, -2.751713275909424, 2.9953982830047607, -2.5902252197265625,
               -2.591273307800293, 2.9680697917938232, 2.9852490425109863, 2.991748809814453,
               -2.828922986984253, 0.9610923528671265)  # fmt: skip


def grid() -> np.ndarray:
    """docs/NUMERICS.md's fp32 accuracy grid: every ~1e5th fp32 in [−20, 20] (both signs) plus
    2^20 random points (uniform, and uniform in the bit pattern, which covers every binade), the
    sweeps' worst inputs, and 2^17 uniform points each on [−3, −2] and [2, 3]."""
    top = np.float32(20.0).view(np.int32)
    every = np.arange(0, top + 1, 100_003, dtype=np.int32).view(np.float32)
    rng = np.random.default_rng(1606)
    uniform = rng.uniform(-20.0, 20.0, 2**19).astype(np.float32)
    binades = rng.integers(0, top, 2**19, dtype=np.int32).view(np.float32)
    binades = binades * rng.choice(np.float32([-1.0, 1.0]), 2**19)
    peaks = np.concatenate([rng.uniform(-3.0, -2.0, 2**17), rng.uniform(2.0, 3.0, 2**17)])
    parts = [every, -every, uniform, binades, np.float32(SWEPT_WORST), peaks.astype(np.float32)]
    return np.concatenate(parts).astype(np.float32)


def _points(dtype: torch.dtype) -> Tensor:
    """The ulp clauses' points in ``dtype`` (module docstring)."""
    if dtype == torch.float32:
        return torch.from_numpy(grid())
    if dtype == torch.float64:
        rng = np.random.default_rng(34)
        x = np.concatenate(
            [np.linspace(-38.5, 20.0, 601), rng.uniform(-38.5, -3.0, 600), rng.uniform(-3, 3, 400)]
        )
        return torch.from_numpy(x)
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype)
    return x[torch.isfinite(x)].clone()


def _large(dtype: torch.dtype) -> Tensor:
    """Finite magnitudes from 20 to the dtype's largest, both signs (the ``finite`` clause)."""
    top = math.log10(torch.finfo(dtype).max)
    x = torch.logspace(math.log10(20.0), top, 400, dtype=torch.float64).to(dtype)
    x = x[torch.isfinite(x)]
    return torch.cat([x, -x, torch.tensor([torch.finfo(dtype).max / 2], dtype=dtype)])


def _subnormals(dtype: torch.dtype) -> Tensor:
    info = torch.finfo(dtype)
    step = info.tiny * info.eps  # the smallest subnormal
    steps = torch.tensor([1, 2, 3, 5, 17], dtype=torch.float64)
    s = torch.cat([steps * step, torch.tensor([info.tiny - step])]).to(dtype)
    return torch.cat([s, -s])


# ------------------------------------------------------------------------------ the report


@dataclasses.dataclass(frozen=True)
class Clause:
    """One clause in one dtype: whether it held, what was measured, what the contract asks."""

    name: str
    dtype: str
    passed: bool
    measured: str
    bound: str = ""


@dataclasses.dataclass
class ConformanceReport:
    """Every clause's outcome for one implementation (``passed``: all held)."""

    impl: str
    function: str
    device: str
    oracles: dict[str, str]
    clauses: list[Clause]
    torch: str = torch.__version__

    @property
    def passed(self) -> bool:
        return all(clause.passed for clause in self.clauses)

    def failed(self) -> list[Clause]:
        return [clause for clause in self.clauses if not clause.passed]

    def outcome(self, name: str, dtype: str) -> bool:
        """Whether clause ``name`` held in ``dtype`` (KeyError if it was not checked)."""
        for clause in self.clauses:
            if (clause.name, clause.dtype) == (name, dtype):
                return clause.passed
        raise KeyError((name, dtype))

    def to_dict(self) -> dict[str, Any]:
        return {
            "impl": self.impl,
            "function": self.function,
            "formula": FUNCTIONS[self.function].formula,
            "device": self.device,
            "torch": self.torch,
            "oracles": self.oracles,
            "passed": self.passed,
            "clauses": [dataclasses.asdict(clause) for clause in self.clauses],
        }

    def table(self) -> str:
        """The report as a table under 100 columns: clause, dtype, result, measured (bound)."""
        oracles: dict[str, list[str]] = {}
        for dtype, name in self.oracles.items():
            oracles.setdefault(name, []).append(dtype)
        lines = [
            f"gelus check {self.impl} as {self.function}: {FUNCTIONS[self.function].formula}",
            f"torch {self.torch}, {self.device}; oracles: "
            + "; ".join(f"{', '.join(d)} {name}" for name, d in oracles.items()),
            f"{'clause':<11} {'dtype':<5} {'result':<6} measured (bound)",
        ]
        for c in self.clauses:
            bound = f" ({c.bound})" if c.bound else ""
            lines.append(
                f"{c.name:<11} {c.dtype:<5} {'pass' if c.passed else 'FAIL':<6} {c.measured}{bound}"
            )
        failed = len(self.failed())
        total = len(self.clauses)
        lines.append(f"{failed} of {total} clauses fail" if failed else f"all {total} clauses hold")
        return "\n".join(lines)


# ------------------------------------------------------------------------------ the clauses


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:80]}" if text else type(error).__name__


def _evaluate(fn: Callable, x: Tensor, device: str) -> tuple[Tensor | None, Tensor | None, str]:
    """(f(x), f'(x) by autograd, problem) as float64 on the CPU; problem is "" when both came."""
    xd = x.detach().to(device, copy=True).requires_grad_()  # the caller's x untouched
    try:
        y = fn(xd)
    except Exception as error:  # any implementation's failure is the clause's outcome
        return None, None, "raised " + _one_line(error)
    if not isinstance(y, Tensor) or y.shape != xd.shape:
        got = tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__
        return None, None, f"returned {got} for shape {tuple(xd.shape)}"
    value = y.detach().double().cpu()
    try:
        (g,) = torch.autograd.grad(y, xd, torch.ones_like(y), allow_unused=True)
    except Exception as error:
        return value, None, "no gradient: " + _one_line(error)
    if g is None:
        return value, None, "no gradient"
    return value, g.detach().double().cpu(), ""


def _number(v: float | str, dtype: torch.dtype) -> float:
    top = torch.finfo(dtype).max
    return top if v == "max" else -top if v == "-max" else float(v)


def _same(got: float, want: float, signed: bool) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return got == want and (not signed or math.copysign(1, got) == math.copysign(1, want))


def _fmt(v: float) -> str:
    return f"{v:+g}" if math.isinf(v) or v == 0 else f"{v:.4g}"


def _edge_clauses(fn: Callable, dtype: torch.dtype, label: str, device: str) -> list[Clause]:
    """Each edge among 63 ordinary values (a vectorized kernel's lanes) and alone."""
    n = len(EDGES)
    specials = torch.tensor([_number(e.x, dtype) for e in EDGES], dtype=dtype)
    many = torch.linspace(-4, 4, 64 * n, dtype=dtype)
    many[::64] = specials
    y, g, problem = _evaluate(fn, many, device)
    batch = (y[::64], None if g is None else g[::64])
    clauses = []
    for i, edge in enumerate(EDGES):
        want_y, want_g = _number(edge.value, dtype), edge.slope
        shown = _fmt(want_y) if edge.signed else f"{abs(want_y):g}"
        bound = f"want {shown}, {_fmt(want_g) if want_g else 0}"
        alone = _evaluate(fn, specials[i : i + 1].clone(), device)
        results = [("", *batch, problem), (" alone", *alone)]
        figures, ok = [], True
        for where, yy, gg, why in results:
            if yy is None:
                figures.append(why + where)
                ok = False
                continue
            y_i = yy[0 if where else i].item()
            g_i = math.nan if gg is None else gg[0 if where else i].item()
            held = _same(y_i, want_y, edge.signed) and gg is not None and _same(g_i, want_g, False)
            if not held or not where:  # the batch's figures, and the single element's if it differs
                slope = _fmt(g_i) if gg is not None else f"none ({why})"
                figures.append(f"f={_fmt(y_i)} f'={slope}{where}")
            ok &= held
        clauses.append(Clause(edge.label, label, ok, "; ".join(dict.fromkeys(figures)), bound))
    return clauses


def _subnormal_clause(fn: Callable, dtype: torch.dtype, label: str, device: str) -> Clause:
    """f(s) within one smallest-subnormal step of s/2, sign kept; f'(s) within an ulp of 1 of ½."""
    info = torch.finfo(dtype)
    step = info.tiny * info.eps
    s = _subnormals(dtype)
    y, g, problem = _evaluate(fn, s, device)
    bound = f"≤ 1 step, sign kept; ≤ {info.eps:.2g}"
    if y is None or g is None:
        return Clause("subnormal", label, False, problem, bound)
    error = (y - s.double() / 2).abs() / step
    signs = torch.signbit(y) == torch.signbit(s)
    slope = (g - 0.5).abs()
    worst = int(error.argmax())
    held = bool(error.max() <= 1) and bool(signs.all()) and bool(slope.max() <= info.eps)
    measured = f"{error.max().item():.3g} steps at {s[worst].item():.3g}"
    if not signs.all():
        k = int((~signs).nonzero()[0])
        measured += f", f({s[k].item():.3g})={_fmt(y[k].item())}"
    measured += f"; |f'-½| {slope.max().item():.2g}"
    return Clause("subnormal", label, held, measured, bound)


def _finite_clause(x: Tensor, y: Tensor | None, g: Tensor | None, label: str, why: str) -> Clause:
    if y is None or g is None:
        return Clause("finite", label, False, why)
    bad = ~(torch.isfinite(y) & torch.isfinite(g))
    if not bad.any():
        return Clause("finite", label, True, f"all {x.numel()} finite", "finite")
    k = int(bad.nonzero()[0])
    worst = f"f({x[k].item():.4g})={_fmt(y[k].item())} f'={_fmt(g[k].item())}"
    return Clause("finite", label, False, f"{int(bad.sum())} not: {worst}", "finite")


def _ulp(reference: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at |reference| rounded to it: 2^(e − p) for a value m·2^e with
    m ∈ [½, 1) and p significand bits, at least the smallest subnormal."""
    info = torch.finfo(dtype)
    bits = round(-math.log2(info.eps)) + 1
    rounded = torch.from_numpy(np.abs(reference)).to(dtype).double().numpy()
    _, exponent = np.frexp(rounded)
    return np.maximum(np.ldexp(1.0, exponent - bits), info.tiny * info.eps)


def _bounds(function: str, dtype: torch.dtype, x: np.ndarray, region: int, mpmath: bool):
    """(value bound in ulp per point, gradient bound check, the bounds' text) for one region."""
    if dtype == torch.float64:
        # a float64 oracle (no mpmath) errs as much as an accurate float64 implementation: the
        # bounds are doubled to hold both errors
        k = 1 if mpmath else 2
        return (
            k * (2 * x * x + 2),
            lambda err, ulp: (err <= k * (x * x + 1) * ulp) | (err <= k * 1e-16),
            "≤ 2x²+2; f' ≤ x²+1 ulp" if mpmath else "≤ 2(2x²+2); f' ≤ 2(x²+1) ulp",
        )
    if dtype == torch.float32:
        value, gradient = BOUNDS[function][region]
    else:
        value, gradient = HALF_ULP, torch.finfo(dtype).eps
    return (
        np.full_like(x, value),
        lambda err, ulp: err <= gradient,
        f"≤ {value:g} ulp; f' ≤ {gradient:.2g}",
    )


def _accuracy_clauses(x, y, g, dtype, label, function, oracle) -> list[Clause]:
    """The value's error in ulp and the gradient's by region (module docstring)."""
    xd = x.numpy()
    reference, reference_slope, _ = oracle
    counted = np.abs(reference) >= torch.finfo(dtype).tiny  # a subnormal's ulp say nothing
    if function == "gelu_tanh" and dtype != torch.float64:
        counted &= xd >= TANH_ULP_FROM  # fp32 σ(z) underflows below (docs/NUMERICS.md)
    clauses = []
    for k, (name, low, high) in enumerate(REGIONS):
        inside = (xd >= low) & (xd < high) & (xd <= 20.0) & np.isfinite(reference)
        if dtype != torch.float64:  # the table's [−20, 20]: below, the forms' documented flushes
            inside &= xd >= -20.0
        if y is None or g is None:
            clauses.append(Clause(name, label, False, "no value or gradient"))
            continue
        yd, gd = y.numpy()[inside], g.numpy()[inside]
        xs, ref, ref_slope = xd[inside], reference[inside], reference_slope[inside]
        ulp = np.abs(yd - ref) / _ulp(ref, dtype)
        ulp = np.where(counted[inside], ulp, 0.0)
        mpmath = oracle[2].startswith("mpmath")
        value_bound, slope_held, text = _bounds(function, dtype, xs, k, mpmath)
        slope_error = np.abs(gd - ref_slope)
        slope_ok = slope_held(slope_error, _ulp(ref_slope, torch.float64))
        with np.errstate(invalid="ignore"):
            value_ok = ulp <= value_bound
        held = bool(value_ok.all() and slope_ok.all())
        worst = int(np.nanargmax(np.where(np.isnan(ulp), np.inf, ulp))) if ulp.size else 0
        measured = f"{ulp[worst]:.3g} ulp at {xs[worst]:.4g}"
        if not value_ok.all():  # where the bound is exceeded most, if not at the largest error
            over = int(np.argmax(np.where(value_ok, -np.inf, ulp / value_bound)))
            if over != worst:
                measured += f", {ulp[over]:.2g} at {xs[over]:.4g}"
        measured += f"; f' {np.nanmax(slope_error):.2g}"
        if not slope_ok.all():
            bad = int(np.argmax(~slope_ok))
            measured += f" at {xs[bad]:.4g}"
        clauses.append(Clause(name, label, held, measured, text))
    return clauses


def _oracle(x: Tensor, dtype: torch.dtype, function: str):
    xd = x.double().numpy()
    if dtype == torch.float64:
        exact = mpmath_oracle(xd, function)
        if exact is not None:
            return exact
    return float64_oracle(xd, function)


def _dtype_clauses(fn, dtype, label, function, device) -> tuple[list[Clause], str]:
    clauses = _edge_clauses(fn, dtype, label, device)
    clauses.append(_subnormal_clause(fn, dtype, label, device))
    points = _points(dtype)
    x = torch.cat([points, _large(dtype)])
    y, g, problem = _evaluate(fn, x, device)
    clauses.append(_finite_clause(x, y, g, label, problem))
    n = points.numel()
    oracle = _oracle(points, dtype, function)
    values = (None if y is None else y[:n], None if g is None else g[:n])
    clauses += _accuracy_clauses(points.double(), *values, dtype, label, function, oracle)
    return clauses, oracle[2]


def check(
    impl: Callable[[Tensor], Tensor] | str,
    *,
    function: str = "gelu",
    dtypes: tuple[str, ...] = ("fp32", "fp64", "bf16", "fp16"),
    device: str = "cpu",
) -> ConformanceReport:
    """Apply the contract to ``impl`` as an implementation of ``function`` (one of
    :data:`FUNCTIONS`; default the exact x·Φ(x)) in each of ``dtypes`` (names of :data:`DTYPES`).

    ``impl``: a callable from a tensor to a tensor of the same shape (differentiable by autograd
    for the gradient clauses), or a name :func:`resolve` reads. Errors the callable raises are the
    clauses' outcomes; a name that does not resolve raises :class:`BadImplError`.
    """
    if function not in FUNCTIONS:
        raise ValueError(f"unknown function {function!r}; use one of {', '.join(FUNCTIONS)}")
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise ValueError(f"unknown dtype {unknown[0]!r}; use {', '.join(DTYPES)}")
    if isinstance(impl, str):
        fn, name = resolve(impl), impl
    else:
        fn, name = impl, getattr(impl, "__qualname__", None) or repr(impl)
    clauses, oracles = [], {}
    for label in dtypes:
        found, oracles[label] = _dtype_clauses(fn, DTYPES[label], label, function, device)
        clauses += found
    return ConformanceReport(name, function, device, oracles, clauses)


# ------------------------------------------------------------------------------ naming an IMPL

IMPL_FORMS = (
    "package.module:function or package.module.function (torch.nn.functional.gelu, "
    "jax.nn.gelu), transformers:NAME (an ACT2FN name), gelus:NAME (a registry name); "
    "keyword arguments in brackets: gelus:gelu[accurate=True]"
)


class BadImplError(ValueError):
    """An IMPL that names nothing callable; the message names the problem and the valid forms."""

    def __init__(self, impl: str, problem: str) -> None:
        super().__init__(f"cannot check {impl!r}: {problem}; IMPL is {IMPL_FORMS}")


class JaxMissingError(ImportError):
    """A ``jax.…`` IMPL where jax is not installed (the command line skips it)."""


def _keywords(impl: str) -> tuple[str, dict[str, Any]]:
    """``"name[a=1, b='x']"`` -> ("name", {"a": 1, "b": "x"}) (literals only)."""
    if not impl.endswith("]") or "[" not in impl:
        return impl, {}
    head, _, inner = impl[:-1].partition("[")
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
        assert isinstance(call, ast.Call) and not call.args
        keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        assert None not in keywords
    except (SyntaxError, ValueError, AssertionError):
        raise BadImplError(impl, f"[{inner}] is not keyword=literal, …") from None
    return head, keywords


def _import_object(impl: str, head: str) -> Any:
    """The object ``package.module:attr.attr`` or ``package.module.attr`` names."""
    if ":" in head:
        module_name, _, attribute = head.partition(":")
        candidates = [(module_name, attribute)]
    else:
        parts = head.split(".")
        candidates = [
            (".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)
        ]
    if not all(m and a for m, a in candidates) or not candidates:
        raise BadImplError(impl, "no module and function in it")
    for module_name, attribute in candidates:
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name):
                continue  # a shorter prefix may be the module
            raise BadImplError(
                impl, f"importing {module_name} failed ({_one_line(error)})"
            ) from None
        except Exception as error:
            raise BadImplError(
                impl, f"importing {module_name} failed ({_one_line(error)})"
            ) from None
        try:
            return functools.reduce(getattr, attribute.split("."), obj)
        except AttributeError:
            raise BadImplError(impl, f"module {module_name} has no {attribute}") from None
    raise BadImplError(impl, f"no module of {head} can be imported")


def resolve(impl: str) -> Callable[[Tensor], Tensor]:
    """The callable ``impl`` names (:data:`IMPL_FORMS`): an nn.Module class is instantiated with
    the bracketed keywords, a function takes them as ``functools.partial``; jax functions are
    wrapped to take and return torch tensors, their gradient by ``jax.vmap(jax.grad(f))``."""
    head, keywords = _keywords(impl.strip())
    if head.split(":")[0].split(".")[0] == "jax" and importlib.util.find_spec("jax") is None:
        raise JaxMissingError("jax is not installed (pip install jax)")
    if head.startswith("transformers:"):
        return _act2fn(impl, head.partition(":")[2], keywords)
    if head.startswith("gelus:"):
        from gelus.registry import UnknownActivationError, get_activation

        try:
            return get_activation(head.partition(":")[2], **keywords)
        except (UnknownActivationError, TypeError, ValueError) as error:
            raise BadImplError(impl, str(error).splitlines()[0]) from None
    obj = _import_object(impl, head)
    try:
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            obj = obj(**keywords)
        elif keywords:
            obj = functools.partial(obj, **keywords)
    except (TypeError, ValueError) as error:
        raise BadImplError(impl, _one_line(error)) from None
    if not callable(obj):
        raise BadImplError(impl, f"{head} is a {type(obj).__name__}, not callable")
    if (getattr(obj, "__module__", "") or "").split(".")[0] in ("jax", "jaxlib"):
        return _from_jax(obj)
    return obj


def _act2fn(impl: str, name: str, keywords: dict[str, Any]) -> Callable:
    if importlib.util.find_spec("transformers") is None:
        raise BadImplError(impl, "transformers is not installed (pip install transformers)")
    from transformers.activations import ACT2FN

    if name not in ACT2FN:
        raise BadImplError(impl, f"{name!r} is not in ACT2FN ({', '.join(sorted(ACT2FN))})")
    if keywords:
        raise BadImplError(impl, "ACT2FN names take no keywords")
    return ACT2FN[name]


def _from_jax(f: Callable) -> Callable[[Tensor], Tensor]:
    """``f`` on jax arrays as a torch function: the input converted to a jax array of its dtype,
    f(x) and f'(x) = vmap(grad(f))(x) converted back; backward multiplies by f'(x)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # float64 inputs stay float64
    types = {
        torch.float32: jnp.float32,
        torch.float64: jnp.float64,
        torch.bfloat16: jnp.bfloat16,
        torch.float16: jnp.float16,
    }
    slope = jax.vmap(jax.grad(lambda t: f(t)))

    def to_torch(a, dtype: torch.dtype) -> Tensor:
        return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(dtype)  # exact widening

    class _Jax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x: Tensor) -> Tensor:
            a = jnp.asarray(x.detach().double().cpu().numpy()).astype(types[x.dtype])
            ctx.save_for_backward(to_torch(slope(a.reshape(-1)).reshape(a.shape), x.dtype))
            return to_torch(f(a), x.dtype)

        @staticmethod
        def backward(ctx, grad: Tensor) -> Tensor:
            (g,) = ctx.saved_tensors
            return grad * g

    return _Jax.apply


# ------------------------------------------------------------------------------ the command line


def register(subparsers) -> None:
    """Add ``gelus check IMPL``."""
    parser = subparsers.add_parser(
        "check",
        help="apply gelus's numerical contract to any GELU implementation",
        description="Apply the numerical contract of docs/NUMERICS.md (±inf, nan, −0, the "
        "largest finite value, subnormals, finite values and gradients, ulp by region against "
        "float64 and mpmath oracles) to IMPL in each dtype; print each clause's result and exit "
        "1 when any fails, 2 when IMPL names nothing callable.",
        epilog=f"IMPL is {IMPL_FORMS}.",
    )
    parser.add_argument("impl", metavar="IMPL", help="the implementation to check")
    parser.add_argument(
        "--function",
        choices=list(FUNCTIONS),
        default="gelu",
        help="the function IMPL claims to compute (default gelu, the exact x·Φ(x))",
    )
    parser.add_argument(
        "--dtype",
        action="append",
        choices=list(DTYPES),
        help="a dtype to check (repeatable; default all four)",
    )
    parser.add_argument("--device", default="cpu", help="the device of the inputs (default cpu)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    parser.set_defaults(func=_main)


def _main(args) -> int:
    import sys

    dtypes = tuple(dict.fromkeys(args.dtype)) if args.dtype else tuple(DTYPES)
    try:
        report = check(args.impl, function=args.function, dtypes=dtypes, device=args.device)
    except JaxMissingError as error:
        print(f"gelus check: {args.impl} skipped: {error}")
        return 0
    except BadImplError as error:
        print(f"gelus check: error: {error}", file=sys.stderr)
        return 2
    print(report.table())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report.to_dict(), file, indent=2, ensure_ascii=False)
            file.write("\n")
    return 0 if report.passed else 1
