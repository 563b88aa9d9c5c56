"""``gelus.patch(model)``: put gelus's members into a built model, in place.

Each activation module whose class computes exactly the function of a gelus member is replaced by
that member (the tanh form stays the tanh form, the sigmoid form the sigmoid form). Classes are
recognised by their module and name (``type(m).__module__``, ``__qualname__``), so nothing from
Hugging Face transformers or timm is imported here: a model that holds their classes has imported
them already. Each mapped class's formula was read in the installed source (transformers 5.24,
timm 1.0.31; docs/INTEGRATIONS.md) and is checked against the real class by
tests/integrations/.
"""

from collections.abc import Callable
from typing import NamedTuple

from torch import nn

from gelus.modules import (
    GELU,
    XIELU,
    ClippedGELU,
    HardMish,
    Laplace,
    QuickGELU,
    ReLU2,
    SiLU,
    SqrtSoftplus,
)

__all__ = ["LeftAlone", "PatchReport", "Replaced", "patch"]


def _inplace(module: nn.Module) -> bool:
    # torch's and timm's in-place flag; classes that accept and ignore it store none
    return bool(getattr(module, "inplace", False))


def _with_state(new: nn.Module, old: nn.Module) -> nn.Module:
    """``new`` with ``old``'s parameters and buffers: same names, values, dtype and device."""
    tensor = next(iter(old.state_dict().values()))
    new = new.to(device=tensor.device, dtype=tensor.dtype)
    new.load_state_dict(old.state_dict())
    return new


_TORCH = "torch.nn.modules.activation"
_HF = "transformers.activations"
_TIMM = "timm.layers.activations"
_TIMM_ME = "timm.layers.activations_me"

# (class module, class name) -> the gelus member computing the same function, built from the old
# module. Each line names the formula of the class it maps (as the installed source has it).
_MEMBERS: dict[tuple[str, str], Callable[[nn.Module], nn.Module]] = {
    # torch: F.gelu(x, approximate) with "none" or "tanh"; F.silu(x) = x·σ(x)
    (_TORCH, "GELU"): lambda m: GELU(m.approximate),
    (_TORCH, "SiLU"): lambda m: SiLU(inplace=_inplace(m)),
    # Hugging Face: F.gelu(x) or x·½(1 + erf(x/√2)) in Python
    (_HF, "GELUActivation"): lambda m: GELU("none"),
    # ½x·(1 + tanh(√(2/π)·(x + 0.044715x³))): F.gelu(x, "tanh"), or in Python, or with
    # √(2/π) written 0.7978845608 (FastGELU: 3.6e-12 relative, below float32's rounding)
    (_HF, "GELUTanh"): lambda m: GELU("tanh"),
    (_HF, "PytorchGELUTanh"): lambda m: GELU("tanh"),
    (_HF, "NewGELUActivation"): lambda m: GELU("tanh"),
    (_HF, "FastGELUActivation"): lambda m: GELU("tanh"),
    (_HF, "AccurateGELUActivation"): lambda m: GELU("tanh"),
    (_HF, "QuickGELUActivation"): lambda m: QuickGELU(),  # x·σ(1.702x)
    (_HF, "SiLUActivation"): lambda m: SiLU(),  # F.silu(x)
    # clip(F.gelu(x), min, max); gelu_10 is (−10, 10)
    (_HF, "ClippedGELUActivation"): lambda m: ClippedGELU(m.min, m.max, "none"),
    (_HF, "LaplaceActivation"): lambda m: Laplace(),  # ½(1 + erf((x − μ)/(σ√2)))
    (_HF, "ReLUSquaredActivation"): lambda m: ReLU2(),  # relu(x)²
    (_HF, "SqrtSoftplusActivation"): lambda m: SqrtSoftplus(),  # √softplus(x)
    (_HF, "XIELUActivation"): lambda m: _with_state(XIELU(), m),  # same parameter names
    # timm: F.gelu(x), F.gelu(x, "tanh"), x·σ(1.702x), x·σ(x), ½x·clamp(x + 2, 0, 2)
    (_TIMM, "GELU"): lambda m: GELU("none"),
    (_TIMM, "GELUTanh"): lambda m: GELU("tanh"),
    (_TIMM, "QuickGELU"): lambda m: QuickGELU(),
    (_TIMM, "Swish"): lambda m: SiLU(inplace=_inplace(m)),
    (_TIMM, "HardMish"): lambda m: HardMish(inplace=_inplace(m)),
    (_TIMM_ME, "SwishMe"): lambda m: SiLU(),  # custom autograd, same function; no in-place
    (_TIMM_ME, "HardMishMe"): lambda m: HardMish(),
}

# modules whose activation classes patch knows: an unmapped class of theirs is listed
_ACTIVATION_MODULES = (_HF, _TIMM, _TIMM_ME)
# words in a class name that say "an activation of the family": such a class is listed if unmapped
_FAMILY_WORDS = ("gelu", "silu", "swish")


class Replaced(NamedTuple):
    """One place in the model that now holds a gelus member: its qualified name, the module it
    held, the module it holds. A shared instance gives one entry per place, with the same ``new``."""

    name: str
    old: nn.Module
    new: nn.Module


class LeftAlone(NamedTuple):
    """One place whose activation patch did not replace, and why."""

    name: str
    module: nn.Module
    reason: str


class PatchReport(NamedTuple):
    """What :func:`patch` did: ``replaced`` and ``left_alone``, in the order of ``named_modules``."""

    replaced: list[Replaced]
    left_alone: list[LeftAlone]

    def __str__(self) -> str:
        lines = [f"gelus.patch: {len(self.replaced)} replaced, {len(self.left_alone)} left alone"]
        lines += [f"  {r.name}: {_named(r.old)} -> {_named(r.new)}" for r in self.replaced]
        lines += [f"  {a.name}: {_named(a.module)} left alone: {a.reason}" for a in self.left_alone]
        return "\n".join(lines)


def _named(module: nn.Module) -> str:
    """The module's repr with its class's module: whose GELU it is (torch's, timm's, gelus's)."""
    where = type(module).__module__
    return f"{'gelus' if where.startswith('gelus.') else where}.{module!r}"


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def _has_hooks(module: nn.Module) -> bool:
    return any(
        getattr(module, hooks, None)
        for hooks in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
        )
    )


def _decide(module: nn.Module) -> nn.Module | str | None:
    """The gelus member for ``module``, or why it is left alone (a str), or None: not an
    activation of the family (nn.ReLU, a Linear, a container, a gelus module)."""
    cls = type(module)
    if cls.__module__.split(".")[0] == "gelus":
        return None
    convert = _MEMBERS.get(_key(cls))
    if convert is not None:
        if _has_hooks(module):
            return "it has hooks, which a new module would not carry"
        return convert(module).train(module.training)
    if next(module.children(), None) is not None:  # a block, not an activation: look inside
        return None
    for base in cls.__mro__[1:]:
        if _key(base) in _MEMBERS:
            return f"a subclass of {base.__module__}.{base.__qualname__}; its forward may differ"
    if cls.__module__ in _ACTIVATION_MODULES:
        return f"gelus has no member computing {cls.__qualname__}'s function"
    if cls.__module__.startswith("torch."):  # torch's others (nn.Hardswish): not of the family
        return None
    if any(word in cls.__name__.lower() for word in _FAMILY_WORDS):
        return f"{cls.__module__}.{cls.__qualname__} is not a class patch knows the formula of"
    return None


def patch(model: nn.Module) -> PatchReport:
    r"""Replace, in place, every activation of ``model`` that a gelus member computes exactly.

    Mapped (each to the member with the same function; docs/INTEGRATIONS.md lists every class):

    ========================================================  =================================
    class                                                     gelus member
    ========================================================  =================================
    ``nn.GELU()``, HF ``GELUActivation``, timm ``GELU``        ``GELU("none")``: x·Φ(x)
    ``nn.GELU(approximate="tanh")``, HF ``GELUTanh``,          ``GELU("tanh")``:
    ``NewGELUActivation``, ``FastGELUActivation``,             ½x·(1 + tanh(√(2/π)(x + 0.044715x³)))
    ``AccurateGELUActivation``, timm ``GELUTanh``
    HF ``QuickGELUActivation``, timm ``QuickGELU``             ``QuickGELU()``: x·σ(1.702x)
    ``nn.SiLU``, HF ``SiLUActivation``, timm ``Swish``,        ``SiLU()``: x·σ(x)
    ``SwishMe``
    HF ``ClippedGELUActivation(min, max)`` (``gelu_10``)       ``ClippedGELU(min, max)``
    HF ``LaplaceActivation``, ``ReLUSquaredActivation``,       ``Laplace``, ``ReLU2``,
    ``SqrtSoftplusActivation``, ``XIELUActivation``;           ``SqrtSoftplus``, ``XIELU``;
    timm ``HardMish``, ``HardMishMe``                          ``HardMish``
    ========================================================  =================================

    The new module keeps the old one's ``inplace`` flag (where the old honoured it), its
    training mode, and its parameters (XIELU's, by their names; dtype and device with them), so
    ``state_dict`` keys and the parameter count do not change. A module shared by several places
    is replaced by one new module at all of them. Modules in ``nn.ModuleList``/``nn.ModuleDict``
    are found like any other. Hooks registered on an activation module are not carried over, so a
    module with hooks is left alone.

    Left alone and listed: an activation of Hugging Face's or timm's that gelus has no member for
    (HF ``MishActivation``, ``LinearActivation``; timm ``Mish``, ``Sigmoid``, ``Tanh``,
    ``HardSwish``, ``HardSigmoid``, ``PReLU``, …); a subclass of a mapped class (its forward may
    differ); any other class whose name says GELU, SiLU or Swish (its formula is not known here:
    a model's own ``GELU`` with another constant). Not listed: torch's other activations
    (``nn.ReLU``, ``nn.Hardswish``, ``nn.Mish``, …), which are not of the family, and gelus's own modules.

    Nothing from transformers or timm is imported: classes are recognised by module and name.

    Returns:
        A :class:`PatchReport`: ``replaced``, a list of :class:`Replaced` ``(name, old, new)``
        (one per place), and ``left_alone``, a list of :class:`LeftAlone`
        ``(name, module, reason)``; ``print(report)`` shows both.

    Example::

        >>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 2))
        >>> report = gelus.patch(model)
        >>> report.replaced[0].name, report.replaced[0].new
        ('1', GELU(approximate='tanh'))
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"gelus.patch expects an nn.Module, got {type(model).__name__}")
    if isinstance(_decide(model), nn.Module):
        raise ValueError(
            f"gelus.patch replaces the activations inside a model, and the model itself is one "
            f"({type(model).__name__}); build its gelus member with gelus.get_activation, or "
            f"patch a container that holds it (nn.Sequential(act))"
        )
    return _replace_within(model)


def _replace_within(model: nn.Module) -> PatchReport:
    """Walk ``model``'s children depth first, replacing what :func:`_decide` maps (each shared
    module once, with one replacement at every place) and listing what it leaves alone."""
    replaced: list[Replaced] = []
    left_alone: list[LeftAlone] = []
    new_for: dict[int, nn.Module] = {}  # id(old) -> its one replacement, for shared instances
    visited: set[int] = set()

    def visit(parent: nn.Module, prefix: str) -> None:
        for slot, child in list(parent._modules.items()):
            if child is None:
                continue
            name = prefix + slot
            if id(child) not in new_for:
                decision = _decide(child)
                if isinstance(decision, nn.Module):
                    new_for[id(child)] = decision
                elif isinstance(decision, str):
                    left_alone.append(LeftAlone(name, child, decision))
            if id(child) in new_for:
                new = new_for[id(child)]
                setattr(parent, slot, new)  # ModuleList/ModuleDict keep children by slot name too
                replaced.append(Replaced(name, child, new))
            elif id(child) not in visited:  # a shared container's children: once
                visited.add(id(child))
                visit(child, name + ".")

    visit(model, "")
    return PatchReport(replaced, left_alone)
