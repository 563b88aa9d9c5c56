"""A command's runs, resolved once: :func:`resolve_runs` turns its options into frozen Runs.

A command whose overrides hold axes (several values of one key: ``--set model.init=gpt2,torch``)
asks for one config per combination of their values: one :class:`Run` each, each with its own
config hash (its lr chosen on validation by the summary and the report, which choose per config);
:func:`resolve_run` is the one Run of a command without axes.

Everything the user can get wrong (experiment, activation, dataset, config keys and values, counts,
device, workers, memory) is checked here, before any job starts, and raised as a
:class:`~gelus.experiments.errors.SettingError` naming the parameter (a
:class:`~gelus.experiments.errors.ConfigError` for a config key): this is the one place that
raises setting errors. It is one straight pipeline, each step in the module that owns its subject
and entered once (:func:`_runs`): the configs (:func:`~gelus.experiments.config.resolve_configs`),
the activations (:func:`~gelus.experiments.activation_spec.engine_activations`), the device and
the runs checked against it (:func:`~gelus.experiments.device.jobs_device`,
:func:`~gelus.experiments.device.check_jobs`), the dataset
(:func:`~gelus.experiments.data_source.resolve_dataset`), its data
(:func:`~gelus.experiments.datasets.resolve_data`), the records
(:func:`~gelus.experiments.records.read_state`). Planning
(:func:`gelus.experiments.plan.plan_run`), execution (:mod:`gelus.experiments.runner`), step
timing (:func:`gelus.experiments.step_times.time_steps`) and the command line's summary then take
the ``Run`` as it is.
"""

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gelus.experiments.activation_spec import ActivationSpec, engine_activations
from gelus.experiments.config import (
    LIMITS,
    ConfigError,
    ExperimentConfig,
    config_hash,
    config_to_dict,
    plugin_for,
    resolve_configs,
)
from gelus.experiments.data_source import resolve_dataset
from gelus.experiments.datasets import resolve_data
from gelus.experiments.device import (
    check_jobs,
    check_memory,
    default_workers,
    environment_metadata,
    jobs_device,
    run_count,
)
from gelus.experiments.engine import EnginePlugin
from gelus.experiments.errors import SettingError
from gelus.experiments.presets import PRESETS, Preset
from gelus.experiments.records import read_state
from gelus.experiments.sweep import Executor

__all__ = [
    "Run",
    "RunOptions",
    "find_preset",
    "resolve_config",
    "resolve_device",
    "resolve_run",
    "resolve_runs",
]


@dataclass(frozen=True)
class RunOptions:
    """What a command asks for, as given (``gelus run``'s flags; ``run_experiment``'s arguments).

    ``activations`` (default: the preset's): registry names or ``[label=]module:attribute``
    strings (``activation_texts`` turns the Python API's objects into these).
    """

    experiment: str
    out_dir: str | os.PathLike
    activations: Sequence[str] | None = None  # as ``activation_texts`` gives them
    seeds: int | None = None
    epochs: int | None = None
    overrides: Sequence[str] = ()
    workers: int | None = None
    data_dir: str | os.PathLike | None = None
    quick: bool = False
    dataset: str | None = None
    verify: bool = True
    device: str = "cpu"
    threads: int = 1
    step_times: bool = True


@dataclass(frozen=True)
class Run:
    """One command's run, resolved and checked: what planning, execution, step timing and the
    summary read. ``config`` names the dataset used, ``data`` is that dataset (loaded once),
    ``plugin`` the config's engine and ``engine`` the jobs' trainer (a stacked one where the runs
    stack);
    ``done`` and ``timed`` are what the records held when it was resolved: the runs done, and the
    activations whose steps are timed at this config and device."""

    preset: Preset
    config: ExperimentConfig
    config_hash: str
    config_json: str  # the config as every run records it
    activations: tuple[ActivationSpec, ...]
    settings: Mapping[str, tuple[tuple[str, float], ...]]  # activation -> (setting, keep) of each
    plugin: EnginePlugin = field(repr=False, compare=False)  # what the config's engine answers
    engine: str
    data: Any = field(repr=False, compare=False)
    data_dir: str | None
    verify: bool
    device: str
    workers: int
    threads: int
    out_dir: Path
    train_size: int  # samples one run trains on
    metadata: Mapping[str, Any] = field(repr=False)  # stamped on every run
    done: frozenset[str] = field(repr=False)
    timed: frozenset[str] = field(repr=False)
    step_times: bool = True
    axes: tuple[str, ...] = ()  # this config's values of the command's axes, where it has several

    @property
    def name(self) -> str:
        return self.preset.name

    @property
    def label(self) -> str:
        """The preset's name, with this config's values of the axes where there are several:
        ``transformer-scale [model.d_model=48, model.layers=2]``."""
        return f"{self.name} [{', '.join(self.axes)}]" if self.axes else self.name


def resolve_runs(
    options: RunOptions, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> tuple[Run, ...]:
    """The :class:`Run` of each config ``options`` ask for, every setting checked (SettingError
    or ConfigError naming it) before anything is written: one per combination of the values of
    the axes among its overrides and the preset's default axes that they leave
    (:func:`~gelus.experiments.config.with_default_axes`,
    :func:`~gelus.experiments.config.resolve_configs`; one Run when there is none), each with its
    own config hash. ``executor`` resolves the device and the default workers where the jobs run
    elsewhere (its ``resolve_device`` and ``workers``); ``say`` is told which dataset is loaded,
    before it is. Two combinations that come to the same config
    (a dataset replaced by the same substitute) are a ConfigError naming both."""
    preset = find_preset(options.experiment)
    _check_counts(options)
    runs, seen = [], {}
    for overrides, run in _runs(options, preset, executor, say):
        if (other := seen.get(run.config_hash)) is not None:
            ours, theirs = (
                " ".join(sorted(set(a) - set(b)))
                for a, b in [(overrides, other), (other, overrides)]
            )
            raise ConfigError(
                f"{preset.name}: --set {ours} and --set {theirs} give the same config "
                f"({run.config_hash}); drop one of the two values"
            )
        seen[run.config_hash] = overrides
        runs.append(run)
    combinations = list(seen.values())  # several configs: each names its values of the axes
    axes = [
        tuple(o for o in c if any(o not in other for other in combinations)) for c in combinations
    ]
    return tuple(dataclasses.replace(run, axes=a) for run, a in zip(runs, axes, strict=True))


def _runs(
    options: RunOptions,
    preset: Preset,
    executor: Executor | None,
    say: Callable[[str], None] | None,
) -> Iterator[tuple[tuple[str, ...], Run]]:
    """(axis overrides, Run) of each config, the steps in order, each in the module that owns
    its subject: the configs (config.py), their activations with their settings
    (activation_spec.py), the device, its stamp and each config's runs checked to fit it
    (device.py), then per config its data (datasets.py), its hash (config.py) and its records
    (records.py: the database read once)."""
    fixed = option_overrides(preset, options)  # the overrides the flags stand for: no axes
    try:
        configs = resolve_configs(preset.config, fixed, options.overrides, preset.axes)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    asked = [engine_activations(preset.name, config, plugin) for _, config, plugin in configs]
    device = jobs_device(options.device, executor)
    environment = environment_metadata(device, options.threads)
    data_dir = None if options.data_dir is None else str(options.data_dir)
    out_dir, here = Path(options.out_dir), not hasattr(executor, "resolve_device")
    workers = getattr(executor, "workers", None) if options.workers is None else options.workers
    for (overrides, config, plugin), (specs, settings, sources) in zip(configs, asked, strict=True):
        engine = check_jobs(preset.name, config, plugin, settings, device, options.workers, here)
        loaded = _load(preset, config, plugin, data_dir, options, say)
        config = loaded.config
        if here:  # again with the data: they cap the evaluation batch
            memory, runs = plugin.memory_config(config, loaded.data), run_count(config, settings)
            check_memory(preset.name, memory, plugin, engine, device, options.workers, runs)
        if (problem := plugin.device_problem(config, device)) is not None:  # fp16 on a CPU
            raise SettingError(*problem)
        chash, config_json = config_hash(config), json.dumps(config_to_dict(config), sort_keys=True)
        recorded = read_state(out_dir, preset.name, chash, device)  # the database, opened once
        if (edited := recorded.edited_code(preset.name, sources)) is not None:
            raise SettingError("activations", f"{preset.name}: {out_dir} {edited}")
        metadata = {"experiment": preset.name, "citation": preset.citation, "quick": options.quick}
        metadata |= {"activation_sources": sources} if sources else {}  # the user's code
        run = Run(
            preset=preset,
            config=config,
            config_hash=chash,
            config_json=config_json,
            activations=specs,
            settings=settings,
            plugin=plugin,
            engine=engine,
            data=loaded.data,
            data_dir=data_dir,
            verify=options.verify,
            device=device,
            workers=default_workers(device) if workers is None else workers,
            threads=options.threads,
            out_dir=out_dir,
            train_size=loaded.train_size,
            metadata=environment | loaded.metadata | metadata,
            done=recorded.done,
            timed=recorded.timed,
            step_times=options.step_times,
        )
        yield overrides, run


def _load(preset: Preset, config, plugin, data_dir, options: RunOptions, say) -> Any:
    """The config's dataset found (data_source.py), then loaded and checked (datasets.py)."""
    found = resolve_dataset(preset, config, plugin, data_dir, options.dataset)
    return resolve_data(
        preset, config, plugin, found, data_dir, options.dataset, options.verify, say
    )


_AXIS_REFUSED = (
    "an override names several values of one key (an axis); resolve_runs resolves one Run per "
    "config"
)


def resolve_run(
    options: RunOptions, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> Run:
    """The one :class:`Run` ``options`` ask for (:func:`resolve_runs`); ConfigError where its
    overrides hold an axis (several configs)."""
    runs = resolve_runs(options, executor, say)
    if len(runs) > 1:
        raise ConfigError(f"{runs[0].name}: {_AXIS_REFUSED}")
    return runs[0]


def find_preset(name: str) -> Preset:
    """The preset called ``name``; SettingError listing the valid ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise SettingError(
            "experiment",
            f"unknown experiment {name[:60]!r}; valid experiments: {', '.join(PRESETS)}",
        ) from None


def _check_counts(options: RunOptions) -> None:
    """SettingError naming the first count out of range: seeds, epochs, workers, threads."""
    _check_count("seeds", options.seeds, 1, LIMITS["seeds"])
    _check_count("epochs", options.epochs, 1, LIMITS["epochs"])
    if options.workers is not None and options.workers < 0:
        raise SettingError(
            "workers", f"{{workers}} must be 0 (in this process) or more, got {options.workers}"
        )
    _check_count("threads", options.threads, 1, os.cpu_count() or 1)


def _check_count(parameter: str, value: int | None, low: int, high: int) -> None:
    if value is not None and value < low:
        raise SettingError(parameter, f"{{{parameter}}} must be at least {low}, got {value}")
    if value is not None and value > high:
        raise SettingError(
            parameter, f"{{{parameter}}} must be at most {high:,}, got {str(value)[:60]}"
        )


def resolve_config(
    name: str,
    *,
    activations: Sequence[str] | None = None,
    seeds: int | None = None,
    epochs: int | None = None,
    overrides: Iterable[str] = (),
    quick: bool = False,
    workers: int | None = None,
    threads: int = 1,
) -> tuple[Preset, ExperimentConfig, tuple[ActivationSpec, ...]]:
    """The preset; its config after quick overrides, the explicit arguments and ``--set``
    overrides, validated; and the config's activations resolved once (imported, built and
    probed) and checked to suit the config's engine, its runs checked on this machine's CPU:
    :func:`resolve_runs`'s checks short of the data and the records. ConfigError where the
    overrides hold an axis; a preset's own default axes (``Preset.axes``) are not applied: its
    base config (transformer-scale's largest size)."""
    options = RunOptions(
        name,
        ".",
        activations,
        seeds,
        epochs,
        tuple(overrides),
        workers,
        quick=quick,
        threads=threads,
    )
    preset = find_preset(name)
    _check_counts(options)
    fixed = option_overrides(preset, options)
    try:
        configs = resolve_configs(preset.config, fixed, options.overrides)  # not preset.axes
        if len(configs) > 1:
            raise ConfigError(_AXIS_REFUSED)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    ((_, config, plugin),) = configs
    specs, settings, _ = engine_activations(preset.name, config, plugin)
    check_jobs(preset.name, config, plugin, settings, jobs_device("cpu"), workers)
    return preset, config, specs


def option_overrides(preset: Preset, options: RunOptions) -> list[str]:
    """The overrides the options stand for: ``--quick``'s, then the explicit activations, seeds
    and epochs (before the ``--set`` ones, which win)."""
    explicit = list(preset.quick) if options.quick else []
    explicit += [f"activations={','.join(options.activations)}"] if options.activations else []
    explicit += [f"train.seeds={options.seeds}"] if options.seeds is not None else []
    explicit += [f"train.epochs={options.epochs}"] if options.epochs is not None else []
    return explicit


def resolve_device(device: str, config: ExperimentConfig, executor: Executor | None = None) -> str:
    """The device the jobs run on, "cpu" or "cuda", with "auto" meaning "cuda" when there is a GPU
    (on this machine, or in the executor's cluster when it has a ``resolve_device`` method), for
    every engine (:func:`~gelus.experiments.device.jobs_device`); SettingError for a device that
    is not there, or one the config cannot run on (its engine's ``device_problem``)."""
    resolved = jobs_device(device, executor)
    if (problem := plugin_for(config).device_problem(config, resolved)) is not None:
        raise SettingError(*problem)
    return resolved
