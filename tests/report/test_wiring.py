"""The verdicts' robustness wired into the report: the sign-flip p beside the t-test's, the
leave-one-seed-out range, the inside-the-margin mark, the test's assumption and measured rates in
the words, the power of a Holm verdict, and the reference activation's runner-up learning rate.

Oracles: scipy's one-sample t-test, a brute-force enumeration of sign patterns, a linear scan of
pair counts, and hand-built records whose lr choice is known."""

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.experiments.protocol import Protocol
from gelus.experiments.selection import runner_up, select
from gelus.report.analysis import analyse
from gelus.report.metrics import Verdict
from gelus.report.render import report_blocks, to_markdown, unwrapped
from gelus.report.robust import (
    INSIDE_MARGIN,
    NULL_RATES,
    holm_power,
    pairs_for_holm_power,
    robust_marks,
)
from gelus.report.stats import DESIGN, VERDICTS, Comparison, adjust, power
from gelus.report.words import how_to_read, power_text, sensitivity_claim, verdict_cell
from test_synthetic import Record, RunInfo

ROOT = Path(__file__).resolve().parents[2]


def _comparison(differences, seeds=None, metric="loss", treatment="silu") -> Comparison:
    d = tuple(float(x) for x in differences)
    seeds = tuple(seeds or range(len(d)))
    p = float(scipy_stats.ttest_1samp(d, 0.0).pvalue)
    return Comparison("e", "", metric, treatment, "gelu", seeds, d, float(np.mean(d)), (0, 0),
                      VERDICTS["unresolved"], p=p)  # fmt: skip


def _brute_sign_flip(d) -> float:
    total = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= total - 1e-12
        for signs in itertools.product((-1, 1), repeat=len(d))
    )
    return hits / 2 ** len(d)


def test_every_comparison_carries_the_exact_sign_flip_p_of_its_differences():
    family = [_comparison([2.03, 0.62, 0.59, 0.72, 1.59]), _comparison([0.2, -0.1, 0.3, 0.05])]
    marked = robust_marks(adjust(family))
    for c in marked:
        assert c.p_sign == pytest.approx(_brute_sign_flip(c.differences))
    assert marked[0].p_sign == pytest.approx(0.0625)  # the floor at n = 5: all the same sign


def test_every_judged_verdict_carries_its_range_with_one_seed_left_out_and_says_it():
    d = [2.03, 0.62, 0.59, 0.72, 1.59]  # Σ = 5.55; by hand: without 2.03, 3.52/4 = 0.88; without
    (c,) = robust_marks(adjust([_comparison(d)]))  # 0.59, 4.96/4 = 1.24
    assert c.verdict is Verdict.WORSE
    assert c.loso == pytest.approx((0.88, 1.24), abs=1e-12)
    assert "one seed left out: +0.88 to +1.24" in _verdict_cell(c)
    assert c.marks() == ()  # one seed carrying a verdict is no longer a mark (docs/REPORT.md)
    (unjudged,) = adjust([_comparison(d)])  # a verdict recomputed for its word only: no range
    assert "one seed left out" not in _verdict_cell(unjudged)


def _verdict_cell(c: Comparison) -> str:
    return verdict_cell(c, DESIGN)


def test_a_significant_difference_inside_its_margin_is_flagged_and_one_outside_is_not():
    inside = adjust([_comparison([-0.007, -0.006, -0.008, -0.0075, -0.0065])])[0]
    outside = adjust([_comparison([-0.07, -0.06, -0.08, -0.075, -0.065])])[0]
    assert inside.verdict is Verdict.BETTER and outside.verdict is Verdict.BETTER
    assert f"{INSIDE_MARGIN} (±0.01)" in _verdict_cell(inside)
    assert INSIDE_MARGIN not in _verdict_cell(outside)


def test_the_committed_reports_flag_silu_minus_gelu_without_dropout_as_inside_the_margin():
    text = unwrapped((ROOT / "docs/results/full/report.md").read_text(encoding="utf-8"))
    starts = (  # the headline rows (each at its chosen lr), not the matched-lr or mean-rule ones
        "| silu − gelu | keep=1.0 | chosen |",
        "| silu − gelu | model.init=unit_norm | keep=1.0 | chosen |",
    )
    rows = [line for line in text.splitlines() if line.startswith(starts)]
    assert len(rows) == 2  # mnist-classification (beside its init runs) and mnist-noise
    assert all("-0.007119" in row and INSIDE_MARGIN in row for row in rows)
    assert "| p | p (sign-flip) | p (Holm) |" in text


def _ranges(shape: str, part: int) -> list[str]:
    return [f"{100 * NULL_RATES[shape][n][part]:.1f} %" for n in sorted(NULL_RATES[shape])]


def test_the_words_state_the_assumption_and_the_measured_rates_docs_report_md_quotes():
    text = how_to_read()
    assert "5 % at any n" not in text and "false-positive rate 5 %" not in text
    assert "roughly symmetric paired differences" in text
    assert "0.0625 at n = 5" in text and "sign-flip" in text
    per = [NULL_RATES[s][n][0] for s in NULL_RATES if s != "Gaussian" for n in NULL_RATES[s]]
    family = [NULL_RATES[s][n][1] for s in NULL_RATES if s != "Gaussian" for n in NULL_RATES[s]]
    assert f"{100 * min(per):.1f}" in text and f"{100 * max(per):.1f} %" in text
    assert f"{100 * min(family):.1f}–{100 * max(family):.1f} %" in text
    docs = (ROOT / "docs/REPORT.md").read_text(encoding="utf-8")
    docs = re.sub(r"\s+", " ", docs)
    for shape in ("centred exponential", "centred lognormal"):
        assert ", ".join(_ranges(shape, 0)) in docs, shape  # per comparison at n = 3, 5, 10
        assert ", ".join(_ranges(shape, 1)) in docs, shape  # family-wise over 5
    gauss = [NULL_RATES["Gaussian"][n][0] for n in NULL_RATES["Gaussian"]]
    assert f"{100 * min(gauss):.1f}–{100 * max(gauss):.1f} %" in docs


def test_unresolved_verdicts_give_the_pairs_of_a_holm_verdict_over_the_family():
    rng = np.random.default_rng(3)
    family = [_comparison(rng.normal(0.3, 1.0, 5), treatment=f"a{k}") for k in range(4)]
    checked = False
    for c in adjust(family):
        if c.verdict is Verdict.UNRESOLVED:
            sd = float(np.std(c.differences, ddof=1))
            effect = abs(c.mean) / sd
            n = c.pairs_needed  # the fewest: Holm's power (over the family's 4) crosses 80 % there
            assert holm_power(n - 1, effect, 4) < 0.8 <= holm_power(n, effect, 4)
            assert n == pairs_for_holm_power(c.mean, sd, 4)
            checked = True
    assert checked
    assert pairs_for_holm_power(1.0, 1.0, 5) == 16  # docs/REPORT.md: 1 SD over 5


def test_power_is_quoted_for_a_holm_verdict_with_the_lone_test_beside_it():
    family = [_comparison([0.1, 0.2, 0.15, 0.3, 0.05], treatment=f"a{k}") for k in range(5)]
    text = power_text(adjust(family))
    assert "n = 5 pairs and m = 5 comparisons" in text
    for effect in (1.0, 1.5):
        holm, lone = holm_power(5, effect, 5), power(5, effect, 0.05)
        assert f"{effect:g} SD: {holm:.2f} (a lone test: {lone:.2f})" in text
    assert "0.31 (a lone test: 0.71)" in text  # docs/REPORT.md's table


# --------------------------------------------------------------------------- reference's lr
def _lr_records(gelu_second_val: float):
    """gelu and relu, 5 seeds, lrs 1e-3 and 1e-4, one epoch. GELU's validation error is 0.100 at
    1e-3 (chosen) and ``gelu_second_val`` at 1e-4; its test error is 0.10 at 1e-3 but 0.05 at
    1e-4. ReLU: chosen at 1e-3, test 0.08. So gelu − relu is worse at GELU's chosen lr, better at
    its runner-up."""
    val = {("gelu", 1e-3): 0.100, ("gelu", 1e-4): gelu_second_val,
           ("relu", 1e-3): 0.20, ("relu", 1e-4): 0.30}  # fmt: skip
    test = {("gelu", 1e-3): 0.10, ("gelu", 1e-4): 0.05, ("relu", 1e-3): 0.08, ("relu", 1e-4): 0.3}
    records, runs = [], []
    for (activation, lr), v in val.items():
        for seed in range(5):
            jitter = 0.001 * ((3 * seed + len(activation)) % 5) - 0.002
            run = f"{activation}-{lr:g}-{seed}"
            key = (run, "e", "h", activation, seed, lr, "")
            runs.append(RunInfo(*key, "done", json.dumps({}), json.dumps({})))
            records.append(Record(*key, 1, "val", "error", v + jitter * (lr == 1e-4)))
            records.append(Record(*key, 1, "test", "error", test[(activation, lr)] + jitter))
    return records, runs


def test_runner_up_is_the_second_lr_on_validation_with_both_lrs_values_per_seed():
    records, _ = _lr_records(0.1001)
    protocol = Protocol(select_metrics=("error",), report_metrics=("error",))
    chosen = next(s for s in select(records, protocol) if s.activation == "gelu")
    assert chosen.lr == 1e-3
    found = runner_up(records, protocol, chosen)
    assert found.selection.lr == 1e-4 and found.selection.lr_selected
    assert found.selection.values == {
        r.seed: r.value
        for r in records
        if (r.activation, r.lr, r.split) == ("gelu", 1e-4, "test")
    }  # fmt: skip
    assert found.metric == "error" and found.chosen == dict.fromkeys(range(5), 0.100)
    assert found.second == {
        r.seed: r.value for r in records if (r.activation, r.lr, r.split) == ("gelu", 1e-4, "val")
    }
    single = select([r for r in records if r.lr == 1e-3], protocol)[0]
    assert runner_up(records, protocol, single) is None  # one lr ran: no runner-up


def _gelu_vs_relu(gelu_second_val: float) -> Comparison:
    records, runs = _lr_records(gelu_second_val)
    (result,) = analyse(records, runs, {})
    ((c, _),) = result.comparisons
    return c


def test_a_verdict_that_changes_with_the_reference_at_its_runner_up_lr_is_marked():
    c = _gelu_vs_relu(0.1001)  # 1e-4 within 0.0001 of 1e-3 on validation: not told apart
    assert (c.treatment, c.baseline) == ("gelu", "relu") and c.verdict is Verdict.WORSE
    assert "gelu at its runner-up lr 0.0001, not 0.001" in c.reference_lr
    assert ": better, p Holm" in c.reference_lr
    assert "depends on the reference's lr" in _verdict_cell(c)


def test_no_mark_when_the_references_lr_choice_is_resolved_beyond_the_margin():
    c = _gelu_vs_relu(0.2)  # 1e-4 is 10 pp worse on validation in every seed
    assert c.verdict is Verdict.WORSE and c.reference_lr == ""
    assert "reference's lr" not in _verdict_cell(c)


def test_the_markdown_comparison_table_puts_the_sign_flip_p_beside_the_t_tests():
    records, runs = _lr_records(0.1001)
    results = analyse(records, runs, {})
    md = unwrapped(to_markdown(report_blocks(results, {}, runs=runs), Path(".")))
    table = md[md.index("### Paired differences") :]
    rows = [line for line in table.splitlines() if line.startswith("| gelu − relu |")]
    (row,) = [line for line in rows if "| chosen |" in line]  # not the matched-lr, mean-rule rows
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    c = results[0].comparisons[0][0]
    assert cells[7] == f"{c.p:.3f}" if c.p >= 0.001 else "&lt; 0.001"
    assert float(cells[8]) == pytest.approx(_brute_sign_flip(c.differences))
    assert math.isclose(float(cells[8]), 0.0625)


# --------------------------------------------------------------------------- lr sensitivity
def _regret_records(relu_penalty: float):
    """gelu and relu, 5 seeds, lrs 1e-3 and 1e-4, val and test loss at one epoch: GELU's loss
    barely moves with the lr (regret ≈ 0.001), ReLU's rises by ``relu_penalty`` at 1e-4."""
    records, runs = [], []
    for activation in ("gelu", "relu"):
        for lr in (1e-3, 1e-4):
            for seed in range(5):
                jitter = 0.002 * ((3 * seed + len(activation) + int(lr == 1e-4)) % 5)
                value = 1.0 + jitter + relu_penalty * (activation == "relu" and lr == 1e-4)
                key = (f"{activation}-{lr:g}-{seed}", "e", "h", activation, seed, lr, "")
                runs.append(RunInfo(*key, "done", json.dumps({}), json.dumps({})))
                records += [Record(*key, 1, split, "loss", value) for split in ("val", "test")]
    return records, runs


def _regret_oracle(records, activation) -> list[float]:
    """Each seed's mean regret over the two lrs, by hand."""
    by_seed: dict[int, list[float]] = {}
    for r in records:
        if r.activation == activation and r.split == "val":
            by_seed.setdefault(r.seed, []).append(r.value)
    return [float(np.mean(np.subtract(v, min(v)))) for _, v in sorted(by_seed.items())]


def test_the_sensitivity_section_pairs_each_regret_against_gelu_and_judges_the_seed_claim():
    records, runs = _regret_records(0.5)
    results = analyse(records, runs, {})
    md = unwrapped(to_markdown(report_blocks(results, {}, runs=runs), Path(".")))
    assert "### Learning-rate sensitivity" in md
    (relu,) = [line for line in md.splitlines() if line.startswith("| relu | — | 0.0001, 0.001 |")]
    gelu_regret, relu_regret = _regret_oracle(records, "gelu"), _regret_oracle(records, "relu")
    assert f"| {np.median(relu_regret):.4g} | relu − gelu |" in relu
    difference = np.subtract(relu_regret, gelu_regret)
    assert f"| {difference.mean():+.4g} |" in relu and "▼ worse" in relu  # more sensitive
    (claim,) = [line for line in md.splitlines() if line.startswith("The seed documents' claim")]
    assert "holds in part: gelu is shown less sensitive than relu" in claim
    assert "gelu is stable across them" in claim and f"{np.median(gelu_regret):.4g}" in claim


def test_the_sensitivity_table_names_each_config_where_there_are_several():
    records, runs = _regret_records(0.5)
    both_records, both_runs = [], []
    for init in ("xavier", "he"):
        config = json.dumps({"model": {"init": init}})
        both_runs += [r._replace(run_id=f"{r.run_id}-{init}", config_hash=init, config_json=config) for r in runs]  # fmt: skip
        both_records += [r._replace(run_id=f"{r.run_id}-{init}", config_hash=init) for r in records]
    blocks = report_blocks(analyse(both_records, both_runs, {}), {}, runs=both_runs)
    md = unwrapped(to_markdown(blocks, Path(".")))
    section = md[md.index("### Learning-rate sensitivity") :]
    assert "| activation | config | setting | learning rates |" in section
    for init in ("xavier", "he"):
        assert f"| relu | model.init={init} | — | 0.0001, 0.001 |" in section


def test_the_seed_claim_reads_unresolved_and_unstable_when_the_data_say_so():
    records, runs = _regret_records(0.0)  # the same (small) regret: nothing told apart
    (result,) = analyse(records, runs, {})
    assert "is not shown" in sensitivity_claim(result.sensitivity)
    steep = [r._replace(value=r.value + 0.2 * (r.lr == 1e-4)) for r in records]
    (result,) = analyse(steep, runs, {})
    text = sensitivity_claim(result.sensitivity)
    assert "gelu is not stable across them" in text and "× the margin 0.01" in text


def test_the_lr_figure_adds_the_test_error_and_the_robustness_area_rows():
    from gelus.experiments.presets import PRESETS
    from gelus.report.figures import experiment_figures
    from test_synthetic import make_records, value_of

    levels = (0.0, 1.5, 3.0)
    records, _ = make_records(experiment="mnist-noise", settings=("keep=1.0",), epochs=2,
                              noise_levels=levels)  # fmt: skip
    preset = PRESETS["mnist-noise"]
    selections = select(records, preset.protocol)
    fig = experiment_figures(records, selections, preset.figure, title="t")["lr"]
    assert [ax.get_ylabel().replace("\n", " ") for ax in fig.axes] == [
        "val loss", "test loss", "test error (%)",
        "test error over noise a ∈ [0, 3] (error·a)",
    ]  # fmt: skip
    dots = np.concatenate([c.get_offsets()[:, 1] for c in fig.axes[3].collections])
    for seed in (0, 1, 2):
        errors = [value_of("gelu", seed, 1e-3, "keep=1.0", 2, "test", "error", a) for a in levels]
        area = sum((errors[i] + errors[i + 1]) / 2 * 1.5 for i in range(2))  # trapezoid by hand
        assert np.isclose(dots, area).any()


def test_the_exported_verdicts_carry_the_sign_flip_p_and_the_marks():
    from gelus.report.export import tables

    records, runs = _lr_records(0.1001)
    results = analyse(records, runs, {})
    (row,) = [r for r in tables(records, runs, results)["verdicts"] if r["lr_choice"] == "protocol"]
    c = results[0].comparisons[0][0]
    assert row["p_sign_flip"] == pytest.approx(_brute_sign_flip(c.differences))
    means = [(sum(c.differences) - x) / (len(c.differences) - 1) for x in c.differences]
    assert (row["loso_low"], row["loso_high"]) == pytest.approx((min(means), max(means)))
    assert "runner-up lr 0.0001" in row["depends_on_reference_lr"]


def test_the_seed_claim_names_an_activation_shown_in_several_configs_once():
    from types import SimpleNamespace

    def shown(treatment, word):
        return SimpleNamespace(treatment=treatment, setting="", verdict=word)

    comparisons = [shown("relu2", Verdict.BETTER), shown("relu2", Verdict.BETTER), shown("relu", Verdict.UNRESOLVED)]  # fmt: skip
    groups = [SimpleNamespace(regrets={"gelu": {0: 0.001, 1: 0.002}})]
    sens = SimpleNamespace(comparisons=comparisons, reference="gelu", metric="loss", groups=groups)
    text = sensitivity_claim(sens)
    assert "is contradicted: relu2 (in 2 configs) is shown less sensitive than gelu" in text
    assert "relu2, relu2" not in text
