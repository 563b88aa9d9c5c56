"""The engine protocol: what the driver, checkpoints, Ray and the budget need of a trainer.

An engine trains the runs of one ``Job`` (a stacked ensemble trains many at once). The executors,
the checkpoints, the Ray path and the budget use only this protocol::

    engine = ENGINES[job.engine](job, data, device)   # prepare: model, optimizer, randomness
    engine.train_epoch(epoch)                         # one pass over the training data
    engine.evaluate(epoch, log)                       # log(run, epoch, split, metric, value)
    engine.state() / engine.load_state(state)         # what a checkpoint holds

:func:`gelus.experiments.driver.train_job` is the loop around it. A new engine plugs in by adding
its class to ``driver.ENGINES`` (and its config to :mod:`gelus.experiments.config`). Optionally
it has ``check_data(config, data)``, which ``run.resolve_run`` calls on the loaded dataset before
any job starts (the transformer checks that its corpus holds a few windows of its context).
"""

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import torch

from gelus.experiments.plan import Job
from gelus.experiments.records import RunKey

__all__ = ["Engine", "Log", "check_optimizer_state", "state_mismatch"]

Log = Callable[[RunKey, int, str, str, float], None]  # (run, epoch, split, metric, value)


class Engine(Protocol):
    """A trainer of one job's runs."""

    # whether it evaluates the untrained model as epoch 0 (the paper's MNIST curves start there)
    evaluates_before_training: ClassVar[bool]

    def __init__(self, job: Job, data: Any, device: torch.device) -> None: ...

    @staticmethod
    def check_activation(activation: Any) -> None:
        """Raise ConfigError for an ``ActivationSpec`` this engine cannot train (checked before
        any job starts)."""

    def train_epoch(self, epoch: int) -> None:
        """Train every run of the job for one pass, the 1-based ``epoch``."""

    def evaluate(self, epoch: int, log: Log) -> None:
        """Evaluate every run after ``epoch`` and ``log`` each metric."""

    def state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (tensors and plain data only)."""

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state``; it has been checked to fit (``state_mismatch``)."""

    @classmethod
    def evaluated_samples(cls, config: Any, train: int, val: int, test: int) -> int:
        """Samples one ``evaluate`` reads, given the sizes of the splits (the budget's unit)."""


def state_mismatch(fresh: Any, saved: Any, where: str = "state") -> str | None:
    """Where ``saved`` differs in structure, tensor shape or dtype from ``fresh`` (None: it fits).

    Lazily created entries (an optimizer's per-parameter state is empty until its first step)
    are checked against the parameters by the engine's ``load_state``.
    """
    if isinstance(fresh, torch.Tensor):
        if not isinstance(saved, torch.Tensor):
            return f"{where} is a {type(saved).__name__}, not a tensor"
        if saved.shape != fresh.shape or saved.dtype != fresh.dtype:
            return (
                f"{where} is {tuple(saved.shape)} {saved.dtype}, the job's is "
                f"{tuple(fresh.shape)} {fresh.dtype}"
            )
        return None
    if isinstance(fresh, Mapping):
        if not isinstance(saved, Mapping):
            return f"{where} is a {type(saved).__name__}, not a mapping"
        if fresh and set(fresh) != set(saved):
            missing = sorted(map(str, set(fresh) ^ set(saved)))[:3]
            return f"{where} has other entries ({', '.join(missing)})"
        for key, value in fresh.items():
            if (problem := state_mismatch(value, saved[key], f"{where}.{key}")) is not None:
                return problem
        return None
    if isinstance(fresh, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(fresh):
            return f"{where} has another length"
        for i, (a, b) in enumerate(zip(fresh, saved, strict=True)):
            if (problem := state_mismatch(a, b, f"{where}[{i}]")) is not None:
                return problem
    return None


def check_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Raise ValueError unless every per-parameter state tensor of ``optimizer`` (loaded from a
    checkpoint) has its parameter's shape: ``load_state_dict`` does not check."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            for name, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor) and value.ndim and value.shape != param.shape:
                    raise ValueError(
                        f"optimizer state {name} is {tuple(value.shape)}, its parameter "
                        f"{tuple(param.shape)}"
                    )
