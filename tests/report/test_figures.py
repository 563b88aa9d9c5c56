"""The paper's figures drawn from synthetic records: present when the data is, correct medians."""

import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from gelus.experiments.presets import PRESETS
from gelus.experiments.selection import select
from gelus.plots.io import save_figure
from gelus.plots.palette import PALETTE, color_for
from gelus.report.figures import experiment_figures, plot_curve
from test_synthetic import make_records, value_of


def _figures(records, experiment):
    preset = PRESETS[experiment]
    mine = [r for r in records if r.experiment == experiment]
    selections = select(mine, preset.protocol)
    return experiment_figures(mine, selections, preset.figure, title=experiment)


def test_mnist_curves_median_colours_and_labels():
    records, _ = make_records(epochs=3, lrs=(1e-3, 1e-4))
    figures = _figures(records, "mnist-classification")
    assert set(figures) == {"curves", "summary", "lr"}  # two lrs: the sensitivity figure too
    axes = figures["curves"].axes
    assert [ax.get_title() for ax in axes] == ["keep=1.0", "keep=0.5"]  # the paper's order
    ax = axes[0]
    assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == "log loss (nats)"
    line = next(line for line in ax.lines if line.get_label() == "GELU train, lr=0.001")
    assert to_hex(line.get_color()) == PALETTE["gelu"].lower()
    # the chosen lr is 1e-3 (lower val loss); the curve is the median over seeds per epoch
    expected = [np.median([value_of("gelu", s, 1e-3, "keep=1.0", e, "train", "loss") for s in (0, 1, 2)]) for e in (1, 2, 3)]  # fmt: skip
    np.testing.assert_allclose(line.get_ydata(), expected)


def test_noise_figure_plots_accuracy_from_error():
    records, _ = make_records(
        "mnist-noise", settings=("keep=1.0",), epochs=2, noise_levels=(0, 1, 2)
    )
    fig = _figures(records, "mnist-noise")["noise"]
    acc_ax, _ = fig.axes
    assert acc_ax.get_ylabel() == "test accuracy (%)" and "noise strength" in acc_ax.get_xlabel()
    line = next(line for line in acc_ax.lines if line.get_label() == "ReLU")
    np.testing.assert_allclose(line.get_xdata(), [0, 1, 2])
    expected = [100 * (1 - np.median([value_of("relu", s, 1e-3, "keep=1.0", 2, "test", "error", a) for s in (0, 1, 2)])) for a in (0, 1, 2)]  # fmt: skip
    np.testing.assert_allclose(line.get_ydata(), expected)


def test_autoencoder_has_one_panel_per_learning_rate():
    records, _ = make_records("mnist-autoencoder", settings=("",), splits=("train", "test"), metrics=("loss", "recon_error"), epochs=2)  # fmt: skip
    fig = _figures(records, "mnist-autoencoder")["curves"]
    assert [ax.get_title() for ax in fig.axes] == ["lr=0.001", "lr=0.0001"]
    assert fig.axes[0].get_ylabel() == "reconstruction error (MSE)"


def test_missing_data_gives_no_figure_and_no_error():
    records, _ = make_records(epochs=2, splits=("test",), metrics=("error",))
    figures = _figures(records, "mnist-classification")
    assert "noise" not in figures  # no test@noise splits recorded
    assert _figures([], "mnist-classification") == {}


def test_plot_curve_band_contains_the_median_and_returns_ax():
    fig = Figure()
    ax = fig.subplots()
    curves = [
        {1: 0.1, 2: 0.2},
        {1: 0.3, 2: 0.1},
        {1: 0.2, 2: 0.4},
        {1: 0.5},
    ]  # epoch 2 missing once
    assert plot_curve(ax, curves, activation="elu", metric="error") is ax
    (line,) = ax.lines
    np.testing.assert_allclose(line.get_xdata(), [1])  # only epochs every seed reached
    assert line.get_ydata()[0] == pytest.approx(100 * 0.25)
    assert to_hex(line.get_color()) == color_for("elu").lower()


def test_save_figure_writes_valid_png_and_svg(tmp_path):
    records, _ = make_records(epochs=2, settings=("",), lrs=(1e-3,))
    png, svg = save_figure(_figures(records, "mnist-classification")["summary"], tmp_path, "s")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(svg).getroot().tag.endswith("svg")


def test_unknown_activations_get_a_stable_colour():
    assert color_for("mish") == color_for("mish")
    assert color_for("GELU") == PALETTE["gelu"]


def test_the_lr_sensitivity_figure_shows_every_seed_per_lr_activation_and_setting():
    records, _ = make_records(seeds=(0, 1, 2), lrs=(1e-3, 1e-4))
    selections = select(records, PRESETS["mnist-classification"].protocol)
    figures = experiment_figures(records, selections, PRESETS["mnist-classification"].figure,
                                 title="t")  # fmt: skip
    fig = figures["lr"]
    axes = fig.axes
    assert len(axes) == 6  # val and test loss, and test error × keep 0.5 and 1.0
    dots = sum(len(c.get_offsets()) for c in axes[0].collections)
    assert dots == 3 * 2 * 3  # activations × lrs × seeds, each seed a dot
    assert all(ax.get_xscale() == "log" for ax in axes)
    one_lr = [r for r in records if r.lr == 1e-3]
    assert "lr" not in experiment_figures(one_lr, select(one_lr, PRESETS["mnist-classification"].protocol),
                                          PRESETS["mnist-classification"].figure, title="t")  # fmt: skip


def test_the_lr_figure_leaves_out_runs_that_have_not_reached_the_last_epoch():
    records, _ = make_records(seeds=(0, 1, 2), lrs=(1e-3, 1e-4), epochs=3)
    # one run of each activation stopped after epoch 2 (still training when the report ran)
    stopped = {(r.activation, r.setting) for r in records}
    cut = [r for r in records
           if not (r.seed == 2 and r.lr == 1e-4 and r.epoch == 3 and (r.activation, r.setting) in stopped)]  # fmt: skip
    selections = select(cut, PRESETS["mnist-classification"].protocol)
    figures = experiment_figures(cut, selections, PRESETS["mnist-classification"].figure,
                                 title="t")  # fmt: skip
    dots = sum(len(c.get_offsets()) for c in figures["lr"].axes[0].collections)
    assert dots == 3 * (3 + 2)  # activations × (three seeds at 1e-3, two at 1e-4)
