"""From records to what the report says: results tables, comparisons, setup, summary, environment.

:func:`analyse` is a pure function of the records, the runs, the presets (each experiment's
protocol, figure, paper numbers and setup), the aggregate over seeds and the verdicts' design
(:mod:`gelus.report.stats`); the renderers in :mod:`gelus.report.render` only format its result.
"""

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gelus.experiments import timing
from gelus.experiments.config import (
    config_to_dict,
    flat_config,
    identity_keys,
    resolve_configs,
    stored_defaults,
)
from gelus.experiments.divergence import mark_diverged
from gelus.experiments.presets import Preset
from gelus.experiments.protocol import FigureSpec, Protocol
from gelus.experiments.selection import (
    RunnerUp,
    Selection,
    run_configs,
    runner_up,
    select,
    variant_order,
)
from gelus.report.axes import (
    AxisResult,
    axis_results,
    axis_verdicts,
    families,
    mark_rule_dependence,
    sizes,
)
from gelus.report.claims import check_claims
from gelus.report.judge import judge, judge_pairs, rule_dependence
from gelus.report.metrics import Verdict
from gelus.report.sensitivity import LrSensitivity, lr_sensitivity
from gelus.report.stats import (
    DESIGN,
    EQUIVALENCE_MARGINS,
    HEADLINE,
    Aggregate,
    Comparison,
    Design,
    Summary,
    paired_t_test,
)

__all__ = [
    "BASELINES",
    "ExperimentResult",
    "Missing",
    "ResultRow",
    "StepCost",
    "analyse",
    "environment",
    "is_quick",
]

BASELINES = ("relu", "elu")  # the paper compares GELU against these


def _json(text: Any) -> dict[str, Any]:
    parsed = json.loads(text) if isinstance(text, str) and text.strip() else {}
    return parsed if isinstance(parsed, dict) else {}


def is_quick(runs: Sequence[Any]) -> bool:
    """True when any run's config or metadata has a ``quick`` key that is true."""
    return any(
        _json(r.config_json).get("quick") is True or _json(r.metadata_json).get("quick") is True
        for r in runs
    )


class ResultRow(NamedTuple):
    """One selection, its summary over seeds, and the paper's number where it applies."""

    selection: Selection
    summary: Summary
    paper: float | None  # the paper's number for this activation, metric and setting


class Missing(NamedTuple):
    """An experiment with no records, and how to get what it needs."""

    experiment: str
    dataset: str
    how_to_get: str


class StepCost(NamedTuple):
    """One activation's time per optimizer step at one config and device, from the interleaved
    measurement after its sweep (:mod:`gelus.experiments.step_times`)."""

    config_hash: str
    activation: str
    device: str
    threads: int
    seconds: float  # the median over rounds
    low: float  # the fastest round
    high: float  # the slowest round
    rounds: int


def step_costs(step_times: Sequence[Any], experiment: str) -> tuple[StepCost, ...]:
    """The experiment's :class:`StepCost` per (config, activation, device), from the records'
    ``step_times`` rows (``gelus.experiments.records.StepTime``)."""
    rounds: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    for t in step_times:
        if t.experiment == experiment and math.isfinite(t.seconds):
            rounds[(t.config_hash, t.activation, t.device, int(t.threads))].append(t.seconds)
    return tuple(
        StepCost(*key, timing.median(values), min(values), max(values), len(values))
        for key, values in sorted(rounds.items())
    )


def steps_per_epoch(runs: Sequence[Any]) -> dict[str, int]:
    """{config hash: optimizer steps per epoch}, from the runs' metadata (total ``steps`` over
    ``train.epochs``), for the configs that record both."""
    found = {}
    for run in runs:
        steps = _json(run.metadata_json).get("steps")
        epochs = flat_config(_json(run.config_json)).get("train.epochs")
        if isinstance(steps, int) and isinstance(epochs, int) and epochs > 0:
            found[run.config_hash] = steps // epochs
    return found


class ExperimentResult(NamedTuple):
    """Everything the report shows about one experiment."""

    name: str
    citation: str
    figure: FigureSpec
    rules: tuple[str, ...]  # the protocol in words
    rows: tuple[ResultRow, ...]
    comparisons: tuple[tuple[Comparison, float | None], ...]  # with the paper's difference if known
    setup: tuple[tuple[str, str, str], ...]  # (aspect, paper, ours)
    paper_summary: str  # the paper's result in words
    notes: str
    wall_seconds: float
    n_runs: int
    n_unfinished: int = 0  # runs still training (or interrupted): left out of rows and comparisons
    claims: tuple = ()  # the paper's claims checked as it made them (report.claims.ClaimCheck)
    departures: tuple[str, ...] = ()  # "key=ours (the paper's: theirs)" where the runs differ
    in_paper: bool = True  # False: beyond the paper; its setup column is the preset's
    step_costs: tuple[StepCost, ...] = ()  # each activation's interleaved time per step
    steps_per_epoch: tuple[tuple[str, int], ...] = ()  # (config hash, optimizer steps per epoch)
    sensitivity: LrSensitivity | None = None  # learning-rate sensitivity, paired against GELU
    axes: tuple[AxisResult, ...] = ()  # families of configs along one axis, and their verdicts


def _pairs(
    selections: Sequence[Selection], reference: str | None = None
) -> list[tuple[Selection, Selection]]:
    """(treatment, reference) pairs on the headline metric: same config and setting, and the same
    lr when it was not selected. With a protocol's ``reference`` every other activation is
    compared with it; else the GELU family is compared with the baselines (ReLU, ELU, …) and any
    other activation (one a researcher brought) with the GELU family and the baselines."""
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    if reference is not None:
        anchor = [s for s in headline if s.activation == reference]
        return _matched([s for s in headline if s.activation != reference], anchor)
    gelus = [s for s in headline if "gelu" in s.activation.lower()]
    baselines = [s for s in headline if s.activation.lower() in BASELINES]
    others = [s for s in headline if s not in gelus and s not in baselines]
    return _matched(gelus, baselines) + _matched(others, gelus + baselines)


def _matched(
    treatments: Sequence[Selection], references: Sequence[Selection]
) -> list[tuple[Selection, Selection]]:
    pairs = []
    for t in treatments:
        mine = [
            b
            for b in references
            if b.config_hash == t.config_hash and (t.lr_selected or b.lr == t.lr)
        ]
        same = [b for b in mine if b.setting == t.setting]
        if not same and len({s.setting for s in treatments if s.activation == t.activation}) == 1:
            same = mine  # e.g. the SOI map (no dropout) vs ReLU at its tuned dropout
        pairs.extend((t, b) for b in same)
    return pairs


class _Finished(NamedTuple):
    """One experiment's finished records and what its statistics are taken with."""

    name: str
    records: list[Any]
    protocol: Protocol
    configs: dict[str, dict[str, Any]]
    aggregate: Aggregate
    design: Design
    claimed: frozenset[str] = frozenset()  # the configs the paper's claims are judged on (all)

    def selections(self, protocol: Protocol | None = None) -> list[Selection]:
        """The selections under ``protocol`` (default: the experiment's)."""
        if not self.records:
            return []
        return select(self.records, protocol or self.protocol, self.configs, self.aggregate)

    def compare(
        self, pairs: Sequence[tuple[Selection, Selection]], *, marks: bool = True
    ) -> list[Comparison]:
        """The paired comparisons of ``pairs`` judged (:func:`~gelus.report.judge.judge_pairs`),
        one Holm family per config; the order of ``pairs`` is kept."""
        return judge_pairs(pairs, self.design, self.aggregate, marks=marks)

    def claims(self, protocol: Protocol | None = None) -> list:
        """The paper's claims checked under ``protocol`` (default: the experiment's)."""
        chosen = protocol or self.protocol
        records = [r for r in self.records if not self.claimed or r.config_hash in self.claimed]
        return check_claims(self.name, records, chosen, self.configs, self.aggregate, self.design)


def _verdicts_under(finished: _Finished, protocol: Protocol) -> dict[tuple, Verdict]:
    """{comparison key: verdict} with the lr chosen by ``protocol``."""
    pairs = _pairs(finished.selections(protocol), protocol.reference)
    return {_comparison_key(c): c.verdict for c in finished.compare(pairs, marks=False)}


def _comparison_key(c: Comparison) -> tuple:
    return (c.variant, c.setting, c.treatment, c.baseline, c.lr)


def _claims_under_every_rule(finished: _Finished) -> list:
    """The paper's claims checked with the protocol's lr choice, each marked with every rule's
    verdict where the rules disagree."""
    checks = finished.claims()
    if not finished.records or not checks:
        return checks
    depends = rule_dependence(
        finished.records,
        finished.protocol,
        lambda protocol: {c.claim: c.verdict for c in finished.claims(protocol)},
    )
    return [c._replace(depends=depends(c.claim)) if depends(c.claim) else c for c in checks]


def _mark_rule_dependence(tests, finished: _Finished) -> list[Comparison]:
    """Each verdict recomputed with the lr chosen by every rule of ``SELECTION_RULES`` (those the
    records allow); one that changes is marked "depends on the selection rule" with each rule's."""
    depends = rule_dependence(
        finished.records, finished.protocol, lambda protocol: _verdicts_under(finished, protocol)
    )
    marked = []
    for c in tests:
        said = depends(_comparison_key(c))
        marked.append(c._replace(depends=said) if said else c)
    return marked


REFERENCE = "gelu"  # the reference activation when a protocol names none (the paper's pairs)


def _unresolved_choice(found: RunnerUp, design: Design) -> tuple[bool, str]:
    """(whether the reference's two best lrs are not told apart, in words): the paired validation
    difference runner-up − chosen over the seeds both ran, a lone paired t-test at the design's
    alpha; not told apart when it is not significant, or significant but inside the metric's
    margin."""
    seeds = [
        s for s in found.chosen
        if s in found.second and math.isfinite(found.chosen[s]) and math.isfinite(found.second[s])
    ]  # fmt: skip
    test = paired_t_test([found.second[s] - found.chosen[s] for s in seeds])
    margin = EQUIVALENCE_MARGINS.get(found.metric, 0.0)
    apart = test.p < design.alpha and abs(test.mean) >= margin
    words = f"validation {found.metric} {test.mean:+.2g} against its chosen lr's, p {test.p:.2f}"
    return not apart, words


def _mark_reference_lr(tests, finished: _Finished, selections) -> list[Comparison]:
    """Each verdict recomputed with the reference activation (the protocol's, else GELU) at its
    runner-up lr, one of its selections at a time, where the paired validation difference between
    its two best lrs is unresolved or inside the margin; a verdict whose word changes is marked
    "depends on the reference's lr" with the runner-up's lr, its validation gap and the verdict."""
    protocol = finished.protocol
    reference = protocol.reference or REFERENCE
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    marks: dict[tuple, list[str]] = defaultdict(list)
    for chosen in (s for s in headline if s.activation == reference):
        found = runner_up(finished.records, protocol, chosen, finished.configs, finished.aggregate)
        if found is None:
            continue
        unresolved, gap = _unresolved_choice(found, finished.design)
        if not unresolved:
            continue
        moved = [found.selection if s == chosen else s for s in headline]
        tests_again = finished.compare(_pairs(moved, protocol.reference), marks=False)
        again = {_comparison_key(c): c for c in tests_again}
        where = f" ({chosen.setting})" if chosen.setting else ""
        for c in tests:
            other = again.get(_comparison_key(c))
            if other is not None and other.verdict != c.verdict:
                marks[_comparison_key(c)].append(
                    f"{reference}{where} at its runner-up lr {found.selection.lr:g}, not "
                    f"{chosen.lr:g} ({gap}): {other.verdict.word}, "
                    f"p {finished.design.correction} {other.p_holm:.3f}"
                )
    return [c._replace(reference_lr="; ".join(marks[_comparison_key(c)])) for c in tests]


# Keys that do not change what a run measures against the paper, or that the dataset decides.
_NOT_DEPARTURES = (
    "dataset",
    "train.checkpoint_every",
    "train.eval_batch_size",
    "train.keep_models",
)


def _preset_points(preset: Preset) -> list[dict[str, Any]]:
    """The preset's own configs, as the keys that identify a run: one per point of its default
    axes (``Preset.axes``: transformer-scale's sizes), or its one config."""
    return [
        identity_keys(stored_defaults(flat_config(config_to_dict(config))))
        for _, config, _ in resolve_configs(preset.config, (), (), preset.axes)
    ]


def _preset_configs(preset: Preset | None, configs: Mapping[str, Any]) -> frozenset[str]:
    """Of an experiment's several configs, those at one of the preset's points (its values of
    every key in which they differ: the paper's init beside a run of another init): what the
    paper's claims are about. Empty (all configs) for one config, or where none is at the
    preset's values."""
    if preset is None or len(configs) < 2:
        return frozenset()
    flat = {h: identity_keys(stored_defaults(c)) for h, c in configs.items()}
    keys = {k for c in flat.values() for k in c}
    differing = [k for k in keys if len({json.dumps(c.get(k)) for c in flat.values()}) > 1]

    def at(config: Mapping[str, Any], point: Mapping[str, Any]) -> bool:
        return all(
            json.dumps(config.get(k)) == json.dumps(point[k]) for k in differing if k in point
        )

    points = _preset_points(preset)
    return frozenset(h for h, c in flat.items() if any(at(c, point) for point in points))


def _departures(preset: Preset | None, runs: Sequence[Any]) -> tuple[str, ...]:
    """The settings of these runs that differ from the paper's (the preset's default config; for
    an experiment beyond the paper, the preset's own): each config against the preset's point
    nearest it (fewest keys apart), so a point of the preset's own axes departs from nothing."""
    if preset is None or not runs:
        return ()
    points = _preset_points(preset)
    whose = "paper's" if preset.in_paper else "preset's"
    found: dict[str, set[str]] = defaultdict(set)
    theirs: dict[str, set[str]] = defaultdict(set)
    for config in run_configs(runs).values():
        apart = [
            {k: v for k, v in config.items() if k not in _NOT_DEPARTURES and k in p and v != p[k]}
            for p in points
        ]
        nearest = min(range(len(points)), key=lambda i: len(apart[i]))
        for key, value in apart[nearest].items():
            found[key].add(json.dumps(value))
            theirs[key].add(json.dumps(points[nearest][key]))
    return tuple(
        f"{key}={' or '.join(sorted(values, key=variant_order))} "
        f"(the {whose}: {' or '.join(sorted(theirs[key], key=variant_order))})"
        for key, values in sorted(found.items())
    )


def _wall_seconds(records: Sequence[Any]) -> float:
    """Training wall time: each run's largest cumulative ``seconds``, runs trained together as one
    ensemble (same config, activation and setting: the same clock) counted once."""
    per_run: dict[str, tuple[tuple[str, str, str], float]] = {}
    for r in records:
        if r.metric == "seconds" and math.isfinite(r.value):
            group = (r.config_hash, r.activation, r.setting)
            previous = per_run.get(r.run_id, (group, 0.0))[1]
            per_run[r.run_id] = (group, max(previous, float(r.value)))
    return sum(seconds for _, seconds in set(per_run.values()))


def _shown(value: Any) -> str:
    """A config or metadata value as the setup table writes it (whole numbers with commas)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _distinct(values: Sequence[Any]) -> str:
    return ", ".join(dict.fromkeys(_shown(v) for v in values if v not in (None, "")))


# what an engine records about each run's model (split "model"), shown per activation in the setup
_MODEL_METRICS = {
    "parameters": ("parameters", lambda v: f"{v:,.0f}"),
    "flops_per_token": ("training FLOPs per token", lambda v: f"{v / 1e6:.2f} M"),
}


def _model_sizes(records: Sequence[Any]) -> dict[str, str]:
    """{aspect: "activation value; …"} of the model metrics in ``records``."""
    sizes: dict[str, dict[str, float]] = defaultdict(dict)
    for r in records:
        if r.split == "model" and r.metric in _MODEL_METRICS:
            sizes[r.metric][r.activation] = r.value
    return {
        label: "; ".join(f"{a} {form(v)}" for a, v in sizes[metric].items())
        for metric, (label, form) in _MODEL_METRICS.items()
        if metric in sizes
    }


_GELU_FORMS = {"none": "exact"}  # model.approximate as the setup table says it


def _training_set(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> Any:
    """The runs' training set: samples, or for the LM the windows an epoch draws."""
    size = metadata.get("train_size")
    if "train.steps_per_epoch" in config and isinstance(size, int):
        context = config.get("model.context")
        return f"{size:,} windows of {context + 1} bytes per epoch, at random offsets of the training split"
    return size


def _transformer_model(config: Mapping[str, Any]) -> str | None:
    """The transformer's shape in the preset's words (None for the paper's MLPs and CNNs)."""
    if not {"model.d_model", "model.layers", "model.heads"} <= set(config):
        return None
    c = config
    parts = [f"d {c['model.d_model']}", f"{c['model.layers']} layers", f"{c['model.heads']} heads"]
    if "model.context" in c:
        parts.append(f"context {c['model.context']}")
    if "model.patch" in c:
        parts.append(
            f"{c['model.patch']} × {c['model.patch']} patches, {c.get('model.pool')} pooling"
        )
    return ", ".join([*parts, c.get("model.norm", "layernorm"), "no biases"])


_RECIPE_KEYS = {
    "optim.beta1",
    "optim.beta2",
    "optim.weight_decay",
    "optim.warmup",
    "optim.min_lr",
    "optim.grad_clip",
}


def _transformer_optimizer(config: Mapping[str, Any]) -> str | None:
    """The transformer recipe's AdamW settings (None where the run has no such keys)."""
    if not set(config) >= _RECIPE_KEYS:  # the paper's Adam has no decay, warmup or clipping
        return None
    c = config
    return (
        f"AdamW β {c['optim.beta1']:g} / {c['optim.beta2']:g}, weight decay "
        f"{c['optim.weight_decay']:g} on matrices, warmup {c['optim.warmup'] * 100:g} % then "
        f"cosine to {c['optim.min_lr'] * 100:g} %, clip {c['optim.grad_clip']:g}"
    )


def _setup(
    preset: Preset | None, runs: Sequence[Any], records: Sequence[Any] = ()
) -> tuple[tuple[str, str, str], ...]:
    configs = [flat_config(_json(r.config_json)) for r in runs]
    metadata = [_json(r.metadata_json) for r in runs]
    paper = dict(preset.paper_setup) if preset else {}
    seeds = {r.seed for r in runs}

    def config(key: str) -> str:
        return _distinct([c.get(key) for c in configs])

    ours = {
        "dataset": _distinct([m.get("dataset") for m in metadata]) or config("dataset"),
        "training set": _distinct(
            [_training_set(c, m) for c, m in zip(configs, metadata, strict=True)]
        ),
        "model": _distinct([_transformer_model(c) for c in configs]),
        "optimizer": _distinct([_transformer_optimizer(c) for c in configs]),
        "epochs": config("train.epochs"),
        "steps": _distinct([m.get("steps") for m in metadata]),
        "runs": f"{len(seeds)} seeds per activation, setting and learning rate" if seeds else "",
        "learning rates": ", ".join(f"{lr:g}" for lr in sorted({float(r.lr) for r in runs})),
        "batch size": config("train.batch_size"),
        "GELU form": _distinct(
            [
                _GELU_FORMS.get(c.get("model.approximate"), c.get("model.approximate"))
                for c in configs
            ]
        ),
        "dropout": _distinct(sorted({r.setting for r in runs if r.setting})),
    } | _model_sizes(records)
    aspects = list(dict.fromkeys([*paper, *(k for k, v in ours.items() if v)]))
    return tuple((a, paper.get(a, "—"), ours.get(a) or "not recorded") for a in aspects)


def _paper_number(preset: Preset | None, s: Selection) -> float | None:
    """The paper's number for ``s``: an error of an activation the paper reports, in a setting the
    preset itself runs (a dropout keep the paper did not use is not the paper's experiment)."""
    if preset is None or s.metric != "error" or s.activation.lower() not in preset.paper_results:
        return None
    kept = getattr(preset.config.train, "keep", (1.0,))  # the CNN engine has no dropout setting
    keeps = {1.0, *kept} if preset.protocol.tune_setting else set(kept)
    if s.setting and s.setting not in {f"keep={float(k)!r}" for k in keeps}:
        return None
    return preset.paper_results[s.activation.lower()]


def analyse(
    records: Sequence[Any],
    runs: Sequence[Any],
    presets: Mapping[str, Preset],
    rule: str | None = None,
    step_times: Sequence[Any] = (),
    *,
    aggregate: Aggregate = HEADLINE,
    design: Design = DESIGN,
) -> list[ExperimentResult]:
    """Every experiment in ``records``, in the order of ``presets`` (the paper's; unknown names
    after it): the protocol's results, paired comparisons, setup and time (``step_times``: the
    records' interleaved step timings, ``gelus.experiments.records.read_step_times``).

    ``rule`` (one of ``SELECTION_RULES``) chooses every experiment's lr instead of its protocol;
    ``aggregate`` is the statistic over seeds of the tables and the lr choice, ``design`` the
    verdicts' test."""
    by_experiment: dict[str, list[Any]] = defaultdict(list)
    for r in records:
        by_experiment[r.experiment].append(r)
    names = [n for n in presets if n in by_experiment] + sorted(set(by_experiment) - set(presets))
    results = []
    for name in names:
        preset = presets.get(name)
        protocol = preset.protocol if preset else Protocol()
        if rule is not None:  # --select: one rule for every experiment
            protocol = protocol.with_rule(rule)
        mine_runs = [r for r in runs if r.experiment == name]
        finished = _finish(name, by_experiment[name], mine_runs, protocol, aggregate, design)
        finished = finished._replace(claimed=_preset_configs(preset, finished.configs))
        result = _result(preset, finished, mine_runs, by_experiment[name])
        results.append(result._replace(step_costs=step_costs(step_times, name)))
    return results


def _finish(name, records, runs, protocol, aggregate, design) -> _Finished:
    """The experiment's finished runs' records, diverged runs marked. A run still training stops
    at another epoch than the finished ones: comparing it at its last epoch would mix epochs, so
    only finished runs enter the statistics."""
    unfinished = {r.run_id for r in runs if r.status != "done"}
    configs = run_configs(runs)
    kept = mark_diverged([r for r in records if r.run_id not in unfinished], configs)
    return _Finished(name, kept, protocol, configs, aggregate, design)


def _rows(preset: Preset | None, finished: _Finished) -> list[ResultRow]:
    """One row per selection: its summary over seeds (each cell's own generator) and the
    paper's number."""
    return [ResultRow(s, s.summarize(), _paper_number(preset, s)) for s in finished.selections()]


def _comparisons(preset: Preset | None, finished: _Finished, selections) -> list[tuple]:
    """The experiment's paired comparisons (one Holm family), each with the paper's difference
    where the paper gives both numbers, marked where another selection rule changes them."""
    pairs = _pairs(selections, finished.protocol.reference)
    tests = _mark_rule_dependence(finished.compare(pairs), finished)
    tests = _mark_reference_lr(tests, finished, selections)
    comparisons = []
    for comparison, (t, b) in zip(tests, pairs, strict=True):
        paper_t, paper_b = _paper_number(preset, t), _paper_number(preset, b)
        paper_difference = None if paper_t is None or paper_b is None else paper_t - paper_b
        comparisons.append((comparison, paper_difference))
    return comparisons


def _sensitivity(finished: _Finished) -> LrSensitivity | None:
    """The experiment's learning-rate sensitivity (:func:`~gelus.report.sensitivity.lr_sensitivity`)
    on the metric and epoch rule its lr is chosen by, on validation (the reported split where no
    validation split was recorded, e.g. the autoencoder: a regret chooses nothing), against the
    protocol's reference (else GELU); its comparisons carry the sign-flip p and fragility marks.
    None with fewer than two common lrs or no such records."""
    protocol, records = finished.protocol, finished.records
    recorded = {(r.split, r.metric) for r in records}
    for split, metrics in (
        (protocol.select_split, protocol.select_metrics),
        (protocol.report_split, protocol.report_metrics),
    ):
        metric = next((m for m in metrics if (split, m) in recorded), None)
        if metric is not None:
            break
    else:
        return None
    found = lr_sensitivity(
        records, finished.name, reference=protocol.reference or REFERENCE, split=split,
        metric=metric, epoch=protocol.epoch, configs=finished.configs,
    )  # fmt: skip
    if not found.groups:
        return None
    judged = judge(found.comparisons, finished.design, finished.aggregate)
    return found._replace(comparisons=tuple(judged))


def _axes(preset: Preset | None, finished: _Finished, selections, comparisons) -> tuple:
    """The experiment's axis families (:mod:`gelus.report.axes`) judged against the protocol's
    reference (else GELU), each verdict judged again with the lr every selection rule the records
    allow chooses and marked where the rules disagree; () with one config."""
    if len(finished.configs) < 2:
        return ()
    base = preset.config if preset else None
    defaults = identity_keys(stored_defaults(flat_config(config_to_dict(base)))) if base else {}
    found = families(finished.configs, sizes(finished.configs, base), defaults)
    reference = finished.protocol.reference or REFERENCE
    judged = {"design": finished.design, "aggregate": finished.aggregate}
    results = axis_results(found, selections, [c for c, _ in comparisons], reference, **judged)
    depends = rule_dependence(
        finished.records,
        finished.protocol,
        lambda protocol: axis_verdicts(
            axis_results(found, finished.selections(protocol), [], reference, **judged)
        ),
    )
    return tuple(mark_rule_dependence(results, depends))


def _result(
    preset: Preset | None, finished: _Finished, runs: Sequence[Any], records: Sequence[Any]
) -> ExperimentResult:
    """One experiment's :class:`ExperimentResult` (its ``step_costs`` left to the caller)."""
    rows = _rows(preset, finished)
    selections = [row.selection for row in rows]
    comparisons = _comparisons(preset, finished, selections)
    return ExperimentResult(
        name=finished.name,
        citation=preset.citation if preset else "",
        figure=preset.figure if preset else FigureSpec(),
        rules=tuple(dict.fromkeys(s.rule for s in selections)),
        rows=tuple(rows),
        comparisons=tuple(comparisons),
        setup=_setup(preset, runs, records),
        paper_summary=preset.paper_summary if preset else "",
        notes=" ".join(preset.fidelity) if preset else "",
        wall_seconds=_wall_seconds(records),
        n_runs=len(runs),
        n_unfinished=sum(r.status != "done" for r in runs),
        claims=tuple(_claims_under_every_rule(finished)),
        departures=_departures(preset, runs),
        in_paper=preset.in_paper if preset else True,
        steps_per_epoch=tuple(sorted(steps_per_epoch(runs).items())),
        sensitivity=_sensitivity(finished) if finished.records else None,
        axes=_axes(preset, finished, selections, comparisons),
    )


_ENVIRONMENT_FIRST = ("code_version", "torch", "python", "device", "threads", "platform")
# Metadata that describes the experiment rather than the machine (shown per experiment instead).
_NOT_ENVIRONMENT = frozenset(
    [
        "experiment",
        "citation",
        "dataset",
        "dataset_requested",
        "dataset_source",
        "quick",
        "train_size",
        "steps",
    ]
)


def environment(runs: Sequence[Any]) -> list[tuple[str, str]]:
    """(key, distinct values) of the runs' metadata, the usual keys first."""
    values: dict[str, dict[str, None]] = defaultdict(dict)
    for run in runs:
        for key, value in flat_config(_json(run.metadata_json)).items():
            if key not in _NOT_ENVIRONMENT:
                values[key][value if isinstance(value, str) else json.dumps(value)] = None

    def order(key: str) -> tuple[int, str]:
        leaf = key.rsplit(".", 1)[-1]
        first = (
            _ENVIRONMENT_FIRST.index(leaf)
            if leaf in _ENVIRONMENT_FIRST
            else len(_ENVIRONMENT_FIRST)
        )
        return first, key

    return [(key, ", ".join(values[key])) for key in sorted(values, key=order)]
