"""From records to what the report says: results tables, comparisons, setup differences, environment.

:func:`analyse` is a pure function of the records, the runs and an explicit random generator; the
renderers in :mod:`gelus.report.render` only format its result.
"""

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from gelus.report import sources
from gelus.report.stats import Comparison, Selection, Summary, compare_paired, select, summarize

__all__ = [
    "BASELINES",
    "ExperimentResult",
    "Missing",
    "ResultRow",
    "analyse",
    "environment",
    "flatten",
    "is_quick",
    "paper_setup",
]

BASELINES = ("relu", "elu")  # the paper compares GELU against these

# The paper's setup as the report states it (PAPER.md), matched on substrings of the experiment name.
_PAPER_SETUP: tuple[tuple[str, dict[str, str]], ...] = (
    (
        "autoencoder",
        {
            "dataset": "mnist",
            "epochs": "250 (figures; the code runs 500)",
            "runs": "3",
            "learning rates": "1e-3, 1e-4 (each shown)",
            "batch size": "64",
        },
    ),
    (
        "noise",
        {
            "dataset": "mnist",
            "epochs": "50",
            "runs": "5",
            "learning rates": "1e-3, 1e-4, 1e-5 (tuned on val)",
            "batch size": "128",
        },
    ),
    (
        "stochastic",
        {
            "dataset": "mnist / twitter-pos / timit",
            "runs": "5",
            "learning rates": "1e-3, 1e-4, 1e-5 (tuned on val)",
        },
    ),
    (
        "timit",
        {
            "dataset": "timit",
            "epochs": "30",
            "learning rates": "1e-3, 1e-4, 1e-5 (tuned on val)",
            "batch size": "64 utterances",
        },
    ),
    (
        "twitter",
        {
            "dataset": "twitter-pos",
            "epochs": "30",
            "learning rates": "1e-3, 1e-4, 1e-5 (tuned on val)",
            "batch size": "16",
        },
    ),
    (
        "cifar100",
        {
            "dataset": "cifar100",
            "epochs": "50",
            "runs": "3",
            "learning rates": "0.1 (cosine)",
            "batch size": "128",
        },
    ),
    (
        "cifar10",
        {
            "dataset": "cifar10",
            "epochs": "200",
            "runs": "3",
            "learning rates": "tuned on 5k val, retrained on 50k",
            "batch size": "100",
        },
    ),
    (
        "mnist",
        {
            "dataset": "mnist",
            "epochs": "50",
            "runs": "5",
            "learning rates": "1e-3, 1e-4, 1e-5 (tuned on val)",
            "batch size": "128",
        },
    ),
)
_GELU_FORM = "tanh approximation (every experiment)"


def paper_setup(experiment: str) -> dict[str, str]:
    """The paper's setup of ``experiment`` in a few words per aspect (empty when unknown)."""
    name = experiment.lower().replace("-", "")
    for key, setup in _PAPER_SETUP:
        if key in name:
            return {**setup, "GELU form": _GELU_FORM}
    return {}


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _values_of(configs: Sequence[Mapping[str, Any]], *leaf_names: str) -> list[str]:
    """Distinct values, in first-seen order, of config keys whose last part is in ``leaf_names``."""
    seen: dict[str, None] = {}
    for config in configs:
        for key, value in flatten(config).items():
            if key.rsplit(".", 1)[-1] in leaf_names and value not in (None, ""):
                seen[value if isinstance(value, str) else json.dumps(value)] = None
    return list(seen)


def is_quick(runs: Sequence[Any]) -> bool:
    """True when any run's config or metadata has a ``quick`` key that is true."""
    return any(
        "true" in _values_of([sources.run_config(r), sources.run_metadata(r)], "quick")
        for r in runs
    )


class ResultRow(NamedTuple):
    selection: Selection
    summary: Summary
    paper: float | None  # the paper's number for this activation and metric


class Missing(NamedTuple):
    """An experiment with no records, and how to get what it needs."""

    experiment: str
    dataset: str
    how_to_get: str


class ExperimentResult(NamedTuple):
    name: str
    citation: str
    rules: tuple[str, ...]  # the protocol in words
    rows: tuple[ResultRow, ...]
    comparisons: tuple[tuple[Comparison, float | None], ...]  # with the paper's difference if known
    setup: tuple[tuple[str, str, str], ...]  # (aspect, paper, ours)
    paper_summary: str  # the paper's result in words, where it gives no numbers
    notes: str
    wall_seconds: float
    n_runs: int


def _pairs(selections: Sequence[Selection]) -> list[tuple[Selection, Selection]]:
    """(GELU-family, baseline) pairs on the headline metric: same setting, and same lr if unselected."""
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    treatments = [s for s in headline if "gelu" in s.activation.lower()]
    baselines = [s for s in headline if s.activation.lower() in BASELINES]
    pairs = []
    for t in treatments:
        same = [b for b in baselines if b.setting == t.setting and (t.lr_selected or b.lr == t.lr)]
        if not same and len({s.setting for s in treatments if s.activation == t.activation}) == 1:
            same = [
                b for b in baselines if t.lr_selected or b.lr == t.lr
            ]  # e.g. SOI vs ReLU + dropout
        pairs.extend((t, b) for b in same)
    return pairs


def _wall_seconds(records: Sequence[Any]) -> dict[str, float]:
    """Training wall time per experiment: each run's largest cumulative ``seconds``.

    Runs trained together as one ensemble (same experiment, activation and setting) record the same
    clock, so equal times within such a group are counted once.
    """
    per_run: dict[str, tuple[tuple[str, str, str], float]] = {}
    for r in records:
        if r.metric == "seconds":
            group = (r.experiment, r.activation, r.setting)
            previous = per_run.get(r.run_id, (group, 0.0))[1]
            per_run[r.run_id] = (group, max(previous, float(r.value)))
    distinct = {(group, seconds) for group, seconds in per_run.values()}
    totals: dict[str, float] = defaultdict(float)
    for (experiment, _, _), seconds in distinct:
        totals[experiment] += seconds
    return totals


def _setup(
    experiment: str, runs: Sequence[Any], selections: Sequence[Selection], preset: Any
) -> tuple[tuple[str, str, str], ...]:
    configs = [sources.run_config(r) for r in runs]
    paper = paper_setup(experiment)
    if preset is not None and preset.dataset:
        paper.setdefault("dataset", preset.dataset)
    seeds = {r.seed for r in runs}
    ours = {
        "dataset": ", ".join(_values_of(configs, "dataset", "dataset_name")),
        "epochs": ", ".join(_values_of(configs, "epochs", "max_epochs")),
        "runs": f"{len(seeds)} seeds per activation, setting and learning rate" if seeds else "",
        "learning rates": ", ".join(f"{lr:g}" for lr in sorted({float(r.lr) for r in runs})),
        "batch size": ", ".join(_values_of(configs, "batch_size")),
        "GELU form": ", ".join(
            _values_of(configs, "approximate", "gelu_approximate", "gelu_form")
            or sorted({s.activation for s in selections if "gelu" in s.activation.lower()})
        ),
    }
    aspects = list(dict.fromkeys([*paper, *ours]))
    return tuple((a, paper.get(a, "—"), ours.get(a) or "not recorded") for a in aspects)


def analyse(
    records: Sequence[Any], runs: Sequence[Any], *, rng: np.random.Generator
) -> list[ExperimentResult]:
    """Every experiment in ``records``: the protocol's results, paired comparisons, setup, time."""
    wall = _wall_seconds(records)
    results = []
    for experiment in sorted({r.experiment for r in records}):
        selections = select(records, experiment)
        preset = sources.preset_info(experiment)
        paper = preset.paper_results if preset else {}
        rows = []
        for s in selections:
            known = paper.get(s.activation.lower()) if s.metric == "error" else None
            rows.append(ResultRow(s, summarize(list(s.values.values()), rng=rng), known))
        comparisons = []
        for t, b in _pairs(selections):
            paper_difference = None
            if (
                t.metric == "error"
                and t.activation.lower() in paper
                and b.activation.lower() in paper
            ):
                paper_difference = paper[t.activation.lower()] - paper[b.activation.lower()]
            expect_lower = (paper_difference is None or paper_difference <= 0) != (
                t.metric == "accuracy"
            )
            comparison = compare_paired(t, b, rng=rng, lower_is_better=expect_lower)
            comparisons.append((comparison, paper_difference))
        mine = [r for r in runs if r.experiment == experiment]
        results.append(
            ExperimentResult(
                name=experiment,
                citation=preset.citation if preset else "",
                rules=tuple(dict.fromkeys(s.rule for s in selections)),
                rows=tuple(rows),
                comparisons=tuple(comparisons),
                setup=_setup(experiment, mine, selections, preset),
                paper_summary=preset.paper_summary if preset else "",
                notes=preset.notes if preset else "",
                wall_seconds=wall.get(experiment, 0.0),
                n_runs=len(mine),
            )
        )
    return results


_ENVIRONMENT_FIRST = (
    "code_version",
    "git",
    "commit",
    "torch",
    "torch_version",
    "python",
    "device",
    "threads",
    "num_threads",
    "cpu",
    "platform",
)


# Metadata that describes the experiment rather than the machine (shown per experiment instead).
_NOT_ENVIRONMENT = (
    "experiment",
    "citation",
    "dataset",
    "dataset_requested",
    "dataset_source",
    "quick",
)


def environment(runs: Sequence[Any]) -> list[tuple[str, str]]:
    """(key, distinct values) of the runs' metadata, the usual keys first."""
    values: dict[str, dict[str, None]] = defaultdict(dict)
    for run in runs:
        for key, value in flatten(sources.run_metadata(run)).items():
            if key in _NOT_ENVIRONMENT:
                continue
            values[key][value if isinstance(value, str) else json.dumps(value)] = None

    def order(key: str) -> tuple[int, str]:
        leaf = key.rsplit(".", 1)[-1]
        return (
            _ENVIRONMENT_FIRST.index(leaf)
            if leaf in _ENVIRONMENT_FIRST
            else len(_ENVIRONMENT_FIRST),
            key,
        )

    return [(key, ", ".join(values[key])) for key in sorted(values, key=order)]
