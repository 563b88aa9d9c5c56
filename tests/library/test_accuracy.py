"""The library's one accuracy table (docs/NUMERICS.md, "Accuracy"): every path in fp32 against
float64 oracles (scipy), on a dense grid of [−20, 20].

The grid: every ~1e5th fp32 in [−20, 20] (both signs) plus 2^20 random points (uniform, and
uniform in the bit pattern, which covers every binade). Errors are in ulp of the fp32 result.
The bounds are the table's cells, read from docs/NUMERICS.md (``_accuracy_table``): the worst
measured over the instruction sets, rounded up; a wrong form or a lost edge would exceed them.
"""

import math
import re

import numpy as np
import pytest
import torch

import _accuracy_table as table
import gelus.functional as G
from _fp32_gelu_sets import assert_within_exact_ulp, dense_grid, spot_sets
from gelus import _gelu, _gelu_exact
from gelus import _swish as swish_kernels
from oracles import gelu_oracle, mpmath_oracle, swish, tanh_form, ulp_error


def _exact(x):
    return gelu_oracle(x)[0]


def _exact_slope(x):
    return gelu_oracle(x)[1]


def _tanh(x):  # the paper's formula as written, to check the cancellation-free oracle against
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


@pytest.fixture(scope="module")
def grid():
    return table.grid()


def _ulp(y, reference):
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    return np.abs(y.astype(np.float64) - reference) / spacing


def _evaluate(x, forward, backward):
    xt = torch.from_numpy(x)
    ones = torch.ones_like(xt)
    return forward(xt).numpy(), backward(ones, xt).numpy()


def test_grid_covers_the_interval(grid):
    assert grid.min() >= -20 and grid.max() <= 20 and grid.size > 2**20
    assert (np.abs(grid) < 1e-30).any() and (grid < -19).any() and (grid > 19).any()


def test_the_table_has_every_measured_row_and_region():
    cells = table.documented()
    assert set(table.ROWS) <= set(cells)
    for row in table.ROWS:
        assert set(cells[row]) == {region for region, _, _ in table.REGIONS}
        assert all(gradient is not None for _, _, gradient in cells[row].values()), row
    assert cells["tanh form"]["[−3, 3)"][:2] == (12.4, "ulp")  # the parser reads what is written
    assert cells["exact (default), eager / compiled"]["x < −3"][1] == "abs"


@pytest.mark.parametrize("row", list(table.ROWS))
def test_every_cell_of_the_accuracy_table_holds_here(grid, row):
    """Measured on this machine's instruction set; the table is the worst over all of them."""
    documented = table.documented()[row]
    for region, (value, gradient) in table.measure(row, grid).items():
        bound, unit, gradient_bound = documented[region]
        assert value <= bound, (row, region, f"{value:.4g} {unit} > {bound}")
        assert gradient <= gradient_bound, (row, region, f"gradient {gradient:.4g}")


def test_exact_accurate_path_within_one_ulp_down_to_underflow(grid):
    y, g = _evaluate(
        grid,
        lambda t: _gelu.kernel_forward(t, accurate=True),
        lambda o, t: _gelu.kernel_backward(o, t, accurate=True),
    )
    xd = grid.astype(np.float64)
    # Correctly rounded (≤ 0.5 ulp, the table) also where the result is subnormal.
    assert _ulp(y, _exact(xd)).max() <= 0.5
    assert _ulp(g, _exact_slope(xd)).max() <= 0.5
    # The public function takes this path when asked.
    xt = torch.from_numpy(grid[::64].copy())
    assert torch.equal(G.gelu(xt, accurate=True), _gelu.kernel_forward(xt, accurate=True))


# The float32 algorithm (gelus._gelu_float32: the compiled accurate path, CUDA's compiled default
# and, with fma, the CUDA kernels), as torch ops without fma: measured 1.88 ulp value and 1.62 ulp
# slope on the dense grid; the mpmath spot sets stay below.


def _float32_errors(x32, value, slope):
    xt = torch.from_numpy(x32)
    y, g = _gelu_exact.gelu_accurate(xt), _gelu_exact.gelu_accurate_slope(xt)
    assert y.dtype == torch.float32 and g.dtype == torch.float32
    return _ulp(y.numpy(), value), _ulp(g.numpy(), slope)


def test_float32_algorithm_within_two_ulp_dense():
    x32, value, slope = dense_grid()
    assert_within_exact_ulp(x32, *_float32_errors(x32, value, slope))
    # The plain fp32 formula x·½·erfc(−x/√2) is far off in the tail (the reason for the algorithm).
    xt = torch.from_numpy(x32)
    plain = (xt * 0.5 * torch.special.erfc(xt * -(0.5**0.5))).numpy()
    assert _ulp(plain, value)[x32 < -10].max() > 50


def test_float32_algorithm_within_two_ulp_against_mpmath():
    x32, value, slope = spot_sets()
    assert_within_exact_ulp(x32, *_float32_errors(x32, value, slope))


def test_float32_algorithm_uses_float32_operations_only():
    """No float64 tensor anywhere in the composition (recorded op by op)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    dtypes = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, tuple) else (out,):
                if isinstance(t, torch.Tensor):
                    dtypes.add(t.dtype)
            return out

    x = torch.linspace(-16, 16, 1001)
    with Record():
        _gelu_exact.gelu_accurate(x)
        _gelu_exact.gelu_accurate_slope(x)
    assert torch.float64 not in dtypes and torch.float32 in dtypes


def test_fp32_split_path_float64_input_uses_float64():
    x = torch.linspace(-20, 20, 4001, dtype=torch.float64)
    np.testing.assert_allclose(_gelu_exact.gelu_accurate(x).numpy(), _exact(x.numpy()), rtol=3e-13)
    np.testing.assert_allclose(
        _gelu_exact.gelu_accurate_slope(x).numpy(), _exact_slope(x.numpy()), rtol=3e-13, atol=1e-300
    )


def test_exact_fast_path_figures(grid):
    y, g = _evaluate(grid, _gelu.kernel_forward, _gelu.kernel_backward)
    xd = grid.astype(np.float64)
    ref, ref_slope = _exact(xd), _exact_slope(xd)
    # torch's kernel (bounds: the table): below −3 only the absolute error is small, its
    # 1 + erf(x/√2) cancels.
    assert np.abs(y - ref).max() < 1.2e-6 and np.abs(g - ref_slope).max() < 3.2e-7
    # The default eager path is this one.
    xt = torch.from_numpy(grid[::64].copy())
    assert torch.equal(G.gelu(xt), _gelu.kernel_forward(xt))


# form -> (forward, value oracle, flushed below, largest |true value| there): docs/NUMERICS.md,
# "Where a result is flushed to −0"
FLUSHES = {
    "tanh": (lambda t: _gelu.kernel_forward(t, "tanh"), tanh_form, -10.06, 3.0e-38),
    "silu": (swish_kernels.forward, swish(1.0), -88.72, 2.7e-37),
    "sigmoid": (lambda t: _gelu.kernel_forward(t, "sigmoid"), swish(1.702), -52.13, 1.6e-37),
}


@pytest.mark.parametrize("form", list(FLUSHES))
def test_flushes_to_minus_zero_only_where_documented(form):
    """Every fp32 in [−120, −3] (every 37th bit pattern): −0 only below the documented point,
    where the truth is within the documented size; above it, a nonzero result whose error is
    below FLT_MIN where the truth is subnormal (the table counts ulp of normal results only)."""
    forward, value, below, largest = FLUSHES[form]
    top, bottom = np.float32([-3.0, -120.0]).view(np.int32)
    x = np.arange(top, bottom, 37, dtype=np.int32).view(np.float32)
    y = forward(torch.from_numpy(x)).numpy()
    truth = value(x.astype(np.float64))
    flushed = y == 0
    assert np.signbit(y[flushed]).all()
    assert x[flushed].max() == pytest.approx(below, abs=0.01)
    assert (flushed == (x <= x[flushed].max())).all()  # one threshold, no holes
    assert np.abs(truth[flushed]).max() <= largest
    assert np.abs(truth[flushed]).max() >= 0.8 * largest  # the documented size is the real one
    subnormal = ~flushed & (np.abs(truth) < table.FLT_MIN)  # none for the tanh form
    assert (np.abs(y - truth)[subnormal] <= table.FLT_MIN).all()


def test_float64_accurate_path_within_its_bound_in_the_far_tail():
    """docs/NUMERICS.md, "float64": value within 2x² + 2 ulp, gradient within x² + 1 ulp (1e-16
    absolute near the slope's zero), against 40-digit mpmath."""
    rng = np.random.default_rng(34)
    x = np.concatenate([np.linspace(-38.5, 20.0, 601), rng.uniform(-38.5, -3.0, 600)])
    value, slope = mpmath_oracle(x)
    xt = torch.from_numpy(x)
    y = _gelu.kernel_forward(xt, accurate=True)
    g = _gelu.kernel_backward(torch.ones_like(xt), xt, accurate=True)
    assert y.dtype == g.dtype == torch.float64
    value_ulp, slope_ulp = ulp_error(y, value), ulp_error(g, slope)
    assert (value_ulp <= 2 * x**2 + 2).all(), x[np.argmax(value_ulp - 2 * x**2)]
    near_zero = np.abs(g.numpy() - slope) <= 1e-16
    assert ((slope_ulp <= x**2 + 1) | near_zero).all()
    assert value_ulp[x >= -3].max() <= 9 and value_ulp.max() > 100  # the tail is where it is lost


def test_tanh_oracle_is_the_papers_formula():
    x = np.linspace(-3, 20, 10001)
    np.testing.assert_allclose(tanh_form(x), _tanh(x), rtol=1e-13, atol=1e-15)


def test_generalized_gelu_erfc_form_in_the_negative_tail(grid):
    # x·Φ(x) by generalized_gelu (μ = 0, σ = 1): ½·erfc(−z/√2) in fp32, whose argument rounding
    # costs up to ~2t² ulp (82 at x = −20), times the roundings of z and of x·Φ (the table's
    # bounds). No cancellation, unlike 1 + erf, which returns 0 below −5.5.
    xt = torch.from_numpy(grid)
    y = G.generalized_gelu(xt, 0.0, 1.0).numpy()
    normal = np.abs(_exact(grid.astype(np.float64))) >= table.FLT_MIN
    assert (y[(grid < -5.5) & normal] < 0).all()


def test_the_cuda_tables_fp32_contract_is_the_one_the_kernel_tests_assert():
    """docs/CUDA.md's table holds the kernels' figures; its asserted bound is EXACT_ULP."""
    from _fp32_gelu_sets import EXACT_ULP

    cuda = (table.NUMERICS.parent / "CUDA.md").read_text()
    (row,) = [line for line in cuda.splitlines() if line.startswith("| exact, fp32 kernels (fma)")]
    asserted = [float(b) for b in re.findall(r"≤ ([\d.]+) asserted", row)]
    assert asserted == [EXACT_ULP, EXACT_ULP]
