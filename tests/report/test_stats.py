"""Statistics of the report against independent oracles (scipy, hand-computed values)."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.experiments.presets import PRESETS
from gelus.experiments.protocol import Protocol
from gelus.experiments.selection import select, variant_labels
from gelus.report.stats import HEADLINE, adjust, bootstrap_ci, compare_paired, iqm
from test_synthetic import Record


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 40])
def test_iqm_matches_scipy_trim_mean(n):
    values = np.random.default_rng(n).standard_cauchy(n)
    assert iqm(values) == pytest.approx(scipy_stats.trim_mean(values, 0.25))


def test_iqm_along_an_axis_matches_scipy():
    values = np.random.default_rng(0).normal(size=(6, 9))
    np.testing.assert_allclose(iqm(values, axis=1), scipy_stats.trim_mean(values, 0.25, axis=1))


def test_bootstrap_matches_scipy_percentile_bootstrap():
    data = np.random.default_rng(1).exponential(size=50)
    ours = bootstrap_ci(
        data, np.median, rng=np.random.default_rng(2), n_resamples=20_000, confidence=0.95
    )
    theirs = scipy_stats.bootstrap(
        (data,), np.median, method="percentile", n_resamples=20_000, random_state=3
    ).confidence_interval
    assert ours[0] == pytest.approx(theirs.low, abs=0.05)
    assert ours[1] == pytest.approx(theirs.high, abs=0.05)


def test_bootstrap_is_reproducible_with_the_same_generator():
    data = [0.3, 0.1, 0.7, 0.2]
    a = bootstrap_ci(data, np.mean, rng=np.random.default_rng(5), n_resamples=1000, confidence=0.9)
    b = bootstrap_ci(data, np.mean, rng=np.random.default_rng(5), n_resamples=1000, confidence=0.9)
    assert a == b
    assert min(data) <= a[0] <= a[1] <= max(data)


def test_bootstrap_coverage_on_a_known_distribution():
    # 95 % percentile CIs of the mean of N(0, 1) samples of size 40 should cover 0 about 95 % of
    # the time; 300 trials with a fixed seed: anything in [88 %, 99 %] is sane.
    rng = np.random.default_rng(123)
    covered = 0
    for _ in range(300):
        sample = rng.normal(size=40)
        low, high = bootstrap_ci(sample, np.mean, rng=rng, n_resamples=2000, confidence=0.95)
        covered += low <= 0.0 <= high
    assert 0.88 <= covered / 300 <= 0.99


def test_summarize_hand_computed():
    s = HEADLINE.summarize([3.0, 1.0, 2.0, 10.0], "cell")
    assert (s.n, s.mean, s.median) == (4, 4.0, 2.5)
    assert s.iqm == pytest.approx(2.5)  # cut one from each end: mean(2, 3)
    assert 1.0 <= s.median_ci[0] <= s.median <= s.median_ci[1] <= 10.0
    empty = HEADLINE.summarize([], "cell")
    assert empty.n == 0 and np.isnan(empty.median)


def _rec(
    activation,
    seed,
    lr,
    epoch,
    split,
    value,
    metric="error",
    setting="",
    experiment="exp",
    chash="h",
):
    return Record(f"{chash}{activation}{seed}{lr}{setting}", experiment, chash, activation, seed, lr, setting, epoch, split, metric, value)  # fmt: skip


def test_select_chooses_lr_by_median_val_at_last_epoch():
    records = []
    # lr 1e-3: val at the last epoch 0.20, 0.30, 0.90 (median 0.30); lr 1e-4: 0.25, 0.28, 0.29 (0.28)
    for lr, vals in ((1e-3, (0.20, 0.30, 0.90)), (1e-4, (0.25, 0.28, 0.29))):
        for seed, v in enumerate(vals):
            records.append(_rec("gelu", seed, lr, 1, "val", 0.05))  # epoch 1 best, but "last" rule
            records.append(_rec("gelu", seed, lr, 2, "val", v))
            records.append(_rec("gelu", seed, lr, 2, "test", v + 0.01 * seed))
    (selection,) = select(records, Protocol(select_metrics=("error",), report_metrics=("error",)))
    assert selection.lr == 1e-4 and selection.lr_selected
    assert selection.values == pytest.approx({0: 0.25, 1: 0.29, 2: 0.31})
    assert selection.epochs == {0: 2, 1: 2, 2: 2}
    assert selection.val_medians == pytest.approx({("", 1e-3): 0.30, ("", 1e-4): 0.28})


def test_select_best_epoch_rule_reports_test_at_each_seeds_best_val_epoch():
    records = []
    for seed, best in enumerate((2, 3, 1)):
        for epoch in (1, 2, 3):
            val = 0.1 if epoch == best else 0.5
            records.append(_rec("gelu", seed, 1e-3, epoch, "val", val, experiment="timit"))
            records.append(
                _rec("gelu", seed, 1e-3, epoch, "test", 10 * seed + epoch, experiment="timit")
            )
    (selection,) = select(records, Protocol(select_metrics=("error",), epoch="best"))
    assert selection.values == {0: 2, 1: 13, 2: 21}
    assert PRESETS["timit"].protocol.epoch == "best"  # the paper: chosen at the lowest val error


def test_select_without_validation_reports_each_lr():
    records = [_rec("relu", s, lr, 3, "test", lr * 1000 + s) for lr in (1e-3, 1e-4) for s in (0, 1)]
    selections = select(records, Protocol(report_metrics=("error",)))
    assert [(s.lr, s.lr_selected) for s in selections] == [(1e-4, False), (1e-3, False)]
    assert selections[1].values == {0: 1.0, 1: 2.0}


def test_select_tunes_the_setting_when_asked():
    records = []
    for setting, v in (("keep=1.0", 0.3), ("keep=0.5", 0.1), ("keep=0.75", 0.2)):
        for seed in (0, 1):
            common = {"setting": setting, "experiment": "stochastic-gelu"}
            records.append(_rec("relu", seed, 1e-3, 1, "val", v, **common))
            records.append(_rec("relu", seed, 1e-3, 1, "test", v + seed, **common))
    (selection,) = select(records, PRESETS["stochastic-gelu"].protocol)
    assert selection.setting == "keep=0.5"
    assert selection.values == pytest.approx({0: 0.1, 1: 1.1})


def test_paired_difference_uses_shared_seeds_only():
    records = []
    for seed, v in ((0, 0.10), (1, 0.11), (2, 0.12)):
        records += [_rec("gelu", seed, 1e-3, 1, "test", v)]
    for seed, v in ((1, 0.20), (2, 0.25), (3, 0.01)):  # seed 3 has no GELU partner
        records += [_rec("relu", seed, 1e-3, 1, "test", v)]
    gelu, relu = select(records, Protocol(report_metrics=("error",)))
    assert (gelu.activation, relu.activation) == ("gelu", "relu")
    c = compare_paired(gelu, relu)
    assert c.seeds == (1, 2)
    assert c.differences == pytest.approx((-0.09, -0.13))
    assert c.mean == pytest.approx(-0.11)
    reference = scipy_stats.ttest_rel([0.11, 0.12], [0.20, 0.25])
    assert c.p == pytest.approx(reference.pvalue)
    (adjusted,) = adjust([c])
    assert adjusted.verdict == "· unresolved" and adjusted.p_holm == pytest.approx(c.p)


ERROR_ONLY = Protocol(select_metrics=("error",), report_metrics=("error",))


def test_two_configs_are_never_merged_and_are_labelled_by_what_differs():
    # the same activation, setting, lr and seeds in two configs, with different values
    records = []
    for chash, offset in (("tanh0", 0.0), ("none0", 0.5)):
        for seed in (0, 1):
            records.append(_rec("gelu", seed, 1e-3, 1, "val", 0.1 + offset, chash=chash))
            records.append(_rec("gelu", seed, 1e-3, 1, "test", 0.2 + offset + seed, chash=chash))
    configs = {
        "tanh0": {"model.approximate": "tanh", "train.epochs": 1},
        "none0": {"model.approximate": "none", "train.epochs": 1},
    }
    none, tanh = select(records, ERROR_ONLY, configs)
    assert (tanh.config_hash, tanh.variant) == ("tanh0", "model.approximate=tanh")
    assert (none.config_hash, none.variant) == ("none0", "model.approximate=none")
    assert tanh.values == pytest.approx({0: 0.2, 1: 1.2})
    assert none.values == pytest.approx({0: 0.7, 1: 1.7})
    assert variant_labels(["a"], {"a": {"x": 1}}) == {"a": ""}  # one config: no label


def test_tune_then_retrain_takes_the_lr_from_tuning_and_the_error_from_the_retrain():
    protocol = PRESETS["cifar10-allconv"].protocol
    configs = {
        "tune": {"cnn.retrain_full": False, "train.epochs": 2},
        "full": {"cnn.retrain_full": True, "train.epochs": 2},
    }
    records = []
    for seed in (0, 1, 2):
        # tuning: lr 1e-4 wins on val (0.2 < 0.3); its own test errors are 0.5
        for lr, val in ((1e-3, 0.3), (1e-4, 0.2)):
            records.append(_rec("gelu", seed, lr, 2, "val", val, chash="tune"))
            records.append(_rec("gelu", seed, lr, 2, "test", 0.5, chash="tune"))
        # retrain on 50k at both lrs, no val split: 1e-3 would look better, but it was not chosen
        records.append(_rec("gelu", seed, 1e-3, 2, "test", 0.01, chash="full"))
        records.append(_rec("gelu", seed, 1e-4, 2, "test", 0.07 + seed / 100, chash="full"))
    (selection,) = [s for s in select(records, protocol, configs) if s.metric == "error"]
    assert (selection.lr, selection.lr_selected) == (1e-4, True)
    assert (selection.config_hash, selection.tuned_on) == ("full", "tune")
    assert selection.values == pytest.approx({0: 0.07, 1: 0.08, 2: 0.09})
    # without the retrain config, the tuning config reports on its own
    tuning_only = [r for r in records if r.config_hash == "tune"]
    (alone,) = select(tuning_only, ERROR_ONLY, configs)
    assert (alone.config_hash, alone.lr, alone.tuned_on) == ("tune", 1e-4, "")
    assert alone.values == pytest.approx({0: 0.5, 1: 0.5, 2: 0.5})


def test_diverged_runs_lose_the_lr_choice_and_are_counted_not_crashed_on():
    nan, inf = float("nan"), float("inf")
    records = []
    for seed, (bad_val, good_val) in enumerate(((nan, 0.3), (nan, 0.3), (0.01, 0.3))):
        records.append(_rec("gelu", seed, 1.0, 1, "val", bad_val))  # diverged in 2 of 3 seeds
        records.append(_rec("gelu", seed, 1.0, 1, "test", bad_val))
        records.append(_rec("gelu", seed, 1e-3, 1, "val", good_val))
        records.append(_rec("gelu", seed, 1e-3, 1, "test", [0.3, inf, 0.5][seed]))
    (selection,) = select(records, ERROR_ONLY)
    assert selection.lr == 1e-3  # a median over {inf, inf, 0.01} is inf: 1.0 is not chosen
    assert selection.diverged == 1 and selection.finite == [0.3, 0.5]
    summary = selection.summarize()
    assert (summary.n, summary.diverged, summary.median) == (2, 1, 0.4)
    assert HEADLINE.summarize([nan, nan]).diverged == 2
    baseline = selection._replace(activation="relu", values={0: 0.4, 1: 0.4, 2: 0.4})
    c = compare_paired(selection, baseline)
    assert c.seeds == (0, 2) and c.diverged == 1 and c.mean == pytest.approx(0.0)
