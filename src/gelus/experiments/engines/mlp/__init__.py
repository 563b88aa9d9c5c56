"""The stacked-MLP engine: the MNIST, Twitter POS and TIMIT networks, an ensemble per job
(``config.py``, ``engine.py`` the trainer, ``stacked.py`` the ensemble, ``plugin.py``); importing
it registers it."""

from gelus.experiments.config import register_engine
from gelus.experiments.engines.mlp.plugin import MLPPlugin

register_engine(MLPPlugin())
