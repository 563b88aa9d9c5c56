"""Final models kept by finished jobs, and their reuse by a job that only needs to evaluate them.

mnist-noise's runs are mnist-classification's no-dropout runs with noisy test sets evaluated after
the last epoch: the same training, bit for bit. A job whose config keeps models
(``train.keep_models``) writes its final state to ``OUT/models/``; a later job of the same training
(the same config but for its noise evaluation, and the same activation, setting, lr and seed for
every member) loads those states and evaluates them once, instead of training them again. Its runs
then hold the last epoch's records only, and their metadata names the files they came from.
"""

import json
from pathlib import Path
from typing import Any

from gelus.experiments.checkpoint import load_checkpoint, save_checkpoint
from gelus.experiments.config import config_hash, plugin_for
from gelus.experiments.plan import Job

__all__ = ["MODELS", "evaluate_kept_models", "keep_models", "training_key"]

MODELS = "models"  # the folder inside OUT


def training_key(config: Any) -> str:
    """What makes two runs' training identical, whatever they evaluate after it (the hash of its
    engine's ``training_key``)."""
    return config_hash(plugin_for(config).training_key(config))


def _member(key) -> list:
    return [key.activation, key.setting, float(key.lr), int(key.seed)]


def keep_models(job: Job, engine: Any) -> None:
    """Write the finished job's final state to ``OUT/models/`` if its config keeps models."""
    if not getattr(job.config.train, "keep_models", False):
        return
    state = engine.state()
    if "model" in state:  # evaluating needs the model only, not the optimizer's moments
        state = {"model": state["model"]}
    save_checkpoint(
        Path(job.out_dir) / MODELS / Path(job.checkpoint_path).name,
        {
            "experiment": job.experiment,
            "training": training_key(job.config),
            "members": [_member(key) for key in job.members],
            "epoch": job.epochs,
            "engine": state,
        },
    )


def _kept_members(job: Job) -> tuple[list[tuple[dict, int]], list[str]] | None:
    """(engine state, member index) of each of the job's members in the kept models, and the files they
    come from; None unless every member is there."""
    folder = Path(job.out_dir) / MODELS
    if not folder.is_dir():
        return None
    want, found, files = training_key(job.config), {}, {}
    for path in sorted(folder.glob("*.pt")):
        state = load_checkpoint(path)  # an unreadable file is set aside, never trusted
        if not state or state.get("training") != want or state.get("epoch") != job.epochs:
            continue
        if state.get("experiment") == job.experiment:
            continue  # an experiment's own runs are trained, never filled in from its models
        for index, member in enumerate(state.get("members", [])):
            found[tuple(member)] = (state["engine"], index)
            files[tuple(member)] = path.name
    keys = [tuple(_member(key)) for key in job.members]
    if not all(key in found for key in keys):
        return None
    return [found[key] for key in keys], sorted({files[key] for key in keys})


def evaluate_kept_models(job: Job, engine: Any, store) -> bool:
    """If every member of ``job`` has a kept final model and ``engine`` can load members, evaluate
    them after the last epoch into ``store`` and mark the runs done; returns whether it did."""
    load_members = getattr(engine, "load_members", None)
    kept = _kept_members(job) if load_members is not None else None
    if kept is None:
        return False
    members, files = kept
    load_members(members)
    metadata = json.loads(job.metadata_json) | {"evaluated_kept_models": files}
    for key in job.members:
        store.start_run(key, job.config_json, json.dumps(metadata, sort_keys=True))
    engine.evaluate(job.epochs, store.add)
    store.commit()
    store.finish_runs(job.run_ids, epochs=[job.epochs])
    return True
