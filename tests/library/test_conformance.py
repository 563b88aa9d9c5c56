"""``gelus check IMPL`` (gelus.conformance): the contract's clauses applied to other callables.

What each clause should conclude is decided here independently: the implementation evaluated
directly and compared with scipy's float64 oracle (tests/oracles.py), never through the
conformance module's own comparisons; its tables are read against docs/NUMERICS.md.
"""

import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import _accuracy_table as table
import gelus.functional as G
from gelus import conformance
from gelus.cli import main
from oracles import gelu_oracle, tanh_form

EDGE_NAMES = [edge.label for edge in conformance.EDGES]
ACCURACY = [name for name, _, _ in conformance.REGIONS]
ALL = [*EDGE_NAMES, "subnormal", "finite", *ACCURACY]


@pytest.fixture(scope="module")
def torch_report():
    return conformance.check(F.gelu)


@pytest.fixture(scope="module")
def accurate_report():
    return conformance.check(lambda x: G.gelu(x, accurate=True))


def _doc_value(text: str, dtype: torch.dtype):
    """A cell of the contract's table as (number, sign matters)."""
    top = torch.finfo(dtype).max
    text = text.replace("−", "-").strip()
    numbers = {"+inf": math.inf, "-inf": -math.inf, "nan": math.nan, "½": 0.5}
    numbers |= {"FLT_MAX": top, "-FLT_MAX": -top, "-0": -0.0, "0": 0.0, "1": 1.0}
    return numbers[text.split(" (")[0]], "either sign" not in text and text != "0"


def test_the_edges_are_the_contract_table_of_the_docs():
    text = table.NUMERICS.read_text()
    section = text[text.index("## The contract") : text.index("### How the edges are kept")]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and "---" not in line and not line.startswith("| input")
    ]
    rows = [row for row in rows if row[0] != "finite"]  # the finite clause, checked on a grid
    assert len(rows) == len(conformance.EDGES) == 6
    dtype = torch.float32
    for (x, value, slope), edge in zip(rows, conformance.EDGES, strict=True):
        want_x, _ = _doc_value(x, dtype)
        want_value, signed = _doc_value(value, dtype)
        got_x = conformance._number(edge.x, dtype)
        got_value = conformance._number(edge.value, dtype)
        assert got_x == want_x or (math.isnan(got_x) and math.isnan(want_x)), edge
        assert math.copysign(1, got_x) == math.copysign(1, want_x), edge
        assert got_value == want_value or (math.isnan(got_value) and math.isnan(want_value))
        if signed and want_value == 0:
            assert math.copysign(1, got_value) == math.copysign(1, want_value), edge
        assert edge.signed == (signed or math.isinf(want_value) or math.isnan(want_value)), edge
        want_slope, _ = _doc_value(slope, dtype)
        assert edge.slope == want_slope or (math.isnan(edge.slope) and math.isnan(want_slope))


def test_fp32_bounds_are_the_accuracy_tables_cells():
    documented = table.documented()
    for function, row in conformance.TABLE_ROWS.items():
        cells = [documented[row][region] for region, _, _ in table.REGIONS]
        gradients = [gradient for _, _, gradient in cells]
        assert [g for _, g in conformance.BOUNDS[function]] == gradients, function
        if function != "gelu":
            assert [v for v, _ in conformance.BOUNDS[function]] == [v for v, _, _ in cells]
    # the exact form's value bound is the fp32 algorithm's stated one, not a cell
    assert "≤ 2 ulp value and gradient" in table.NUMERICS.read_text()
    assert {v for v, _ in conformance.BOUNDS["gelu"]} == {2.0}
    assert np.array_equal(conformance.grid(), table.grid())


def _direct(fn, value: float, dtype: torch.dtype):
    x = torch.tensor([value], dtype=dtype, requires_grad=True)
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.item(), g.item()


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "bf16", "fp16"])
def test_torch_gelu_fails_at_inf_and_in_the_tail_as_it_computes(torch_report, dtype):
    t = conformance.DTYPES[dtype]
    y, g = _direct(F.gelu, math.inf, t)
    assert torch_report.outcome("+inf", dtype) == (y == math.inf and g == 1.0)
    y, g = _direct(F.gelu, -math.inf, t)
    assert torch_report.outcome("-inf", dtype) == (y == 0 and g == 0)
    assert not torch_report.outcome("-inf", dtype)  # nan on torch 2.13 (PR #192318 pending)
    # the tail: 1 + erf(x/√2) cancels, a relative error of 1e-3 is far over any bound; fp16's
    # normal tail is [−4.3, −3): its ulp counted here with numpy's float16 spacing
    if dtype == "fp16":
        x = np.arange(-(2**15), 2**15, dtype=np.int32).astype(np.int16).view(np.float16)
        x = x[(x < -3) & (x > -20)]
        reference = gelu_oracle(x.astype(np.float64))[0]
        y = F.gelu(torch.from_numpy(x)).double().numpy()
        normal = np.abs(reference) >= np.finfo(np.float16).tiny
        spacing = np.spacing(np.abs(reference).astype(np.float16)).astype(np.float64)
        within = bool((np.abs(y - reference)[normal] <= spacing[normal]).all())
        assert torch_report.outcome("ulp x<-3", dtype) == within
        return
    xt = torch.tensor([-5.0, -6.0, -8.0, -9.0], dtype=t)
    expected = gelu_oracle(xt.double().numpy())[0]
    relative = np.abs(F.gelu(xt).double().numpy() - expected) / np.abs(expected)
    assert (relative > 1e-3).any()  # on torch 2.13 (PR #189234 pending); then the clause fails
    assert not torch_report.outcome("ulp x<-3", dtype)


def test_gelus_accurate_form_keeps_every_clause_in_every_dtype(accurate_report, torch_report):
    assert accurate_report.failed() == []
    for report in (accurate_report, torch_report):  # readable in 100 columns
        assert max(len(line) for line in report.table().splitlines()) <= 100
    assert len(accurate_report.clauses) == 4 * len(ALL)
    assert set(accurate_report.oracles) == {"fp32", "fp64", "bf16", "fp16"}


def test_gelus_default_keeps_the_edges_and_fails_only_accuracy():
    report = conformance.check(G.gelu, dtypes=("fp32", "bf16"))
    failed = {clause.name for clause in report.failed()}
    assert failed and failed <= set(ACCURACY)  # torch's kernel for finite input: no relative tail
    assert not report.outcome("ulp x<-3", "fp32")


def _biased(x):
    """The erf form in fp32 with a bias: x·½·(1 + erf(x/√2)) + 1e-3."""
    x32 = x.float()
    return (x32 * 0.5 * (1 + torch.erf(x32 / math.sqrt(2.0))) + 1e-3).to(x.dtype)


def _nan_at_negative_zero(x):
    """gelus's accurate form, but nan at −0 (the gradient there is then 0: where's backward)."""
    negative_zero = (x == 0) & torch.signbit(x)
    return torch.where(negative_zero, torch.nan, G.gelu(x, accurate=True))


@pytest.mark.parametrize(
    ("fn", "dtypes", "expected"),
    [
        # +inf: slope 1 + inf·0; −inf: −inf·0; −0, −max and subnormals: the bias; every region
        (_biased, ("fp32",), {"+inf", "-inf", "-0", "-max", "subnormal", *ACCURACY}),
        # −0 itself, a finite input with a nan value, and its slope 0 in [−3, 3)
        (_nan_at_negative_zero, ("fp32", "fp16"), {"-0", "finite", "ulp [-3,3)"}),
    ],
    ids=["biased-erf", "nan-at-minus-zero"],
)
def test_a_broken_callable_fails_exactly_the_clauses_it_breaks(fn, dtypes, expected):
    report = conformance.check(fn, dtypes=dtypes)
    for dtype in dtypes:
        failed = {c.name for c in report.failed() if c.dtype == dtype}
        assert failed == expected, (dtype, failed)
    # independently: the bias is there at −0, the nan at −0
    y, _ = _direct(fn, -0.0, torch.float32)
    assert y == pytest.approx(1e-3) if fn is _biased else math.isnan(y)


def test_the_transformers_act2fn_route():
    pytest.importorskip("transformers")
    module = conformance.resolve("transformers:gelu_new")
    assert type(module).__name__ == "NewGELUActivation"
    report = conformance.check("transformers:gelu_new", function="gelu_tanh", dtypes=("fp32",))
    assert report.impl == "transformers:gelu_new" and report.function == "gelu_tanh"
    # ½x(1 + tanh(…)) cancels in the tail: independently, against the cancellation-free oracle
    x = np.array([-6.0, -7.0, -8.0], dtype=np.float32)
    y = module(torch.from_numpy(x)).double().numpy()
    relative = np.abs(y - tanh_form(x.astype(np.float64))) / np.abs(tanh_form(x.astype(float)))
    assert report.outcome("ulp x<-3", "fp32") == bool((relative < 1e-4).all())
    assert not report.outcome("ulp x<-3", "fp32")
    assert report.outcome("nan", "fp32") and report.outcome("ulp [3,20]", "fp32")


def test_the_command_line_exit_statuses_and_json(tmp_path, capsys):
    assert main(["check", "gelus:gelu[accurate=True]", "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "all 11 clauses hold" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    path = tmp_path / "report.json"
    assert main(["check", "torch.nn.functional.gelu", "--dtype", "bf16", "--json", str(path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^-inf +bf16 +FAIL +f=nan", out, re.MULTILINE), out
    data = json.loads(path.read_text())
    assert data["passed"] is False and data["impl"] == "torch.nn.functional.gelu"
    assert {c["name"] for c in data["clauses"]} == set(ALL)


@pytest.mark.parametrize(
    ("impl", "problem"),
    [
        ("no_such_package.module:gelu", "no module of no_such_package.module"),
        ("torch.nn.functional:no_such_gelu", "has no no_such_gelu"),
        ("gelus:no_such_activation", "no_such_activation"),
        ("transformers:no_such_act", "is not in ACT2FN"),
        ("gelus:gelu[accurate=maybe]", "keyword=literal"),
        ("math:pi", "not callable"),
        ("gelu", "no module and function"),
    ],
)
def test_a_bad_impl_is_one_line_and_status_2(impl, problem, capsys):
    if impl.startswith("transformers"):
        pytest.importorskip("transformers")
    assert main(["check", impl, "--dtype", "fp32"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("gelus check: error: cannot check") and problem in line
    assert "IMPL is package.module:function" in line and "transformers:NAME" in line


def test_jax_is_skipped_with_a_line_where_it_is_not_installed(capsys):
    if conformance.importlib.util.find_spec("jax") is not None:
        pytest.skip("jax is installed")
    assert main(["check", "jax.nn.gelu"]) == 0
    assert capsys.readouterr().out.strip() == (
        "gelus check: jax.nn.gelu skipped: jax is not installed (pip install jax)"
    )


def test_import_gelus_does_not_load_the_conformance_module():
    import subprocess
    import sys

    code = "import sys, gelus; print('gelus.conformance' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_without_scipy_and_mpmath_the_float64_fallback_is_used_and_named(monkeypatch):
    # a None entry makes the import fail as if the package were absent; torch's autograd imports
    # sympy (which needs mpmath) on first use, so that is loaded before
    __import__("torch.fx.experimental.symbolic_shapes")
    monkeypatch.setitem(__import__("sys").modules, "scipy", None)
    monkeypatch.setitem(__import__("sys").modules, "mpmath", None)
    accurate = conformance.check(lambda x: G.gelu(x, accurate=True), dtypes=("fp64", "fp16"))
    assert accurate.oracles == {"fp64": "float64 (math.erfc)", "fp16": "float64 (math.erfc)"}
    assert accurate.failed() == []
    x = np.linspace(-30.0, 10.0, 201)
    monkeypatch.undo()
    fallback = conformance.float64_oracle  # the fallback's values are scipy's to ~1e-15
    monkeypatch.setitem(__import__("sys").modules, "scipy", None)
    value, slope, name = fallback(x, "gelu")
    monkeypatch.undo()
    reference, reference_slope = gelu_oracle(x)
    assert name == "float64 (math.erfc)"
    np.testing.assert_allclose(value, reference, rtol=1e-13, atol=0)
    np.testing.assert_allclose(slope, reference_slope, rtol=1e-13, atol=1e-300)
