"""Every launch of the Triton kernels within CUDA's limits, for any tensor memory holds.

CUDA allows 2^31 − 1 programs on a grid's x axis and 65,535 on y and z; an offset past 2^31 needs
int64 arithmetic. The grids are computed here by the functions the host functions launch with
(``ops._pointwise_launch``, ``ops._geglu_launch``, ``ops._plan``), for boundary shapes, without
allocating or launching anything; the int64 variants are checked in the code Triton generates
for them (every address offset 64-bit). Then the restructured indexing (a grid folded into
y·z, GEGLU rows sharing a block, the int64 variants) runs in the interpreter on small shapes,
the caps lowered so that small tensors take those paths, against float64 oracles (numpy and
scipy, tests/oracles.py).
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from _triton_support import DEVICE, ops, triton_marks
from oracles import gelu_oracle, generalized, generalized_grads

pytestmark = triton_marks

ROOT = Path(__file__).resolve().parents[2]
X_LIMIT, YZ_LIMIT = 2**31 - 1, 65535  # CUDA's grid limits (x; y and z)
# bytes: more than any GPU holds (192 GB on a B200, 288 GB on a B300); tensors below it
MEMORY = 2**39
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FORMS = (0, 1, 2)
GENERALIZED, SWISH_BETA, BIAS = 0, 1, 2


def assert_within_limits(grid) -> None:
    assert 1 <= len(grid) <= 3 and all(isinstance(g, int) and g >= 1 for g in grid), grid
    assert grid[0] <= X_LIMIT, f"grid {grid}: x above 2^31 − 1"
    assert all(g <= YZ_LIMIT for g in grid[1:]), f"grid {grid}: y or z above 65,535"


def _folded_blocks(grid) -> int:
    """The programs along the kernel's second axis: y, or y·z where the grid is folded."""
    return grid[1] * (grid[2] if len(grid) > 2 else 1)


def _contiguous(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _plan(shape, pshape=(), pstrides=None, *, strides=None, dtype=torch.float32,
          member=BIAS, backward=True, wants=(True, False), channels_last=False):  # fmt: skip
    """ops._plan for x of ``shape`` and a parameter of ``pshape`` (strides given or contiguous):
    the key _run_parametric builds from tensors, from shapes alone."""
    if strides is None:
        strides = _contiguous(shape)
        if channels_last:
            _, c, h, w = shape
            strides = (h * w * c, 1, w * c, c)
    layout = (tuple(pshape), tuple(pstrides or _contiguous(pshape)))
    wants = wants if backward else (False, False)
    key = (tuple(shape), tuple(strides), dtype, dtype == torch.float64, member, 0, backward,
           (layout, layout), wants)  # fmt: skip
    return ops._plan(key, 1)


@pytest.fixture(autouse=True)
def _fresh_plans():
    """Plans are cached by shape: none computed under a lowered cap may outlive its test."""
    ops._plan.cache_clear()
    yield
    ops._plan.cache_clear()


def test_the_limits_are_cudas():
    assert (ops._GRID_X, ops._GRID_YZ, ops._INT32) == (X_LIMIT, YZ_LIMIT, 2**31 - 1)


# ---------------------------------------------------------------- grids, computed without launching


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pointwise_grids(dtype):
    for n in (1, 2**31 - 1, 2**31, 2**33 + 5, MEMORY // dtype.itemsize - 1):
        for member, backward in ((0, False), (0, True), (4, True)):
            grid, config = ops._pointwise_launch(n, dtype, member, backward, interpreted=False)
            assert_within_limits(grid)
            assert (grid[0] - 1) * config["BLOCK"] < n <= grid[0] * config["BLOCK"]


def _geglu_shapes(itemsize: int):
    """(outer, half) of x viewed as [outer, 2, half]: the named boundary cases, then a sweep of
    powers of two (and one more) up to MEMORY bytes."""
    named = [
        (1, 2**25),  # a 1-D input of 2^26 elements: 65,536 blocks of 512 fp32 on y before
        (1, 2**26),
        (1, 2**32),  # 2^33 elements, 1-D
        (2**32, 1),  # more than 2^31 rows, each a pair (a, b)
        (2**31, 32),
        (2**31 + 1, 3),
        (3, 65535 * 512 + 1),
    ]
    sweep = [
        (outer + i, half + j)
        for outer in (2**k for k in range(40))
        for half in (2**k for k in range(40))
        for i, j in ((0, 0), (1, 1))
        if 2 * (outer + i) * (half + j) * itemsize < MEMORY
    ]
    return [(o, h) for o, h in named if 2 * o * h * itemsize < MEMORY] + sweep


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_geglu_grids(dtype):
    folded = 0
    for outer, half in _geglu_shapes(dtype.itemsize):
        for backward in (False, True):
            grid, config = ops._geglu_launch(outer, half, dtype, 0, backward, interpreted=False)
            assert_within_limits(grid)
            rows, block = config["BLOCK_ROWS"], config["BLOCK"]
            assert grid[0] * rows >= outer > (grid[0] - 1) * rows  # every row, no idle block
            blocks = math.ceil(half / block)
            assert blocks <= _folded_blocks(grid) < blocks + (grid[2] if len(grid) > 2 else 1)
            assert config["FOLDED"] == (len(grid) == 3)
            folded += config["FOLDED"]
    assert folded, "no shape needed a folded grid: the sweep misses the case it is for"


def test_geglu_one_dimensional_2_26_fp32_is_folded():
    """The issue's case: 65,536 blocks of 512 on y; now 32,768 × 2 on y·z."""
    grid, config = ops._geglu_launch(1, 2**25, torch.float32, 0, False, interpreted=False)
    assert (grid, config["BLOCK"], config["FOLDED"]) == ((1, 32768, 2), 512, True)
    # and the largest unfolded one
    grid, config = ops._geglu_launch(1, 65535 * 512, torch.float32, 0, True, interpreted=False)
    assert (grid, config["FOLDED"]) == ((1, 65535), False)


def test_geglu_short_halves_share_a_block():
    grid, config = ops._geglu_launch(2**32, 1, torch.float16, 1, True, interpreted=False)
    assert (config["BLOCK_ROWS"], config["BLOCK"]) == (1024, 1) and grid == (2**22, 1)
    assert (
        ops._geglu_launch(7, 48, torch.float32, 0, False, interpreted=False)[1]["BLOCK_ROWS"] == 8
    )


def _parameter_cases():
    """(name, plan arguments) of the parameter kernels' boundary shapes."""
    c = 65535 * 64  # 4,194,240: the most channels an unfolded columns grid takes
    big = 2**31
    return [
        ("bias-GELU (4, 2^24), columns", dict(shape=(4, 2**24), pshape=(2**24,))),
        ("columns, 4,194,240 channels", dict(shape=(2, c), pshape=(c,))),
        ("columns, 4,194,241 channels", dict(shape=(2, c + 1), pshape=(c + 1,))),
        ("columns, 4,194,304 channels", dict(shape=(2, c + 64), pshape=(c + 64,))),
        ("columns, 2^31 + 64 channels (1-D, per element)", dict(shape=(big + 64,), pshape=(big + 64,))),
        # 2^31 − 6400 channels: 33,554,332 blocks of 64 in 65,409 × 513 programs, the idle ones'
        # channel numbers past 2^31 − 1
        ("columns, 2^31 − 6400 channels (1-D)", dict(shape=(big - 6400,), pshape=(big - 6400,))),
        ("columns, 2^33 elements", dict(shape=(2**27, 64), pshape=(64,))),
        ("channels_last, 2^32 elements", dict(shape=(2**12, 64, 128, 128), pshape=(64, 1, 1),
                                              channels_last=True)),
        ("columns, parameter stride 2^30", dict(shape=(8, 3), pshape=(3,), pstrides=(2**30,))),
        ("columns, parameter stride 2^29", dict(shape=(8, 3), pshape=(3,), pstrides=(2**29,))),
        ("columns, stride × C just below 2^31", dict(shape=(8, 5), pshape=(5,),
                                                     pstrides=((big - 1) // 4,))),
        ("rows, parameter stride 2^30", dict(shape=(2, 3, 4, 4), pshape=(3, 1, 1),
                                             pstrides=(2**30, 1, 1))),
        ("rows, 2^32 rows of 2", dict(shape=(2**30, 4, 2), pshape=(4, 1))),
        ("rows, 2^31 − 1 rows", dict(shape=(big - 1, 2), pshape=(big - 1, 1))),
        ("rows, one row of 2^33 (scalar parameters)", dict(shape=(2**33,), pshape=())),
        ("rows, NCHW 2^33 elements", dict(shape=(2**13, 64, 128, 128), pshape=(64, 1, 1))),
        ("rows, 2^31 channels of 2", dict(shape=(big, 2), pshape=(big, 1))),
        # 2^30 + 1 channels: finish_kernel's channel loop steps past 2^31 − 1 (its int64 variant)
        ("columns, 2^30 + 1 channels (1-D)", dict(shape=(2**30 + 1,), pshape=(2**30 + 1,))),
    ]  # fmt: skip


# the plans that must take the int64 variant (some offset reaches 2^31), and those that need not
INT64 = {
    "columns, 2^31 + 64 channels (1-D, per element)",
    "columns, 2^31 − 6400 channels (1-D)",
    "columns, parameter stride 2^30",
    "rows, parameter stride 2^30",
    "rows, 2^32 rows of 2",
    "rows, 2^31 − 1 rows",
    "rows, 2^31 channels of 2",
}
FOLDED = {
    "bias-GELU (4, 2^24), columns",
    "columns, 2^30 + 1 channels (1-D)",
    "columns, 2^31 − 6400 channels (1-D)",
    "columns, 4,194,241 channels",
    "columns, 4,194,304 channels",
    "columns, 2^31 + 64 channels (1-D, per element)",
}


@pytest.mark.parametrize("name, case", _parameter_cases(), ids=[c[0] for c in _parameter_cases()])
@pytest.mark.parametrize("member", [BIAS, GENERALIZED, SWISH_BETA])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_parameter_kernel_grids(name, case, member, dtype):
    wants = (True, True) if member == GENERALIZED else (True, False)
    for backward in (False, True):
        plan = _plan(**case, dtype=dtype, member=member, backward=backward, wants=wants)
        assert_within_limits(plan.grid)
        options = plan.options
        if plan.kernel == "columns_kernel":
            rows, channels = plan.sizes
            blocks = math.ceil(channels / options["BLOCK_C"])
            assert blocks <= _folded_blocks(plan.grid) < blocks + plan.grid[-1]
            assert plan.grid[0] * options["BLOCK_R"] * options["STEPS"] >= rows
            assert options["FOLDED"] == (len(plan.grid) == 3) == (name in FOLDED)
        else:
            rows, length, channels, chunks = plan.sizes
            assert name not in FOLDED and len(plan.grid) == 2
            assert plan.grid == (math.ceil(rows / options["BLOCK_ROWS"]), chunks)
            assert chunks * options["BLOCK"] * options["STEPS"] >= length
        assert options["INT64"] == (name in INT64), "int32 where an offset reaches 2^31, or int64 "
        if backward:
            assert_within_limits(plan.finish_grid)
            groups, channels, second = plan.finish_sizes
            assert plan.partial == plan.sums * groups * channels and second == groups * channels
            # the channel loop's counter steps by the grid's width of blocks past the channels
            options = plan.finish_options
            last = channels + plan.finish_grid[0] * options["BLOCK_C"]
            wide = max(last, groups + options["BLOCK_G"]) > 2**31 - 1
            assert options["INT64"] == wide
            assert wide or not name.startswith("columns, 2^30 + 1")


def test_parameter_kernel_grids_sweep():
    """Columns (R × C, C fastest) and rows (N × C × L) layouts from powers of two (and one more)
    up to MEMORY bytes of fp16: every grid within the limits, int64 whenever an offset or an
    index can pass 2^31 − 1 in int32."""
    folded = int64 = 0
    for a in range(0, 39, 2):
        for b in range(0, 39 - a, 2):
            for extra in (0, 1):
                r, c = 2**a + extra, 2**b + extra
                for length in (None, 1, 2, 3, 1 << 20):
                    shape = (r, c) if length is None else (r, c, length)
                    if math.prod(shape) * 2 >= MEMORY:
                        continue
                    pshape = (c,) if length is None else (c, 1)
                    plan = _plan(shape, pshape, dtype=torch.float16)
                    assert_within_limits(plan.grid)
                    options = plan.options
                    if plan.kernel == "columns_kernel":  # the channels fastest
                        blocks = math.ceil(c / options["BLOCK_C"])
                        widest = _folded_blocks(plan.grid) * options["BLOCK_C"]  # idle too
                        assert options["INT64"] == (widest > 2**31 - 1)
                        assert options["FOLDED"] == (blocks > YZ_LIMIT)
                        folded += options["FOLDED"]
                    else:  # one channel a row (a scalar parameter: one row)
                        rows, _, _, chunks = plan.sizes
                        reach = max(plan.grid[0] * options["BLOCK_ROWS"], rows * chunks)
                        assert options["INT64"] == (reach > 2**31 - 1), shape
                    int64 += options["INT64"]
    assert folded and int64, "the sweep reaches neither a folded grid nor an int64 variant"


# ---------------------------------------------------------------- the int64 variants' code
# Compiled for sm_90 by tools/compile_kernels.py (in a subprocess: the compiler needs
# TRITON_INTERPRET=0), the sizes as int32 arguments (values below 2^31; the offsets they make
# need not be): every tt.addptr of an int64 variant takes a 64-bit offset, or an argument as it
# is (GEGLU's `half`, finish_kernel's `second`: values, never the result of int32 arithmetic).

_PROBE = """
import json, os, re, sys, importlib.util
os.environ["TRITON_INTERPRET"] = "0"
spec = importlib.util.spec_from_file_location("tool", sys.argv[1])
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
result = {}
for name, kernel, dtype, config in json.loads(sys.argv[2]):
    ttir = tool.compile_triton((name, kernel, dtype, config)).asm["ttir"]
    arguments = {"%half", "%second"}
    arguments |= set(re.findall(r"(%\\S+) = tt\\.splat %(?:half|second) ", ttir))
    result[name] = [
        "argument" if offset in arguments else kind
        for offset, kind in re.findall(
            r"tt\\.addptr %\\S+, (%\\S+) : [^\\n]*?, (?:tensor<(?:\\d+x)*)?(i\\d+)>? loc", ttir
        )
    ]
print(json.dumps(result))
"""


def _compile_tool():
    spec = importlib.util.spec_from_file_location(
        "compile_kernels", ROOT / "tools" / "compile_kernels.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_int64_variants_take_64_bit_offsets_everywhere():
    tool = _compile_tool()
    if missing := tool.missing_tools():
        pytest.skip(f"this Triton ships no {' or '.join(missing)}")
    usual = {v[0]: v for v in tool.variants()}
    chosen = []
    for name in ("columns fp32 generalized bwd", "rows fp32 generalized bwd",
                 "columns bf16 bias_exact bwd", "finish fp32 sums=2"):  # fmt: skip
        _, kernel, dtype, config = usual[name]
        chosen.append((name, kernel, dtype, config))
        chosen.append((name + " int64", kernel, dtype, config | {"INT64": True}))
    for name in ("pointwise fp32 exact fwd", "geglu fp16 exact bwd"):  # int64 offsets always
        chosen.append(usual[name])
    _, kernel, dtype, config = usual["geglu fp32 tanh fwd"]
    chosen.append(("geglu fp32 tanh fwd folded", kernel, dtype, config | {"FOLDED": True}))
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(ROOT / "tools" / "compile_kernels.py"), json.dumps(chosen)],
        env=os.environ | {"TRITON_INTERPRET": "0", "PYTHONPATH": path},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    offsets = json.loads(run.stdout.strip().splitlines()[-1])
    for name, kinds in offsets.items():
        assert kinds, f"{name}: no address arithmetic found (the probe's pattern is stale)"
        if name.endswith("int64") or not name.startswith(("columns", "rows", "finish")):
            assert set(kinds) <= {"i64", "argument"}, f"{name}: 32-bit offsets {kinds}"
        else:  # the usual variants: int32 parameter offsets, bounded by the host's INT64 choice
            assert "i32" in kinds, f"{name}: the probe would not see a 32-bit offset"


# ---------------------------------------------------------------- the new indexing, run in the
# interpreter: caps lowered so that small tensors fold their grids and take the int64 variants


class _Recorder:
    """kernel[grid](...) launched as usual, and recorded: (kernel name, grid, constexprs)."""

    def __init__(self, name, kernel, log):
        self.name, self.kernel, self.log = name, kernel, log

    def __getitem__(self, grid):
        def launch(*args, **config):
            self.log.append((self.name, tuple(grid), config))
            return self.kernel[grid](*args, **config)

        return launch


@pytest.fixture
def launches(monkeypatch):
    """Small caps (y and z 2 programs, int32 up to 100, blocks of a GPU launch) and a log of the
    launches."""
    log = []
    fake = types.SimpleNamespace(**vars(ops.kernels))
    for name in ("pointwise", "geglu", "rows", "columns", "finish"):
        setattr(
            fake, f"{name}_kernel", _Recorder(name, getattr(ops.kernels, f"{name}_kernel"), log)
        )
    monkeypatch.setattr(ops, "kernels", fake)
    monkeypatch.setattr(ops, "_INTERPRETER_SCALE", 1)
    monkeypatch.setattr(ops, "_GRID_YZ", 2)
    return log


def _close(got: torch.Tensor, want: np.ndarray, dtype: torch.dtype, scale: float = 1.0):
    """Within the rounding of dtype's results (fp32 math rounded once for half types)."""
    eps = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-23,
           torch.float64: 2.0**-52}[dtype]  # fmt: skip
    tol = eps if dtype in (torch.float16, torch.bfloat16) else 64 * eps
    np.testing.assert_allclose(got.double().cpu().numpy(), want, rtol=tol, atol=tol * scale)


def _data(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype).to(DEVICE)


def _np(t):
    return t.detach().double().cpu().numpy()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("form", ["none", "tanh", "sigmoid"])
@pytest.mark.parametrize(
    "shape, dim",
    [((2 * 1500,), -1), ((3, 2 * 1100), -1), ((2 * 500, 3), 0), ((37, 6), -1), ((5, 2), -1),
     ((9, 96), -1), ((4, 6, 5), 1)],
)  # fmt: skip
def test_geglu_folded_and_shared_blocks_against_float64(launches, dtype, form, shape, dim):
    x = _data(shape, dtype, 1)
    a, b = (_np(h) for h in x.chunk(2, dim=dim))
    value, slope = gelu_oracle(b, form)
    out = ops.geglu_forward(x, dim, form)
    _close(out, a * value, dtype, scale=10)
    grad = _data(out.shape, dtype, 2)
    dx = ops.geglu_backward(grad, x, dim, form)
    da, db = dx.chunk(2, dim=dim)
    _close(da, _np(grad) * value, dtype, scale=10)
    _close(db, _np(grad) * a * slope, dtype, scale=30)
    # the launches were the planned ones
    half = b.size // math.prod(shape[: dim % len(shape)])
    outer = x.numel() // (2 * half)
    for backward, (kernel, grid, config) in zip((False, True), launches, strict=True):
        planned = ops._geglu_launch(outer, half, dtype, ("none", "tanh", "sigmoid").index(form),
                                    backward)  # fmt: skip
        assert (kernel, grid, config) == ("geglu", *planned)
    blocks = math.ceil(half / launches[0][2]["BLOCK"])
    assert launches[0][2]["FOLDED"] == (len(launches[0][1]) == 3) == (blocks > 2)
    if half < 64:
        assert launches[0][2]["BLOCK_ROWS"] > 1


def _parameters(member, pshape, dtype):
    g = torch.Generator().manual_seed(3)
    p = (torch.rand(pshape, generator=g, dtype=torch.float64) + 0.5).to(dtype).to(DEVICE)
    q = (torch.rand(pshape, generator=g, dtype=torch.float64) + 0.5).to(dtype).to(DEVICE)
    return p, q


# (x shape, parameter shape, channels_last): columns with 200 channels (4 blocks of 64: folded
# into 2 × 2 under the lowered cap), NCHW rows, channels_last columns, a scalar parameter (one
# row of 5000: chunks capped by doubling STEPS)
LAYOUTS = [((3, 200), (200,), False), ((2, 5, 3, 7), (5, 1, 1), False),
           ((2, 70, 3, 2), (70, 1, 1), True), ((5000,), (), False)]  # fmt: skip


@pytest.mark.parametrize("int64", [False, True], ids=["int32", "int64"])
@pytest.mark.parametrize("member", ["bias", "generalized", "swish"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=["columns", "rows", "channels_last", "scalar"])
def test_parameter_kernels_folded_and_int64_against_float64(
    launches, monkeypatch, int64, member, layout
):
    if int64:
        monkeypatch.setattr(ops, "_INT32", 0)  # every launch takes the int64 variant
    shape, pshape, channels_last = layout
    dtype = torch.float32
    x, grad = _data(shape, dtype, 1), _data(shape, dtype, 2)
    if channels_last:
        x, grad = (t.to(memory_format=torch.channels_last) for t in (x, grad))
    p, q = _parameters(member, pshape, dtype)
    x64, g64, p64, q64 = (_np(t) for t in (x, grad, p, q))
    axes = tuple(i for i in range(len(shape)) if len(shape) - i > len(pshape) or
                 pshape[i - len(shape) + len(pshape)] == 1)  # fmt: skip

    def summed(terms):
        return terms.sum(axis=axes).reshape(pshape), np.abs(terms).sum(axis=axes).reshape(pshape)

    term_error = 0.0
    if member == "bias":
        value, slope = gelu_oracle(x64 + p64)
        out = ops.bias_gelu_forward(x, p)
        dx, dp = ops.bias_gelu_backward(grad, x, p)
        terms, grads = [g64 * slope], [dp]
    elif member == "generalized":
        value = generalized(x64, p64, q64)
        d_x, d_mu, d_sigma = generalized_grads(x64, p64, q64)
        slope = d_x
        out = ops.generalized_gelu_forward(x, p, q)
        dx, dmu, dsigma = ops.generalized_gelu_backward(grad, x, p, q)
        terms, grads = [g64 * d_mu, g64 * d_sigma], [dmu, dsigma]
        # z = (x − μ)·(1/σ) rounded three times in fp32: (6 + 3z²)·2^-24 relative per term
        term_error = (6 + 3 * ((x64 - p64) / q64) ** 2) * 2.0**-24
    else:
        s = 1 / (1 + np.exp(-p64 * x64))
        value, slope = x64 * s, s + p64 * x64 * s * (1 - s)
        out = ops.swish_forward(x, p)
        dx, dbeta = ops.swish_backward(grad, x, p)
        terms, grads = [g64 * x64 * x64 * s * (1 - s)], [dbeta]
    _close(out, value, dtype)
    _close(dx, g64 * slope, dtype, scale=10)
    for got, term in zip(grads, terms, strict=True):
        # the fp32 sums' rounding (2^-20 of Σ|terms|) and each term's own error
        want, magnitude = summed(term)
        bound = 2.0**-20 * magnitude + summed(np.abs(term) * term_error)[0] + 1e-30
        assert got.shape == pshape and (np.abs(_np(got) - want) <= bound).all()
    # what ran: the planned grids and variants, folded / int64 as intended
    main = [entry for entry in launches if entry[0] in ("rows", "columns")]
    assert main and all(ops._checked(grid) for _, grid, _ in launches)
    for kernel, grid, config in main:
        assert config["INT64"] == int64
        if kernel == "columns" and shape[-1] == 200:
            assert grid[1:] == (2, 2) and config["FOLDED"]
        if kernel == "rows" and not pshape:  # one row of 5000: 10 blocks of 512, 2 chunks
            assert grid[1] <= 2 and config["STEPS"] * config["BLOCK"] * grid[1] >= 5000
    finish = [config for kernel, _, config in launches if kernel == "finish"]
    assert finish and all(config["INT64"] == int64 for config in finish)


def test_recorded_launches_are_the_plans(launches):
    """The plan the tests above compute from shapes is the one the host functions launch with."""
    x = _data((3, 200), torch.float32, 1)
    b = _data((200,), torch.float32, 2)
    ops.bias_gelu_backward(x, x, b)
    plan = _plan((3, 200), (200,), wants=(True, False))
    assert launches[0] == ("columns", plan.grid, plan.options)
    assert launches[1] == ("finish", plan.finish_grid, plan.finish_options)
    n = 5000
    ops.gelu_forward(torch.zeros(n, device=DEVICE))
    assert launches[2][1:] == ops._pointwise_launch(n, torch.float32, 0, False)


_LARGE_STRIDE = """
import json, sys
import numpy as np
import torch
from gelus._triton import load

ops = load()
path, stride = sys.argv[1], int(sys.argv[2])
size = 2 * stride + 1
with open(path, "wb") as handle:
    handle.truncate(size * 4)  # a sparse file: only the pages written or read are real
storage = torch.from_file(path, shared=True, size=size, dtype=torch.float32)
bias = storage.as_strided((3,), (stride,))
bias.copy_(torch.tensor([0.5, -1.25, 2.0]))
x = torch.linspace(-3, 3, 12).reshape(4, 3)
dx, db = ops.bias_gelu_backward(torch.ones_like(x), x, bias)
print(json.dumps([ops.bias_gelu_forward(x, bias).tolist(), dx.tolist(), db.tolist()]))
"""


def test_a_parameter_view_with_a_large_stride_in_the_interpreter(tmp_path):
    """A per-channel bias read with stride 2^30 + 1: fp32 offsets past 2^31 elements (8 GiB),
    which int32 arithmetic wraps to a negative address. The storage is a sparse file mapped into
    memory; the kernels run in a subprocess, so that a wrong address fails this test (the
    interpreter would crash) instead of the session."""
    stride = 2**30 + 1
    plan = _plan((4, 3), (3,), (stride,), wants=(True, False))
    assert plan.kernel == "columns_kernel" and plan.options["INT64"]
    if DEVICE != "cpu":
        pytest.skip("the interpreter's check; a GPU run reads the bias from device memory")
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, "-c", _LARGE_STRIDE, str(tmp_path / "sparse.bin"), str(stride)],
        env=os.environ | {"TRITON_INTERPRET": "1", "PYTHONPATH": path},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    out, dx, db = (np.array(v) for v in json.loads(run.stdout.strip().splitlines()[-1]))
    h = np.linspace(-3, 3, 12).reshape(4, 3) + np.array([0.5, -1.25, 2.0])
    value, slope = gelu_oracle(h.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(out, value, rtol=2**-17, atol=2**-17)
    np.testing.assert_allclose(dx, slope, rtol=2**-17, atol=2**-17)
    np.testing.assert_allclose(db, slope.sum(0), rtol=1e-5)
