"""The verdicts judged again at a matched lr and under the mean rule, and the selection-rule check
saying when it is vacuous (gelus.report.lr_choice), on small records whose answer is known by
construction; p-values checked against scipy and Holm written out."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.experiments.protocol import Protocol
from gelus.experiments.selection import Selection
from gelus.report.analysis import analyse
from gelus.report.export import tables
from gelus.report.lr_choice import epoch_rule_note, matched_point, matched_records
from gelus.report.metrics import Mark, Verdict
from gelus.report.render import report_blocks, to_markdown, unwrapped
from test_synthetic import Record, RunInfo

SEEDS = range(5)


def _records(val: dict, test: dict | None = None, epochs: int = 1, jitter: float = 0.004):
    """One config "h" of experiment "e" (no preset: the default protocol, GELU against ReLU and
    ELU): ``val[(activation, lr)]`` is each seed's validation loss (a list) or one value for
    every seed, ``test`` the same for test (default: val's); seed jitter of ``jitter`` on both.
    With several epochs every loss falls to its value at the last."""
    test = test or val
    records, runs = [], []
    for (activation, lr), v in val.items():
        for seed in SEEDS:
            shift = jitter * (((3 * seed + sum(map(ord, activation))) % 5) - 2) / 2
            run = f"{activation}-{lr:g}-{seed}"
            key = (run, "e", "h", activation, seed, lr, "")
            runs.append(RunInfo(*key, "done", json.dumps({}), json.dumps({})))
            for epoch in range(1, epochs + 1):
                later = 0.1 * (epochs - epoch)  # the best epoch is the last
                for split, values in (("val", v), ("test", test[(activation, lr)])):
                    value = values[seed] if isinstance(values, list) else values
                    records.append(Record(*key, epoch, split, "loss", value + shift + later))
    return records, runs


def _test_values(records, activation, lr) -> np.ndarray:
    found = {
        r.seed: r.value
        for r in records
        if (r.activation, r.lr, r.split, r.epoch) == (activation, lr, "test", 1)
    }
    return np.array([found[s] for s in SEEDS])


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: p_(i)·(m − i + 1), running max, capped at 1."""
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - rank)))
        out[i] = running
    return out.tolist()


def test_the_matched_point_is_the_common_lr_of_lowest_median_regret():
    grids = {
        "a": {1: 1.0, 2: 1.2, 4: 1.5},
        "b": {1: 1.3, 2: 1.0, 4: 1.1},
        "c": {2: 1.05, 4: 1.0, 8: 0.9},
    }
    # common lrs {2, 4}; regrets at 2: a 0, b 0, c 0.05 (median 0); at 4: 0.3, 0.1, 0 (0.1)
    assert matched_point(grids) == 2
    # a tie in median regret: the lower lr; a diverged (inf) aggregate is the worst regret
    assert matched_point({"a": {1: 1.0, 2: 1.1}, "b": {1: 1.1, 2: 1.0}}) == 1
    assert matched_point({"a": {1: float("inf"), 2: 1.0}, "b": {1: 1.0, 2: 1.01}}) == 2
    assert matched_point({"a": {1: 1.0}, "b": {2: 1.0}}) is None


def _selection(config: str, activation: str, grid: dict[float, float]) -> Selection:
    best = min(grid, key=grid.get)
    return Selection(
        "e", config, "", activation, "", best, True, "loss", {}, {},
        {("", lr): v for lr, v in grid.items()}, "rule",
    )  # fmt: skip


def test_a_family_gets_one_point_over_all_its_configs_and_a_config_its_own():
    # config x: gelu best at 1, relu at 2; config y: both best at 2. Alone, x's point is 1
    # (regrets at 1: 0 and 0.05, median 0.025; at 2: 0.1 and 0, median 0.05); over both configs
    # the four cells' median regret is 0.025 at 2 (0.1, 0, 0, 0) against 0.075 at 1
    grids = {
        ("x", "gelu"): {1: 1.0, 2: 1.1},
        ("x", "relu"): {1: 1.05, 2: 1.0},
        ("y", "gelu"): {1: 1.2, 2: 1.0},
        ("y", "relu"): {1: 1.3, 2: 1.0},
    }
    selections = [_selection(h, a, g) for (h, a), g in grids.items()]
    records = [
        Record(f"{h}{a}{lr}", "e", h, a, 0, lr, "", 1, split, "loss", 1.0)
        for h, a in grids
        for lr in (1, 2)
        for split in ("val", "test")
    ]
    alone, points = matched_records(records, selections, lambda h: h)
    assert points == {("x", ""): 1, ("y", ""): 2}
    assert {(r.config_hash, r.lr) for r in alone} == {("x", 1), ("y", 2)}
    family, points = matched_records(records, selections, {"x": "f", "y": "f"}.get)
    assert points == {("f", ""): 2} and {r.lr for r in family} == {2}
    assert matched_records(records, selections, {"x": "f"}.get)[0] == [
        r for r in records if r.config_hash == "x" and r.lr == 1
    ]  # a config in no judgment is left out


def _by_pair(result):
    return {(c.treatment, c.baseline): (c, rows) for (c, _), rows in zip(result.comparisons, result.alternatives, strict=True)}  # fmt: skip


def test_a_verdict_better_only_at_its_own_lr_is_worse_at_the_matched_lr_and_marked():
    # gelu is best at 1e-2 (1.0), relu and elu at 1e-3 (1.2, 1.1): each at its own lr gelu is
    # better; at the matched point 1e-3 (median regret 0: relu's and elu's; at 1e-2 it is 0.1)
    # gelu's 1.5 is worse than both
    val = {
        ("gelu", 1e-3): 1.5, ("gelu", 1e-2): 1.0,
        ("relu", 1e-3): 1.2, ("relu", 1e-2): 1.3,
        ("elu", 1e-3): 1.1, ("elu", 1e-2): 1.4,
    }  # fmt: skip
    records, runs = _records(val)
    (result,) = analyse(records, runs, {})
    found = _by_pair(result)
    p = []
    for baseline in ("relu", "elu"):
        c, (matched, mean) = found[("gelu", baseline)]
        assert c.verdict is Verdict.BETTER and Mark.LR_CHOICE in c.marks()
        assert matched.lr == "matched lr 0.001" and mean.lr == "mean rule: 0.01 vs 0.001"
        d = _test_values(records, "gelu", 1e-3) - _test_values(records, baseline, 1e-3)
        assert matched.mean == pytest.approx(d.mean()) and matched.verdict is Verdict.WORSE
        p.append(scipy_stats.ttest_1samp(d, 0.0).pvalue)
        assert c.lr_choice.startswith("matched lr 0.001 worse, p Holm")
        assert mean.verdict is Verdict.BETTER  # the mean chooses what the median does here
    holm = [found[("gelu", b)][1][0].p_holm for b in ("relu", "elu")]
    assert holm == pytest.approx(_holm(p), rel=1e-9)  # the matched rows are one Holm family
    # the table shows the rows under the headline one, the export has them and the columns
    md = unwrapped(to_markdown(report_blocks([result], {}, runs=runs), Path(".")))
    assert "| gelu − relu | — | matched lr 0.001 |" in md and "depends on the lr choice" in md
    rows = [r for r in tables(records, runs, [result])["verdicts"] if r["treatment"] == "gelu"]
    assert [r["lr_choice"] for r in rows[:3]] == ["protocol", "matched lr", "mean rule"]
    assert rows[0]["matched_lr_verdict"] == "worse" and Mark.LR_CHOICE.value in rows[0]["marks"]


def test_one_broken_seed_moves_the_mean_rules_lr_and_its_verdict():
    # relu at 1e-2: four seeds 1.00, one broken at 1.60 (median 1.00 < 1.10 at 1e-3, the median
    # rule's choice; mean 1.12 > 1.10, the mean rule's 1e-3). gelu 1.05 at 1e-3 (1.20 at 1e-2).
    broken = [1.0, 1.0, 1.6, 1.0, 1.0]
    val = {
        ("gelu", 1e-3): 1.05, ("gelu", 1e-2): 1.2,
        ("relu", 1e-3): 1.1, ("relu", 1e-2): broken,
    }  # fmt: skip
    records, runs = _records(val)
    (result,) = analyse(records, runs, {})
    c, rows = _by_pair(result)[("gelu", "relu")]
    mean = next(a for a in rows if a.lr.startswith("mean rule"))
    assert mean.lr == "mean rule: 0.001 vs 0.001"
    d = _test_values(records, "gelu", 1e-3) - _test_values(records, "relu", 1e-3)
    assert mean.p == pytest.approx(scipy_stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    assert mean.verdict is Verdict.BETTER and c.verdict is Verdict.UNRESOLVED  # one seed's −0.55
    assert "mean rule: 0.001 vs 0.001 better" in c.lr_choice and Mark.LR_CHOICE in c.marks()


def test_agreement_everywhere_leaves_no_mark():
    val = {(a, lr): 1.0 + 0.1 * i + (lr == 1e-2) * 0.2 for i, a in enumerate(("gelu", "relu", "elu")) for lr in (1e-3, 1e-2)}  # fmt: skip
    records, runs = _records(val)
    (result,) = analyse(records, runs, {})
    for (c, _), rows in zip(result.comparisons, result.alternatives, strict=True):
        assert not c.lr_choice and Mark.LR_CHOICE not in c.marks()
        assert [a.verdict for a in rows] == [c.verdict, c.verdict]


def test_the_selection_rule_check_says_when_it_is_vacuous():
    val = {("gelu", 1e-3): 1.0, ("relu", 1e-3): 1.1}
    records, runs = _records(val, epochs=3)  # every loss falls to its last epoch
    note = epoch_rule_note(records, Protocol(select_metrics=("loss",)))
    assert note.startswith("The selection-rule check is vacuous here")
    assert "(val loss 10 of 10)" in note and "compares a rule with itself" in note
    (result,) = analyse(records, runs, {})
    assert result.rule_note == note
    md = unwrapped(to_markdown(report_blocks([result], {}, runs=runs), Path(".")))
    assert md.count(note) == 2  # at the glance and in the experiment's section
    # one run whose best epoch is the second of three: the check can tell the rules apart
    early = [
        r._replace(value=0.0) if (r.run_id, r.epoch, r.split) == ("relu-0.001-0", 2, "val") else r
        for r in records
    ]
    said = epoch_rule_note(early, Protocol(select_metrics=("loss",)))
    assert "is the last in val loss 9 of 10 runs" in said and "vacuous" not in said
    assert epoch_rule_note(_records(val)[0], Protocol()) == ""  # one epoch: no best-epoch rule


def test_each_trend_has_its_rows_at_the_familys_matched_lr_and_under_the_mean_rule():
    from gelus.experiments.presets import PRESETS
    from test_axis_families import _scale_records

    records, runs, x = _scale_records()  # every activation best at 1e-3 at every size
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    for t in axis.trends:
        c = t.comparison
        matched, mean = t.alternatives
        assert (matched.lr, mean.lr) == ("matched lr 0.001", "mean rule")
        metric = c.metric.split()[0]
        gaps = [
            [
                r.value - g.value
                for r in records
                for g in records
                if (r.config_hash, r.activation, r.lr, r.split, r.metric, r.epoch)
                == (h, c.treatment, 1e-3, "test", metric, 2)
                and (g.config_hash, g.activation, g.lr, g.split, g.metric, g.epoch, g.seed)
                == (h, "gelu", 1e-3, "test", metric, 2, r.seed)
            ]
            for h in ("s1", "s2", "s3")
        ]
        # every point at 1e-3: the slope of the points' mean gaps on x, by numpy's least squares
        slope = np.polyfit(x, np.array(gaps).mean(axis=1), 1)[0]
        assert matched.mean == pytest.approx(slope, rel=1e-9)
        assert matched.verdict == c.verdict == mean.verdict and not c.lr_choice
