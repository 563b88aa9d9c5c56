"""The report opens with a picture: the scope in one sentence, then per experiment a forest
figure of every comparison's paired difference with its interval, coloured by verdict, its marks
as glyphs, then a short verdict table; "how to read" waits in a section the reader opens. The
Markdown twin reads in a 100-column terminal. Checked in headless Chromium with a screenshot."""

import re
import shutil
import subprocess

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from gelus.experiments.presets import PRESETS
from gelus.report.analysis import analyse
from gelus.report.forest import VERDICT_COLOURS, comparison_label, plot_forest
from gelus.report.metrics import Mark, Verdict
from gelus.report.render import WIDTH, unwrapped, write_report
from gelus.report.stats import adjust, compare_paired
from gelus.report.words import format_difference, p_text
from test_synthetic import make_records


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("first-screen")
    mnist, mnist_runs = make_records(epochs=2, lrs=(1e-3, 1e-4), quick=True)
    cifar, cifar_runs = make_records("cifar10-allconv", settings=("",), lrs=(1e-3,), epochs=2, dataset="cifar10")  # fmt: skip
    records, runs = mnist + cifar, mnist_runs + cifar_runs
    html_path, md_path = write_report(records, runs, out, presets=PRESETS, source="synthetic")
    results = analyse(records, runs, PRESETS)
    return html_path, md_path.read_text(encoding="utf-8"), results


def test_no_line_of_the_markdown_is_wider_than_a_terminal(report):
    _, md, _ = report
    assert WIDTH == 100
    for line in md.splitlines():
        body = line.removeprefix("> ").strip()
        # only a word that cannot be broken (a path, a URL) may run past the edge, on its own line
        assert len(line) <= WIDTH or " " not in body, line
    assert "\n- activation: " in md  # the wide results table became a list of rows
    assert "| verdict | comparison |" in md  # the short verdict table stayed a table


def test_the_first_blocks_are_the_scope_then_a_figure_then_the_verdict_table(report):
    _, md, results = report
    text = unwrapped(md)
    before = text[: text.index("## Verdicts at a glance")]
    assert "|" not in before.replace("\\|", "")  # no table before the first figure
    scope = [p for p in before.split("\n\n") if p.startswith("2 experiments")]
    assert len(scope) == 1 and scope[0].count(". ") == 0  # one sentence
    glance = text[text.index("## Verdicts at a glance") : text.index("## The paper's claims")]
    assert glance.index("![mnist-classification-verdicts]") < glance.index("| verdict |")
    assert "How to read:" not in text[: text.index("## How to read")]
    for result in results:
        for c, _ in result.comparisons:  # its verdict, effect, interval, one seed out, Holm p
            low, high = (format_difference(c.metric, v) for v in c.ci)
            effect = f"{format_difference(c.metric, c.mean)} \\[{low}, {high}\\]"
            n, total = len(c.differences), sum(c.differences)
            means = [(total - x) / (n - 1) for x in c.differences]  # each seed left out, by hand
            loso = " to ".join(format_difference(c.metric, v) for v in (min(means), max(means)))
            label = comparison_label(c, config=False, setting=bool(c.setting))
            p = p_text(c.p_holm).replace("<", "&lt;")
            row = f"| {c.verdict} | {label} | {effect} | {loso} | {p} |"
            assert row in glance


def _comparison(differences, treatment="gelu", metric="loss"):
    from gelus.experiments.selection import Selection

    def side(name, values):
        values = dict(enumerate(values))
        return Selection("x", "h", "", name, "", 1e-3, True, metric, values, {}, {}, "rule")

    base = [0.5, 0.7, 0.6, 0.55, 0.65]
    return compare_paired(side(treatment, np.add(base, differences)), side("relu", base))


def test_the_forest_draws_each_comparison_with_its_interval_colour_zero_and_glyphs():
    better = _comparison([-0.07, -0.06, -0.08, -0.075, -0.065], "gelu")
    inside = _comparison([-0.007, -0.006, -0.008, -0.0075, -0.0065], "silu")
    noisy = _comparison([0.05, -0.04, 0.03, -0.06, 0.02], "elu")
    found = adjust([better, inside, noisy])
    found[0] = found[0]._replace(reference_lr="runner-up lr 4e-3: tie", depends="a better, b tie")
    assert found[0].verdict is Verdict.BETTER and found[2].verdict is Verdict.UNRESOLVED
    assert found[1].marks() == (Mark.INSIDE_MARGIN,)
    assert found[0].marks() == (Mark.SELECTION_RULE, Mark.REFERENCE_LR)
    ax = Figure().add_subplot()
    assert plot_forest(ax, found) is ax
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["gelu − relu", "silu − relu", "elu − relu"]
    # the top row is the first comparison: its interval at its y, in its verdict's colour
    bars = [line for line in ax.lines if len(line.get_xdata()) == 2 and line.get_ydata()[0] == 2]
    assert len(bars) == 1 and tuple(bars[0].get_xdata()) == pytest.approx(found[0].ci)
    assert to_rgb(bars[0].get_color()) == to_rgb(VERDICT_COLOURS[Verdict.BETTER])
    zero = [line for line in ax.lines if tuple(line.get_xdata()) == (0, 0)]
    assert zero  # zero is drawn
    glyphs = sorted(t.get_text() for t in ax.texts)
    assert glyphs == ["§‡", "≈"]
    unresolved = [
        line for line in ax.lines if line.get_marker() == "o" and line.get_ydata()[0] == 0
    ]
    assert unresolved[0].get_markerfacecolor() == "white"  # hollow: no verdict


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Added by the test only: after load, where the first image and the first table are.
PROBE = """<script>window.addEventListener('load', () => {
  const img = document.querySelector('img'), table = document.querySelector('table');
  const before = !!(img.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING);
  const r = img.getBoundingClientRect();
  document.body.setAttribute('data-probe', [before, r.top, r.bottom, window.innerHeight,
    img.naturalWidth].join(' '));
});</script></body>"""


def _chromium(tmp_path, *flags):
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", "--window-size=1280,900", f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000", *flags,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_chromium_shows_a_figure_on_the_first_screen(report, tmp_path):
    html_path, _, _ = report
    page = html_path.with_name("probed.html")
    page.write_text(html_path.read_text(encoding="utf-8").replace("</body>", PROBE))
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    before, top, bottom, height, width = re.search(r'data-probe="([^"]+)"', dom).group(1).split()
    assert before == "true"  # the first image comes before the first table
    assert int(width) > 0 and 0 <= float(top) < float(height)  # decoded, and starts on screen
    assert float(bottom) - float(top) > 200  # a figure, not an icon
    shot = tmp_path / "first-screen.png"
    _chromium(tmp_path, f"--screenshot={shot}", html_path.as_uri())
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, 1280) and pixels.std() > 0.05  # not blank
    green = np.array(to_rgb(VERDICT_COLOURS[Verdict.BETTER]))
    assert (np.abs(pixels - green).sum(axis=-1) < 0.1).sum() > 50  # the verdicts' points are there
    shutil.copy(shot, html_path.with_name("first-screen.png"))  # kept beside the report
