"""A command's run, resolved once: :func:`resolve_run` turns the options into a frozen :class:`Run`.

A command whose overrides hold axes (several values of one key: ``--set model.init=gpt2,torch``)
asks for one config per combination of their values: :func:`resolve_runs` resolves one ``Run``
each, each with its own config hash (its lr chosen on validation by the summary and the report,
which choose per config).

Everything the user can get wrong (experiment, activation, dataset, config keys and values, counts,
device, workers) is checked here, before any job starts, and raised as a
:class:`~gelus.experiments.errors.SettingError` naming the parameter (a
:class:`~gelus.experiments.errors.ConfigError` for a config key): this is the one place that
raises setting errors. Planning (:func:`gelus.experiments.plan.plan_run`), execution
(:mod:`gelus.experiments.runner`), step timing (:func:`gelus.experiments.step_times.time_steps`)
and the command line's summary then take the ``Run`` as it is.
"""

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from gelus.experiments.activation_spec import ActivationError, ActivationSpec, resolve_activations
from gelus.experiments.config import (
    LIMITS,
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_hash,
    config_to_dict,
    expand_axes,
    flat_config,
    plugin_for,
    validate,
)
from gelus.experiments.datasets import load_dataset
from gelus.experiments.device import (
    DEVICES,
    default_workers,
    environment_metadata,
    local_device,
    memory_of,
)
from gelus.experiments.engine import EnginePlugin
from gelus.experiments.errors import SettingError, size_text
from gelus.experiments.presets import PRESETS, Preset, with_axes
from gelus.experiments.records import read_state
from gelus.experiments.sweep import Executor

__all__ = [
    "Asked",
    "Run",
    "RunOptions",
    "configure",
    "find_preset",
    "resolve_config",
    "resolve_dataset",
    "resolve_device",
    "resolve_run",
    "resolve_runs",
    "resolve_text_file",
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

    @property
    def name(self) -> str:
        return self.preset.name


def resolve_runs(
    options: RunOptions, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> tuple[Run, ...]:
    """The :class:`Run` of each config ``options`` ask for: one per combination of the values of
    the axes among its overrides and the preset's default axes that they leave
    (:func:`~gelus.experiments.presets.with_axes`, :func:`~gelus.experiments.config.expand_axes`;
    one Run when there is none), each resolved by :func:`resolve_run`. Two combinations that come to the same
    config (a dataset replaced by the same substitute) are a ConfigError naming both."""
    preset = find_preset(options.experiment)
    try:
        axes = with_axes(preset, options.overrides, _explicit(preset, options))
        combinations = expand_axes(preset.config, axes)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    runs, seen = [], {}
    for overrides in combinations:
        run = resolve_run(dataclasses.replace(options, overrides=overrides), executor, say)
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
    return tuple(runs)


def resolve_run(
    options: RunOptions, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> Run:
    """The :class:`Run` ``options`` ask for, every setting checked (SettingError or ConfigError
    naming it) before anything is written; ``executor`` resolves the device and the default
    workers where the jobs run elsewhere (its ``resolve_device`` and ``workers``). The records
    database is read once, here. ``say`` is told which dataset is loaded, before it is."""
    asked = configure(options, executor)  # the config, activations and device, checked
    preset, config, plugin, device = asked.preset, asked.config, asked.plugin, asked.device
    data_dir = None if options.data_dir is None else str(options.data_dir)
    used, source = resolve_dataset(preset, config, data_dir, options.dataset)
    if say is not None:  # before the data are read: which dataset, a stand-in named as one
        asked_for = options.dataset or config.dataset
        stand_in = (
            ""
            if used in (asked_for, config.dataset) or used.startswith("text:")
            else (f", standing in for {asked_for} (not installed)")
        )
        say(f"{preset.name}: loading {used} from {source}{stand_in}")
    config = dataclasses.replace(config, dataset=used)
    validation = plugin.holds_out_validation(config)
    data = load_dataset(used, data_dir, validation=validation, verify=options.verify)
    n_train = plugin.train_size(config, len(data.train), len(data.val or ()))  # val: or None
    _check_data(preset.name, config, plugin, data, n_train)
    if (problem := plugin.device_problem(config, device)) is not None:  # fp16 autocast on a CPU
        raise SettingError(*problem)
    chash, out_dir = config_hash(config), Path(options.out_dir)
    recorded = read_state(out_dir, preset.name, chash, device)  # the database, opened once
    if (edited := recorded.edited_code(preset.name, asked.sources)) is not None:
        raise SettingError("activations", f"{preset.name}: {out_dir} {edited}")
    workers = getattr(executor, "workers", None) if options.workers is None else options.workers
    metadata = _metadata(asked, options, config, n_train, source)
    return Run(
        preset=preset,
        config=config,
        config_hash=chash,
        config_json=json.dumps(config_to_dict(config), sort_keys=True),
        activations=asked.activations,
        settings=asked.settings,
        plugin=plugin,
        engine=plugin.job_engine(config, device),
        data=data,
        data_dir=data_dir,
        verify=options.verify,
        device=device,
        workers=default_workers(device) if workers is None else workers,
        threads=options.threads,
        out_dir=out_dir,
        train_size=n_train,
        metadata=metadata,
        done=recorded.done,
        timed=recorded.timed,
        step_times=options.step_times,
    )


def _check_data(
    name: str, config: ExperimentConfig, plugin: EnginePlugin, data: Any, n_train: int
) -> None:
    """ConfigError unless the data hold a full batch, and what the engine needs of them (a corpus
    long enough for its context)."""
    if config.train.batch_size > n_train:
        raise ConfigError(
            f"{name}: train.batch_size={config.train.batch_size} is larger than the "
            f"{n_train} training samples: no full batch, so no step per epoch; set "
            f"train.batch_size to {n_train} or less"
        )
    try:
        plugin.check_data(config, data)
    except ConfigError as error:
        raise ConfigError(f"{name}: {error.template}", error.parameter) from None


class Asked(NamedTuple):
    """What a command asks for, checked before any data is read: :func:`configure`'s answer."""

    preset: Preset
    config: ExperimentConfig  # validated
    activations: tuple[ActivationSpec, ...]  # built and probed once
    plugin: EnginePlugin  # the config's engine
    settings: dict[str, tuple[tuple[str, float], ...]]  # activation -> its settings
    sources: dict[str, dict[str, str]]  # a user activation's code, hashed
    device: str
    environment: dict[str, Any]  # code version, packages, device, threads


def configure(options: RunOptions, executor: Executor | None = None) -> Asked:
    """The preset, the device and its environment, the config (the preset's after quick overrides,
    the explicit options and ``--set`` overrides, validated), its engine, and the activations
    resolved once (imported, built and probed), checked to suit that engine, with their settings;
    the counts checked (seeds, epochs, threads, workers; the runs against ``LIMITS``)."""
    preset = find_preset(options.experiment)
    _check_count("seeds", options.seeds, 1, LIMITS["seeds"])
    _check_count("epochs", options.epochs, 1, LIMITS["epochs"])
    workers = options.workers
    if workers is not None and workers < 0:
        raise SettingError(
            "workers", f"{{workers}} must be 0 (in this process) or more, got {workers}"
        )
    _check_count("threads", options.threads, 1, os.cpu_count() or 1)
    overrides = [*_explicit(preset, options), *options.overrides]
    device = _device(options.device, executor)
    environment = environment_metadata(device, options.threads)
    try:
        if len(expand_axes(preset.config, options.overrides)) > 1:
            raise ConfigError(
                "an override names several values of one key (an axis); resolve_runs resolves "
                "one Run per config"
            )
        config = apply_overrides(preset.config, overrides)
        validate(config)
        plugin = plugin_for(config)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    try:
        specs = resolve_activations(config.activations, config.model.approximate)
        for spec in specs:
            plugin.check_activation(spec)
    except SettingError as error:
        raise ActivationError(f"{preset.name}: {error.template}") from None
    sources = {spec.label: spec.source() for spec in specs if spec.is_custom}  # user code
    settings = {spec.label: tuple(plugin.settings(config, spec)) for spec in specs}
    runs = len(config.optim.lr) * config.train.seeds * sum(map(len, settings.values()))
    if runs > LIMITS["runs"]:
        raise ConfigError(
            f"{runs:,} runs planned, more than {LIMITS['runs']:,}; use fewer seeds, learning "
            "rates or activations"
        )
    if workers is not None and workers > (most := max(os.cpu_count() or 1, runs)):
        raise SettingError(
            "workers", f"{{workers}} must be at most {most:,}, got {str(workers)[:60]}"
        )
    if not hasattr(executor, "resolve_device"):  # the jobs run here: they must fit its memory
        _check_memory(preset.name, config, plugin, device, workers, runs)
    return Asked(preset, config, specs, plugin, settings, sources, device, environment)


def _check_memory(
    name: str,
    config: ExperimentConfig,
    plugin: EnginePlugin,
    device: str,
    workers: int | None,
    runs: int,
) -> None:
    """ConfigError when the jobs that run at once need more memory than this machine has (its
    engine's ``memory_bytes`` of one job, times the jobs at once: the workers, at most one per
    job; on CUDA per GPU), naming the settings that drive it; checked before anything is built."""
    members = 1
    if not plugin.one_run_per_job or plugin.job_engine(config, device) != plugin.name:
        members = max(1, min(runs, config.train.seeds * len(config.optim.lr)))
    estimate, keys = plugin.memory_bytes(config, members)
    total, devices = memory_of(device)
    if not estimate or total is None:
        return
    workers = default_workers(device) if workers is None else workers
    at_once = max(1, min(workers, -(-runs // members)))
    per_device = -(-at_once // devices)
    if estimate * per_device <= total:
        return
    flat = flat_config(config_to_dict(config))
    settings = ", ".join(f"{key}={_shown(flat.get(key))}" for key in keys)
    where = "this machine's memory" if device == "cpu" else "one GPU's memory"
    jobs = f"{per_device} jobs at once need" if per_device > 1 else "one job needs"
    fewer = ", or fewer {workers}" if per_device > 1 else ""
    raise ConfigError(
        f"{name}: {jobs} about {size_text(estimate * per_device)}, more than {where} "
        f"({size_text(total)}); it grows with {settings}: lower them{fewer}"
    )


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)[:40]


def find_preset(name: str) -> Preset:
    """The preset called ``name``; SettingError listing the valid ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise SettingError(
            "experiment",
            f"unknown experiment {name[:60]!r}; valid experiments: {', '.join(PRESETS)}",
        ) from None


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
    probed) and checked to suit the config's engine (:func:`configure` on the CPU)."""
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
    asked = configure(options)
    return asked.preset, asked.config, asked.activations


def _explicit(preset: Preset, options: RunOptions) -> list[str]:
    """The overrides the options stand for: ``--quick``'s, then the explicit counts."""
    explicit = list(preset.quick) if options.quick else []
    explicit += [f"activations={','.join(options.activations)}"] if options.activations else []
    explicit += [f"train.seeds={options.seeds}"] if options.seeds is not None else []
    explicit += [f"train.epochs={options.epochs}"] if options.epochs is not None else []
    return explicit


def _metadata(
    asked: "Asked", options: RunOptions, config: ExperimentConfig, n_train: int, source: str
) -> dict:
    """What every run records about its experiment and data (and the user's activation code)."""
    preset = asked.preset
    return (
        asked.environment
        | {
            "train_size": n_train,
            "steps": n_train // config.train.batch_size * config.train.epochs,
            "experiment": preset.name,
            "citation": preset.citation,
            "dataset": config.dataset,
            "dataset_requested": options.dataset or preset.dataset,
            "dataset_source": source,
            "quick": options.quick,
            "checksums_verified": options.verify,
        }
        | ({"activation_sources": asked.sources} if asked.sources else {})
    )


def resolve_dataset(
    preset: Preset, config: ExperimentConfig, data_dir: str | None, dataset: str | None
) -> tuple[str, str]:
    """The dataset to use and the directory it was found in: ``dataset`` if given, else the preset's
    dataset, else its substitute. Raises SettingError with the ways to get the files.

    A text file's path (``dataset`` or ``--set dataset=``) gives the language model that file
    (:func:`resolve_text_file`)."""
    from gelus.data import DATASETS, find, get_spec, how_to_get

    if (text_file := resolve_text_file(preset, config, dataset or config.dataset)) is not None:
        return text_file
    if dataset is not None and dataset not in DATASETS:
        raise SettingError(
            "dataset",
            f"unknown dataset {dataset[:60]!r}; valid datasets: {', '.join(DATASETS)}, or for "
            "the language model a UTF-8 text file's path (ending in .txt or holding a /)",
        )
    candidates = (
        [dataset]
        if dataset
        else [config.dataset, *([preset.substitute] if preset.substitute else [])]
    )
    for name in candidates:
        location = find(get_spec(name), data_dir)
        if location is not None:
            return name, str(location.directory)
    spec = get_spec(candidates[0])
    tried = " or ".join(candidates)
    raise SettingError(
        "dataset",
        f"{preset.name}: no {tried} data found; to get them:\n{how_to_get(spec, data_dir)}",
    )


def resolve_text_file(
    preset: Preset, config: ExperimentConfig, path: str
) -> tuple[str, str] | None:
    """(``text:<sha256 prefix>:<absolute path>``, the path and its SHA-256) of the text file at
    ``path`` (or of the file a ``text:`` name names, which must still hold that text), checked
    against the model's context; None where ``path`` is a catalog name. Raises SettingError
    naming the file and the way out."""
    from gelus.data import DATASETS, DataError
    from gelus.data.text import (
        MAX_TEXT_BYTES,
        TEXT_FILE_PREFIX,
        is_text_path,
        min_text_file_bytes,
        text_file_dataset,
    )

    named = path.startswith(TEXT_FILE_PREFIX)
    if path in DATASETS or not (named or is_text_path(path)):
        return None
    context = plugin_for(config).text_context(config)
    if context is None:
        raise SettingError(
            "dataset",
            f"{preset.name}: a text file is a byte corpus, for the language model "
            "(transformer-lm); give {dataset} a dataset name (gelus data lists them)",
        )
    file = path.removeprefix(TEXT_FILE_PREFIX).partition(":")[2] if named else path
    if not Path(file).expanduser().exists():  # one that is there but not a file: refused below
        raise SettingError(
            "dataset", f"{file}: no such file; give {{dataset}} the path of a UTF-8 text file"
        )
    try:
        name, source = text_file_dataset(file, context)
    except DataError as error:
        raise SettingError(
            "dataset",
            f"{error}\n{{dataset}} takes the path of a UTF-8 text file of "
            f"{min_text_file_bytes(context):,} bytes or more (model.context={context}) and "
            f"{MAX_TEXT_BYTES:,} bytes at most",
        ) from None
    if named and name != path:
        raise SettingError(
            "dataset",
            f"{file}: its text is no longer that of {path} (now {name}); give {{dataset}} the "
            "file's path to train on the new text, or restore the old text to resume its runs",
        )
    return name, source


def resolve_device(device: str, config: ExperimentConfig, executor: Executor | None = None) -> str:
    """The device the jobs run on, "cpu" or "cuda", with "auto" meaning "cuda" when there is a GPU
    (on this machine, or in the executor's cluster when it has a ``resolve_device`` method), for
    every engine; SettingError for a device that is not there, or one the config cannot run on
    (its engine's ``device_problem``)."""
    resolved = _device(device, executor)
    if (problem := plugin_for(config).device_problem(config, resolved)) is not None:
        raise SettingError(*problem)
    return resolved


def _device(device: str, executor: Executor | None) -> str:
    if device not in DEVICES:
        raise SettingError(
            "device", f"unknown device {device[:60]!r}; valid devices: {', '.join(DEVICES)}"
        )
    if hasattr(executor, "resolve_device"):
        return executor.resolve_device(device)
    try:
        return local_device(device)
    except ValueError as error:
        raise SettingError("device", str(error)) from None
