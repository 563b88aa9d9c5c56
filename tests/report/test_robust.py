"""Verdicts that hold up (gelus.report.robust, gelus.report.sensitivity, stats.power) against
independent oracles: mpmath integration over the normal for the noncentral t, scipy where its
noncentral t is finite, Monte Carlo of Holm over simulated t-tests, brute-force enumeration of
sign patterns, and hand-computed regrets and differences of differences."""

import importlib.util
import itertools
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.experiments.selection import Selection
from gelus.report.robust import (
    holm_adjust,
    holm_power,
    inside_margin,
    loso_means,
    loso_range,
    paired_t_p,
    pairs_for_holm_power,
    seed_drop_losses,
    sign_flip_p,
)
from gelus.report.sensitivity import interaction, lr_sensitivity, mean_regret
from gelus.report.stats import (
    EQUIVALENCE_MARGINS,
    Comparison,
    adjust,
    holm,
    paired_t_test,
    pairs_for_power,
    power,
)
from test_synthetic import Record

TOOLS = Path(__file__).resolve().parents[2] / "tools"


# --------------------------------------------------------------------------- power
def _power_by_mpmath(n: int, effect: float, alpha: float) -> float:
    """P(|T'| > c) integrated over Z instead of the chi: T' = (Z + δ)√ν/X, so for each z,
    P(|T'| > c | z) = P(X² < ν(z + δ)²/c²) = the regularised lower incomplete gamma."""
    mpmath.mp.dps = 30
    nu = n - 1
    c = mpmath.mpf(scipy_stats.t.ppf(1 - alpha / 2, nu))
    delta = mpmath.mpf(effect) * mpmath.sqrt(n)

    def integrand(z):
        x = nu * (z + delta) ** 2 / (2 * c**2)
        return mpmath.npdf(z) * mpmath.gammainc(mpmath.mpf(nu) / 2, 0, x, regularized=True)

    return float(mpmath.quad(integrand, [-mpmath.inf, -delta, 0, delta, mpmath.inf]))


@pytest.mark.parametrize(
    ("n", "effect", "alpha"),
    [(3, 5.0, 0.00625), (3, 6.0, 0.01), (4, 4.5, 0.001), (2, 8.0, 0.05), (6, 4.0, 0.0125)],
)
def test_power_is_finite_where_scipy_is_not_and_matches_an_integral_over_the_normal(
    n, effect, alpha
):
    c = scipy_stats.t.ppf(1 - alpha / 2, n - 1)
    delta = effect * math.sqrt(n)
    scipy_power = scipy_stats.nct.sf(c, n - 1, delta) + scipy_stats.nct.cdf(-c, n - 1, delta)
    if (n, effect) == (3, 5.0):
        assert math.isnan(scipy_power)  # the case the issue names
    assert power(n, effect, alpha) == pytest.approx(_power_by_mpmath(n, effect, alpha), abs=1e-9)


@pytest.mark.parametrize(
    ("n", "effect", "alpha"), [(2, 3.0, 1e-6), (3, 20.0, 1e-8), (2, 30.0, 0.05), (40, 2.0, 1e-10)]
)
def test_power_in_the_corners_matches_the_integral_over_the_normal(n, effect, alpha):
    # a critical value so large that Φ falls from 1 to 0 within 1e-5 of the chi's origin (α =
    # 1e-6 at one degree of freedom), and powers within 1e-3 of 1
    expected = _power_by_mpmath(n, effect, alpha)
    assert power(n, effect, alpha) == pytest.approx(expected, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "effect", "alpha"),
    [(2, 0.0, 0.05), (5, 1.5, 0.05), (10, 1.0, 0.05), (5, 1.5, 0.01), (30, 0.4, 0.001),
     (300, -0.2, 0.05), (5000, 0.04, 0.01)],
)  # fmt: skip
def test_power_matches_scipy_where_scipy_is_finite(n, effect, alpha):
    c = scipy_stats.t.ppf(1 - alpha / 2, n - 1)
    delta = effect * math.sqrt(n)
    expected = scipy_stats.nct.sf(c, n - 1, delta) + scipy_stats.nct.cdf(-c, n - 1, delta)
    assert math.isfinite(expected)
    assert power(n, effect, alpha) == pytest.approx(expected, abs=1e-9)


def test_pairs_for_power_no_longer_overstates_where_scipy_failed():
    # effect 5 SD at the Holm level of 8 comparisons: scipy's NaN made n = 3 look short
    alpha = 0.05 / 8
    n = pairs_for_power(mean=5.0, sd=1.0, alpha=alpha)
    assert power(n, 5.0, alpha) >= 0.8 > power(n - 1, 5.0, alpha)
    assert n == 4 and _power_by_mpmath(3, 5.0, alpha) < 0.8 <= _power_by_mpmath(4, 5.0, alpha)
    # the bisection finds the fewest pairs a linear scan (scipy, finite here) finds
    effect, alpha = 0.3, 0.01
    scan = next(
        k for k in range(2, 1000)
        if scipy_stats.nct.sf(scipy_stats.t.ppf(1 - alpha / 2, k - 1), k - 1, effect * k**0.5)
        + scipy_stats.nct.cdf(-scipy_stats.t.ppf(1 - alpha / 2, k - 1), k - 1, effect * k**0.5)
        >= 0.8
    )  # fmt: skip
    assert pairs_for_power(0.3, 1.0, alpha) == scan
    assert pairs_for_power(0.001, 1.0, 0.05) is None  # beyond 10,000 pairs


# --------------------------------------------------------------------------- Holm-family power
def _holm_power_by_simulation(n, effect, m, draws, seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(draws, m, n))
    d[:, 0] += effect
    adjusted = np.array([holm(row) for row in scipy_stats.ttest_1samp(d, 0.0, axis=-1).pvalue])
    return float(np.mean((adjusted[:, 0] < 0.05) & (d[:, 0].mean(axis=-1) > 0)))


@pytest.mark.parametrize(("n", "effect", "lone", "family"), [(5, 1.5, 0.71, 0.31),
                                                             (10, 1.0, 0.80, 0.51)])  # fmt: skip
def test_holm_power_reproduces_the_issue_and_a_simulation(n, effect, lone, family):
    # docs/REPORT.md's lone-test figures, and one real effect among 5 Holm comparisons
    assert holm_power(n, effect, 1) == pytest.approx(lone, abs=0.005)
    exact = holm_power(n, effect, 5)
    assert exact == pytest.approx(family, abs=0.005)
    draws = 6000
    simulated = _holm_power_by_simulation(n, effect, 5, draws, seed=n)
    assert abs(simulated - exact) < 4 * math.sqrt(exact * (1 - exact) / draws)


def test_holm_power_lies_between_its_bounds_and_falls_with_m():
    n, effect = 6, 1.2
    lone_at_alpha_over_m = power(n, effect, 0.05 / 4)  # the lone test at α/m: a lower bound
    assert lone_at_alpha_over_m <= holm_power(n, effect, 4) <= power(n, effect, 0.05)
    values = [holm_power(n, effect, m) for m in (1, 2, 3, 6, 10)]
    assert values == sorted(values, reverse=True)
    with pytest.raises(ValueError, match="at least one"):
        holm_power(5, 1.0, 0)


def test_pairs_for_holm_power_reach_the_target_and_no_fewer():
    n = pairs_for_holm_power(mean=1.0, sd=1.0, m=5)
    assert holm_power(n, 1.0, 5) >= 0.8 > holm_power(n - 1, 1.0, 5)
    # the lone test at Holm's strictest level α/m is a lower bound on the power: never fewer
    assert n <= pairs_for_power(1.0, 1.0, 0.05 / 5)
    assert pairs_for_holm_power(1.0, 1.0, m=1) == pairs_for_power(1.0, 1.0, 0.05)
    assert pairs_for_holm_power(0.0, 1.0, m=5) is None


# --------------------------------------------------------------------------- sign flip
def _sign_flip_by_enumeration(d):
    d = list(d)
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11])
def test_sign_flip_p_matches_brute_force_enumeration(n):
    rng = np.random.default_rng(n)
    for d in (rng.normal(0.5, 1.0, n), rng.exponential(size=n) - 0.3, np.round(rng.normal(size=n))):
        assert sign_flip_p(d) == pytest.approx(_sign_flip_by_enumeration(d), abs=1e-12)


def test_sign_flip_floor_at_five_pairs_is_one_in_sixteen():
    assert sign_flip_p([0.3, 0.1, 0.2, 0.5, 0.4]) == 2 / 32 == 0.0625
    assert sign_flip_p([1.0, 1.0, 1.0]) == 0.25
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0


def test_sign_flip_beyond_the_enumeration_is_seeded_monte_carlo():
    d = np.random.default_rng(4).normal(0.4, 1.0, 24)
    exact = sign_flip_p(d, max_exact=24)
    draws = 20_000
    estimate = sign_flip_p(d, resamples=draws, rng=np.random.default_rng(0))
    assert estimate == sign_flip_p(d, resamples=draws, rng=np.random.default_rng(0))
    assert abs(estimate - exact) < 4 * math.sqrt(exact * (1 - exact) / draws) + 1 / draws
    with pytest.raises(ValueError, match="rng="):
        sign_flip_p(d)


# --------------------------------------------------------------------------- t and Holm, vectorised
def _comparison(differences, seeds=None, metric="loss"):
    test = paired_t_test(differences)
    seeds = tuple(range(len(differences))) if seeds is None else tuple(seeds)
    return Comparison("e", "", metric, "gelu", "relu", seeds, tuple(differences), test.mean,
                      test.ci, "", p=test.p)  # fmt: skip


def test_vectorised_t_and_holm_match_the_scalar_ones():
    rng = np.random.default_rng(2)
    d = rng.normal(0.3, 1.0, size=(50, 4, 5))
    d[0, 1] = 0.2  # sd = 0
    p = paired_t_p(d)
    expected = [[paired_t_test(row).p for row in family] for family in d]
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    with_nan = np.where(rng.random(p.shape) < 0.2, np.nan, p)
    got = holm_adjust(with_nan)
    for row, adjusted in zip(with_nan, got, strict=True):
        np.testing.assert_allclose(adjusted, holm(list(row)), rtol=1e-12)


def _holm_oracle(pvalues):
    order = np.argsort(pvalues)
    m = len(pvalues)
    adjusted = np.maximum.accumulate([min(1.0, pvalues[i] * (m - r)) for r, i in enumerate(order)])
    out = np.empty(m)
    out[order] = adjusted
    return out


def _losing_seeds(family, which, alpha=0.05):
    """Brute force: the seeds whose drop leaves comparison ``which`` not significant its way."""
    sign = np.sign(np.mean(family[which]))
    losing = []
    for s in range(len(family[which])):
        rest = [np.delete(row, s) for row in family]
        p = _holm_oracle([scipy_stats.ttest_1samp(r, 0.0).pvalue for r in rest])
        if not (p[which] < alpha and np.sign(np.mean(rest[which])) == sign):
            losing.append(s)
    return losing


# --------------------------------------------------------------------------- one seed left out
def test_the_leave_one_seed_out_means_and_range_of_hand_built_differences():
    d = [0.5, -0.25, 1.0, 0.75]  # Σ = 2, n − 1 = 3: by hand, in exact fractions
    by_hand = [Fraction(3, 2) / 3, Fraction(9, 4) / 3, Fraction(1) / 3, Fraction(5, 4) / 3]
    np.testing.assert_array_equal(loso_means(d), [float(f) for f in by_hand])
    low, high = loso_range(d)
    assert (float(low), float(high)) == (1 / 3, 0.75)  # drop the 1.0, drop the −0.25
    # vectorised over leading axes: each row against np.delete one seed at a time
    rows = np.random.default_rng(3).normal(size=(4, 3, 6))
    low, high = loso_range(rows)
    assert low.shape == high.shape == (4, 3)
    for index in np.ndindex(4, 3):
        means = [np.delete(rows[index], j).mean() for j in range(6)]
        assert low[index] == pytest.approx(min(means), rel=1e-12)
        assert high[index] == pytest.approx(max(means), rel=1e-12)
    assert np.isnan(loso_range([1.0])).all()  # one pair: nothing to leave out
    assert np.isnan(loso_range([])).all()  # every pair diverged: no range, no error


def test_the_leave_one_seed_out_range_never_crosses_zero_for_a_significant_t_test():
    # if leaving d_k out puts the mean on the other side of 0 then s > |Σd|/√n, so t < 1 and
    # p > 0.3 (n ≥ 3): heavy tails to try hard, scipy's t-test as the oracle
    d = np.random.default_rng(9).standard_cauchy(size=(50_000, 5)) + 1.0
    significant = scipy_stats.ttest_1samp(d, 0.0, axis=-1).pvalue < 0.3
    low, high = loso_range(d)
    crosses = (low <= 0) & (high >= 0)
    assert significant.sum() > 10_000 and crosses.sum() > 1000
    assert not (crosses & significant).any()


def test_the_seeds_whose_drop_loses_a_holm_verdict_are_counted_as_by_brute_force():
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(40):
        family = rng.normal(size=(3, 5))
        family[0] += rng.choice([1.5, 3.0, 5.0])
        family[2, rng.integers(5)] += rng.choice([0.0, 8.0])
        significant, losses = seed_drop_losses(family)
        full = _holm_oracle([scipy_stats.ttest_1samp(r, 0.0).pvalue for r in family]) < 0.05
        np.testing.assert_array_equal(significant, full)
        assert losses.tolist() == [len(_losing_seeds(family, i)) for i in range(3)]
        seen |= {int(k) for k in losses[significant]}
    assert 0 in seen and len(seen) >= 4  # verdicts no drop loses, and several that some drops do
    # the case the retired mark named: one seed carries it
    carried = np.array([[1.22, 2.75, 1.75, 0.69, 1.02], [3.54, 4.94, 2.73, 2.76, 4.0]])
    assert _losing_seeds(carried, 0) == [2]
    assert seed_drop_losses(carried)[1].tolist() == [1, 0]


def _simulate_marks():
    spec = importlib.util.spec_from_file_location("simulate_marks", TOOLS / "simulate_marks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# docs/REPORT.md ("One seed left out"), from tools/simulate_marks.py at 50,000 families per cell:
# % of significant verdicts each mark fires on, n = 5, Holm over m = 5
STATED = {  # (shape, effect): (one seed carries it, some drop, most drops, every drop)
    ("Gaussian", None): (1.7, 83.9, 76.2, 12.4),
    ("Gaussian", 1.0): (2.5, 78.3, 69.7, 10.3),
    ("exponential", None): (2.4, 64.4, 56.3, 6.1),
    ("exponential", 1.0): (1.7, 86.7, 79.9, 14.1),
}


def test_no_mark_built_on_dropping_a_seed_separates_real_from_null_effects():
    tool = _simulate_marks()
    rows = tool.simulate(12_000, 7, shapes=("Gaussian", "exponential"), families=(5,),
                         effects=(None, 1.0))  # fmt: skip
    for row in rows:
        total = row["verdicts"]
        assert total > 400  # the verdicts exist to be marked
        assert row["range crosses 0"] == 0  # never, by the bound above
        for name, stated in zip(tool.MARKS, STATED[row["shape"], row["effect"]], strict=False):
            p = stated / 100
            assert abs(row[name] / total - p) < 4 * math.sqrt(p * (1 - p) / total), (row, name)
    found = tool.ratios(rows)
    for name in tool.MARKS[:4]:
        assert not tool.separates(*found[name, 1.0])
    # the skewed nulls' false positives lose significance on dropping a seed less often than
    # the true positives of 1 SD do: a mark built on it points the wrong way there
    exp = {row["effect"]: row["some drop loses it"] / row["verdicts"] for row in rows
           if row["shape"] == "exponential"}  # fmt: skip
    assert exp[None] < exp[1.0] - 0.1


# --------------------------------------------------------------------------- margins
def test_every_metric_a_table_judges_has_a_margin():
    for metric in ("loss", "bpb", "error", "accuracy", "recon_error", "error·a"):
        assert EQUIVALENCE_MARGINS[metric] > 0
    assert EQUIVALENCE_MARGINS["bpb"] == pytest.approx(EQUIVALENCE_MARGINS["loss"] / math.log(2))


def test_a_significant_difference_inside_its_margin_is_flagged():
    # the issue's case: −0.0071 nats, significant, against the 0.01 margin
    small = [-0.0071 + e for e in (0.0004, -0.0003, 0.0002, -0.0001, -0.0002)]
    large = [-0.05 + e for e in (0.004, -0.003, 0.002, -0.001, -0.002)]
    noisy = [-0.005, 0.004, -0.003, 0.002, 0.001]
    flagged, plain, unresolved = adjust([_comparison(small), _comparison(large),
                                         _comparison(noisy)])  # fmt: skip
    assert flagged.p_holm < 0.05 and inside_margin(flagged)
    assert plain.p_holm < 0.05 and not inside_margin(plain)
    assert not inside_margin(unresolved)
    (unknown,) = adjust([_comparison(small, metric="seconds")])
    assert not inside_margin(unknown)  # no margin, no flag


# --------------------------------------------------------------------------- lr sensitivity
def test_mean_regret_is_the_mean_gap_to_the_best():
    assert mean_regret([1.0, 1.5, 3.0]) == pytest.approx((0 + 0.5 + 2.0) / 3)
    assert mean_regret([0.9, 0.8, 0.95], lower_is_better=False) == pytest.approx(0.2 / 3)
    assert math.isnan(mean_regret([1.0, math.nan]))


def _lr_records(regret_scale):
    """Two activations, 4 seeds, lrs 1e-3 and 1e-2 for both and 1e-1 for gelu only; last epoch
    2 counts (epoch 1 is a decoy)."""
    records = []
    for activation, scale in regret_scale.items():
        for seed in range(4):
            lrs = (1e-3, 1e-2, 1e-1) if activation == "gelu" else (1e-3, 1e-2)
            for lr in lrs:
                value = 1.0 + scale * (seed + 1) * (lr == 1e-2) + 5 * (lr == 1e-1)
                run = f"{activation}-{seed}-{lr}"
                for epoch, v in ((1, 9.0), (2, value)):
                    records.append(Record(run, "x", "h", activation, seed, lr, "", epoch,
                                          "val", "loss", v))  # fmt: skip
    return records


def test_lr_sensitivity_uses_the_common_lrs_and_pairs_by_seed():
    records = _lr_records({"gelu": 0.1, "relu": 0.3})
    result = lr_sensitivity(records, "x")
    (group,) = result.groups
    assert group.lrs == (1e-3, 1e-2)  # 1e-1: gelu alone ran it
    # regret per seed: mean(0, scale·(seed+1)) over the two lrs
    assert group.regrets["gelu"] == pytest.approx({s: 0.1 * (s + 1) / 2 for s in range(4)})
    (c,) = result.comparisons
    expected = [0.2 * (s + 1) / 2 for s in range(4)]  # relu − gelu
    assert c.differences == pytest.approx(expected)
    assert c.p == pytest.approx(scipy_stats.ttest_1samp(expected, 0.0).pvalue)
    assert c.verdict == "▼ worse" and c.treatment == "relu" and c.baseline == "gelu"
    with pytest.raises(ValueError, match="no val loss records"):
        lr_sensitivity(records, "y")
    with pytest.raises(ValueError, match="epoch="):
        lr_sensitivity(records, "x", epoch="first")


def test_lr_sensitivity_best_epoch_reads_each_runs_minimum():
    records = [r._replace(value=0.5) if r.epoch == 1 and r.seed == 0 and r.lr == 1e-2 else r
               for r in _lr_records({"gelu": 0.1, "relu": 0.3})]  # fmt: skip
    result = lr_sensitivity(records, "x", epoch="best")
    # seed 0's runs at 1e-2 reach 0.5 at epoch 1: that lr is now its best (1.0 the other)
    assert result.groups[0].regrets["gelu"][0] == pytest.approx(0.25)


# --------------------------------------------------------------------------- interaction
def _selection(activation, variant, values, metric="loss"):
    return Selection("x", variant, variant, activation, "", 1e-3, True, metric, values, {}, {}, "")


def test_interaction_is_the_paired_difference_of_differences():
    rng = np.random.default_rng(8)
    seeds = range(6)
    t1, b1, t2, b2 = (dict(zip(seeds, rng.normal(size=6), strict=True)) for _ in range(4))
    t2[5] = math.nan  # a diverged run leaves seed 5 out
    found = interaction(
        (_selection("relu", "init=gpt2", t1), _selection("gelu", "init=gpt2", b1)),
        (_selection("relu", "init=torch", t2), _selection("gelu", "init=torch", b2)),
    )
    expected = [(t1[s] - b1[s]) - (t2[s] - b2[s]) for s in range(5)]
    assert found.differences == pytest.approx(expected)
    assert found.p == pytest.approx(scipy_stats.ttest_1samp(expected, 0.0).pvalue)
    assert found.seeds == (0, 1, 2, 3, 4) and found.diverged == 1
    assert (found.treatment, found.baseline) == ("relu", "gelu")
    assert found.variant == "init=gpt2 vs init=torch"
    # a gap that flips between inits is called a real interaction after Holm
    flip_1 = {s: 1.0 + 0.01 * s for s in seeds}
    zero = dict.fromkeys(seeds, 0.0)
    flip_2 = {s: -1.0 + 0.02 * s for s in seeds}
    (real,) = adjust([interaction(
        (_selection("relu", "a", flip_1), _selection("gelu", "a", zero)),
        (_selection("relu", "b", flip_2), _selection("gelu", "b", zero)),
    )])  # fmt: skip
    assert real.verdict == "▼ worse" and real.mean == pytest.approx(2.0 - 0.005 * 5, abs=0.03)
    with pytest.raises(ValueError, match="same two activations"):
        interaction((_selection("relu", "a", t1), _selection("gelu", "a", b1)),
                    (_selection("silu", "b", t2), _selection("gelu", "b", b2)))  # fmt: skip
