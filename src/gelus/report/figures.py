"""The paper's figures, drawn from experiment records alone.

Plot functions take an ``ax`` (a matplotlib Axes) and return it; :func:`experiment_figures` turns
one experiment's records into whole figures, as its preset's :class:`FigureSpec` says. Records of
different configs are separate curves, labelled by what differs. Curves are the aggregate's statistic
over seeds (:class:`~gelus.experiments.aggregate.Aggregate`, the median) with its interval as a
shaded band, each point's generator seeded from its own key, and the summary figure shows each
result's interval as its table cell does; colours come from :data:`gelus.plots.palette.PALETTE`.
Missing data means no curve (or no figure), never an error. Import matplotlib with the Agg backend
before this module if you draw without a display (``gelus report`` does).
"""

import math
import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from gelus.experiments import timing
from gelus.experiments.protocol import FigureSpec
from gelus.experiments.selection import Selection, curves_by_seed
from gelus.plots.palette import color_for, label_for, marker_for
from gelus.report.stats import HEADLINE, Aggregate

__all__ = ["METRIC_LABELS", "experiment_figures", "plot_curve", "plot_noise", "plot_summary"]

METRIC_LABELS = {
    "loss": "log loss (nats)",
    "error": "error (%)",
    "accuracy": "accuracy (%)",
    "recon_error": "reconstruction error (MSE)",
    "seconds": "wall time (s)",
    "bpb": "bits per byte",
}
_PERCENT = {"error", "accuracy"}  # stored as fractions, drawn as percentages


def _title(fig: Figure, text: str, fontsize: float = 10) -> None:
    """The figure's title, wrapped to the figure's width (a one-panel figure is narrow)."""
    # ~0.55 em per character of the default sans-serif font, 72 points per inch
    per_line = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)) - 4)
    fig.suptitle(textwrap.fill(text, per_line), fontsize=fontsize)


def _scale(metric: str) -> float:
    return 100.0 if metric in _PERCENT else 1.0


def _band(
    curves: Sequence[dict[Any, float]], aggregate: Aggregate, key: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, the aggregate and its interval over the curves, at every x present in all of them (the
    interval's generator seeded from (*key, x)); a non-finite value (a diverged run's NaN) is left
    out, so it never sets the axis range."""
    shared = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    xs, centers, lows, highs = [], [], [], []
    for x in shared:
        values = [c[x] for c in curves if math.isfinite(c[x])]
        if not values:
            continue
        xs.append(x)
        centers.append(aggregate.point(values))
        low, high = aggregate.interval(values, *key, x)
        lows.append(low)
        highs.append(high)
    return np.asarray(xs, dtype=float), np.asarray(centers), np.asarray(lows), np.asarray(highs)


def plot_curve(
    ax: Axes,
    curves: Sequence[dict[Any, float]],
    *,
    activation: str,
    metric: str,
    aggregate: Aggregate = HEADLINE,
    key: tuple = (),
    label: str | None = None,
    light: bool = False,
    linestyle: str = "-",
) -> Axes:
    """The aggregate over seeds (the median) of per-seed ``{x: value}`` curves, with its interval
    as a band; ``key`` names the curve (each point's generator is seeded from it and x).

    ``light=True`` draws the thin, faint style the paper uses for held-out curves; ``linestyle``
    tells configs apart (the colour is the activation's).
    """
    xs, median, low, high = _band(curves, aggregate, key)
    if xs.size == 0:
        return ax
    diverged = sum(not any(map(math.isfinite, c.values())) for c in curves)
    if diverged and label:
        label = f"{label} ({diverged} diverged)"
    scale = _scale(metric)
    color = color_for(activation)
    ax.plot(
        xs,
        median * scale,
        color=color,
        label=label,
        linestyle=linestyle,
        lw=1.0 if light else 1.8,
        alpha=0.55 if light else 1.0,
        marker=marker_for(activation),
        markevery=max(1, xs.size // 8),
        markersize=3.5,
    )
    if len(curves) > 1:
        ax.fill_between(
            xs, low * scale, high * scale, color=color, alpha=0.08 if light else 0.18, lw=0
        )
    return ax


def _selected(selections: Sequence[Selection]) -> dict[tuple[str, str, str, float], Selection]:
    """(config hash, activation, setting, lr) -> selection, for the first reported metric only."""
    first_metric = selections[0].metric if selections else None
    return {
        (s.config_hash, s.activation, s.setting, s.lr): s
        for s in selections
        if s.metric == first_metric
    }


def _label(selection: Selection) -> str:
    """The activation as the paper writes it, with its config's variant when there are several."""
    name = label_for(selection.activation)
    return f"{name} [{selection.variant}]" if selection.variant else name


def _panel_label(setting: str, lr: float, show_lr: bool) -> str:
    parts = [setting or "default"] if setting or not show_lr else []
    if show_lr:
        parts.append(f"lr={lr:g}")
    return ", ".join(parts)


def _epoch_label(spec: FigureSpec, steps_per_epoch: Mapping[str, int] | None) -> str:
    """A transformer's "epoch" is a number of optimizer steps, not a pass over the data."""
    steps = set((steps_per_epoch or {}).values())
    return f"epoch ({steps.pop():,} steps each)" if spec.wall_time and len(steps) == 1 else "epoch"


def _caption(aggregate: Aggregate, band: bool = True) -> str:
    """How a figure aggregates seeds, as its title says it."""
    return f"{aggregate.name} over seeds ({aggregate.level} CI{' band' if band else ''})"


class _Panels(NamedTuple):
    """What every panel of the curve figure shares."""

    chosen: dict[tuple[str, str, str, float], Selection]
    metric: str
    curves: dict[str, dict]  # split -> curves_by_seed of the metric
    per_lr: bool
    aggregate: Aggregate

    def draw(self, ax: Axes, setting: str, panel_lr: float) -> None:
        """Every chosen curve of one (setting, lr) panel: training bold, held-out light."""
        styles = ("-", "--", ":", "-.")  # one per config, in the order of the selections
        variants = list(dict.fromkeys(s.variant for s in self.chosen.values()))
        for key, selection in sorted(self.chosen.items()):
            if key[2] != setting or (self.per_lr and key[3] != panel_lr):
                continue
            style = styles[variants.index(selection.variant) % len(styles)]
            lr_note = "" if self.per_lr else f", lr={key[3]:g}"
            for light, (split, source) in enumerate(self.curves.items()):
                seeds = selection.values or {k[4] for k in self.curves["train"] if k[:4] == key}
                curves = [source[(*key, seed)] for seed in seeds if (*key, seed) in source]
                plot_curve(
                    ax,
                    curves,
                    activation=key[1],
                    metric=self.metric,
                    aggregate=self.aggregate,
                    key=(selection.experiment, *key, split, self.metric),
                    light=bool(light),
                    label=f"{_label(selection)} {split}{lr_note}",
                    linestyle=style,
                )


def _style_curve_axes(ax: Axes, metric: str, xlabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.set_title(title, fontsize=10)
    if metric in ("loss", "recon_error"):
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)


def _curve_figure(
    records: Sequence[Any],
    selections: Sequence[Selection],
    spec: FigureSpec,
    title: str,
    aggregate: Aggregate,
    steps_per_epoch: Mapping[str, int] | None = None,
) -> Figure | None:
    present = {(r.split, r.metric) for r in records}
    splits = ("train", *spec.held_out)
    metric = next((m for m in spec.metrics if any((s, m) in present for s in splits)), None)
    chosen = _selected(selections)
    if metric is None or not chosen:
        return None
    eval_split = next((s for s in spec.held_out if (s, metric) in present), None)
    splits = ["train", *([eval_split] if eval_split else [])]
    curves = {split: curves_by_seed(records, split, metric) for split in splits}
    per_lr = not all(s.lr_selected for s in chosen.values())
    panels = _Panels(chosen, metric, curves, per_lr, aggregate)
    # the paper's order: no dropout (keep=1.0) left of dropout, lr 1e-3 left of 1e-4
    grid = sorted({(key[2], key[3] if per_lr else 0.0) for key in chosen}, reverse=True)
    fig = Figure(figsize=(5.2 * len(grid), 3.8), layout="constrained")
    axes = fig.subplots(1, len(grid), squeeze=False)[0]
    for ax, (setting, panel_lr) in zip(axes, grid, strict=True):
        panels.draw(ax, setting, panel_lr)
        label = _panel_label(setting, panel_lr, per_lr)
        _style_curve_axes(ax, metric, _epoch_label(spec, steps_per_epoch), label)
    text = f"{title}: {METRIC_LABELS.get(metric, metric)} per epoch, {_caption(aggregate)}"
    _title(fig, f"Figure {spec.number}. {text}" if spec.number else text)
    return fig if any(ax.lines for ax in axes) else None


_TIME_AXES = {  # (every curve priced by its step time, none) -> the time axis's label
    (True, False): "training time at each activation's interleaved step time (s)",
    (False, True): "training wall time in the sweep (s; under its load)",
    (False, False): "training time (s): interleaved step time where measured, else the sweep's",
}


def _epoch_times(key, per_seed, seeds, clock, seconds_per_step, steps_per_epoch):
    """({epoch: seconds}, priced): at the interleaved step time where it is recorded (priced),
    else the median over seeds of the sweep's cumulative epoch times."""
    chash, activation = key[0], key[1]
    step = seconds_per_step.get((chash, activation))
    if step is not None and chash in steps_per_epoch:
        return {e: e * steps_per_epoch[chash] * step for c in per_seed for e in c}, True
    times = [clock[(*key, seed)] for seed in seeds if (*key, seed) in clock]
    epochs = set().union(*times) if times else set()
    # a timing median, not the seeds' aggregate: the clock is where the epochs are drawn
    return {e: timing.median([t[e] for t in times if e in t]) for e in epochs}, False


def _time_figure(
    records: Sequence[Any],
    selections: Sequence[Selection],
    spec: FigureSpec,
    title: str,
    aggregate: Aggregate,
    seconds_per_step: Mapping[tuple[str, str], float],
    steps_per_epoch: Mapping[str, int],
) -> Figure | None:
    """The held-out curve of the headline metric against training time, one curve per chosen
    activation and lr: a reader weighs quality per second, not only per step.

    Where the activation's interleaved step time is recorded, epoch e sits at e × steps per epoch
    × that time (every activation priced under the same conditions); otherwise at the median over
    seeds of the sweep's own cumulative epoch times, which carry the sweep's load.
    """
    present = {(r.split, r.metric) for r in records}
    metric = next((m for m in spec.metrics if any((s, m) in present for s in spec.held_out)), None)
    chosen = _selected(selections)
    if not spec.wall_time or metric is None or not chosen:
        return None
    split = next(s for s in spec.held_out if (s, metric) in present)
    held = curves_by_seed(records, split, metric)
    clock = curves_by_seed(records, "train", "seconds")
    priced = []
    fig = Figure(figsize=(6.2, 4.0), layout="constrained")
    ax = fig.subplots()
    for key, selection in sorted(chosen.items()):
        seeds = selection.values or {k[4] for k in held if k[:4] == key}
        per_seed = [held[(*key, seed)] for seed in seeds if (*key, seed) in held]
        times = (key, per_seed, seeds, clock, seconds_per_step, steps_per_epoch)
        at, was_priced = _epoch_times(*times)
        priced.append(was_priced)
        curves = [{at[e]: v for e, v in c.items() if e in at} for c in per_seed]
        setting = f" {selection.setting}" if selection.setting else ""
        lr_note = "" if selection.lr_selected else f", lr={selection.lr:g}"
        plot_curve(
            ax,
            curves,
            activation=key[1],
            metric=metric,
            aggregate=aggregate,
            key=(selection.experiment, *key, "time", split, metric),
            label=f"{_label(selection)}{setting}{lr_note}",
        )
    if not ax.lines:
        return None
    ax.set_xlabel(_TIME_AXES[(all(priced), not any(priced))])
    name = METRIC_LABELS.get(metric, metric)
    ax.set_ylabel(f"{split} {name}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _title(fig, f"{title}: {split} {name} against training time, {_caption(aggregate)}")
    return fig


def _noise_level(split: str) -> float | None:
    if not split.startswith("test@noise="):
        return None
    try:
        return float(split.split("=", 1)[1])
    except ValueError:
        return None


def plot_noise(
    ax: Axes,
    records: Sequence[Any],
    selection: Selection,
    *,
    metric: str,
    aggregate: Aggregate = HEADLINE,
    label: str | None = None,
) -> Axes:
    """Test ``metric`` against noise strength a (splits ``test@noise=a``) for one selection.

    Each seed contributes its value at its last recorded epoch; the curve is the aggregate over
    seeds (the median).
    ``metric="accuracy"`` is read as 1 − ``error`` when only errors are recorded.
    """
    mine = [
        r
        for r in records
        if _noise_level(r.split) is not None
        and (r.experiment, r.config_hash) == (selection.experiment, selection.config_hash)
    ]
    source, transform = metric, (lambda v: v)
    if metric == "accuracy" and not any(r.metric == "accuracy" for r in mine):
        source, transform = "error", (lambda v: 1.0 - v)
    per_seed: dict[int, dict[float, tuple[int, float]]] = defaultdict(dict)
    for r in mine:
        level = _noise_level(r.split)
        if (
            level is None
            or r.metric != source
            or (r.experiment, r.activation, r.setting, float(r.lr))
            != (selection.experiment, selection.activation, selection.setting, selection.lr)
        ):
            continue
        previous = per_seed[int(r.seed)].get(level)
        if previous is None or r.epoch >= previous[0]:
            per_seed[int(r.seed)][level] = (int(r.epoch), transform(float(r.value)))
    curves = [{a: v for a, (_, v) in levels.items()} for levels in per_seed.values()]
    return plot_curve(
        ax,
        curves,
        activation=selection.activation,
        metric=metric,
        aggregate=aggregate,
        key=(*selection.cell[:5], "noise", metric),
        label=label or label_for(selection.activation),
    )


def _noise_figure(
    records: Sequence[Any],
    selections: Sequence[Selection],
    spec: FigureSpec,
    title: str,
    aggregate: Aggregate,
) -> Figure | None:
    recorded = {r.metric for r in records if _noise_level(r.split) is not None}
    if "error" in recorded:
        recorded.add("accuracy")  # the paper plots accuracy: 1 − error
    metrics = [m for m in ("accuracy", "loss") if m in recorded]
    if not spec.noise or not metrics:
        return None
    chosen = list(_selected(selections).values())
    no_dropout = [s for s in chosen if "keep=1" in s.setting]  # the paper uses the no-dropout nets
    chosen = no_dropout or chosen
    several_settings = len({s.setting for s in chosen}) > 1
    fig = Figure(figsize=(5.2 * len(metrics), 3.8), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics, strict=True):
        for selection in chosen:
            label = _label(selection) + (f" ({selection.setting})" if several_settings else "")
            plot_noise(ax, records, selection, metric=metric, aggregate=aggregate, label=label)
        ax.set_xlabel("noise strength a (inputs + Uniform[−a, a])")
        ax.set_ylabel("test " + METRIC_LABELS.get(metric, metric))
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    text = f"{title}: robustness to input noise, {_caption(aggregate)}"
    _title(fig, f"Figure {spec.number}. {text}" if spec.number else text)
    return fig if any(ax.lines for ax in axes) else None


def plot_summary(
    ax: Axes, selections: Sequence[Selection], *, aggregate: Aggregate = HEADLINE
) -> Axes:
    """One point per selection: the aggregate over seeds of the reported metric (the median) with
    the interval its table cell shows (:meth:`Aggregate.summarize` of the cell), seeds as dots;
    diverged runs (NaN / inf) are left out and counted in the tick label."""
    for i, selection in enumerate(selections):
        values = np.asarray(selection.finite, dtype=float)
        if values.size == 0:
            continue
        scale = _scale(selection.metric)
        summary = aggregate.summarize(list(selection.values.values()), *selection.cell)
        center, (low, high) = aggregate.of(summary)
        if values.size == 1:  # one value: no interval, a bar of no length
            low = high = center
        color = color_for(selection.activation)
        ax.errorbar(
            [i],
            [center * scale],
            yerr=[[(center - low) * scale], [(high - center) * scale]],
            fmt="o",
            color=color,
            capsize=4,
        )
        ax.scatter(np.full(values.size, i + 0.15), values * scale, s=10, color=color, alpha=0.5)
    labels = []
    for s in selections:
        diverged = f"{s.diverged} diverged" if s.diverged else ""
        parts = [_label(s), s.setting, "" if s.lr_selected else f"lr={s.lr:g}", diverged]
        labels.append("\n".join(p for p in parts if p))
    ax.set_xticks(range(len(selections)), labels, fontsize=8)
    metric = selections[0].metric if selections else ""
    ax.set_ylabel("test " + METRIC_LABELS.get(metric, metric))
    ax.grid(alpha=0.3, axis="y")
    return ax


def _summary_figure(
    selections: Sequence[Selection], title: str, aggregate: Aggregate
) -> Figure | None:
    chosen = [s for s in _selected(selections).values() if s.values]
    if not chosen:
        return None
    fig = Figure(figsize=(max(4.0, 1.1 * len(chosen) + 1.5), 3.6), layout="constrained")
    plot_summary(fig.subplots(), chosen, aggregate=aggregate)
    rule = (
        "the chosen learning rate" if all(s.lr_selected for s in chosen) else "each learning rate"
    )
    _title(fig, f"{title}: test result at {rule}, {_caption(aggregate, band=False)}")
    return fig


def _last_values(records: Sequence[Any], metric: str) -> dict[tuple, float]:
    """{(split, activation, setting, lr, seed, config hash): value} of ``metric`` at each run's last
    validation and test epoch, for the runs at their config's last recorded epoch (a run still
    training ends earlier)."""
    last: dict[tuple, tuple[int, float]] = {}
    for r in records:
        if r.split in ("val", "test") and r.metric == metric:
            key = (r.split, r.activation, r.setting, float(r.lr), int(r.seed), r.config_hash)
            if key not in last or r.epoch > last[key][0]:
                last[key] = (int(r.epoch), float(r.value))
    final: dict[str, int] = defaultdict(int)
    for k, (epoch, _) in last.items():
        final[k[5]] = max(final[k[5]], epoch)
    return {k: value for k, (epoch, value) in last.items() if epoch == final[k[5]]}


def _lr_panel(ax: Axes, last: dict[tuple, float], where: tuple, scale: float, aggregate) -> None:
    """One (row, setting) panel: every seed a dot, the aggregate over seeds a line."""
    for activation in sorted({k[1] for k in last}):
        group = (where[0], activation, where[1])
        points = {k[3]: [] for k in last if k[:3] == group}
        for k, value in last.items():
            if k[:3] == group and math.isfinite(value):
                points[k[3]].append(value * scale)
        lrs = sorted(lr for lr, values in points.items() if values)
        if not lrs:
            continue
        color, marker = color_for(activation), marker_for(activation)
        for lr in lrs:
            dots = points[lr]
            ax.scatter([lr] * len(dots), dots, s=9, color=color, alpha=0.45, marker=marker)
        centers = [aggregate.point(points[lr]) for lr in lrs]
        ax.plot(lrs, centers, color=color, marker=marker, label=label_for(activation))


def _lr_rows(records: Sequence[Any], metric: str) -> list[tuple[str, str, float, dict]]:
    """The lr figure's rows, each (name, y label, scale, {(name, activation, setting, lr, seed,
    config hash): value}): the headline metric on validation and test; the test error where the
    headline is another metric; the robustness area (test error over the noise half-width
    a ∈ [0, 3], :func:`~gelus.report.claims.noise_areas`) where noise was evaluated."""
    from gelus.report.claims import NOISE_RANGE, noise_areas

    rows = []
    last = _last_values(records, metric)
    scale = _scale(metric)
    for split in ("val", "test"):
        mine = {k: v for k, v in last.items() if k[0] == split}
        if mine:
            rows.append((split, f"{split} {metric}" + (" (%)" if scale != 1 else ""), scale, mine))
    if metric != "error":
        errors = {k: v for k, v in _last_values(records, "error").items() if k[0] == "test"}
        if errors:
            rows.append(("test", "test error (%)", _scale("error"), errors))
    areas = noise_areas(records)
    if areas:
        low, high = NOISE_RANGE
        name = f"test error over noise a ∈ [{low:g}, {high:g}] (error·a)"
        found = {
            ("area", a, setting, lr, seed, h): v for (h, a, setting, lr, seed), v in areas.items()
        }
        rows.append(("area", name, 1.0, found))
    return rows


def _lr_figure(
    records: Sequence[Any], selections: Sequence[Selection], title: str, aggregate: Aggregate
) -> Figure | None:
    """The lr sensitivity: each run's validation and test value of the headline metric at the last
    epoch against the learning rate, and where the experiment has them its test error and its
    robustness area (the area under test error against noise), per activation (colour and marker)
    and setting (panel), every seed a dot and the aggregate over seeds (the median) a line (runs
    that have not reached their config's last recorded epoch are left out). None when the
    experiment ran one lr."""
    if not selections:
        return None
    metric = selections[0].metric
    rows = _lr_rows(records, metric)
    every = {k: v for *_, values in rows for k, v in values.items()}
    if len({k[3] for k in every}) < 2:
        return None
    settings = sorted({k[2] for k in every})
    grid = sorted({k[3] for k in every})
    fig = Figure(figsize=(4.2 * len(settings), 3.2 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), len(settings), squeeze=False)
    for row, (name, label, scale, values) in enumerate(rows):
        for col, setting in enumerate(settings):
            ax = axes[row][col]
            _lr_panel(ax, values, (name, setting), scale, aggregate)
            ax.set_xscale("log")
            # the grid's own values as ticks: a log axis's minor labels collide on a narrow grid
            ax.set_xticks(grid, [f"{lr:g}" for lr in grid], rotation=45 if len(grid) > 5 else 0)
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("learning rate")
            ax.set_ylabel("\n".join(textwrap.wrap(label, 28)), fontsize=8)
            ax.set_title(setting or "all runs", fontsize=9)
    axes[0][0].legend(fontsize=7)
    shown = [metric]
    if any(label.startswith("test error (") for _, label, *_ in rows):
        shown.append("test error")
    if any(name == "area" for name, *_ in rows):
        shown.append("the robustness area (test error over noise)")
    _title(fig, f"{title}: {', '.join(shown)} at the last epoch against the learning rate")
    return fig


def experiment_figures(
    records: Sequence[Any],
    selections: Sequence[Selection],
    spec: FigureSpec,
    *,
    title: str,
    aggregate: Aggregate = HEADLINE,
    seconds_per_step: Mapping[tuple[str, str], float] | None = None,
    steps_per_epoch: Mapping[str, int] | None = None,
) -> dict[str, Figure]:
    """All figures for one experiment, by short name (``curves``, ``time``, ``noise``,
    ``summary``, ``lr``).

    ``records`` are the experiment's, ``selections`` its protocol's result on them
    (:func:`gelus.experiments.selection.select`), ``spec`` its preset's figure; ``title`` heads each
    figure; ``aggregate`` is the statistic over seeds and its interval, as the tables have it;
    ``seconds_per_step`` ({(config hash, activation): s}) and ``steps_per_epoch`` ({config
    hash: steps}) place the time figure's epochs. Figures whose data is absent are left out.
    """
    times = (seconds_per_step or {}, steps_per_epoch or {})
    figures = {
        "curves": _curve_figure(records, selections, spec, title, aggregate, steps_per_epoch),
        "time": _time_figure(records, selections, spec, title, aggregate, *times),
        "noise": _noise_figure(records, selections, spec, title, aggregate),
        "summary": _summary_figure(selections, title, aggregate),
        "lr": _lr_figure(records, selections, title, aggregate),
    }
    return {name: fig for name, fig in figures.items() if fig is not None}
