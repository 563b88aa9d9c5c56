"""gelus in other libraries' name tables: Hugging Face transformers' ``hidden_act`` and timm's
``act_layer`` (docs/INTEGRATIONS.md).

    gelus.integrations.huggingface.register()   "gelus:<name>" in transformers' ACT2FN / ACT2CLS
    gelus.integrations.timm.register()          "gelus:<name>" in timm's get_act_layer

Each submodule imports its library when its ``register`` is called, never on ``import gelus``.
Names are namespaced (``gelus:gelu_tanh``) so that a config naming a gelus activation never
loads as the other library's own activation: in a process that has not registered them, the name
is unknown and building the model fails with the library's own error.
"""

import functools
from collections.abc import Callable

from torch import nn

__all__ = ["PREFIX", "gelus_names"]

PREFIX = "gelus:"


def gelus_names() -> dict[str, Callable[..., nn.Module]]:
    """``"gelus:<name>" -> factory`` for every gelus name that works as a model's activation.

    A name qualifies (canonical or alias, :func:`gelus.list_activations`) when its module is a
    gelus member that builds without arguments and keeps the input's shape: not the gated
    GEGLU/SwiGLU/ReGLU (they halve a dimension), not BiasGELU (it needs ``num_features``), not
    torch's own classes that the registry also names (``relu``, ``tanh``, …). The factory,
    ``functools.partial(gelus.get_activation, name)``, returns a fresh module per call and takes
    keyword arguments (timm passes ``inplace``).
    """
    from gelus.modules import GatedMember
    from gelus.registry import get_activation, list_activations

    names = {}
    for name in list_activations(aliases=True):
        try:
            module = get_activation(name)
        except TypeError:  # needs arguments (bias_gelu's num_features)
            continue
        if type(module).__module__.startswith("gelus.") and not isinstance(module, GatedMember):
            names[PREFIX + name] = functools.partial(get_activation, name)
    return names
