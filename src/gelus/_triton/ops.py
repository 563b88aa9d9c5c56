"""Host functions of the Triton kernels: tensors in, tensors out, no autograd.

Every function reads its inputs once and writes each output once (plus a few partial sums for a
parameter gradient). Outputs have the input's dtype and, for dense inputs (contiguous,
channels_last, any permutation), its strides; other inputs are made contiguous first. fp16/bf16
are computed in fp32 and rounded once; fp32 in fp32 (also where Φ is evaluated: the float32
algorithm of :mod:`gelus._gelu_float32`, within 2 ulp); float64 in float64.

Formulas (Φ, φ: standard normal CDF and density; σ: the logistic sigmoid):

====================  =======================================  ==========================================
member                forward                                  backward
====================  =======================================  ==========================================
GELU, exact           x·Φ(x)                                   grad·(Φ(x) + x·φ(x))
GELU, tanh            x·σ(z), z = 2√(2/π)(x + 0.044715x³)      grad·(σ(z) + x·z'·σ(z)(1 − σ(z)))
GELU, sigmoid         x·σ(1.702x)                              grad·SiLU'(1.702x)
Swish                 x·σ(βx)                                  grad·(σ(βx) + βx·σ'(βx)); dβ = Σ grad·x²·σ'(βx)
generalized           x·Φ(z), z = (x − μ)/σ                    grad·(Φ(z) + x·φ(z)/σ); dμ = −Σ grad·x·φ(z)/σ;
                                                               dσ = −Σ grad·x·φ(z)·z/σ
stochastic            x·m, m ~ Bernoulli(Φ(x)) (Philox)         grad·m, m regenerated from (seed, offset)
bias-GELU             gelu(x + b)                              dx = grad·gelu'(x + b); db = Σ dx
GEGLU                 a·gelu(b), [a, b] = halves of x on dim   [grad·gelu(b), grad·a·gelu'(b)]
====================  =======================================  ==========================================

Σ sums over the dimensions a parameter was broadcast along, on the device (per-program partial
sums, then ``finish_kernel``; deterministic). Parameters (μ, σ, tensor β, bias) must be scalars
or vary along one dimension of x (per channel); :func:`supports_parameters` says whether a call
qualifies. The launch of a parameter kernel is planned once per shape (``_plan``, cached).
"""

import functools
import math
from typing import NamedTuple

import torch
import triton
from torch import Tensor

from gelus._triton import _kernels as kernels
from gelus._triton import _math, interpreting, launch

__all__ = [
    "bias_gelu_backward",
    "bias_gelu_forward",
    "geglu_backward",
    "geglu_forward",
    "gelu_backward",
    "gelu_forward",
    "generalized_gelu_backward",
    "generalized_gelu_forward",
    "launch_config",
    "stochastic_gelu_backward",
    "stochastic_gelu_forward",
    "supports_parameters",
    "swish_backward",
    "swish_forward",
]

_GENERALIZED, _SWISH_BETA, _BIAS = (
    int(kernels.GENERALIZED),
    int(kernels.SWISH_BETA),
    int(kernels.BIAS),
)
_FORMS = {"none": int(_math.EXACT), "tanh": int(_math.TANH), "sigmoid": int(_math.SIGMOID)}
_PRECISION = {
    torch.float16: int(_math.HALF),
    torch.bfloat16: int(_math.HALF),
    torch.float32: int(_math.SINGLE),
    torch.float64: int(_math.DOUBLE),
}
# 4 warps × 32 threads, each with 16 bytes of every input in flight (4 fp32, 8 half; fp64: 4, two
# vectors), so a memory-bound pass issues full 16-byte vector loads; larger blocks only add
# registers, smaller ones add scheduling overhead.
_WARPS = 4
_STEPS = 8  # blocks per program in the parameter kernels: partial sums are 1/8192 of the input
_TILE = _WARPS * 32 * 4  # elements per step of the columns kernel (rows × channels): 4 per thread


# Triton's interpreter (CPU tests) pays per operation per program: 16x larger blocks run the same
# code paths (masks, several programs) ~10x faster there.
_INTERPRETER_SCALE = 16 if interpreting() else 1


def _block(dtype: torch.dtype, scale: int = _INTERPRETER_SCALE) -> int:
    return _WARPS * 32 * (16 // min(dtype.itemsize, 4)) * scale


# CUDA's limits on a grid: 2^31 − 1 programs along x, 65,535 along y and z. Every launch keeps
# within them for any tensor memory holds (tests/library/test_launch_limits.py; docs/CUDA.md,
# "Launch limits"): x takes the long axis, and an axis that may need more than _GRID_YZ programs
# on y is folded into y·z (the kernels read it as pid(1) + pid(2)·programs(1)).
_GRID_X = 2**31 - 1
_GRID_YZ = 65535
_INT32 = 2**31 - 1  # the largest offset int32 arithmetic holds (the INT64 choice)


def _fold(blocks: int) -> tuple[int] | tuple[int, int]:
    """(blocks,) within _GRID_YZ, else (y, z) with y·z ≥ blocks, both within _GRID_YZ, fewer
    than z programs idle (the kernels' FOLDED variant)."""
    if blocks <= _GRID_YZ:
        return (blocks,)
    z = triton.cdiv(blocks, _GRID_YZ)
    if z > _GRID_YZ:
        raise ValueError(f"{blocks} blocks exceed what a grid's y and z axes hold together")
    return triton.cdiv(blocks, z), z


def _checked(grid: tuple[int, ...]) -> tuple[int, ...]:
    """grid, after checking it is within CUDA's limits (a launch outside them fails on the GPU)."""
    if grid[0] > _GRID_X or any(size > _GRID_YZ for size in grid[1:]):
        raise ValueError(f"grid {grid} is outside CUDA's limits (x < 2^31, y and z ≤ 65,535)")
    return grid


# A tensor long enough for full blocks and _STEPS steps per program: what launch_config assumes
# when it is not given a length (the configuration of the memory-bound sizes, which the SASS gate
# compiles).
_LONG = 1 << 24


def launch_config(
    kernel: str,
    dtype: torch.dtype,
    member: int = 0,
    form: int = 0,
    backward: bool = False,
    *,
    length: int | None = None,
    sums: int = 0,
    interpreted: bool | None = None,
) -> dict:
    """The compile-time arguments (constexprs and ``num_warps``) of one launch of ``kernel``.

    The host functions launch with exactly these, and ``tools/compile_kernels.py`` compiles the
    same ones for the SASS gate (``tests/library/test_kernel_instructions.py``), so the gate counts
    the instructions of the code that runs.

    kernel: ``"pointwise"`` (member: a GELU form, ``SWISH`` or ``STOCHASTIC``), ``"geglu"``
    (form), ``"rows"``, ``"columns"`` or ``"finish"`` (member: ``GENERALIZED``, ``SWISH_BETA``
    or ``BIAS``, the last with its form; their backward writes ``sums`` partial sums per
    program and channel, 0, 1 or 2). length: GEGLU's half (None: a long one; a short one puts
    several rows in one block, BLOCK_ROWS > 1, rather than masking most of it). The parameter
    kernels are described for a long tensor (NCHW with 64 channels, or 64 channels fastest):
    their host functions plan every launch with ``_plan``, which this calls. interpreted: None
    for this process's mode; the interpreter takes 16x larger blocks, False what a GPU takes.
    """
    scale = _INTERPRETER_SCALE if interpreted is None else (16 if interpreted else 1)
    if kernel in ("rows", "columns", "finish"):
        plan = _long_plan(kernel, dtype, member, form, backward, sums, scale)
        return dict(plan.finish_options if kernel == "finish" else plan.options)
    if kernel == "pointwise":
        wide = member != int(kernels.STOCHASTIC) and _wide(dtype)
        config = dict(MEMBER=member, WIDE=wide, BLOCK=_block(dtype, scale))
    elif kernel == "geglu":
        # a short half (GEGLU's rows) shares a block with the next rows, not a mostly masked one
        block = _block(dtype, scale)
        fitted = min(block, triton.next_power_of_2(_LONG if length is None else max(length, 1)))
        config = dict(FORM=form, WIDE=_wide(dtype), BLOCK_ROWS=block // fitted, BLOCK=fitted)
        config["FOLDED"] = False  # the column blocks on y alone (_geglu_launch: y·z past 65,535)
    else:
        raise ValueError(
            f"unknown kernel {kernel!r}; use pointwise, geglu, rows, columns or finish"
        )
    return config | dict(BACKWARD=backward, PREC=_PRECISION[dtype], num_warps=_WARPS)


# The long tensors launch_config describes the parameter kernels for: NCHW with 64 channels of
# 2^15 elements (the rows kernel), 2^18 rows of 64 channels (the columns kernel); per-channel
# parameters.
_LONG_LAYOUTS = {
    "rows": ((16, 64, 1 << 15), (1 << 21, 1 << 15, 1), ((64, 1), (1, 1))),
    "columns": ((1 << 18, 64), (64, 1), ((64,), (1,))),
}


def _long_plan(kernel, dtype, member, form, backward, sums, scale):
    shape, strides, parameter = _LONG_LAYOUTS["rows" if kernel == "rows" else "columns"]
    wants = ((False, False), (True, False), (True, True))[sums if backward else 0]
    key = (shape, strides, dtype, _wide(dtype), member, form, backward, (parameter,) * 2, wants)
    return _plan(key, scale)


def _precision(x: Tensor) -> int:
    if x.dtype not in _PRECISION:
        raise TypeError(
            f"the GELU kernels take float16, bfloat16, float32 or float64 tensors, got {x.dtype}; "
            "convert with .float()"
        )
    return _PRECISION[x.dtype]


def _wide(dtype: torch.dtype) -> bool:
    """Whether the math runs in float64: for float64 input only (never for fp32 or half types)."""
    return dtype == torch.float64


def _form(approximate: str) -> int:
    if approximate not in _FORMS:
        raise ValueError(
            f"approximate={approximate!r} is not a GELU form; use one of {', '.join(_FORMS)}"
        )
    return _FORMS[approximate]


def _is_dense(t: Tensor) -> bool:
    """Whether t covers its storage span without gaps or overlaps (contiguous in some dim order)."""
    return _dense_layout(t.shape, t.stride())


@functools.lru_cache(maxsize=512)
def _dense_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = 1
    for size, stride in sorted(zip(shape, strides, strict=True), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _dense(t: Tensor) -> Tensor:
    return t if _is_dense(t) else t.contiguous()


def _as_layout_of(grad: Tensor, x: Tensor) -> Tensor:
    """grad with exactly x's strides (a copy only when they differ)."""
    if grad.shape != x.shape:
        raise ValueError(f"grad has shape {tuple(grad.shape)} but x has {tuple(x.shape)}")
    if grad.stride() == x.stride() or x.numel() <= 1:
        return grad
    return torch.empty_like(x, dtype=grad.dtype).copy_(grad)


def _pointwise_launch(n: int, dtype: torch.dtype, member: int, backward: bool, interpreted=None):
    """(grid, constants) of pointwise_kernel on n > 0 elements (offsets in int64: any n);
    interpreted as in :func:`launch_config`."""
    config = launch_config("pointwise", dtype, member, backward=backward, interpreted=interpreted)
    return _checked((triton.cdiv(n, config["BLOCK"]),)), config


def _launch_pointwise(x, grad, member, beta=1.0, seed=0, offset=0):
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        grid, config = _pointwise_launch(n, x.dtype, member, grad is not None)
        launch(
            kernels.pointwise_kernel,
            grid,
            x,
            x if grad is None else grad,
            out,
            n,
            float(beta),
            int(seed),
            int(offset),
            **config,
        )
    return out


def gelu_forward(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU(x) in the given form (x·Φ(x); tanh form; x·σ(1.702x)), one pass."""
    form = _form(approximate)
    x = _dense(x)
    _precision(x)
    return _launch_pointwise(x, None, form)


def gelu_backward(grad: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    """grad·GELU'(x): Φ(x) + x·φ(x) exactly; the tanh and sigmoid forms' own derivatives."""
    form = _form(approximate)
    x = _dense(x)
    _precision(x)
    return _launch_pointwise(x, _as_layout_of(grad, x), form)


def _check_stream(seed: int, offset: int) -> None:
    if not 0 <= seed < 2**31:
        raise ValueError(
            f"seed={seed} must be in [0, 2^31) (draw it with torch.randint(2**31, ()))"
        )
    if offset < 0 or offset % 4:
        raise ValueError(
            f"offset={offset} must be a non-negative multiple of 4 (Philox draws four numbers "
            "per counter); advance it by the element count rounded up to a multiple of 4"
        )


def stochastic_gelu_forward(x: Tensor, seed: int, offset: int = 0) -> Tensor:
    """x·m, m ~ Bernoulli(Φ(x)): element i (in x's memory order) compares Φ(x_i) with the uniform
    number number offset + i of the Philox stream ``seed``; nan stays nan, ±inf give inf / 0."""
    _check_stream(seed, offset)
    x = _dense(x)
    _precision(x)
    return _launch_pointwise(x, None, int(kernels.STOCHASTIC), seed=seed, offset=offset)


def stochastic_gelu_backward(grad: Tensor, x: Tensor, seed: int, offset: int = 0) -> Tensor:
    """grad·m with the forward's mask m, regenerated from x, seed and offset (nothing else saved)."""
    _check_stream(seed, offset)
    x = _dense(x)
    _precision(x)
    return _launch_pointwise(
        x, _as_layout_of(grad, x), int(kernels.STOCHASTIC), seed=seed, offset=offset
    )


# ---------------------------------------------------------------- members with parameters
# Per call: look the plan up by shape (lru_cache), allocate the outputs and the partial sums, and
# launch the kernel (and, for parameter gradients, finish_kernel): no torch op touches the input
# or reduces anything on the host side.

_PROGRAMS = 1024  # fewer blocks per program (down to 1) while the grid has fewer programs
_FINISH_TILE = 2048  # partial sums per step of a finish_kernel program (groups × channels)


def supports_parameters(x: Tensor, *parameters: Tensor | float) -> bool:
    """Whether the parameter kernels take these parameters: each a float or a tensor that
    broadcasts to x's shape and varies along at most one dimension shared by all of them."""
    try:
        _parameter_dim(x, parameters)
    except ValueError:
        return False
    return True


def _parameter_dim(x: Tensor, parameters) -> int | None:
    shapes = tuple(tuple(p.shape) for p in parameters if isinstance(p, Tensor))
    return _channel_dim(tuple(x.shape), shapes)


@functools.lru_cache(maxsize=512)
def _channel_dim(shape: tuple[int, ...], parameter_shapes: tuple[tuple[int, ...], ...]):
    """The one dimension of x along which the parameters vary (None: all are scalars)."""
    dims = set()
    for p in parameter_shapes:
        offset = len(shape) - len(p)
        if offset < 0 or any(s not in (1, shape[offset + i]) for i, s in enumerate(p)):
            raise ValueError(
                f"a parameter of shape {p} does not broadcast to x's shape {shape} without "
                "enlarging it"
            )
        dims |= {offset + i for i, size in enumerate(p) if size > 1}
    if len(dims) > 1:
        raise ValueError(
            f"parameters vary along dimensions {sorted(dims)} of x; the Triton kernels take "
            "scalar or per-channel (one dimension) parameters"
        )
    return dims.pop() if dims else None


class _Plan(NamedTuple):
    """Everything of a parameter kernel's launch that depends on shapes alone."""

    dense: bool  # x covers its storage span (otherwise the caller makes it contiguous)
    n: int
    kernel: str  # "rows_kernel" or "columns_kernel"
    grid: tuple[int, int]
    sizes: tuple[int, ...]  # the kernel's integer arguments before the parameters' strides
    strides: tuple[int, int]  # each parameter's stride along the channels (0: one value)
    options: dict  # constexprs and num_warps (never mutated: the plan is shared)
    sums: int  # partial sums per program and channel: 0 (no parameter gradient), 1 or 2
    partial: int  # elements of the partial-sum buffer, sums × groups × channels
    shapes: tuple[tuple[int, ...], tuple[int, ...]]  # the parameter gradients' shapes
    finish_grid: tuple[int]
    finish_sizes: tuple[int, int, int]  # groups, channels, offset of the second sum
    finish_options: dict


@functools.lru_cache(maxsize=512)
def _plan(key, scale: int) -> _Plan:
    """The launch of the rows or columns kernel and of finish_kernel for x of this shape and
    strides: key = (shape, strides, dtype, wide, member, form, backward, parameters, wants),
    ``parameters`` the (shape, strides) of each tensor parameter (None for a float), ``wants``
    which parameter gradients the backward returns; ``scale`` the interpreter's block factor."""
    shape, strides, dtype, wide, member, form, backward, parameters, wants = key
    dim = _channel_dim(shape, tuple(p[0] for p in parameters if p is not None))
    n = math.prod(shape)
    channels = 1 if dim is None else shape[dim]
    stride = n if dim is None else strides[dim]
    sums = (2 if wants[1] else 1 if wants[0] else 0) if backward else 0
    options = dict(
        MEMBER=member,
        FORM=form,
        BACKWARD=backward,
        SUMS=sums,
        PREC=_PRECISION[dtype],
        WIDE=wide,
        num_warps=_WARPS,
    )
    param_strides, outputs = _parameter_layout(parameters, wants, dim, len(shape), channels)
    reach = max(param_strides) * (channels - 1)  # the farthest parameter offset
    if channels > 1 and stride == 1:  # the channel is the fastest dimension in storage
        kernel, grid, sizes, groups, blocks = _columns_launch(n, channels, reach)
    else:  # one channel per row of `stride` elements (an empty x: nothing is launched)
        kernel, grid, sizes, groups, blocks = _rows_launch(
            n, max(stride, 1), channels, dtype, scale, reach
        )
    options.update(blocks)
    block_c = min(128, triton.next_power_of_2(channels))
    block_g = min(_FINISH_TILE // block_c, triton.next_power_of_2(max(groups, 1)))
    finish_grid = (1 if 2 in outputs else triton.cdiv(channels, block_c),)
    # int64 loop counters where a counter's last step (past the channels by a grid's width of
    # blocks, past the groups by a block) can pass 2^31 − 1
    counters = max(channels + finish_grid[0] * block_c, groups + block_g) > _INT32
    finish = dict(OUT1=outputs[0], OUT2=outputs[1], WIDE=wide, BLOCK_G=block_g, BLOCK_C=block_c)
    finish["INT64"] = counters
    return _Plan(
        dense=_dense_layout(shape, strides),
        n=n,
        kernel=kernel,
        grid=grid,
        sizes=sizes,
        strides=param_strides,
        options=options,
        sums=sums,
        partial=sums * groups * channels,
        shapes=tuple(() if p is None else p[0] for p in parameters),
        finish_grid=_checked(finish_grid),
        finish_sizes=(groups, channels, groups * channels),
        finish_options=dict(finish, num_warps=_WARPS),
    )


def _parameter_layout(parameters, wants, dim: int | None, ndim: int, channels: int):
    """(each parameter's stride along the channels, 0 where it is one value; each parameter
    gradient's output: 1 per channel, 2 summed over the channels too (a scalar parameter beside
    a per-channel one), 0 none) for ``parameters`` as in :func:`_plan`'s key."""
    # whether each parameter varies along the channels (else one value, read with stride 0)
    varies = tuple(
        p is not None and dim is not None and dim >= ndim - len(p[0]) and p[0][dim - ndim] > 1
        for p in parameters
    )
    strides = tuple(
        p[1][dim - ndim] if vary else 0 for p, vary in zip(parameters, varies, strict=True)
    )
    outputs = tuple(
        0 if not want else 1 if vary or channels == 1 else 2
        for want, vary in zip(wants, varies, strict=True)
    )
    return strides, outputs


def _columns_launch(n: int, channels: int, reach: int = 0):
    """(kernel, grid, sizes, groups, block options) of columns_kernel for ``n`` elements whose
    ``channels`` are the fastest dimension in storage, the parameters read up to offset
    ``reach``: the column blocks on y (folded into y·z past 65,535 of them), int64 channel
    numbers and parameter offsets where int32 does not hold them."""
    rows = n // channels
    block_c = min(64, triton.next_power_of_2(channels))
    block_r = _TILE // block_c
    steps = _steps(rows, block_r)
    while steps > 1 and triton.cdiv(rows, block_r * steps) * channels < _PROGRAMS * block_c:
        steps //= 2  # a small tensor: more programs, not more steps per program
    groups = triton.cdiv(rows, block_r * steps)
    column_blocks = triton.cdiv(channels, block_c)
    grid = _checked((groups, *_fold(column_blocks)))
    # channel numbers up to (y·z)·block_c, idle programs' included, and parameter offsets up
    # to reach, in int32 where it holds them all
    wide = max(math.prod(grid[1:]) * block_c, reach) > _INT32
    return (
        "columns_kernel",
        grid,
        (rows, channels),
        groups,
        dict(BLOCK_R=block_r, BLOCK_C=block_c, STEPS=steps, INT64=wide, FOLDED=len(grid) > 2),
    )


def _rows_launch(
    n: int, stride: int, channels: int, dtype: torch.dtype, scale: int, reach: int = 0
):
    """(kernel, grid, sizes, groups, block options) of rows_kernel for ``n`` elements in rows of
    ``stride`` elements, each row one of ``channels`` channels, the parameters read up to offset
    ``reach``: int64 row numbers and parameter offsets where int32 does not hold them."""
    rows = n // stride
    # short rows (NCHW with a small H·W) share a block, several rows to a program, rather
    # than each masking most of one; 4 per thread even in float64 (two block-sized float64
    # partial sums already cost registers)
    block = min(_block(dtype, scale), triton.next_power_of_2(stride))
    block_rows = _block(dtype, scale) // block
    steps = _steps(stride, block)
    while steps > 1 and rows * triton.cdiv(stride, block * steps) < _PROGRAMS:
        steps //= 2  # a small tensor: more programs, not more steps per program
    while triton.cdiv(stride, block * steps) > _GRID_YZ:  # the grid's second axis limit
        steps *= 2
    chunks = triton.cdiv(stride, block * steps)
    row_blocks = triton.cdiv(rows, block_rows)
    grid = _checked((row_blocks, chunks))
    sizes = (rows, stride, channels, chunks)
    # row numbers up to row_blocks·block_rows, parameter offsets up to reach, and the second
    # partial sum's offset rows·chunks, in int32 where it holds them all
    wide = max(row_blocks * block_rows, reach, rows * chunks) > _INT32
    blocks = dict(BLOCK_ROWS=block_rows, BLOCK=block, STEPS=steps, INT64=wide)
    return "rows_kernel", grid, sizes, rows // channels * chunks, blocks


def _steps(length: int, block: int) -> int:
    """Blocks per program: _STEPS, or fewer (a power of two) when the length is shorter."""
    return min(_STEPS, triton.next_power_of_2(max(1, triton.cdiv(length, block))))


def _layout(p: Tensor | float):
    return (p.shape, p.stride()) if isinstance(p, Tensor) else None


def _run_parametric(member, form, x, grad, p, q, wants=(False, False), wide=False):
    """Launch the rows or columns kernel on x (and grad, for a backward) with the parameters p, q
    (floats or tensors); for a backward, finish_kernel writes the wanted parameter gradients in
    the parameters' shapes and dtypes. Returns (out, (dp or None, dq or None))."""
    _precision(x)
    layout = _layout(p)
    options = (member, form, grad is not None, (layout, layout if q is p else _layout(q)), wants)
    plan = _plan((x.shape, x.stride(), x.dtype, wide, *options), _INTERPRETER_SCALE)
    if not plan.dense:
        x = x.contiguous()
        plan = _plan((x.shape, x.stride(), x.dtype, wide, *options), _INTERPRETER_SCALE)
    device = x.device
    out = torch.empty_like(x)
    dp = torch.empty(plan.shapes[0], dtype=p.dtype, device=device) if wants[0] else None
    dq = torch.empty(plan.shapes[1], dtype=q.dtype, device=device) if wants[1] else None
    if plan.n == 0:
        return out, tuple(g if g is None else g.zero_() for g in (dp, dq))
    dtype = torch.float64 if wide else torch.float32
    p = _on_device(p, x, dtype)
    q = p if q is p else _on_device(q, x, dtype)
    partial = torch.empty(plan.partial, dtype=dtype, device=device) if plan.sums else out
    launch(
        getattr(kernels, plan.kernel),
        plan.grid,
        x,
        x if grad is None else _as_layout_of(grad, x),
        out,
        p,
        q,
        partial,
        *plan.sizes,
        *plan.strides,
        **plan.options,
    )
    if plan.sums:
        launch(
            kernels.finish_kernel,
            plan.finish_grid,
            partial,
            partial if dp is None else dp,
            partial if dq is None else dq,
            *plan.finish_sizes,
            **plan.finish_options,
        )
    return out, (dp, dq)


def _on_device(p: Tensor | float, x: Tensor, dtype: torch.dtype) -> Tensor:
    """A tensor parameter as it is (the kernels read it by its stride, in any float dtype), a
    float as a one-element tensor of the compute dtype."""
    if not isinstance(p, Tensor):
        return torch.full((1,), float(p), dtype=dtype, device=x.device)
    return p if p.device == x.device else p.to(x.device)


def generalized_gelu_forward(x: Tensor, mu: Tensor | float, sigma: Tensor | float) -> Tensor:
    """x·Φ((x − μ)/σ), μ and σ floats or scalar / per-channel tensors; nan where σ ≤ 0."""
    wide = _wide(x.dtype)
    return _run_parametric(_GENERALIZED, 0, x, None, mu, sigma, wide=wide)[0]


def generalized_gelu_backward(
    grad: Tensor, x: Tensor, mu: Tensor | float, sigma: Tensor | float
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """(dx, dμ, dσ); dμ and dσ are summed to μ's and σ's shapes (None for a float parameter)."""
    wants = (isinstance(mu, Tensor), isinstance(sigma, Tensor))
    wide = _wide(x.dtype)
    dx, (dmu, dsigma) = _run_parametric(_GENERALIZED, 0, x, grad, mu, sigma, wants, wide)
    return dx, dmu, dsigma


def swish_forward(x: Tensor, beta: Tensor | float = 1.0) -> Tensor:
    """x·σ(β·x); β a float or a scalar / per-channel tensor (β = 0: x/2, also at ±inf)."""
    if not isinstance(beta, Tensor) and x.dtype != torch.float64:
        x = _dense(x)
        _precision(x)
        return _launch_pointwise(x, None, int(kernels.SWISH), beta=beta)
    # A tensor β, or a float β for float64 input (a float kernel argument is fp32).
    wide = _wide(x.dtype)
    return _run_parametric(_SWISH_BETA, 0, x, None, beta, beta, wide=wide)[0]


def swish_backward(
    grad: Tensor, x: Tensor, beta: Tensor | float = 1.0
) -> tuple[Tensor, Tensor | None]:
    """(dx, dβ): dx = grad·(σ(z) + z·σ'(z)), z = βx; dβ = Σ grad·x²·σ'(z) (None for a float β)."""
    if not isinstance(beta, Tensor) and x.dtype != torch.float64:
        x = _dense(x)
        _precision(x)
        return _launch_pointwise(x, _as_layout_of(grad, x), int(kernels.SWISH), beta=beta), None
    wants = (isinstance(beta, Tensor), False)
    wide = _wide(x.dtype)
    dx, (dbeta, _) = _run_parametric(_SWISH_BETA, 0, x, grad, beta, beta, wants, wide)
    return dx, dbeta


def bias_gelu_forward(x: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """gelu(x + bias), the bias read once per program (a scalar or per-channel tensor)."""
    form = _form(approximate)
    wide = _wide(x.dtype)
    return _run_parametric(_BIAS, form, x, None, bias, bias, wide=wide)[0]


def bias_gelu_backward(
    grad: Tensor, x: Tensor, bias: Tensor, approximate: str = "none", *, bias_grad: bool = True
) -> tuple[Tensor, Tensor | None]:
    """(dx, dbias): dx = grad·gelu'(x + bias), dbias = dx summed to the bias's shape and dtype
    (``bias_grad=False``: None, and no partial sums written)."""
    form = _form(approximate)
    wide = _wide(x.dtype)
    wants = (bias_grad, False)
    dx, (dbias, _) = _run_parametric(_BIAS, form, x, grad, bias, bias, wants, wide)
    return dx, dbias


# ---------------------------------------------------------------- GEGLU


def _geglu_shape(x: Tensor, dim: int) -> tuple[int, int]:
    if x.dim() == 0:
        raise ValueError("geglu needs a tensor with at least one dimension, got a scalar")
    dim = dim % x.dim()
    if x.shape[dim] % 2:
        raise ValueError(
            f"geglu splits dim={dim} into two halves, but its size is odd ({x.shape[dim]}); "
            "give the projection an even number of output features"
        )
    return dim, x.shape[dim] // 2 * math.prod(x.shape[dim + 1 :])


def _geglu_launch(
    outer: int, half: int, dtype: torch.dtype, form: int, backward: bool, interpreted=None
):
    """(grid, constants) of geglu_kernel on x viewed as [outer, 2, half] (outer, half > 0):
    blocks of rows on x (the axis that allows 2^31 − 1: BLOCK_ROWS rows of a short half to a
    block keep it below n / BLOCK), column blocks on y, folded into y·z past 65,535 (a 1-D
    input of 2^26 fp32 elements has 65,536); offsets in int64 (any size)."""
    config = launch_config(
        "geglu", dtype, form=form, backward=backward, length=half, interpreted=interpreted
    )
    grid = _checked(
        (triton.cdiv(outer, config["BLOCK_ROWS"]), *_fold(triton.cdiv(half, config["BLOCK"])))
    )
    return grid, config | dict(FOLDED=len(grid) > 2)


def _launch_geglu(x, grad, out, half, approximate):
    form = _form(approximate)
    outer = x.numel() // (2 * half) if half else 0
    if outer:
        grid, config = _geglu_launch(outer, half, x.dtype, form, grad is not None)
        launch(
            kernels.geglu_kernel, grid, x, x if grad is None else grad, out, outer, half, **config
        )
    return out


def geglu_forward(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    """a·gelu(b), [a, b] = x split in halves on ``dim`` (the gate b second)."""
    _precision(x)
    dim, half = _geglu_shape(x, dim)
    x = x.contiguous()
    shape = list(x.shape)
    shape[dim] //= 2
    return _launch_geglu(x, None, x.new_empty(shape), half, approximate)


def geglu_backward(grad: Tensor, x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    """dx = [grad·gelu(b), grad·a·gelu'(b)] in x's shape (contiguous)."""
    _precision(x)
    dim, half = _geglu_shape(x, dim)
    x = x.contiguous()
    return _launch_geglu(x, grad.contiguous(), torch.empty_like(x), half, approximate)
