"""Compile every Triton kernel variant for sm_90 without a GPU; count SASS per element; gate.

    python3 tools/compile_kernels.py [--gate] [--dtypes fp16,bf16,fp32] [--only TEXT] [--json FILE]

Each variant is one launch the host functions of ``gelus._triton.ops`` make on a long tensor: its
constants come from ``ops.launch_config``, the function the host functions launch with. For each
it prints the registers and the SASS instructions per element (what decides whether a
memory-bound kernel keeps up with HBM), with the fp64 instructions and MUFU apart.

``--gate`` exits 1 when an fp32, fp16 or bf16 variant holds an fp64 instruction (arithmetic, or a
conversion to or from fp64) or issues more instructions per element than the H200 can while
moving the variant's bytes at HBM speed (:func:`budget`; docs/CUDA.md derives it);
``tests/library/test_kernel_instructions.py`` runs the same gate on fp16, bf16 and fp32. Compiled
kernels stay in Triton's cache (keyed by the kernel source, its constants and the target) and
their disassembly under ~/.cache/gelus/sass (keyed by the cubin's hash): ~100 s of CPU for the
142 variants the first time, a few seconds after no kernel change.
"""

import argparse
import collections
import hashlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

# ---------------------------------------------------------------- the budget


@dataclass(frozen=True)
class GPU:
    """What bounds a memory-bound kernel: instruction issue against HBM bandwidth."""

    sms: int
    issue: int  # thread instructions issued per SM per clock: 4 schedulers × 32 lanes
    clock: float  # Hz
    bandwidth: float  # HBM, bytes per second

    def instructions_per_byte(self) -> float:
        """Instructions the GPU issues in the time its HBM moves one byte."""
        return self.sms * self.issue * self.clock / self.bandwidth


# NVIDIA's datasheets: 132 SMs; 67 TFLOPS fp32 = 132 SMs × 128 lanes × 2 flops × 1.98 GHz (the
# boost clock); HBM3 at 3.35 TB/s (H100 SXM), HBM3e at 4.8 TB/s (H200 SXM, the same GH100 SMs).
GPUS = {
    "H100 SXM": GPU(sms=132, issue=128, clock=1.98e9, bandwidth=3.35e12),
    "H200 SXM": GPU(sms=132, issue=128, clock=1.98e9, bandwidth=4.8e12),
}
GATE_GPU = "H200 SXM"  # the stricter: the same issue rate, faster memory

# Bytes each pass moves per element, in element sizes (forward, backward): read x, write y; read
# x and grad, write dx. GEGLU counts per output element: read a and b, write y; read a, b and
# grad, write da and db. The parameter kernels' partial sums and parameters are < 1/4096 of that.
# A kernel in a file of its own (gelus._members: OwnKernel) states its own, under its member's name.
SHARED_TRAFFIC = {"pointwise": (2, 3), "geglu": (3, 5), "rows": (2, 3), "columns": (2, 3)}
ITEMSIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
GATED = ("fp16", "bf16", "fp32")  # float64 computes in float64 by design: counted, not gated


# Variants that do not fit the bandwidth budget yet, each held to a ceiling instead (its count when
# it was listed, plus 3 %), so that the gate still catches a regression; docs/CUDA.md gives the
# reasons. A listed variant that fits its bandwidth budget again must leave the list.
# Printed by `python3 tools/compile_kernels.py --ceilings` (Triton 3.9, sm_90).
CEILINGS: dict[str, float] = {
    "pointwise fp16 exact fwd": 38.0,
    "pointwise fp16 stochastic fwd": 66.4,
    "rows fp16 generalized fwd": 43.6,
    "rows fp16 bias_exact fwd": 39.2,
    "columns fp16 generalized fwd": 53.3,
    "columns fp16 swish_beta fwd": 30.9,
    "columns fp16 bias_exact fwd": 44.5,
    "columns fp16 bias_sigmoid fwd": 31.3,
    "pointwise fp16 exact bwd": 47.0,
    "pointwise fp16 stochastic bwd": 67.3,
    "rows fp16 generalized bwd sums=1": 53.3,
    "rows fp16 generalized bwd": 58.7,
    "rows fp16 swish_beta bwd": 55.2,
    "rows fp16 bias_exact bwd sums=0": 48.3,
    "rows fp16 bias_exact bwd": 51.7,
    "columns fp16 generalized bwd sums=1": 63.9,
    "columns fp16 generalized bwd": 70.7,
    "columns fp16 swish_beta bwd": 61.3,
    "columns fp16 bias_exact bwd sums=0": 53.3,
    "columns fp16 bias_exact bwd": 58.5,
    "columns fp16 bias_tanh bwd": 43.8,
    "pointwise bf16 exact fwd": 39.1,
    "pointwise bf16 stochastic fwd": 67.1,
    "rows bf16 generalized fwd": 44.1,
    "rows bf16 bias_exact fwd": 39.8,
    "columns bf16 generalized fwd": 53.8,
    "columns bf16 swish_beta fwd": 31.5,
    "columns bf16 bias_exact fwd": 45.0,
    "columns bf16 bias_sigmoid fwd": 31.9,
    "pointwise bf16 exact bwd": 48.1,
    "pointwise bf16 stochastic bwd": 68.0,
    "rows bf16 generalized bwd sums=1": 54.4,
    "rows bf16 generalized bwd": 59.8,
    "rows bf16 swish_beta bwd": 55.7,
    "rows bf16 bias_exact bwd sums=0": 49.3,
    "rows bf16 bias_exact bwd": 52.7,
    "columns bf16 generalized bwd sums=1": 65.5,
    "columns bf16 generalized bwd": 71.1,
    "columns bf16 swish_beta bwd": 62.3,
    "columns bf16 bias_exact bwd sums=0": 54.3,
    "columns bf16 bias_exact bwd": 60.0,
    "columns bf16 bias_tanh bwd": 44.8,
    "pointwise fp32 exact fwd": 77.3,
    "pointwise fp32 stochastic fwd": 67.5,
    "rows fp32 generalized fwd": 85.7,
    "rows fp32 bias_exact fwd": 78.1,
    "columns fp32 generalized fwd": 90.1,
    "columns fp32 bias_exact fwd": 79.9,
    "rows fp32 generalized bwd sums=1": 99.2,
    "rows fp32 generalized bwd": 104.0,
    "rows fp32 bias_exact bwd": 90.2,
    "columns fp32 generalized bwd sums=1": 102.8,
    "columns fp32 generalized bwd": 109.5,
    "columns fp32 bias_exact bwd sums=0": 87.3,
    "columns fp32 bias_exact bwd": 91.8,
}


def own_kernels() -> dict:
    """member name -> its :class:`gelus._members.OwnKernel`: the kernels in files of their own."""
    from gelus import _members

    return {m.name: m.kernel for m in _members.MEMBERS if m.kernel is not None}


TRAFFIC = SHARED_TRAFFIC | {name: k.traffic for name, k in own_kernels().items()}


def allowed(record: dict) -> float:
    """The instructions per element a gated variant may take: its ceiling, or the budget."""
    return CEILINGS.get(record["name"], record["budget"])


def budget(kernel: str, backward: bool, dtype: str, gpu: str = GATE_GPU) -> float:
    """Instructions per element that ``gpu`` issues while HBM moves the pass's bytes:
    SMs × issue per SM per clock × clock × bytes per element / bandwidth. finish_kernel reads
    the partial sums (1/2048 of the input or less): gated for fp64 only, not per element."""
    if kernel == "finish":
        return math.inf
    moved = TRAFFIC[kernel][backward] * ITEMSIZE[dtype]
    return GPUS[gpu].instructions_per_byte() * moved


def budget_table() -> list[tuple[str, str, int, float, float]]:
    """(pass, dtype, bytes per element, H100 budget, H200 budget): docs/CUDA.md's table."""
    rows = []
    for name, kernel in (("pointwise, rows, columns", "pointwise"), ("GEGLU", "geglu")):
        for backward, dtype in itertools.product((False, True), ("fp32", "bf16")):
            moved = TRAFFIC[kernel][backward] * ITEMSIZE[dtype]
            h100, h200 = (budget(kernel, backward, dtype, gpu) for gpu in GPUS)
            rows.append((f"{name} {'bwd' if backward else 'fwd'}", dtype, moved, h100, h200))
    return rows


# ---------------------------------------------------------------- the variants


def variants():
    """(name, kernel, dtype, config) of every launch the host functions make on a long tensor,
    config from ``ops.launch_config`` (as a GPU launch takes it): each member's launches
    (``gelus._members``), in kernel order, then the kernels in files of their own."""
    import torch

    from gelus import _members
    from gelus._triton import _kernels as k
    from gelus._triton import ops

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
              "fp64": torch.float64}  # fmt: skip
    launches = [launch for m in _members.MEMBERS for launch in m.launches]
    for dtype, backward in itertools.product(dtypes, (False, True)):
        for kernel in SHARED_TRAFFIC:
            for launch in (x for x in launches if x.kernel == kernel and dtype in x.dtypes):
                member = launch.member
                member = int(getattr(k, member)) if isinstance(member, str) else member
                parameters = backward and kernel in ("rows", "columns")
                for sums in _sums(launch, dtype, kernel) if parameters else (0,):
                    config = ops.launch_config(
                        kernel, dtypes[dtype], member, launch.form, backward, sums=sums,
                        interpreted=False,
                    )  # fmt: skip
                    usual = not parameters or sums == launch.sums[-1]
                    suffix = "" if usual else f" sums={sums}"
                    label = f"{kernel} {dtype} {launch.name} {'bwd' if backward else 'fwd'}{suffix}"
                    yield label, kernel, dtype, config
    for name, own in own_kernels().items():  # e.g. GPT-OSS's gate: its layouts, its dtypes
        for label, dtype, config in _members.resolve(f"{own.path}:gate_variants")():
            yield f"{name} {label}", name, dtype, config
    # finish_kernel, once per dtype and number of parameter gradients (its constants do not
    # depend on the member or the layout of a long tensor)
    for dtype, sums in itertools.product(dtypes, (1, 2)):
        config = ops.launch_config(
            "finish", dtypes[dtype], int(k.GENERALIZED), 0, True, sums=sums, interpreted=False
        )
        yield f"finish {dtype} sums={sums}", "finish", dtype, config


def _sums(launch, dtype: str, kernel: str) -> tuple[int, ...]:
    """The partial sums a parameter member's backward writes (``Launch.sums``, the last its usual
    one): bias-GELU without a bias gradient (0) or with it (1); generalized GELU's dμ (1) or dμ
    and dσ (2); Swish's dβ (1), and 0 for a float β, which only float64 sends to the rows
    kernel (``Launch.fp64_sums``)."""
    if launch.fp64_sums is not None and dtype == "fp64" and kernel == "rows":
        return launch.fp64_sums
    return launch.sums


# The kernels' runtime arguments (constexprs come from the config): "x" the input's type, "acc"
# the compute type of the parameters and partial sums (fp64 for float64 input or WIDE, else fp32).
SHARED_ARGUMENTS = {
    "pointwise": {"x_ptr": "x", "grad_ptr": "x", "out_ptr": "x", "n": "i32", "beta": "fp32",
                  "seed": "i64", "offset": "i64"},
    "geglu": {"x_ptr": "x", "grad_ptr": "x", "out_ptr": "x", "outer": "i32", "half": "i32"},
    "rows": {"x_ptr": "x", "grad_ptr": "x", "out_ptr": "x", "p_ptr": "x", "q_ptr": "x",
             "partial_ptr": "acc", "rows": "i32", "row_length": "i32", "channels": "i32",
             "chunks": "i32", "p_stride": "i32", "q_stride": "i32"},
    "columns": {"x_ptr": "x", "grad_ptr": "x", "out_ptr": "x", "p_ptr": "x", "q_ptr": "x",
                "partial_ptr": "acc", "rows": "i32", "channels": "i32", "p_stride": "i32",
                "q_stride": "i32"},
    "finish": {"partial_ptr": "acc", "out1_ptr": "x", "out2_ptr": "x", "groups": "i32",
               "channels": "i32", "second": "i32"},
}  # fmt: skip
ARGUMENTS = SHARED_ARGUMENTS | {name: dict(k.arguments) for name, k in own_kernels().items()}


def elements_per_thread(kernel: str, config: dict) -> int:
    """Elements each thread holds per block (per loop step in the parameter kernels)."""
    if kernel == "finish":
        block = config["BLOCK_G"] * config["BLOCK_C"]
    elif kernel == "columns":
        block = config["BLOCK_R"] * config["BLOCK_C"]
    else:
        block = config.get("BLOCK_ROWS", 1) * config["BLOCK"]
    return max(1, block // (32 * config["num_warps"]))


# ---------------------------------------------------------------- counting SASS

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
FP64_ARITHMETIC = {"DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DMMA"}
# sm_100 adds paired fp32 instructions (FADD2, FMUL2, FFMA2: two lanes' operations in one
# instruction, from two registers each); one instruction each, like the others
FP32 = {"FADD", "FMUL", "FFMA", "FSEL", "FSETP", "FMNMX", "FADD2", "FMUL2", "FFMA2"}


def parse_sass(text: str) -> list[tuple[int, str, str]]:
    """(address, opcode with modifiers, operands) of each instruction, padding left out (the NOPs
    after the end and the branch-to-self that ends the code)."""
    instructions = []
    matches = list(_LINE.finditer(text))
    if len(matches) != len(re.findall(r"/\*[0-9a-f]{4,}\*/", text)):
        raise ValueError("SASS lines this parser does not read; update _LINE")
    for match in matches:
        address, opcode, operands = int(match[1], 16), match[2], match[3].strip()
        target = re.fullmatch(r"0x([0-9a-f]+)", operands)
        if opcode == "NOP" or (opcode == "BRA" and target and int(target[1], 16) == address):
            continue
        instructions.append((address, opcode, operands))
    return instructions


def classify(opcode: str) -> str:
    """'fp64' (arithmetic), 'fp64 conversion', 'fp32', 'mufu' or 'other'."""
    base, *modifiers = opcode.split(".")
    if base in FP64_ARITHMETIC or (base == "FRND" and "F64" in modifiers):
        return "fp64"
    if base == "MUFU" and any(m.endswith("64H") for m in modifiers):
        return "fp64"
    if base in ("F2F", "F2I", "I2F") and "F64" in modifiers:
        return "fp64 conversion"
    if base in FP32:
        return "fp32"
    return "mufu" if base == "MUFU" else "other"


def branch_target(operands: str) -> int | None:
    """The address a BRA jumps to: ``0x960``, also after a predicate operand (``UP0, 0x960``:
    sm_100 closes a loop with a uniform-predicate ``BRA.U``; ``!P0, 0x2710``); None for others."""
    target = re.fullmatch(r"(?:!?U?P[T0-9]+,\s*)?0x([0-9a-f]+)", operands)
    return int(target[1], 16) if target else None


def per_element(instructions, elements: int, steps: int = 1) -> tuple[float, int]:
    """(instructions issued per element, instructions in the loop body).

    Straight-line code: every instruction once per thread, over the elements the thread holds.
    A kernel with a loop (the parameter kernels, STEPS steps per program) runs the body once per
    step and the rest (parameter loads before, the partial sums' reduction and stores after) once
    per program: per element = (body + rest / STEPS) / elements per step. Branches that skip
    work (a rare slow path) are counted as if taken: an upper bound."""
    loops = []
    for address, opcode, operands in instructions:
        target = branch_target(operands)
        if opcode.split(".")[0] == "BRA" and target is not None and target < address:
            loops.append((target, address))
    if len(loops) > 1:
        raise ValueError(f"{len(loops)} backward branches; the count assumes one loop at most")
    body = sum(1 for a, _, _ in instructions if loops and loops[0][0] <= a <= loops[0][1])
    if body and steps <= 1:
        raise ValueError("a loop in a kernel launched with STEPS = 1")
    if not body and steps > 1:  # counted as straight-line code, it would be STEPS times too much
        raise ValueError(f"no loop found in a kernel launched with STEPS = {steps}")
    rest = len(instructions) - body
    return (body + rest / (steps if body else 1)) / elements, body


def _tool(name: str) -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def _disassemble(cubin: bytes) -> str:
    """cuobjdump's resource usage and SASS of a cubin, kept on disk by the cubin's hash (one
    cuobjdump call costs ~0.3-1 s; compiling a variant found in Triton's cache, ~0.1 s)."""
    cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "gelus", "sass"
    )
    path = os.path.join(cache, hashlib.sha256(cubin).hexdigest() + ".txt")
    if os.path.exists(path):
        with open(path) as handle:
            return handle.read()
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        text = subprocess.run([_tool("cuobjdump"), "-res-usage", "-sass", handle.name],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    os.makedirs(cache, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache, delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)  # whole or absent, whatever runs beside it
    return text


def compile_triton(variant, arch: int = 90):
    """Triton's compiled kernel of one variant for sm_<arch> (``.asm["ptx"]``, ``["cubin"]``), built
    with Triton's default options (fp fusion as Triton's default) and the launch's ``num_warps``;
    from Triton's cache when the kernel source and constants are unchanged."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gelus import _members

    _, kernel, dtype, config = variant
    own = own_kernels().get(kernel)  # a kernel in its own file, or one of _kernels' layouts
    fn = _members.resolve(f"{own.path if own else 'gelus._triton._kernels'}:{kernel}_kernel")
    wide = dtype == "fp64" or config.get("WIDE", False)
    types = {"x": f"*{dtype}", "acc": "*fp64" if wide else "*fp32"}
    signature = {a: types.get(t, t) for a, t in ARGUMENTS[kernel].items()}
    constants = {key: value for key, value in config.items() if key != "num_warps"}
    signature |= dict.fromkeys(constants, "constexpr")
    # What a launch on a long PyTorch tensor tells Triton: pointers 16-byte aligned and sizes
    # multiples of 16 (so loads and stores become 16-byte vectors); seed and offset unspecialized.
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]]
             for a, t in signature.items()
             if t.startswith("*") or (t == "i32" and a not in fn.do_not_specialize)}  # fmt: skip
    source = ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": config["num_warps"]})  # fmt: skip


def compile_variant(variant, arch: int = 90) -> dict:
    """Compile one variant for sm_<arch>; its SASS counts, per element and against its budget."""
    name, kernel, dtype, config = variant
    record = {"name": name, "kernel": kernel, "dtype": dtype, "config": config}
    try:
        compiled = compile_triton(variant, arch)
        text = _disassemble(compiled.asm["cubin"])
        usage = re.search(r"REG:(\d+).*STACK:(\d+)", text)
        instructions = parse_sass(text)
    except Exception as error:  # report every failing variant, not just the first
        return record | {"error": f"{type(error).__name__}: {str(error)[:2000]}"}
    kinds = collections.Counter(classify(opcode) for _, opcode, _ in instructions)
    elements = elements_per_thread(kernel, config)
    if kernel == "finish":  # nested loops over the partial sums: counted whole, not gated
        count, body = len(instructions) / elements, 0
    else:
        count, body = per_element(instructions, elements, config.get("STEPS", 1))
    backward = config.get("BACKWARD", True)  # finish_kernel: part of a backward
    return record | {
        "registers": int(usage[1]),
        "stack": int(usage[2]),
        "instructions": len(instructions),
        "loop_body": body,
        "elements_per_thread": elements,
        "fp32": kinds["fp32"],
        "fp64": kinds["fp64"],
        "fp64_conversions": kinds["fp64 conversion"],
        "mufu": kinds["mufu"],
        "per_element": count,
        "budget": budget(kernel, backward, dtype),
        "budget_h100": budget(kernel, backward, dtype, "H100 SXM"),
    }


def problems(record: dict) -> list[str]:
    """What the gate finds wrong with one compiled variant (nothing for float64 variants)."""
    if "error" in record:
        return [f"{record['name']}: does not compile: {record['error']}"]
    if record["dtype"] not in GATED:
        return []
    found = []
    if record["fp64"] or record["fp64_conversions"]:
        found.append(
            f"{record['name']}: {record['fp64']} fp64 instructions and "
            f"{record['fp64_conversions']} conversions to or from fp64 "
            f"({record['per_element']:.1f} instructions per element, budget "
            f"{record['budget']:.1f})"
        )
    if record["per_element"] > allowed(record):
        what = "its ceiling" if record["name"] in CEILINGS else f"the {GATE_GPU} budget"
        found.append(
            f"{record['name']}: {record['per_element']:.1f} instructions per element, over "
            f"{what} of {allowed(record):.1f}"
        )
    elif record["name"] in CEILINGS and record["per_element"] <= record["budget"]:
        found.append(
            f"{record['name']}: {record['per_element']:.1f} instructions per element fits the "
            f"{GATE_GPU} budget of {record['budget']:.1f}: take it off CEILINGS"
        )
    return found


def compile_all(
    only: str = "", dtypes=tuple(ITEMSIZE), arch: int = 90, jobs: int | None = None
) -> list[dict]:
    """Every variant of ``dtypes`` whose name contains ``only``, compiled in ``jobs`` processes."""
    chosen = [v for v in variants() if only in v[0] and v[2] in dtypes]
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as pool:
        return list(pool.map(compile_variant, chosen, itertools.repeat(arch), chunksize=4))


def missing_tools() -> list[str]:
    """The binaries the gate needs that this Triton does not ship (ptxas, cuobjdump)."""
    return [name for name in ("ptxas", "cuobjdump") if not os.path.exists(_tool(name))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--only", default="", help="compile the variants whose name contains this")
    parser.add_argument("--dtypes", default=",".join(ITEMSIZE), help="e.g. fp16,bf16,fp32")
    parser.add_argument("--gate", action="store_true", help="exit 1 on fp64 or over budget")
    parser.add_argument("--json", help="write the records to this file")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: CPUs)")
    parser.add_argument(
        "--ceilings", action="store_true", help="print CEILINGS for the variants over budget"
    )
    args = parser.parse_args()
    os.environ["TRITON_INTERPRET"] = "0"  # compile for the GPU, before anything imports Triton
    if missing := missing_tools():
        print(f"this Triton ships no {' or '.join(missing)}: nothing to compile with")
        return 2
    records = compile_all(args.only, args.dtypes.split(","), args.arch, args.jobs)
    found = []
    for r in records:
        if "error" in r:
            print(f"FAIL {r['name']}: {r['error']}")
        else:
            print(f"{r['name']:34} {r['registers']:3} regs  {r['per_element']:6.1f} per element "
                  f"(budget {r['budget']:5.1f} H200, {r['budget_h100']:5.1f} H100)  "
                  f"fp32 {r['fp32']:3}  fp64 {r['fp64']:3} + {r['fp64_conversions']:2} cvt  "
                  f"mufu {r['mufu']:2}  total {r['instructions']}"
                  + (f" (loop {r['loop_body']})" if r["loop_body"] else ""))  # fmt: skip
        found += problems(r)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=1)
    if args.ceilings:
        over = [r for r in records if r.get("dtype") in GATED and r["per_element"] > r["budget"]]
        print("CEILINGS = {")
        for r in over:
            print(f'    "{r["name"]}": {math.ceil(r["per_element"] * 1.03 * 10) / 10},')
        print("}")
    if args.gate and found:
        print(f"\n{len(found)} problems:", *found, sep="\n  ")
    return 1 if any("error" in r for r in records) or (args.gate and found) else 0


if __name__ == "__main__":
    sys.exit(main())
