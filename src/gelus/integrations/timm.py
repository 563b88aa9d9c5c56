"""gelus's activations by name in timm's activation factory (``act_layer="gelus:<name>"``).

timm builds a model's activations with ``timm.layers.get_act_layer(act_layer)``, which passes a
class or callable through and looks a string up in its table of layers. So a gelus class works
without any registration::

    timm.create_model("convnext_atto", act_layer=gelus.GELU)
    timm.create_model("vit_tiny_patch16_224", act_layer=functools.partial(gelus.GELU, approximate="tanh"))

and after :func:`register` a name does too (``act_layer="gelus:gelu_tanh"``), as in a model's
keyword arguments in a config file. timm calls the layer with ``inplace=`` where it wants one;
every gelus member accepts it. A built timm model's own activations (``nn.GELU`` in ViT and
ConvNeXt, timm's ``GELU``/``GELUTanh``/``QuickGELU``/``Swish``/``HardMish``) are put on gelus by
:func:`gelus.patch`.

:func:`register` adds to timm's layer table (``timm.layers.create_act._ACT_LAYER_DEFAULT``, a
private dict: timm has no public registration call; the tests check it against the installed
timm). timm's function table (``get_act_fn``) is not extended.
"""

from gelus.integrations import PREFIX, gelus_names

__all__ = ["PREFIX", "register", "unregister"]


def _table() -> dict:
    from timm.layers import create_act  # only when asked: import gelus stays light

    return create_act._ACT_LAYER_DEFAULT


def register() -> list[str]:
    """Add every ``gelus:<name>`` (:func:`gelus.integrations.gelus_names`) to timm's activation
    layer table, so that ``get_act_layer`` and ``create_model(..., act_layer="gelus:gelu_tanh")``
    resolve it; returns the names, sorted. Calling it again changes nothing.

    Example::

        >>> names = register()
        >>> timm.layers.create_act_layer("gelus:gelu_tanh", inplace=True)
        GELU(approximate='tanh', inplace=True)
    """
    names = gelus_names()
    _table().update(names)
    return sorted(names)


def unregister() -> None:
    """Remove the ``gelus:`` names from timm's layer table; timm's own names are untouched."""
    table = _table()
    for name in [name for name in table if name.startswith(PREFIX)]:
        del table[name]
