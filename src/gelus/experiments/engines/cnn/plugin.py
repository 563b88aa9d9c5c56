"""What the harness asks the CNN engine about its config (the engine protocol's plug-in).

One run per job; with ``cnn.retrain_full`` a run trains on train + val; its step is priced at a
smaller batch on the CPU (a step's time is proportional to its batch); fp16 autocast needs CUDA;
``gelus run --amp`` sets ``cnn.amp_dtype``; the stored shape is the one configs had before they
were split per engine (:func:`~gelus.experiments.engines.cnn.config.stored_shape`).
"""

import dataclasses
from typing import Any, ClassVar

from gelus.experiments.engine import EnginePlugin
from gelus.experiments.engines.cnn.config import CNNExperimentConfig, cnn_checks, stored_shape
from gelus.experiments.engines.cnn.engine import CNNEngine

__all__ = ["CNNPlugin"]


class CNNPlugin(EnginePlugin):
    """The CNN engine: the CIFAR-10 all-conv net and the CIFAR-100 WRN, one run per job."""

    name = "cnn"
    config_type = CNNExperimentConfig
    tasks = ("cnn",)
    trainers: ClassVar[dict[str, type]] = {"cnn": CNNEngine}
    amp_key = "cnn.amp_dtype"

    def checks(self, config: CNNExperimentConfig) -> list[tuple[bool, str, str]]:
        return cnn_checks(config)

    def train_size(self, config: CNNExperimentConfig, train: int, val: int) -> int:
        return train + (val if config.cnn.retrain_full else 0)

    def cost_scales_with(self, job_engine: str) -> str:
        return "batch"

    def compiles(self, config: CNNExperimentConfig) -> bool:
        return config.cnn.compile is not None

    def config_to_dict(self, config: CNNExperimentConfig) -> dict[str, Any]:
        return stored_shape(config)

    def device_problem(self, config: CNNExperimentConfig, device: str) -> tuple[str, str] | None:
        if config.cnn.amp_dtype == "fp16" and device != "cuda":
            return "amp", "fp16 autocast ({amp} fp16) needs CUDA; use {amp} bf16 on the CPU"
        return None

    def precision_variants(self, config: CNNExperimentConfig, compile_mode: str | None) -> list:
        """fp32 and bf16 autocast, eager and (with ``compile_mode``) compiled."""
        rows = []
        for mode in (None, compile_mode) if compile_mode else (None,):
            for amp in (None, "bf16"):
                cnn = dataclasses.replace(config.cnn, amp_dtype=amp, compile=mode)
                rows.append((amp, mode, dataclasses.replace(config, cnn=cnn)))
        return rows
