"""Figure 1 of the paper and the accuracy of the GELU family in float32.

Plot functions take an ``ax`` and return it. The references are float64 formulas evaluated with
torch:

    exact GELU      x·½·erfc(−x/√2)
    tanh form       x·σ(2u), u = √(2/π)(x + 0.044715x³)   (= ½x(1 + tanh u), without cancellation)
    sigmoid form    x·σ(1.702x)
    SiLU            x·σ(x)

An error in ulp is |y − reference| divided by the float32 spacing at the reference.
"""

import inspect
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

import gelus.functional as G
from gelus.plots.palette import color_for, label_for

__all__ = [
    "EDGE_INPUTS",
    "REGIONS",
    "AccuracyRow",
    "accuracy_markdown",
    "accuracy_table",
    "activations_figure",
    "family_members",
    "figure1",
    "plot_activations",
    "plot_approximation_error",
    "plot_derivatives",
    "plot_ulp_error",
    "reference",
    "ulp_error",
]

_FLT_MAX = float(torch.finfo(torch.float32).max)
REGIONS = (
    ("x < −3", -10.0, -3.0),
    ("[−3, −1)", -3.0, -1.0),
    ("[−1, 1)", -1.0, 1.0),
    ("[1, 10]", 1.0, 10.0),
)
EDGE_INPUTS = (
    ("+inf", math.inf),
    ("−inf", -math.inf),
    ("nan", math.nan),
    ("−0", -0.0),
    ("FLT_MAX", _FLT_MAX),
)
# What docs/NUMERICS.md asks of every member at the edge inputs, in the same order.
_CONTRACT = ("+inf", "−0 or 0", "nan", "−0", "FLT_MAX")


# --------------------------------------------------------------------------- float64 references
def reference(form: str, x: Tensor) -> Tensor:
    """The float64 reference of ``form`` ("none", "tanh", "sigmoid", "silu") at ``x``."""
    x = x.to(torch.float64)
    if form == "none":
        return x * 0.5 * torch.special.erfc(-x / math.sqrt(2.0))
    if form == "tanh":
        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        return x * torch.sigmoid(2.0 * u)
    if form == "sigmoid":
        return x * torch.sigmoid(1.702 * x)
    if form == "silu":
        return x * torch.sigmoid(x)
    raise ValueError(f"unknown form {form!r}; use one of none, tanh, sigmoid, silu")


def ulp_error(y: Tensor, ref: Tensor) -> np.ndarray:
    """|y − ref| in units of the float32 spacing at ``ref`` (inf where y is nan or inf and ref is not)."""
    y64 = y.detach().to(torch.float64).numpy()
    ref64 = ref.detach().to(torch.float64).numpy()
    spacing = np.spacing(np.abs(ref64.astype(np.float32))).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(y64 - ref64) / spacing
    return np.where(np.isfinite(y64), error, np.inf)


# --------------------------------------------------------------------------- the table
def family_members() -> dict[str, tuple[Callable[[Tensor], Tensor], str]]:
    """``{name: (float32 function, reference form)}``: the gelus family and torch's counterparts."""
    members: dict[str, tuple[Callable[[Tensor], Tensor], str]] = {
        "gelus gelu (none)": (lambda x: G.gelu(x), "none"),
        "gelus gelu (tanh)": (lambda x: G.gelu(x, approximate="tanh"), "tanh"),
        "gelus gelu (sigmoid)": (lambda x: G.gelu(x, approximate="sigmoid"), "sigmoid"),
    }
    if "accurate" in inspect.signature(G.gelu).parameters:
        members["gelus gelu (none, accurate=True)"] = (lambda x: G.gelu(x, accurate=True), "none")
    members["gelus silu"] = (G.silu, "silu")
    members["gelus generalized_gelu (μ=0, σ=1)"] = (
        lambda x: G.generalized_gelu(x, 0.0, 1.0),
        "none",
    )
    members["torch F.gelu"] = (F.gelu, "none")
    members["torch F.gelu (tanh)"] = (lambda x: F.gelu(x, approximate="tanh"), "tanh")
    members["torch F.silu"] = (F.silu, "silu")
    return members


def _region_points(low: float, high: float, n: int) -> Tensor:
    """n float32 values evenly spaced in bit pattern over [low, high] (dense near 0, as fp32 is)."""
    if low < 0 < high:
        return torch.cat([_region_points(low, -0.0, n // 2), _region_points(0.0, high, n - n // 2)])
    sign = -1.0 if high <= 0 and low < 0 else 1.0
    a, b = sorted((abs(low), abs(high)))
    bits = np.array([a, b], dtype=np.float32).view(np.int32)
    magnitudes = np.unique(np.linspace(bits[0], bits[1], n).astype(np.int32)).view(np.float32)
    return sign * torch.from_numpy(magnitudes.copy())


class AccuracyRow(NamedTuple):
    name: str
    max_ulp: tuple[float, ...]  # per region of REGIONS
    edges: tuple[float, ...]  # outputs at EDGE_INPUTS


def accuracy_table(points_per_region: int = 1 << 18) -> list[AccuracyRow]:
    """Max ulp error per region and edge-case outputs of every member of :func:`family_members`.

    Each member runs in float32 on ``points_per_region`` inputs per region (contiguous tensors,
    so torch takes its default path) and on the five edge inputs in one 5-element tensor.
    """
    samples = [_region_points(low, high, points_per_region) for _, low, high in REGIONS]
    references = {
        form: [reference(form, x) for x in samples] for form in ("none", "tanh", "sigmoid", "silu")
    }
    edge_x = torch.tensor([v for _, v in EDGE_INPUTS], dtype=torch.float32)
    rows = []
    with torch.no_grad():
        for name, (function, form) in family_members().items():
            max_ulp = tuple(
                float(ulp_error(function(x), ref).max())
                for x, ref in zip(samples, references[form], strict=True)
            )
            edges = tuple(float(v) for v in function(edge_x.clone()))
            rows.append(AccuracyRow(name, max_ulp, edges))
    return rows


def _format_ulp(value: float) -> str:
    if not math.isfinite(value):
        return "nan/inf"
    return f"{value:.3g}" if value < 1e4 else f"{value:.2e}"


def _format_edge(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "+inf" if value > 0 else "−inf"
    if value == 0:
        return "−0" if math.copysign(1.0, value) < 0 else "0"
    if value == _FLT_MAX:
        return "FLT_MAX"
    return f"{value:.4g}"


def accuracy_markdown(rows: list[AccuracyRow]) -> str:
    """The table as Markdown: max ulp per region (float32 vs the float64 reference), edge outputs."""
    header = [
        "function",
        *(f"max ulp {name}" for name, _, _ in REGIONS),
        *(f"f({name})" for name, _ in EDGE_INPUTS),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.name, *map(_format_ulp, row.max_ulp), *map(_format_edge, row.edges)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        "| contract (docs/NUMERICS.md) | "
        + " | ".join("" for _ in REGIONS)
        + " | "
        + " | ".join(_CONTRACT)
        + " |"
    )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the figures
def _curves(x: Tensor) -> dict[str, Tensor]:
    return {"gelu": G.gelu(x), "relu": F.relu(x), "elu": F.elu(x)}


def plot_activations(ax: Axes, low: float = -3.0, high: float = 3.0) -> Axes:
    """Figure 1: GELU (μ=0, σ=1), ReLU and ELU (α=1)."""
    x = torch.linspace(low, high, 601, dtype=torch.float64)
    for name, y in _curves(x).items():
        ax.plot(x.numpy(), y.numpy(), color=color_for(name), label=label_for(name), lw=1.8)
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    ax.set_title("GELU (μ=0, σ=1), ReLU, ELU (α=1)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_derivatives(ax: Axes, low: float = -3.0, high: float = 3.0) -> Axes:
    """f′(x) of GELU, ReLU and ELU by autograd in float64."""
    x = torch.linspace(low, high, 601, dtype=torch.float64, requires_grad=True)
    for name, y in _curves(x).items():
        (grad,) = torch.autograd.grad(y.sum(), x)
        ax.plot(
            x.detach().numpy(), grad.numpy(), color=color_for(name), label=label_for(name), lw=1.8
        )
    ax.set_xlabel("x")
    ax.set_ylabel("f′(x)")
    ax.set_title("derivatives", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_approximation_error(ax: Axes, low: float = -10.0, high: float = 10.0) -> Axes:
    """|approximation − exact GELU| of the tanh and sigmoid forms, float64, log scale."""
    x = torch.linspace(low, high, 4001, dtype=torch.float64)
    exact = reference("none", x)
    for form in ("tanh", "sigmoid"):
        error = (reference(form, x) - exact).abs().numpy()
        error[error == 0] = np.nan  # log scale: the crossings have no height
        ax.plot(
            x.numpy(),
            error,
            color=color_for(f"gelu_{form}"),
            label=f"|{form} form − exact|",
            lw=1.4,
        )
    ax.set_yscale("log")
    ax.set_ylim(1e-12, 1.0)  # below this the difference is float64 rounding, not the approximation
    ax.set_xlabel("x")
    ax.set_ylabel("absolute error")
    ax.set_title("approximations vs exact GELU (float64)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return ax


def plot_ulp_error(
    ax: Axes, low: float = -10.0, high: float = 10.0, points: int = 1 << 18, bins: int = 400
) -> Axes:
    """float32 error in ulp of torch's F.gelu and gelus' gelu (and ``accurate=True``, where the
    option exists) against the float64 reference.

    Each line is the maximum over ``bins`` equal bins in x; bins without error are not drawn.
    """
    x = torch.linspace(low, high, points, dtype=torch.float32)
    ref = reference("none", x)
    edges = np.linspace(low, high, bins + 1)
    which = np.clip(np.digitize(x.numpy(), edges) - 1, 0, bins - 1)
    lines = [
        ("torch F.gelu", F.gelu, "#555555", "-"),
        ("gelus gelu", G.gelu, color_for("gelu"), "-"),
    ]
    if "accurate" in inspect.signature(G.gelu).parameters:
        lines.append(
            (
                "gelus gelu, accurate=True",
                lambda t: G.gelu(t, accurate=True),
                color_for("gelu"),
                ":",
            )
        )
    for label, function, color, style in lines:
        with torch.no_grad():
            error = ulp_error(function(x), ref)
        worst = np.zeros(bins)
        np.maximum.at(worst, which, np.minimum(error, 1e30))
        worst[worst == 0] = np.nan
        centres = 0.5 * (edges[1:] + edges[:-1])
        ax.step(centres, worst, where="mid", color=color, ls=style, label=label, lw=1.2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.1)  # a correctly rounded result is within 0.5 ulp
    ax.set_xlabel("x")
    ax.set_ylabel("max error (float32 ulp)")
    ax.set_title("exact GELU in float32 vs float64 reference", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return ax


def figure1() -> Figure:
    """The paper's Figure 1 on its own."""
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    plot_activations(fig.subplots())
    return fig


def activations_figure(points: int = 1 << 18) -> Figure:
    """Four panels: the curves, their derivatives, the approximation errors, the float32 ulp error."""
    fig = Figure(figsize=(10.5, 7.5), layout="constrained")
    (a, b), (c, d) = fig.subplots(2, 2)
    plot_activations(a)
    plot_derivatives(b)
    plot_approximation_error(c)
    plot_ulp_error(d, points=points)
    return fig
