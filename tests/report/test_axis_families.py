"""The report over axes: families of configs found from stored configs, the interaction verdicts
of a categorical axis and the trend verdicts of a scale axis, each against an independent
float64 computation (numpy, scipy), and `gelus report` end to end on records with both."""

import csv
import json
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.cli import main
from gelus.experiments.config import config_to_dict, flat_config, identity_keys, stored_defaults
from gelus.experiments.presets import PRESETS
from gelus.experiments.selection import run_configs
from gelus.report.analysis import analyse
from gelus.report.axes import families, sizes
from gelus.report.metrics import Verdict
from gelus.report.render import unwrapped
from gelus.report.stats import DESIGN
from gelus.report.words import verdict_cell
from test_synthetic import make_records, value_of, write_database

SEEDS = tuple(range(6))


def _flat(preset: str, **values) -> dict:
    """The preset's stored flat identity config with ``values`` ("model.init": …) set."""
    config = PRESETS[preset].config
    return {**identity_keys(stored_defaults(flat_config(config_to_dict(config)))), **values}


def _families(configs: dict, preset: str):
    base = PRESETS[preset].config
    return families(configs, sizes(configs, base), _flat(preset))


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: p_(i)·(m − i + 1), running max, capped at 1."""
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - rank)))
        out[i] = running
    return out.tolist()


def _nested(flat: dict) -> dict:
    tree: dict = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _runs_with(runs, flat: dict, **train):
    """The runs with ``flat`` (and train keys such as keep) as their stored config."""
    config = _nested(flat)
    config.setdefault("train", {}).update(train)
    return [r._replace(config_json=json.dumps(config)) for r in runs]


# --------------------------------------------------------------------------- families
def test_an_init_axis_is_a_family_though_its_new_values_ran_fewer_settings():
    # the default init ran keep 1.0 and 0.5, the new inits only 1.0 (--set train.keep=1.0): the
    # settings are swept inside a config, so they differ only in model.init
    runs = []
    for h, init, keep in (("a", "xavier", [1.0]), ("b", "unit_norm", [1.0, 0.5]), ("c", "he", [1.0])):  # fmt: skip
        _, mine = make_records(config_hash=h, epochs=1, seeds=(0,), lrs=(1e-3,))
        runs += _runs_with(mine, _flat("mnist-classification", **{"model.init": init}), keep=keep)
    # e differs from every other config in two keys: in no family
    other = {"model.init": "he", "train.batch_size": 64, "train.epochs": 3}
    other = _flat("mnist-classification", **other)
    runs += _runs_with(make_records(config_hash="e", epochs=1, seeds=(0,))[1], other)
    configs = run_configs(runs)
    assert set(configs) == {"a", "b", "c", "e"}
    (family,) = _families(configs, "mnist-classification")
    assert family.kind == "categorical" and family.keys == ("model.init",)
    # the preset's default first (the interactions' base), then the others by value
    assert family.members == ("b", "c", "a")
    assert family.labels == ("model.init=unit_norm", "model.init=he", "model.init=xavier")


def _lm(d_model: int, layers: int, epochs: int, **values) -> dict:
    keys = {"model.d_model": d_model, "model.layers": layers, "train.epochs": epochs}
    return _flat("transformer-lm", **keys, **values)


def test_a_scale_axis_with_training_length_tied_to_size_and_an_init_axis_at_one_size():
    configs = {
        "s1": _lm(64, 2, 1),
        "s2": _lm(128, 4, 2),  # d_model and layers together, the tokens ∝ N
        "s3": _lm(256, 4, 8),
        "t2": _lm(128, 4, 2, **{"model.init": "torch"}),  # an init axis at the middle size
        "w3": _lm(256, 2, 3, **{"optim.warmup": 0.0}),  # two keys off s3 at another size: none
    }
    counts = sizes(configs, PRESETS["transformer-lm"].config)
    init, scale = _families(configs, "transformer-lm")
    assert init.kind == "categorical" and init.members == ("s2", "t2")  # gpt2, the default, first
    assert scale.kind == "scale" and scale.members == ("s1", "s2", "s3")
    assert set(scale.keys) == {"model.d_model", "model.layers", "train.epochs"}
    n = [counts[h][0] for h in scale.members]
    assert n[0] < n[1] < n[2] and scale.sizes == tuple(n)
    # the LM's weights: 12·d² per layer (attention 4·d², FFN 2·4·d²), the byte embedding tied
    # to the head 256·d
    assert n[0] == 12 * 64**2 * 2 + 256 * 64
    assert scale.x == pytest.approx(np.log2(n))


def test_a_budget_axis_is_configs_of_one_size_that_differ_in_training_length():
    configs = {"e1": _lm(64, 2, 1), "e2": _lm(64, 2, 2), "e4": _lm(64, 2, 4)}
    (budget,) = _families(configs, "transformer-lm")
    assert budget.kind == "budget" and budget.members == ("e1", "e2", "e4")
    assert budget.x == pytest.approx(np.log2([t * 200 * 16 * 128 for t in (1, 2, 4)]))
    # another size at one of the budgets: N and T both vary, one factorial family holds all four
    # (its budget and scale views are not judged again)
    found = _families({**configs, "big": _lm(128, 2, 1)}, "transformer-lm")
    assert [(f.kind, set(f.members)) for f in found] == [("factorial", {*configs, "big"})]


def test_one_config_or_configs_without_a_common_axis_give_no_family():
    assert families({"a": _flat("mnist-classification")}) == []
    two_keys = _flat("mnist-classification", **{"model.init": "he", "train.epochs": 3})
    assert families({"a": _flat("mnist-classification"), "b": two_keys}) == []


# --------------------------------------------------------------------------- verdicts
def _shifted(records, config_hash: str, shifts: dict[str, np.ndarray], metrics=("error", "loss")):
    """``records`` with shifts[activation][seed] added to its test values of ``config_hash``."""
    return [
        r._replace(value=r.value + float(shifts[r.activation][r.seed]))
        if r.config_hash == config_hash and r.split == "test" and r.activation in shifts
        and r.metric in metrics
        else r
        for r in records
    ]  # fmt: skip


def _init_records():
    """MNIST under unit_norm (keep 1.0 and 0.5) and xavier (keep 1.0 only, --set train.keep=1.0);
    under xavier relu's test values move by 0.01 + noise per seed, elu's by noise alone."""
    rng = np.random.default_rng(7)
    shifts = {"relu": 0.01 + 0.004 * rng.standard_normal(6), "elu": 0.004 * rng.standard_normal(6)}
    base, base_runs = make_records(epochs=2, seeds=SEEDS, config_hash="aaa")
    new, new_runs = make_records(epochs=2, seeds=SEEDS, config_hash="bbb", settings=("keep=1.0",))
    base_runs = _runs_with(base_runs, _flat("mnist-classification"), keep=[1.0, 0.5])
    xavier = _flat("mnist-classification", **{"model.init": "xavier"})
    new_runs = _runs_with(new_runs, xavier, keep=[1.0])
    return base + _shifted(new, "bbb", shifts), base_runs + new_runs


def _test_values(
    records, config_hash, activation, metric, epoch, setting="", lr=1e-3
) -> np.ndarray:
    """Each seed's test value of one run, read from the records directly."""
    found = {
        r.seed: r.value
        for r in records
        if (r.config_hash, r.activation, r.metric, r.epoch, r.split, r.setting, r.lr)
        == (config_hash, activation, metric, epoch, "test", setting, lr)
    }
    return np.array([found[s] for s in SEEDS])


def test_the_interactions_are_the_difference_of_differences_t_test_with_holm_per_metric():
    records, runs = _init_records()
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    assert axis.family.labels == ("model.init=unit_norm", "model.init=xavier")
    for metric in ("error", "loss"):
        mine = [c for c in axis.comparisons if c.metric == metric]
        # keep=0.5 ran under unit_norm only: no interaction there
        assert {(c.treatment, c.setting) for c in mine} == {
            ("elu", "keep=1.0"),
            ("relu", "keep=1.0"),
        }
        expected_p = {}
        for c in mine:
            gap = {
                h: _test_values(records, h, c.treatment, metric, 2, "keep=1.0")
                - _test_values(records, h, "gelu", metric, 2, "keep=1.0")
                for h in ("aaa", "bbb")
            }
            dd = gap["bbb"] - gap["aaa"]
            assert c.variant == "model.init=xavier vs model.init=unit_norm" and c.baseline == "gelu"
            assert np.allclose(c.differences, dd, atol=1e-12) and c.mean == pytest.approx(dd.mean())
            expected_p[c.treatment] = scipy_stats.ttest_1samp(dd, 0.0).pvalue
            assert c.p == pytest.approx(expected_p[c.treatment], rel=1e-9)
            sem = scipy_stats.sem(dd)
            ci = scipy_stats.t.interval(0.95, len(dd) - 1, loc=dd.mean(), scale=sem)
            assert c.ci == pytest.approx(ci, rel=1e-9)
        holm = dict(zip(expected_p, _holm(list(expected_p.values())), strict=True))
        for c in mine:
            assert c.p_holm == pytest.approx(holm[c.treatment], rel=1e-9)
        relu = next(c for c in mine if c.treatment == "relu")
        assert relu.verdict == "▼ worse" and holm["relu"] < 0.05  # relu's gap grows under xavier


def test_each_activations_own_change_across_the_axis_is_paired_by_seed_with_holm_per_metric():
    records, runs = _init_records()
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    for metric in ("error", "loss"):
        mine = [c for c in axis.effects if c.metric == metric]
        # every activation, the reference included, on the setting both inits ran
        assert {(c.treatment, c.setting) for c in mine} == {
            (a, "keep=1.0") for a in ("gelu", "relu", "elu")
        }
        expected_p = {}
        for c in mine:
            change = _test_values(records, "bbb", c.treatment, metric, 2, "keep=1.0") - (
                _test_values(records, "aaa", c.treatment, metric, 2, "keep=1.0")
            )
            assert c.variant == "model.init=xavier vs model.init=unit_norm"
            assert np.allclose(c.differences, change, atol=1e-12)
            # gelu's records are the same under both inits: no change, p 1 (scipy: NaN)
            same = not change.any()
            expected_p[c.treatment] = 1.0 if same else scipy_stats.ttest_1samp(change, 0).pvalue
            assert c.p == pytest.approx(expected_p[c.treatment], rel=1e-9)
        assert {c.treatment for c in mine if not np.any(c.differences)} == {"gelu"}
        holm = dict(zip(expected_p, _holm(list(expected_p.values())), strict=True))
        for c in mine:
            assert c.p_holm == pytest.approx(holm[c.treatment], rel=1e-9)


def test_the_init_claims_are_judged_from_the_effects_and_the_interactions():
    from gelus.report.folklore import init_claims

    records, runs = _init_records()
    rng = np.random.default_rng(3)
    # under he: gelu's test values worse by 0.03 (+ noise), relu's and elu's only noise, so each
    # alternative gains on gelu under he against under xavier (where relu lost 0.01 to it)
    he, he_runs = make_records(epochs=2, seeds=SEEDS, config_hash="ccc", settings=("keep=1.0",))
    shifts = {a: 0.004 * rng.standard_normal(6) for a in ("relu", "elu")}
    shifts["gelu"] = 0.03 + 0.004 * rng.standard_normal(6)
    records += _shifted(he, "ccc", shifts)
    runs += _runs_with(he_runs, _flat("mnist-classification", **{"model.init": "he"}), keep=[1.0])
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    xavier, he_claim, moves = init_claims(axis)
    gelu = {c.variant: c for c in axis.effects if c.treatment == "gelu" and c.metric == "loss"}
    against_he = gelu["model.init=xavier vs model.init=he"]
    assert against_he.verdict == "▲ better"  # gelu does better under xavier than under he
    assert "against model.init=he: better" in xavier and "test loss" in xavier
    against_unit = gelu["model.init=xavier vs model.init=unit_norm"].verdict.word
    expected = {"tie": "supported", "better": "supported", "worse": "refuted"}
    assert xavier.endswith(f": {expected.get(against_unit, 'not settled')}.")
    assert "relu: supported (better)" in he_claim and "elu: supported (better)" in he_claim
    assert "lr-selection rule" not in xavier + he_claim  # every comparison agrees across rules
    # the gap to gelu moves with the init where an interaction is significant
    loss = [c for c in axis.comparisons if c.metric == "loss"]
    significant = [c for c in loss if c.verdict.significant]
    assert significant and moves.startswith("Whether a verdict about an activation")
    assert moves.endswith(
        "supported (" + "; ".join(f"{c.treatment}: {c.variant}" for c in significant) + ")."
    )
    ties = tuple(c._replace(verdict=Verdict.TIE) for c in axis.comparisons)
    assert init_claims(axis._replace(comparisons=ties))[2].endswith(": refuted.")
    # a comparison a claim rests on that another rule changes is named in the claim's sentence
    depends = "val-loss-last better, val-loss-best unresolved"
    relu_he = ("relu", "model.init=xavier vs model.init=he")
    moved = tuple(
        c._replace(depends=depends) if (c.treatment, c.variant) == relu_he else c
        for c in axis.comparisons
    )
    _, he_claim, _ = init_claims(axis._replace(comparisons=moved))
    relu = next(c for c in moved if c.depends and c.metric == "loss")
    assert he_claim.endswith(
        f"Not every lr-selection rule agrees (relu, {relu.variant}: {depends})."
    )


def test_a_config_recorded_beside_another_changes_none_of_its_verdicts():
    records, runs = _init_records()
    alone = (
        [r for r in records if r.config_hash == "aaa"],
        [r for r in runs if r.config_hash == "aaa"],
    )
    (by_itself,) = analyse(*alone, PRESETS)
    (beside,) = analyse(records, runs, PRESETS)  # the xavier config's runs beside it

    def verdicts(result, config=None):
        return {
            (c.treatment, c.baseline, c.setting, c.metric): (c.p_holm, c.verdict)
            for c, _ in result.comparisons
            if config is None or c.variant == config
        }

    assert verdicts(by_itself) == verdicts(beside, "model.init=unit_norm")
    assert {c.variant for c, _ in beside.comparisons} == {
        "model.init=unit_norm",
        "model.init=xavier",
    }


def test_the_papers_claims_are_judged_on_the_config_at_the_presets_values():
    records, runs = _init_records()

    def claimed(result):
        return [(c.treatment, c.baseline, c.setting, c.p) for k in result.claims for c in k.comparisons]  # fmt: skip

    (beside,) = analyse(records, runs, PRESETS)  # unit_norm (the preset's) and xavier
    unit_norm = [r for r in records if r.config_hash == "aaa"]
    (alone,) = analyse(unit_norm, [r for r in runs if r.config_hash == "aaa"], PRESETS)
    assert claimed(beside) == claimed(alone) and claimed(alone)  # the xavier runs left out


def test_an_axis_verdict_another_selection_rule_changes_is_marked_with_each_rules_word():
    records, runs = _init_records()
    noise = 0.004 * np.random.default_rng(5).standard_normal(6)

    def best_at_epoch_1(r):
        # relu under xavier: its validation best at epoch 1, where its test values carry no shift
        # (the last epoch's keep the 0.01 that makes its interaction worse)
        if (r.config_hash, r.activation, r.epoch) != ("bbb", "relu", 1):
            return r
        if r.split == "val" and r.metric in ("loss", "error"):
            return r._replace(value=r.value - 1.0)
        if r.split == "test" and r.metric in ("loss", "error"):
            level = value_of(r.activation, r.seed, r.lr, r.setting, 2, "test", r.metric)
            return r._replace(value=level + (3.0 if r.metric == "loss" else 1.0) * noise[r.seed])
        return r

    records = [best_at_epoch_1(r) for r in records]
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    by_rule = {}
    for rule in ("val-loss-last", "val-loss-best", "val-error-last", "val-error-best"):
        (again,) = analyse(records, runs, PRESETS, rule=rule)
        by_rule[rule] = {
            (c.treatment, c.variant, c.metric): c.verdict.word
            for c in (*again.axes[0].comparisons, *again.axes[0].effects)
        }
    marked = 0
    for c in (*axis.comparisons, *axis.effects):
        words = {rule: found[(c.treatment, c.variant, c.metric)] for rule, found in by_rule.items()}
        if len(set(words.values())) > 1:
            assert c.depends == ", ".join(f"{rule} {w}" for rule, w in words.items())
            assert f"depends on the selection rule ({c.depends})" in verdict_cell(c, DESIGN)
            marked += 1
        else:
            assert c.depends == ""
    relu = next(c for c in axis.comparisons if c.treatment == "relu" and c.metric == "loss")
    assert (
        relu.verdict == "▼ worse"
        and by_rule["val-loss-best"][("relu", relu.variant, "loss")] != "worse"
    )
    assert relu.depends and marked >= 2  # relu's interaction and its own change, at least
    gelu = [c for c in axis.effects if c.treatment == "gelu"]
    assert gelu and not any(c.depends for c in gelu)  # gelu's records are the same everywhere


def _scale_records():
    """transformer-lm at three sizes (tokens ∝ N): relu's test bits per byte fall by 0.01 per
    size step against gelu's, plus noise per seed and size; swiglu's only noise."""
    rng = np.random.default_rng(11)
    shapes = {"s1": (64, 2, 1), "s2": (128, 2, 2), "s3": (256, 2, 4)}
    records, runs = [], []
    for i, (h, shape) in enumerate(shapes.items()):
        mine, mine_runs = make_records(
            "transformer-lm", activations=("gelu", "relu", "swiglu"), seeds=SEEDS, settings=("",),
            epochs=2, splits=("val", "test"), metrics=("loss", "bpb"), config_hash=h,
            dataset="fortunes",
        )  # fmt: skip
        shifts = {
            "relu": -0.01 * i + 0.002 * rng.standard_normal(6),
            "swiglu": 0.002 * rng.standard_normal(6),
        }
        records += _shifted(mine, h, shifts, metrics=("bpb",))
        runs += _runs_with(mine_runs, _lm(*shape))
    x = [math.log2(12 * d * d * layers + 256 * d) for d, layers, _ in shapes.values()]
    return records, runs, x


def _welch_slope(x, cells) -> tuple[float, float, float]:
    """(slope, its sandwich variance, Satterthwaite df) of the cells' mean gaps on x, by hand:
    numpy's least squares for the slope, w = (x − x̄)/Σ(x − x̄)² for its variance."""
    means = [np.mean(d) for d in cells]
    slope = np.linalg.lstsq(np.column_stack([np.ones(len(x)), x]), means, rcond=None)[0][1]
    w = (np.asarray(x) - np.mean(x)) / np.sum((np.asarray(x) - np.mean(x)) ** 2)
    parts = np.array([wi**2 * np.var(d, ddof=1) / len(d) for wi, d in zip(w, cells, strict=True)])
    df = parts.sum() ** 2 / sum(p**2 / (len(d) - 1) for p, d in zip(parts, cells, strict=True))
    return float(slope), float(parts.sum()), float(df)


def test_the_trend_is_the_least_squares_slope_of_the_cells_gaps_with_welch_and_holm():
    records, runs, x = _scale_records()
    (result,) = analyse(records, runs, PRESETS)
    (axis,) = result.axes
    assert axis.family.kind == "scale" and axis.family.x == pytest.approx(x)
    bpb = [t for t in axis.trends if t.comparison.metric.startswith("bpb")]
    assert [t.comparison.treatment for t in bpb] == ["relu", "swiglu"]
    expected_p = []
    for t in bpb:
        cells = [
            _test_values(records, h, t.comparison.treatment, "bpb", 2)
            - _test_values(records, h, "gelu", "bpb", 2)
            for h in ("s1", "s2", "s3")
        ]  # fmt: skip
        slope, variance, df = _welch_slope(x, cells)
        assert t.comparison.mean == pytest.approx(slope, abs=1e-12)
        assert [c.mean for c in t.cells] == pytest.approx([np.mean(d) for d in cells], abs=1e-12)
        assert np.allclose([t.gaps[s] for s in SEEDS], np.stack(cells, axis=1), atol=1e-12)
        expected_p.append(2 * scipy_stats.t.sf(abs(slope) / math.sqrt(variance), df))
        assert t.comparison.p == pytest.approx(expected_p[-1], rel=1e-9)
        half = scipy_stats.t.ppf(0.975, df) * math.sqrt(variance)
        assert t.comparison.ci == pytest.approx((slope - half, slope + half), rel=1e-9)
    holm = _holm(expected_p)
    assert [t.comparison.p_holm for t in bpb] == pytest.approx(holm, rel=1e-9)
    relu = bpb[0]
    assert relu.comparison.verdict == "▲ better" and relu.comparison.mean < 0
    # relu's per-size verdict against gelu (the experiment's own table): worse at every size
    assert relu.holds == {"worse": 3}


def test_gelus_report_shows_the_interaction_and_the_trend_with_its_figure(tmp_path, capsys):
    init, init_runs = _init_records()
    scale, scale_runs, _ = _scale_records()
    write_database(tmp_path / "run", init + scale, init_runs + scale_runs)
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]) == 0
    md = unwrapped((tmp_path / "rep" / "report.md").read_text())
    interaction = md[md.index("### Interaction over model.init") :]
    assert "| relu − gelu | model.init=xavier vs model.init=unit_norm | keep=1.0 |" in interaction
    dd = np.subtract(*(
        _test_values(init, h, "relu", "error", 2, "keep=1.0")
        - _test_values(init, h, "gelu", "error", 2, "keep=1.0")
        for h in ("bbb", "aaa")
    ))  # fmt: skip
    sentence = (
        "The gap of relu to gelu (test error, keep=1.0) under model.init=xavier differs from "
    )
    assert f"{sentence}under model.init=unit_norm: by {100 * dd.mean():+.2f} pp" in md
    effects = md[md.index("### Each activation across model.init") :]
    assert "| gelu | model.init=xavier vs model.init=unit_norm | keep=1.0 | test error |" in effects
    change = _test_values(init, "bbb", "relu", "error", 2, "keep=1.0") - _test_values(
        init, "aaa", "relu", "error", 2, "keep=1.0"
    )
    said = "relu (test error, keep=1.0) under model.init=xavier is worse than under model.init"
    assert f"{said}=unit_norm: {100 * change.mean():+.2f} pp" in effects
    trend = md[md.index("### Trend over log₂ parameters") :]
    assert "| relu | — | test bpb | 3 | 6 |" in trend and "| worse at 3 of 3 |" in trend
    assert "relu, test bpb: worse than gelu at 3 of 3 sizes; the trend over log₂ parameters is resolved: its gap to gelu moves in relu's favour" in trend  # fmt: skip
    # relu's gap moves in its favour with size, swiglu's is noise: the seed claim judged per activation
    (claim,) = [line for line in trend.splitlines() if line.startswith("The seed documents' claim")]
    assert "contradicted by relu (the gap moves in their favour)" in claim
    assert "unresolved against swiglu" in claim and "supported" not in claim
    for suffix in ("png", "svg"):
        assert (tmp_path / "rep" / "figures" / f"transformer-lm-trend-0.{suffix}").stat().st_size
    assert "](figures/transformer-lm-trend-0.png)" in trend
    # gelus export writes the tables the report shows: the trends and the axis verdicts too
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "tables")]) == 0
    with open(tmp_path / "tables" / "trends.csv", newline="", encoding="utf-8") as handle:
        trends = list(csv.DictReader(handle))
    trends = [r for r in trends if r["lr_choice"] == "protocol"]  # not the rows under each
    (relu,) = [r for r in trends if r["treatment"] == "relu" and r["metric"].startswith("bpb ")]
    assert relu["verdict"] == "better" and relu["per_point_verdicts"] == "worse at 3"
    row = next(line for line in trend.splitlines() if line.startswith("| relu | — | test bpb |"))
    assert f"| {float(relu['mean_difference']):+.4g} |" in row and relu["family"] == "scale"
    with open(tmp_path / "tables" / "axis_verdicts.csv", newline="", encoding="utf-8") as handle:
        axis = list(csv.DictReader(handle))
    assert {r["table"] for r in axis} == {"interaction", "effect"}
    shown = [r for r in axis if r["table"] == "effect" and r["treatment"] == "relu"]
    assert any(float(r["mean_difference"]) == pytest.approx(change.mean()) for r in shown)


def test_a_stored_config_is_the_presets_config_with_its_values_and_a_wrong_value_is_named():
    from gelus.experiments.config import ConfigError, config_from_stored

    for name, preset in PRESETS.items():
        stored = flat_config(config_to_dict(preset.config))
        assert config_from_stored(preset.config, stored) == preset.config, name
    config = config_from_stored(PRESETS["transformer-lm"].config, _lm(256, 6, 3))
    assert (config.model.d_model, config.model.layers, config.train.epochs) == (256, 6, 3)
    with pytest.raises(ConfigError, match=r"model\.d_model: expected int"):
        config_from_stored(PRESETS["transformer-lm"].config, {"model.d_model": "wide"})


def test_the_warmup_claim_follows_the_rule_fixed_before_the_runs():
    from gelus.report.axes import AxisResult, Family
    from gelus.report.folklore import warmup_claim
    from gelus.report.stats import Comparison

    labels = ("optim.warmup=0.05", "optim.warmup=0")
    family = Family("categorical", ("optim.warmup",), ("a", "b"), labels)

    def compared(treatment, baseline, verdict, variant="optim.warmup=0 vs optim.warmup=0.05"):
        return Comparison(
            "transformer-scale", "", "loss", treatment, baseline, (0, 1), (0.1, 0.2), 0.15,
            (0.0, 0.3), verdict, variant=variant,
        )  # fmt: skip

    # GELU is worse without warmup (read 0 vs 0.05): it benefits from warmup
    gelu = compared("gelu", "gelu", Verdict.WORSE)
    # relu's gap to GELU is better without warmup: with warmup it moves toward GELU, GELU gains more
    relu = compared("relu", "gelu", Verdict.BETTER)
    swiglu = compared("swiglu", "gelu", Verdict.TIE)
    found = warmup_claim(AxisResult(family, (relu, swiglu), (gelu,)))
    assert "GELU under optim.warmup=0.05 against under optim.warmup=0, test loss: better" in found
    assert found.endswith("supported, for GELU in particular against relu (not against swiglu)."), (
        found
    )
    shared = warmup_claim(AxisResult(family, (swiglu,), (gelu,)))
    assert shared.endswith(
        "supported as a benefit of warmup, not shown to be GELU's in particular."
    )
    tie = warmup_claim(AxisResult(family, (relu,), (gelu._replace(verdict=Verdict.TIE),)))
    assert tie.endswith(": refuted.")
    unresolved = gelu._replace(verdict=Verdict.UNRESOLVED)
    assert warmup_claim(AxisResult(family, (), (unresolved,))).endswith(": not settled.")
    # another axis, or no GELU: no claim
    other = family._replace(keys=("model.init",))
    assert warmup_claim(AxisResult(other, (relu,), (gelu,))) is None
    assert warmup_claim(AxisResult(family, (relu,), ())) is None
