"""gelus's activations by name in Hugging Face transformers' configs (``hidden_act``).

After :func:`register`, a config may name a gelus activation with the ``gelus:`` prefix::

    import gelus.integrations.huggingface
    from transformers import BertConfig, BertModel

    gelus.integrations.huggingface.register()
    model = BertModel(BertConfig(hidden_act="gelus:gelu_tanh"))  # gelus.GELU("tanh") in each layer
    model.save_pretrained("out")  # config.json keeps "gelus:gelu_tanh"
    BertModel.from_pretrained("out")  # gelus's again, in any process that called register()

transformers resolves ``hidden_act`` (and ``activation_function``, ``hidden_activation``, …)
through ``transformers.activations.ACT2FN``, a table of name -> class whose lookup returns a
fresh module, and a few models through its source table ``ACT2CLS``; :func:`register` adds the
gelus names to both. A process that has not called it fails to build such a model
(``KeyError: 'gelus:gelu_tanh'`` from ``ACT2FN``); it never falls back to transformers' own
activation.

Hugging Face's own names (``gelu``, ``gelu_new``, ``gelu_pytorch_tanh``, ``quick_gelu``, …) are
left alone: a config that says ``gelu_new`` still gets transformers' ``NewGELUActivation``. To
run such a model on gelus, call :func:`gelus.patch` on the built model (in each process: the
saved config keeps the Hugging Face name), or set the config's name to the gelus one
(``gelus:gelu_tanh``) before building, which is saved.
"""

from gelus.integrations import PREFIX, gelus_names

__all__ = ["PREFIX", "register", "unregister"]


def _tables():
    from transformers import activations  # only when asked: import gelus stays light

    return activations.ACT2FN, activations.ACT2CLS


def register() -> list[str]:
    """Add every ``gelus:<name>`` (:func:`gelus.integrations.gelus_names`) to transformers'
    ``ACT2FN`` and ``ACT2CLS``; returns the names, sorted. Calling it again changes nothing.

    Example::

        >>> register()[:3]
        ['gelus:clipped_gelu', 'gelus:gelu', 'gelus:gelu_10']
        >>> transformers.activations.ACT2FN["gelus:gelu_new"]
        GELU(approximate='tanh')
    """
    names = gelus_names()
    for table in _tables():
        table.update(names)
    return sorted(names)


def unregister() -> None:
    """Remove the ``gelus:`` names from transformers' tables (a config naming one fails to load
    again); transformers' own names are untouched."""
    for table in _tables():
        for name in [name for name in table if name.startswith(PREFIX)]:
            del table[name]
