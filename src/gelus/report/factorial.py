"""The gap to the reference modelled on log N and log T across cells, each cell's seeds independent.

A *cell* c is one config (a size N_c, a training length T_c). Within it every seed s ran the
activation a and the reference r on the same data order, each at the lr chosen for it in that
cell, so the within-cell difference is a real pair,

    d_{s,c} = m(a, s, c) − m(r, s, c),   g_c = mean_s d_{s,c},   v_c = s_c² / n_c,

with s_c² the sample variance of the n_c differences. Across cells nothing is paired: seed s at
d 48 and seed s at d 128 are different models, so the cells' gaps are independent estimates. The
gap is fitted by ordinary least squares over cells,

    g_c = a + Σ_j b_j x_{c,j}   (x = log₂ N, log₂ T: the factorial; or one of them: a trend),

each coefficient a fixed combination of the cells' gaps, b_j = Σ_c w_{j,c} g_c with
W = (XᵀX)⁻¹Xᵀ, so its variance is the sandwich Var b_j = Σ_c w_{j,c}² v_c (the cells' own
variances, no assumption that they are equal) and its t statistic b_j / √Var b_j is referred to
Student's t on the Welch–Satterthwaite degrees of freedom

    ν_j = (Σ_c w_{j,c}² v_c)² / Σ_c (w_{j,c}² v_c)² / (n_c − 1),

which with two cells is Welch's unequal-variance t-test. A cell enters with two or more finite
pairs; a seed whose run of either side diverged is left out of its cell and counted. The interval
is b_j ± t_{(1+c)/2, ν_j} · √Var b_j. Holm over the family (activations × slopes) and the verdict
are :func:`~gelus.report.stats.adjust`'s; the slopes carry no paired differences, so no sign-flip
p, leave-one-seed-out range or tie (a slope has no margin).

How often the whole procedure, the lr chosen per cell included, calls a slope where there is none,
and how often it finds slopes like the observed ones, is simulated at the design that ran by
:func:`simulate` (docs/REPORT.md, "Trends and the factorial"; ``tests/report/test_factorial.py``).
Everything here is a pure function of :class:`~gelus.experiments.selection.Selection` pairs, so
the same model is judged at any lr rule (each cell's chosen lr, a matched lr, the mean rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from gelus.experiments.selection import Selection
from gelus.report.metrics import Verdict
from gelus.report.stats import HEADLINE, Comparison

__all__ = [
    "CellGap",
    "SimulatedRates",
    "Slope",
    "cell_gap",
    "design_matrix",
    "factorial",
    "fit_slopes",
    "grid_edge",
    "identified",
    "rates_at_design",
    "simulate",
]

DEPTHS = (0.0, 1.0, 3.0)  # the lr grids simulated: the off-centre lrs this many run sds worse

Point = tuple[Sequence[float], Selection, Selection]  # (coordinates, activation's, reference's)


class CellGap(NamedTuple):
    """One cell's gap of an activation to the reference: the within-cell paired differences."""

    config_hash: str
    variant: str  # the config's label
    coordinates: tuple[float, ...]  # the cell's x (log₂ N, log₂ T, or one of them)
    seeds: tuple[int, ...]  # the seeds both sides ran, finite
    differences: tuple[float, ...]  # activation − reference per seed
    mean: float  # g_c
    variance: float  # s_c² / n_c (nan below two pairs)
    lr: float  # the activation's lr in this cell
    reference_lr: float  # the reference's
    edge: str  # "" or where a chosen lr sits at its cell's grid edge ("relu at lowest")
    diverged: int  # shared seeds left out because a run of the pair diverged


class Slope(NamedTuple):
    """One fitted coefficient with its sandwich standard error, Satterthwaite df, interval, p."""

    estimate: float
    se: float
    df: float
    ci: tuple[float, float]
    p: float


def grid_edge(selection: Selection) -> str:
    """Where ``selection``'s chosen lr sits on its grid: "lowest" or "highest" at an edge of the
    grid it was chosen from (its setting's lrs in ``val_medians``, two or more), else ""."""
    grid = sorted({lr for setting, lr in selection.val_medians if setting == selection.setting})
    if not selection.lr_selected or len(grid) < 2:
        return ""
    return "lowest" if selection.lr == grid[0] else "highest" if selection.lr == grid[-1] else ""


def cell_gap(coordinates: Sequence[float], treatment: Selection, reference: Selection) -> CellGap:
    """The cell's paired differences treatment − reference over the seeds both ran with finite
    values, their mean and the variance of the mean, s²/n (n − 1 in s²)."""
    shared = sorted(set(treatment.values) & set(reference.values))
    seeds = tuple(s for s in shared if math.isfinite(treatment.values[s] + reference.values[s]))
    d = np.array([treatment.values[s] - reference.values[s] for s in seeds], dtype=np.float64)
    variance = float(d.var(ddof=1) / d.size) if d.size > 1 else math.nan
    edges = [f"{s.activation} at {edge}" for s in (treatment, reference) if (edge := grid_edge(s))]
    return CellGap(
        treatment.config_hash,
        treatment.variant,
        tuple(float(x) for x in coordinates),
        seeds,
        tuple(d.tolist()),
        float(d.mean()) if d.size else math.nan,
        variance,
        treatment.lr,
        reference.lr,
        ", ".join(edges),
        len(shared) - len(seeds),
    )


def design_matrix(coordinates: Sequence[Sequence[float]]) -> np.ndarray:
    """X = [1, x_{c,1}, …] over cells; raises where the slopes are not identified (fewer cells than
    coefficients, or the cells on one line of the axes)."""
    x = np.asarray(coordinates, dtype=np.float64)
    x = x.reshape(len(x), -1)
    if not identified(x):
        raise ValueError(
            f"the slopes on {x.shape[1]} axes are not identified by the cells at "
            f"{x.tolist()}: give cells that differ along every axis, and not along one line"
        )
    return np.column_stack([np.ones(len(x)), x])


def identified(coordinates: Sequence[Sequence[float]]) -> bool:
    """Whether cells at ``coordinates`` identify a slope on every axis (:func:`design_matrix`
    would not raise): at least one more cell than axes, not all on one line."""
    x = np.asarray(coordinates, dtype=np.float64)
    if x.size == 0:
        return False
    x = x.reshape(len(x), -1)
    design = np.column_stack([np.ones(len(x)), x])
    return len(x) >= design.shape[1] and np.linalg.matrix_rank(design) == design.shape[1]


def fit_slopes(cells: Sequence[CellGap], confidence: float = HEADLINE.confidence) -> list[Slope]:
    """The OLS slopes of the cells' gaps on their coordinates (:func:`design_matrix`), each with
    Var b_j = Σ_c w_{j,c}² v_c, the Welch–Satterthwaite ν_j, the t interval at ``confidence`` and
    the two-sided p (module docstring). Cells need two or more pairs."""
    from scipy import stats

    if any(len(c.seeds) < 2 for c in cells):
        raise ValueError(
            "fit_slopes: every cell needs two or more finite pairs; leave out the rest"
        )
    design = design_matrix([c.coordinates for c in cells])
    weights = np.linalg.solve(design.T @ design, design.T)  # (p, C): b = W g
    g = np.array([c.mean for c in cells])
    v = np.array([c.variance for c in cells])
    dof = np.array([len(c.seeds) - 1 for c in cells], dtype=np.float64)
    found = []
    for w in weights[1:]:
        estimate, parts = float(w @ g), w * w * v
        variance = float(parts.sum())
        if variance == 0:
            found.append(Slope(estimate, 0.0, math.inf, (estimate, estimate), float(estimate == 0)))
            continue
        se, df = math.sqrt(variance), variance**2 / float((parts * parts / dof).sum())
        half = float(stats.t.ppf((1 + confidence) / 2, df)) * se
        p = float(2 * stats.t.sf(abs(estimate) / se, df))
        found.append(Slope(estimate, se, df, (estimate - half, estimate + half), p))
    return found


def factorial(
    points: Sequence[Point],
    axes: Sequence[str],
    *,
    lower_is_better: bool = True,
    confidence: float = HEADLINE.confidence,
) -> tuple[list[Comparison], list[CellGap]]:
    """One activation's slopes against the reference over the cells ``points`` ((coordinates,
    activation's selection, reference's selection) per cell; one coordinate per name in ``axes``),
    unadjusted, as Comparisons (``metric`` "bpb gap per unit of log₂ parameters"; ``seeds``: those
    of any cell; no paired ``differences``), and the cells used; pass the family's slopes to
    :func:`gelus.report.stats.adjust` (``pairs=False``) for Holm and the verdicts."""
    if not points:
        raise ValueError("factorial: no cells")
    every = [cell_gap(x, t, b) for x, t, b in points]
    cells = [c for c in every if len(c.seeds) >= 2]
    slopes = fit_slopes(cells, confidence)
    if len(slopes) != len(axes):
        raise ValueError(f"factorial: {len(slopes)} coordinates per cell, axes {list(axes)}")
    _, first, reference = points[0]
    chosen = all(t.lr_selected and b.lr_selected for _, t, b in points)
    seeds = tuple(sorted({s for c in cells for s in c.seeds}))
    left_out = sum(c.diverged + len(c.seeds) * (len(c.seeds) < 2) for c in every)
    found = [
        Comparison(
            experiment=first.experiment,
            setting=first.setting,
            metric=f"{first.metric} gap per unit of {axis}",
            treatment=first.activation,
            baseline=reference.activation,
            seeds=seeds,
            differences=(),
            mean=slope.estimate,
            ci=slope.ci,
            verdict=Verdict.UNRESOLVED,
            lr="chosen" if chosen else f"{first.lr:g}",
            diverged=left_out,
            variant=f"trend over {axis}",
            p=slope.p,
            lower_is_better=lower_is_better,
        )
        for axis, slope in zip(axes, slopes, strict=True)
    ]
    return found, cells


class SimulatedRates(NamedTuple):
    """What :func:`simulate` measured: over ``reps`` simulated families, the share in which Holm
    called a slope whose true value is 0 (family-wise; with no effects, the family-wise error
    rate) and, per activation and slope, the share in which it was called in its true direction
    (power; nan where its true slope is 0)."""

    reps: int
    family_wise: float
    power: tuple[tuple[float, ...], ...]  # [activation][slope]


def _chosen_gaps(cells, effects, depth, share, reps, rng) -> np.ndarray:
    """Simulated within-cell differences [rep, activation, cell, seed] (NaN beyond a cell's n):
    every run at 3 lrs whose true values are (depth, 0, depth)·r_c, its validation value with
    noise of variance share·sd², its test value that plus noise of (1 − share)·sd² plus the
    activation's true gap; each side's lr the one of lowest median validation over seeds."""
    x = np.array([c.coordinates for c in cells[0]], dtype=np.float64)  # (C, p)
    n = np.array([min(len(a[i].seeds) for a in cells) for i in range(len(x))])
    sd = np.sqrt(np.array([[c.variance * len(c.seeds) for c in a] for a in cells]))  # (m, C)
    reference = sd.min(axis=0) / math.sqrt(2)  # each side's run sd: the reference's r_c ...
    runs = np.vstack([reference, np.sqrt(np.maximum(sd**2 - reference**2, 0.0))])  # ... and a's
    shape = (reps, len(cells) + 1, len(x), int(n.max()), 3)
    scale = runs[None, :, :, None, None]
    val = depth * reference[None, None, :, None, None] * np.array([1.0, 0.0, 1.0])
    val = val + scale * math.sqrt(share) * rng.standard_normal(shape)
    val[:, :, np.arange(int(n.max()))[None, :] >= n[:, None]] = np.nan  # seeds a cell lacks
    test = val + scale * math.sqrt(1 - share) * rng.standard_normal(shape)
    test[:, 1:] += (np.asarray(effects, dtype=np.float64) @ x.T)[None, :, :, None, None]
    choice = np.nanmedian(val, axis=3).argmin(-1)[:, :, :, None, None]
    picked = np.take_along_axis(test, np.broadcast_to(choice, (*shape[:4], 1)), -1)[..., 0]
    return picked[:, 1:] - picked[:, :1]


def _vector_slopes(d: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slopes, two-sided p) [..., slope] of the within-cell differences ``d`` [..., cell, seed]
    (NaN: absent), as :func:`fit_slopes` computes them, for many families at once."""
    from scipy import stats

    n = np.sum(~np.isnan(d), axis=-1)
    g, v = np.nanmean(d, axis=-1), np.nanvar(d, axis=-1, ddof=1) / n
    design = design_matrix(x)
    weights = np.linalg.solve(design.T @ design, design.T)[1:]
    slopes = g @ weights.T
    parts = v[..., None, :] * weights**2  # [..., slope, cell]
    variance = parts.sum(-1)
    df = variance**2 / (parts**2 / (n[..., None, :] - 1)).sum(-1)
    p = 2 * stats.t.sf(np.abs(slopes) / np.sqrt(variance), df)
    return slopes, p


def _holm_rejected(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down at ``alpha`` over the last axis: True where rejected."""
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    passes = np.take_along_axis(p, order, -1) < alpha / (m - np.arange(m))
    rejected = np.cumprod(passes, axis=-1).astype(bool)
    return np.take_along_axis(rejected, np.argsort(order, -1), -1)


def simulate(
    cells: Sequence[Sequence[CellGap]],
    *,
    rng: np.random.Generator,
    reps: int = 2_000,
    effects: Sequence[Sequence[float]] | None = None,
    depth: float = 0.0,
    share: float = 0.5,
    alpha: float = 0.05,
) -> SimulatedRates:
    """The procedure's error rate and power at a design (``cells``: each activation's cells, in
    one order: their coordinates, seeds n_c and spread s_c, the activation−reference differences'
    sd), simulated ``reps`` times: runs at 3 lrs (true values (depth, 0, depth) in the reference's
    run sd; each side's run sd split so the differences keep s_c), the lr chosen per cell and side
    on validation (``share``: the part of a run's test noise its validation value shares), the
    within-cell gaps fitted (:func:`fit_slopes`), Holm at ``alpha`` over activations × slopes.
    ``effects``: each activation's true slopes (None: all 0, the null); ``rng``: the draws' source
    (the report's: ``Aggregate.rng``)."""
    if not cells or any(len(a) != len(cells[0]) for a in cells):
        raise ValueError("simulate: give every activation's cells, the same cells in one order")
    x = np.array([c.coordinates for c in cells[0]], dtype=np.float64)
    true = np.zeros((len(cells), x.shape[1])) if effects is None else np.asarray(effects, float)
    d = _chosen_gaps(cells, true, depth, share, reps, rng)
    slopes, p = _vector_slopes(d, x)  # [rep, activation, slope]
    rejected = _holm_rejected(p.reshape(reps, -1), alpha).reshape(p.shape)
    false = rejected & (true == 0)[None]
    right = rejected & (np.sign(slopes) == np.sign(true)[None])
    power = np.where(true != 0, right.mean(0), np.nan).tolist()
    return SimulatedRates(reps, float(false.any(axis=(1, 2)).mean()), tuple(map(tuple, power)))


def rates_at_design(
    cells: Sequence[Sequence[CellGap]],
    observed: Sequence[Sequence[float]],
    *,
    rng: np.random.Generator,
    reps: int = 2_000,
    alpha: float = 0.05,
) -> tuple[float, tuple[tuple[float, ...], ...]] | None:
    """(the family-wise error under the null, the highest over the lr grids :data:`DEPTHS`; each
    activation's power per slope with its ``observed`` slopes true, at depth 1) of
    :func:`simulate` at the design that ran: each activation's fitted ``cells``, those every
    activation has. None where those cells identify no slope."""
    common = set.intersection(*({c.coordinates for c in a} for a in cells)) if cells else set()
    if not identified(sorted(common)):
        return None
    aligned = [
        sorted((c for c in a if c.coordinates in common), key=lambda c: c.coordinates)
        for a in cells
    ]
    worst = max(
        simulate(aligned, rng=rng, reps=reps, depth=depth, alpha=alpha).family_wise
        for depth in DEPTHS
    )
    found = simulate(aligned, rng=rng, reps=reps, effects=observed, depth=1.0, alpha=alpha)
    return worst, found.power
