"""The CNN engine: the CIFAR networks, one run per job (``config.py``, ``engine.py`` the trainer,
``models.py``, ``data.py`` the CIFAR preprocessing, ``plugin.py``); importing it registers it."""

from gelus.experiments.config import register_engine
from gelus.experiments.engines.cnn.plugin import CNNPlugin

register_engine(CNNPlugin())
