"""Compile every Triton kernel variant for a CUDA target without a GPU; print SASS op counts.

    python3 tools/compile_kernels.py [--arch 90] [--sass]

Checks that the kernels build for the GPU (the tests run them in Triton's interpreter, which does
not compile), and counts the instructions per element that decide whether a memory-bound kernel
keeps up with HBM: fp32 (FFMA/FMUL/FADD), fp64 (DFMA/DMUL/DADD), MUFU (exp/rcp), and the stack.
"""

import argparse
import collections
import itertools
import os
import re
import subprocess
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "0"

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from gelus._triton import _kernels as k

POINTER = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32", "fp64": "*fp64"}
PRECISION = {"fp16": 0, "bf16": 0, "fp32": 1, "fp64": 2}
BLOCK = {"fp16": 1024, "bf16": 1024, "fp32": 512, "fp64": 512}


def variants():
    for dtype, member, backward in itertools.product(POINTER, range(5), (False, True)):
        wide = dtype == "fp64" or (dtype == "fp32" and member == 0)
        sig = {"x_ptr": POINTER[dtype], "grad_ptr": POINTER[dtype], "out_ptr": POINTER[dtype],
               "n": "i32", "beta": "fp32", "seed": "i64", "offset": "i64"}  # fmt: skip
        const = {"MEMBER": member, "BACKWARD": backward, "PREC": PRECISION[dtype], "WIDE": wide,
                 "BLOCK": 1024 if wide and dtype == "fp32" else BLOCK[dtype]}  # fmt: skip
        yield f"pointwise {dtype} member={member} bwd={backward}", k.pointwise_kernel, sig, const
    for dtype, form, backward in itertools.product(("bf16", "fp32"), range(3), (False, True)):
        wide = dtype == "fp32" and form == 0
        sig = {"x_ptr": POINTER[dtype], "grad_ptr": POINTER[dtype], "out_ptr": POINTER[dtype],
               "half": "i32"}  # fmt: skip
        const = {"FORM": form, "BACKWARD": backward, "PREC": PRECISION[dtype], "WIDE": wide,
                 "BLOCK": 1024 if wide and dtype == "fp32" else BLOCK[dtype]}  # fmt: skip
        yield f"geglu {dtype} form={form} bwd={backward}", k.geglu_kernel, sig, const
    for dtype, member, backward in itertools.product(("bf16", "fp32"), range(3), (False, True)):
        wide = dtype == "fp32" and member in (0, 2)  # generalized; bias-GELU in the exact form
        acc = "*fp64" if wide else "*fp32"
        common = {"x_ptr": POINTER[dtype], "grad_ptr": POINTER[dtype], "out_ptr": POINTER[dtype],
                  "p_ptr": acc, "q_ptr": acc, "partial_ptr": acc}  # fmt: skip
        const = {"MEMBER": member, "FORM": 0, "BACKWARD": backward, "PREC": PRECISION[dtype],
                 "WIDE": wide}  # fmt: skip
        common |= {"p_stride": "i32", "q_stride": "i32"}
        const["SUMS"] = (2 if member == 0 else 1) if backward else 0
        sig = {**common, "rows": "i32", "row_length": "i32", "channels": "i32", "chunks": "i32"}
        yield (f"rows {dtype} member={member} bwd={backward}", k.rows_kernel, sig,
               const | {"BLOCK_ROWS": 1, "BLOCK": BLOCK[dtype], "STEPS": 8})  # fmt: skip
        yield (f"rows (short) {dtype} member={member} bwd={backward}", k.rows_kernel, dict(sig),
               const | {"BLOCK_ROWS": 64, "BLOCK": 8, "STEPS": 1})  # fmt: skip
        sig = {**common, "rows": "i32", "channels": "i32"}
        yield (f"columns {dtype} member={member} bwd={backward}", k.columns_kernel, sig,
               const | {"BLOCK_R": 8, "BLOCK_C": 64, "STEPS": 8})  # fmt: skip
    for wide, out1, out2 in ((False, 1, 0), (False, 1, 2), (True, 1, 1)):
        acc = "*fp64" if wide else "*fp32"
        sig = {"partial_ptr": acc, "out1_ptr": "*fp32", "out2_ptr": "*fp32", "groups": "i32",
               "channels": "i32", "second": "i32"}  # fmt: skip
        const = {"OUT1": out1, "OUT2": out2, "WIDE": wide, "BLOCK_G": 16, "BLOCK_C": 128}
        yield f"finish wide={wide} out={out1},{out2}", k.finish_kernel, sig, const


def cuobjdump(cubin: bytes, option: str) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        return subprocess.run([tool, option, handle.name], capture_output=True, text=True).stdout


def sass_counts(cubin: bytes) -> collections.Counter:
    text = cuobjdump(cubin, "-sass")
    ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", text)
    return collections.Counter(op.split(".")[0] for op in ops)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--sass", action="store_true", help="print SASS instruction counts")
    parser.add_argument("--only", default="", help="compile the variants whose name contains this")
    args = parser.parse_args()
    failures = 0
    for name, fn, signature, constants in variants():
        if args.only not in name:
            continue
        for key in constants:
            signature[key] = "constexpr"
        # What a launch on PyTorch's (16-byte aligned) tensors tells Triton: pointers aligned to
        # 16 bytes, so loads and stores become 16-byte vectors.
        attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]]
                 for name, kind in signature.items() if kind.startswith("*")}  # fmt: skip
        try:
            source = ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs)
            compiled = triton.compile(source, target=GPUTarget("cuda", args.arch, 32))
        except Exception as error:  # report every failing variant, not just the first
            failures += 1
            print(f"FAIL {name}: {type(error).__name__}: {str(error)[:2000]}")
            continue
        usage = re.search(r"REG:(\d+).*STACK:(\d+)", cuobjdump(compiled.asm["cubin"], "-res-usage"))
        line = f"ok   {name}: {usage[1]} registers, stack {usage[2]} bytes"
        if args.sass:
            counts = sass_counts(compiled.asm["cubin"])
            groups = {"fp32": ("FFMA", "FMUL", "FADD", "FSEL", "FSETP", "FMNMX"),
                      "fp64": ("DFMA", "DMUL", "DADD", "DSETP"), "mufu": ("MUFU",)}  # fmt: skip
            line += ", " + ", ".join(
                f"{g} {sum(counts[o] for o in ops)}" for g, ops in groups.items()
            )
            line += f", total {sum(counts.values())}"
        print(line, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
