"""What an experiment ran, beside what the paper (or the preset) ran: the setup table, the
settings that depart from the paper's, the configs at the preset's values, the training wall
time, each activation's time per step, and the machine the runs ran on.

Pure functions of the runs, their records and the preset, used by :func:`gelus.report.analysis.
analyse`; the renderers only format what they return.
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
    plugin_for_task,
    resolve_configs,
    stored_defaults,
)
from gelus.experiments.presets import Preset
from gelus.experiments.selection import run_configs, variant_order

__all__ = [
    "StepCost",
    "departures",
    "environment",
    "preset_configs",
    "setup_table",
    "step_costs",
    "steps_per_epoch",
    "wall_seconds",
]


def _json(text: Any) -> dict[str, Any]:
    parsed = json.loads(text) if isinstance(text, str) and text.strip() else {}
    return parsed if isinstance(parsed, dict) else {}


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


# Keys the dataset decides, not a departure from the paper (the bookkeeping keys, which do not
# change what a run measures, are left out of its config already: identity_keys).
_NOT_DEPARTURES = ("dataset",)


def _preset_points(preset: Preset) -> list[dict[str, Any]]:
    """The preset's own configs, as the keys that identify a run: one per point of its default
    axes (``Preset.axes``: transformer-scale's sizes), or its one config."""
    return [
        identity_keys(stored_defaults(flat_config(config_to_dict(config))))
        for _, config, _ in resolve_configs(preset.config, (), (), preset.axes)
    ]


def preset_configs(preset: Preset | None, configs: Mapping[str, Any]) -> frozenset[str]:
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


def departures(preset: Preset | None, runs: Sequence[Any]) -> tuple[str, ...]:
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


def wall_seconds(records: Sequence[Any]) -> float:
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


_GELU_FORMS = {"none": "exact"}  # the GELU forms (approximate=) as the setup table says them


def _described(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The setup rows the run's engine words itself (``EnginePlugin.describe_setup``), found by
    the config's ``task``; {} where no registered engine has it."""
    plugin = plugin_for_task(config.get("task"))
    return plugin.describe_setup(config, metadata) if plugin is not None else {}


def setup_table(
    preset: Preset | None, runs: Sequence[Any], records: Sequence[Any] = ()
) -> tuple[tuple[str, str, str], ...]:
    configs = [flat_config(_json(r.config_json)) for r in runs]
    metadata = [_json(r.metadata_json) for r in runs]
    paper = dict(preset.paper_setup) if preset else {}
    seeds = {r.seed for r in runs}
    described = [_described(c, m) for c, m in zip(configs, metadata, strict=True)]

    def config(key: str) -> str:
        return _distinct([c.get(key) for c in configs])

    ours = {
        "dataset": _distinct([m.get("dataset") for m in metadata]) or config("dataset"),
        "training set": _distinct(
            [
                d.get("training set", m.get("train_size"))
                for d, m in zip(described, metadata, strict=True)
            ]
        ),
        "model": _distinct([d.get("model") for d in described]),
        "optimizer": _distinct([d.get("optimizer") for d in described]),
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
    }
    for aspect in dict.fromkeys(a for d in described for a in d if a not in ours):
        ours[aspect] = _distinct([d.get(aspect) for d in described])  # an engine's own aspects
    ours |= _model_sizes(records)
    aspects = list(dict.fromkeys([*paper, *(k for k, v in ours.items() if v)]))
    return tuple((a, paper.get(a, "—"), ours.get(a) or "not recorded") for a in aspects)


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
