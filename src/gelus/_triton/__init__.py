"""Triton kernels for every member of the family: the CUDA implementation of the operators.

Importing this package is light: it does not import Triton. The operators ask
:func:`available` whether a tensor can take the kernels, and :func:`load` imports them (and
Triton) the first time a CUDA tensor meets a member. On CPU the kernels run only in Triton's
interpreter (``TRITON_INTERPRET=1`` set before the first :func:`load`), which the tests use.

The kernels' host functions are in :mod:`gelus._triton.ops`; their design and measured accuracy
in docs/CUDA.md.

The files split by layer, not by member: ``ops`` (host functions and ``launch_config``, the one
place that picks every launch's constants), ``_kernels`` (four kernel layouts: flat, GEGLU, rows
and columns of per-channel parameters, each serving several members through constexprs),
``_math`` (the members' formulas as device functions), ``_coefficients`` (fitted constants). A
member is a formula plus a choice of layout, and nine members share four layouts and one Φ: one
file per member would repeat the layouts (the masks, the partial sums, the rounding on store)
nine times, which is where kernels go wrong. Adding a member to a layout: its formula in
``_math``, a ``MEMBER`` constant and a branch in the layout it uses, its host functions and
``launch_config`` entry in ``ops``, its launches in its record (``gelus._members``); the
instruction gate (tests/library/test_kernel_instructions.py) then compiles them and checks that
the host functions launch exactly what the gate compiles. A member whose layout is its own has a
kernel in its own file (kernel, launch constants, host functions and ``gate_variants``), reusing
``_math``'s σ and ``_kernels``' rounding, named by its record's ``OwnKernel``: the gate compiles
it too.
"""

import contextlib
import functools
import importlib
import importlib.util
import os
from collections.abc import Iterator
from types import ModuleType

import torch

from gelus._operator import kernel_device
from gelus._torch_compat import dispatch_mode_active, is_plain

__all__ = ["available", "host_functions", "interpreting", "launch", "launches_stubbed", "load"]


def interpreting() -> bool:
    """Whether Triton will interpret kernels on CPU tensors (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


@functools.cache
def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def available(x: torch.Tensor) -> bool:
    """Whether the operators should send ``x`` to the kernels: a floating-point CUDA tensor, with
    Triton installed. CPU tensors are not (CPU keeps its routes, also when the interpreter is
    on), except inside ``gelus._operator.cpu_takes_route_of("cuda", ...)``; tests also reach the
    kernels on CPU through :func:`load` directly. Imports nothing."""
    floating = x.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    return floating and kernel_device(x) == "cuda" and _triton_installed()


@functools.cache
def load() -> ModuleType:
    """Import and return :mod:`gelus._triton.ops` (compiles nothing until a kernel first runs)."""
    return importlib.import_module("gelus._triton.ops")


def host_functions(x: torch.Tensor, *parameters: object) -> ModuleType | None:
    """:mod:`gelus._triton.ops` (imported) when this call takes the kernels, or None to run the
    operator's default kernel: x :func:`available`, real tensors only (not fake tensors under
    ``torch.compile`` or ``torch.export``, nor a dispatch mode), tensor ``parameters`` of x's
    dtype and device, each broadcasting to x's shape and varying along one dim at most."""
    if not available(x):
        return None
    tensors = [p for p in parameters if isinstance(p, torch.Tensor)]
    # Real tensors only: a backward hook also runs while torch.compile or torch.export traces the
    # operators' autograd with fake tensors, which no Triton kernel can take.
    if dispatch_mode_active() or not all(map(is_plain, (x, *tensors))):
        return None
    if any(p.dtype != x.dtype or p.device != x.device for p in tensors):
        return None  # promotion or a parameter elsewhere: the default kernel's rules
    ops = load()
    # (cached by shape) each parameter broadcasts to x's shape and varies along one dim at most
    if tensors and not ops.supports_parameters(x, *tensors):
        return None
    return ops


# One list per open launches_stubbed() block, innermost last: the names of the kernels launch()
# skipped. Empty otherwise (launch for real); changed in place by launches_stubbed() alone.
_STUBBED: list[list[str]] = []


def launch(kernel, grid: tuple[int, ...], *args, **options) -> None:
    """``kernel[grid](*args, **options)``: every Triton launch of the host functions
    (:mod:`gelus._triton.ops`, and the kernels in files of their own) goes through here, so that
    :func:`launches_stubbed` can skip them all (the bench's host time of the library alone)."""
    if _STUBBED:
        _STUBBED[-1].append(getattr(kernel, "__name__", type(kernel).__name__))
    else:
        kernel[grid](*args, **options)


@contextlib.contextmanager
def launches_stubbed() -> Iterator[list[str]]:
    """Inside the block :func:`launch` launches nothing and records the kernel's name instead, in
    the list it yields, in order. The host functions' outputs are then left unwritten: time
    them, don't read them. Blocks nest; each yields its own list."""
    launches: list[str] = []
    _STUBBED.append(launches)
    try:
        yield launches
    finally:
        _STUBBED.pop()  # blocks close innermost first
