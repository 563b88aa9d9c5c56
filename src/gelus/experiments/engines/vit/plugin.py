"""What the harness asks the ViT engine about its config (the engine protocol's plug-in).

One run per job, or an activation's runs stacked into one job where ``train.stack`` says so on the
device (the language model's rule); ``train.train_subset`` cuts the training images; its steps are
timed after a sweep.
"""

from typing import ClassVar

from gelus.experiments.engines.transformer.config import memory_bytes
from gelus.experiments.engines.transformer.plugin import BlocksPlugin
from gelus.experiments.engines.vit.config import ViTExperimentConfig, vit_checks
from gelus.experiments.engines.vit.engine import ViTEngine
from gelus.experiments.engines.vit.stacked import StackedViTEngine

__all__ = ["ViTPlugin"]


class ViTPlugin(BlocksPlugin):
    """The ViT engine: transformer-vit, the language model's blocks over image patches."""

    name = "vit"
    config_type = ViTExperimentConfig
    tasks = ("vit",)
    trainers: ClassVar[dict[str, type]] = {"vit": ViTEngine, "vit-stacked": StackedViTEngine}

    def checks(self, config: ViTExperimentConfig) -> list[tuple[bool, str, str]]:
        return vit_checks(config)

    def train_size(self, config: ViTExperimentConfig, train: int, val: int) -> int:
        return min(train, config.train.train_subset) if config.train.train_subset else train

    def memory_bytes(self, config: ViTExperimentConfig, members: int = 1):
        """The transformer's estimate over the patches of a 28 × 28 image (and a class token)."""
        tokens = (28 // config.model.patch) ** 2 + 1
        return memory_bytes(config, tokens, members)
