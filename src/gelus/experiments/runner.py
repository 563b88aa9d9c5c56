"""``run_experiment``: resolve a preset into a validated config, plan its jobs, run them, summarise.

Everything the user can get wrong (experiment, activation, dataset, config keys and values) is
checked here, before any job starts, and reported as one ``gelus.cli.UserError``.
"""

import dataclasses
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from gelus.cli import UserError
from gelus.experiments.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_hash,
    is_stochastic,
    validate,
)
from gelus.experiments.presets import PRESETS, Preset
from gelus.experiments.records import Record, RecordStore, environment_metadata, read_records
from gelus.experiments.sweep import Executor, LocalExecutor, plan_jobs

__all__ = [
    "DEVICES",
    "ProgressBars",
    "resolve_config",
    "resolve_dataset",
    "resolve_device",
    "run_experiment",
    "summary_table",
]

DEVICES = ("auto", "cpu", "cuda")


def _preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(
            f"unknown experiment {name!r}; valid experiments: {', '.join(PRESETS)}"
        ) from None


def resolve_config(
    name: str,
    *,
    activations: Sequence[str] | None = None,
    seeds: int | None = None,
    epochs: int | None = None,
    overrides: Iterable[str] = (),
    quick: bool = False,
) -> tuple[Preset, ExperimentConfig]:
    """The preset and its config after quick overrides, the explicit arguments and ``--set`` overrides."""
    preset = _preset(name)
    config = preset.config
    if preset.cnn_config is not None:
        try:
            from gelus.experiments import cnn
        except ImportError as error:
            raise UserError(f"{name}: the CNN experiments are not available ({error})") from None
        config = dataclasses.replace(config, cnn=getattr(cnn, preset.cnn_config)())
    if seeds is not None and seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {seeds}")
    if epochs is not None and epochs < 1:
        raise UserError(f"--epochs must be at least 1, got {epochs}")
    explicit = []
    if activations:
        explicit.append("activations=" + ",".join(activations))
    if seeds is not None:
        explicit.append(f"train.seeds={seeds}")
    if epochs is not None:
        explicit.append(f"train.epochs={epochs}")
    try:
        config = apply_overrides(config, [*(preset.quick if quick else ()), *explicit, *overrides])
        validate(config)
        if config.task == "cnn":
            stochastic = [a for a in config.activations if is_stochastic(a)]
            if stochastic:
                raise ConfigError(f"activation {stochastic[0]!r} is not available in the CNNs")
            # train.epochs and model.gelu_form are the single knobs; the CNN config follows them
            config = dataclasses.replace(config, cnn=_cnn_config(config))
        else:
            from gelus.experiments.train_mlp import make_activation

            for activation in config.activations:
                make_activation(activation, config.model.gelu_form)
    except (ConfigError, ValueError) as error:
        raise UserError(f"{name}: {error}") from None
    return preset, config


_EPOCH_FIELDS = ("lr_decay_start", "beta1_switch_epoch")  # schedule points, in epochs


def _cnn_config(config: ExperimentConfig):
    """The CNN config following ``train.epochs`` and ``model.gelu_form``.

    With fewer (or more) epochs than the paper, schedule points left at their defaults scale in
    proportion, so a short run keeps the schedule's shape (lr decay over the second half).
    """
    cnn = config.cnn
    defaults = type(cnn)()
    ratio = config.train.epochs / defaults.epochs
    changes = {"epochs": config.train.epochs, "gelu_form": config.model.gelu_form}
    for name in _EPOCH_FIELDS:
        if hasattr(cnn, name) and getattr(cnn, name) == getattr(defaults, name):
            changes[name] = round(getattr(defaults, name) * ratio)
    return dataclasses.replace(cnn, **changes)


def resolve_dataset(
    preset: Preset, config: ExperimentConfig, data_dir: str | None, dataset: str | None
) -> tuple[str, str]:
    """The dataset to use and the directory it was found in: ``dataset`` if given, else the preset's
    dataset, else its substitute. Raises UserError with the ways to get the files."""
    from gelus.data import DATASETS, find, get_spec, how_to_get

    if dataset is not None and dataset not in DATASETS:
        raise UserError(f"unknown dataset {dataset!r}; valid datasets: {', '.join(DATASETS)}")
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
    raise UserError(
        f"{preset.name}: no {tried} data found; to get them:\n{how_to_get(spec, data_dir)}"
    )


def resolve_device(device: str, config: ExperimentConfig, executor: Executor | None = None) -> str:
    """The device the jobs run on: "cpu" for the MLP engine; for the CNNs "cpu" or "cuda", with
    "auto" meaning "cuda" when there is a GPU (on this machine, or in the executor's cluster when
    it has a ``resolve_device`` method). Raises UserError for a device that is not there."""
    if device not in DEVICES:
        raise UserError(f"unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    if config.task != "cnn":
        resolved = "cpu"  # the stacked-ensemble engine runs on the CPU
    elif hasattr(executor, "resolve_device"):
        resolved = executor.resolve_device(device)
    else:
        import torch

        available = torch.cuda.is_available()
        if device == "cuda" and not available:
            raise UserError(
                "--device cuda: torch sees no CUDA device here; use --device auto or cpu"
            )
        if device == "auto":
            device = "cuda" if available else "cpu"
        resolved = device
    if config.task == "cnn" and config.cnn.amp_dtype == "fp16" and resolved != "cuda":
        raise UserError("fp16 autocast (--amp fp16) needs CUDA; use --amp bf16 on the CPU")
    return resolved


def run_experiment(
    name: str,
    *,
    out_dir: str | os.PathLike,
    activations: Sequence[str] | None = None,
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
) -> Path:
    """Run (or resume) the preset ``name`` into ``out_dir/records.sqlite``; returns ``out_dir``.

    Runs already done are skipped; interrupted ones resume from their checkpoints. ``workers``
    processes (default: one per available core; 0 = in this process) with ``threads`` torch threads
    each, or ``executor`` (e.g. ``RayExecutor``; ``workers`` then defaults to its own). ``device``:
    "auto", "cpu" or "cuda" for the CNNs (the MLP engine runs on the CPU). With ``progress``, shows
    a bar per worker and prints a summary table at the end.
    """
    preset, config = resolve_config(
        name, activations=activations, seeds=seeds, epochs=epochs, overrides=overrides, quick=quick
    )
    if workers is not None and workers < 0:
        raise UserError(f"--workers must be 0 (in this process) or more, got {workers}")
    if threads < 1:
        raise UserError(f"--threads must be at least 1, got {threads}")
    data_dir = None if data_dir is None else str(data_dir)
    used, source = resolve_dataset(preset, config, data_dir, dataset)
    config = dataclasses.replace(config, dataset=used)
    device = resolve_device(device, config, executor)
    out_dir = Path(out_dir)
    metadata = environment_metadata(device, threads) | {
        "experiment": name,
        "citation": preset.citation,
        "dataset": used,
        "dataset_requested": dataset or preset.dataset,
        "dataset_source": source,
        "quick": quick,
        "checksums_verified": verify,
    }
    store = RecordStore(out_dir)
    done = store.done_run_ids()
    store.close()
    if workers is None and executor is not None:
        workers = getattr(executor, "workers", None)
    if workers is None:
        workers = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
    plans = [
        plan_jobs(
            name,
            config,
            out_dir=out_dir,
            data_dir=data_dir,
            verify=verify,
            metadata=metadata,
            done=done,
            device=device,
            split_by_lr=split,
        )
        for split in (False, True)
    ]
    # fewer, larger ensembles cost less per model; split by lr only when that balances the workers
    jobs = (
        plans[1] if _makespan(plans[1], workers) < 0.9 * _makespan(plans[0], workers) else plans[0]
    )
    executor = executor or LocalExecutor(workers, threads)
    with ProgressBars(enabled=progress, total=sum(job.epochs for job in jobs), title=name) as bars:
        executor.run(jobs, bars)
    if progress:
        print(summary_table(read_records(out_dir), name, config_hash(config), config.task))
    return out_dir


def _makespan(jobs: Sequence, workers: int) -> float:
    """Longest worker load (member-epochs) when jobs go largest first to the least loaded worker."""
    loads = [0.0] * max(1, workers)
    for size in sorted((len(job.members) * job.epochs for job in jobs), reverse=True):
        loads[loads.index(min(loads))] += size
    return max(loads)


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


def _final_values(records: list[Record], split: str, metric: str) -> dict[str, tuple[int, float]]:
    last: dict[str, tuple[int, float]] = {}
    for r in records:
        if (
            r.split == split
            and r.metric == metric
            and (r.run_id not in last or r.epoch > last[r.run_id][0])
        ):
            last[r.run_id] = (r.epoch, r.value)
    return last


def summary_table(records: list[Record], experiment: str, chash: str, task: str) -> str:
    """Final-epoch test metric per activation, setting and lr: median [min, max] over seeds.

    ``*`` marks the lr with the lowest median final validation error (classifiers with a val split).
    """
    records = [r for r in records if r.experiment == experiment and r.config_hash == chash]
    metric = "error" if task in ("classify", "cnn") else "recon_error"
    test = _final_values(records, "test", metric)
    val = _final_values(records, "val", "error")
    groups: dict[tuple[str, str, float], list[str]] = defaultdict(list)
    for r in records:
        if r.run_id in test and r.run_id not in groups[(r.activation, r.setting, r.lr)]:
            groups[(r.activation, r.setting, r.lr)].append(r.run_id)
    if not groups:
        return f"{experiment}: no finished epochs to summarise"
    best: dict[tuple[str, str], tuple[float, float]] = {}
    for (activation, setting, lr), runs in groups.items():
        vals = [val[run][1] for run in runs if run in val]
        if vals:
            score = statistics.median(vals)
            if (activation, setting) not in best or score < best[(activation, setting)][1]:
                best[(activation, setting)] = (lr, score)
    lines = [
        f"{experiment}: final test {metric}, median [min, max] over seeds",
        f"{'activation':<16} {'setting':<10} {'lr':>8} {'n':>3}  {'median':>9}  spread",
    ]
    for (activation, setting, lr), runs in sorted(groups.items()):
        values = sorted(test[run][1] for run in runs)
        mark = "*" if best.get((activation, setting), (None,))[0] == lr else " "
        epoch = max(test[run][0] for run in runs)
        lines.append(
            f"{activation:<16} {setting or '-':<10} {lr:>8g} {len(values):>3}  {statistics.median(values):>9.4f}  "
            f"[{values[0]:.4f}, {values[-1]:.4f}] {mark} (epoch {epoch})"
        )
    if best:
        lines.append("* lr with the lowest median final validation error")
    return "\n".join(lines)
