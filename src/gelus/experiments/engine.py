"""The engine protocol: what the harness needs of an engine.

An engine is a plug-in in two parts, registered once
(:func:`gelus.experiments.config.register_engine`), keyed by the type of its config:

* an :class:`EnginePlugin` answers what the harness asks about its config before any job runs: its
  range checks, the samples a run trains on, whether a validation split is kept apart, each
  activation's settings, whether (and how) its runs stack into one job, whether its steps are timed
  after a sweep, how a step is priced, the shape its config is stored and hashed in, and what the
  report says of its setup (``describe_setup``, ``size_keys``, ``init_key``, ``warmup_key``:
  ``report/`` names no engine's keys);
* its trainers (``plugin.trainers``, by the name a ``Job`` carries as ``job.engine``) train the
  runs of one job (a stacked ensemble trains many). The executors, the checkpoints, the Ray path and
  the budget use only this protocol::

      engine = TRAINERS[job.engine](job, data, device)  # model, optimizer, random streams
      engine.train_epoch(epoch)                         # one pass over the training data
      engine.evaluate(epoch, log)                       # log(run, epoch, split, metric, value)
      engine.state() / engine.load_state(state)         # what a checkpoint holds

(``TRAINERS``: :data:`gelus.experiments.config.TRAINERS`.)

:func:`gelus.experiments.driver.train_job` is the loop around it. The harness's core reads of any
config only ``task``, ``dataset``, ``activations``, ``model.approximate``, ``optim.lr`` and
``train.epochs`` / ``batch_size`` / ``seeds``; every other key is the engine's own. The built-in
engines live in :mod:`gelus.experiments.engines`, one package each, which registers them.
"""

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import torch

__all__ = ["Engine", "EnginePlugin", "Log", "check_optimizer_state", "state_mismatch"]

Log = Callable[[Any, int, str, str, float], None]  # (run key, epoch, split, metric, value)


class Engine(Protocol):
    """A trainer of one job's runs (``job``: a :class:`gelus.experiments.plan.Job`)."""

    # whether it evaluates the untrained model as epoch 0 (the paper's MNIST curves start there)
    evaluates_before_training: ClassVar[bool]

    def __init__(self, job: Any, data: Any, device: torch.device) -> None: ...

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


class EnginePlugin:
    """What the harness asks an engine about its config; subclass it, set the class attributes,
    override what differs from these defaults (one run per job, a validation split kept apart,
    one setting per activation) and register an instance
    (:func:`gelus.experiments.config.register_engine`)."""

    name: ClassVar[str]  # its jobs' engine (``Job.engine``) when they are not stacked
    config_type: ClassVar[type]  # the frozen dataclass of its presets' configs
    tasks: ClassVar[tuple[str, ...]]  # the values its config's ``task`` may take
    trainers: ClassVar[Mapping[str, type]]  # Job.engine -> trainer class (``name`` among them)
    one_run_per_job: ClassVar[bool] = True  # else an activation's runs train as one ensemble
    steps_timed: ClassVar[bool] = False  # time each activation's step after a sweep
    amp_key: ClassVar[str | None] = None  # the config key ``gelus run --amp`` sets
    # prefixes of the config keys that shape the model or the training length: the keys a scale or
    # budget axis of the report may move with its size (any other key, a warmup, never is the axis)
    size_keys: ClassVar[tuple[str, ...]] = ("model.", "train.")
    init_key: ClassVar[str | None] = None  # the key choosing the weights' init (the init claims)
    warmup_key: ClassVar[str | None] = None  # the lr warmup's fraction of the steps (its claim)

    def checks(self, config: Any) -> list[tuple[bool, str, str]]:
        """(ok, key, expected) of each range its config must satisfy, beyond the shared ones."""
        return []

    def train_size(self, config: Any, train: int, val: int) -> int:
        """Samples one run trains on, given the sizes of the train and validation splits."""
        return train

    def holds_out_validation(self, config: Any) -> bool:
        """Whether the run's data keep a validation split apart (not trained on)."""
        return True

    def settings(self, config: Any, activation: Any) -> list[tuple[str, float]]:
        """``(setting, dropout keep)`` of each setting ``activation`` runs in."""
        return [("", 1.0)]

    def job_engine(self, config: Any, device: str) -> str:
        """The trainer of ``config``'s jobs on ``device``: ``name``, or a stacked one."""
        return self.name

    def cost_scales_with(self, job_engine: str) -> str | None:
        """What a training step's time is proportional to, for a CPU price timed on a smaller job:
        "members" (a stacked job), "batch", or None (timed whole)."""
        return "members" if job_engine != self.name else None

    def compiles(self, config: Any) -> bool:
        """Whether the step is compiled (its price then warms up over a few steps)."""
        return False

    def config_to_dict(self, config: Any) -> dict[str, Any]:
        """The config as nested plain dicts and lists, as its runs store and hash it."""
        return json.loads(json.dumps(dataclasses.asdict(config)))

    def training_key(self, config: Any) -> Any:
        """The config without what is only evaluated after training (two configs equal here train
        identical runs)."""
        return config

    def check_activation(self, activation: Any) -> None:
        """Raise for an activation its trainers cannot train."""
        self.trainers[self.name].check_activation(activation)

    def check_data(self, config: Any, data: Any) -> None:
        """Raise for data its runs cannot train on (checked before any job starts)."""
        if (check := getattr(self.trainers[self.name], "check_data", None)) is not None:
            check(config, data)

    def device_problem(self, config: Any, device: str) -> tuple[str, str] | None:
        """Why ``config`` cannot run on ``device``, as the parameter to name and the message (a
        ``SettingError`` template); None when it can."""
        return None

    def memory_bytes(self, config: Any, members: int = 1) -> tuple[float, tuple[str, ...]]:
        """(bytes, the config keys that drive them): an estimate, from the config alone, of the
        memory one job of ``members`` runs needs (parameters, optimizer state, the activations of
        one batch), checked against the machine before any job starts; (0, ()) where the engine
        does not estimate it."""
        return 0.0, ()

    def memory_config(self, config: Any, data: Any) -> Any:
        """``config`` as its jobs use memory on ``data``: a size the data cap (an evaluation batch
        larger than the windows to evaluate) at the most the data allow, for ``memory_bytes``;
        ``data`` None before they are loaded (such a size at its least, checked again with them)."""
        return config

    def parameter_count(self, config: Any) -> int | None:
        """The weights one run's model trains, from the config alone (the size a scale axis is
        measured in); None where the engine does not count them."""
        return None

    def token_count(self, config: Any) -> int | None:
        """The training budget of one run in tokens, from the config alone (the unit of a
        training-length axis); None where the engine does not count it."""
        return None

    def text_context(self, config: Any) -> int | None:
        """For a model of byte text: the context a text file must hold windows of; else None (a
        text file's path is then refused as its dataset)."""
        return None

    def evaluated_samples(self, config: Any, train: int, val: int, test: int) -> int:
        """Samples one evaluation reads, given the sizes of the splits (the budget's unit)."""
        return self.trainers[self.name].evaluated_samples(config, train, val, test)

    def random_data(self, config: Any, sizes: tuple[int, int], shape, classes: int):
        """(a dataset of random samples of ``shape`` and ``classes``, its train and test sizes)
        with ``sizes`` = (one batch, evaluated samples): what the budget prices a step on."""
        from gelus.data import Dataset, TensorSplit

        generator = torch.Generator().manual_seed(0)

        def split(n: int) -> TensorSplit:
            images = torch.randint(0, 256, (n, *shape), generator=generator)
            labels = torch.randint(0, max(1, classes), (n,), generator=generator)
            return TensorSplit(images.to(torch.uint8), labels)

        train, test = sizes
        return Dataset(config.dataset, split(train), None, split(test), classes, "random"), sizes

    def predicts_classes(self, flat: Mapping[str, Any]) -> bool:
        """Whether the runs of a stored (flat) config of this engine classify, so that predicting
        the uniform distribution (ln classes) is their trivial loss."""
        return False

    def describe_setup(self, flat: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict:
        """Rows of the report's setup table only this engine can word, from one run's stored flat
        config and metadata: {aspect: text}, e.g. "model" (its shape), "optimizer", "training
        set" (in place of the metadata's sample count); {} where it words none."""
        return {}

    def precision_variants(self, config: Any, compile_mode: str | None) -> list | None:
        """``gelus bench training``'s (autocast, compile mode, config) rows of ``config``; None:
        the config alone."""
        return None


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
