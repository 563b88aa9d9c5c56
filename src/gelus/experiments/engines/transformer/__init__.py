"""The transformer engine: the byte-level language model of transformer-lm (``config.py``,
``engine.py`` the trainer, ``models.py`` the blocks the ViT shares, ``stacked.py`` an
activation's runs in one vmap step, ``plugin.py``); importing it registers it."""

from gelus.experiments.config import register_engine
from gelus.experiments.engines.transformer.plugin import TransformerPlugin

register_engine(TransformerPlugin())
