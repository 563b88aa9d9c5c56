"""The Triton kernel of GPT-OSS's gate (clamped SwiGLU) and its host functions: one op, one file.

From the halves of x (gate, up), g = min(gate, L), u = clamp(up, −L, L):

    forward    y = (u + 1)·g·σ(α·g)
    backward   dgate = grad·(u + 1)·(σ(z) + z·σ(z)(1 − σ(z))), z = α·g   (0 where gate > L)
               dup   = grad·g·σ(α·g)                                    (0 where |up| > L)

x is viewed as [outer, 2, inner] with the gate at 0 and up at 1: split halves on dim are
outer = the dims before dim, inner = the half times the dims after; interleaved halves are the
same view with outer = (dims before)·half and inner = the dims after. Interleaved halves on the
last dim (inner = 1, GPT-OSS's layout) take the PAIRS variant: a flat pass over (gate, up) pairs,
loaded as contiguous [BLOCK, 2] tiles and split in registers. Each input element is read once,
each output written once; fp16/bf16/fp32 compute in fp32 and round once. α and L are fp32
arguments, so float64 runs the operator's default kernel (torch ops) instead.

σ comes from :func:`gelus._triton._math.swish_value` / ``swish_slope`` (z clamped to ±10⁴: no
overflow; gate = −inf gives ±0; nan propagates). Offsets are int64 (a row index times the half
exceeds 2^31 for large tensors); grids stay within CUDA's limits (ops._checked, ops._fold).
"""

import itertools
import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from gelus._triton import launch, ops
from gelus._triton._kernels import _folded_program, _rounded, _widen
from gelus._triton._math import swish_slope, swish_value

__all__ = [
    "backward",
    "clamped_swiglu_kernel",
    "forward",
    "gate_variants",
    "launch_config",
    "supports",
    "view",
]


@triton.jit
def _gate_math(gate, up, grad, alpha, limit, BACKWARD: tl.constexpr):
    """(y, None) forward, (dgate, dup) backward, in gate's (compute) dtype."""
    g = tl.where(gate > limit, limit, gate)  # nan > L is False: nan stays
    u = tl.where(up > limit, limit, tl.where(up < -limit, -limit, up))
    glu = swish_value(g, alpha)
    if BACKWARD:
        d_gate = tl.where(gate > limit, 0.0, grad * (u + 1.0) * swish_slope(g, alpha))
        d_up = tl.where(tl.abs(up) > limit, 0.0, tl.where(up != up, up, grad * glu))
        return d_gate, d_up
    else:
        return (u + 1.0) * glu, glu


@triton.jit
def clamped_swiglu_kernel(
    x_ptr,
    grad_ptr,
    out_ptr,
    outer,
    inner,
    alpha,
    limit,
    BACKWARD: tl.constexpr,
    WIDE: tl.constexpr,
    PAIRS: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    FOLDED: tl.constexpr,
):
    if PAIRS:  # inner = 1: (gate, up) pairs side by side, `outer` elements; BLOCK pairs a program
        pair = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = pair < outer // 2  # a scalar halving: the store mask stays vectorizable
        # one flat, contiguous load of 2·BLOCK elements (16-byte vectors), split in registers
        flat = tl.program_id(0).to(tl.int64) * (2 * BLOCK) + tl.arange(0, 2 * BLOCK)
        flat_inside = flat < outer
        tile = tl.load(x_ptr + flat, mask=flat_inside, other=0.0)
        gate, up = tl.split(tl.reshape(_widen(tile, WIDE), [BLOCK, 2]))
        grad = 0.0
        if BACKWARD:
            grad = tl.load(grad_ptr + pair, mask=inside, other=0.0).to(gate.dtype)
        first, second = _gate_math(gate, up, grad, alpha, limit, BACKWARD)
        if BACKWARD:
            both = tl.reshape(tl.join(first, second), [2 * BLOCK])
            tl.store(out_ptr + flat, _rounded(both, out_ptr), mask=flat_inside)
        else:
            tl.store(out_ptr + pair, _rounded(first, out_ptr), mask=inside)
    else:
        # Program (o, j, k): BLOCK_ROWS rows from o·BLOCK_ROWS, BLOCK columns from
        # (j + k·programs(1))·BLOCK, as GEGLU's kernel: gate = x[r, 0, c], up = x[r, 1, c].
        row = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        column = _folded_program(1, FOLDED).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = (column < inner)[None, :]
        if BLOCK_ROWS > 1:
            inside = (row < outer)[:, None] & inside
        index = row[:, None] * inner + column[None, :]
        gate_index = index + row[:, None] * inner
        gate = _widen(tl.load(x_ptr + gate_index, mask=inside, other=0.0), WIDE)
        up = _widen(tl.load(x_ptr + gate_index + inner, mask=inside, other=0.0), WIDE)
        grad = 0.0
        if BACKWARD:
            grad = tl.load(grad_ptr + index, mask=inside, other=0.0).to(gate.dtype)
        first, second = _gate_math(gate, up, grad, alpha, limit, BACKWARD)
        if BACKWARD:
            tl.store(out_ptr + gate_index, _rounded(first, out_ptr), mask=inside)
            tl.store(out_ptr + gate_index + inner, _rounded(second, out_ptr), mask=inside)
        else:
            tl.store(out_ptr + index, _rounded(first, out_ptr), mask=inside)


# ---------------------------------------------------------------- host


def supports(x: Tensor, alpha: float, limit: float) -> bool:
    """Whether the kernel takes this call: fp16, bf16 or fp32 (α and L are fp32 arguments)."""
    return x.dtype in (torch.float16, torch.bfloat16, torch.float32)


def view(shape: tuple[int, ...], interleaved: bool, dim: int) -> tuple[int, int]:
    """(outer, inner) of x (contiguous, of ``shape``) viewed as [outer, 2, inner]."""
    dim %= len(shape)
    half = shape[dim] // 2
    before, after = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    return (before * half, after) if interleaved else (before, half * after)


def launch_config(
    dtype: torch.dtype,
    backward: bool = False,
    *,
    pairs: bool = True,
    length: int | None = None,
    interpreted: bool | None = None,
) -> dict:
    """The constexprs and ``num_warps`` of one launch (``tools/compile_kernels.py`` compiles the
    same). pairs: the PAIRS variant (inner = 1); length: the inner size otherwise (None: long)."""
    scale = ops._INTERPRETER_SCALE if interpreted is None else (16 if interpreted else 1)
    block = ops._block(dtype, scale)
    if pairs:  # BLOCK pairs: each thread loads 2 × 16 bytes of x (fp32)
        rows, block = 1, block
    else:
        fitted = min(block, triton.next_power_of_2(ops._LONG if length is None else max(length, 1)))
        rows, block = block // fitted, fitted
    return dict(
        BACKWARD=backward,
        WIDE=ops._wide(dtype),
        PAIRS=pairs,
        BLOCK_ROWS=rows,
        BLOCK=block,
        FOLDED=False,
        num_warps=ops._WARPS,
    )


def gate_variants():
    """(label, dtype, config) of every launch the host functions make on a long tensor, for the
    instruction gate (``tools/compile_kernels.py``, through ``gelus._members``): GPT-OSS's
    interleaved pairs and the [outer, 2, inner] view, fp16, bf16 and fp32 (α and L are fp32
    arguments: float64 runs the default kernel, no variant)."""
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    for dtype, backward, pairs in itertools.product(dtypes, (False, True), (True, False)):
        config = launch_config(dtypes[dtype], backward, pairs=pairs, interpreted=False)
        label = f"{dtype} {'pairs' if pairs else 'halves'} {'bwd' if backward else 'fwd'}"
        yield label, dtype, config


def _grid(outer: int, inner: int, config: dict) -> tuple[int, ...]:
    if config["PAIRS"]:
        return ops._checked((triton.cdiv(outer, config["BLOCK"]),))
    rows = triton.cdiv(outer, config["BLOCK_ROWS"])
    return ops._checked((rows, *ops._fold(triton.cdiv(inner, config["BLOCK"]))))


def _launch(x, grad, out, alpha, limit, interleaved, dim):
    outer, inner = view(tuple(x.shape), interleaved, dim)
    if outer and inner:
        config = launch_config(x.dtype, grad is not None, pairs=inner == 1, length=inner)
        grid = _grid(outer, inner, config)
        config["FOLDED"] = len(grid) > 2
        size = 2 * outer if inner == 1 else outer  # PAIRS counts elements (no int32 product)
        launch(
            clamped_swiglu_kernel,
            grid,
            x,
            x if grad is None else grad,
            out,
            size,
            inner,
            alpha,
            limit,
            **config,
        )
    return out


def forward(x: Tensor, alpha: float, limit: float, interleaved: bool, dim: int) -> Tensor:
    """y = (u + 1)·g·σ(α·g), contiguous, x's dtype (fp16, bf16, fp32)."""
    x = x.contiguous()
    shape = list(x.shape)
    shape[dim] //= 2
    return _launch(x, None, x.new_empty(shape), alpha, limit, interleaved, dim)


def backward(
    grad: Tensor, x: Tensor, alpha: float, limit: float, interleaved: bool, dim: int
) -> Tensor:
    """dx (both halves) in x's shape, contiguous."""
    x = x.contiguous()
    grad = grad.to(x.dtype).contiguous()
    return _launch(x, grad, torch.empty_like(x), alpha, limit, interleaved, dim)
