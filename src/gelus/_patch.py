"""``gelus.patch(model)``: put gelus's members into a built model, in place.

Each activation module whose class computes exactly the function of a gelus member is replaced by
that member (the tanh form stays the tanh form, the sigmoid form the sigmoid form). Classes are
recognised by their module and name (``type(m).__module__``, ``__qualname__``), so nothing from
Hugging Face transformers or timm is imported here: a model that holds their classes has imported
them already. Each mapped class's formula was read in the installed source (transformers 5.24,
timm 1.0.31; docs/INTEGRATIONS.md) and is checked against the real class by
tests/integrations/.

With ``functional=True`` the functional GELU and SiLU calls inside the model's forward
(``F.gelu``, ``F.silu``, …) go to gelus too: a :class:`torch.overrides.TorchFunctionMode` is
entered around the model's forward (eager, ``torch.compile``, ``torch.export`` all see it).

All or nothing: every replacement is planned (and every new module built) before the first one
is made, and a failure while making them puts back the ones made, so the model is either patched
completely or left as it was. Traversal is iterative: no depth limit.
"""

import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torch.overrides import TorchFunctionMode

from gelus import _members, modules
from gelus import functional as G
from gelus.modules import (
    GELU,
    XIELU,
    ClippedGELU,
    HardMish,
    Laplace,
    ReLU2,
    SiLU,
    SqrtSoftplus,
)

__all__ = ["FunctionalCall", "FunctionalRouting", "LeftAlone", "PatchReport", "Replaced", "patch"]


class _Unsupported(ValueError):
    """A module of a mapped class whose settings its own class does not support: left alone."""


def _inplace(module: nn.Module) -> bool:
    # torch's and timm's in-place flag; classes that accept and ignore it store none
    return bool(getattr(module, "inplace", False))


def _torch_form(module: nn.Module) -> str:
    """nn.GELU's form, if nn.GELU computes it: 'none' or 'tanh' (a value set by hand after
    construction, such as 'sigmoid', makes its forward raise; gelus would compute something)."""
    approximate = getattr(module, "approximate", None)
    if approximate not in ("none", "tanh"):
        raise _Unsupported(
            f"approximate={approximate!r} is not a form nn.GELU computes (its forward raises); "
            f"gelus would compute a function where it fails"
        )
    return approximate


def _holding_state_of(old: nn.Module, new: nn.Module) -> nn.Module:
    """``new`` holding ``old``'s own Parameter and buffer objects (same names and shapes), not
    copies: an optimizer, DDP, ``requires_grad`` and a tied reference keep seeing them."""
    for kind in ("_parameters", "_buffers"):
        mine, theirs = getattr(new, kind), getattr(old, kind)
        if list(mine) != list(theirs) or any(
            (a is None) != (b is None) or (a is not None and a.shape != b.shape)
            for a, b in zip(mine.values(), theirs.values(), strict=True)
        ):
            raise _Unsupported(
                f"its {kind[1:]} ({', '.join(theirs) or 'none'}) are not {type(new).__name__}'s "
                f"({', '.join(mine) or 'none'}, with their shapes)"
            )
        mine.update(theirs)  # the same objects, in the member's order (which is theirs)
    new._non_persistent_buffers_set = set(old._non_persistent_buffers_set)
    return new


_TORCH = "torch.nn.modules.activation"
_HF = "transformers.activations"
_TIMM = "timm.layers.activations"
_TIMM_ME = "timm.layers.activations_me"

# (class module, class name) -> the gelus member computing the same function, built from the old
# module. Each line names the formula of the class it maps (as the installed source has it).
_MEMBERS: dict[tuple[str, str], Callable[[nn.Module], nn.Module]] = {
    # torch: F.gelu(x, approximate) with "none" or "tanh"; F.silu(x) = x·σ(x)
    (_TORCH, "GELU"): lambda m: GELU(_torch_form(m)),
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
    # x·σ(1.702x): the sigmoid form, GELU("sigmoid") as gelus:quick_gelu builds it
    (_HF, "QuickGELUActivation"): lambda m: GELU("sigmoid"),
    (_HF, "SiLUActivation"): lambda m: SiLU(),  # F.silu(x)
    # clip(F.gelu(x), min, max); gelu_10 is (−10, 10)
    (_HF, "ClippedGELUActivation"): lambda m: ClippedGELU(m.min, m.max, "none"),
    (_HF, "LaplaceActivation"): lambda m: Laplace(),  # ½(1 + erf((x − μ)/(σ√2)))
    (_HF, "ReLUSquaredActivation"): lambda m: ReLU2(),  # relu(x)²
    (_HF, "SqrtSoftplusActivation"): lambda m: SqrtSoftplus(),  # √softplus(x)
    (_HF, "XIELUActivation"): lambda m: _holding_state_of(m, XIELU()),  # same names
    # timm: F.gelu(x), F.gelu(x, "tanh"), x·σ(1.702x), x·σ(x), ½x·clamp(x + 2, 0, 2)
    (_TIMM, "GELU"): lambda m: GELU("none"),
    (_TIMM, "GELUTanh"): lambda m: GELU("tanh"),
    (_TIMM, "QuickGELU"): lambda m: GELU("sigmoid"),
    (_TIMM, "Swish"): lambda m: SiLU(inplace=_inplace(m)),
    (_TIMM, "HardMish"): lambda m: HardMish(inplace=_inplace(m)),
    (_TIMM_ME, "SwishMe"): lambda m: SiLU(),  # custom autograd, same function; no in-place
    (_TIMM_ME, "HardMishMe"): lambda m: HardMish(),
}


# Gates that are a method, not a module, of a class that is not an activation: (class module,
# class name) -> (the method, the gelus member computing it, built from the module), from the
# members' records (gelus._members: PatchedMethod). The member goes onto the instance (its
# __dict__, not a submodule: parameters, state_dict keys and named_modules unchanged), where it
# shadows the class's method; the class and every Parameter object stay. transformers' experts
# implementations (eager, grouped_mm, batched_mm) all call it.
def _gate_factory(
    cls: type[nn.Module], arguments: tuple[str, ...]
) -> Callable[[nn.Module], nn.Module]:
    return lambda m: cls(*(getattr(m, name) for name in arguments))


_GATES: dict[tuple[str, str], tuple[str, Callable[[nn.Module], nn.Module]]] = {
    (p.module, p.cls): (p.method, _gate_factory(getattr(modules, m.module), p.arguments))
    for m in _members.MEMBERS
    for p in m.patched_methods
}


def _plan_gate(plan: "_Plan", module: nn.Module, name: str) -> None:
    """Plan the gelus member for ``module``'s gate method (:data:`_GATES`), or list why not."""
    entry = _GATES.get(_key(type(module)))
    if entry is None:
        return
    method, convert = entry
    if type(module.__dict__.get(method)).__module__ == modules.__name__:
        return  # patched before: a gelus member is there
    if method in module.__dict__:
        reason = f"its {method} is replaced on the instance; the class's may not be what runs"
        plan.left_alone.append(LeftAlone(name, module, reason))
        return
    try:
        gate = convert(module)
    except (ValueError, TypeError, AttributeError) as error:
        plan.left_alone.append(LeftAlone(name, module, f"its gate's settings: {error}"))
        return
    plan.assignments.append((module, method, None, gate))  # None: a method, not a child
    plan.replaced.append(Replaced(f"{name}.{method}", module, gate))


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
    """What :func:`patch` did: ``replaced`` and ``left_alone``, in the order of ``named_modules``,
    and ``functional``: the model's :class:`FunctionalRouting` (``patch(model, functional=True)``,
    now or before), else None. ``functional`` is live: the call sites it routes are counted in
    the model's first eager forward after the patch, and read from the same report."""

    replaced: list[Replaced]
    left_alone: list[LeftAlone]
    functional: "FunctionalRouting | None" = None

    def __str__(self) -> str:
        head = f"gelus.patch: {len(self.replaced)} replaced, {len(self.left_alone)} left alone"
        lines = [head + (f"; {self.functional.summary()}" if self.functional else "")]
        lines += [f"  {r.name}: {_named(r.old)} -> {_named(r.new)}" for r in self.replaced]
        lines += [f"  {a.name}: {_named(a.module)} left alone: {a.reason}" for a in self.left_alone]
        if self.functional:
            lines += self.functional.site_lines()
        return "\n".join(lines)


def _named(module: nn.Module) -> str:
    """The module's repr with its class's module: whose GELU it is (torch's, timm's, gelus's)."""
    where = type(module).__module__
    return f"{'gelus' if where.startswith('gelus.') else where}.{module!r}"


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


# every per-module hook dict of nn.Module: a new module would carry none of them
_HOOKS = {
    "_forward_pre_hooks": "forward pre-hooks",
    "_forward_hooks": "forward hooks",
    "_backward_pre_hooks": "backward pre-hooks",
    "_backward_hooks": "backward hooks",
    "_state_dict_pre_hooks": "state_dict pre-hooks",
    "_state_dict_hooks": "state_dict hooks",
    "_load_state_dict_pre_hooks": "load_state_dict pre-hooks",
    "_load_state_dict_post_hooks": "load_state_dict post-hooks",
}


def _hooks(module: nn.Module) -> list[str]:
    return [kind for attribute, kind in _HOOKS.items() if getattr(module, attribute, None)]


def _decide(module: nn.Module) -> nn.Module | str | None:
    """The gelus member for ``module``, or why it is left alone (a str), or None: not an
    activation of the family (nn.ReLU, a Linear, a container, a gelus module)."""
    cls = type(module)
    if cls.__module__.split(".")[0] == "gelus":
        return None
    if parametrize.is_parametrized(module):  # its class is torch's generated subclass
        mapped = [base for base in cls.__mro__[1:] if _key(base) in _MEMBERS]
        if mapped:
            names = ", ".join(module.parametrizations.keys())
            return f"it is parametrized ({names}), which a new module would not carry"
        return None  # a parametrized Linear, …: look inside
    convert = _MEMBERS.get(_key(cls))
    if convert is not None:
        if hooks := _hooks(module):
            return f"it has {' and '.join(hooks)}, which a new module would not carry"
        if "forward" in module.__dict__:
            return (
                "its forward is replaced on the instance; its class's formula may not be what runs"
            )
        try:
            new = convert(module)
        except _Unsupported as error:
            return str(error)
        except (ValueError, TypeError) as error:  # the member refuses the old module's settings
            return f"its settings are not ones gelus's member takes: {error}"
        return new.train(module.training)
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


def patch(model: nn.Module, *, functional: bool = False) -> PatchReport:
    r"""Replace, in place, every activation of ``model`` that a gelus member computes exactly.

    Mapped, each to the member with the same function (the one ``gelus.get_activation`` builds
    for the library's name of it; docs/INTEGRATIONS.md lists every class): ``nn.GELU``, HF's
    and timm's GELU classes to ``GELU("none")`` or ``GELU("tanh")`` (the form kept), HF
    ``QuickGELUActivation`` and timm ``QuickGELU`` to ``GELU("sigmoid")``, ``nn.SiLU``, HF
    ``SiLUActivation``, timm ``Swish``/``SwishMe`` to ``SiLU()``, HF ``ClippedGELUActivation``
    (``gelu_10``) to ``ClippedGELU(min, max)``, HF ``Laplace``, ``ReLUSquared``,
    ``SqrtSoftplus``, ``XIELU`` and timm ``HardMish`` to theirs; GPT-OSS's expert gate (the
    method ``GptOssExperts._apply_gate``) to gelus's member of it, set on the instance.

    Kept: the ``inplace`` flag (where the old module honoured it), the training mode, and every
    Parameter and buffer *object* (XIELU's move into the new module as the same tensors), so an
    optimizer built before the patch, DDP, ``requires_grad``, ``state_dict`` keys and the
    parameter count are unchanged. A shared module is replaced by one new module at every
    place. No depth limit. All or nothing: every replacement is planned, then made; a failure
    puts back those made and raises.

    Left alone and listed, with the reason: a mapped module with hooks, parametrizations, a
    ``forward`` set on the instance, or settings its class does not support (``nn.GELU`` with
    ``approximate='sigmoid'`` set by hand); an HF or timm activation gelus has no member for; a
    subclass of a mapped class; another class whose name says GELU, SiLU or Swish.

    ``functional=True`` also routes ``F.gelu`` (both forms) and ``F.silu`` called inside
    ``model``'s forward to gelus, eagerly, compiled and exported: see
    :class:`FunctionalRouting`. Nothing from transformers or timm is imported.

    Returns:
        A :class:`PatchReport` ``(replaced, left_alone, functional)``; ``print(report)`` shows it.

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
    return _apply(model, _plan(model), functional)  # the plan decides all and touches nothing


def _apply(model: nn.Module, plan: "_Plan", functional: bool) -> PatchReport:
    """Make the planned replacements (and install the routing); on any failure put back those
    made, straight into the parents' module dicts, and raise: the model is as it was."""
    made: list[tuple[nn.Module, str, nn.Module]] = []
    try:
        for parent, slot, old, new in plan.assignments:
            if old is None:  # a gate method (_GATES): shadowed on the instance
                parent.__dict__[slot] = new
            else:
                setattr(parent, slot, new)  # ModuleList/ModuleDict keep children by slot name
            made.append((parent, slot, old))
        routing = _install_routing(model) if functional else FunctionalRouting.of(model)
    except BaseException:
        for parent, slot, old in reversed(made):
            if old is None:
                del parent.__dict__[slot]
            else:
                parent._modules[slot] = old  # putting back this way cannot fail
        raise
    return PatchReport(plan.replaced, plan.left_alone, routing)


class _Plan(NamedTuple):
    # parent, slot, old (None: the slot is a gate method, _GATES), new
    assignments: list[tuple[nn.Module, str, nn.Module | None, nn.Module]]
    replaced: list[Replaced]
    left_alone: list[LeftAlone]


def _children(module: nn.Module, prefix: str) -> Iterator[tuple[nn.Module, str, str, nn.Module]]:
    """``(parent, slot, qualified name, child)`` of ``module``'s children, in order."""
    items = list(module._modules.items())
    return ((module, slot, prefix + slot, c) for slot, c in items if c is not None)


def _plan(model: nn.Module) -> _Plan:
    """Walk ``model``'s children depth first, without recursion (an explicit stack), deciding
    each place: a replacement (each shared module decided once, replaced at every place), left
    alone and listed, or looked inside (each shared container once, under its first name)."""
    plan = _Plan([], [], [])
    decisions: dict[int, nn.Module | str | None] = {}
    visited = {id(model)}
    stack = [_children(model, "")]
    while stack:
        place = next(stack[-1], None)
        if place is None:
            stack.pop()
            continue
        parent, slot, name, child = place
        if id(child) not in decisions:
            decisions[id(child)] = _decide(child)
            _plan_gate(plan, child, name)
        decision = decisions[id(child)]
        if isinstance(decision, nn.Module):
            plan.assignments.append((parent, slot, child, decision))
            plan.replaced.append(Replaced(name, child, decision))
        elif isinstance(decision, str):  # left alone, and not looked inside
            plan.left_alone.append(LeftAlone(name, child, decision))
        elif id(child) not in visited:
            visited.add(id(child))
            stack.append(_children(child, name + "."))
    return plan


def _module_names(model: nn.Module) -> dict[int, tuple[nn.Module, str]]:
    """id -> (module, its first qualified name; "" for the model), without recursion."""
    names = {id(model): (model, "")}
    stack = [_children(model, "")]
    while stack:
        place = next(stack[-1], None)
        if place is None:
            stack.pop()
        elif id(place[3]) not in names:
            names[id(place[3])] = (place[3], place[2])
            stack.append(_children(place[3], place[2] + "."))
    return names


# ------------------------------------------------------------------ functional calls (functional=True)

# the functional spellings of GELU and SiLU in torch 2.13: F.gelu (torch's C binding itself) and
# F.silu (a Python function over the C binding of silu). There is no torch.gelu, torch.silu,
# Tensor.gelu or Tensor.silu. The private C bindings (gelu_, silu, silu_) called directly are not
# routed: dynamo does not pass them to a TorchFunctionMode, so they would be gelus's eagerly and
# torch's compiled.
_F_GELU = torch.nn.functional.gelu
_F_SILU = torch.nn.functional.silu
# frames between a model's call and the mode: torch's dispatch to __torch_function__, and this file
_PLUMBING = frozenset(
    {torch.overrides.__file__, torch.nn.functional.__file__, __file__},
)


class FunctionalCall(NamedTuple):
    """One place where a model's code calls a functional GELU or SiLU that gelus now computes:
    ``name``, the qualified name of the module whose forward made the call (``""``: the model
    itself); ``function``, the call with its form (``"F.gelu(approximate='tanh')"``,
    ``"F.silu"``, ``"F.silu(inplace=True)"``); ``code``, the line that made it
    (``"transformers.models.whisper.modeling_whisper:617 (WhisperEncoder.forward)"``)."""

    name: str
    function: str
    code: str


class FunctionalRouting:
    """What ``gelus.patch(model, functional=True)`` installs: functional GELU and SiLU calls made
    inside ``model``'s forward go to gelus.

    How: ``model.forward`` is wrapped (an instance attribute, the class's ``forward`` untouched,
    its signature kept for ``inspect``) so that the original forward runs inside a
    :class:`torch.overrides.TorchFunctionMode`, which maps ``F.gelu(x, approximate)`` to
    ``gelus.functional.gelu`` and ``F.silu(x, inplace)`` to ``gelus.functional.silu`` and passes every other call through. Dynamo traces the mode, so
    ``torch.compile`` (``fullgraph=True`` too) and ``torch.export`` capture gelus's functions
    where torch's were; eagerly the mode costs one Python call per torch call in the forward.
    Only calls made while ``model(...)`` runs are routed: a submodule called on its own, a
    forward recomputed by activation checkpointing during backward, and ``torch.fx``'s
    ``symbolic_trace`` (which calls no wrapper) see torch's functions. gelus's own calls to
    torch inside its functions are never routed.

    What is counted: the call sites of the model's first *eager* forward after the patch
    (compiled and exported forwards are not inspected, so that nothing is guarded or recompiled
    on the count): :attr:`calls` maps each :class:`FunctionalCall` (module, function and form,
    line of code) to its number of calls in that forward, and :meth:`counts` gives the number
    of sites per function and form. ``print(report)`` shows both; until an eager forward has run
    it says so.

    :meth:`remove` takes the routing out (``model.forward`` is what it was before). Patching
    again with ``functional=True`` reuses the installed routing.
    """

    def __init__(self, model: nn.Module) -> None:
        self.calls: dict[FunctionalCall, int] = {}
        self.counted = False  # an eager forward has been counted
        self.mode = _RoutingMode(self)
        self._model = model  # a reference cycle through model.forward, so copies stay whole
        self._own_forward = model.__dict__.get("forward")  # a forward set on the instance before
        self._names: dict[int, tuple[nn.Module, str]] | None = None  # while counting only
        self._seen: dict[FunctionalCall, int] = {}

    @staticmethod
    def of(model: nn.Module) -> "FunctionalRouting | None":
        """The routing installed on ``model`` (by an earlier patch), or None."""
        forward = model.__dict__.get("forward")
        if isinstance(forward, functools.partial) and forward.func is _routed_forward:
            return forward.args[0]
        return None

    @property
    def active(self) -> bool:
        """Whether the model's calls are routed (False after :meth:`remove`)."""
        return FunctionalRouting.of(self._model) is self

    def remove(self) -> None:
        """Route nothing more: ``model.forward`` becomes what it was before the patch."""
        if not self.active:
            return
        if self._own_forward is None:
            del self._model.forward
        else:
            self._model.forward = self._own_forward

    def counts(self) -> dict[str, int]:
        """Call sites counted per function and form, e.g. ``{"F.gelu(approximate='none')": 2}``."""
        counts: dict[str, int] = {}
        for site in self.calls:
            counts[site.function] = counts.get(site.function, 0) + 1
        return counts

    def summary(self) -> str:
        if not self.active:
            return "functional calls: routing removed"
        if not self.counted:
            return "functional calls routed to gelus (counted in the first eager forward: none run yet)"
        counts = ", ".join(f"{function} ×{n}" for function, n in self.counts().items())
        return f"functional calls routed to gelus: {counts or 'none seen'}"

    def site_lines(self) -> list[str]:
        return [
            f"  {site.name or '<model>'}: {site.function}{f' ×{n} calls' if n > 1 else ''} "
            f"at {site.code} -> gelus.functional"
            for site, n in self.calls.items()
        ]

    def __repr__(self) -> str:
        return f"FunctionalRouting({self.summary()})"

    def _counted_forward(self, original: Callable, args: tuple, kwargs: dict) -> Any:
        """The first eager forward: run it routed, recording each call site."""
        self._names, self._seen = _module_names(self._model), {}
        try:
            with self.mode:
                result = original(*args, **kwargs)
        finally:
            self._names = None
        self.calls, self.counted = self._seen, True
        return result

    def _record(self, function: str, frame: Any) -> FunctionalCall:
        code = (
            f"{frame.f_globals.get('__name__', '?')}:{frame.f_lineno} ({frame.f_code.co_qualname})"
        )
        site = FunctionalCall(self._place(frame), function, code)
        self._seen[site] = self._seen.get(site, 0) + 1
        return site  # gelus.audit matches the site it swaps

    def _place(self, frame: Any) -> str:
        """The qualified name of the nearest module of the model up the call stack."""
        names = self._names or {}
        while frame is not None:
            if "self" in frame.f_code.co_varnames:
                entry = names.get(id(frame.f_locals.get("self")))
                if entry is not None and entry[0] is frame.f_locals.get("self"):
                    return entry[1]
            frame = frame.f_back
        return "?"


def _routed_forward(routing: FunctionalRouting, original: Callable, *args: Any, **kwargs: Any):
    """``model.forward`` under routing: the original forward inside the routing mode."""
    if not torch.compiler.is_compiling() and not routing.counted:
        return routing._counted_forward(original, args, kwargs)
    with routing.mode:
        return original(*args, **kwargs)


def _install_routing(model: nn.Module) -> FunctionalRouting:
    routing = FunctionalRouting.of(model)
    if routing is not None:
        return routing
    routing = FunctionalRouting(model)
    original = model.forward
    wrapper = functools.partial(_routed_forward, routing, original)
    functools.update_wrapper(wrapper, original)  # inspect.signature: the original's (HF, export)
    model.forward = wrapper
    return routing


def _caller() -> Any:
    """The frame of the code that made the intercepted call (past torch's dispatch)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in _PLUMBING:
        frame = frame.f_back
    return frame


def _from_gelus(frame: Any) -> bool:
    """A call made by gelus's own implementation (its functions call torch's): never routed."""
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return module == "gelus.functional" or module.startswith("gelus._")


def _floating(x: object) -> bool:
    return isinstance(x, Tensor) and x.is_floating_point()


class _RoutingMode(TorchFunctionMode):
    """Maps the functional GELU and SiLU calls to gelus's; every other call passes through.

    Inside ``__torch_function__`` torch has popped this mode, so gelus's functions, which call
    torch's, are not intercepted again by it."""

    def __init__(self, routing: FunctionalRouting) -> None:
        super().__init__()
        self.routing = routing

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func is _F_GELU:
            x = args[0] if args else kwargs.get("input")
            approximate = kwargs.get("approximate", "none")
            if not (_floating(x) and approximate in ("none", "tanh")):
                return func(*args, **kwargs)  # what torch refuses, torch refuses as before
            if not self._take(f"F.gelu(approximate={approximate!r})"):
                return func(*args, **kwargs)
            return G.gelu(x, approximate)
        if func is _F_SILU:
            x = args[0] if args else kwargs.get("input")
            inplace = bool(args[1] if len(args) > 1 else kwargs.get("inplace", False))
            if not _floating(x) or not self._take("F.silu(inplace=True)" if inplace else "F.silu"):
                return func(*args, **kwargs)
            return G.silu(x, inplace)
        return func(*args, **kwargs)

    def _take(self, function: str) -> bool:
        """Whether to route this call: under dynamo always (nothing inspected, nothing guarded);
        eagerly unless gelus's own code made it, recorded while the first forward is counted."""
        if torch.compiler.is_compiling():
            return True
        frame = _caller()
        if _from_gelus(frame):
            return False
        if self.routing._names is not None:
            self.routing._record(function, frame)
        return True
