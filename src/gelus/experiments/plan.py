"""The one planner: which runs an experiment has, how many samples they train on, and the jobs.

A run is one (activation, setting, lr, seed). A ``Job`` is one unit of work with everything a
worker needs to run it anywhere: a stacked ensemble of the MLP engine (one activation and
setting; members = seeds × learning rates), one run of the CNN or a transformer engine, or a
transformer's runs of one activation stacked when ``train.stack`` says so on the device. Runs
already ``done`` are never planned; the step-time pass's jobs are planned here too
(``step_time_jobs``). ``plan_run`` plans a resolved :class:`~gelus.experiments.run.Run`;
``budget`` prices what this module plans; ``runner`` executes it.
"""

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.config import ExperimentConfig, config_hash, config_to_dict, plugin_for
from gelus.experiments.records import RunKey

__all__ = [
    "Job",
    "describe_plan",
    "holds_out_validation",
    "job_engine",
    "makespan",
    "plan_jobs",
    "plan_run",
    "run_id",
    "settings",
    "step_time_jobs",
    "timed_config",
    "train_size",
]


@dataclass(frozen=True)
class Job:
    """One unit of work for the trainer ``engine`` names (``gelus.experiments.config.trainer_for``):
    one network, or a stacked ensemble of ``members``."""

    engine: str
    experiment: str
    config: ExperimentConfig
    activation: ActivationSpec
    setting: str
    keep: float
    members: tuple[RunKey, ...]
    train_size: int  # samples each member trains on
    dataset: str
    data_dir: str | None
    verify: bool
    out_dir: str
    checkpoint_path: str
    config_json: str
    metadata_json: str
    device: str = "cpu"

    @property
    def label(self) -> str:
        setting = f" {self.setting}" if self.setting else ""
        first = self.members[0]
        one = plugin_for(self.config).one_run_per_job and len(self.members) == 1
        lr = f" lr={first.lr:g} seed={first.seed}" if one else ""
        count = len(self.members)  # the runs this job trains at once (seeds × lrs of a setting)
        return f"{self.activation.label}{setting}{lr}, {count} run{'s' * (count > 1)}"

    @property
    def epochs(self) -> int:
        return self.config.train.epochs

    @property
    def run_ids(self) -> list[str]:
        return [key.run_id for key in self.members]


def run_id(experiment: str, chash: str, activation: str, setting: str, lr: float, seed: int) -> str:
    """The run's identity: experiment, config hash, activation, setting, lr and seed."""
    return f"{experiment}/{chash}/{activation}/{setting or '-'}/lr={lr:g}/seed={seed}"


def settings(config: ExperimentConfig, activation: ActivationSpec) -> list[tuple[str, float]]:
    """``(setting, dropout keep)`` of each setting ``activation`` runs in (its engine's
    ``settings``: one per keep probability for an MLP classifier with a deterministic activation,
    else one)."""
    return plugin_for(config).settings(config, activation)


def train_size(config: ExperimentConfig, train: int, val: int) -> int:
    """Samples one run trains on, given the sizes of the train and validation splits (its
    engine's ``train_size``)."""
    return plugin_for(config).train_size(config, train, val)


def holds_out_validation(config: ExperimentConfig) -> bool:
    """Whether the run's data keep a validation split apart (not trained on)."""
    return plugin_for(config).holds_out_validation(config)


def job_engine(config: ExperimentConfig, device: str) -> str:
    """The trainer of ``config``'s jobs on ``device``: its engine's own, or its stacked one where
    the engine stacks an activation's runs there (``EnginePlugin.job_engine``)."""
    return plugin_for(config).job_engine(config, device)


def makespan(loads: Iterable[float], workers: int) -> float:
    """Longest worker load when jobs go largest first to the least loaded of ``workers``.

    Workers beyond one per job have nothing to do, so any count above the number of jobs (even an
    absurd one, ``--plan-devices 99999999999``) is the number of jobs.
    """
    loads = sorted(loads, reverse=True)
    totals = [0.0] * max(1, min(workers, len(loads)))
    for load in loads:
        totals[totals.index(min(totals))] += load
    return max(totals)


def plan_run(run: Any) -> list[Job]:
    """The jobs of ``run`` (a resolved :class:`~gelus.experiments.run.Run`) whose runs are not all
    done (``run.done``)."""
    return _plan(_Common.of(run), run.activations, run.done, run.workers)


def step_time_jobs(run: Any, steps: int) -> list[Job]:
    """The step-time pass's jobs of ``run`` (:mod:`gelus.experiments.step_times`): one per
    activation, each ``steps`` steps an epoch, of :func:`timed_config` (seeds and lrs are sweep
    axes, so the config hash is the run's; their runs are never recorded, so their
    ``config_json`` stays the sweep's)."""
    common = dataclasses.replace(
        _Common.of(run),
        config=_timed(run.config, stacked=run.engine != run.plugin.name),
        train_size=steps * run.config.train.batch_size,
    )
    return [job for spec in run.activations for job in _plan(common, [spec], (), 1)]


def timed_config(config: ExperimentConfig, engine: str) -> ExperimentConfig:
    """The config whose step is timed: where the sweep's runs train stacked (``engine`` is
    ``job_engine``'s), the sweep's own (its whole job of seeds × lrs: a step's time is then per
    run-step); else seed 0 at the first lr, as a step's arithmetic depends on neither."""
    return _timed(config, stacked=engine != plugin_for(config).name)


def _timed(config: ExperimentConfig, stacked: bool) -> ExperimentConfig:
    if stacked:
        return config
    return dataclasses.replace(
        config,
        optim=dataclasses.replace(config.optim, lr=config.optim.lr[:1]),
        train=dataclasses.replace(config.train, seeds=1),
    )


def plan_jobs(
    experiment: str,
    config: ExperimentConfig,
    activations: Sequence[ActivationSpec],
    *,
    train_size: int,
    out_dir: str | Path,
    data_dir: str | None = None,
    verify: bool = True,
    metadata: dict | None = None,
    done: Iterable[str] = (),
    device: str = "cpu",
    workers: int = 1,
) -> list[Job]:
    """The jobs of ``experiment`` whose runs are not all ``done`` (their done members left out).

    An engine of one run per job (``EnginePlugin.one_run_per_job``) gets one job per run, unless
    its ``job_engine`` on ``device`` is a stacked trainer; the others (the MLPs, a stacked
    transformer) one ensemble per activation and setting, split into one per learning rate when
    that balances ``workers`` (a member's arithmetic does not depend on its ensemble). The count
    of runs is checked where the run is resolved (``device.check_jobs``).
    """
    plugin = plugin_for(config)
    common = _Common(
        experiment=experiment,
        config=config,
        chash=config_hash(config),
        config_json=json.dumps(config_to_dict(config), sort_keys=True),
        train_size=train_size,
        out_dir=out_dir,
        data_dir=data_dir,
        verify=verify,
        metadata=metadata,
        device=device,
        engine=plugin.job_engine(config, device),
        plugin=plugin,
        settings={spec.label: tuple(plugin.settings(config, spec)) for spec in activations},
    )
    return _plan(common, activations, done, workers)


def _plan(common: "_Common", activations, done: Iterable[str], workers: int) -> list[Job]:
    done = set(done)
    members = {
        (spec, setting, keep): _members(common, spec, setting, done)
        for spec in activations
        for setting, keep in common.settings[spec.label]
    }
    if common.plugin.one_run_per_job and common.engine == common.plugin.name:
        return [common.job(*k, (m,)) for k, group in members.items() for m in group]
    whole = [common.job(*k, group) for k, group in members.items() if group]
    by_lr = [
        common.job(*k, tuple(m for m in group if m.lr == lr))
        for k, group in members.items()
        for lr in dict.fromkeys(m.lr for m in group)
    ]
    # fewer, larger ensembles cost less per model; split by lr only when that balances the workers
    work = lambda jobs: makespan((len(j.members) for j in jobs), workers)  # noqa: E731
    return by_lr if work(by_lr) < 0.9 * work(whole) else whole


def _members(common: "_Common", spec, setting, done) -> tuple[RunKey, ...]:
    experiment, config, chash = common.experiment, common.config, common.chash
    keys = (
        RunKey(
            run_id(experiment, chash, spec.label, setting, lr, seed),
            experiment,
            chash,
            spec.label,
            seed,
            lr,
            setting,
        )
        for lr in config.optim.lr
        for seed in range(config.train.seeds)
    )
    return tuple(key for key in keys if key.run_id not in done)


@dataclass(frozen=True)
class _Common:
    """What every job of one plan shares."""

    experiment: str
    config: ExperimentConfig
    chash: str
    config_json: str  # the config as its runs record it
    train_size: int
    out_dir: str | Path
    data_dir: str | None
    verify: bool
    metadata: dict | None
    device: str
    engine: str  # the jobs' trainer
    plugin: Any  # the config's engine (EnginePlugin)
    settings: dict[str, tuple[tuple[str, float], ...]]  # activation -> its (setting, keep)

    @classmethod
    def of(cls, run: Any) -> "_Common":
        """What the jobs of a resolved Run share."""
        return cls(
            experiment=run.name,
            config=run.config,
            chash=run.config_hash,
            config_json=run.config_json,
            train_size=run.train_size,
            out_dir=run.out_dir,
            data_dir=run.data_dir,
            verify=run.verify,
            metadata=dict(run.metadata),
            device=run.device,
            engine=run.engine,
            plugin=run.plugin,
            settings=dict(run.settings),
        )

    def job(self, spec: ActivationSpec, setting: str, keep: float, group) -> Job:
        run_ids = "\n".join(k.run_id for k in group)
        digest = hashlib.sha256(run_ids.encode()).hexdigest()[:12]
        stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{self.experiment}-{spec.label}-{setting}")
        out_dir = Path(self.out_dir)
        return Job(
            engine=self.engine,
            experiment=self.experiment,
            config=self.config,
            activation=spec,
            setting=setting,
            keep=keep,
            members=tuple(group),
            train_size=self.train_size,
            dataset=self.config.dataset,
            data_dir=self.data_dir,
            verify=self.verify,
            out_dir=str(out_dir),
            checkpoint_path=str(out_dir / "checkpoints" / f"{stem}-{digest}.pt"),
            config_json=self.config_json,
            metadata_json=json.dumps(self.metadata or {}, sort_keys=True),
            device=self.device,
        )


def describe_plan(run: Any, jobs: Sequence[Job]) -> str:
    """One line saying what ``jobs`` of ``run`` will train: runs, jobs, this config's runs done
    before, where (workers and device); or that nothing is left."""
    runs = sum(len(job.members) for job in jobs)
    config = run.config  # every run of the config: lrs × seeds × each activation's settings
    every = len(config.optim.lr) * config.train.seeds * sum(map(len, run.settings.values()))
    before = every - runs
    done = f", {before} done before" if before > 0 else ""
    workers = min(run.workers, len(jobs))
    where = (
        f"{workers} worker processes"
        if workers > 1
        else "1 worker process"
        if workers
        else "in this process"
    )
    where += f" on {run.device}"
    if not jobs:
        return f"{run.label}: nothing left to train{done}"
    return f"{run.label}: {runs} runs to train in {len(jobs)} jobs{done}, {where} (a job trains its runs at once)"
