"""The one activation factory of the harness: a name (and the GELU form) -> fresh modules.

Both engines build their activations here: the CNNs call the factory once per layer, the stacked
MLP engine once per ensemble (it also checks the module is elementwise and parameter-free). Plain
``"gelu"`` is GELU with ``approximate`` (``model.approximate``); every other name, alias included,
goes through :func:`gelus.get_activation`; a ``module:attribute`` (or ``label=module:attribute``)
activation a researcher brings is imported by :mod:`gelus.experiments.custom_activations`.
"""

from collections.abc import Callable

from torch import nn

import gelus
from gelus.experiments.config import ConfigError, canonical_activation
from gelus.experiments.custom_activations import (
    CustomActivationError,
    is_custom_spec,
    resolve_activation_spec,
)

__all__ = ["activation_factory"]


def activation_factory(name: str, approximate: str = "tanh") -> Callable[[], nn.Module]:
    """A zero-argument callable returning a fresh module of activation ``name``.

    ``name`` resolving to plain ``gelu`` (not an alias that fixes the form, such as ``gelu_new``)
    gives ``gelus.GELU(approximate=approximate)``; ``module:attribute`` gives the user's module
    (checked to build when resolved). Unknown names raise ConfigError with the list of
    valid names; an activation that needs constructor arguments raises ConfigError too.
    """
    if is_custom_spec(name):
        try:
            return resolve_activation_spec(name).factory
        except CustomActivationError as error:
            raise ConfigError(str(error)) from None
    canonical = canonical_activation(name)
    if canonical == "gelu" and name.strip().lower() == "gelu":
        factory = lambda: gelus.get_activation("gelu", approximate=approximate)  # noqa: E731
    else:
        factory = lambda: gelus.get_activation(name)  # noqa: E731
    try:
        factory()  # fail now, not in a worker
    except TypeError as error:
        raise ConfigError(
            f"activation {name!r} needs arguments the harness cannot give: {error}"
        ) from None
    return factory
