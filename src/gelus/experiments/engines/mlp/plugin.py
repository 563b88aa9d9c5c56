"""What the harness asks the stacked-MLP engine about its config (the engine protocol's plug-in).

Its runs of one activation and setting train as one stacked ensemble (members = seeds × learning
rates); a classifier with a deterministic activation runs once per dropout keep probability; the
autoencoder trains on train + val (``train_on``); the stored shape keeps ``cnn: None``, as every
version of the harness stored it.
"""

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

from gelus.experiments.config import drivers
from gelus.experiments.engine import EnginePlugin
from gelus.experiments.engines.mlp.config import MLPExperimentConfig, NoiseConfig, mlp_checks
from gelus.experiments.engines.mlp.engine import MLPEngine

__all__ = ["IO_WIDTH", "MLPPlugin"]

IO_WIDTH = 1024  # the widest input or output of the MLP presets' data (MNIST's 784 pixels)


class MLPPlugin(EnginePlugin):
    """The stacked-MLP engine: classifiers and the autoencoder of MNIST, Twitter POS and TIMIT."""

    name = "mlp"
    config_type = MLPExperimentConfig
    tasks = ("classify", "autoencode")
    trainers: ClassVar[dict[str, type]] = {"mlp": MLPEngine}
    one_run_per_job = False
    init_key = "model.init"

    def checks(self, config: MLPExperimentConfig) -> list[tuple[bool, str, str]]:
        return mlp_checks(config)

    def train_size(self, config: MLPExperimentConfig, train: int, val: int) -> int:
        n = train + (val if config.train_on == "train+val" else 0)
        return min(n, config.train.train_subset) if config.train.train_subset else n

    def holds_out_validation(self, config: MLPExperimentConfig) -> bool:
        return config.train_on == "train"

    def settings(self, config: MLPExperimentConfig, activation: Any) -> list[tuple[str, float]]:
        """One setting per keep probability for a classifier with a deterministic activation,
        else one (no dropout)."""
        if activation.stochastic or config.task == "autoencode":
            return [("keep=1.0", 1.0)] if config.task == "classify" else [("", 1.0)]
        return [(f"keep={float(keep)!r}", keep) for keep in dict.fromkeys(config.train.keep)]

    def memory_bytes(self, config: MLPExperimentConfig, members: int = 1):
        """Per member, in the config's dtype: 4 copies of the weights (weights, gradients, Adam's
        two moments; the data's input and output widths taken as ``IO_WIDTH`` at most) and 4
        values per unit of one training batch (pre-activation, activation, mask, gradient), or
        one evaluation batch's widest layers if larger."""
        hidden, train = config.model.hidden, config.train
        size = 8 if train.dtype == "float64" else 4
        widths = (IO_WIDTH, *hidden, IO_WIDTH)
        weights = sum(a * b for a, b in itertools.pairwise(widths))
        batch = 4 * train.batch_size * sum(widths)
        evaluation = 2 * train.eval_batch_size * max(widths)
        terms = {
            ("model.hidden",): 4 * weights,
            ("train.batch_size", "model.hidden"): batch,
            ("train.eval_batch_size", "model.hidden"): evaluation,
        }
        keys = drivers(terms)
        return members * size * (4 * weights + max(batch, evaluation)), keys

    def cost_scales_with(self, job_engine: str) -> str:
        return "members"  # one batched matmul per layer for all members

    def config_to_dict(self, config: MLPExperimentConfig) -> dict[str, Any]:
        return super().config_to_dict(config) | {"cnn": None}

    def training_key(self, config: MLPExperimentConfig) -> MLPExperimentConfig:
        return dataclasses.replace(config, noise=NoiseConfig())  # noise is evaluated after

    def predicts_classes(self, flat: Mapping[str, Any]) -> bool:
        task = next((v for k, v in flat.items() if k.rsplit(".", 1)[-1] == "task"), "classify")
        return task == "classify"
