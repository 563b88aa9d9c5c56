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

Σ sums over the dimensions a parameter was broadcast along. Parameters (μ, σ, tensor β, bias) must
be scalars or vary along one dimension of x (per channel); :func:`supports_parameters` says
whether a call qualifies.
"""

import math

import torch
import triton
from torch import Tensor

from gelus._triton import _kernels as kernels
from gelus._triton import _math, interpreting

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
    channels: int | None = None,
    interpreted: bool | None = None,
) -> dict:
    """The compile-time arguments (constexprs and ``num_warps``) of one launch of ``kernel``.

    The host functions launch with exactly these, and ``tools/compile_kernels.py`` compiles the
    same ones for the SASS gate (``tests/library/test_kernel_instructions.py``), so the gate counts
    the instructions of the code that runs.

    kernel: ``"pointwise"`` (member: a GELU form, ``SWISH`` or ``STOCHASTIC``), ``"geglu"``
    (form), ``"rows"`` or ``"columns"`` (member: ``GENERALIZED``, ``SWISH_BETA`` or ``BIAS``,
    the last with its form). length: GEGLU's half, the rows kernel's row length, the columns
    kernel's row count; channels: the columns kernel's channel count. None: a long tensor (full
    blocks, ``_STEPS`` steps per program). interpreted: None for this process's mode; the
    interpreter takes 16x larger blocks, False gives what a GPU launch takes.
    """
    scale = _INTERPRETER_SCALE if interpreted is None else (16 if interpreted else 1)
    length = _LONG if length is None else length
    # A short length (GEGLU's half, a row of NCHW with a small H·W) takes a smaller block, not a
    # mostly masked one.
    fitted = max(_WARPS * 32, triton.next_power_of_2(length))
    if kernel == "pointwise":
        wide = member != int(kernels.STOCHASTIC) and _wide(dtype)
        config = dict(MEMBER=member, WIDE=wide, BLOCK=_block(dtype, scale))
    elif kernel == "geglu":
        config = dict(FORM=form, WIDE=_wide(dtype), BLOCK=min(_block(dtype, scale), fitted))
    elif kernel in ("rows", "columns"):
        config = dict(MEMBER=member, FORM=form, WIDE=_wide(dtype))
        if kernel == "columns":
            block_c = min(64, triton.next_power_of_2(_LONG if channels is None else channels))
            block_r = _TILE // block_c
            config |= dict(BLOCK_R=block_r, BLOCK_C=block_c, STEPS=_steps(length, block_r))
        else:
            # 4 per thread even in float64: two block-sized float64 partial sums cost registers
            block = min(_block(dtype, scale=scale), fitted)
            steps = _steps(length, block)
            while triton.cdiv(length, block * steps) > 65535:  # the grid's second axis limit
                steps *= 2
            config |= dict(BLOCK=block, STEPS=steps)
    else:
        raise ValueError(f"unknown kernel {kernel!r}; use pointwise, geglu, rows or columns")
    return config | dict(BACKWARD=backward, PREC=_PRECISION[dtype], num_warps=_WARPS)


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
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=True), key=lambda p: p[1]):
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


def _launch_pointwise(x, grad, member, beta=1.0, seed=0, offset=0):
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        config = launch_config("pointwise", x.dtype, member, backward=grad is not None)
        kernels.pointwise_kernel[(triton.cdiv(n, config["BLOCK"]),)](
            x, x if grad is None else grad, out, n, float(beta), int(seed), int(offset), **config
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


def supports_parameters(x: Tensor, *parameters: Tensor | float) -> bool:
    """Whether the parameter kernels take these parameters: each a float or a tensor that
    broadcasts to x's shape and varies along at most one dimension shared by all of them."""
    try:
        _parameter_dim(x, parameters)
    except ValueError:
        return False
    return True


def _parameter_dim(x: Tensor, parameters) -> int | None:
    dims = set()
    for p in parameters:
        if not isinstance(p, Tensor):
            continue
        if torch.broadcast_shapes(x.shape, p.shape) != x.shape:
            raise ValueError(
                f"a parameter of shape {tuple(p.shape)} does not broadcast to x's shape "
                f"{tuple(x.shape)} without enlarging it"
            )
        offset = x.dim() - p.dim()
        dims |= {offset + i for i, size in enumerate(p.shape) if size > 1}
    if len(dims) > 1:
        raise ValueError(
            f"parameters vary along dimensions {sorted(dims)} of x; the Triton kernels take "
            "scalar or per-channel (one dimension) parameters"
        )
    return dims.pop() if dims else None


def _channel_vector(p: Tensor | float, x: Tensor, dim: int | None, dtype) -> Tensor:
    """p as a contiguous [C] vector along dim (C = 1 when dim is None)."""
    if not isinstance(p, Tensor):
        p = torch.tensor(float(p))
    p = p.to(device=x.device, dtype=dtype)
    shape = [1] * x.dim()
    if dim is not None:
        shape[dim] = x.shape[dim]
    return p.reshape((1,) * (x.dim() - p.dim()) + tuple(p.shape)).expand(shape).reshape(-1)


def _run_parametric(member, form, x, grad, p, q, dim):
    """Launch the rows or columns kernel; returns (out, partial sums [2, C] or None)."""
    dtype = p.dtype  # the compute dtype (float64 where launch_config says WIDE)
    out = torch.empty_like(x)
    n = x.numel()
    channels = 1 if dim is None else x.shape[dim]
    backward = grad is not None
    sums = None
    if n == 0:
        return out, torch.zeros(2, channels, dtype=dtype, device=x.device) if backward else None
    grad_arg = x if grad is None else grad
    stride = n if dim is None else x.stride(dim)
    if channels > 1 and stride == 1:  # the channel is the fastest dimension in storage
        rows = n // channels
        config = launch_config(
            "columns", x.dtype, member, form, backward, length=rows, channels=channels
        )
        block_r = config["BLOCK_R"] * config["STEPS"]
        grid = (triton.cdiv(channels, config["BLOCK_C"]), triton.cdiv(rows, block_r))
        partial = torch.empty(2, grid[1], channels, dtype=dtype, device=x.device)
        kernels.columns_kernel[grid](x, grad_arg, out, p, q, partial, rows, channels, **config)
        if backward:
            sums = partial.sum(1)
    else:  # one channel per row of `stride` elements
        rows = n // stride
        config = launch_config("rows", x.dtype, member, form, backward, length=stride)
        chunks = triton.cdiv(stride, config["BLOCK"] * config["STEPS"])
        partial = torch.empty(2, rows, chunks, dtype=dtype, device=x.device)
        kernels.rows_kernel[(rows, chunks)](
            x, grad_arg, out, p, q, partial, stride, channels, chunks, **config
        )
        if backward:
            sums = partial.sum(2).view(2, rows // channels, channels).sum(1)
    return out, sums


def _steps(length: int, block: int) -> int:
    """Blocks per program: _STEPS, or fewer (a power of two) when the length is shorter."""
    return min(_STEPS, triton.next_power_of_2(triton.cdiv(length, block)))


def _reduce_to(vector: Tensor, p: Tensor, x: Tensor, dim: int | None) -> Tensor:
    """A per-channel gradient [C] summed down to the parameter's shape and dtype."""
    shape = [1] * x.dim()
    if dim is not None:
        shape[dim] = vector.numel()
    return vector.view(shape).sum_to_size(p.shape).to(p.dtype)


def _generalized_setup(x: Tensor, mu: Tensor | float, sigma: Tensor | float):
    """(dense x, μ per channel, 1/σ per channel, channel dim) for both generalized kernels."""
    x = _dense(x)
    _precision(x)
    dim = _parameter_dim(x, (mu, sigma))
    wide = _wide(x.dtype)
    dtype = torch.float64 if wide else torch.float32
    p = _channel_vector(mu, x, dim, dtype)
    q = 1.0 / _channel_vector(sigma, x, dim, dtype)
    return x, p, q, dim


def generalized_gelu_forward(x: Tensor, mu: Tensor | float, sigma: Tensor | float) -> Tensor:
    """x·Φ((x − μ)/σ), μ and σ floats or scalar / per-channel tensors."""
    x, p, q, dim = _generalized_setup(x, mu, sigma)
    return _run_parametric(int(kernels.GENERALIZED), 0, x, None, p, q, dim)[0]


def generalized_gelu_backward(
    grad: Tensor, x: Tensor, mu: Tensor | float, sigma: Tensor | float
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """(dx, dμ, dσ); dμ and dσ are summed to μ's and σ's shapes (None for a float parameter)."""
    x, p, q, dim = _generalized_setup(x, mu, sigma)
    dx, sums = _run_parametric(int(kernels.GENERALIZED), 0, x, _as_layout_of(grad, x), p, q, dim)
    dmu = _reduce_to(sums[0], mu, x, dim) if isinstance(mu, Tensor) else None
    dsigma = _reduce_to(sums[1], sigma, x, dim) if isinstance(sigma, Tensor) else None
    return dx, dmu, dsigma


def swish_forward(x: Tensor, beta: Tensor | float = 1.0) -> Tensor:
    """x·σ(β·x); β a float or a scalar / per-channel tensor (β = 0: x/2, also at ±inf)."""
    x = _dense(x)
    _precision(x)
    if not isinstance(beta, Tensor) and x.dtype != torch.float64:
        return _launch_pointwise(x, None, int(kernels.SWISH), beta=beta)
    # A tensor β, or a float β for float64 input (a float kernel argument is fp32).
    dim = _parameter_dim(x, (beta,))
    wide = _wide(x.dtype)
    b = _channel_vector(beta, x, dim, torch.float64 if wide else torch.float32)
    return _run_parametric(int(kernels.SWISH_BETA), 0, x, None, b, b, dim)[0]


def swish_backward(
    grad: Tensor, x: Tensor, beta: Tensor | float = 1.0
) -> tuple[Tensor, Tensor | None]:
    """(dx, dβ): dx = grad·(σ(z) + z·σ'(z)), z = βx; dβ = Σ grad·x²·σ'(z) (None for a float β)."""
    x = _dense(x)
    _precision(x)
    grad = _as_layout_of(grad, x)
    if not isinstance(beta, Tensor) and x.dtype != torch.float64:
        return _launch_pointwise(x, grad, int(kernels.SWISH), beta=beta), None
    dim = _parameter_dim(x, (beta,))
    wide = _wide(x.dtype)
    b = _channel_vector(beta, x, dim, torch.float64 if wide else torch.float32)
    dx, sums = _run_parametric(int(kernels.SWISH_BETA), 0, x, grad, b, b, dim)
    return dx, _reduce_to(sums[0], beta, x, dim) if isinstance(beta, Tensor) else None


def _bias_setup(x: Tensor, bias: Tensor, approximate: str):
    """(form, dense x, bias as a channel vector, channel dim) for the bias-GELU kernels."""
    form = _form(approximate)
    x = _dense(x)
    _precision(x)
    dim = _parameter_dim(x, (bias,))
    wide = _wide(x.dtype)
    b = _channel_vector(bias, x, dim, torch.float64 if wide else torch.float32)
    return form, x, b, dim


def bias_gelu_forward(x: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """gelu(x + bias), the bias read once per program (a scalar or per-channel tensor)."""
    form, x, b, dim = _bias_setup(x, bias, approximate)
    return _run_parametric(int(kernels.BIAS), form, x, None, b, b, dim)[0]


def bias_gelu_backward(
    grad: Tensor, x: Tensor, bias: Tensor, approximate: str = "none"
) -> tuple[Tensor, Tensor]:
    """(dx, dbias): dx = grad·gelu'(x + bias), dbias = dx summed to the bias's shape."""
    form, x, b, dim = _bias_setup(x, bias, approximate)
    dx, sums = _run_parametric(int(kernels.BIAS), form, x, _as_layout_of(grad, x), b, b, dim)
    return dx, _reduce_to(sums[0], bias, x, dim)


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


def _launch_geglu(x, grad, out, half, approximate):
    form = _form(approximate)
    outer = x.numel() // (2 * half) if half else 0
    if outer:
        config = launch_config("geglu", x.dtype, form=form, backward=grad is not None, length=half)
        grid = (outer, triton.cdiv(half, config["BLOCK"]))  # outer on the axis that allows 2^31 − 1
        kernels.geglu_kernel[grid](x, x if grad is None else grad, out, half, **config)
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
