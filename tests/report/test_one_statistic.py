"""The statistic over seeds is one value (gelus.experiments.aggregate.Aggregate): the tables, the
figures, the lr choice and the report's words all take it, and nothing else picks a statistic, a
number of resamples or a confidence. Oracles: numpy's percentile bootstrap written out here, scipy's
t interval, hand-computed medians and means."""

import ast
import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from scipy import stats as scipy_stats

import gelus
from gelus.experiments.presets import PRESETS
from gelus.experiments.protocol import Protocol
from gelus.experiments.selection import select
from gelus.report.analysis import analyse
from gelus.report.figures import experiment_figures, plot_curve
from gelus.report.render import how_to_read, unwrapped, write_report
from gelus.report.stats import DESIGN, HEADLINE, Aggregate
from test_synthetic import Record, make_records

SOURCE = Path(gelus.__file__).resolve().parent
NARROW = Aggregate(confidence=0.5, resamples=3000)  # another aggregate: every interval changes
MEAN = Aggregate(statistic="mean")  # another statistic: the summary figure's point and bar follow


def _oracle_interval(values, key, aggregate):
    """The percentile bootstrap of the aggregate's statistic, written out with numpy."""
    rng = aggregate.rng(*key)
    values = np.asarray(values, dtype=float)
    indices = rng.integers(0, values.size, size=(aggregate.resamples, values.size))
    tail = 100 * (1 - aggregate.confidence) / 2
    low, high = np.percentile(np.median(values[indices], axis=-1), [tail, 100 - tail])
    return low, high


def _summary_bars(figure) -> list[tuple[float, float]]:
    (ax,) = figure.axes
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    return [(seg[0][1], seg[1][1]) for bars_of in bars for seg in bars_of.get_segments()]


@pytest.mark.parametrize("aggregate", [HEADLINE, NARROW, MEAN])
def test_the_summary_figure_shows_the_interval_of_the_table_cell(aggregate):
    records, runs = make_records(seeds=(0, 1, 2, 3, 4), settings=("keep=1.0",), epochs=2)
    (result,) = analyse(records, runs, PRESETS, aggregate=aggregate)
    selections = [row.selection for row in result.rows]
    figures = experiment_figures(records, selections, result.figure, title="t", aggregate=aggregate)
    shown = _summary_bars(figures["summary"])
    headline = [
        row for row in result.rows if row.selection.metric == result.rows[0].selection.metric
    ]
    scale = 100 if headline[0].selection.metric == "error" else 1  # errors are drawn in %
    tables = [tuple(scale * v for v in aggregate.of(row.summary)[1]) for row in headline]
    drawn = [float(end) for bar in shown for end in bar]
    assert drawn == pytest.approx([end for cell in tables for end in cell], rel=1e-12)
    assert len(shown) == len(tables)
    assert all(high > low for low, high in tables)


def test_another_aggregate_changes_the_table_and_the_figure_together():
    records, runs = make_records(seeds=(0, 1, 2, 3, 4), settings=("keep=1.0",), epochs=2)
    (wide,) = analyse(records, runs, PRESETS)
    (narrow,) = analyse(records, runs, PRESETS, aggregate=NARROW)
    for w, n in zip(wide.rows, narrow.rows, strict=True):
        assert n.summary.median == w.summary.median
        assert n.summary.median_ci[1] - n.summary.median_ci[0] <= (
            w.summary.median_ci[1] - w.summary.median_ci[0]
        )
    assert any(
        n.summary.median_ci != w.summary.median_ci
        for w, n in zip(wide.rows, narrow.rows, strict=True)
    )
    (c,) = [c for c, _ in narrow.comparisons if (c.treatment, c.baseline) == ("gelu", "relu")]
    d = np.asarray(c.differences)
    t = scipy_stats.t.ppf(0.75, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)  # 50 % t interval
    assert c.ci == pytest.approx((d.mean() - t, d.mean() + t))


def test_a_curve_band_is_the_aggregates_interval_at_each_point():
    curves = [{1: 0.1, 2: 0.2}, {1: 0.3, 2: 0.1}, {1: 0.2, 2: 0.4}, {1: 0.5, 2: 0.45}]
    ax = Figure().subplots()
    plot_curve(ax, curves, activation="elu", metric="loss", aggregate=NARROW, key=("k",))
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    for x in (1, 2):
        low, high = _oracle_interval([c[x] for c in curves], ("k", x), NARROW)
        assert np.isclose(ys, low).any() and np.isclose(ys, high).any()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.25, 0.3])  # the medians


def test_the_learning_rate_is_chosen_by_the_aggregate_passed_to_select():
    # lr 0.1: val 0.1, 0.1, 0.9 (median 0.1, mean 0.367); lr 0.01: 0.2 each (median = mean 0.2)
    values = {0.1: (0.1, 0.1, 0.9), 0.01: (0.2, 0.2, 0.2)}
    records = [
        Record(f"{lr}-{seed}", "e", "h", "gelu", seed, lr, "", 1, split, "error", v)
        for lr, per_seed in values.items()
        for seed, v in enumerate(per_seed)
        for split in ("val", "test")
    ]
    protocol = Protocol(select_metrics=("error",), report_metrics=("error",))
    (by_median,) = select(records, protocol)
    (by_mean,) = select(records, protocol, aggregate=Aggregate(statistic="mean"))
    assert (by_median.lr, by_mean.lr) == (0.1, 0.01)
    assert by_mean.val_medians[("", 0.1)] == pytest.approx(1.1 / 3)
    assert by_mean.aggregate.statistic == "mean"


def test_how_to_read_is_written_from_the_aggregate_and_the_design():
    text = how_to_read(HEADLINE, DESIGN)
    assert "The medians' 95 % intervals are percentile bootstraps (10,000 resamples" in text
    assert "paired t-test" in text and "Holm-adjusted" in text and "p < 0.05" in text
    assert "80 % power" in text and "n ≥ 2" in text and "its 5 % holds only under" in text
    other = how_to_read(dataclasses.replace(HEADLINE, confidence=0.9), DESIGN)
    assert other != text and "The medians' 90 % intervals" in other and "95 %" not in other
    assert "2,000 resamples" in how_to_read(dataclasses.replace(HEADLINE, resamples=2000))
    assert "IQMs' 95 %" in how_to_read(Aggregate(statistic="iqm"))
    assert "seed 7" in how_to_read(dataclasses.replace(HEADLINE, seed=7))
    strict = how_to_read(HEADLINE, dataclasses.replace(DESIGN, alpha=0.01, power=0.9))
    assert "p < 0.01" in strict and "its 1 % holds only under" in strict and "90 % power" in strict
    assert "measured at α = 0.05" in strict and "measured at" not in text


def test_a_report_written_with_another_aggregate_says_so_in_every_table(tmp_path):
    records, runs = make_records(settings=("keep=1.0",), epochs=2)
    _, md = write_report(
        records, runs, tmp_path, presets=PRESETS, activation_figure=False, aggregate=NARROW
    )
    text = unwrapped(md.read_text())
    assert "| 50 % CI of median |" in text and "| 50 % CI (t) |" in text
    assert "The medians' 50 % intervals are percentile bootstraps (3,000 resamples" in text
    assert "95 %" not in text
    assert "median over seeds (50 % CI band)" in text  # the figures' captions


def test_an_aggregate_the_code_cannot_compute_is_one_clear_error():
    with pytest.raises(ValueError, match="statistic 'mode': choose one of mean, median, iqm"):
        Aggregate(statistic="mode")
    with pytest.raises(ValueError, match="confidence 95: give a level between 0 and 1"):
        Aggregate(confidence=95)
    with pytest.raises(ValueError, match="method 'bca': choose one of percentile bootstrap"):
        Aggregate(method="bca")


def _calls(path: Path):
    yield from _calls_in(ast.parse(path.read_text(encoding="utf-8")))


def test_no_module_but_the_aggregate_picks_a_statistic_a_bootstrap_size_or_a_confidence():
    found = []
    for path in SOURCE.rglob("*.py"):
        if path.name == "aggregate.py" or "bench" in path.parts:
            continue  # bench/ times kernels: its medians are timings, not results over seeds
        for name, call in _calls(path):
            constant = [
                k.arg
                for k in call.keywords
                if k.arg in ("n_resamples", "resamples", "confidence")
                and isinstance(k.value, ast.Constant)
            ]
            bare = isinstance(call.func, ast.Name)  # a method of the aggregate is its own
            own = bare and name in ("bootstrap_ci", "summarize", "seeded_rng")
            if constant or own or (name == "default_rng" and "report" in path.parts):
                found.append(f"{path.relative_to(SOURCE)}:{call.lineno} {name} {constant}")
    assert found == [], found
    # in the report and the selection, a median is taken only of timings (the paired t-test's
    # mean difference is the test's own statistic)
    report = [*(SOURCE / "report").glob("*.py"), SOURCE / "experiments" / "selection.py"]
    medians = set()
    for path in report:
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, ast.FunctionDef):
                for name, call in _calls_in(function):
                    if name in ("median", "iqm", "trim_mean"):
                        owner = getattr(call.func, "value", None)  # timing.median: the one timer's
                        medians.add((path.name, function.name, getattr(owner, "id", None)))
    assert medians == {
        ("figures.py", "_epoch_times", "timing"),
        ("setup.py", "step_costs", "timing"),
        # the matched-lr rule's median over activations of their regrets (docs/REPORT.md): part
        # of the rule's definition, not a statistic over seeds
        ("lr_choice.py", "matched_point", "statistics"),
    }


def _calls_in(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield getattr(node.func, "id", getattr(node.func, "attr", "")), node


def test_only_sources_reads_records_presets_and_datasets():
    reaching = []
    for path in (SOURCE / "report").glob("*.py"):
        if path.name == "sources.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {alias.name for alias in node.names}
                if (
                    node.module == "gelus.experiments.records"
                    or node.module.startswith("gelus.data")
                    or "PRESETS" in names
                ):
                    reaching.append(f"{path.name}:{node.lineno} {node.module}")
    assert reaching == [], reaching
