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
nine times, which is where kernels go wrong. Adding a member: its formula in ``_math``, a
``MEMBER`` constant and a branch in the layout it uses, its host functions and ``launch_config``
entry in ``ops``; the instruction gate (tests/library/test_kernel_instructions.py) then compiles
it and checks that the host functions launch exactly what the gate compiles. GPT-OSS's gate is a
kernel in its own file (``_clamped_swiglu``: kernel, launch constants and host functions), reusing
``_math``'s σ and ``_kernels``' rounding; ``tools/compile_kernels.py`` gates it too.
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

__all__ = ["available", "interpreting", "launch", "launches_stubbed", "load"]


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


# One list per open launches_stubbed() block, innermost last: the names of the kernels launch()
# skipped. Empty otherwise (launch for real); changed in place by launches_stubbed() alone.
_STUBBED: list[list[str]] = []


def launch(kernel, grid: tuple[int, ...], *args, **options) -> None:
    """``kernel[grid](*args, **options)``: every Triton launch of the host functions
    (:mod:`gelus._triton.ops`, ``_clamped_swiglu``) goes through here, so that
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
