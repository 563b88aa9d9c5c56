"""The ViT engine: transformer-vit, the language model's blocks over image patches
(``config.py``, ``engine.py`` the trainer, ``stacked.py`` an activation's runs in one vmap step,
``plugin.py``); importing it registers it."""

from gelus.experiments.config import register_engine
from gelus.experiments.engines.vit.plugin import ViTPlugin

register_engine(ViTPlugin())
