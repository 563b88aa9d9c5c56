"""An experiment's protocol applied to its records: which lr (and setting) each config reports.

Pure functions of records (NamedTuples with the fields of the ``records`` table), of the runs'
configs and of the :class:`~gelus.experiments.aggregate.Aggregate` that names "the median over
seeds"; the console summary and the report both call :func:`select`, so they agree.

Records of different configs (different ``config_hash``) are never merged: each config is its own
row, labelled by what differs between the configs (:func:`variant_labels`). A protocol with a
``retrain_key`` joins two configs: the lr chosen on the tuning config, the test result from the
retrain config. A run that diverged (:mod:`gelus.experiments.divergence`: non-finite, or its final
loss above 10× the trivial predictor's) has NaN values: it counts as the worst value when choosing
an lr, and is kept (and counted) in the reported values.
"""

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from gelus.experiments.aggregate import HEADLINE, Aggregate, Summary
from gelus.experiments.config import flat_config, identity_keys, stored_defaults
from gelus.experiments.divergence import mark_diverged
from gelus.experiments.protocol import Protocol

__all__ = [
    "CurveKey",
    "RunnerUp",
    "Selection",
    "curves_by_seed",
    "run_configs",
    "runner_up",
    "select",
    "variant_labels",
    "variant_order",
]


class CurveKey(NamedTuple):
    """One run's curve: its config, activation, setting, learning rate and seed."""

    config_hash: str
    activation: str
    setting: str
    lr: float
    seed: int


Curves = dict[CurveKey, dict[int, float]]


def run_configs(runs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``{config_hash: flat config}`` of the runs, without the sweep axes and bookkeeping keys
    (what a config hash stands for), keys stored only when set filled in at their defaults."""
    configs = {}
    for run in runs:
        if run.config_hash not in configs:
            flat = flat_config(json.loads(run.config_json or "{}"))
            configs[run.config_hash] = identity_keys(stored_defaults(flat))
    return configs


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(map(_text, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


_NUMBER = re.compile(r"(\d+(?:\.\d+)?(?:e-?\d+)?)")  # a number in a config label


def variant_order(label: str) -> list:
    """A config label's sort key, its numbers compared as numbers (d 48 before d 128): text and
    numbers alternate in the split, each compared with its kind."""
    return [float(part) if i % 2 else part for i, part in enumerate(_NUMBER.split(label))]


def variant_labels(
    hashes: Iterable[str], configs: Mapping[str, Mapping[str, Any]], ignore: Iterable[str] = ()
) -> dict[str, str]:
    """``{config_hash: "key=value, ..."}``: the keys whose values differ between the configs
    (``""`` for every hash when there is only one config; the hash itself when its config is
    unknown)."""
    hashes = sorted(set(hashes))
    known = [h for h in hashes if h in configs]
    keys = sorted({k for h in known for k in configs[h]} - set(ignore))
    differing = [k for k in keys if len({json.dumps(configs[h].get(k)) for h in known}) > 1]
    labels = {}
    for h in hashes:
        if h not in configs:
            labels[h] = f"config {h}" if len(hashes) > 1 else ""
        else:
            labels[h] = ", ".join(f"{k}={_text(configs[h].get(k))}" for k in differing)
    return labels


def curves_by_seed(records: Iterable[Any], split: str, metric: str) -> Curves:
    """``{CurveKey: {epoch: value}}`` for one split and metric."""
    curves: Curves = defaultdict(dict)
    for r in records:
        if r.split == split and r.metric == metric:
            key = CurveKey(r.config_hash, r.activation, r.setting, float(r.lr), int(r.seed))
            curves[key][int(r.epoch)] = float(r.value)
    return dict(curves)


class Selection(NamedTuple):
    """The protocol's result for one (experiment, config, activation, setting[, lr], metric)."""

    experiment: str
    config_hash: str  # the config the reported values come from
    variant: str  # what sets this config apart from the experiment's others ("" if alone)
    activation: str
    setting: str
    lr: float
    lr_selected: bool  # False: no validation split, this learning rate is reported on its own
    metric: str  # the reported metric
    values: dict[int, float]  # seed -> reported value (NaN / inf: the run diverged)
    epochs: dict[int, int]  # seed -> the epoch reported
    val_medians: dict[tuple[str, float], float]  # (setting, lr) -> aggregate of select metric
    rule: str  # the protocol in words
    tuned_on: str = ""  # the config hash the lr was chosen on, when not ``config_hash``
    aggregate: Aggregate = HEADLINE  # the statistic over seeds the lr was chosen by

    @property
    def cell(self) -> tuple[str, str, str, str, float, str]:
        """What names this result's cell: its intervals' generator is seeded from it, so a table
        and a figure of the same cell show the same interval."""
        return (
            self.experiment,
            self.config_hash,
            self.activation,
            self.setting,
            self.lr,
            self.metric,
        )

    def summarize(self) -> Summary:
        """The aggregate's summary of the reported values (diverged runs counted, not used)."""
        return self.aggregate.summarize(list(self.values.values()), *self.cell)

    @property
    def diverged(self) -> int:
        """How many runs diverged (a NaN or infinite reported value)."""
        return sum(not math.isfinite(v) for v in self.values.values())

    @property
    def finite(self) -> list[float]:
        """The reported values of the runs that did not diverge, in seed order."""
        return [v for v in self.values.values() if math.isfinite(v)]


def _worst(value: float) -> float:
    return value if math.isfinite(value) else math.inf  # a diverged run loses every comparison


def _chosen_epoch(curve: dict[int, float], epoch_rule: str) -> int:
    if epoch_rule == "best":
        return min(curve, key=lambda e: (_worst(curve[e]), e))  # ties: the earliest epoch
    return max(curve)


def _value_at(curve: dict[int, float], epoch: int) -> tuple[int, float] | None:
    """The value at ``epoch``, else at the latest recorded epoch before it."""
    earlier = [e for e in curve if e <= epoch]
    return (max(earlier), curve[max(earlier)]) if earlier else None


def _units(
    hashes: Sequence[str], configs: Mapping[str, Mapping[str, Any]], retrain_key: str | None
) -> list[tuple[str, str]]:
    """(tuning config, reported config) pairs: each config alone, except that a retrain config
    (``retrain_key`` true) takes its lr from the tuning config that differs only in that key."""
    if not retrain_key:
        return [(h, h) for h in hashes]

    def family(h: str) -> str:
        return json.dumps(
            {k: v for k, v in configs.get(h, {}).items() if k != retrain_key}, sort_keys=True
        )

    def retrains(h: str) -> bool:
        return bool(configs.get(h, {}).get(retrain_key, False))

    units = []
    for h in hashes:
        partners = [t for t in hashes if h in configs and t in configs and family(t) == family(h)]
        if retrains(h):
            tuners = [t for t in partners if not retrains(t)]
            units.append((tuners[0] if tuners else h, h))
        elif not any(retrains(t) for t in partners):
            units.append((h, h))
    return units


def select(
    records: Sequence[Any],
    protocol: Protocol,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    aggregate: Aggregate = HEADLINE,
) -> list[Selection]:
    """Apply ``protocol`` to the records of one experiment, choosing the lr with the lowest
    ``aggregate`` over seeds of the validation metric.

    ``configs`` (``{config_hash: flat config}``, from :func:`run_configs`) labels the configs and
    pairs tuning and retrain configs. Returns one :class:`Selection` per config and (activation,
    setting) — per activation when the protocol tunes the setting too — or per (activation,
    setting, lr) when the tuning config records no validation split, for every reported metric
    recorded, ordered by config, activation and setting.
    """
    configs = configs or {}
    if not records:
        return []
    records = mark_diverged(records, configs)
    present: dict[str, set[str]] = defaultdict(set)
    for r in records:
        present[r.split].add(r.metric)
    select_metric = next(
        (m for m in protocol.select_metrics if m in present[protocol.select_split]), None
    )
    report_metrics = [m for m in protocol.report_metrics if m in present[protocol.report_split]]
    val = curves_by_seed(records, protocol.select_split, select_metric) if select_metric else {}
    units = _units(sorted({r.config_hash for r in records}), configs, protocol.retrain_key)
    ignore = [protocol.retrain_key] if protocol.retrain_key else []
    labels = variant_labels([report for _, report in units], configs, ignore)
    units.sort(key=lambda unit: (variant_order(labels[unit[1]]), unit[1]))
    context = _Context(records[0].experiment, protocol, select_metric, val, labels, aggregate)
    return [
        selection
        for tune, report in units
        for metric in report_metrics
        for selection in context.unit(tune, report, metric, records)
    ]


class _Context(NamedTuple):
    """What every unit of one experiment's selection shares."""

    experiment: str
    protocol: Protocol
    select_metric: str | None
    val: Curves
    labels: dict[str, str]
    aggregate: Aggregate

    def unit(self, tune: str, report: str, metric: str, records) -> list[Selection]:
        """The selections of one (tuning config, reported config) and reported metric."""
        test = {
            k: v
            for k, v in curves_by_seed(records, self.protocol.report_split, metric).items()
            if k.config_hash == report
        }
        groups: dict[tuple[str, str], set[tuple[str, float]]] = defaultdict(set)
        for k in test:
            group_setting = "" if self.protocol.tune_setting else k.setting
            groups[(k.activation, group_setting)].add((k.setting, k.lr))
        selections = []
        for (activation, group_setting), candidates in sorted(groups.items()):
            val_curves = self._val_curves(tune, report, activation, group_setting, candidates)
            for (setting, lr), selected, medians, rule in self._chosen(val_curves, candidates):
                where = (activation, setting, lr)
                values, epochs = self._reported(test, val_curves, tune, report, where)
                selections.append(
                    Selection(
                        experiment=self.experiment,
                        config_hash=report,
                        variant=self.labels[report],
                        activation=activation,
                        setting=setting,
                        lr=lr,
                        lr_selected=selected,
                        metric=metric,
                        values=dict(sorted(values.items())),
                        epochs=epochs,
                        val_medians=medians,
                        rule=rule,
                        tuned_on=tune if tune != report else "",
                        aggregate=self.aggregate,
                    )
                )
        return selections

    def _val_curves(self, tune: str, report: str, activation: str, group_setting: str, candidates):
        """The tuning config's validation curves of one activation (and setting, unless the
        protocol tunes it); on the reported config itself, only the candidates' (setting, lr)."""
        return {
            k: c
            for k, c in self.val.items()
            if k.config_hash == tune
            and k.activation == activation
            and (self.protocol.tune_setting or k.setting == group_setting)
            and c
            and (tune != report or (k.setting, k.lr) in candidates)
        }

    def _chosen(self, val_curves: Curves, candidates):
        """[((setting, lr), chosen on validation, medians, rule)]: the protocol's choice, or each
        candidate on its own when there is no validation split."""
        protocol = self.protocol
        if not val_curves:
            rule = (
                f"no {protocol.select_split} split recorded: each learning rate reported on its "
                f"own, {protocol.report_split} at the last epoch, {self.aggregate.name} over seeds"
            )
            return [(pair, False, {}, rule) for pair in sorted(candidates)]
        medians: dict[tuple[str, float], float] = {}
        for pair in sorted({(k.setting, k.lr) for k in val_curves}):
            at_pair = [c for k, c in val_curves.items() if (k.setting, k.lr) == pair]
            chosen = [_worst(c[_chosen_epoch(c, protocol.epoch)]) for c in at_pair]
            medians[pair] = self.aggregate.point(chosen)
        best = min(medians, key=lambda pair: (medians[pair], pair))
        return [(best, True, medians, protocol.describe(self.select_metric))]

    def _reported(self, test: Curves, val_curves: Curves, tune, report, where):
        """({seed: reported value}, {seed: its epoch}) of one ``where`` = (activation, setting,
        lr)."""
        values, epochs = {}, {}
        for key, curve in test.items():
            if (key.activation, key.setting, key.lr) != where:
                continue
            val_curve = val_curves.get(key._replace(config_hash=tune)) if tune == report else None
            epoch = _chosen_epoch(val_curve, self.protocol.epoch) if val_curve else max(curve)
            found = _value_at(curve, epoch)
            if found is not None:
                epochs[key.seed], values[key.seed] = found
        return values, epochs


class RunnerUp(NamedTuple):
    """A selection's activation at its second-best learning rate (and setting) on validation, and
    the two lrs' validation values per seed, to tell whether the choice between them is resolved."""

    selection: Selection  # the protocol's result with the chosen (setting, lr) left out
    metric: str  # the validation metric the lr is chosen on
    chosen: dict[int, float]  # seed -> validation metric at the chosen (setting, lr)
    second: dict[int, float]  # seed -> validation metric at the runner-up


def _select_metric(records: Sequence[Any], protocol: Protocol) -> str | None:
    present = {r.metric for r in records if r.split == protocol.select_split}
    return next((m for m in protocol.select_metrics if m in present), None)


def runner_up(
    records: Sequence[Any],
    protocol: Protocol,
    chosen: Selection,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    aggregate: Aggregate = HEADLINE,
) -> RunnerUp | None:
    """``chosen``'s activation as the protocol would report it had its chosen (setting, lr) not
    run: the (setting, lr) second in ``chosen.val_medians`` (the aggregate over seeds of the
    validation metric), with each seed's validation value at both (at the protocol's epoch; NaN
    for a diverged run). None when the lr was not chosen on validation or only one was run.

    ``records`` are the experiment's, as passed to :func:`select` with the same ``protocol``,
    ``configs`` and ``aggregate``."""
    if not chosen.lr_selected or len(chosen.val_medians) < 2:
        return None
    best, second = sorted(chosen.val_medians, key=lambda pair: (chosen.val_medians[pair], pair))[:2]
    tune = chosen.tuned_on or chosen.config_hash
    records = mark_diverged(records, configs or {})
    left_out = [
        r
        for r in records
        if not (
            r.config_hash == tune
            and r.activation == chosen.activation
            and (r.setting, float(r.lr)) == best
        )
    ]
    found = [
        s
        for s in select(left_out, protocol, configs, aggregate)
        if (s.config_hash, s.activation, s.metric)
        == (chosen.config_hash, chosen.activation, chosen.metric)
        and s.setting == second[0]
    ]
    metric = _select_metric(records, protocol)
    if not found or metric is None:
        return None
    curves = curves_by_seed(records, protocol.select_split, metric)

    def values(pair: tuple[str, float]) -> dict[int, float]:
        return {
            key.seed: curve[_chosen_epoch(curve, protocol.epoch)]
            for key, curve in sorted(curves.items())
            if curve
            and (key.config_hash, key.activation, key.setting, key.lr)
            == (tune, chosen.activation, *pair)
        }

    return RunnerUp(found[0], metric, values(best), values(second))
