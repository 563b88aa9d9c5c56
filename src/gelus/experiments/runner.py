"""``run_experiment``: resolve, plan, execute, summarise.

Everything the user can get wrong (experiment, activation, dataset, config keys and values, counts)
is checked here, before any job starts, and raised as a :class:`~gelus.experiments.errors.
SettingError` naming the parameter; the jobs come from the one planner (:mod:`.plan`) and run on
an executor (:mod:`.sweep`, :mod:`.ray_executor`) through the driver (:mod:`.driver`).
"""

import dataclasses
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gelus.experiments.activation_spec import (
    ActivationError,
    ActivationSpec,
    activation_texts,
    resolve_activations,
)
from gelus.experiments.config import (
    LIMITS,
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    check_batch_fits,
    config_hash,
    validate,
)
from gelus.experiments.device import DEVICES, default_workers, local_device
from gelus.experiments.errors import SettingError
from gelus.experiments.plan import holds_out_validation, plan_jobs, settings, train_size
from gelus.experiments.presets import PRESETS, Preset
from gelus.experiments.records import (
    Record,
    RecordStore,
    RunInfo,
    environment_metadata,
    read_records,
    read_runs,
)
from gelus.experiments.selection import run_configs, select
from gelus.experiments.step_times import ROUNDS, STEPS, measure_step_times, timed_engines
from gelus.experiments.sweep import Executor, LocalExecutor, load_dataset

__all__ = [
    "ProgressBars",
    "find_preset",
    "resolve_config",
    "resolve_dataset",
    "resolve_device",
    "resolve_text_file",
    "run_experiment",
    "summary_table",
]


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
) -> tuple[Preset, ExperimentConfig]:
    """The preset and its config after quick overrides, the explicit arguments and ``--set``
    overrides, validated. Activation names stay names here (``resolve_activations`` builds them)."""
    preset = find_preset(name)
    _check_count("seeds", seeds, 1, LIMITS["seeds"])
    _check_count("epochs", epochs, 1, LIMITS["epochs"])
    explicit = []
    if activations:
        explicit.append("activations=" + ",".join(activations))
    if seeds is not None:
        explicit.append(f"train.seeds={seeds}")
    if epochs is not None:
        explicit.append(f"train.epochs={epochs}")
    try:
        config = apply_overrides(
            preset.config, [*(preset.quick if quick else ()), *explicit, *overrides]
        )
        validate(config)
    except ConfigError as error:
        raise ConfigError(f"{name}: {error.template}", error.parameter) from None
    return preset, config


def run_activations(name: str, config: ExperimentConfig) -> tuple[ActivationSpec, ...]:
    """The config's activations resolved once (imported, built and probed) and checked to suit
    the config's engine."""
    from gelus.experiments.driver import ENGINES

    try:
        specs = resolve_activations(config.activations, config.model.approximate)
        for spec in specs:
            ENGINES[config.engine].check_activation(spec)
    except SettingError as error:
        raise ActivationError(f"{name}: {error.template}") from None
    return specs


def resolve_dataset(
    preset: Preset, config: ExperimentConfig, data_dir: str | None, dataset: str | None
) -> tuple[str, str]:
    """The dataset to use and the directory it was found in: ``dataset`` if given, else the preset's
    dataset, else its substitute. Raises SettingError with the ways to get the files.

    A text file's path (``dataset`` or ``--set dataset=``) gives the language model that file
    (:func:`resolve_text_file`)."""
    from gelus.data import DATASETS, find, get_spec, how_to_get
    from gelus.data.text import TEXT_FILE_PREFIX, is_text_path

    requested = dataset or config.dataset
    if requested not in DATASETS and (
        is_text_path(requested) or requested.startswith(TEXT_FILE_PREFIX)
    ):
        return resolve_text_file(preset, config, requested)
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


def resolve_text_file(preset: Preset, config: ExperimentConfig, path: str) -> tuple[str, str]:
    """(``text:<sha256 prefix>:<absolute path>``, the path and its SHA-256) of the text file at
    ``path`` (or of the file a ``text:`` name names, which must still hold that text), checked
    against the model's context. Raises SettingError naming the file and the way out."""
    from gelus.data import DataError
    from gelus.data.text import TEXT_FILE_PREFIX, min_text_file_bytes, text_file_dataset

    if config.task != "lm":
        raise SettingError(
            "dataset",
            f"{preset.name}: a text file is a byte corpus, for the language model "
            "(transformer-lm); give {dataset} a dataset name (gelus data lists them)",
        )
    context = config.model.context
    file = (
        path.removeprefix(TEXT_FILE_PREFIX).partition(":")[2]
        if path.startswith(TEXT_FILE_PREFIX)
        else path
    )
    if not Path(file).expanduser().is_file():
        raise SettingError(
            "dataset", f"{file}: no such file; give {{dataset}} the path of a UTF-8 text file"
        )
    try:
        name, source = text_file_dataset(file, context)
    except DataError as error:
        raise SettingError(
            "dataset",
            f"{error}\n{{dataset}} takes the path of a UTF-8 text file of "
            f"{min_text_file_bytes(context):,} bytes or more (model.context={context})",
        ) from None
    if path.startswith(TEXT_FILE_PREFIX) and name != path:
        raise SettingError(
            "dataset",
            f"{file}: its text is no longer that of {path} (now {name}); give {{dataset}} the "
            "file's path to train on the new text, or restore the old text to resume its runs",
        )
    return name, source


def resolve_device(device: str, config: ExperimentConfig, executor: Executor | None = None) -> str:
    """The device the jobs run on, "cpu" or "cuda", with "auto" meaning "cuda" when there is a GPU
    (on this machine, or in the executor's cluster when it has a ``resolve_device`` method), for
    both engines. Raises SettingError for a device that is not there."""
    if device not in DEVICES:
        raise SettingError(
            "device", f"unknown device {device[:60]!r}; valid devices: {', '.join(DEVICES)}"
        )
    if hasattr(executor, "resolve_device"):
        resolved = executor.resolve_device(device)
    else:
        try:
            resolved = local_device(device)
        except ValueError as error:
            raise SettingError("device", str(error)) from None
    if config.task == "cnn" and config.cnn.amp_dtype == "fp16" and resolved != "cuda":
        raise SettingError(
            "amp", "fp16 autocast ({amp} fp16) needs CUDA; use {amp} bf16 on the CPU"
        )
    return resolved


def _run_metadata(preset, config, n_train, requested, source, *, quick, verify) -> dict:
    """What every run of this command records about its experiment and data."""
    return {
        "train_size": n_train,
        "steps": n_train // config.train.batch_size * config.train.epochs,
        "experiment": preset.name,
        "citation": preset.citation,
        "dataset": config.dataset,
        "dataset_requested": requested or preset.dataset,
        "dataset_source": source,
        "quick": quick,
        "checksums_verified": verify,
    }


def _resolve_data(
    preset: Preset,
    config: ExperimentConfig,
    data_dir: str | None,
    dataset: str | None,
    verify: bool,
) -> tuple[ExperimentConfig, int, str]:
    """(config with the dataset used, samples a run trains on, the folder the files came from);
    the data are loaded (and cached for a worker in this process) to check they fit the config."""
    used, source = resolve_dataset(preset, config, data_dir, dataset)
    config = dataclasses.replace(config, dataset=used)
    data = load_dataset(used, data_dir, validation=holds_out_validation(config), verify=verify)
    n_train = train_size(config, len(data.train), len(data.val) if data.val is not None else 0)
    try:
        check_batch_fits(config, n_train)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    from gelus.experiments.driver import ENGINES

    if (check_data := getattr(ENGINES[config.engine], "check_data", None)) is not None:
        check_data(config, data)  # an engine's own needs (a corpus long enough for its context)
    return config, n_train, source


def _check_workers(workers: int | None, threads: int, runs: int) -> None:
    cores = os.cpu_count() or 1
    if workers is not None and workers < 0:
        raise SettingError(
            "workers", f"{{workers}} must be 0 (in this process) or more, got {workers}"
        )
    _check_count("workers", workers, 0, max(cores, runs))
    _check_count("threads", threads, 1, cores)


def run_experiment(
    name: str,
    *,
    out_dir: str | os.PathLike,
    activations: Sequence[Any] | Mapping[str, Any] | None = None,
    seeds: int | None = None,
    epochs: int | None = None,
    overrides: Iterable[str] = (),
    workers: int | None = None,
    data_dir: str | os.PathLike | None = None,
    quick: bool = False,
    progress: bool = True,
    dataset: str | None = None,
    verify: bool = True,
    device: str = "cpu",
    threads: int = 1,
    executor: Executor | None = None,
    step_times: bool = True,
) -> Path:
    """Run (or resume) the preset ``name`` into ``out_dir/records.sqlite``; returns ``out_dir``.

    Runs already done are skipped; interrupted ones resume from their checkpoints. ``workers``
    processes (default: one per available core, on CUDA ``WORKERS_PER_GPU`` per GPU; 0 = in this
    process) with ``threads`` torch threads each, or ``executor`` (e.g. ``RayExecutor``;
    ``workers`` then defaults to its own). ``device``: "auto", "cpu" or "cuda", for both engines.
    With ``progress``, shows a bar per worker and prints a summary table at the end.

    ``activations`` (default: the preset's): registry names, ``[label=]module:attribute``
    strings, or ``{label: class | factory | function}`` of importable objects; a user
    activation's source is hashed into the runs' metadata, and runs of edited code are refused
    beside the old records. With ``step_times``, a transformer sweep then times each
    activation's step (:mod:`gelus.experiments.step_times`).
    """
    preset, config = resolve_config(
        name, activations=activation_texts(activations), seeds=seeds, epochs=epochs,
        overrides=overrides, quick=quick,
    )  # fmt: skip
    specs = run_activations(name, config)
    runs = sum(len(settings(config, spec)) for spec in specs)
    _check_workers(workers, threads, runs * len(config.optim.lr) * config.train.seeds)
    data_dir = None if data_dir is None else str(data_dir)
    config, n_train, source = _resolve_data(preset, config, data_dir, dataset, verify)
    device = resolve_device(device, config, executor)
    out_dir = Path(out_dir)
    metadata = environment_metadata(device, threads) | _run_metadata(
        preset, config, n_train, dataset, source, quick=quick, verify=verify
    )
    metadata |= _activation_sources(name, specs, out_dir)
    workers = getattr(executor, "workers", None) if workers is None else workers
    workers = default_workers(device) if workers is None else workers
    jobs = plan_jobs(
        name, config, specs, train_size=n_train, out_dir=out_dir, data_dir=data_dir,
        verify=verify, metadata=metadata, done=_done_runs(out_dir), device=device, workers=workers,
    )  # fmt: skip
    _execute(jobs, executor or LocalExecutor(workers, threads), name, progress)
    if step_times and config.engine in timed_engines:
        _store_step_times(name, config, specs, out_dir, data_dir, verify, device, progress)
    if progress:
        print(summary_table(read_records(out_dir), read_runs(out_dir), preset))
    return out_dir


def _activation_sources(name: str, specs: Sequence[ActivationSpec], out_dir: Path) -> dict:
    """``{"activation_sources": ...}`` for a user's activations (their code, hashed), after
    refusing code edited since the runs beside it; {} for registry activations only."""
    if sources := {spec.label: spec.source() for spec in specs if spec.is_custom}:
        check_activation_code(name, out_dir, sources)
        return {"activation_sources": sources}
    return {}


def _store_step_times(
    name: str, config: ExperimentConfig, specs: Sequence[ActivationSpec], out_dir: Path,
    data_dir: str | None, verify: bool, device: str, progress: bool,
) -> None:  # fmt: skip
    """Time every activation's step together (interleaving needs them in one measurement) unless
    the records hold all their timings at this config and device already (a resumed sweep)."""
    import torch

    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        print(f"{name}: no step times: this machine has no CUDA device (the runs' was cuda)")
        return  # the runs went to a cluster's GPUs
    experiment_hash = config_hash(config)
    store = RecordStore(out_dir)
    try:
        if {s.label for s in specs} <= store.timed_activations(name, experiment_hash, device):
            return
        if progress:
            print(f"{name}: timing each activation's step ({ROUNDS} interleaved rounds of {STEPS} "
                  f"steps{', one thread' if device == 'cpu' else ''})")  # fmt: skip
        data = load_dataset(
            config.dataset, data_dir, validation=holds_out_validation(config), verify=verify
        )
        times = measure_step_times(name, config, specs, data, device)
        threads = 1 if torch.device(device).type == "cpu" else torch.get_num_threads()
        store.add_step_times(name, experiment_hash, device, threads, times)
    finally:
        store.close()


def _execute(jobs: Sequence, executor: Executor, title: str, progress: bool) -> None:
    """Run ``jobs`` on ``executor`` with a progress bar per worker."""
    with ProgressBars(enabled=progress, total=sum(job.epochs for job in jobs), title=title) as bars:
        executor.run(jobs, bars)


def _done_runs(out_dir: Path) -> set[str]:
    store = RecordStore(out_dir)
    try:
        return store.done_run_ids()
    finally:
        store.close()


def check_activation_code(
    experiment: str, out_dir: Path, sources: dict[str, dict[str, str]]
) -> None:
    """Refuse to add runs of an edited activation beside the records of its earlier code: the
    report would pool the two versions as seeds of one activation. Raises SettingError."""
    if not (out_dir / "records.sqlite").exists():
        return
    for run in read_runs(out_dir):
        if run.experiment != experiment or run.activation not in sources:
            continue
        recorded = run.metadata.get("activation_sources", {}).get(run.activation, {})
        current = sources[run.activation]
        if recorded.get("sha256") != current["sha256"]:
            was = recorded.get("spec", "a registry activation")
            raise SettingError(
                "activations",
                f"{experiment}: {out_dir} holds runs of activation {run.activation!r} made by other "
                f"code ({was}, sha256 {str(recorded.get('sha256'))[:12]}) than "
                f"{current['spec']} now (sha256 {current['sha256'][:12]}); "
                f"give the new version its own label ({run.activation}2={current['spec']}) "
                "or another {out_dir}",
            )


class ProgressBars:
    """An overall tqdm bar plus one per worker (job label, epochs, ETA); a callable ``report``."""

    def __init__(self, enabled: bool, total: int, title: str) -> None:
        self.enabled = enabled
        self.total = total
        self.title = title
        self.bars: dict[int, object] = {}
        self.positions: dict[int, int] = {}  # worker -> terminal line below the overall bar
        self.last: dict[tuple[int, str], int] = {}

    def __enter__(self) -> "ProgressBars":
        if self.enabled:
            from tqdm import tqdm

            self.tqdm = tqdm
            self.overall = tqdm(
                total=self.total, desc=f"{self.title} (epochs)", position=0, dynamic_ncols=True
            )
        return self

    def __call__(self, worker: int, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar = self.bars.get(worker)
        if bar is None or bar.desc != label:
            if bar is not None:
                bar.close()
            position = self.positions.setdefault(worker, len(self.positions) + 1)
            bar = self.tqdm(
                total=total,
                initial=done,
                desc=label,
                position=position,
                leave=False,
                dynamic_ncols=True,
                unit="epoch",
            )
            self.bars[worker] = bar
            self.last.setdefault((worker, label), done)
            self.overall.update(done)  # resumed epochs count as done
            return
        step = done - self.last.get((worker, label), done)
        self.last[(worker, label)] = done
        if step > 0:
            bar.update(step)
            self.overall.update(step)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            for bar in self.bars.values():
                bar.close()
            self.overall.close()


def summary_table(records: Sequence[Record], runs: Sequence[RunInfo], preset: Preset) -> str:
    """The preset's protocol applied to its records, as the report applies it: per config,
    activation and setting, the reported metric's median [min, max] over seeds at the chosen lr
    (``*``: chosen on validation), with how many runs diverged."""
    mine = [r for r in records if r.experiment == preset.name]
    configs = run_configs(r for r in runs if r.experiment == preset.name)
    selections = select(mine, preset.protocol, configs)
    if not selections:
        return f"{preset.name}: no finished epochs to summarise"
    headline = selections[0].metric
    lines = [
        f"{preset.name}: test {headline}, median [min, max] over seeds (* lr chosen on validation)",
        f"{'activation':<16} {'config':<24} {'setting':<10} {'lr':>8} {'n':>3}  {'median':>9}  spread",
    ]
    for s in selections:
        if s.metric != headline or not s.values:
            continue
        finite = sorted(s.finite)
        mark = "*" if s.lr_selected else " "
        if finite:
            median = f"{statistics.median(finite):>9.4f}  [{finite[0]:.4f}, {finite[-1]:.4f}]"
        else:
            median = f"{'—':>9}"
        diverged = f", {s.diverged} diverged" if s.diverged else ""
        lines.append(
            f"{s.activation:<16} {s.variant or '-':<24} {s.setting or '-':<10} {s.lr:>8g}{mark}"
            f"{len(s.values):>3}  {median} (epoch {max(s.epochs.values())}{diverged})"
        )
    return "\n".join(lines)
