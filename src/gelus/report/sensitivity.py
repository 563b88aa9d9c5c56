"""Folklore as statistics: learning-rate sensitivity as a paired regret, and the interaction of a
comparison with a setting (does activation − GELU differ between two inits?).

Pure functions of records (NamedTuples with the fields of the ``records`` table) and of
:class:`~gelus.experiments.selection.Selection` results; the verdicts are the report's own:
:func:`~gelus.report.stats.compare_paired` on the seeds both sides share, then
:func:`~gelus.report.stats.adjust` (Holm, TOST with the metric's margin) over the family.
"""

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from gelus.experiments.divergence import mark_diverged
from gelus.experiments.selection import Selection, curves_by_seed
from gelus.report.metrics import lower_is_better as metric_lower_is_better
from gelus.report.stats import Comparison, adjust, compare_paired

__all__ = [
    "LrSensitivity",
    "RegretGroup",
    "interaction",
    "lr_sensitivity",
    "mean_regret",
]

EPOCH_RULES = ("last", "best")


def mean_regret(values: Sequence[float], lower_is_better: bool = True) -> float:
    """The mean regret of one seed's metric over L learning rates, relative to its best:

        regret = (1/L) Σ_lr [m(lr) − min_lr' m(lr')]   (lower is better; with higher better,
                                                          max_lr' m(lr') − m(lr)).

    0 when every lr does as well as the best; in the metric's units. NaN when a run diverged
    (a NaN value) or there are no values."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)):
        return float("nan")
    return float(np.mean(v - v.min()) if lower_is_better else np.mean(v.max() - v))


class RegretGroup(NamedTuple):
    """One config and setting: the lrs every activation ran, and each activation's regret."""

    config_hash: str
    setting: str
    lrs: tuple[float, ...]  # the learning rates every compared activation ran
    regrets: dict[str, dict[int, float]]  # activation -> seed -> mean regret (NaN: diverged)


class LrSensitivity(NamedTuple):
    """:func:`lr_sensitivity`'s result: the regrets and the paired verdicts against the
    reference (Holm over every comparison of the experiment)."""

    experiment: str
    split: str
    metric: str
    epoch: str  # "last" | "best": which epoch of each run the metric is read at
    reference: str
    groups: tuple[RegretGroup, ...]
    comparisons: tuple[Comparison, ...]  # activation − reference regret, adjusted


def _run_value(curve: Mapping[int, float], epoch: str, lower_is_better: bool) -> float:
    if epoch == "last":
        return curve[max(curve)]
    values = list(curve.values())
    if not all(math.isfinite(v) for v in values):
        return math.nan  # a diverged run (marked NaN throughout)
    return min(values) if lower_is_better else max(values)


def lr_sensitivity(
    records: Sequence[Any],
    experiment: str,
    *,
    reference: str = "gelu",
    split: str = "val",
    metric: str = "loss",
    epoch: str = "last",
    configs: Mapping[str, Mapping[str, Any]] | None = None,
) -> LrSensitivity:
    """Learning-rate sensitivity of each activation against ``reference``, paired by seed.

    Within each (config, setting) of ``experiment``: L = the learning rates at which every
    activation there ran; for each activation and seed that ran all of L, the mean regret of
    ``metric`` on ``split`` (read at each run's last epoch, or its best with ``epoch="best"``)
    over L relative to that seed's best lr (:func:`mean_regret`). Each activation's regret minus
    the reference's is then a paired t-test on the seeds both have (a seed with a diverged run
    is left out and counted in ``diverged``), Holm-adjusted over every comparison of the
    experiment, with a tie judged against the metric's margin: "▲ better" means less sensitive.
    A group with fewer than 2 common lrs, or without the reference, gives no comparison.
    ``configs`` (:func:`~gelus.experiments.selection.run_configs`) lets a diverged run be told.
    """
    if epoch not in EPOCH_RULES:
        raise ValueError(f"lr_sensitivity: epoch={epoch!r}; use one of {EPOCH_RULES}")
    lower_is_better = metric_lower_is_better(metric)
    mine = mark_diverged([r for r in records if r.experiment == experiment], configs)
    curves = curves_by_seed(mine, split, metric)
    if not curves:
        raise ValueError(
            f"lr_sensitivity: no {split} {metric} records of experiment {experiment!r}; "
            "check the experiment name, split and metric"
        )
    runs: dict[tuple[str, str], dict[str, dict[int, dict[float, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for key, curve in curves.items():
        if curve:
            value = _run_value(curve, epoch, lower_is_better)
            runs[(key.config_hash, key.setting)][key.activation][key.seed][key.lr] = value
    groups, comparisons = [], []
    for (config_hash, setting), by_activation in sorted(runs.items()):
        group = _regret_group(config_hash, setting, by_activation, lower_is_better)
        if group is None:
            continue
        groups.append(group)
        comparisons += _against_reference(group, experiment, reference, metric)
    return LrSensitivity(
        experiment, split, metric, epoch, reference, tuple(groups), tuple(adjust(comparisons))
    )


def _regret_group(
    config_hash: str, setting: str, by_activation: Mapping, lower_is_better: bool
) -> RegretGroup | None:
    """Each activation's per-seed mean regret over the lrs every activation of the group ran
    (None when fewer than 2 are common)."""
    ran = [{lr for seed in seeds.values() for lr in seed} for seeds in by_activation.values()]
    common = tuple(sorted(set.intersection(*ran)))
    if len(common) < 2:
        return None
    regrets = {
        activation: {
            seed: mean_regret([values[lr] for lr in common], lower_is_better)
            for seed, values in sorted(seeds.items())
            if all(lr in values for lr in common)
        }
        for activation, seeds in sorted(by_activation.items())
    }
    return RegretGroup(config_hash, setting, common, regrets)


def _against_reference(
    group: RegretGroup, experiment: str, reference: str, metric: str
) -> list[Comparison]:
    """Each activation's regret − the reference's, paired by seed (unadjusted)."""
    config_hash, setting, common, regrets = group
    if reference not in regrets:
        return []
    label = "regret over lrs " + ", ".join(f"{lr:g}" for lr in common)
    baseline = Selection(experiment, config_hash, "", reference, setting, math.nan, True,
                         metric, regrets[reference], {}, {}, label)  # fmt: skip
    return [
        compare_paired(baseline._replace(activation=activation, values=values), baseline)._replace(
            lr=label
        )
        for activation, values in regrets.items()
        if activation != reference
    ]


def interaction(
    first: tuple[Selection, Selection],
    second: tuple[Selection, Selection],
    *,
    lower_is_better: bool = True,
) -> Comparison:
    """Does (treatment − baseline) differ between two settings? ``first`` and ``second`` are
    (treatment, baseline) selections of the same two activations and metric in two configs or
    settings (e.g. two inits); per seed present in all four with finite values, the difference
    of differences

        dd_s = (t₁ − b₁)_s − (t₂ − b₂)_s,

    as an unadjusted paired t-test (:func:`~gelus.report.stats.compare_paired`); pass the
    family's interactions to :func:`~gelus.report.stats.adjust` for Holm and the verdict. "▲
    better" then means treatment gains more on baseline in the first setting than in the second
    (the sign of dd, lower better unless ``lower_is_better`` is False); "▼ worse" the reverse; a
    tie means the gap does not move by more than the metric's margin. ``variant`` names the two
    settings, "first vs second".
    """
    (t1, b1), (t2, b2) = first, second
    if (t1.activation, b1.activation) != (t2.activation, b2.activation):
        raise ValueError(
            f"interaction: {t1.activation} − {b1.activation} against {t2.activation} − "
            f"{b2.activation}; pass the same two activations in both settings"
        )
    if len({t1.metric, b1.metric, t2.metric, b2.metric}) != 1:
        raise ValueError(
            f"interaction: metrics {t1.metric}, {b1.metric}, {t2.metric}, {b2.metric}; "
            "pass selections of one metric"
        )

    def gap(t: Selection, b: Selection) -> Selection:
        shared = sorted(set(t.values) & set(b.values))
        return t._replace(values={s: t.values[s] - b.values[s] for s in shared})

    def name(s: Selection) -> str:
        return ", ".join(part for part in (s.variant, s.setting) if part) or s.config_hash

    found = compare_paired(gap(t1, b1), gap(t2, b2), lower_is_better=lower_is_better)
    return found._replace(
        treatment=t1.activation, baseline=b1.activation, variant=f"{name(t1)} vs {name(t2)}",
        setting=t1.setting if t1.setting == t2.setting else f"{t1.setting} vs {t2.setting}",
    )  # fmt: skip
