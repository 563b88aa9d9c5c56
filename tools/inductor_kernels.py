"""inductor's Triton kernels of gelus's compiled CUDA route, generated and compiled without a GPU.

    python3 tools/inductor_kernels.py [--gate] [--dtypes fp32,bf16,fp16] [--show] [--json FILE]

``torch.compile`` (inductor) of the exact GELU's compiled route, forward and backward, for a fake
CUDA device of compute capability 9.0: the inputs are ``FakeTensorMode`` CUDA tensors (metadata
only) and the few places where inductor asks the CUDA runtime (device properties, the current
device, Triton's active driver for the target) answer as an sm_90 device would. inductor lowers
and schedules the graph as for a GPU and generates its wrapper with the Triton kernels, which is
captured before it would be loaded (loading needs the CUDA driver). Each kernel is then compiled
by Triton for sm_<arch> with the options inductor's launcher passes (``triton_meta``:
``enable_fp_fusion`` on, its ``num_warps``), and its SASS counted by tools/compile_kernels.py's
functions against the same instructions-per-element budget as the hand-written kernels.

- **Forward**: ``gelus.functional.gelu(x)`` under ``torch.compile``, x a fake CUDA tensor of
  2^24 elements: the route itself (``gelus._operator.route`` sees a CUDA tensor under compile).
- **Backward**: autograd cannot record on a fake CUDA tensor in a CPU-only torch (the process
  aborts), so the backward graph is composed as AOTAutograd makes it from the compiled route's
  Function (``gelus._gelu._Compiled``): grad cast to the compute dtype, the Function's backward on
  the saved x (cast likewise), the result cast back. Its numerics are the route's; its loads are
  those of a backward that saves the input (the route saves only x).

Generated sources are kept under ~/.cache/gelus/inductor, keyed by the gelus sources, torch's and
Triton's versions and the arch: generating one costs ~5-10 s of CPU, compiling its kernel ~2 s
(Triton's cache), counting its SASS ~1 s (compile_kernels' cache).
"""

import argparse
import collections
import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMEL = 1 << 24  # a long tensor: inductor's pointwise config for it is the one a model sees
DTYPES = ("fp32", "bf16", "fp16")


def _compile_kernels():
    """tools/compile_kernels.py as a module (its SASS parsing, counting and budget)."""
    spec = importlib.util.spec_from_file_location(
        "compile_kernels", ROOT / "tools" / "compile_kernels.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ck = _compile_kernels()


# ---------------------------------------------------------------- generating the wrapper
# inductor's internals (a fake sm_<arch> device, the generated code taken before it loads, the
# launcher's compile options) are reached through gelus._torch_compat, the project's one place
# for private torch API: inductor_fake_cuda, inductor_captured_code, inductor_kernel_build.


def _torch_dtype(dtype: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]


def _forward(x):
    import gelus

    return gelus.functional.gelu(x)


def _backward(grad, x):
    """The compiled route's backward as AOTAutograd composes it: the casts around the backward
    of its Function (gelus._gelu._Compiled: ``composed_backward`` on the saved input)."""
    from gelus import _gelu
    from gelus._common import compute_dtype

    dtype = compute_dtype(x.dtype)
    dx = _gelu.composed_backward(grad.to(dtype), x.to(dtype), "none", False, x.dtype)
    return dx.to(x.dtype)


def generate(dtype: str, backward: bool, arch: int = 90) -> str:
    """The Python wrapper inductor generates for the route on a fake sm_<arch> CUDA device."""
    import torch

    from gelus._torch_compat import inductor_captured_code, inductor_fake_cuda

    torch.compiler.reset()
    function = _backward if backward else _forward
    compiled = torch.compile(function, backend="inductor", fullgraph=True, dynamic=False)
    with inductor_fake_cuda(arch), inductor_captured_code() as captured:
        x = torch.empty(NUMEL, device="cuda", dtype=_torch_dtype(dtype))
        grad = torch.empty(NUMEL, device="cuda", dtype=_torch_dtype(dtype))
        try:
            compiled(grad, x) if backward else compiled(x)
        except Exception as error:  # the capture ends the compile, wrapped by dynamo
            if not captured:
                raise RuntimeError(f"inductor generated nothing for {dtype}") from error
    torch.compiler.reset()
    return captured[0]


_KERNEL = re.compile(
    r"(\w+) = async_compile\.triton\('(\w+)', '''(.*?)''', device_str='cuda'\)", re.S
)


def kernel_sources(wrapper: str) -> list[tuple[str, str]]:
    """(name, module source) of each Triton kernel in a generated wrapper."""
    return [(m[2], m[3]) for m in _KERNEL.finditer(wrapper)]


def _source_key(arch: int) -> str:
    """What the generated code depends on: gelus's sources, torch, Triton, this file, arch."""
    import torch
    import triton

    # inductor's and Triton's environment switches change the code (fast math, division, fusion)
    switches = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith(("TORCHINDUCTOR_", "TRITON_")) and k != "TRITON_INTERPRET"
    )
    digest = hashlib.sha256(f"{torch.__version__} {triton.__version__} {arch} {switches}".encode())
    for path in [*sorted((ROOT / "src" / "gelus").glob("*.py")), Path(__file__)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return Path(base) / "gelus" / "inductor"


def route_kernels(dtype: str, backward: bool, arch: int = 90) -> list[tuple[str, str]]:
    """(name, source) of the Triton kernels inductor generates for the compiled CUDA route of the
    exact GELU (forward or backward) on ``dtype`` input, from the cache when up to date."""
    path = _cache_dir() / f"{_source_key(arch)}-{dtype}-{'bwd' if backward else 'fwd'}.json"
    if path.exists():
        return [tuple(k) for k in json.loads(path.read_text())]
    kernels = kernel_sources(generate(dtype, backward, arch))
    if not kernels:
        raise RuntimeError(f"no Triton kernel in inductor's wrapper for {dtype}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as handle:
        json.dump(kernels, handle)
    os.replace(handle.name, path)  # whole or absent, whatever runs beside it
    return kernels


# ---------------------------------------------------------------- compiling a kernel


def compile_kernel(name: str, source: str, arch: int = 90):
    """(Triton's compiled kernel for sm_<arch>, the inductor config it was built with).

    The compile inductor's launcher makes (its autotuner's precompile step): the same
    signature, constants, specialization, ``num_warps``/``num_stages`` and ``triton_meta`` options
    (``enable_fp_fusion`` and the rest), for the first of its configs (a pointwise kernel of a
    static size has one)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gelus._torch_compat import inductor_fake_cuda, inductor_kernel_build

    with inductor_fake_cuda(arch):
        fn, meta, options, config = inductor_kernel_build(name, source)
    source_ = ASTSource(fn, meta["signature"], meta["constants"], meta["configs"][0])
    compiled = triton.compile(source_, target=GPUTarget("cuda", arch, 32), options=options)
    return compiled, config


def compiled_route_ptx(dtype: str, backward: bool, arch: int = 90) -> list[tuple[str, str]]:
    """(kernel name, PTX) of each kernel of the exact GELU's compiled CUDA route on ``dtype``
    ("fp32", "bf16", "fp16") input, forward or backward, as Triton builds it for sm_<arch> with
    inductor's options (fp fusion on)."""
    os.environ.setdefault("TRITON_INTERPRET", "0")
    return [(name, compile_kernel(name, source, arch)[0].asm["ptx"])
            for name, source in route_kernels(dtype, backward, arch)]  # fmt: skip


def _elements_per_thread(config, source: str) -> int:
    """Elements each thread holds: the block (XBLOCK, × R0_BLOCK for a reduction) over threads."""
    block = 1
    for key, value in config.kwargs.items():
        if key.endswith("BLOCK"):
            block *= value
    if "tl.program_id(1)" in source or "R0_BLOCK" in source:
        raise ValueError("not a 1-D pointwise kernel: count it by hand")
    return max(1, block // (32 * config.num_warps))


def compiled_route_sass(dtype: str, backward: bool, arch: int = 90) -> list[dict]:
    """A record per kernel of the route: SASS counts (compile_kernels' parser and classes),
    instructions per element and the budget of the hand-written pointwise kernel's pass."""
    os.environ.setdefault("TRITON_INTERPRET", "0")
    records = []
    for name, source in route_kernels(dtype, backward, arch):
        compiled, config = compile_kernel(name, source, arch)
        text = ck._disassemble(compiled.asm["cubin"])
        usage = re.search(r"REG:(\d+).*STACK:(\d+)", text)
        instructions = ck.parse_sass(text)
        kinds = collections.Counter(ck.classify(opcode) for _, opcode, _ in instructions)
        elements = _elements_per_thread(config, source)
        count, _ = ck.per_element(instructions, elements)
        records.append({
            "name": f"compiled {dtype} exact {'bwd' if backward else 'fwd'}",
            "kernel": name,
            "dtype": dtype,
            "backward": backward,
            "config": dict(config.kwargs, num_warps=config.num_warps),
            "registers": int(usage[1]),
            "instructions": len(instructions),
            "elements_per_thread": elements,
            "fp32": kinds["fp32"],
            "fp64": kinds["fp64"],
            "fp64_conversions": kinds["fp64 conversion"],
            "mufu": kinds["mufu"],
            "per_element": count,
            "budget": ck.budget("pointwise", backward, dtype),
            "budget_h100": ck.budget("pointwise", backward, dtype, "H100 SXM"),
            "ptx_div_full": len(re.findall(r"\bdiv\.full\.f32", compiled.asm["ptx"])),
        })  # fmt: skip
    return records


# Compiled-route kernels that do not fit the H200 budget, each held to a ceiling (its count when
# listed, plus 3 %) as compile_kernels.CEILINGS holds the hand-written ones; docs/CUDA.md says why.
# Printed by `python3 tools/inductor_kernels.py --ceilings` (torch 2.13, Triton 3.9, sm_90).
CEILINGS: dict[str, float] = {
    "compiled fp32 exact fwd": 116.7,
    "compiled fp32 exact bwd": 121.1,
}


def allowed(record: dict) -> float:
    """The instructions per element a compiled-route kernel may take: its ceiling or budget."""
    return CEILINGS.get(record["name"], record["budget"])


def problems(record: dict) -> list[str]:
    """fp64 in the kernel, over its allowance, or listed in CEILINGS while within the budget."""
    found = []
    if record["fp64"] or record["fp64_conversions"]:
        found.append(f"{record['name']}: {record['fp64']} fp64 instructions, "
                     f"{record['fp64_conversions']} conversions to or from fp64")  # fmt: skip
    if record["per_element"] > allowed(record):
        found.append(f"{record['name']}: {record['per_element']:.1f} instructions per element > "
                     f"{allowed(record):.1f}")  # fmt: skip
    elif record["name"] in CEILINGS and record["per_element"] <= record["budget"]:
        found.append(f"{record['name']}: fits the budget {record['budget']:.1f}: unlist it")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--gate", action="store_true", help="exit 1 on fp64 or over budget")
    parser.add_argument("--show", action="store_true", help="print the generated kernels")
    parser.add_argument("--ptx", action="store_true", help="print the kernels' PTX")
    parser.add_argument("--json", help="write the records to this file")
    parser.add_argument(
        "--ceilings", action="store_true", help="print CEILINGS for the kernels over budget"
    )
    args = parser.parse_args()
    os.environ["TRITON_INTERPRET"] = "0"
    if missing := ck.missing_tools():
        print(f"this Triton ships no {' or '.join(missing)}: nothing to compile with")
        return 2
    sys.path.insert(0, str(ROOT / "src"))
    records, found = [], []
    for dtype in args.dtypes.split(","):
        for backward in (False, True):
            if args.show:
                for name, source in route_kernels(dtype, backward, args.arch):
                    print(f"# ---- {dtype} {'bwd' if backward else 'fwd'}: {name}\n{source}")
            if args.ptx:
                for name, ptx in compiled_route_ptx(dtype, backward, args.arch):
                    print(f"// ---- {dtype} {'bwd' if backward else 'fwd'}: {name}\n{ptx}")
            for r in compiled_route_sass(dtype, backward, args.arch):
                print(f"{r['name']:26} {r['registers']:3} regs  {r['per_element']:6.1f} per element "
                      f"(budget {r['budget']:5.1f} H200, {r['budget_h100']:5.1f} H100)  "
                      f"fp32 {r['fp32']:3}  fp64 {r['fp64']} + {r['fp64_conversions']} cvt  "
                      f"mufu {r['mufu']:2}  div.full {r['ptx_div_full']}  "
                      f"total {r['instructions']} / {r['elements_per_thread']} elements")  # fmt: skip
                records.append(r)
                found += problems(r)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    if args.ceilings:
        print("CEILINGS = {")
        for r in records:
            if r["per_element"] > r["budget"]:
                print(f'    "{r["name"]}": {math.ceil(r["per_element"] * 1.03 * 10) / 10},')
        print("}")
    if args.gate and found:
        print(f"\n{len(found)} problems:", *found, sep="\n  ")
    return 1 if args.gate and found else 0


if __name__ == "__main__":
    sys.exit(main())
