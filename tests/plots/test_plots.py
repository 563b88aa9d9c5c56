"""`gelus plot activations`: float64 references vs mpmath, the ulp table vs an independent
computation with math.erfc, the figures and the command's files."""

import math
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gelus.cli import main
from gelus.plots import activations as A

XS = [-9.5, -7.0, -5.0, -3.0, -1.2, -0.3, 1e-8, 0.5, 2.0, 5.0, 9.9]


def _mp_reference(form, x):
    x = mpmath.mpf(x)
    if form == "none":
        return x * mpmath.ncdf(x)
    if form == "tanh":
        u = mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf("0.044715") * x**3)
        return x / 2 * (1 + mpmath.tanh(u))
    scale = mpmath.mpf("1.702") if form == "sigmoid" else 1
    return x / (1 + mpmath.exp(-scale * x))


@pytest.mark.parametrize("form", ["none", "tanh", "sigmoid", "silu"])
def test_float64_references_agree_with_mpmath(form):
    with mpmath.workdps(50):
        expected = [float(_mp_reference(form, x)) for x in XS]
    ours = A.reference(form, torch.tensor(XS, dtype=torch.float64)).tolist()
    np.testing.assert_allclose(ours, expected, rtol=3e-14, atol=0)


def test_ulp_error_counts_float32_steps():
    ref = torch.tensor([1.0, -(2.0**-66), 0.0], dtype=torch.float64)
    y = torch.tensor(
        np.nextafter(
            ref.numpy().astype(np.float32),
            np.copysign(np.float32(np.inf), ref.numpy()).astype(np.float32),
        )
    )
    np.testing.assert_allclose(A.ulp_error(y, ref), [1.0, 1.0, 1.0])
    assert (
        A.ulp_error(torch.tensor([float("nan")]), torch.tensor([1.0], dtype=torch.float64))[0]
        == np.inf
    )


def _independent_max_ulp(function, low, high, n):
    """Max ulp of ``function`` in float32 vs x·½·erfc(−x/√2) by math.erfc, on the table's inputs."""
    x = A._region_points(low, high, n)
    y = function(x).double().numpy()
    worst = 0.0
    for xi, yi in zip(x.double().tolist(), y.tolist(), strict=True):
        ref = xi * 0.5 * math.erfc(-xi / math.sqrt(2.0))
        spacing = float(np.spacing(np.float32(abs(ref))))
        worst = max(worst, abs(yi - ref) / spacing)
    return worst


def test_accuracy_table_matches_an_independent_computation():
    n = 512
    rows = {row.name: row for row in A.accuracy_table(points_per_region=n)}
    for name, function in (("torch F.gelu", F.gelu), ("gelus gelu (none)", lambda x: A.G.gelu(x))):
        for (_, low, high), got in zip(A.REGIONS, rows[name].max_ulp, strict=True):
            assert got == pytest.approx(
                _independent_max_ulp(function, low, high, n), rel=1e-6, abs=1e-6
            )
    # edge outputs are what torch returns on one 5-element float32 tensor, sign of zero included
    edge_x = torch.tensor([v for _, v in A.EDGE_INPUTS], dtype=torch.float32)
    for name, function in (("torch F.gelu", F.gelu), ("torch F.silu", F.silu)):
        expected = function(edge_x).tolist()
        for got, want in zip(rows[name].edges, expected, strict=True):
            assert (math.isnan(got) and math.isnan(want)) or (
                got == want and math.copysign(1, got) == math.copysign(1, want)
            )


def test_markdown_table_lists_every_member_and_the_contract():
    rows = A.accuracy_table(points_per_region=64)
    table = A.accuracy_markdown(rows)
    assert table.count("\n") == len(rows) + 3  # header, rule, rows, contract
    for name in A.family_members():
        assert f"| {name} |" in table
    assert "| contract (docs/NUMERICS.md) |" in table
    row = A.AccuracyRow("x", (1.0, 2.0, 3.0, 4.0), (math.inf, -0.0, math.nan, -0.0, A._FLT_MAX))
    assert "| x | 1 | 2 | 3 | 4 | +inf | −0 | nan | −0 | FLT_MAX |" in A.accuracy_markdown([row])


def test_figures_have_labelled_axes():
    fig = A.activations_figure(points=4096)
    for ax in fig.axes:
        assert ax.get_xlabel() == "x" and ax.get_ylabel() and ax.get_legend() is not None
    curves = fig.axes[0]
    gelu = next(line for line in curves.lines if line.get_label() == "GELU")
    x, y = gelu.get_xdata(), gelu.get_ydata()
    assert y.min() == pytest.approx(-0.16997, abs=1e-4) and x[y.argmin()] == pytest.approx(
        -0.7518, abs=0.01
    )
    assert fig.axes[2].get_yscale() == "log" and fig.axes[3].get_yscale() == "log"


def test_plot_activations_command_writes_figures_and_table(tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["plot", "activations", "--out", str(out), "--points", "2048"]) == 0
    for stem in ("figure1", "activations"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert ET.parse(out / f"{stem}.svg").getroot().tag.endswith("svg")
    table = (out / "accuracy.md").read_text()
    assert "| torch F.gelu |" in table and "| torch F.gelu |" in capsys.readouterr().out
    assert main(["plot", "activations", "--out", str(out), "--points", "3"]) == 2
    assert "--points 3 is too few" in capsys.readouterr().err


def test_ten_activations_differ_by_colour_and_marker_together():
    from gelus.plots.palette import color_for, marker_for

    names = ["gelu", "gelu_tanh", "gelu_sigmoid", "relu", "elu", "silu", "stochastic_gelu",
             "swiglu", "relu2", "my_squareplus"]  # fmt: skip
    styles = [(color_for(n), marker_for(n)) for n in names]
    assert len(set(styles)) == len(names)
    markers = [marker_for(n) for n in names[:9]]
    assert len(set(markers)) == 9  # named activations never share a marker
