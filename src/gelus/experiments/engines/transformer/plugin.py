"""What the harness asks the transformer engine about its config (the engine protocol's plug-in).

One run per job, or an activation's runs stacked into one job where ``train.stack`` says so on the
device (:func:`~gelus.experiments.engines.transformer.config.stacks_runs`); a run's "epoch" is
``steps_per_epoch`` batches of windows; its steps are timed after a sweep; it trains on byte text,
so a text file's path is a dataset for it; its step is priced on random bytes.
"""

from collections.abc import Mapping
from typing import Any, ClassVar

from gelus.experiments.engine import EnginePlugin
from gelus.experiments.engines.transformer.config import (
    LM_OMITTED_DEFAULTS,
    OMITTED_DEFAULTS,
    TransformerExperimentConfig,
    lm_checks,
    memory_bytes,
    stacks_runs,
    stored_dict,
    weight_count,
)
from gelus.experiments.engines.transformer.describe import blocks_setup, lm_training_set
from gelus.experiments.engines.transformer.engine import TransformerEngine
from gelus.experiments.engines.transformer.stacked import StackedTransformerEngine

__all__ = ["BlocksPlugin", "TransformerPlugin"]

EVAL_WINDOWS = 16  # the budget times an evaluation on this many windows of the context


class BlocksPlugin(EnginePlugin):
    """What the engines built of the transformer blocks (the language model, the ViT) answer
    alike: their steps are timed, ``model.init`` is stored only when set, and an activation's runs
    train stacked (the trainer ``<name>-stacked``) where ``stacks_runs`` says."""

    steps_timed = True
    init_key = "model.init"
    warmup_key = "optim.warmup"
    omitted_defaults: ClassVar[dict[str, Any]] = OMITTED_DEFAULTS  # stored only when set

    def describe_setup(self, flat: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict:
        """The blocks' shape and the AdamW recipe (:mod:`.describe`)."""
        return blocks_setup(flat)

    def config_to_dict(self, config: Any) -> dict[str, Any]:
        return stored_dict(config)  # model.init only when not gpt2: the old runs' hashes hold

    def job_engine(self, config: Any, device: str) -> str:
        return f"{self.name}-stacked" if stacks_runs(config, device) else self.name


class TransformerPlugin(BlocksPlugin):
    """The transformer engine: the byte-level language model of transformer-lm."""

    name = "transformer"
    config_type = TransformerExperimentConfig
    omitted_defaults: ClassVar[dict[str, Any]] = LM_OMITTED_DEFAULTS  # and the budget rule's
    tasks = ("lm",)
    trainers: ClassVar[dict[str, type]] = {
        "transformer": TransformerEngine,
        "transformer-stacked": StackedTransformerEngine,
    }

    def checks(self, config: TransformerExperimentConfig) -> list[tuple[bool, str, str]]:
        return lm_checks(config)

    def describe_setup(self, flat: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict:
        """The blocks' shape, the recipe, and the windows an epoch draws as its training set."""
        return blocks_setup(flat) | lm_training_set(flat, metadata)

    def parameter_count(self, config: TransformerExperimentConfig) -> int:
        """N of :func:`~gelus.experiments.engines.transformer.config.weight_count`."""
        return weight_count(config.model)

    def token_count(self, config: TransformerExperimentConfig) -> int:
        """Bytes one run predicts in training: epochs × steps_per_epoch × batch_size × context
        (the steps derived from ``train.tokens_per_param`` where it is set: about r · N)."""
        train = config.train
        return train.epochs * train.steps_per_epoch * train.batch_size * config.model.context

    def train_size(self, config: TransformerExperimentConfig, train: int, val: int) -> int:
        """The windows of one epoch, steps_per_epoch × batch_size, drawn from the bytes."""
        return config.train.steps_per_epoch * config.train.batch_size

    def memory_bytes(self, config: TransformerExperimentConfig, members: int = 1):
        return memory_bytes(config, config.model.context, members)

    def memory_config(
        self, config: TransformerExperimentConfig, data
    ) -> TransformerExperimentConfig:
        """An evaluation batch holds at most the windows of the larger evaluated split (a
        larger ``train.eval_batch_size`` evaluates them in one batch, needing no more); before
        the data are known (``data`` None), one window: the evaluation is checked with them."""
        import dataclasses

        from gelus.experiments.engines.transformer.engine import eval_starts

        splits = [s for s in (getattr(data, "val", None), getattr(data, "test", None)) if s]
        context, limit = config.model.context, config.train.eval_bytes
        windows = max((len(eval_starts(len(s.data), context, limit)) for s in splits), default=0)
        if config.train.eval_batch_size <= max(1, windows):
            return config
        train = dataclasses.replace(config.train, eval_batch_size=max(1, windows))
        return dataclasses.replace(config, train=train)

    def text_context(self, config: TransformerExperimentConfig) -> int:
        return config.model.context

    def random_data(self, config: TransformerExperimentConfig, sizes, shape, classes: int):
        """A byte corpus of one batch of windows of context + 1 (and a few more) to train on, and
        ``EVAL_WINDOWS`` windows to evaluate (sizes in bytes)."""
        from gelus.data.text import random_text

        window = config.model.context + 1
        train, test = (sizes[0] + 4) * window, EVAL_WINDOWS * window
        return random_text((train, test), name=config.dataset), (train, test)
