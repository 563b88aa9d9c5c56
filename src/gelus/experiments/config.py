"""Experiment configs: overrides, range checks, the stored shape and the identity hash.

Each engine has its own config, a frozen dataclass with one commented default per line holding
only what that engine reads (:mod:`gelus.experiments.engines`: ``mlp/config.py``,
``cnn/config.py``, ``transformer/config.py``, ``vit/config.py``), so a key an engine does not read
does not exist for its presets; its engine (:func:`gelus.experiments.config.plugin_for`) adds its
range checks and the shape it is stored in; the registry of engines, keyed by config type
(:func:`register_engine`, :func:`plugin_for`), is here. An override is ``key=value`` with a dotted key into
the config (``optim.lr=1e-3``, ``train.epochs=10``, ``activations=gelu,relu``); tuple fields take
comma-separated values. An unknown key or a value of the wrong type is a :class:`ConfigError`
that lists the valid keys; :func:`validate` then checks ranges. Activation names are resolved
elsewhere (:mod:`gelus.experiments.activation_spec`): here they are strings.

An override may name several values of one key, an axis (:func:`expand_axes`): one config per
combination of the axes' values, each with its own config hash, the sweep axes (lrs, seeds,
settings, activations) swept inside each. Values are separated by ``;`` for any key, and by ``,``
for a key that takes one value (``model.init=gpt2,torch``, ``optim.warmup=0,0.05``); a tuple
key's commas separate its items, so its axis takes ``;`` (``model.hidden=128,128;256,256``).
A joint axis moves several one-value keys together, one config per point, not their product:
the keys comma-separated, each point's values comma-separated in the same order, the points
``;``-separated (``model.d_model,model.layers=48,2;80,3;128,4``: three configs).
"""

import dataclasses
import difflib
import hashlib
import itertools
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from gelus._common import APPROXIMATIONS
from gelus.experiments.errors import ConfigError

__all__ = [
    "BOOKKEEPING_KEYS",
    "LIMITS",
    "SWEEP_KEYS",
    "TRAINERS",
    "ConfigError",
    "ExperimentConfig",
    "apply_overrides",
    "config_from_stored",
    "config_hash",
    "config_keys",
    "config_to_dict",
    "drivers",
    "expand_axes",
    "failed_checks",
    "flat_config",
    "identity_keys",
    "joint_points",
    "override_keys",
    "plugin_for",
    "plugin_for_task",
    "plugins",
    "positive_finite",
    "register_engine",
    "resolve_configs",
    "stored_defaults",
    "trainer_for",
    "validate",
    "with_default_axes",
]

# Upper bounds on counts: beyond these a value is a typo, and planning it would exhaust memory.
LIMITS = {"seeds": 10_000, "epochs": 100_000, "runs": 1_000_000, "configs": 1_000}
# Any registered engine's config (gelus.experiments.config.plugin_for gives its engine).
ExperimentConfig = Any

_PLUGINS: dict[type, Any] = {}  # config type -> its engine (an EnginePlugin), as registered
_TRAINERS: dict[str, type] = {}  # Job.engine -> trainer class
TRAINERS: Mapping[str, type] = types.MappingProxyType(_TRAINERS)  # read-only view


def register_engine(plugin: Any) -> Any:
    """Add ``plugin``'s engine (a :class:`~gelus.experiments.engine.EnginePlugin`): its config
    type and its trainers' names. An engine of the same
    config type (by its module and name: a module imported again) is replaced; a trainer name of
    another engine is a ValueError. Returns ``plugin``."""
    key = _qualified(plugin.config_type)
    for kind in [k for k in _PLUGINS if _qualified(k) == key]:
        for name in _PLUGINS.pop(kind).trainers:
            _TRAINERS.pop(name, None)
    if taken := sorted(set(plugin.trainers) & set(_TRAINERS)):
        raise ValueError(f"engine names {taken} are registered already, by other engines")
    _PLUGINS[plugin.config_type] = plugin
    _TRAINERS.update(plugin.trainers)
    return plugin


def _qualified(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def plugins() -> tuple[Any, ...]:
    """Every registered engine, in registration order."""
    return tuple(_PLUGINS.values())


def plugin_for(config: Any) -> Any:
    """The engine of ``config`` (by its type, or the nearest registered base class)."""
    for kind in type(config).__mro__:
        if (plugin := _PLUGINS.get(kind)) is not None:
            return plugin
    raise TypeError(
        f"no engine is registered for a {type(config).__name__} config; register one with "
        "gelus.experiments.config.register_engine"
    )


def plugin_for_task(task: Any) -> Any:
    """The engine whose configs' ``task`` is ``task`` (how a stored run's config names its
    engine); None where no registered engine has it."""
    return next((p for p in _PLUGINS.values() if task in p.tasks), None)


def trainer_for(job_engine: str) -> type:
    """The trainer class a job's ``engine`` names."""
    try:
        return _TRAINERS[job_engine]
    except KeyError:
        raise KeyError(
            f"no trainer {job_engine!r} is registered; registered: {', '.join(_TRAINERS)}"
        ) from None


# Sweep axes: each value is its own run, so they are not part of a run's identity hash.
SWEEP_KEYS = ("activations", "optim.lr", "train.seeds", "train.keep")
# Keys that do not change a run's results (``train.stack``: a run trained stacked equals the same
# run trained alone to float tolerance).
BOOKKEEPING_KEYS = (
    "train.checkpoint_every",
    "train.eval_batch_size",
    "train.keep_models",
    "train.stack",
)
# Keys users reach for that live elsewhere, for the "did you mean" of an unknown key.
_SEE_ALSO = {
    "optim.eps": "cnn.adam_eps",
    "optim.beta1": "cnn.beta1",
    "optim.beta2": "cnn.beta2",
    "train.keep": "cnn.dropout",
    "train.compile": "cnn.compile",
    "train.dtype": "cnn.amp_dtype",
    "train.eval_batch_size": "cnn.eval_batch_size",
    "train.eval_train_subset": "cnn.train_eval_size",
    "model.gelu_form": "model.approximate",
    "model.d": "model.d_model",
    "model.n_layer": "model.layers",
    "model.block_size": "model.context",
    "train.steps": "train.steps_per_epoch",
    "cnn.gelu_form": "model.approximate",
}


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as nested plain dicts and lists (JSON-ready): a registered engine's config in the
    shape its engine stores and hashes it (``EnginePlugin.config_to_dict``), any other dataclass
    field by field."""
    plugin = next((p for p in plugins() if isinstance(config, p.config_type)), None)
    if plugin is not None:
        return plugin.config_to_dict(config)
    return json.loads(json.dumps(dataclasses.asdict(config)))


# Bump when the training arithmetic or random streams change (e.g. how dropout masks are drawn):
# a run's identity then changes, so old checkpoints and records are never resumed into new ones.
ENGINE_VERSION = 2


def config_hash(config: ExperimentConfig) -> str:
    """SHA-256 (first 12 hex digits) of the config without sweep axes and bookkeeping keys.

    Two runs with equal hash, activation, setting, lr and seed are the same run: extending a sweep
    (more seeds, another lr) reuses the runs already done. ``ENGINE_VERSION`` is part of the hash.
    """
    flat = identity_keys(flat_config(config_to_dict(config)))
    flat["engine_version"] = ENGINE_VERSION
    text = json.dumps(flat, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def flat_config(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flat_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def stored_defaults(flat: Mapping[str, Any]) -> dict[str, Any]:
    """A stored flat config with the keys its engine stores only when not at their defaults
    (an engine's ``omitted_defaults``: ``{"model.init": "gpt2"}`` for the transformers, whose
    older runs were recorded before the key existed) filled in at those defaults, so configs
    that differ in such a key are labelled by both values. The engine is the one whose ``tasks``
    hold the config's ``task``; a config of no registered engine is returned as it is."""
    task = flat.get("task")
    plugin = next((p for p in plugins() if task in p.tasks), None)
    return {**getattr(plugin, "omitted_defaults", {}), **flat}


def identity_keys(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat config without its sweep axes and bookkeeping keys: what a config hash stands for."""
    return {k: v for k, v in flat.items() if k not in SWEEP_KEYS + BOOKKEEPING_KEYS}


def config_keys(config: Any, prefix: str = "") -> list[str]:
    """Every overridable dotted key of a config dataclass (nested dataclasses expanded)."""
    keys = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            keys.extend(config_keys(value, f"{prefix}{f.name}."))
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _quote(text: str) -> str:
    """``text`` for a message: at most its first 60 characters."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"


def _parse_scalar(text: str, kind: type, key: str) -> Any:
    text = text.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true or false, got {_quote(text)}")
    if kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            raise ConfigError(f"{key}: expected {kind.__name__}, got {_quote(text)}") from None
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{key}: expected a finite number, got {_quote(text)}")
        return value
    if kind is str:
        return text
    raise ConfigError(f"{key}: cannot be set from the command line")


def _parse_value(text: str, annotation: Any, key: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # X | None
        if text.strip().lower() in ("none", "null", ""):
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _parse_value(text, inner, key)
    if origin is tuple:
        item_type = args[0]
        items = [part for part in text.split(",") if part.strip()]
        values = tuple(_parse_scalar(part, item_type, key) for part in items)
        if len(args) == 2 and args[1] is Ellipsis:
            return values
        if len(values) != len(args):
            raise ConfigError(
                f"{key}: expected {len(args)} comma-separated values, got {_quote(text)}"
            )
        return values
    return _parse_scalar(text, annotation, key)


def _unknown_key(key: str, all_keys: list[str]) -> ConfigError:
    close = [_SEE_ALSO[key]] if _SEE_ALSO.get(key) in all_keys else []
    close = close or difflib.get_close_matches(key, all_keys, n=2)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return ConfigError(f"unknown config key {_quote(key)}{hint}; valid keys: {', '.join(all_keys)}")


def _set(config: Any, path: list[str], text: str, full_key: str, all_keys: list[str]) -> Any:
    names = {f.name: f for f in dataclasses.fields(config)}
    name = path[0]
    if name not in names or (len(path) == 1 and dataclasses.is_dataclass(getattr(config, name))):
        raise _unknown_key(full_key, all_keys)
    value = getattr(config, name)
    if len(path) > 1:
        if not dataclasses.is_dataclass(value):
            raise _unknown_key(full_key, all_keys)
        return dataclasses.replace(
            config, **{name: _set(value, path[1:], text, full_key, all_keys)}
        )
    hints = typing.get_type_hints(type(config))
    try:
        return dataclasses.replace(config, **{name: _parse_value(text, hints[name], full_key)})
    except ConfigError:
        raise
    except ValueError as error:  # a network config's own range check
        raise ConfigError(f"{full_key}: {error}") from None


AXIS_SEPARATOR = ";"  # between an axis' values, for any key (a tuple key's "," separates items)


def _annotation(config: Any, key: str) -> Any:
    """The type annotation of dotted ``key`` in ``config``; None for a key it does not have."""
    *path, name = key.split(".")
    for part in path:
        config = getattr(config, part, None)
        if not dataclasses.is_dataclass(config):
            return None
    if not dataclasses.is_dataclass(config) or dataclasses.is_dataclass(getattr(config, name, 0)):
        return None
    return typing.get_type_hints(type(config)).get(name)


def _takes_one_value(annotation: Any) -> bool:
    """Whether a key of this annotation holds one value (not a tuple), ``X | None`` included."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    return typing.get_origin(annotation) is not tuple


def _axis_values(config: Any, key: str, text: str) -> list[str] | None:
    """The values of an override that is an axis (several values of one key), else None."""
    annotation = _annotation(config, key)
    if annotation is None:  # an unknown key: apply_overrides names it
        return None
    separator = (
        AXIS_SEPARATOR if AXIS_SEPARATOR in text or not _takes_one_value(annotation) else ","
    )
    values = [part.strip() for part in text.split(separator)] if separator in text else None
    if values is None:
        return None
    if key in SWEEP_KEYS:
        raise ConfigError(
            f"{key}: swept inside each config already (a run per activation, setting, lr and "
            f"seed), so it is no axis of configs; give it without {AXIS_SEPARATOR!r} (a tuple's "
            "values comma-separated, a count one number)"
        )
    if key in BOOKKEEPING_KEYS:
        raise ConfigError(f"{key}: changes no result, so it is no axis of configs; give one value")
    if len(set(values)) < len(values) or "" in values:
        raise ConfigError(
            f"{key}: an axis' values must be distinct and non-empty, got {_quote(text)}"
        )
    return values


JOINT_SEPARATOR = ","  # between a joint axis' keys, and between the values of one of its points


def override_keys(override: str) -> tuple[str, ...]:
    """The keys an override sets: one, or a joint axis' several (``"a.b,c.d=1,2"`` ->
    ``("a.b", "c.d")``)."""
    key = override.partition("=")[0]
    return tuple(part.strip() for part in key.split(JOINT_SEPARATOR))


def joint_points(config: Any, override: str) -> list[tuple[str, ...]]:
    """The ``key=value`` overrides of each point of a joint axis ``k1,k2=v1,v2;w1,w2`` (keys that
    move together, one config per point): ``[("k1=v1", "k2=v2"), ("k1=w1", "k2=w2")]``. Each key
    must take one value (not a tuple) and be no sweep axis or bookkeeping key; each point gives one
    value per key; the points are distinct. ConfigError naming the key or the point otherwise."""
    text, values = override.partition("=")[::2]
    keys = override_keys(override)
    all_keys = config_keys(config)
    for key in keys:
        annotation = _annotation(config, key)
        if annotation is None:
            raise _unknown_key(key, all_keys)
        if not _takes_one_value(annotation):
            raise ConfigError(
                f"{key}: a tuple, so it cannot move in the joint axis {_quote(text)} (its values "
                "would be comma-separated too); give it its own --set"
            )
        if key in SWEEP_KEYS + BOOKKEEPING_KEYS:
            raise ConfigError(
                f"{key}: a sweep axis or a bookkeeping key, so it is no axis of configs; give it "
                f"its own --set, outside the joint axis {_quote(text)}"
            )
    if len(set(keys)) < len(keys):
        raise ConfigError(f"{_quote(text)}: a joint axis names each key once")
    points = [point.strip() for point in values.split(AXIS_SEPARATOR)]
    overrides = []
    for number, point in enumerate(points, 1):
        parts = [part.strip() for part in point.split(JOINT_SEPARATOR)]
        if len(parts) != len(keys) or "" in parts:
            example = AXIS_SEPARATOR.join(
                ",".join(f"{chr(97 + k)}{i}" for k in range(len(keys))) for i in (1, 2)
            )
            raise ConfigError(
                f"{text.strip()}: point {number} ({_quote(point)}) gives {len(parts)} value(s) for "
                f"the {len(keys)} keys {', '.join(keys)}: give one value per key, in their order, "
                f"the points separated by {AXIS_SEPARATOR!r} ({text.strip()}={example})"
            )
        overrides.append(tuple(f"{key}={part}" for key, part in zip(keys, parts, strict=True)))
    if len(set(overrides)) < len(overrides):
        raise ConfigError(
            f"{text.strip()}: a joint axis' points must be distinct, got {_quote(values)}"
        )
    return overrides


def _choices(config: Any, override: str) -> list[tuple[str, ...]]:
    """The overrides of each value of ``override``: several for an axis, one for one value."""
    key, sep, text = override.partition("=")
    if sep and JOINT_SEPARATOR in key:
        return joint_points(config, override)
    values = _axis_values(config, key.strip(), text) if sep else None
    return [(f"{key.strip()}={v}",) for v in values] if values else [(override,)]


def expand_axes(config: Any, overrides: typing.Iterable[str]) -> list[tuple[str, ...]]:
    """The override lists of each config ``overrides`` ask for: one per combination of the axes'
    values (the first axis varying slowest), each axis replaced by one ``key=value``; ``[overrides]``
    when there is no axis. An axis is an override of several values of one key: ``;``-separated
    for any key, ``,``-separated for a key that takes one value. Sweep axes (``optim.lr``,
    ``activations``, ``train.seeds``, ``train.keep``) are swept inside each config and bookkeeping
    keys change no result, so neither is an axis (ConfigError). A joint axis
    (:func:`joint_points`) is one axis: its keys move together.

    >>> expand_axes(PRESETS["transformer-lm"].config, ["model.init=gpt2,torch", "train.epochs=2"])
    [('model.init=gpt2', 'train.epochs=2'), ('model.init=torch', 'train.epochs=2')]
    """
    choices = [_choices(config, override) for override in overrides]
    combinations = [sum(parts, ()) for parts in itertools.product(*choices)]
    if len(combinations) > LIMITS["configs"]:
        raise ConfigError(
            f"{len(combinations):,} configs asked for, more than {LIMITS['configs']:,}; give the "
            "axes fewer values"
        )
    return combinations


def apply_overrides(config: Any, overrides: typing.Iterable[str]) -> Any:
    """``config`` with each ``key=value`` override applied (dotted keys, tuples comma-separated).

    >>> apply_overrides(PRESETS["mnist-classification"].config, ["optim.lr=1e-3"]).optim.lr
    (0.001,)
    """
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.strip()
        if sep and JOINT_SEPARATOR in key:  # a joint axis of one point: its keys, each set
            points = joint_points(config, override)
            if len(points) > 1:
                raise ConfigError(
                    f"{key}: a joint axis of {len(points)} points is {len(points)} configs; "
                    "expand_axes gives each its overrides"
                )
            config = apply_overrides(config, points[0])
            continue
        all_keys = config_keys(config)
        if not sep or not key:
            raise ConfigError(
                f"override {_quote(override)} is not key=value; valid keys: {', '.join(all_keys)}"
            )
        config = _set(config, key.split("."), text, key, all_keys)
    return config


def _override_text(value: Any) -> str:
    """A stored (JSON) value as the text of an override: lists comma-separated, None as none."""
    if isinstance(value, list | tuple):
        return ",".join(map(_override_text, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


def config_from_stored(config: Any, flat: Mapping[str, Any]) -> Any:
    """``config`` (e.g. a preset's) with a stored run's flat values applied: the config object
    the run was made with, as far as ``config`` has its keys (a stored key the config does not
    have, e.g. ``quick``, is left out). A value of the wrong type is a :class:`ConfigError`.

    >>> flat = {"model.init": "torch", "train.epochs": 2}
    >>> config_from_stored(PRESETS["transformer-lm"].config, flat).train.epochs
    2
    """
    keys = set(config_keys(config))
    overrides = [f"{k}={_override_text(v)}" for k, v in flat.items() if k in keys]
    return apply_overrides(config, overrides)


def with_default_axes(
    axes: typing.Sequence[str], overrides: typing.Sequence[str], replaced: typing.Sequence[str] = ()
) -> tuple[str, ...]:
    """``overrides`` after the default ``axes`` (a preset's ``axes``) that neither they nor
    ``replaced`` (the overrides the command's other options stand for) set a key of: a command's
    ``--set model.d_model=64`` replaces the axis ``model.d_model,model.layers=48,2;128,4``."""
    given = {key for override in (*overrides, *replaced) for key in override_keys(override)}
    kept = tuple(axis for axis in axes if given.isdisjoint(override_keys(axis)))
    return (*kept, *overrides)


def resolve_configs(
    config: Any,
    fixed: typing.Sequence[str],
    overrides: typing.Sequence[str],
    default_axes: typing.Sequence[str] = (),
) -> list[tuple[tuple[str, ...], Any, Any]]:
    """(axis overrides, config, its engine) of each config a command asks for: one per
    combination of the axes among ``overrides`` and the ``default_axes`` they leave
    (:func:`with_default_axes`, :func:`expand_axes`; one when there is none), ``config`` with the
    ``fixed`` overrides (which hold no axis: ``--quick``'s, the explicit counts) and then that
    combination applied (:func:`apply_overrides`), validated (:func:`validate`), with its engine
    (:func:`plugin_for`). The first ConfigError is raised as it is (the caller names the
    experiment)."""
    resolved = []
    overrides = with_default_axes(default_axes, overrides, fixed)
    for combination in expand_axes(config, overrides):
        applied = apply_overrides(config, [*fixed, *combination])
        validate(applied)
        resolved.append((combination, applied, plugin_for(applied)))
    return resolved


def positive_finite(values) -> bool:
    """Whether every value is a finite positive number (a range check of many configs)."""
    return all(math.isfinite(v) and v > 0 for v in values)


def _shared_checks(config: ExperimentConfig) -> list[tuple[bool, str, str]]:
    seeds, epochs = LIMITS["seeds"], LIMITS["epochs"]
    tasks = [task for plugin in plugins() for task in plugin.tasks]
    return [
        (config.task in tasks, "task", f"one of {', '.join(tasks)}"),
        (len(config.activations) > 0, "activations", "at least one name"),
        (
            config.model.approximate in APPROXIMATIONS,
            "model.approximate",
            f"one of {', '.join(APPROXIMATIONS)}",
        ),
        (
            len(config.optim.lr) > 0 and positive_finite(config.optim.lr),
            "optim.lr",
            "finite positive learning rates",
        ),
        (1 <= config.train.epochs <= epochs, "train.epochs", f"from 1 to {epochs:,}"),
        (config.train.batch_size >= 1, "train.batch_size", "at least 1"),
        (1 <= config.train.seeds <= seeds, "train.seeds", f"from 1 to {seeds:,}"),
    ]


def failed_checks(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(key, expected) of each range check ``config`` fails, in the order :func:`validate` makes
    them: the shared ones, then its engine's (``EnginePlugin.checks``), then that its task is one
    of its engine's. A command with its own flags for config keys (e.g. ``gelus bench``) names
    its flags."""
    plugin = plugin_for(config)
    own_task = (config.task in plugin.tasks, "task", f"one of {', '.join(plugin.tasks)}")
    checks = [*_shared_checks(config), *plugin.checks(config), own_task]
    return [(key, expected) for ok, key, expected in checks if not ok]


def validate(config: ExperimentConfig) -> None:
    """Check ranges; raise ConfigError naming the key and the valid values."""
    for key, expected in failed_checks(config)[:1]:
        raise ConfigError(f"{key}: invalid value; expected {expected}")


def drivers(terms: Mapping[tuple[str, ...], float]) -> tuple[str, ...]:
    """The config keys of a memory estimate's ``terms`` ({keys: bytes}), the largest term's first,
    each once: what ``EnginePlugin.memory_bytes`` names as driving it."""
    ordered = sorted(terms, key=terms.__getitem__, reverse=True)
    return tuple(dict.fromkeys(key for keys in ordered for key in keys))
