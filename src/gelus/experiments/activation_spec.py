"""The one place the harness turns an activation's name into something that builds modules.

``resolve_activation`` takes what a user writes (a registry name, ``module:attribute``,
``label=module:attribute``) or hands the Python API (an ``nn.Module`` class, a factory, a tensor
function), and returns an :class:`ActivationSpec`: its label, a factory of fresh modules, whether
it is stochastic (draws its own mask) or gated (``[..., 2n] -> [..., n]``), and for user code the
source file and its hash. It is called once, where a run is resolved (``run.resolve_runs``, by
:func:`engine_activations`);
config, plan, engines and report take the spec from there::

    gelu                         the registry's GELU (its form from model.approximate)
    mypkg.acts:my_act            attribute ``my_act`` of the importable module ``mypkg.acts``
    mine=mypkg.acts:my_act       the same, labelled ``mine`` in the records and the report

A user attribute may be an ``nn.Module`` subclass (constructed with no arguments for every layer),
a factory (no arguments, returns an ``nn.Module``), a tensor function ``f(x) -> Tensor`` (wrapped
in a module) or an ``nn.Module`` instance (deep-copied per layer). A gated one says so with a class
attribute ``gated = True``. The module is imported with the current directory first on
``sys.path`` and must import the same way in every worker (with Ray, ship it in the runtime
environment). The spec is checked before any worker starts: imported, built, and called on a probe
tensor; any failure there, SystemExit included, is one :class:`ActivationError` naming the spec.

A spec pickles as its text and GELU form, so a worker resolves it again from the same code.
"""

import copy
import hashlib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

import gelus
from gelus import _members
from gelus.experiments.errors import SettingError
from gelus.registry import FunctionActivation
from gelus.registry import resolve_activation as registry_name

__all__ = [
    "GATED_ACTIVATIONS",
    "STOCHASTIC_ACTIVATIONS",
    "ActivationError",
    "ActivationFault",
    "ActivationSpec",
    "activation_texts",
    "engine_activations",
    "resolve_activation",
    "resolve_activations",
    "watch_output",
]

# Registry activations that draw their own mask (the SOI map); the MLP engine feeds them uniforms.
STOCHASTIC_ACTIVATIONS = ("stochastic_gelu",)
# Registry activations that halve the last dimension, a·f(b) for x = [a, b].
GATED_ACTIVATIONS = tuple(m.name for m in _members.MEMBERS if m.gated)
_PROBE = torch.linspace(-3, 3, 24).view(2, 3, 4)


class ActivationFault(Exception):
    """What a user's activation did wrong while it trained (its output checked after every call,
    :func:`watch_output`): ``text`` the activation, ``what`` what it did, in words."""

    def __init__(self, text: str, what: str) -> None:
        super().__init__(f"activation {text[:120]!r} {what}")
        self.text, self.what = text, what


def watch_output(module: nn.Module, text: str, gated: bool = False) -> nn.Module:
    """Mark ``module`` as the user's activation ``text`` (the guard finds it in a traceback's
    frames, wherever its code lives) and check each of its outputs as it trains: a tensor, on the
    input's device, of its dtype (unless autocast chose another) and its shape (the last dimension
    halved where ``gated``); else :class:`ActivationFault` saying what it returned. The probe
    checks one call before any job; this catches what changes later (in training mode, after
    some steps). Marks are plain attributes: the state dict is unchanged."""
    module._gelus_activation = text
    module._gelus_gated = gated
    module.register_forward_hook(_check_output)
    return module


def _check_output(module: nn.Module, inputs: tuple, output: object) -> None:
    """The forward hook of :func:`watch_output`."""
    x = inputs[0] if inputs else None
    problem = _output_problem(x, output, getattr(module, "_gelus_gated", False))
    if problem is not None:
        raise ActivationFault(getattr(module, "_gelus_activation", "?"), problem)


def _output_problem(x: object, out: object, gated: bool) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"returned {'None' if out is None else 'a ' + type(out).__name__}, not a tensor"
    if not isinstance(x, torch.Tensor):
        return None
    if out.device != x.device:
        return f"returned a tensor on the {out.device} device for an input on {x.device}"
    if out.dtype != x.dtype and not _autocasting(x):
        return f"returned a {out.dtype} tensor for a {x.dtype} input"
    expected = (*x.shape[:-1], x.shape[-1] // 2) if gated else tuple(x.shape)
    if tuple(out.shape) != tuple(expected):
        return (
            f"returned a tensor of shape {tuple(out.shape)} for an input of shape "
            f"{tuple(x.shape)} (expected {tuple(expected)})"
        )
    return None


def _autocasting(x: torch.Tensor) -> bool:
    """Whether autocast is on for ``x``'s device (it may legitimately change an output's dtype)."""
    try:
        return torch.is_autocast_enabled(x.device.type)
    except (TypeError, RuntimeError):  # an older torch, or a device autocast does not know
        return torch.is_autocast_enabled()


class ActivationError(SettingError):
    """An activation that cannot be resolved, imported, built or called; names the spec."""

    def __init__(self, message: str) -> None:
        super().__init__("activations", message)

    def __reduce__(self):  # re-raised from a worker process intact
        return type(self), (self.template,)


@dataclass(frozen=True)
class ActivationSpec:
    """One resolved activation: what records call it and how to build a fresh module of it.

    ``text`` is what the config names (``gelu``, ``mine=pkg.acts:f``); ``label`` the name in records
    and reports; ``kind`` one of ``"registry" | "class" | "factory" | "function" | "instance"``;
    ``canonical`` the registry's canonical name (empty for user code); ``approximate`` the form that
    plain ``gelu`` takes; ``path`` and ``code_hash`` the defining file of user code and its SHA-256
    (empty for the registry, versioned with gelus itself).
    """

    text: str
    label: str
    kind: str
    canonical: str
    approximate: str
    stochastic: bool
    gated: bool
    parameters: bool  # whether a module of it has learnable parameters
    path: str = ""
    code_hash: str = ""
    factory: Callable[[], nn.Module] = field(default=None, compare=False, repr=False)

    def build(self) -> nn.Module:
        """A fresh module; every call returns a new object. A user's is marked with its text and
        checks each output as it trains (:func:`watch_output`)."""
        module = self.factory()
        if self.is_custom and isinstance(module, nn.Module):
            watch_output(module, self.text, self.gated)
        return module

    @property
    def is_custom(self) -> bool:
        return self.kind != "registry"

    @property
    def spec(self) -> str:
        """What the user wrote, without the label."""
        return self.text.partition("=")[2].strip() if "=" in self.text else self.text

    def source(self) -> dict[str, str]:
        """``{spec, kind, path, sha256}``: which code made a run's records (user code only)."""
        return {"spec": self.spec, "kind": self.kind, "path": self.path, "sha256": self.code_hash}

    def __reduce__(self):
        return resolve_activation, (self.text, self.approximate)


def resolve_activation(activation: object, approximate: str = "none") -> ActivationSpec:
    """The :class:`ActivationSpec` of a registry name, a ``[label=]module:attribute`` string, or
    an importable class, factory or function (named by its module and qualified name).

    Plain ``gelu`` (not an alias that fixes the form, such as ``gelu_new``) is
    ``GELU(approximate=approximate)``. Raises :class:`ActivationError` naming the activation: an
    unknown name lists the valid ones; user code that fails to import, build or run on a probe
    tensor says how.

    >>> resolve_activation("gelu", "none").build()
    GELU(approximate='none')
    """
    text = activation if isinstance(activation, str) else _text_of_object(activation)
    label, spec = _split_label(text)
    module_name, colon, attribute = spec.partition(":")
    if colon:
        kind, factory, path, code_hash = _import_user_activation(module_name, attribute, text)
        canonical = ""
        label = label or attribute.rsplit(".", 1)[-1]
    else:
        try:
            canonical = registry_name(spec)[0]
        except (KeyError, ValueError) as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
            raise ActivationError(str(message)) from None
        kind, path, code_hash, label = "registry", "", "", label or spec
        if canonical == "gelu" and spec.lower() == "gelu":
            factory = _Factory(spec, {"approximate": approximate})
        else:
            factory = _Factory(spec, {})
    module = _checked_build(factory, text)
    stochastic = canonical in STOCHASTIC_ACTIVATIONS
    gated = canonical in GATED_ACTIVATIONS or bool(getattr(module, "gated", False))
    if not stochastic:
        _probe(module, text, gated)
    parameters = any(True for _ in module.parameters())
    return ActivationSpec(
        text,
        label,
        kind,
        canonical,
        approximate,
        stochastic,
        gated,
        parameters,
        path,
        code_hash,
        factory,
    )


def resolve_activations(
    activations: Iterable[object], approximate: str = "none"
) -> tuple[ActivationSpec, ...]:
    """Each activation resolved; two with the same label are refused (the report would pool them)."""
    specs = tuple(resolve_activation(a, approximate) for a in activations)
    if not specs:
        raise ActivationError("activations: expected at least one name")
    labels = [s.label for s in specs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ActivationError(
            f"activations: {', '.join(repeated)} named twice; give a module:attribute activation "
            "its own label as label=module:attribute"
        )
    return specs


def engine_activations(
    experiment: str, config: Any, plugin: Any
) -> tuple[
    tuple[ActivationSpec, ...],
    dict[str, tuple[tuple[str, float], ...]],
    dict[str, dict[str, str]],
]:
    """(specs, settings, sources) of the activations ``config`` names (:func:`resolve_activations`
    at its ``model.approximate``), each checked to suit its engine ``plugin``
    (``check_activation``; an :class:`ActivationError` naming ``experiment`` otherwise): the
    specs, each one's ``(setting, keep)`` list (the engine's ``settings``), and the hashed
    source of the user's own (``ActivationSpec.source``)."""
    try:
        specs = resolve_activations(config.activations, config.model.approximate)
        for spec in specs:
            plugin.check_activation(spec)
    except SettingError as error:
        raise ActivationError(f"{experiment}: {error.template}") from None
    sources = {spec.label: spec.source() for spec in specs if spec.is_custom}  # user code
    settings = {spec.label: tuple(plugin.settings(config, spec)) for spec in specs}
    return specs, settings, sources


def activation_texts(activations: object) -> tuple[str, ...] | None:
    """Activations as a config names them, from what the Python API accepts: names and
    ``module:attribute`` strings, or a mapping ``{label: class | factory | function | str}`` of
    importable objects (workers import them by name).

    >>> activation_texts({"mine": torch.nn.Softsign})
    ('mine=torch.nn.modules.activation:Softsign',)
    """
    if activations is None or isinstance(activations, str):
        return None if activations is None else (activations,)
    if isinstance(activations, Mapping):
        return tuple(_text_of_object(target, str(label)) for label, target in activations.items())
    return tuple(item if isinstance(item, str) else _text_of_object(item) for item in activations)


# ----------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class _Factory:
    """A registry activation's factory (picklable, unlike a lambda)."""

    name: str
    kwargs: dict

    def __call__(self) -> nn.Module:
        return gelus.get_activation(self.name, **self.kwargs)


def _split_label(text: str) -> tuple[str | None, str]:
    label, sep, spec = text.partition("=")
    if not sep:
        return None, text.strip()
    label = label.strip()
    if not label.isidentifier():
        raise ActivationError(
            f"activation label {label[:60]!r} in {text[:120]!r} is not a plain name; "
            "write it as label=module:attribute, e.g. mine=mypkg.acts:my_act"
        )
    return label, spec.strip()


def _text_of_object(target: object, label: str | None = None) -> str:
    """``label=module:qualname`` for an importable class or function (what a worker can import)."""
    label = label or getattr(target, "__name__", "?")
    if isinstance(target, str):
        return f"{label}={target}" if ":" in target and "=" not in target else target
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not (module and qualname) or isinstance(target, nn.Module):
        raise ActivationError(
            f"activation {label!r}: pass an nn.Module class, a factory or a tensor function "
            f"defined at the top level of a module, not a {type(target).__name__} instance"
        )
    if module == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        where = "a function" if "<" in qualname else "the main script"
        raise ActivationError(
            f"activation {label!r} ({qualname}) is defined in {where}, where worker processes "
            "cannot import it; move it into a module (a .py file beside your script) and pass it "
            "from there, or name it as 'module:attribute'"
        )
    return f"{label}={module}:{qualname}"


def _import_user_activation(module_name: str, attribute: str, text: str):
    """(kind, factory, path, sha256) of a user's ``module:attribute``."""
    if not module_name or not attribute:
        raise ActivationError(
            f"activation {text[:120]!r} is not module:attribute (e.g. mypkg.acts:my_act)"
        )
    module = _user_code(text, "importing it", lambda: _import_module(module_name))
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = sorted(
                name
                for name, value in vars(module).items()
                if not name.startswith("_") and callable(value)
            )
            raise ActivationError(
                f"activation {text!r}: module {module_name!r} has no attribute {attribute!r}; "
                f"its public callables are: {', '.join(public) or '(none)'}"
            )
        target = getattr(target, part)
    kind, factory = _factory_of(target, text)
    return kind, factory, *_source_hash(module)


def _import_module(module_name: str):
    cwd = str(Path.cwd())
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise ActivationError(
                f"cannot import module {module_name!r} ({error}); it must be importable from "
                f"the current directory ({cwd}) or the Python environment"
            ) from error
        raise
    finally:
        if added:
            sys.path.remove(cwd)


def _user_code(text: str, doing: str, call: Callable):
    """``call()``, with any failure of user code (SystemExit included: a user's module must not end
    the run silently) turned into one ActivationError; a Ctrl-C (KeyboardInterrupt) stays the
    user's interruption. What it runs is noted for a supervisor (:mod:`gelus.experiments.notes`), so
    that a process ended from inside it (``os._exit``) is named too."""
    from gelus.experiments.notes import note_user_code

    try:
        with note_user_code(text, doing):
            return call()
    except ActivationError:
        raise
    except (Exception, SystemExit) as error:
        detail = f"{type(error).__name__}: {error}"[:300]
        raise ActivationError(f"activation {text[:120]!r} failed when {doing}: {detail}") from error


def _source_hash(module) -> tuple[str, str]:
    """(path, sha256) of the module's source file; ('', '') for a module without one."""
    try:
        path = inspect.getsourcefile(module)
    except TypeError:  # a built-in or extension module
        path = None
    if not path:
        return "", ""
    return path, hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _required_positional(function: Callable) -> int | None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have no signature
        return None
    return sum(
        1
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def _factory_of(target: object, text: str) -> tuple[str, Callable[[], nn.Module]]:
    """(kind, factory) for an imported attribute, or an ActivationError saying why not."""
    if isinstance(target, type) and issubclass(target, nn.Module):
        return "class", target
    if isinstance(target, nn.Module):
        return "instance", lambda: copy.deepcopy(target)
    if not callable(target):
        raise ActivationError(
            f"activation {text!r} is of type {type(target).__name__}, not an nn.Module class, a "
            "factory returning one, or a tensor function"
        )
    required = _required_positional(target)
    if required == 0:  # a factory: check now that it returns a module
        module = _user_code(text, "calling it as a factory", target)
        if not isinstance(module, nn.Module):
            raise ActivationError(
                f"activation {text!r} takes no arguments, so it was called as a factory, but it "
                f"returned a {type(module).__name__}, not an nn.Module"
            )
        return "factory", target
    if required == 1 or required is None:
        return "function", lambda: FunctionActivation(target)
    raise ActivationError(
        f"activation {text!r} needs {required} positional arguments; an activation is a "
        "function of one tensor, a module class, or a factory taking no arguments"
    )


def _checked_build(factory: Callable[[], nn.Module], text: str) -> nn.Module:
    try:
        module = _user_code(text, "building a module", factory)
    except ActivationError as error:
        if isinstance(error.__cause__, TypeError):
            raise ActivationError(
                f"activation {text!r} needs arguments the harness cannot give: {error.__cause__}"
            ) from None
        raise
    if not isinstance(module, nn.Module):
        raise ActivationError(f"activation {text!r} built a {type(module).__name__}, not a module")
    return module


def _probe(module: nn.Module, text: str, gated: bool) -> None:
    """Call ``module`` on a probe tensor: it must run, give a tensor of the input's dtype, and keep
    the shape (elementwise) or halve the last dimension (gated)."""
    probe = _PROBE.clone()
    with torch.no_grad():
        out = _user_code(text, "called on a probe tensor", lambda: module(probe))
    expected = (*probe.shape[:-1], probe.shape[-1] // 2) if gated else tuple(probe.shape)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        kind = "a gated activation ([..., 2n] -> [..., n])" if gated else "an elementwise one"
        raise ActivationError(
            f"activation {text!r} maps a {tuple(probe.shape)} tensor to {shape}; the harness "
            f"needs {kind}"
        )
    if out.dtype != probe.dtype:
        raise ActivationError(
            f"activation {text!r} maps a {probe.dtype} tensor to a {out.dtype} one; the harness "
            "needs the input's dtype back (return e.g. out.to(x.dtype))"
        )
