"""The Triton kernels: one load of each input, one store of each output, math in registers.

Three layouts cover every member, and one kernel finishes the parameter gradients:

- :func:`pointwise_kernel`: a flat pass over a dense tensor (GELU in its three forms, Swish with a
  float β, stochastic GELU); forward ``y = f(x)``, backward ``dx = grad·f'(x)``.
- :func:`geglu_kernel`: x viewed as [outer, 2, half] (the split dimension in the middle); both
  halves are read once and the backward writes both halves of dx.
- :func:`rows_kernel` / :func:`columns_kernel`: members with per-channel parameters (generalized
  GELU's μ and σ, Swish's tensor β, bias-GELU's bias). Rows: the storage is [R, L] with one
  channel per row (scalar parameters, or NCHW with the channel dim outside the fastest one); a
  program takes BLOCK_ROWS rows (several when L is short), loads their parameters once and sums
  the gradient contributions of its part of each row.
  Columns: the storage is [R, C] with the channel fastest (``[..., C]`` and channels_last); each
  program loads its block of C parameters once and sums its rows. Either way the backward
  writes one partial sum per program and channel, in one layout [sums, groups, C].
- :func:`finish_kernel`: adds those partial sums up per channel, in a fixed order (deterministic,
  no atomics), and writes the parameter gradients in the parameters' dtype.
"""

import triton
import triton.language as tl

from gelus._triton import interpreting
from gelus._triton._math import (
    HALF,
    SWISH_CLAMP,
    gelu_form,
    gelu_form_slope,
    gelu_form_slope_times,
    gelu_form_times,
    normal_cdf_pdf,
    swish_slope,
    swish_value,
)

__all__ = [
    "BIAS",
    "GENERALIZED",
    "STOCHASTIC",
    "SWISH",
    "SWISH_BETA",
    "columns_kernel",
    "finish_kernel",
    "geglu_kernel",
    "pointwise_kernel",
    "rows_kernel",
]

# Members of the flat kernel beyond the three GELU forms (0, 1, 2 = EXACT, TANH, SIGMOID).
SWISH = tl.constexpr(3)
STOCHASTIC = tl.constexpr(4)
# Members of the parameter kernels.
GENERALIZED = tl.constexpr(0)
SWISH_BETA = tl.constexpr(1)
BIAS = tl.constexpr(2)


@triton.jit
def _widen(x, WIDE: tl.constexpr):
    """To the compute dtype: float64 for float64 input, fp32 for the others."""
    if WIDE:
        x = x.to(tl.float64)
    else:
        x = x.to(tl.float32)
    return x


# Triton's interpreter (3.9) truncates fp32 -> bf16 where the GPU rounds to nearest even; the
# interpreted kernels round by hand instead, so that the CPU tests see what the GPU computes.
_INTERPRETED = tl.constexpr(interpreting())


@triton.jit
def _rounded(value, pointer):
    """value rounded once, to nearest even, to the element type of pointer."""
    dtype = pointer.dtype.element_ty
    if dtype == tl.bfloat16 and _INTERPRETED:
        bits = value.to(tl.float32).to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # nan and inf keep their top bits
        value = bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        value = value.to(dtype)
    return value


@triton.jit
def _uniform(seed, first, BLOCK: tl.constexpr):
    """U[0, 1) for elements first, ..., first + BLOCK − 1 (first a multiple of 4): element g takes
    lane g % 4 of Philox(seed, counter g // 4), so one Philox call serves four elements (tl.rand
    would spend one per element) and the stream does not depend on the block size."""
    counters = first // 4 + tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.randint4x(seed, counters)
    bits = tl.reshape(tl.join(tl.join(r0, r1), tl.join(r2, r3)), [BLOCK])  # r0 r1 r2 r3 r0 ...
    return tl.random.uint_to_uniform_float(bits)


@triton.jit
def _stochastic_mask(x, seed, first, BLOCK: tl.constexpr):
    """m ~ Bernoulli(Φ(x)): the same bits in forward and backward."""
    cdf, _ = normal_cdf_pdf(x.to(tl.float32), HALF)
    return ~(_uniform(seed, first, BLOCK) >= cdf)  # nan: True, so that x·m stays nan


@triton.jit(do_not_specialize=["seed", "offset"])  # a fresh seed per call must not recompile
def pointwise_kernel(
    x_ptr,
    grad_ptr,
    out_ptr,
    n,
    beta,
    seed,
    offset,
    MEMBER: tl.constexpr,
    BACKWARD: tl.constexpr,
    PREC: tl.constexpr,
    WIDE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < n
    raw = tl.load(x_ptr + index, mask=inside, other=0.0)
    if BACKWARD:
        grad = tl.load(grad_ptr + index, mask=inside, other=0.0)
    if MEMBER == STOCHASTIC:
        keep = _stochastic_mask(raw, seed, offset + tl.program_id(0).to(tl.int64) * BLOCK, BLOCK)
        if BACKWARD:
            result = tl.where(keep, grad, 0.0)
        else:
            result = tl.where(keep, raw, 0.0)
    else:
        x = _widen(raw, WIDE)
        if MEMBER == SWISH:
            if BACKWARD:
                result = grad.to(x.dtype) * swish_slope(x, beta)
            else:
                result = swish_value(x, beta)
        elif BACKWARD:
            result = grad.to(x.dtype) * gelu_form_slope(x, MEMBER, PREC)
        else:
            result = gelu_form(x, MEMBER, PREC)
    tl.store(out_ptr + index, _rounded(result, out_ptr), mask=inside)


@triton.jit
def _folded_program(axis: tl.constexpr, FOLDED: tl.constexpr):
    """The program's index along ``axis`` (1); FOLDED: the grid's axes 1 and 2 together count
    one axis longer than CUDA's 65,535 for y, pid(1) + pid(2)·programs(1) (a variant of its own,
    so that the usual launch pays nothing for it)."""
    if FOLDED:
        index = tl.program_id(axis) + tl.program_id(2) * tl.num_programs(axis)
    else:
        index = tl.program_id(axis)
    return index


@triton.jit
def geglu_kernel(
    x_ptr,
    grad_ptr,
    out_ptr,
    outer,
    half,
    FORM: tl.constexpr,
    BACKWARD: tl.constexpr,
    PREC: tl.constexpr,
    WIDE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    FOLDED: tl.constexpr,
):
    # Program (o, j, k) covers output elements (r, c) for BLOCK_ROWS rows r from o·BLOCK_ROWS and
    # BLOCK columns c from (j + k·programs(1))·BLOCK: a = x[r, 0, c] and the gate b = x[r, 1, c].
    # A 2-D grid (3-D where the columns need more than 65,535 blocks), so that no element pays a
    # (64-bit) division by `half`; short halves put several rows in one program (BLOCK_ROWS > 1),
    # which also keeps the first axis below 2^31 for any tensor memory holds.
    row = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    column = _folded_program(1, FOLDED).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = (column < half)[None, :]
    if BLOCK_ROWS > 1:  # one row per program: the grid has exactly `outer` of them
        inside = (row < outer)[:, None] & inside
    index = row[:, None] * half + column[None, :]
    a_index = index + row[:, None] * half
    a_raw = tl.load(x_ptr + a_index, mask=inside, other=0.0)
    b = _widen(tl.load(x_ptr + a_index + half, mask=inside, other=0.0), WIDE)
    a = a_raw.to(b.dtype)
    if BACKWARD:
        grad = tl.load(grad_ptr + index, mask=inside, other=0.0).to(b.dtype)
        grad_a = gelu_form_times(b, grad, FORM, PREC)
        grad_b = gelu_form_slope_times(b, grad * a, FORM, PREC)
        tl.store(out_ptr + a_index, _rounded(grad_a, out_ptr), mask=inside)
        tl.store(out_ptr + a_index + half, _rounded(grad_b, out_ptr), mask=inside)
    else:
        y = gelu_form_times(b, a, FORM, PREC)
        tl.store(out_ptr + index, _rounded(y, out_ptr), mask=inside)


@triton.jit
def _parametric(
    grad,
    x,
    p,
    q,
    MEMBER: tl.constexpr,
    FORM: tl.constexpr,
    PREC: tl.constexpr,
    BACKWARD: tl.constexpr,
):
    """(out, r1, r2): the forward value, or (dx, gradient terms of the two parameters)."""
    if MEMBER == GENERALIZED:  # p = μ, q = 1/σ
        z = (x - p) * q
        cdf, pdf = normal_cdf_pdf(z, PREC)
        if BACKWARD:
            # x·φ(z)/σ is common to all three gradients; where φ underflows it is 0 (not inf·0).
            common = tl.where(pdf == 0, 0.0, x * pdf * q)
            out = grad * (cdf + common)
            r1 = -grad * common
            r2 = tl.where(pdf == 0, 0.0, -grad * common * z)
        else:
            out = tl.where(cdf == 0, tl.where(x < 0, -0.0, 0.0), x * cdf)
            r1 = out
            r2 = out
    elif MEMBER == SWISH_BETA:  # p = β
        if BACKWARD:
            out = grad * swish_slope(x, p)
            z = p * x
            t = tl.exp(-tl.abs(z))
            ds = t / ((1.0 + t) * (1.0 + t))  # σ'(z)
            r1 = tl.where(tl.abs(z) >= SWISH_CLAMP, 0.0, grad * x * x * ds)
        else:
            out = swish_value(x, p)
            r1 = out
        r2 = r1
    else:  # BIAS: p = the bias, added before the GELU of the given form
        h = x + p
        if BACKWARD:
            out = grad * gelu_form_slope(h, FORM, PREC)
        else:
            out = gelu_form(h, FORM, PREC)
        r1 = out
        r2 = out
    return out, r1, r2


@triton.jit
def _parametric_step(
    x_ptr,
    grad_ptr,
    offsets,
    inside,
    p,
    q,
    MEMBER: tl.constexpr,
    FORM: tl.constexpr,
    PREC: tl.constexpr,
    BACKWARD: tl.constexpr,
    dtype: tl.constexpr,
):
    """:func:`_parametric` at x[offsets] (and grad[offsets] for the backward), loaded where
    ``inside`` in the compute dtype: one step of the rows and the columns kernels."""
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(dtype)
    grad = x
    if BACKWARD:
        grad = tl.load(grad_ptr + offsets, mask=inside, other=0.0).to(dtype)
    return _parametric(grad, x, p, q, MEMBER, FORM, PREC, BACKWARD)


@triton.jit
def _parameters(p_ptrs, q_ptrs, mask, MEMBER: tl.constexpr, dtype: tl.constexpr):
    """(p, q) loaded from p_ptrs, q_ptrs in the compute dtype; for generalized GELU, q_ptrs point
    at σ and q is 1/σ (correctly rounded), nan where σ is not > 0: a nan result, never another
    function (x·Φ(−x) for σ = −1)."""
    p = tl.load(p_ptrs, mask=mask, other=0.0).to(dtype)
    q = tl.load(q_ptrs, mask=mask, other=1.0).to(dtype)
    if MEMBER == GENERALIZED:
        q = tl.where(q > 0, q, float("nan"))
        if dtype == tl.float32:
            q = tl.math.div_rn(1.0, q)  # fp32 `/` is approximate on the GPU (≤ 2 ulp)
        else:
            q = 1.0 / q
    return p, q


@triton.jit
def rows_kernel(
    x_ptr,
    grad_ptr,
    out_ptr,
    p_ptr,
    q_ptr,
    partial_ptr,
    rows,
    row_length,
    channels,
    chunks,
    p_stride,
    q_stride,
    MEMBER: tl.constexpr,
    FORM: tl.constexpr,
    BACKWARD: tl.constexpr,
    SUMS: tl.constexpr,
    PREC: tl.constexpr,
    WIDE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    STEPS: tl.constexpr,
    INT64: tl.constexpr,
):
    # Program (row block, chunk): [chunk·BLOCK·STEPS, ...) of BLOCK_ROWS rows, row r of channel
    # r % channels. Partial sums: partial[SUMS, groups, channels], group (r // channels)·chunks +
    # chunk (finish_kernel sums groups). Row numbers int32 unless INT64 (ops._rows_launch).
    row = tl.program_id(0).to(tl.int64 if INT64 else tl.int32) * BLOCK_ROWS
    row += tl.arange(0, BLOCK_ROWS)
    chunk = tl.program_id(1)
    in_rows = row < rows
    channel = row % channels
    dtype = tl.float64 if WIDE else tl.float32
    p, q = _parameters(
        p_ptr + channel * p_stride, q_ptr + channel * q_stride, in_rows, MEMBER, dtype
    )
    p = p[:, None]
    q = q[:, None]
    base = row.to(tl.int64)[:, None] * row_length
    sum1 = tl.zeros([BLOCK_ROWS, BLOCK], dtype)
    sum2 = tl.zeros([BLOCK_ROWS, BLOCK], dtype)
    for step in range(STEPS):  # a loop, not unrolled: registers for one step only
        column = (chunk * STEPS + step).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = in_rows[:, None] & (column < row_length)[None, :]
        offsets = base + column[None, :]
        out, r1, r2 = _parametric_step(
            x_ptr, grad_ptr, offsets, inside, p, q, MEMBER, FORM, PREC, BACKWARD, dtype
        )
        tl.store(out_ptr + offsets, _rounded(out, out_ptr), mask=inside)
        if SUMS > 0:
            sum1 += tl.where(inside, r1, 0.0).to(dtype)
        if SUMS > 1:
            sum2 += tl.where(inside, r2, 0.0).to(dtype)
    if SUMS > 0:
        group = (row // channels).to(tl.int64) * chunks + chunk
        slot = group * channels + channel
        tl.store(partial_ptr + slot, tl.sum(sum1, axis=1), mask=in_rows)
        if SUMS > 1:  # the second sum after rows·chunks slots of the first
            second = rows.to(tl.int64) * chunks if INT64 else rows * chunks
            tl.store(partial_ptr + second + slot, tl.sum(sum2, axis=1), mask=in_rows)


@triton.jit
def columns_kernel(
    x_ptr,
    grad_ptr,
    out_ptr,
    p_ptr,
    q_ptr,
    partial_ptr,
    rows,
    channels,
    p_stride,
    q_stride,
    MEMBER: tl.constexpr,
    FORM: tl.constexpr,
    BACKWARD: tl.constexpr,
    SUMS: tl.constexpr,
    PREC: tl.constexpr,
    WIDE: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
    STEPS: tl.constexpr,
    INT64: tl.constexpr,
    FOLDED: tl.constexpr,
):
    # Program (row block, column block j + k·programs(1)) covers BLOCK_R·STEPS rows of BLOCK_C
    # channels (row blocks on the grid's first axis, which allows 2^31 − 1 programs; the column
    # blocks on y, and z where they are more than 65,535); its SUMS partial sums go to
    # partial[SUMS, row blocks, channels]. Channel numbers and parameter offsets in int32 unless
    # one can reach 2^31 (INT64: the host's choice, ops._columns_launch).
    row_block = tl.program_id(0)
    column = _folded_program(1, FOLDED).to(tl.int64 if INT64 else tl.int32) * BLOCK_C
    column += tl.arange(0, BLOCK_C)
    in_columns = column < channels
    dtype = tl.float64 if WIDE else tl.float32
    p, q = _parameters(
        p_ptr + column * p_stride, q_ptr + column * q_stride, in_columns, MEMBER, dtype
    )
    p = p[None, :]
    q = q[None, :]
    sum1 = tl.zeros([BLOCK_R, BLOCK_C], dtype)
    sum2 = tl.zeros([BLOCK_R, BLOCK_C], dtype)
    for step in range(STEPS):  # a loop, not unrolled: registers for one step only
        row = (row_block * STEPS + step).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
        inside = (row < rows)[:, None] & in_columns[None, :]
        offsets = row[:, None] * channels + column[None, :]
        out, r1, r2 = _parametric_step(
            x_ptr, grad_ptr, offsets, inside, p, q, MEMBER, FORM, PREC, BACKWARD, dtype
        )
        tl.store(out_ptr + offsets, _rounded(out, out_ptr), mask=inside)
        if SUMS > 0:
            sum1 += tl.where(inside, r1, 0.0).to(dtype)
        if SUMS > 1:
            sum2 += tl.where(inside, r2, 0.0).to(dtype)
    if SUMS > 0:
        slot = row_block.to(tl.int64) * channels + column
        tl.store(partial_ptr + slot, tl.sum(sum1, axis=0), mask=in_columns)
        if SUMS > 1:
            total = tl.num_programs(0).to(tl.int64) * channels
            tl.store(partial_ptr + total + slot, tl.sum(sum2, axis=0), mask=in_columns)


@triton.jit
def finish_kernel(
    partial_ptr,
    out1_ptr,
    out2_ptr,
    groups,
    channels,
    second,
    OUT1: tl.constexpr,
    OUT2: tl.constexpr,
    WIDE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_C: tl.constexpr,
    INT64: tl.constexpr,
):
    """The parameter gradients from the partial sums partial[2, groups, channels] (the second
    starting at element ``second``): out_k[c] =
    Σ_g partial[k − 1, g, c] for OUT_k = 1 (per channel), out_k[0] = Σ_g Σ_c for OUT_k = 2 (a
    scalar parameter beside a per-channel one), nothing for OUT_k = 0. A fixed order (blocks of
    BLOCK_G groups added in turn, then a tree within the block), no atomics: the same sums bit
    for bit on every run. A scalar output takes one program, which walks every channel block."""
    dtype = tl.float64 if WIDE else tl.float32
    all1 = tl.zeros([BLOCK_C], dtype)
    all2 = tl.zeros([BLOCK_C], dtype)
    # int64 loop counters where channels or groups come within a block of 2^31 (INT64, the
    # host's choice): an int32 counter would wrap around
    index: tl.constexpr = tl.int64 if INT64 else tl.int32
    start = tl.program_id(0).to(index) * BLOCK_C
    for first in range(start, channels, tl.num_programs(0).to(index) * BLOCK_C):
        column = first + tl.arange(0, BLOCK_C)
        in_columns = column < channels
        sum1 = tl.zeros([BLOCK_G, BLOCK_C], dtype)
        sum2 = tl.zeros([BLOCK_G, BLOCK_C], dtype)
        for first_group in range(start * 0, groups, BLOCK_G):
            group = first_group + tl.arange(0, BLOCK_G)
            inside = (group < groups)[:, None] & in_columns[None, :]
            slot = partial_ptr + group.to(tl.int64)[:, None] * channels + column[None, :]
            if OUT1 > 0:
                sum1 += tl.load(slot, mask=inside, other=0.0).to(dtype)
            if OUT2 > 0:
                sum2 += tl.load(slot + second.to(index), mask=inside, other=0.0).to(dtype)
        if OUT1 == 1:
            tl.store(out1_ptr + column, _rounded(tl.sum(sum1, axis=0), out1_ptr), mask=in_columns)
        if OUT1 == 2:
            all1 += tl.sum(sum1, axis=0)
        if OUT2 == 1:
            tl.store(out2_ptr + column, _rounded(tl.sum(sum2, axis=0), out2_ptr), mask=in_columns)
        if OUT2 == 2:
            all2 += tl.sum(sum2, axis=0)
    if OUT1 == 2:
        tl.store(out1_ptr, _rounded(tl.sum(all1, axis=0), out1_ptr))
    if OUT2 == 2:
        tl.store(out2_ptr, _rounded(tl.sum(all2, axis=0), out2_ptr))
