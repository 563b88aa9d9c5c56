"""One table of activations by name. PLACEHOLDER (scaffold)."""

from collections.abc import Callable

from torch import nn

from gelus.modules import GELU

_FACTORIES: dict[str, Callable[..., nn.Module]] = {
    "gelu": GELU,
    "gelu_tanh": lambda: GELU("tanh"),
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "silu": nn.SiLU,
}


def list_activations() -> list[str]:
    """The registered activation names, sorted."""
    return sorted(_FACTORIES)


def get_activation(name: str, **kwargs) -> nn.Module:
    """A fresh module for ``name``."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; valid names: {', '.join(list_activations())}"
        ) from None
    return factory(**kwargs)
