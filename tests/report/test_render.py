"""The HTML and Markdown report: tables with independently computed numbers, banner, missing
experiments, and a headless-Chromium check that the page renders and every image loads."""

import re
import shutil
import statistics
import subprocess

import matplotlib

matplotlib.use("Agg")

import pytest

from gelus.experiments.presets import PRESETS
from gelus.report.analysis import Missing
from gelus.report.render import QUICK_BANNER, unwrapped, write_report
from test_synthetic import make_records, value_of

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    mnist, mnist_runs = make_records(epochs=3, lrs=(1e-3, 1e-4), quick=True)
    cifar, cifar_runs = make_records("cifar10-allconv", settings=("",), lrs=(1e-3,), epochs=2, dataset="cifar10")  # fmt: skip
    missing = [Missing("timit", "timit", "licensed from the LDC: put the files into ~/.cache/gelus/data/timit")]  # fmt: skip
    html_path, md_path = write_report(mnist + cifar, mnist_runs + cifar_runs, out, presets=PRESETS, missing=missing, source="synthetic")  # fmt: skip
    return html_path, md_path, html_path.read_text(), unwrapped(md_path.read_text())


def _median_error(activation, setting, lr, epoch):
    return statistics.median(value_of(activation, s, lr, setting, epoch, "test", "error") for s in SEEDS)  # fmt: skip


def _without_edges(md: str) -> str:
    """The tables without the lr-grid-edge notes (the first test below checks one is there)."""
    return re.sub(r" \(edge of the grid [^)]*\)", "", md)


def test_markdown_tables_hold_the_protocols_numbers(report):
    _, _, _, md = report
    assert "0.001 (edge of the grid" in md  # the highest lr of the grid was chosen
    md = _without_edges(md)
    # mnist: the lowest median val loss at the last epoch is lr 1e-3 (value_of penalises 1e-4)
    for activation in ("gelu", "relu", "elu"):
        median = _median_error(activation, "keep=1.0", 1e-3, 3)
        row = f"| {activation} | keep=1.0 | 0.001 | test error | 3 | {100 * median:.2f} % |"
        assert row in md
    # cifar10: the paper's number next to ours, and the paired difference on the same seeds
    gelu = _median_error("gelu", "", 1e-3, 2)
    assert f"| gelu | — | 0.001 | test error | 3 | {100 * gelu:.2f} % |" in md
    assert md.count("| 7.89 % |") == 1  # the paper's CIFAR-10 GELU error, from the preset
    differences = [value_of("gelu", s, 1e-3, "", 2, "test", "error") - value_of("relu", s, 1e-3, "", 2, "test", "error") for s in SEEDS]  # fmt: skip
    mean = statistics.mean(differences)
    assert re.search(
        rf"\| gelu − relu \| — \| chosen \| test error \| 3 \| {100 * mean:+.2f} pp \|", md
    )
    from scipy import stats

    p = stats.ttest_1samp(differences, 0.0).pvalue  # the unadjusted p of GELU − ReLU
    shown = "&lt; 0.001" if p < 0.001 else f"{p:.3f}"
    assert re.search(
        rf"\| {re.escape(shown)} \| 0\.25 \| [&lt;0-9. ]+ \| — \| (▲ better|▼ worse|· unresolved) \(",
        md,  # p, then the exact sign-flip p (its floor at n = 3 is 2/2³), then Holm's
    )


def test_report_states_setup_differences_environment_and_missing_data(report):
    _, md_path, html, md = report
    assert md.startswith("# GELU paper reproduction")
    assert QUICK_BANNER in md and QUICK_BANNER in html
    assert "| dataset | mnist | fashion-mnist |" in md  # the substitution, read from the runs
    assert "| epochs | 50 | 3 |" in md
    assert "2.13.0+cpu" in md and "abc1234" in md
    assert "## Experiments without data" in md and "licensed from the LDC" in md
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (md_path.parent / image).is_file()
    assert "<h2 id='cifar10-allconv-paper-figure-6'>" in html


def test_html_is_self_contained(report):
    _, _, html, _ = report
    assert re.search(r"<img[^>]+src='(?!data:image/png;base64,)", html) is None
    assert html.count("data:image/png;base64,") == html.count("<img")
    assert html.count("<img") >= 5  # figure 1, mnist curves + summary, cifar curves + summary


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Added by the test only: after load, count the images that decoded and write it into the DOM.
CHECK = """<script>window.addEventListener('load', () => {
  const images = [...document.images];
  const loaded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.setAttribute('data-images', loaded + '/' + images.length);
});</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_chromium_renders_the_page_and_every_image_loads(report, tmp_path):
    html_path, _, html, _ = report
    page = html_path.with_name("checked.html")
    page.write_text(html.replace("</body>", CHECK))
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
        page.as_uri(),
    ]  # fmt: skip
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    n = html.count("<img")
    assert f'data-images="{n}/{n}"' in dom
    assert "Test results: paper vs ours" in dom


def _report(tmp_path, records, runs):
    _, md_path = write_report(records, runs, tmp_path, presets=PRESETS, activation_figure=False)
    return unwrapped(md_path.read_text())


def test_summary_comes_first_and_experiments_follow_the_papers_order(tmp_path):
    auto, auto_runs = make_records("mnist-autoencoder", settings=("",), splits=("train", "test"), metrics=("loss", "recon_error"), epochs=2)  # fmt: skip
    wrn, wrn_runs = make_records("cifar100-wrn", settings=("",), lrs=(0.1,), splits=("train", "test"), seeds=range(5), epochs=2)  # fmt: skip
    mnist, mnist_runs = make_records(epochs=2)
    md = _report(tmp_path, auto + wrn + mnist, auto_runs + wrn_runs + mnist_runs)
    headings = re.findall(r"^## (.+)$", md, flags=re.MULTILINE)
    assert headings[:7] == [
        "Verdicts at a glance",
        "The paper's claims, as the paper made them",
        "Summary",
        "How to read",
        "mnist-classification (paper Figure 2)",
        "mnist-autoencoder (paper Figure 4)",
        "cifar100-wrn (paper Figure 7)",
    ]
    glance = re.findall(r"^### (.+)$", md[: md.index("## The paper's claims")], flags=re.MULTILINE)
    assert glance == ["mnist-classification", "mnist-autoencoder", "cifar100-wrn"]
    summary = md[md.index("## Summary") : md.index("## How to read")]
    (wrn_row,) = [line for line in summary.splitlines() if line.startswith("| cifar100-wrn")]
    # what the paper reports, what this run found, and the verdict with its n
    assert PRESETS["cifar100-wrn"].paper_summary in wrn_row
    gelu = statistics.median(value_of("gelu", s, 0.1, "", 2, "test", "error") for s in range(5))
    assert f"gelu {100 * gelu:.2f} %" in wrn_row
    assert (
        "gelu vs relu (lr=0.1): ▲ better" in wrn_row and "gelu vs elu (lr=0.1): ▲ better" in wrn_row
    )


def test_two_configs_in_one_folder_are_separate_labelled_rows(tmp_path):
    tanh, tanh_runs = make_records(settings=("keep=1.0",), epochs=2, config_hash="aaa", approximate="tanh")  # fmt: skip
    exact, exact_runs = make_records(settings=("keep=1.0",), epochs=2, config_hash="bbb", approximate="none")  # fmt: skip
    exact = [r._replace(value=r.value + 1.0) for r in exact]  # far apart: a merge would show
    md = _without_edges(_report(tmp_path, tanh + exact, tanh_runs + exact_runs))
    for form, shift in (("tanh", 0.0), ("none", 1.0)):
        median = shift + statistics.median(value_of("gelu", s, 1e-3, "keep=1.0", 2, "test", "loss") for s in SEEDS)  # fmt: skip
        row = (
            f"| gelu | model.approximate={form} | keep=1.0 | 0.001 | test loss | 3 | {median:.4g} |"
        )
        assert row in md
        assert f"| mnist-classification (Figure 2) \\[model.approximate={form}\\] |" in md


def test_setup_shows_training_set_and_steps_beside_the_papers(tmp_path):
    wrn, wrn_runs = make_records("cifar100-wrn", settings=("",), lrs=(0.1,), epochs=2, metadata={"train_size": 50_000, "steps": 780})  # fmt: skip
    md = _report(tmp_path, wrn, wrn_runs)
    assert (
        f"| training set | {PRESETS['cifar100-wrn'].paper_setup['training set']} | 50,000 |" in md
    )
    assert "| steps | 39,050 | 780 |" in md


def test_a_paper_number_is_not_attached_to_a_setting_the_paper_did_not_run(tmp_path):
    # twitter-pos at keep 1.0 (the paper: keep 0.8): the paper's 12.67 % is not this experiment
    pos, pos_runs = make_records("twitter-pos", settings=("keep=1.0", "keep=0.8"), lrs=(1e-3,), epochs=2)  # fmt: skip
    md = _report(tmp_path, pos, pos_runs)
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| relu | keep=") and "test error" in line}  # fmt: skip
    assert rows["keep=0.8"].endswith("| 12.67 % |") and rows["keep=1.0"].endswith("| — |")


def test_unfinished_runs_are_named_and_left_out_of_the_statistics(tmp_path):
    # ReLU's runs stopped at epoch 1 of 3 (still training): compared at their last epoch they would
    # look far worse than GELU's finished epoch 3. They must be named, and not counted.
    done, done_runs = make_records(activations=("gelu",), settings=("keep=1.0",), epochs=3)
    running, running_runs = make_records(activations=("relu",), settings=("keep=1.0",), epochs=1)
    running_runs = [r._replace(status="running") for r in running_runs]
    md = _without_edges(_report(tmp_path, done + running, done_runs + running_runs))
    assert "6 of 12 runs have not finished" in md
    assert "(6 of 12 runs unfinished, not counted)" in md
    table = md[md.index("Test results: paper vs ours") :]
    gelu = statistics.median(value_of("gelu", s, 1e-3, "keep=1.0", 3, "test", "loss") for s in SEEDS)  # fmt: skip
    assert f"| gelu | keep=1.0 | 0.001 | test loss | 3 | {gelu:.4g} |" in table
    assert "| relu |" not in table
    assert "gelu vs relu" not in md  # no comparison against runs that have not finished


def test_markdown_shows_a_hostile_label_as_text(tmp_path):
    """No tag, no link, no code span and no extra table cell from a label in the records."""
    from gelus.report.render import Block, to_markdown

    label = "<script>alert(1)</script>[click](http://evil.example)`rm`|x|*y*"
    blocks = [
        Block("h3", f"results of {label}"),
        Block("p", f"{label} trained"),
        Block("table", headers=("activation", "value"), rows=((label, "1.0"),)),
    ]
    md = to_markdown(blocks, tmp_path)
    assert "<script" not in md and not re.search(r"(?<!\\)\]\(http", md)  # no link
    assert "`rm`" not in md.split("| activation")[1]  # no code span from a label in a table
    table_row = next(line for line in md.splitlines() if line.startswith("| ") and "1.0" in line)
    cells = re.split(r"(?<!\\)\|", table_row)
    assert len(cells) == 4  # "", label, value, "": the pipes in the label stay inside its cell
