"""Activations a researcher brings, by ``module:attribute``, resolved to fresh-module factories.

The paper's benchmark is only as useful as what can be put through it. Besides the registry's
names (``gelu``, ``relu``, ``elu``, …), an activation can be named by where it lives::

    gelu                         the registry's GELU
    mypkg.acts:my_act            attribute ``my_act`` of the importable module ``mypkg.acts``
    mine=mypkg.acts:my_act       the same, labelled ``mine`` in the records and the report

The attribute may be

  * an ``nn.Module`` subclass, constructed with no arguments for every layer;
  * a factory: a callable that takes no arguments and returns an ``nn.Module``;
  * a tensor function ``f(x) -> Tensor`` (one required argument), wrapped in a module;
  * an ``nn.Module`` instance, deep-copied for every layer so layers never share parameters.

The module is imported with the current directory first on ``sys.path`` (so a file beside the
command works) and must be importable the same way in every worker process: with the local
executors the workers start in the same directory; on a Ray cluster ship it with the runtime
environment. Each resolved activation carries a SHA-256 of its defining module's source, so that
records say which code produced them and an edited activation is a new config, never resumed
into the old one's runs.
"""

import copy
import hashlib
import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

import gelus
from gelus.registry import FunctionActivation

__all__ = [
    "ActivationSource",
    "CustomActivationError",
    "activation_label",
    "activation_specs",
    "is_custom_spec",
    "resolve_activation_spec",
]


class CustomActivationError(ValueError):
    """A ``module:attribute`` activation that cannot be imported or is not an activation."""


@dataclass(frozen=True)
class ActivationSource:
    """Where an activation comes from, and how to build a fresh module of it.

    ``label`` names it in records and reports; ``spec`` is what the user wrote (without the label);
    ``kind`` is ``"registry" | "class" | "factory" | "function" | "instance"``; ``path`` is the
    defining file (empty for the registry); ``code_hash`` the SHA-256 of that file's source
    (empty for the registry, whose code is versioned with gelus itself).
    """

    label: str
    spec: str
    kind: str
    path: str
    code_hash: str
    factory: Callable[[], nn.Module]

    def build(self) -> nn.Module:
        """A fresh module; every call returns a new object."""
        return self.factory()

    @property
    def is_custom(self) -> bool:
        return self.kind != "registry"


def is_custom_spec(text: str) -> bool:
    """Whether ``text`` names an activation by ``module:attribute`` (not by a registry name)."""
    return ":" in text


def activation_label(text: str) -> str:
    """The name an activation spec goes by in records and reports, without importing anything:
    the label of ``label=module:attr``, the last part of ``attr``, or the registry name itself."""
    label, spec = _split_label(text)
    if label:
        return label
    return spec.rpartition(":")[2].rsplit(".", 1)[-1] if is_custom_spec(spec) else spec


def _split_label(text: str) -> tuple[str | None, str]:
    label, sep, spec = text.partition("=")
    if not sep:
        return None, text.strip()
    label = label.strip()
    if not label.isidentifier():
        raise CustomActivationError(
            f"activation label {label!r} in {text!r} is not a plain name; "
            "write it as label=module:attribute, e.g. mine=mypkg.acts:my_act"
        )
    return label, spec.strip()


def _import_module(module_name: str, text: str):
    cwd = str(Path.cwd())
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise CustomActivationError(
            f"activation {text!r}: cannot import module {module_name!r} ({error}); it must be "
            f"importable from the current directory ({cwd}) or the Python environment"
        ) from error
    finally:
        if added:
            sys.path.remove(cwd)


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
    """(kind, factory) for an imported attribute, or a CustomActivationError saying why not."""
    if isinstance(target, type) and issubclass(target, nn.Module):
        return "class", target
    if isinstance(target, nn.Module):
        return "instance", lambda: copy.deepcopy(target)
    if not callable(target):
        raise CustomActivationError(
            f"activation {text!r} is of type {type(target).__name__}, not an nn.Module class, a "
            "factory returning one, or a tensor function"
        )
    required = _required_positional(target)
    if required == 0:  # a factory: check now that it returns a module
        module = target()
        if not isinstance(module, nn.Module):
            raise CustomActivationError(
                f"activation {text!r} takes no arguments, so it was called as a factory, but it "
                f"returned a {type(module).__name__}, not an nn.Module"
            )
        return "factory", target
    if required == 1 or required is None:
        return "function", lambda: FunctionActivation(target)
    raise CustomActivationError(
        f"activation {text!r} needs {required} positional arguments; an activation is a "
        "function of one tensor, a module class, or a factory taking no arguments"
    )


def resolve_activation_spec(text: str) -> ActivationSource:
    """Resolve ``name``, ``module:attribute`` or ``label=module:attribute`` to an
    :class:`ActivationSource`.

    A registry name is checked at once (an unknown one lists the valid names); a
    ``module:attribute`` is imported, checked to build a module, and hashed.

    Example::

        >>> resolve_activation_spec("gelu").build()
        GELU(approximate='none')
    """
    label, spec = _split_label(text)
    module_name, colon, attribute = spec.partition(":")
    if not colon:
        gelus.get_activation(spec)  # fail now with the list of names
        return ActivationSource(
            label or spec, spec, "registry", "", "", lambda: gelus.get_activation(spec)
        )
    if not module_name or not attribute:
        raise CustomActivationError(
            f"activation {text!r} is not module:attribute (e.g. mypkg.acts:my_act)"
        )
    module = _import_module(module_name, text)
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = sorted(
                name
                for name, value in vars(module).items()
                if not name.startswith("_") and callable(value)
            )
            raise CustomActivationError(
                f"activation {text!r}: module {module_name!r} has no attribute {attribute!r}; "
                f"its public callables are: {', '.join(public) or '(none)'}"
            )
        target = getattr(target, part)
    kind, factory = _factory_of(target, text)
    path, code_hash = _source_hash(module)
    return ActivationSource(
        label or attribute.rsplit(".", 1)[-1], spec, kind, path, code_hash, factory
    )


def _spec_of_object(label: str, target: object) -> str:
    """``label=module:qualname`` for an importable class or function (what a worker can import)."""
    if isinstance(target, str):
        return f"{label}={target}" if is_custom_spec(target) and "=" not in target else target
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not (module and qualname) or isinstance(target, nn.Module):
        raise CustomActivationError(
            f"activation {label!r}: pass an nn.Module class, a factory or a tensor function "
            f"defined at the top level of a module, not a {type(target).__name__} instance"
        )
    if module == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        raise CustomActivationError(
            f"activation {label!r} ({qualname}) is defined in {'a function' if '<' in qualname else 'the main script'}, "
            "where worker processes cannot import it; move it into a module (a .py file beside "
            "your script) and pass it from there, or name it as 'module:attribute'"
        )
    return f"{label}={module}:{qualname}"


def activation_specs(activations: object) -> tuple[str, ...] | None:
    """Activations as the config names them, from what the Python API accepts: a sequence of
    names / ``module:attribute`` strings, or a mapping ``{label: class | factory | function |
    "module:attribute"}`` whose values are importable (workers import them by name).

    Example::

        >>> activation_specs({"mine": torch.nn.Softsign})
        ('mine=torch.nn.modules.activation:Softsign',)
    """
    if activations is None or isinstance(activations, str):
        return None if activations is None else (activations,)
    if isinstance(activations, dict):
        return tuple(_spec_of_object(str(label), target) for label, target in activations.items())
    return tuple(
        item if isinstance(item, str) else _spec_of_object(getattr(item, "__name__", "?"), item)
        for item in activations
    )
