"""Statistics of experiment records: the paper's protocol, robust aggregates, bootstrap CIs.

Everything here is a pure function of a list of records (NamedTuples with the fields of the
``records`` table in docs/ARCHITECTURE.md) and, for resampling, an explicit
``numpy.random.Generator``. Nothing reads files or global state.

The paper's protocol, per experiment, activation and setting:
  1. for every learning rate, take each seed's validation metric at the last (or best) epoch and
     choose the learning rate with the lowest median over seeds;
  2. report the test metric of every seed at that learning rate and epoch, median over seeds.
Where a run records no validation split (the autoencoder, a CIFAR retrain on all 50k images),
nothing is selected and each learning rate is reported on its own.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "PAPER_ORDERING_VERDICTS",
    "Comparison",
    "Protocol",
    "Selection",
    "Summary",
    "bootstrap_ci",
    "compare_paired",
    "curves_by_seed",
    "iqm",
    "ordering_verdict",
    "protocol_for",
    "select",
    "summarize",
]

PAPER_ORDERING_VERDICTS = ("holds", "reversed", "not resolved")


class Protocol(NamedTuple):
    """How one experiment chooses its learning rate and what it reports."""

    select_split: str = "val"  # the split the learning rate is chosen on
    select_metrics: tuple[str, ...] = ("error", "loss")  # first one present is used
    report_split: str = "test"
    report_metrics: tuple[str, ...] = (
        "error",
        "loss",
    )  # headline first; those present are reported
    epoch: str = "last"  # "last": the final epoch; "best": each seed's epoch of lowest val metric
    tune_setting: bool = (
        False  # choose the setting (e.g. dropout keep) on validation along with the lr
    )

    def describe(self, select_metric: str) -> str:
        where = "at the last epoch" if self.epoch == "last" else "at each seed's best epoch"
        what = "learning rate and setting" if self.tune_setting else "learning rate"
        return (
            f"{what} chosen at the lowest median {self.select_split} {select_metric} "
            f"{where}; {self.report_split} reported there, median over seeds"
        )


# The paper's choices, by experiment name (matched on substrings, most specific first).
_PROTOCOLS: tuple[tuple[str, Protocol], ...] = (
    ("autoencoder", Protocol(report_metrics=("recon_error",))),  # its loss is the same MSE
    (
        "timit",
        Protocol(select_metrics=("error",), epoch="best"),
    ),  # "chosen at the lowest val error"
    # the SOI map vs ReLU with its dropout keep tuned over {1, 0.75, 0.5}
    ("stochastic", Protocol(select_metrics=("error",), tune_setting=True)),
    ("twitter", Protocol(select_metrics=("error",))),
    ("pos", Protocol(select_metrics=("error",))),
    ("cifar", Protocol(select_metrics=("error",))),
    # MNIST classification: the paper shows log-loss curves and no error numbers
    ("mnist", Protocol(select_metrics=("loss", "error"), report_metrics=("loss", "error"))),
)


def protocol_for(experiment: str) -> Protocol:
    """The paper's protocol for ``experiment`` (default: lowest median val error, last epoch)."""
    name = experiment.lower()
    for key, protocol in _PROTOCOLS:
        if key in name:
            return protocol
    return Protocol()


# --------------------------------------------------------------------------- aggregates
def iqm(values: Any, axis: int = -1) -> Any:
    """Interquartile mean: the mean of the middle 50 % (``int(n/4)`` values cut from each end).

    Matches ``scipy.stats.trim_mean(values, 0.25, axis)``; for n < 4 nothing is cut (the mean).
    """
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., Any],
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``statistic(values, axis=-1)``.

    Resamples the n values with replacement ``n_resamples`` times and returns the
    (1 − confidence)/2 and (1 + confidence)/2 percentiles of the statistic. With n = 1 the interval
    is the single value; with n = 0 it is (nan, nan).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return (float("nan"), float("nan"))
    indices = rng.integers(0, values.size, size=(n_resamples, values.size))
    resampled = statistic(values[indices], axis=-1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return (float(low), float(high))


class Summary(NamedTuple):
    """n values summarised; each ``*_ci`` is a percentile-bootstrap 95 % interval."""

    n: int
    mean: float
    median: float
    iqm: float
    mean_ci: tuple[float, float]
    median_ci: tuple[float, float]
    iqm_ci: tuple[float, float]


def summarize(
    values: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 10_000
) -> Summary:
    """Mean, median and IQM of ``values`` with their bootstrap CIs (in that order of resampling)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, (nan, nan), (nan, nan), (nan, nan))
    return Summary(
        n=int(values.size),
        mean=float(values.mean()),
        median=float(np.median(values)),
        iqm=float(iqm(values)),
        mean_ci=bootstrap_ci(values, np.mean, rng=rng, n_resamples=n_resamples),
        median_ci=bootstrap_ci(values, np.median, rng=rng, n_resamples=n_resamples),
        iqm_ci=bootstrap_ci(values, iqm, rng=rng, n_resamples=n_resamples),
    )


# --------------------------------------------------------------------------- the protocol
def curves_by_seed(
    records: Iterable[Any], experiment: str, split: str, metric: str
) -> dict[tuple[str, str, float, int], dict[int, float]]:
    """``{(activation, setting, lr, seed): {epoch: value}}`` for one split and metric."""
    curves: dict[tuple[str, str, float, int], dict[int, float]] = defaultdict(dict)
    for r in records:
        if r.experiment == experiment and r.split == split and r.metric == metric:
            curves[(r.activation, r.setting, float(r.lr), int(r.seed))][int(r.epoch)] = float(
                r.value
            )
    return dict(curves)


class Selection(NamedTuple):
    """The result of the protocol for one (experiment, activation, setting[, lr])."""

    experiment: str
    activation: str
    setting: str
    lr: float
    lr_selected: bool  # False: no validation split, this learning rate is reported on its own
    metric: str  # the reported metric
    values: dict[int, float]  # seed -> test metric at the chosen epoch
    epochs: dict[int, int]  # seed -> the epoch reported
    val_medians: dict[
        tuple[str, float], float
    ]  # (setting, lr) -> median val metric (empty if not selected)
    rule: str  # the protocol in words


def _first_present(metrics: Sequence[str], present: set[str]) -> str | None:
    return next((m for m in metrics if m in present), None)


def _chosen_epoch(curve: dict[int, float], epoch_rule: str) -> int:
    if epoch_rule == "best":
        return min(curve, key=lambda e: (curve[e], e))  # ties: the earliest epoch
    return max(curve)


def _value_at(curve: dict[int, float], epoch: int) -> tuple[int, float] | None:
    """The value at ``epoch``, else at the latest recorded epoch before it."""
    earlier = [e for e in curve if e <= epoch]
    if not earlier:
        return None
    e = max(earlier)
    return e, curve[e]


def select(
    records: Sequence[Any], experiment: str, protocol: Protocol | None = None
) -> list[Selection]:
    """Apply ``protocol`` (default: :func:`protocol_for`) to one experiment's records.

    Returns one :class:`Selection` per (activation, setting) — per activation when the protocol
    tunes the setting too — or per (activation, setting, lr) when the records hold no validation
    split, for every reported metric present.
    """
    protocol = protocol or protocol_for(experiment)
    mine = [r for r in records if r.experiment == experiment]
    metrics_by_split: dict[str, set[str]] = defaultdict(set)
    for r in mine:
        metrics_by_split[r.split].add(r.metric)
    select_metric = _first_present(
        protocol.select_metrics, metrics_by_split.get(protocol.select_split, set())
    )
    report_metrics = [
        m
        for m in protocol.report_metrics
        if m in metrics_by_split.get(protocol.report_split, set())
    ]
    val = (
        curves_by_seed(mine, experiment, protocol.select_split, select_metric)
        if select_metric
        else {}
    )

    selections = []
    for metric in report_metrics:
        test = curves_by_seed(mine, experiment, protocol.report_split, metric)
        # group -> candidate (setting, lr) pairs; a group is (activation, setting) or (activation, None)
        groups: dict[tuple[str, str | None], set[tuple[str, float]]] = defaultdict(set)
        for activation, setting, lr, _ in test:
            groups[(activation, None if protocol.tune_setting else setting)].add((setting, lr))
        for (activation, group_setting), candidates in sorted(
            groups.items(), key=lambda g: (g[0][0], g[0][1] or "")
        ):
            val_curves = {
                k: v
                for k, v in val.items()
                if k[0] == activation
                and group_setting in (None, k[1])
                and (k[1], k[2]) in candidates
                and v
            }
            if val_curves:
                medians = {
                    pair: float(
                        np.median(
                            [
                                _curve_value(c, protocol.epoch)
                                for k, c in val_curves.items()
                                if (k[1], k[2]) == pair
                            ]
                        )
                    )
                    for pair in sorted({(k[1], k[2]) for k in val_curves})
                }
                best = min(medians, key=lambda pair: (medians[pair], pair))
                chosen = [(best, True, medians)]
                rule = protocol.describe(select_metric)
            else:
                chosen = [(pair, False, {}) for pair in sorted(candidates)]
                rule = (
                    f"no {protocol.select_split} split recorded: each learning rate reported on its own, "
                    f"{protocol.report_split} at the last epoch, median over seeds"
                )
            for (setting, lr), selected, medians in chosen:
                values, epochs = {}, {}
                for (a, s, l, seed), curve in test.items():
                    if (a, s, l) != (activation, setting, lr):
                        continue
                    val_curve = val_curves.get((a, s, l, seed))
                    epoch = _chosen_epoch(val_curve, protocol.epoch) if val_curve else max(curve)
                    found = _value_at(curve, epoch)
                    if found is not None:
                        epochs[seed], values[seed] = found
                selections.append(
                    Selection(
                        experiment,
                        activation,
                        setting,
                        lr,
                        selected,
                        metric,
                        dict(sorted(values.items())),
                        epochs,
                        medians,
                        rule,
                    )
                )
    return selections


def _curve_value(curve: dict[int, float], epoch_rule: str) -> float:
    return curve[_chosen_epoch(curve, epoch_rule)]


# --------------------------------------------------------------------------- paired comparisons
class Comparison(NamedTuple):
    """treatment − baseline on the seeds both share, with the paper's ordering judged."""

    experiment: str
    setting: str
    metric: str
    treatment: str
    baseline: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float  # mean paired difference
    ci: tuple[float, float]  # bootstrap 95 % CI of the mean difference
    verdict: str
    lr: str = "chosen"  # "chosen" (each side's selected lr) or the one lr both ran at


# Fewest pairs for a verdict: with n pairs all on one side by chance (probability 2·2^-n under
# "no difference"), a percentile bootstrap excludes 0; n = 5 brings that down to 6 %, n = 3
# would leave it at 25 %.
MIN_PAIRS_FOR_VERDICT = 5


def ordering_verdict(ci: tuple[float, float], n: int, lower_is_better: bool = True) -> str:
    """Does "treatment beats baseline" hold, given the CI of treatment − baseline over n pairs?

    "holds" when the whole interval lies on the better side of 0, "reversed" when it lies on the
    worse side, otherwise "not resolved at n=…: the 95 % CI of the difference includes 0". Below
    ``MIN_PAIRS_FOR_VERDICT`` pairs no verdict is given: the bootstrap cannot support one.
    """
    low, high = ci
    if n == 0 or np.isnan(low):
        return "no shared seeds"
    better = high < 0 if lower_is_better else low > 0
    worse = low > 0 if lower_is_better else high < 0
    if n < MIN_PAIRS_FOR_VERDICT:
        leaning = "leans to holding" if better else "leans reversed" if worse else "CI includes 0"
        return f"not resolved at n={n} ({leaning}; a verdict needs ≥ {MIN_PAIRS_FOR_VERDICT} seeds)"
    if better:
        return "holds"
    if worse:
        return "reversed"
    return f"not resolved at n={n}: the 95 % CI of the difference includes 0"


def compare_paired(
    treatment: Selection,
    baseline: Selection,
    *,
    rng: np.random.Generator,
    lower_is_better: bool = True,
    n_resamples: int = 10_000,
) -> Comparison:
    """Paired difference treatment − baseline over the seeds present in both selections.

    Seeds present in only one of them are left out (a pair needs both halves). The statistic is
    the mean difference, with a percentile-bootstrap CI that resamples seeds (pairs) together.
    """
    seeds = tuple(sorted(set(treatment.values) & set(baseline.values)))
    differences = np.array(
        [treatment.values[s] - baseline.values[s] for s in seeds], dtype=np.float64
    )
    ci = bootstrap_ci(differences, np.mean, rng=rng, n_resamples=n_resamples)
    mean = float(differences.mean()) if seeds else float("nan")
    return Comparison(
        treatment.experiment,
        treatment.setting,
        treatment.metric,
        treatment.activation,
        baseline.activation,
        seeds,
        tuple(float(d) for d in differences),
        mean,
        ci,
        ordering_verdict(ci, len(seeds), lower_is_better),
        "chosen" if treatment.lr_selected and baseline.lr_selected else f"{treatment.lr:g}",
    )
