"""What the report concludes survives scrutiny: a finite but absurd loss is a diverged run (counted,
kept out of medians, verdicts and the curves' axes), and a claim whose verdict depends on the
lr-selection rule says so."""

import math

import matplotlib

matplotlib.use("Agg")

from gelus.cli import main
from gelus.experiments.divergence import mark_diverged
from gelus.experiments.presets import PRESETS
from gelus.experiments.selection import run_configs
from gelus.report.analysis import analyse
from gelus.report.figures import experiment_figures
from gelus.report.render import unwrapped
from test_synthetic import make_records, write_database


def _with_absurd_loss(records, activation="gelu", seed=2):
    """One run's losses at 1e27 (its errors stay plausible), as a blown-up run can leave them."""
    return [
        r._replace(value=1e27)
        if (r.activation, r.seed, r.metric) == (activation, seed, "loss") and r.epoch >= 1
        else r
        for r in records
    ]


def test_a_finite_but_absurd_loss_counts_as_diverged_in_every_table():
    records, runs = make_records(seeds=(0, 1, 2, 3))
    (result,) = analyse(_with_absurd_loss(records), runs, PRESETS)
    gelu_rows = [row for row in result.rows if row.selection.activation == "gelu"]
    assert gelu_rows and all(row.summary.diverged == 1 for row in gelu_rows)
    assert all(row.summary.n == 3 for row in gelu_rows)  # the error metric too, not just the loss
    for comparison, _ in result.comparisons:
        if comparison.treatment == "gelu":
            assert comparison.diverged == 1 and 2 not in comparison.seeds


def test_the_curves_axis_range_comes_from_the_runs_that_did_not_diverge(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from gelus.report.analysis import analyse

    records, runs = make_records(seeds=(0, 1, 2))
    marked = mark_diverged(_with_absurd_loss(records), run_configs(runs))
    (result,) = analyse(marked, runs, PRESETS)
    figures = experiment_figures(
        marked, [row.selection for row in result.rows], result.figure, title="t"
    )
    top = max(ax.get_ylim()[1] for ax in figures["curves"].axes)
    assert math.isfinite(top) and top < 100  # losses of the others are a few nats
    legends = [t.get_text() for ax in figures["curves"].axes if ax.get_legend()
               for t in ax.get_legend().get_texts()]  # fmt: skip
    assert any("diverged" in text for text in legends)
    write_database(tmp_path, _with_absurd_loss(records), runs)
    assert main(["report", str(tmp_path)]) == 0
    assert "1 of 3 diverged" in unwrapped((tmp_path / "report" / "report.md").read_text())


def test_a_claim_whose_verdict_changes_with_the_selection_rule_is_marked_with_each_rules(
    monkeypatch,
):
    from gelus.report import analysis
    from gelus.report.claims import ClaimCheck
    from gelus.report.metrics import ClaimVerdict

    def by_rule(name, records, protocol, configs, *how):
        loss = protocol.select_metrics[0] == "loss"
        verdict = ClaimVerdict.HOLDS if loss else ClaimVerdict.UNRESOLVED
        return [ClaimCheck(name, "GELU is lowest", "train loss", (), verdict)]

    monkeypatch.setattr(analysis, "check_claims", by_rule)
    records, runs = make_records(seeds=(0, 1, 2))
    (result,) = analyse(records, runs, PRESETS)
    (claim,) = result.claims
    assert claim.verdict == "✓ holds"  # the preset's own rule: validation loss, last epoch
    for rule, word in [("val-loss-last", "holds"), ("val-loss-best", "holds"),
                       ("val-error-last", "unresolved"), ("val-error-best", "unresolved")]:  # fmt: skip
        assert f"{rule} {word}" in claim.depends
    monkeypatch.setattr(analysis, "check_claims", lambda *a: by_rule(*a)[:0] or [
        ClaimCheck("x", "c", "m", (), "✓ holds")])  # fmt: skip
    (steady,) = analyse(records, runs, PRESETS)
    assert steady.claims[0].depends == ""  # the same verdict under every rule: no mark


def test_every_figure_title_fits_inside_its_figure():
    records, runs = make_records(settings=("keep=1.0",), lrs=(1e-3,))  # one panel: the narrowest
    (result,) = analyse(records, runs, PRESETS)
    figures = experiment_figures(
        records, [row.selection for row in result.rows], result.figure,
        title="mnist-classification with a long variant label",
    )  # fmt: skip
    assert figures
    for kind, fig in figures.items():
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box = fig._suptitle.get_window_extent(renderer=canvas.get_renderer())
        width = fig.get_figwidth() * fig.dpi
        assert box.x0 >= 0 and box.x1 <= width, (kind, box, width)
