"""What every member shares, defined once: constants, the dtype rule, argument checks, the tame test.

Numerics behind the constants: docs/NUMERICS.md.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = [
    "APPROXIMATIONS",
    "GELU_CLAMP",
    "GELU_TAME",
    "INV_SQRT_2PI",
    "SIGMOID_SCALE",
    "SILU_CLAMP",
    "SQRT_HALF",
    "TANH_A",
    "TANH_B",
    "TANH_CLAMP",
    "TANH_CUBIC",
    "TANH_TAME",
    "UnknownFormError",
    "apply_inplace",
    "check_approximate",
    "check_floating",
    "compute_dtype",
    "has_negative_zero",
    "is_tame",
    "result_dtype",
]

APPROXIMATIONS = ("none", "tanh", "sigmoid")

TANH_CUBIC = 0.044715  # the paper's tanh form: tanh(√(2/π)·(x + 0.044715·x³))
SIGMOID_SCALE = 1.702  # the paper's sigmoid form: x·σ(1.702·x)
# 1 + tanh(u) = 2·σ(2u), so the tanh form is x·σ(z) with z = 2u = x·(TANH_A + TANH_B·x²).
TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
TANH_B = TANH_A * TANH_CUBIC

SQRT_HALF = math.sqrt(0.5)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # normalizer of the standard normal density φ

# Beyond these the forms equal their limits in every float dtype, and their slopes are exactly 1
# or 0, so clamping the input to them is exact: Φ(−40) and 40·φ(40) underflow float64;
# SiLU'(±1e4) is exactly 1 or 0; the tanh form's z(±100) ≈ ±7000, so σ(z) is exactly 1 or 0.
GELU_CLAMP = 40.0
TANH_CLAMP = 100.0
SILU_CLAMP = 1e4

# Bounds on |x| inside which torch's eager kernels are finite and exact in their limits: oneDNN's
# gelu overflows above FLT_MAX/2; the tanh backward forms x·(a + 3b·x²), which overflows fp32
# above ~1e12; a swish forms β·x.
GELU_TAME = 1e18
TANH_TAME = 1e12


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype the arithmetic runs in: float32 for half types, else the promoted dtype."""
    dtype = torch.float32
    for other in dtypes:
        dtype = torch.promote_types(dtype, other)
    return dtype


def result_dtype(*operands: Tensor | float) -> torch.dtype:
    """The dtype of a member's result: torch's type promotion over its floating operands.

    The one dtype rule of the library (docs/NUMERICS.md): ``bias_gelu(x_bf16, bias_fp32)`` is
    float32 as ``x_bf16 + bias_fp32`` is, a 0-dim or Python-number parameter does not promote a
    dimensioned ``x``, and half types are computed in float32 and rounded once to this dtype.
    """
    # torch's rule restricted to floating operands: dimensioned tensors decide; 0-dim tensors only
    # when there is none; Python floats never change a floating result.
    tensors = [t for t in operands if isinstance(t, Tensor)]
    dimensioned = [t.dtype for t in tensors if t.dim() > 0] or [t.dtype for t in tensors]
    dtype = dimensioned[0]
    for other in dimensioned[1:]:
        dtype = torch.promote_types(dtype, other)
    return dtype


class UnknownFormError(ValueError, RuntimeError):
    """An ``approximate`` that is no GELU form: a ValueError, as every invalid argument of gelus,
    and the RuntimeError that torch's ``F.gelu`` raises there, with torch's words (op_db's error
    input for gelu expects both), so code written for either catches it."""


def check_approximate(approximate: str, accurate: bool = False) -> None:
    """:class:`UnknownFormError` for an unknown form; ValueError for ``accurate`` with a form."""
    if approximate not in APPROXIMATIONS:
        forms = ", ".join(repr(name) for name in APPROXIMATIONS)
        raise UnknownFormError(
            f"approximate={approximate!r} is not a GELU form; use one of {forms} (the "
            "approximate argument must be either of these)"
        )
    if accurate and approximate != "none":
        raise ValueError(
            f"accurate=True applies to the exact form only, not approximate={approximate!r}"
        )


def check_floating(name: str, *tensors: Tensor | float | None) -> None:
    """TypeError for a tensor that is not real floating point (integer, bool, complex).

    The members are real functions computed in floating point: an integer result would be the
    truncation of the true value, silently (torch's ``F.gelu`` raises NotImplementedError there).
    Non-tensor arguments (Python floats, None) pass.
    """
    for t in tensors:
        if isinstance(t, Tensor) and not t.is_floating_point():
            way_out = "take x.real or x.abs() first" if t.is_complex() else "convert with x.float()"
            raise TypeError(f"{name} expects a floating-point tensor, got {t.dtype}; {way_out}")


def is_tame(x: Tensor, bound: float) -> bool:
    """True when every element of ``x`` is finite with |x| <= bound (one read-only pass).

    nan or inf make the sum of squares nan or inf, hence False; a false alarm (the sum
    overflowing) only sends the caller to its slower, always-correct path. Eager only: a
    data-dependent branch would break a compiled graph. float32 and float64 only (bound² is
    inf in a half type, where the kernels upcast first).
    """
    flat = x.detach().reshape(-1)
    return torch.dot(flat, flat).item() <= bound * bound  # a Python compare: nan -> False


def has_negative_zero(x: Tensor) -> bool:
    """True when ``x`` (float32 or float64) holds a −0, in one read-only pass: −0's bit pattern,
    the sign bit alone, is the least integer of its width, so the minimum of the bits finds it."""
    if x.numel() == 0:
        return False
    bits = x.detach().view(torch.int32 if x.element_size() == 4 else torch.int64)
    return bits.min().item() == torch.iinfo(bits.dtype).min


def apply_inplace(function: Callable[..., Tensor], x: Tensor, *args, **kwargs) -> Tensor:
    """``x.copy_(function(x, …))``: torch's ``inplace=True`` contract for a member.

    When autograd records, the member runs on a copy of ``x`` (its backward needs the input,
    which the write would overwrite), so in-place saves no memory then; under ``no_grad`` /
    ``inference_mode`` the only extra tensor is the result before it is copied.
    """
    source = x.clone() if torch.is_grad_enabled() or torch.jit.is_tracing() else x
    return x.copy_(function(source, *args, **kwargs))
