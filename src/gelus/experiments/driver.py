"""The one driver: trains any engine's job with records, checkpoints and exact resume.

``train_job`` resumes from the job's checkpoint if it fits the job (its epoch within the job's,
every tensor the shape and dtype of the freshly built engine's; otherwise the checkpoint is set
aside with one line saying why, and the job restarts), registers the runs, then per epoch trains,
evaluates, logs the wall time, commits the records, checkpoints and reports progress. The runs are
marked done only when every epoch's records are in. All of it runs inside one guard
(:func:`gelus.experiments.guard.guarded`): a user activation's failure, or memory running out, is
one error naming the activation or the settings and the phase, the job's runs marked ``failed``.
"""

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from gelus.experiments.checkpoint import load_checkpoint, save_checkpoint, set_aside
from gelus.experiments.config import trainer_for
from gelus.experiments.engine import state_mismatch
from gelus.experiments.guard import Phase, guarded
from gelus.experiments.plan import Job
from gelus.experiments.reuse import evaluate_kept_models, keep_models

__all__ = ["train_job"]


def train_job(job: Job, data: Any, store, progress: Callable[[int], None]) -> None:
    """Train ``job`` to its last epoch, resuming from its checkpoint when that fits the job.

    ``store`` has RecordStore's ``start_run``, ``add``, ``commit`` and ``finish_runs``;
    ``progress(epoch)`` is called with the epochs done (first with those resumed).
    """
    device = torch.device(job.device)
    with guarded(job, store, Phase("model building")) as phase:
        engine = trainer_for(job.engine)(job, data, device)
        phase.now = "evaluation of the kept models"
        if evaluate_kept_models(job, engine, store):  # trained before, by another experiment
            progress(job.epochs)
            return
        path = Path(job.checkpoint_path)
        phase.now = "checkpoint loading"
        start_epoch, seconds = _resume(job, engine, path)
        for key in job.members:
            store.start_run(key, job.config_json, job.metadata_json)
        epochs = job.epochs
        every = getattr(job.config.train, "checkpoint_every", 1)
        if start_epoch == 0 and engine.evaluates_before_training:
            phase.now = "evaluation before training"
            engine.evaluate(0, store.add)
            store.commit()
        progress(start_epoch)
        for epoch in range(start_epoch + 1, epochs + 1):
            began = time.perf_counter()
            phase.now = f"training epoch {epoch}"
            engine.train_epoch(epoch)
            phase.now = f"evaluation after epoch {epoch}"
            engine.evaluate(epoch, store.add)
            seconds += time.perf_counter() - began
            for key in job.members:
                store.add(key, epoch, "train", "seconds", seconds)
            store.commit()  # records before the checkpoint: a resumed epoch never lacks its records
            if epoch % every == 0 or epoch == epochs:
                state = {"run_ids": job.run_ids, "epoch": epoch, "seconds": seconds}
                save_checkpoint(path, state | {"engine": engine.state()})
            progress(epoch)
        first = 0 if engine.evaluates_before_training else 1
        store.finish_runs(job.run_ids, epochs=range(first, epochs + 1))
        phase.now = "final model saving"
        keep_models(job, engine)
    path.unlink(missing_ok=True)


def _resume(job: Job, engine, path: Path) -> tuple[int, float]:
    """(epoch, seconds) of the job's checkpoint, its state loaded into ``engine``; (0, 0.0) when
    there is none or it does not fit (then it is set aside with one line saying why)."""
    state = load_checkpoint(path)
    if state is None:
        return 0, 0.0
    if state.get("run_ids") != job.run_ids:
        return 0, 0.0  # another composition of members (the sweep was extended): start afresh
    epoch = state.get("epoch")
    problem = None
    if not isinstance(epoch, int) or not 0 < epoch <= job.epochs:
        problem = f"its epoch {epoch!r} is not within this job's 1..{job.epochs}"
    elif not isinstance(state.get("engine"), Mapping):
        problem = "it holds no engine state"
    else:
        problem = state_mismatch(engine.state(), state["engine"])
    if problem is None:
        try:
            engine.load_state(state["engine"])
        except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as error:
            problem = f"it does not load ({type(error).__name__}: {str(error)[:200]})"
    if problem is not None:
        set_aside(path, f"does not fit this job: {problem}")
        return 0, 0.0
    return epoch, float(state.get("seconds", 0.0))
