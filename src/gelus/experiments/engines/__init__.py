"""The built-in engines, one package each (its config, trainer, models and plug-in together),
registered in this order (``gelus.experiments`` imports this package first): the stacked MLPs, the
CNNs, the language model, the ViT. Another engine registers itself the same way
(:func:`gelus.experiments.config.register_engine`) without touching the harness."""

from gelus.experiments.engines import cnn, mlp, transformer, vit

__all__ = ["cnn", "mlp", "transformer", "vit"]
