"""One table of activations by name, and the historical names users arrive with as declared aliases.

Canonical names are the names of the math (``gelu`` with ``approximate="none" | "tanh" |
"sigmoid"``, ``silu``, ``generalized_gelu``, …), the activations of other libraries that have no
GELU-family name (Hugging Face's ``laplace``, ``relu2``, ``sqrtsoftplus``, ``xielu``; timm's
``hard_mish``), plus the baselines the paper compares against.
Names from other libraries resolve through :data:`ALIASES`, a table
``alias -> Alias(canonical, kwargs, source)``; e.g. Hugging Face's five names for the tanh form
(``gelu_new``, ``gelu_fast``, ``gelu_accurate``, ``gelu_pytorch_tanh``, ``gelu_python_tanh``) all
resolve to ``gelu`` with ``approximate="tanh"``.

Lookup is case-insensitive and treats ``-``, ``_`` and spaces alike (``"GELU-tanh"`` works).

Notes on names that mean different things elsewhere:
  * ``gelu`` is the exact form here, as in PyTorch, Hugging Face and timm. JAX's
    ``jax.nn.gelu`` and Keras's ``keras.ops.gelu`` default to the **tanh** form
    (``keras.activations.gelu`` defaults to exact): code ported from them wants ``gelu_tanh``.
  * NVIDIA Transformer Engine's ``gelu`` is the tanh form and is therefore not aliased; its
    ``qgelu`` is the sigmoid form. Its ``geglu`` applies GELU to the *first* half, ours to the
    second, so it is not aliased either.
"""

import copy
import difflib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from torch import Tensor, nn

from gelus import _members, modules

__all__ = [
    "ACTIVATIONS",
    "ALIASES",
    "Alias",
    "FunctionActivation",
    "UnknownActivationError",
    "get_activation",
    "list_activations",
    "resolve_activation",
]


def _identity() -> nn.Identity:
    # nn.Identity swallows any argument; a factory without parameters rejects them.
    return nn.Identity()


# canonical name -> module class (or factory); keyword arguments go to it
ACTIVATIONS: Mapping[str, Callable[..., nn.Module]] = MappingProxyType(
    {
        # the members, as gelus._members lists them: the GELU family, then names from Hugging
        # Face and timm, each its own math (see gelus._extra)
        **{m.name: getattr(modules, m.module) for m in _members.MEMBERS},
        # baselines the paper compares against, and other common choices
        "relu": nn.ReLU,
        "elu": nn.ELU,
        "leaky_relu": nn.LeakyReLU,
        "prelu": nn.PReLU,
        "selu": nn.SELU,
        "celu": nn.CELU,
        "relu6": nn.ReLU6,
        "softplus": nn.Softplus,
        "mish": nn.Mish,
        "hardswish": nn.Hardswish,
        "hardsigmoid": nn.Hardsigmoid,
        "tanh": nn.Tanh,
        "sigmoid": nn.Sigmoid,
        "identity": _identity,
    }
)


class Alias(NamedTuple):
    """A name from elsewhere: the canonical activation it means, the arguments it fixes, where it comes from."""

    canonical: str
    kwargs: Mapping[str, Any]
    source: str


_EXACT: Mapping[str, Any] = MappingProxyType({"approximate": "none"})
_TANH: Mapping[str, Any] = MappingProxyType({"approximate": "tanh"})
_SIGMOID: Mapping[str, Any] = MappingProxyType({"approximate": "sigmoid"})
_HF = "Hugging Face transformers ACT2FN"

ALIASES: Mapping[str, Alias] = MappingProxyType(
    {
        # Hugging Face transformers (src/transformers/activations.py)
        "gelu_python": Alias("gelu", _EXACT, f"{_HF}: x·½(1 + erf(x/√2)) in Python"),
        "gelu_new": Alias("gelu", _TANH, f"{_HF}: NewGELUActivation (OpenAI GPT-2, Google BERT)"),
        "gelu_fast": Alias(
            "gelu", _TANH, f"{_HF}: FastGELUActivation, x·0.7978845608·(1 + 0.044715x²)"
        ),
        "gelu_accurate": Alias("gelu", _TANH, f"{_HF}: AccurateGELUActivation (MEGA)"),
        "gelu_pytorch_tanh": Alias("gelu", _TANH, f"{_HF}: F.gelu(x, approximate='tanh')"),
        "gelu_python_tanh": Alias("gelu", _TANH, f"{_HF}: tanh form in Python"),
        "gelu_10": Alias(
            "clipped_gelu",
            MappingProxyType({"min": -10.0, "max": 10.0, "approximate": "none"}),
            f"{_HF}: ClippedGELUActivation(-10, 10), exact GELU clipped to [-10, 10]",
        ),
        "quick_gelu": Alias("gelu", _SIGMOID, f"{_HF}, timm, OpenAI CLIP: x·σ(1.702x)"),
        "linear": Alias("identity", {}, f"{_HF}: LinearActivation"),
        # timm (timm/layers/create_act.py)
        "gelu_tanh": Alias("gelu", _TANH, "timm: GELUTanh, F.gelu(x, approximate='tanh')"),
        "hard_swish": Alias("hardswish", {}, "timm"),
        "hard_sigmoid": Alias("hardsigmoid", {}, "timm"),
        # NVIDIA Transformer Engine
        "qgelu": Alias("gelu", _SIGMOID, "NVIDIA Transformer Engine: QuickGELU, x·σ(1.702x)"),
        # names of the math
        "gelu_erf": Alias("gelu", _EXACT, "the exact form by its formula, x·½(1 + erf(x/√2))"),
        "gelu_exact": Alias("gelu", _EXACT, "the exact form"),
        "gelu_sigmoid": Alias("gelu", _SIGMOID, "the sigmoid form x·σ(1.702x)"),
        "soi_map": Alias("stochastic_gelu", {}, "the GELU paper's 2016 draft: stochastic 0-I map"),
    }
)


def _normalize(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def list_activations(aliases: bool = False) -> list[str]:
    """The canonical activation names, sorted; with ``aliases=True`` the declared aliases too."""
    names = list(ACTIVATIONS)
    if aliases:
        names += list(ALIASES)
    return sorted(names)


class UnknownActivationError(KeyError, ValueError):
    """An activation name that is neither registered nor a declared alias.

    Both a ``KeyError`` (as Hugging Face's ``get_activation`` raises) and a ``ValueError``.
    """

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def resolve_activation(name: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    """Map a name (canonical or alias, any case, ``-`` or ``_``) to ``(canonical, kwargs)``.

    The alias's fixed arguments are merged with ``kwargs``; contradicting one is an error
    (``resolve_activation("gelu_tanh", approximate="none")``).

        >>> resolve_activation("gelu_new")
        ('gelu', {'approximate': 'tanh'})
    """
    key = _normalize(name)
    if key in ACTIVATIONS:
        return key, dict(kwargs)
    if key in ALIASES:
        alias = ALIASES[key]
        for arg, value in kwargs.items():
            if arg in alias.kwargs and alias.kwargs[arg] != value:
                raise ValueError(
                    f"activation {name!r} means {alias.canonical!r} with {arg}={alias.kwargs[arg]!r}; "
                    f"for {arg}={value!r} ask for {alias.canonical!r} instead"
                )
        return alias.canonical, {**alias.kwargs, **kwargs}
    raise _unknown(name, key)


def _unknown(name: object, key: str | None = None) -> UnknownActivationError:
    """The error for a name that is not registered: the closest names, then every name."""
    close = difflib.get_close_matches(key, list_activations(aliases=True), n=3) if key else []
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return UnknownActivationError(
        f"unknown activation {name!r}.{hint} Valid names: {', '.join(list_activations())}; "
        f"aliases: {', '.join(sorted(ALIASES))}."
    )


class FunctionActivation(nn.Module):
    """Wraps a plain tensor -> tensor function (e.g. ``torch.tanh``) as a module, with fixed kwargs."""

    def __init__(self, function: Callable[..., Tensor], **kwargs: Any) -> None:
        super().__init__()
        self.function = function
        self.kwargs = kwargs

    def forward(self, x: Tensor) -> Tensor:
        return self.function(x, **self.kwargs)

    def extra_repr(self) -> str:
        name = getattr(self.function, "__qualname__", repr(self.function))
        return ", ".join([name] + [f"{k}={v!r}" for k, v in self.kwargs.items()])


def get_activation(
    name: str | type[nn.Module] | nn.Module | Callable[..., Tensor], **kwargs: Any
) -> nn.Module:
    """A fresh activation module for ``name``; every call returns a new object.

    ``name`` may be:
      * a string: a canonical name (:func:`list_activations`) or a declared alias
        (:data:`ALIASES`); ``kwargs`` go to the module's constructor;
      * an ``nn.Module`` subclass: instantiated with ``kwargs`` (timm's ``create_act_layer``);
      * an ``nn.Module`` instance: a deep copy is returned, so that building N layers from one
        prototype never ties their parameters (pass the instance itself if you want sharing);
      * any other callable ``f(x, **kwargs)``: wrapped in :class:`FunctionActivation`.

    An unknown name, or ``None``, raises :class:`UnknownActivationError` (a ``ValueError`` and
    a ``KeyError``, as Hugging Face's ``get_activation(None)`` raises ``KeyError``) listing the
    valid names and the closest matches.

    Example::

        >>> get_activation("gelu_new")           # Hugging Face name for the tanh form
        GELU(approximate='tanh')
        >>> get_activation("generalized_gelu", num_channels=128)
        GeneralizedGELU(num_channels=128, channel_dim=-1, learnable=True)
    """
    if name is None:  # a config without an activation: Hugging Face's lookup raises KeyError
        raise _unknown(name)
    if isinstance(name, str):
        canonical, arguments = resolve_activation(name, **kwargs)
        try:
            return ACTIVATIONS[canonical](**arguments)
        except TypeError as error:
            raise TypeError(f"activation {name!r} ({canonical}): {error}") from error
    if isinstance(name, nn.Module):
        if kwargs:
            raise TypeError(
                f"get_activation got a module instance ({type(name).__name__}) and keyword "
                f"arguments {sorted(kwargs)}; pass the class to construct it with arguments"
            )
        return copy.deepcopy(name)
    if isinstance(name, type) and issubclass(name, nn.Module):
        return name(**kwargs)
    if callable(name):
        return FunctionActivation(name, **kwargs)
    raise TypeError(
        f"get_activation expects a name, an nn.Module class or instance, or a callable; "
        f"got {type(name).__name__}"
    )
