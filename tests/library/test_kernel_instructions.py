"""The instruction gate, no GPU needed: every kernel variant compiled for sm_90 (Triton's ptxas),
fp64-free for fp32, fp16 and bf16 inputs and within the H200's instructions per element.

``tools/compile_kernels.py`` compiles the variants (in a subprocess: the compiler needs
``TRITON_INTERPRET=0``, the other tests run the interpreter) with the constants of
``gelus._triton.ops.launch_config``, the function the host functions launch with, and counts their
SASS; its budget table (``budget``, derived in docs/CUDA.md) is the one the test reads.
"""

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "compile_kernels.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("compile_kernels", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """The gated variants (fp16, bf16, fp32), compiled and counted by the tool."""
    pytest.importorskip("triton")
    if missing := tool.missing_tools():
        pytest.skip(f"this Triton ships no {' or '.join(missing)} (triton/backends/nvidia/bin)")
    out = tmp_path_factory.mktemp("sass") / "records.json"
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env = os.environ | {"TRITON_INTERPRET": "0", "PYTHONPATH": path}
    command = [sys.executable, str(TOOL), "--dtypes", ",".join(tool.GATED), "--json", str(out)]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert out.exists(), f"compile_kernels.py wrote no records:\n{run.stdout}\n{run.stderr}"
    return {r["name"]: r for r in json.loads(out.read_text())}


def _gated_variants():
    return {v[0]: v for v in tool.variants() if v[2] in tool.GATED}


def test_the_gate_compiles_every_gated_variant(records):
    errors = [f"{name}: {r['error']}" for name, r in records.items() if "error" in r]
    assert not errors, "variants that do not compile for sm_90:\n" + "\n".join(errors)
    expected = _gated_variants()
    assert sorted(records) == sorted(expected)
    for name, (_, kernel, dtype, config) in expected.items():
        assert (records[name]["kernel"], records[name]["dtype"]) == (kernel, dtype)
        assert records[name]["config"] == config, name


def test_no_fp64_instruction_in_fp32_or_half_variants(records):
    found = [
        f"{name}: {r['fp64']} fp64 instructions, {r['fp64_conversions']} conversions to or from "
        f"fp64; {r['per_element']:.1f} instructions per element, budget {r['budget']:.1f}"
        for name, r in records.items()
        if r["fp64"] or r["fp64_conversions"]
    ]
    assert not found, "fp64 in variants for fp32/fp16/bf16 inputs:\n" + "\n".join(found)


def test_instructions_per_element_within_the_h200_budget_or_the_ceiling(records):
    """Each variant within the H200's bandwidth budget, or, where it is listed in CEILINGS (the
    variants that do not reach memory speed yet, docs/CUDA.md), within its ceiling; and no listed
    variant that fits the budget again (the list only shrinks)."""
    found = []
    for name, r in records.items():
        budget = tool.budget(r["kernel"], r["config"].get("BACKWARD", True), r["dtype"], "H200 SXM")
        limit = tool.CEILINGS.get(name, budget)
        if r["per_element"] > limit:
            found.append(
                f"{name}: {r['per_element']:.1f} instructions per element > {limit:.1f} "
                f"({r['instructions']} in the kernel, {r['elements_per_thread']} elements per "
                f"thread{', loop ' + str(r['loop_body']) if r['loop_body'] else ''}; "
                f"fp64 {r['fp64']})"
            )
        elif name in tool.CEILINGS and r["per_element"] <= budget:
            found.append(f"{name}: {r['per_element']:.1f} fits the budget {budget:.1f}: unlist it")
    assert not found, "over the H200 budget or the variant's ceiling:\n" + "\n".join(found)
    assert set(tool.CEILINGS) <= set(records), "CEILINGS names variants the gate does not compile"


def test_host_functions_launch_exactly_the_variants_the_gate_compiles(monkeypatch):
    """Every launch the host functions make on long tensors (each member, form, layout and
    dtype) takes the constants of one gate variant, and every gate variant is launched."""
    from gelus._triton import load

    ops = load()
    launched = set()

    def recorder(kernel):
        def launch(*args, **config):
            # the variant's dtype: x's; finish_kernel's first argument is the partial sums, its
            # second the first parameter gradient (the parameters' dtype, x's here)
            dtype = args[1 if kernel == "finish" else 0].dtype
            launched.add((kernel, dtype, tuple(sorted(config.items()))))

        return _Grid(launch)

    fake = types.SimpleNamespace(**vars(ops.kernels))
    for kernel in ("pointwise", "geglu", "rows", "columns", "finish"):
        setattr(fake, f"{kernel}_kernel", recorder(kernel))
    monkeypatch.setattr(ops, "kernels", fake)
    monkeypatch.setattr(ops, "_INTERPRETER_SCALE", 1)  # the blocks of a GPU launch

    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        flat = torch.zeros(64, 4096, dtype=dtype)
        # the long tensors launch_config describes the parameter kernels for (ops._LONG_LAYOUTS)
        nchw = torch.zeros(16, 64, 1 << 15, dtype=dtype)  # rows: 64 channels of 2^15
        last = torch.zeros(1 << 18, 64, dtype=dtype)  # columns: 64 channels fastest
        per_row = torch.rand(64, 1, dtype=dtype) + 0.5
        per_column = torch.rand(64, dtype=dtype) + 0.5
        for form in ("none", "tanh", "sigmoid"):
            ops.gelu_forward(flat, form)
            ops.gelu_backward(flat, flat, form)
            ops.geglu_forward(flat, -1, form)
            ops.geglu_backward(flat[:, :2048], flat, -1, form)
            for x, b in ((nchw, per_row), (last, per_column)):
                ops.bias_gelu_forward(x, b, form)
                ops.bias_gelu_backward(x, x, b, form)
                ops.bias_gelu_backward(x, x, b, form, bias_grad=False)
        ops.swish_forward(nchw, 1.5)  # float64: the rows kernel with a scalar β
        ops.swish_backward(nchw, nchw, 1.5)
        ops.stochastic_gelu_forward(flat, 1, 0)
        ops.stochastic_gelu_backward(flat, flat, 1, 0)
        for x, p in ((nchw, per_row), (last, per_column)):
            ops.swish_forward(x, p)
            ops.swish_backward(x, x, p)
            ops.generalized_gelu_forward(x, p, p)
            ops.generalized_gelu_backward(x, x, p, p)
            ops.generalized_gelu_backward(x, x, p, 1.5)

    # the kernels in files of their own (gelus._members: OwnKernel), each recorded under its
    # member's name; GPT-OSS's gate: pairs (interleaved) and halves, float64 runs the default
    for name, own in tool.own_kernels().items():
        module = importlib.import_module(own.path)
        monkeypatch.setattr(module, f"{name}_kernel", recorder(name))
    from gelus._triton import _clamped_swiglu as clamped

    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        flat = torch.zeros(64, 4096, dtype=dtype)
        for interleaved in (True, False):
            clamped.forward(flat, 1.702, 7.0, interleaved, -1)
            clamped.backward(flat[:, :2048], flat, 1.702, 7.0, interleaved, -1)

    dtypes = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
              torch.float64: "fp64"}  # fmt: skip
    launched = {(kernel, dtypes[dtype], config) for kernel, dtype, config in launched}
    compiled = {(k, d, tuple(sorted(c.items()))) for _, k, d, c in tool.variants()}
    assert launched - compiled == set(), "launched, never compiled by the gate"
    assert compiled - launched == set(), "compiled by the gate, never launched"


class _Grid:
    """kernel[grid](*args, **constants), recorded instead of run."""

    def __init__(self, launch):
        self.launch = launch

    def __getitem__(self, grid):
        return self.launch


# cuobjdump -sass lines (from sm_90 builds of these kernels), one loop at 0x40..0x60
_SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
                                                                           /* 0x000ff00000000800 */
        /*0010*/                   F2F.F64.F32 R10, R48 ;                 /* 0x0000003000107310 */
        /*0020*/               @P2 DFMA R4, R2, R6, R8 ;                  /* 0x0000000602042a2b */
        /*0030*/                   FRND.F64.FLOOR R14, R14 ;              /* 0x0000000e000e7313 */
        /*0040*/                   FFMA R6, R6, R4, R31 ;                 /* 0x0000000406067223 */
        /*0050*/              @!P5 MUFU.EX2 R37, R33 ;                    /* 0x000000210025d308 */
        /*0060*/               @P2 BRA 0x40 ;                             /* 0xfffffff000002947 */
        /*0070*/                   EXIT ;                                 /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                              /* 0xfffffffc00fc7947 */
        /*0090*/                   NOP;                                   /* 0x0000000000007918 */
"""


def test_sass_counting():
    instructions = tool.parse_sass(_SASS)
    assert [a for a, _, _ in instructions] == list(range(0, 0x80, 0x10))  # padding left out
    kinds = [tool.classify(opcode) for _, opcode, _ in instructions]
    assert kinds == ["other", "fp64 conversion", "fp64", "fp64", "fp32", "mufu", "other", "other"]
    assert tool.classify("F2I.S64.F64.FLOOR") == "fp64 conversion"
    assert tool.classify("DSETP.GT.AND") == "fp64"
    assert tool.classify("MUFU.RCP64H") == "fp64"
    assert tool.classify("F2F.F16.F32") == "other"
    # the loop body (3) once per step, the rest (5) once per 8 steps; 4 elements per step
    assert tool.per_element(instructions, elements=4, steps=8) == ((3 + 5 / 8) / 4, 3)
    straight = [i for i in instructions if i[1] != "BRA"]
    assert tool.per_element(straight, elements=4) == (7 / 4, 0)
    with pytest.raises(ValueError, match="does not read"):
        tool.parse_sass(_SASS + "        /*00a0*/   something odd\n")
    with pytest.raises(ValueError, match="no loop found"):  # 8 steps' work is not in one pass
        tool.per_element(straight, elements=4, steps=8)


# sm_100 closes the same loop with a uniform-predicate branch (the target after the predicate
# operand) and pairs fp32 operations (FFMA2): the loop must still be found
_SASS_SM100 = _SASS.replace("@P2 BRA 0x40 ;      ", "     BRA.U UP0, 0x40 ;").replace(
    "FFMA R6, R6, R4, R31 ;", "FFMA2 R6, R6.F32x2.HI_LO, R4.F32, R30 ;"
)


def test_sass_counting_sm100_branches_and_paired_fp32():
    instructions = tool.parse_sass(_SASS_SM100)
    assert ("BRA.U", "UP0, 0x40") in [(op, operands) for _, op, operands in instructions]
    assert tool.per_element(instructions, elements=4, steps=8) == ((3 + 5 / 8) / 4, 3)
    assert tool.classify("FFMA2") == tool.classify("FMUL2") == tool.classify("FADD2") == "fp32"
    assert tool.branch_target("!P0, 0x2710") == 0x2710
    assert tool.branch_target("0x960") == 0x960
    assert tool.branch_target("R2 0x0") is None


def test_budgets_follow_bandwidth_and_issue_rate():
    h100, h200 = tool.GPUS["H100 SXM"], tool.GPUS["H200 SXM"]
    # 132 SMs × 128 lanes × 2 flops × clock is the datasheet's 67 TFLOPS fp32
    assert 2 * h100.sms * h100.issue * h100.clock == pytest.approx(67e12, rel=0.01)
    fp32 = tool.budget("pointwise", False, "fp32", "H100 SXM")
    assert fp32 == pytest.approx(132 * 128 * 1.98e9 * 8 / 3.35e12)
    assert tool.budget("pointwise", False, "bf16", "H100 SXM") == pytest.approx(fp32 / 2)
    assert tool.budget("pointwise", True, "fp32", "H100 SXM") == pytest.approx(fp32 * 3 / 2)
    assert tool.budget("pointwise", False, "fp32") == pytest.approx(fp32 * 3.35 / 4.8)
    assert h200.bandwidth > h100.bandwidth and tool.GATE_GPU == "H200 SXM"


def test_the_budget_table_in_docs_is_the_gates():
    text = (ROOT / "docs" / "CUDA.md").read_text()
    rows = re.findall(
        r"^\| (pointwise, rows, columns|GEGLU) (fwd|bwd) \| (\w+) \|(.*)$", text, re.M
    )
    documented = [
        (f"{name} {step}", dtype, *[float(c.strip().strip("*")) for c in cells.split("|")[:3]])
        for name, step, dtype, cells in rows
    ]
    expected = [
        (p, d, float(moved), round(h100, 1), round(h200, 1))
        for p, d, moved, h100, h200 in tool.budget_table()
    ]
    assert documented == expected
