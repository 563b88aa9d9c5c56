"""Every private torch API the library uses, in one place.

Private API is what breaks first on a new torch, so the rest of the library (``gelus/*.py``,
``gelus/_triton/``) never writes ``torch._``: it calls these functions, and
``tests/library/test_torch_compat.py`` checks, on the running torch, that each one still does what it
says (and fails on ``torch._`` anywhere else in the library). Each function names what it uses
and why no public API serves.
"""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import torch
from torch import Tensor

__all__ = [
    "below_autograd",
    "dispatch_mode_active",
    "function_apply",
    "functorch_active",
    "gelu_into",
    "has_device_kernel",
    "is_plain",
    "registered_kernel",
    "silu_into",
]


def below_autograd() -> AbstractContextManager:
    """Dispatch below the Autograd key: an autograd Function's forward that calls a custom
    operator with a registered autograd formula would otherwise record that formula too.
    (``torch._C._AutoDispatchBelowAutograd``; ``torch.no_grad`` would also hide the inputs'
    version counters from the Function.)"""
    return torch._C._AutoDispatchBelowAutograd()


def functorch_active() -> bool:
    """Whether a torch.func transform (vmap, grad, jvp, …) is active around this call.
    (``torch._C._are_functorch_transforms_active``: no public query.)"""
    return torch._C._are_functorch_transforms_active()


def dispatch_mode_active() -> bool:
    """Whether a ``TorchDispatchMode`` (fake tensors, functionalization, a tracer) is on the
    stack. (``torch._C._len_torch_dispatch_stack``.)"""
    return bool(torch._C._len_torch_dispatch_stack())


_PLAIN = (Tensor, torch.nn.Parameter)


def is_plain(t: Tensor) -> bool:
    """A dense tensor of its own: not batched, not a subclass (fake, functional, …) that a
    tracer hands in. (``torch._C._functorch``: no public test for a functorch wrapper.)"""
    functorch = torch._C._functorch
    return (
        type(t) in _PLAIN
        and not functorch.is_functorch_wrapped_tensor(t)
        and not functorch.is_legacy_batchedtensor(t)
    )


def function_apply(function: type[torch.autograd.Function], args: Sequence) -> Tensor:
    """``function.apply(*args)`` without ``Function.apply``'s binding of default arguments (an
    ``inspect.signature`` call, ~15 µs), valid when no torch.func transform is active and every
    argument is given. (``torch._functorch.utils.unwrap_dead_wrappers`` is what
    ``Function.apply`` itself does first; the C base class's ``apply`` does the rest.)"""
    args = torch._functorch.utils.unwrap_dead_wrappers(tuple(args))
    return super(torch.autograd.Function, function).apply(*args)


def has_device_kernel(op: Callable, device_type: str) -> bool:
    """Whether a kernel is registered for ``device_type`` on the operator ``op`` (a
    ``torch.library.custom_op``: its ``register_kernel`` table, ``CustomOpDef._backend_fns``) or
    on an ``OpOverload`` (the dispatcher's table, asked through ``torch._C``). torch.library has
    no public query."""
    registered = getattr(op, "_backend_fns", None)
    if registered is not None:
        return device_type in registered
    key = torch._C._dispatch_key_for_device(device_type)
    return torch._C._dispatch_has_kernel_for_dispatch_key(op._name, key)


def registered_kernel(op: Callable, device_type: str) -> Callable | None:
    """What ``torch.library.register_kernel(op, device_type, fn)`` registered on a
    ``torch.library.custom_op``, as the operator's dispatch would call it (``fn`` wrapped by
    torch.library, which honours ``op.set_kernel_enabled``), or None (no such kernel, or not a
    custom_op). Called directly it saves the dispatcher's Python layers, ~20 µs a call.
    (``CustomOpDef._backend_fns``; torch.library has no public query.)"""
    registered = getattr(op, "_backend_fns", None)
    return None if registered is None else registered.get(device_type)


def gelu_into(x: Tensor, out: Tensor, approximate: str = "none") -> Tensor:
    """``F.gelu(x)`` written into ``out`` (torch's kernel; ``F.gelu`` has no ``out=``).
    (``torch._C._nn.gelu``.)"""
    return torch._C._nn.gelu(x, approximate=approximate, out=out)


def silu_into(x: Tensor, out: Tensor) -> Tensor:
    """``F.silu(x)`` written into ``out`` (``torch._C._nn.silu``)."""
    return torch._C._nn.silu(x, out=out)
