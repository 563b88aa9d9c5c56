"""Plan an experiment as independent jobs: one stacked ensemble, or one CNN run, per job.

A ``Job`` is one stacked ensemble (one activation and setting; members = seeds × learning rates)
or one CNN run, with everything a worker needs to run it anywhere. Runs already ``done`` are never
planned.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from gelus.experiments.config import ExperimentConfig, config_hash, config_to_dict, is_stochastic
from gelus.experiments.custom_activations import activation_label
from gelus.experiments.records import RunKey

__all__ = ["Job", "plan_jobs", "run_id"]


@dataclass(frozen=True)
class Job:
    """One unit of work: a stacked ensemble ("mlp") or one CNN training ("cnn")."""

    kind: str
    experiment: str
    config: ExperimentConfig
    activation: str  # as the config names it: a registry name or a user's [label=]module:attr
    setting: str
    keep: float
    members: tuple[RunKey, ...]
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
        lr = f" lr={self.members[0].lr:g} seed={self.members[0].seed}" if self.kind == "cnn" else ""
        return f"{activation_label(self.activation)}{setting}{lr} ×{len(self.members)}"

    @property
    def epochs(self) -> int:
        return self.config.train.epochs


def run_id(experiment: str, chash: str, activation: str, setting: str, lr: float, seed: int) -> str:
    """The run's identity: experiment, config hash, activation, setting, lr and seed."""
    return f"{experiment}/{chash}/{activation}/{setting or '-'}/lr={lr:g}/seed={seed}"


def plan_jobs(
    experiment: str,
    config: ExperimentConfig,
    *,
    out_dir: Path,
    data_dir: str | None,
    verify: bool,
    metadata: dict,
    done: set[str],
    device: str = "cpu",
    split_by_lr: bool = False,
) -> list[Job]:
    """The jobs of ``experiment`` whose runs are not all ``done`` (their done members left out).

    One ensemble per activation and setting; ``split_by_lr`` makes one per learning rate too (more,
    smaller jobs to balance the workers; a member's arithmetic does not depend on its ensemble).
    """
    chash = config_hash(config)
    config_json = json.dumps(config_to_dict(config), sort_keys=True)
    metadata_json = json.dumps(metadata, sort_keys=True)
    jobs = []
    for activation in config.activations:
        label = activation_label(activation)  # what records and reports call it
        stochastic = is_stochastic(activation)
        keeps = (1.0,) if stochastic or config.task == "autoencode" else config.train.keep
        for keep in dict.fromkeys(keeps):
            setting = "" if config.task in ("autoencode", "cnn") else f"keep={float(keep)!r}"
            members = tuple(
                RunKey(
                    run_id(experiment, chash, label, setting, lr, seed),
                    experiment,
                    chash,
                    label,
                    seed,
                    lr,
                    setting,
                )
                for lr in config.optim.lr
                for seed in range(config.train.seeds)
            )
            members = tuple(key for key in members if key.run_id not in done)
            if config.task == "cnn":
                groups = [(m,) for m in members]
            elif split_by_lr:
                lrs = dict.fromkeys(m.lr for m in members)
                groups = [tuple(m for m in members if m.lr == lr) for lr in lrs]
            else:
                groups = [members] if members else []
            for group in groups:
                run_ids = "\n".join(k.run_id for k in group)
                digest = hashlib.sha256(run_ids.encode()).hexdigest()[:12]
                stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{experiment}-{label}-{setting}")
                jobs.append(
                    Job(
                        kind="cnn" if config.task == "cnn" else "mlp",
                        experiment=experiment,
                        config=config,
                        activation=activation,
                        setting=setting,
                        keep=keep,
                        members=group,
                        dataset=config.dataset,
                        data_dir=data_dir,
                        verify=verify,
                        out_dir=str(out_dir),
                        checkpoint_path=str(out_dir / "checkpoints" / f"{stem}-{digest}.pt"),
                        config_json=config_json,
                        metadata_json=metadata_json,
                        device=device,
                    )
                )
    return jobs
