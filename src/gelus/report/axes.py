"""The report over axes: families of configs that differ along one axis, and their verdicts.

A ``--set`` key with several values makes one config per value (:func:`~gelus.experiments.config.
expand_axes`). :func:`families` finds, among an experiment's stored configs, the sets that differ
along one axis only:

- a *categorical* family (``model.init``, ``optim.warmup``, …): configs that differ in one key,
  with the same parameters N and training tokens T;
- a *scale* family: configs that differ in N (``EnginePlugin.parameter_count``), every key that
  differs between them moving with N (``model.d_model`` with ``model.layers``, the heads, the
  training length where it is tied to N), at x = log₂ N;
- a *budget* family: configs of one N that differ in T (``EnginePlugin.token_count``), at
  x = log₂ T;
- a *factorial* family: configs that differ in N and T only (every differing key moving with the
  pair), two or more values of N, T varied at one N at least, the cells off one line (three or
  more), at (log₂ N, log₂ T). A scale or budget family whose configs all lie in a factorial one
  is not judged again: the factorial's two slopes are the one test of both axes.

The sweep keys (activations, lrs, seeds, the settings such as ``train.keep``) are not part of a
config's identity, so a config that ran fewer settings than another is no other axis: the
verdicts compare the same (activation, setting) across the family's configs.

:func:`axis_results` judges each family: a categorical one by the interaction
(:func:`~gelus.report.sensitivity.interaction`) of each pair of values (the preset's default, else
the first value, against each other value first) and each activation's own change between them,
a scale or budget one by the trend (:func:`~gelus.report.trend.trend`), a factorial one by the
slopes on log₂ N and log₂ T fitted together (:func:`~gelus.report.factorial.factorial`; Holm over
its activations × slopes), each over independent cells (a seed is paired only within a config);
Holm over the family's comparisons of one metric (:func:`~gelus.report.stats.adjust`), the
leave-one-seed-out ranges, all by :func:`~gelus.report.judge.judge`.
"""

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from gelus.experiments.config import ConfigError, config_from_stored, plugin_for, plugin_for_task
from gelus.experiments.engine import EnginePlugin
from gelus.experiments.selection import Selection, variant_labels
from gelus.report.factorial import CellGap, cell_gap, factorial, identified
from gelus.report.judge import judge
from gelus.report.metrics import Verdict, lower_is_better
from gelus.report.sensitivity import interaction
from gelus.report.stats import (
    DESIGN,
    HEADLINE,
    Aggregate,
    Comparison,
    Design,
    compare_paired,
    paired_t_test,
)

__all__ = [
    "AXES",
    "AxisResult",
    "Family",
    "Trend",
    "axis_results",
    "families",
    "mark_rule_dependence",
    "sizes",
]

AXES = {"scale": "log₂ parameters", "budget": "log₂ tokens"}  # a family's x, by its kind
FACTORIAL_AXES = (AXES["scale"], AXES["budget"])  # a factorial family's two slopes
UNITS = {"scale": "parameters", "budget": "tokens"}


class Family(NamedTuple):
    """Configs of one experiment that differ along one axis."""

    kind: str  # "categorical" | "scale" | "budget" | "factorial"
    keys: tuple[str, ...]  # the keys whose values differ between the members
    members: tuple[str, ...]  # config hashes: the base value first, or by x ascending
    labels: tuple[str, ...]  # each member's values of ``keys``, "model.init=xavier"
    sizes: tuple[int, ...] = ()  # scale, budget: each member's parameters or tokens
    x: tuple[float, ...] = ()  # scale, budget: log₂ of ``sizes``
    points: tuple[tuple[float, float], ...] = ()  # factorial: each member's (log₂ N, log₂ T)
    at: tuple[Any, Any] = (None, None)  # categorical: the (N, T) every member shares, where known
    held: str = ""  # "key=value, …" every member shares that differs from the preset's default


class Trend(NamedTuple):
    """One activation's trend against the reference over a scale or budget family."""

    comparison: Comparison  # the slopes' paired test, adjusted and marked
    x: tuple[float, ...]  # the family's points
    gaps: dict[int, tuple[float, ...]]  # seed -> its gap to the reference at each point
    holds: dict[str, int]  # the per-point verdict's word (activation vs reference) -> points
    alternatives: tuple[Comparison, ...] = ()  # at the matched lr, under the mean rule (lr_choice)
    cells: tuple[CellGap, ...] = ()  # each point's within-cell gap (its seeds, lrs, edge flag)


class AxisResult(NamedTuple):
    """A family and its verdicts: interactions (categorical) or trends (scale, budget)."""

    family: Family
    comparisons: tuple[Comparison, ...] = ()  # categorical: the interactions
    effects: tuple[Comparison, ...] = ()  # categorical: each activation, value against base
    trends: tuple[Trend, ...] = ()  # scale, budget; factorial: per activation its two slopes


def sizes(configs: Mapping[str, Mapping[str, Any]], base: Any) -> dict[str, tuple[Any, Any]]:
    """{config hash: (parameters N, training tokens T)} of each stored flat config, read from
    ``base`` (the preset's config) with the config's values applied; (None, None) where its engine
    counts neither, ``base`` is None or the stored values do not fit it."""
    found = {}
    for h, flat in configs.items():
        try:
            config = config_from_stored(base, flat) if base is not None else None
        except (ConfigError, ValueError):
            config = None
        plugin = plugin_for(config) if config is not None else None
        found[h] = (
            (plugin.parameter_count(config), plugin.token_count(config)) if plugin else (None, None)
        )
    return found


def _value(flat: Mapping[str, Any], key: str) -> str:
    return json.dumps(flat.get(key), sort_keys=True)


def _groups(hashes: Sequence[str], configs: Mapping, alike: Sequence[str]) -> list[list[str]]:
    """``hashes`` grouped by their values of the keys ``alike``, groups of 2 or more."""
    grouped: dict[tuple, list[str]] = defaultdict(list)
    for h in hashes:
        grouped[tuple(_value(configs[h], k) for k in alike)].append(h)
    return [g for g in grouped.values() if len(g) > 1]


def _differing(hashes: Sequence[str], configs: Mapping) -> list[str]:
    keys = sorted({k for h in hashes for k in configs[h]})
    return [k for k in keys if len({_value(configs[h], k) for h in hashes}) > 1]


def size_keys(flats: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The prefixes of the keys that shape the model or the training length, as the configs'
    engines (found by ``task``) name them (``EnginePlugin.size_keys``; its default where a config's
    task has no registered engine)."""
    engines = [plugin_for_task(flat.get("task")) or EnginePlugin for flat in flats]
    return tuple(dict.fromkeys(prefix for engine in engines for prefix in engine.size_keys))


def _tied(hashes: Sequence[str], configs: Mapping, measure: Callable[[str], Any]) -> list[str]:
    """The keys of the model or the training (:func:`size_keys`) that differ among ``hashes`` and
    move only with ``measure``: equal measure, equal value (a scale axis's d_model and layers,
    and its heads or training length tied to N). Any other key (a warmup) is never the axis."""
    tied = []
    prefixes = size_keys([configs[h] for h in hashes])
    for k in (k for k in _differing(hashes, configs) if k.startswith(prefixes)):
        seen: dict[Any, set[str]] = defaultdict(set)
        for h in hashes:
            seen[measure(h)].add(_value(configs[h], k))
        if all(len(values) == 1 for values in seen.values()):
            tied.append(k)
    return tied


def _categorical(configs: Mapping, counts: Mapping, defaults: Mapping) -> list[Family]:
    """Families along one key, N and T equal: the default value first, else by value."""
    hashes = sorted(configs)
    found = []
    keys = _differing(hashes, configs)
    for key in keys:
        rest = [k for k in keys if k != key]
        for group in _groups(hashes, configs, rest):
            if len({counts[h] for h in group}) > 1:
                continue  # the key changes the size or the budget: a scale or budget axis
            default = json.dumps(defaults.get(key), sort_keys=True) if key in defaults else None
            group.sort(key=lambda h: (_value(configs[h], key) != default, _value(configs[h], key)))
            labels = tuple(variant_labels(group, configs)[h] for h in group)
            at = counts[group[0]]
            found.append(Family("categorical", (key,), tuple(group), labels, at=at))
    return found


def _measured(kind: str, group: Sequence[str], configs: Mapping, counts: Mapping) -> Family:
    index = 0 if kind == "scale" else 1
    group = sorted(group, key=lambda h: counts[h][index])
    keys = tuple(_differing(group, configs))
    size = tuple(int(counts[h][index]) for h in group)
    labels = tuple(variant_labels(group, configs)[h] for h in group)
    return Family(kind, keys, tuple(group), labels, size, tuple(math.log2(n) for n in size))


def _scale_groups(known: Sequence[str], configs: Mapping, counts: Mapping) -> list[list[str]]:
    """Groups of configs that differ in N, every differing key moving with N: among all of
    ``known``, then among those that share a value of a key that does not move with N over all
    of them (a training length per parameter varied too: each of its values its own scale axis);
    each group once."""
    tied = _tied(known, configs, lambda h: counts[h][0])
    rest = [k for k in _differing(known, configs) if k not in tied]
    subsets = [list(known)] + [
        [h for h in known if _value(configs[h], k) == value]
        for k in rest
        for value in sorted({_value(configs[h], k) for h in known})
    ]
    found: dict[frozenset, list[str]] = {}
    for subset in subsets:
        tied = _tied(subset, configs, lambda h: counts[h][0])
        rest = [k for k in _differing(subset, configs) if k not in tied]
        for group in _groups(subset, configs, rest):
            found.setdefault(frozenset(group), group)
    return list(found.values())


def _scaled(configs: Mapping, counts: Mapping) -> list[Family]:
    """Scale families (N differs, every differing key moves with N) and budget families (one N,
    T differs, every differing key moves with T)."""
    known = sorted(h for h in configs if counts[h][0] is not None)
    found = [_measured("scale", g, configs, counts) for g in _scale_groups(known, configs, counts)]
    by_n: dict[Any, list[str]] = defaultdict(list)
    for h in sorted(h for h in configs if counts[h][1] is not None):
        by_n[counts[h][0]].append(h)
    for same_n in by_n.values():
        tied = _tied(same_n, configs, lambda h: counts[h][1])
        rest = [k for k in _differing(same_n, configs) if k not in tied]
        found += [_measured("budget", g, configs, counts) for g in _groups(same_n, configs, rest)]
    return found


def _factorial(configs: Mapping, counts: Mapping) -> list[Family]:
    """Factorial families: configs whose differing keys all move with (N, T) together, two or
    more values of N, two or more values of T at one N at least (a T that only moves with N is a
    scale family's), the cells not on one line (so three or more); by N, then T."""
    known = sorted(h for h in configs if None not in counts[h])
    tied = _tied(known, configs, lambda h: tuple(counts[h]))
    rest = [k for k in _differing(known, configs) if k not in tied]
    found = []
    for group in _groups(known, configs, rest):
        group.sort(key=lambda h: tuple(counts[h]))
        points = tuple((math.log2(counts[h][0]), math.log2(counts[h][1])) for h in group)
        budgets = defaultdict(set)  # N -> its Ts: T must vary at some N, not only with N
        for n, t in points:
            budgets[n].add(t)
        if len(budgets) < 2 or max(map(len, budgets.values())) < 2 or not identified(points):
            continue
        keys = tuple(_differing(group, configs))
        labels = tuple(variant_labels(group, configs)[h] for h in group)
        size = tuple(int(counts[h][0]) for h in group)
        x = tuple(p[0] for p in points)
        found.append(Family("factorial", keys, tuple(group), labels, size, x, points))
    return found


def families(
    configs: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, tuple[Any, Any]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> list[Family]:
    """The families among an experiment's stored configs (``{config hash: flat identity config}``,
    :func:`~gelus.experiments.selection.run_configs`): categorical ones, then scale and budget
    ones not inside a factorial one, then factorial ones. ``counts``: {hash: (N, T)} (:func:`sizes`; None: neither known); ``defaults``: the
    preset's flat config, whose value of a categorical key comes first (the interactions' base).
    A config that differs from every other in two or more keys at one size is in no family."""
    counts = counts if counts is not None else dict.fromkeys(configs, (None, None))
    together = _factorial(configs, counts)
    covered = [set(f.members) for f in together]
    # a scale or budget family inside a factorial one is a view of it, not a question of its own:
    # judged once, by the factorial's two slopes (docs/REPORT.md, the tests a claim rests on)
    scaled = [f for f in _scaled(configs, counts) if not any(set(f.members) <= c for c in covered)]
    found = _categorical(configs, counts, defaults or {}) + scaled + together
    return [f._replace(held=_held(f, configs, defaults or {})) for f in found]


def _held(family: Family, configs: Mapping, defaults: Mapping) -> str:
    """The values every member of ``family`` shares that differ from the preset's ``defaults``
    (a scale family of the warmup-0 configs says "optim.warmup=0"); "" where none does."""
    flats = [configs[h] for h in family.members]
    shared = []
    for key, value in sorted(flats[0].items()):
        alike = all(flat.get(key) == value for flat in flats)
        moved = key in defaults and _value(defaults, key) != _value(flats[0], key)
        if key not in family.keys and alike and moved:
            shared.append(f"{key}={value}")
    return ", ".join(shared)


SelectionKey = tuple[str, str, str, str, Any]  # config hash, activation, setting, metric, lr


def _key(s: Selection) -> SelectionKey:
    """A selection's place: its lr only where it was not chosen (a matched-lr experiment)."""
    return (s.config_hash, s.activation, s.setting, s.metric, None if s.lr_selected else s.lr)


def _cells(selections: Sequence[Selection], reference: str) -> list[tuple[str, str, str, Any]]:
    """(activation, setting, metric, lr) of every non-reference selection, in order."""
    return list(dict.fromkeys(k[1:] for s in selections if (k := _key(s))[1] != reference).keys())


def _pairs(family: Family) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Every pair of the family's values as ((hash, label) of the earlier, of the later): the
    base against each other value first, then the others against each other (he vs xavier)."""
    members = list(zip(family.members, family.labels, strict=True))
    return [
        (members[i], members[j]) for i in range(len(members)) for j in range(i + 1, len(members))
    ]


def _interactions(family: Family, by_key: Mapping, cells, reference: str) -> list[Comparison]:
    """The interaction of each pair of values (:func:`_pairs`), unadjusted: (activation −
    reference) under the later value minus under the earlier, paired by seed."""
    found = []
    for (base, base_label), (member, label) in _pairs(family):
        for activation, setting, metric, lr in cells:
            four = [
                by_key.get((h, a, setting, metric, lr))
                for h in (member, base)
                for a in (activation, reference)
            ]
            if None in four:
                continue  # a value that did not run this activation or setting
            c = interaction(
                (four[0], four[1]), (four[2], four[3]), lower_is_better=lower_is_better(metric)
            )
            found.append(c._replace(variant=f"{label} vs {base_label}"))
    return found


def _effects(family: Family, by_key: Mapping, cells) -> list[Comparison]:
    """Each activation under the later value of each pair (:func:`_pairs`) against itself under
    the earlier, unadjusted: the value's own effect on it (GELU under xavier − GELU under
    unit_norm), paired by seed, each config at its own chosen lr."""
    found = []
    for (base, base_label), (member, label) in _pairs(family):
        for activation, setting, metric, lr in cells:
            value = by_key.get((member, activation, setting, metric, lr))
            against = by_key.get((base, activation, setting, metric, lr))
            if value is None or against is None:
                continue
            c = compare_paired(value, against, lower_is_better=lower_is_better(metric))
            found.append(c._replace(variant=f"{label} vs {base_label}"))
    return found


def _holds(family: Family, verdicts: Mapping, cell: tuple, reference: str) -> dict[str, int]:
    """{word: points} of the per-point verdict activation vs reference in the experiment's
    comparisons (``verdicts``: {(hash, treatment, baseline, setting, metric): Verdict}), turned
    round where they compare reference − activation; {} for a metric they do not judge."""
    activation, setting, metric, _ = cell
    words: dict[str, int] = defaultdict(int)
    for member in family.members:
        verdict = verdicts.get((member, activation, reference, setting, metric))
        turned = verdicts.get((member, reference, activation, setting, metric))
        verdict = verdict or (turned.flipped() if turned else None)
        words[verdict.word if verdict else "not compared"] += 1
    return dict(words) if len(words) > 1 or "not compared" not in words else {}


def _coordinates(family: Family) -> tuple[tuple[float, ...], ...]:
    """Each member's coordinates: (log₂ N, log₂ T) in a factorial family, (x,) on one axis."""
    return family.points if family.kind == "factorial" else tuple((x,) for x in family.x)


def _trends(family: Family, by_key: Mapping, cells, reference: str, verdicts, confidence) -> list:
    """Each activation's trend against the reference over the family's cells, unadjusted: one
    slope on a scale or budget family, two (log₂ N, log₂ T) on a factorial one, over the cells
    where both ran two or more finite pairs (:func:`~gelus.report.factorial.factorial`)."""
    axes = FACTORIAL_AXES if family.kind == "factorial" else (AXES[family.kind],)
    found = []
    for activation, setting, metric, lr in cells:
        points = [
            (xy, by_key.get((h, activation, setting, metric, lr)), by_key.get((h, reference, setting, metric, lr)))
            for xy, h in zip(_coordinates(family), family.members, strict=True)
        ]  # fmt: skip
        points = [p for p in points if None not in p and len(cell_gap(*p).seeds) > 1]
        if not identified([xy for xy, _, _ in points]):
            continue
        slopes, gaps = factorial(
            points, axes, lower_is_better=lower_is_better(metric), confidence=confidence
        )
        common = sorted(set.intersection(*(set(g.seeds) for g in gaps)))
        by_seed = [dict(zip(g.seeds, g.differences, strict=True)) for g in gaps]
        seeds = {s: tuple(d[s] for d in by_seed) for s in common}
        holds = _holds(family, verdicts, (activation, setting, metric, lr), reference)
        variant = f"{family.labels[0]} … {family.labels[-1]}"
        for i, c in enumerate(slopes):
            x = tuple(g.coordinates[i] for g in gaps)
            found.append(Trend(c._replace(variant=variant), x, seeds, holds, cells=tuple(gaps)))
    return found


def _judged_slopes(slopes: Sequence[Comparison], design: Design, aggregate: Aggregate) -> list:
    """Holm over the slopes of each base metric (a factorial family's activations × its two
    slopes are one family), the verdicts by :func:`~gelus.report.judge.judge` without the marks
    of paired differences (a slope over independent cells has none); their intervals kept."""
    metrics = [c.metric.split(" gap per unit of ")[0] for c in slopes]
    return judge(slopes, design, aggregate, families=metrics, marks=False)


def _judged(comparisons: Sequence[Comparison], design: Design, aggregate: Aggregate) -> list:
    """Holm over the comparisons of each metric (one family per metric), the verdicts and the
    leave-one-seed-out ranges (:func:`~gelus.report.judge.judge`), the t interval at the aggregate's
    confidence; the order kept."""
    comparisons = [
        c._replace(ci=paired_t_test(c.differences, aggregate.confidence).ci) for c in comparisons
    ]
    return judge(comparisons, design, aggregate, families=[c.metric for c in comparisons])


def axis_results(
    found: Sequence[Family],
    selections: Sequence[Selection],
    comparisons: Sequence[Comparison],
    reference: str,
    *,
    design: Design = DESIGN,
    aggregate: Aggregate = HEADLINE,
) -> list[AxisResult]:
    """Each family's verdicts from the experiment's ``selections`` (each config's own chosen lr,
    as the verdict tables use): a categorical family's interactions of each pair of values and
    each activation's change between them, a scale or budget family's trend per activation and
    setting, a factorial family's two slopes per activation and setting; Holm over the family's
    comparisons of one metric. ``comparisons``: the experiment's per-config verdicts,
    counted per trend for where its verdict holds. A family with no comparison is left out."""
    by_key = {_key(s): s for s in selections}
    cells = _cells(selections, reference)
    hashes = {s.variant: s.config_hash for s in selections}
    verdicts = {
        (hashes.get(c.variant), c.treatment, c.baseline, c.setting, c.metric): c.verdict
        for c in comparisons
    }
    results = []
    for family in found:
        if family.kind == "categorical":
            judged = _judged(_interactions(family, by_key, cells, reference), design, aggregate)
            every = _cells(selections, reference="")  # the reference's own effect too
            effects = _judged(_effects(family, by_key, every), design, aggregate)
            result = AxisResult(family, comparisons=tuple(judged), effects=tuple(effects))
        else:
            trends = _trends(family, by_key, cells, reference, verdicts, aggregate.confidence)
            judged = _judged_slopes([t.comparison for t in trends], design, aggregate)
            trends = [t._replace(comparison=c) for t, c in zip(trends, judged, strict=True)]
            result = AxisResult(family, trends=tuple(trends))
        if result.comparisons or result.effects or result.trends:
            results.append(result)
    return results


def _verdicts(result: AxisResult) -> list[Comparison]:
    """Every verdict of a family: its interactions, its effects, its trends'."""
    return [*result.comparisons, *result.effects, *(t.comparison for t in result.trends)]


def _verdict_key(family: Family, c: Comparison) -> tuple:
    return (family.kind, family.members, c.variant, c.treatment, c.baseline, c.setting, c.metric)


def axis_verdicts(results: Sequence[AxisResult]) -> dict[tuple, Verdict]:
    """{verdict key: verdict} of every family's interactions, effects and trends, the keys
    :func:`mark_rule_dependence` asks for."""
    return {_verdict_key(r.family, c): c.verdict for r in results for c in _verdicts(r)}


def mark_rule_dependence(
    results: Sequence[AxisResult], depends: Callable[[tuple], str]
) -> list[AxisResult]:
    """``results`` with each verdict whose word differs between the selection rules marked
    "depends on the selection rule" (``Comparison.depends``: each rule's word), as the
    per-config tables are. ``depends``: :func:`gelus.report.judge.rule_dependence` over
    :func:`axis_verdicts` of the same families judged with the lrs (and epochs) each rule
    chooses; a verdict a rule cannot form (a cell it left out) takes no part."""

    def marked(family: Family, c: Comparison) -> Comparison:
        said = depends(_verdict_key(family, c))
        return c._replace(depends=said) if said else c

    return [
        r._replace(
            comparisons=tuple(marked(r.family, c) for c in r.comparisons),
            effects=tuple(marked(r.family, c) for c in r.effects),
            trends=tuple(t._replace(comparison=marked(r.family, t.comparison)) for t in r.trends),
        )
        for r in results
    ]
