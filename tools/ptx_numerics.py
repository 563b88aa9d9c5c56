"""The compiled code's numerics, on the CPU: evaluate a kernel's PTX as the GPU defines it; gate.

    python3 tools/ptx_numerics.py [--arch 90] [--only TEXT] [--sample N] [--json FILE]

Triton's interpreter and inductor's C++ code never contract a·b + c into an fma and evaluate
approximate instructions (``ex2.approx``, ``div.full``) as numpy's correctly rounded functions, so
they cannot show what the GPU computes. This tool compiles a kernel variant for sm_90 / sm_80 with
Triton's default options (fp fusion on) and the launch's constants (the variants of
``tools/compile_kernels.py``), and runs its PTX on one "thread" whose registers are numpy arrays
over a set of inputs:

- ``fma.rn.f32`` rounded once (the product of two fp32 is exact in float64; the sum is rounded
  with its exact error from TwoSum, so that a float64 result on an fp32 midpoint rounds to the
  correct side); ``add/sub/mul/div.rn.f32`` through float64 (for +, −, ×, ÷ a double rounding
  through 53 bits is innocuous for 24: 53 ≥ 2·24 + 2);
- ``mul.f32`` and ``add.f32`` without a rounding modifier may be fused by ptxas (the PTX ISA:
  "mul/add sequences with no rounding modifiers may be optimized to use fused-multiply-add"):
  ``contract=True`` fuses every such pair, as ptxas may;
- approximate instructions at their documented error bound (PTX ISA 9.1): ``ex2.approx.f32``
  and ``div.full.f32`` / ``div.approx.f32`` 2 ulp from the correctly rounded result,
  ``rsqrt.approx.f32`` relative 2^-22.9; ``approx=+1`` / ``-1`` moves every result to the top /
  bottom of its bound, ``0`` takes the correctly rounded value (the gate takes the worst of the
  three);
- ``.ftz`` flushes subnormal inputs and results to sign-preserving zero;
- integer, bitwise, conversion, compare/select, predicate and branch instructions exactly;
  ``ld/st.global`` (also ``.v2`` / ``.v4``) at addresses derived from the kernel's pointer
  parameters: each parameter has its own base address, so a load or store knows which parameter
  and which element it touches.

An instruction the evaluator does not know raises :class:`UnknownInstruction` (never skipped).
Branches must be uniform over the inputs (the kernels' loops); predicated loads and stores run
where their (address-based) predicate holds. Shuffles and shared memory exchange values between
threads, which one thread cannot see: a shuffle returns the thread's own value, and a shared-memory
load of an address this thread did not store returns 0; both only feed the parameter kernels'
partial sums, which the gate does not check (:attr:`Result.cross_thread` says when they ran).

:func:`evaluate_ptx` takes PTX text and the inputs of its pointer parameters, so it serves any
Triton kernel (inductor's too); :func:`gate` runs the project's accuracy sets through every
accuracy-bearing variant and asserts the bounds of docs/CUDA.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "Result",
    "UnknownInstruction",
    "evaluate_ptx",
    "fma_f32",
    "gate",
    "round_f32",
]


class UnknownInstruction(NotImplementedError):
    """A PTX instruction (or a form of one) whose semantics the evaluator does not implement."""


# ---------------------------------------------------------------- fp32 arithmetic, rounded once


def round_f32(value: np.ndarray, error: np.ndarray | None = None) -> np.ndarray:
    """float64 value (+ an exact, much smaller error term) rounded once to float32, to nearest
    even: float64 → float32 is correct except where ``value`` lies exactly on a float32 midpoint
    and ``error`` ≠ 0, where the exact sum lies on the side of ``error``."""
    value = np.asarray(value, np.float64)
    rounded = value.astype(np.float32)
    if error is None:
        return rounded
    error = np.asarray(error, np.float64)
    other = np.nextafter(rounded, np.where(value > rounded, np.inf, -np.inf).astype(np.float32))
    midpoint = (rounded.astype(np.float64) + other.astype(np.float64)) * 0.5 == value
    fix = midpoint & (error != 0) & np.isfinite(value) & (rounded != value)
    if np.any(fix):
        # the exact value is past the midpoint toward `other` when error points that way
        toward_other = np.sign(error) == np.sign(other.astype(np.float64) - value)
        rounded = np.where(fix & toward_other, other, rounded)
    return rounded


def fma_f32(a, b, c) -> np.ndarray:
    """fma.rn.f32: a·b + c rounded once. a·b is exact in float64 (48 bits); s = fl64(a·b + c)
    and its exact error e (TwoSum) give the float32 result by :func:`round_f32`."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    product = a * b
    total = product + c
    virtual = total - product
    error = (product - (total - virtual)) + (c - virtual)  # TwoSum: total + error = a·b + c
    error = np.where(np.isfinite(error), error, 0.0)
    return round_f32(total, error)


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormal float32 to sign-preserving zero (.ftz)."""
    x = np.asarray(x, np.float32)
    tiny = (np.abs(x) < np.float32(np.finfo(np.float32).tiny)) & (x != 0)
    return np.where(tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def _ulp_steps(x: np.ndarray, steps: int) -> np.ndarray:
    """x moved by ``steps`` float32 ulps (toward +inf for steps > 0); inf and nan stay."""
    x = np.asarray(x, np.float32)
    target = np.float32(np.inf if steps > 0 else -np.inf)
    for _ in range(abs(steps)):
        x = np.where(np.isfinite(x), np.nextafter(x, target), x).astype(np.float32)
    return x


# ---------------------------------------------------------------- registers and operands

_WIDTH = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16,
          "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
          "b64": 64, "u64": 64, "s64": 64, "f64": 64}  # fmt: skip
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_FLOAT = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
_SPECIAL = re.compile(r"%(tid|ntid|ctaid|nctaid)\.([xyz])$")


def _bits(value, width: int) -> np.ndarray:
    """Any integer / float array as the unsigned bit pattern of ``width`` bits."""
    value = np.asarray(value)
    if value.dtype.kind == "f":
        value = value.astype({16: np.float16, 32: np.float32, 64: np.float64}[width])
        return value.view(_UNSIGNED[width])
    if value.dtype == bool:
        return value.astype(_UNSIGNED[width])
    return value.astype(_UNSIGNED[max(width, value.dtype.itemsize * 8)]).astype(_UNSIGNED[width])


@dataclasses.dataclass
class Result:
    """What a run stored: ``stores[param][element]`` = the bit patterns (unsigned integers of the
    element's width) stored at that element of that pointer parameter; ``cross_thread``: whether
    a shuffle or a shared-memory load read values of other threads (parameter kernels' sums)."""

    stores: dict[int, dict[int, np.ndarray]]
    cross_thread: bool
    instructions: int

    def values(self, param: int, element: int, dtype=np.float32) -> np.ndarray:
        """The values stored at ``element`` of ``param``, as float32 (widened from ``dtype``:
        np.float32, np.float16 or "bf16")."""
        bits = self.stores[param][element]
        if dtype == "bf16":
            return (bits.astype(np.uint32) << 16).view(np.float32)
        return bits.view(dtype).astype(np.float32)


@dataclasses.dataclass
class _Instruction:
    opcode: str
    operands: list[str]
    predicate: str | None  # "%p1" or "!%p1"
    line: int


_PARAM = re.compile(r"\.param\s+\.(\w+)(\s+\.ptr)?[^,)]*?\s+(\w+_param_(\d+))")


def _parse(ptx: str) -> tuple[str, dict[str, tuple[int, str, bool]], list[_Instruction]]:
    """(entry name, {param name: (index, type, is pointer)}, instructions with labels as
    ``label:`` pseudo-instructions)."""
    entry = re.search(r"\.entry\s+(\w+)\s*\(", ptx)
    if entry is None:
        raise ValueError("no .entry in this PTX")
    header_end = ptx.index(")", entry.end())
    params = {
        m[3]: (int(m[4]), m[1], bool(m[2]))
        for m in _PARAM.finditer(ptx[entry.end() : header_end + 1])
    }
    body_start = ptx.index("{", header_end)
    end = ptx.find("$L__func_end", body_start)
    body = ptx[body_start + 1 : end if end >= 0 else len(ptx)]
    body = re.sub(r"//[^\n]*", "", body)
    instructions = []
    for number, raw in enumerate(body.split(";")):
        text = " ".join(line.strip() for line in raw.splitlines()
                        if line.strip() and not line.strip().startswith((".loc", ".file")))  # fmt: skip
        while True:  # labels (possibly several) before the instruction
            label = re.match(r"^(\$?[\w$]+):\s*", text)
            if not label:
                break
            instructions.append(_Instruction("label:", [label[1]], None, number))
            text = text[label.end() :]
        text = text.replace("{", " { ").replace("}", " } ").strip()
        text = re.sub(r"^(\{\s*|\}\s*)+", "", text).strip()  # scope braces of inline asm
        text = (
            re.sub(r"(\s*\})+$", "", text).strip()
            if not text.endswith("}") or "{" not in text
            else text
        )
        if not text or text.startswith((".reg", ".loc", ".file", ".pragma", ".shared", ".local")):
            continue
        predicate = None
        guard = re.match(r"^@(!?%\w+)\s+", text)
        if guard:
            predicate, text = guard[1], text[guard.end() :]
        opcode, _, rest = re.sub(r"\s+", " ", text).partition(" ")
        instructions.append(_Instruction(opcode, _split_operands(rest), predicate, number))
    return entry[1], params, instructions


def _split_operands(text: str) -> list[str]:
    """'d, [a + 4], {b, c}' -> ['d', '[a + 4]', '{b, c}'] (commas inside brackets kept)."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


# ---------------------------------------------------------------- the evaluator

_POINTER_SPACING = 1 << 40  # each pointer parameter's memory lies at (index + 1)·2^40


class _Machine:
    def __init__(self, params, inputs, scalars, itemsizes, approx, block, ctaid):
        self.params = params
        self.inputs = inputs
        self.scalars = scalars
        self.itemsizes = itemsizes
        self.approx = approx
        self.block = block
        self.ctaid = ctaid
        self.registers: dict[str, np.ndarray] = {}
        self.stores: dict[int, dict[int, np.ndarray]] = {}
        self.shared: dict[int, np.ndarray] = {}
        self.cross_thread = False
        self._loaded: dict[tuple[int, int], np.ndarray] = {}
        self.symbols: dict[str, int] = {}

    # -- operands
    def read(self, operand: str, width: int) -> np.ndarray:
        operand = operand.strip()
        if operand.startswith("%"):
            special = _SPECIAL.match(operand)
            if special:
                kind, axis = special[1], "xyz".index(special[2])
                value = {"tid": (0, 0, 0), "ctaid": self.ctaid, "ntid": self.block,
                         "nctaid": (1 << 20, 1, 1)}[kind][axis]  # fmt: skip
                return np.asarray(value, _UNSIGNED[max(width, 32)]).astype(_UNSIGNED[width])
            if operand not in self.registers:
                raise KeyError(f"register {operand} read before it is written")
            value = self.registers[operand]
            if width == 1:
                return value
            return _bits(value, max(width, value.dtype.itemsize * 8)).astype(_UNSIGNED[width]) \
                if value.dtype.itemsize * 8 != width else value  # fmt: skip
        if operand.startswith("!%"):
            return ~self.read(operand[1:], 1)
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", operand):
            return np.asarray(int(operand[2:], 16), np.uint32)
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", operand):
            return np.asarray(int(operand[2:], 16), np.uint64)
        if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", operand):
            number = int(operand.rstrip("uU"), 0)
            return np.asarray(
                number % (1 << width) if width > 1 else bool(number), _UNSIGNED.get(width, bool)
            )
        if operand in self.symbols:
            return np.asarray(self.symbols[operand], np.uint64).astype(_UNSIGNED[max(width, 32)])
        raise UnknownInstruction(f"operand {operand!r} not understood")

    def write(self, operand: str, value: np.ndarray, width: int, guard=None):
        operand = operand.strip()
        if operand in ("_",):
            return
        value = np.asarray(value)
        value = value if width == 1 else _bits(value, width)
        if guard is not None and operand in self.registers:
            value = np.where(guard, value, self.registers[operand])
        self.registers[operand] = value

    # -- memory
    def parameter_of(self, address: int) -> tuple[int, int]:
        index, offset = divmod(int(address), _POINTER_SPACING)
        return index - 1, offset

    def load(self, address: int, width: int) -> np.ndarray:
        param, offset = self.parameter_of(address)
        if param not in self.inputs:
            raise KeyError(f"a load from parameter {param}, which has no input")
        size = self.itemsizes[param]
        if offset % size or ((width // 8) % size and width // 8 > size):
            raise ValueError(
                f"unaligned load of {width} bits at byte {offset} of parameter {param}"
            )
        first = offset // size
        value = np.asarray(0, np.uint64)
        for k in range(max(1, width // (8 * size))):
            bits = _bits(self._element(param, first + k), 8 * size).astype(np.uint64)
            value = value | (bits << np.uint64(8 * size * k))
        return value.astype(_UNSIGNED[width])

    def _element(self, param: int, element: int) -> np.ndarray:
        key = (param, element)
        if key not in self._loaded:
            source = self.inputs[param]
            self._loaded[key] = source(element) if callable(source) else np.asarray(source)
        return self._loaded[key]

    def store(self, address: int, value: np.ndarray, width: int):
        param, offset = self.parameter_of(address)
        size = self.itemsizes.get(param)
        if size is None:
            raise KeyError(f"a store to parameter {param}, which is not listed as an output")
        first = offset // size
        value = np.asarray(value).astype(np.uint64)
        for k in range(max(1, width // (8 * size))):
            part = (value >> np.uint64(8 * size * k)) & np.uint64((1 << (8 * size)) - 1)
            self.stores.setdefault(param, {})[first + k] = part.astype(_UNSIGNED[8 * size])


def _address(machine: _Machine, operand: str) -> int:
    """[%rd1 + 16] or [name] -> an address (uniform: a Python int)."""
    inner = operand.strip()[1:-1].replace(" ", "")
    match = re.fullmatch(r"(%\w+)?([+-]\d+)?", inner)
    if not match:
        raise UnknownInstruction(f"address {operand!r} not understood")
    base = machine.read(match[1], 64) if match[1] else np.asarray(0, np.uint64)
    if base.ndim and base.size > 1:
        if np.any(base != base.flat[0]):
            raise ValueError(f"address {operand} differs between inputs: not a uniform address")
        base = base.flat[0]
    return int(base) + int(match[2] or 0)


def _vector(operand: str) -> list[str]:
    operand = operand.strip()
    if operand.startswith("{"):
        return [part.strip() for part in operand[1:-1].split(",")]
    return [operand]


def _float_type(parts: list[str]) -> str | None:
    for part in reversed(parts):
        if part in ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"):
            return part
    return None


def _as_float(bits: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(bits).astype(_UNSIGNED[_WIDTH[kind]]).view(_FLOAT[kind])


def _to_bf16(value: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, rounded to nearest even (cvt.rn.bf16.f32); nan stays nan."""
    bits = np.asarray(value, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan = np.isnan(np.asarray(value, np.float32))
    return np.where(nan, (bits >> np.uint64(16)) | np.uint64(0x40), rounded).astype(np.uint16)


def _compare(op: str, a, b) -> np.ndarray:
    unordered = np.isnan(a) | np.isnan(b) if np.asarray(a).dtype.kind == "f" else False
    base = op[:-1] if op.endswith("u") and op not in ("nu",) and len(op) == 3 else op
    table = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
             "hi": np.greater, "hs": np.greater_equal}  # fmt: skip
    if op == "num":
        return ~unordered
    if op == "nan":
        return unordered
    if base not in table:
        raise UnknownInstruction(f"comparison {op!r}")
    result = table[base](a, b)
    if op.endswith("u") and len(op) == 3:  # equ, neu, ltu, ...: true when unordered
        return result | unordered
    return result & ~unordered if base == "ne" else result  # ne is ordered in PTX


# The documented error bounds of approximate instructions (PTX ISA 9.1): in ulp of the correctly
# rounded float32 result, and relative.
APPROX_ULP = {"ex2": 2, "div.full": 2, "div.approx": 2}
APPROX_RELATIVE = {"rsqrt": 2.0**-22.9}


def _approx_ulp(exact32: np.ndarray, direction: int, ulps: int) -> np.ndarray:
    """The correctly rounded result moved ``ulps`` float32 ulps in ``direction``; a result of 0,
    ±inf or nan stays (the ISA's tables of special values give them exactly, and an ulp of 0
    would turn an underflow, exp(−10⁴), into a subnormal no GPU returns)."""
    if not direction:
        return exact32
    special = (exact32 == 0) | ~np.isfinite(exact32)
    return np.where(special, exact32, _ulp_steps(exact32, direction * ulps)).astype(np.float32)


def _approx_relative(exact: np.ndarray, direction: int, bound: float) -> np.ndarray:
    """float32 within ``bound`` relative of exact, as far as the bound allows in ``direction``."""
    if not direction:
        return round_f32(exact)
    moved = round_f32(exact * (1 + direction * bound))
    too_far = np.abs(moved.astype(np.float64) - exact) > bound * np.abs(exact)
    return np.where(too_far, _ulp_steps(moved, -direction), moved).astype(np.float32)


def evaluate_ptx(
    ptx: str,
    inputs: dict[int, np.ndarray | Callable[[int], np.ndarray]],
    outputs: dict[int, int],
    scalars: dict[int, int | float] | None = None,
    *,
    approx: int = 0,
    contract: bool = False,
    block: tuple[int, int, int] = (128, 1, 1),
    ctaid: tuple[int, int, int] = (0, 0, 0),
    max_steps: int = 2_000_000,
) -> Result:
    """Run ``ptx``'s entry as thread 0 of block ``ctaid`` over arrays of inputs.

    inputs: {pointer parameter index: the values every element holds (an array of fp32, fp16
    values, or of bf16 bit patterns as uint16), or a function element index -> that array};
    outputs: {pointer parameter index: element size in bytes} (the size of an input listed here
    too); scalars: {parameter index: value}
    of the integer and float parameters. approx: −1, 0, +1, where the approximate instructions'
    results sit in their documented bounds; contract: fuse ``mul.f32`` + ``add/sub.f32`` (no
    rounding modifier) into one fma, as ptxas may. Returns what was stored where (:class:`Result`).
    """
    _, params, instructions = _parse(ptx)
    by_index = {index: (name, kind, pointer) for name, (index, kind, pointer) in params.items()}
    # element sizes: the outputs' as given; an input's from its values (a function's: from its
    # element 0, unless outputs gives the size)
    itemsizes = dict(outputs)
    for p, v in inputs.items():
        if p not in itemsizes:
            itemsizes[p] = np.asarray(v(0) if callable(v) else v).dtype.itemsize
    machine = _Machine(params, inputs, scalars or {}, itemsizes, approx, block, ctaid)
    # module-level arrays (Triton's shared memory, `global_smem`): addresses of their own, far from
    # the parameters' (a shared-memory address is an offset in the block's shared space)
    declared = re.findall(r"\.(?:shared|global)\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)\s*\[", ptx)
    machine.symbols = {name: (k + 1) << 32 for k, name in enumerate(declared)}
    labels = {ins.operands[0]: i for i, ins in enumerate(instructions) if ins.opcode == "label:"}
    fused = _contractions(instructions) if contract else {}
    pc, steps = 0, 0
    with np.errstate(all="ignore"):
        while pc < len(instructions):
            ins = instructions[pc]
            pc += 1
            steps += 1
            if steps > max_steps:
                raise RuntimeError("too many steps: a loop that does not end?")
            if ins.opcode == "label:":
                continue
            guard = None
            if ins.predicate is not None:
                guard = machine.read(ins.predicate, 1)
                if guard.ndim == 0 or guard.size == 1:
                    if not bool(guard.flat[0]):
                        continue
                    guard = None
            if ins.opcode.startswith("bra"):
                if guard is not None:
                    raise ValueError(f"a branch that differs between inputs (PTX line {ins.line})")
                pc = labels[ins.operands[0]]
                continue
            if ins.opcode in ("ret", "exit"):
                break
            _execute(machine, ins, guard, by_index, fused.get(id(ins)))
    return Result(machine.stores, machine.cross_thread, steps)


def _contractions(instructions) -> dict[int, tuple[str, str, str, bool]]:
    """{id(add or sub): (mul's a, mul's b, the other operand, whether the product is negated)}
    for every add.f32 / sub.f32 without a rounding modifier with an operand from a mul.f32
    without one: the pairs ptxas may fuse into one fma."""
    products = {}
    for ins in instructions:
        if ins.opcode in ("mul.f32", "mul.ftz.f32") and ins.predicate is None:
            products[ins.operands[0]] = (ins.operands[1], ins.operands[2])
    fused = {}
    for ins in instructions:
        if ins.opcode not in ("add.f32", "sub.f32") or ins.predicate is not None:
            continue
        _, a, b = ins.operands
        if a in products:
            fused[id(ins)] = (*products[a], b, False, ins.opcode == "sub.f32")
        elif b in products:
            fused[id(ins)] = (*products[b], a, ins.opcode == "sub.f32", False)
    return fused


def _execute(m: _Machine, ins: _Instruction, guard, params, fused):
    parts = ins.opcode.split(".")
    op = parts[0]
    ops = ins.operands
    ftz = "ftz" in parts
    kind = _float_type(parts)

    def f32(operand):
        value = _as_float(m.read(operand, 32), "f32")
        return _flush(value) if ftz else value

    def out_f32(value):
        value = np.asarray(value, np.float32)
        m.write(ops[0], _flush(value) if ftz else value, 32, guard)

    # ---- fp32 arithmetic
    if kind == "f32" and op in ("add", "sub", "mul", "fma", "mad", "div", "neg", "abs", "min",
                                "max", "ex2", "rsqrt", "rcp", "sqrt", "lg2", "sin", "cos",
                                "tanh") and not any(p in parts for p in ("sat",)):  # fmt: skip
        rounding = [p for p in parts if p in ("rn", "rz", "rm", "rp")]
        if rounding and rounding != ["rn"]:
            raise UnknownInstruction(f"{ins.opcode}: only round-to-nearest is implemented")
        if op in ("add", "sub") and fused is not None:
            ma, mb, other, negate_product, negate_other = fused
            product_a = -f32(ma) if negate_product else f32(ma)
            addend = -f32(other) if negate_other else f32(other)
            return out_f32(fma_f32(product_a, f32(mb), addend))
        if op in ("add", "sub", "mul"):
            a, b = f32(ops[1]).astype(np.float64), f32(ops[2]).astype(np.float64)
            result = a + b if op == "add" else a - b if op == "sub" else a * b
            return out_f32(round_f32(result))
        if op in ("fma", "mad"):
            if op == "mad" and "rn" not in parts:
                raise UnknownInstruction(f"{ins.opcode}: mad.f32 without .rn")
            return out_f32(fma_f32(f32(ops[1]), f32(ops[2]), f32(ops[3])))
        if op == "neg":
            return out_f32(-f32(ops[1]))
        if op == "abs":
            return out_f32(np.abs(f32(ops[1])))
        if op in ("min", "max"):
            a, b = f32(ops[1]), f32(ops[2])
            pick = np.fmin if op == "min" else np.fmax  # PTX: a nan operand gives the other
            return out_f32(pick(a, b))
        if op == "div":
            a, b = f32(ops[1]).astype(np.float64), f32(ops[2]).astype(np.float64)
            exact = round_f32(a / b)
            if "rn" in parts:
                return out_f32(exact)
            mode = "full" if "full" in parts else "approx" if "approx" in parts else None
            if mode is None:
                raise UnknownInstruction(ins.opcode)
            return out_f32(_approx_ulp(exact, m.approx, APPROX_ULP[f"div.{mode}"]))
        if op == "ex2" and "approx" in parts:
            exact = round_f32(np.exp2(f32(ops[1]).astype(np.float64)))
            return out_f32(_approx_ulp(exact, m.approx, APPROX_ULP["ex2"]))
        if op == "rsqrt" and "approx" in parts:
            a = f32(ops[1]).astype(np.float64)
            exact = 1.0 / np.sqrt(a)
            return out_f32(_approx_relative(exact, m.approx, APPROX_RELATIVE["rsqrt"]))
        raise UnknownInstruction(f"{ins.opcode}: no documented error bound recorded here")

    # ---- half types: conversions, compare, abs
    if op == "cvt":
        return _convert(m, ins, parts, guard)
    if op == "abs" and kind in ("bf16x2", "f16x2", "bf16", "f16"):
        mask = {"bf16x2": 0x7FFF7FFF, "f16x2": 0x7FFF7FFF, "bf16": 0x7FFF, "f16": 0x7FFF}[kind]
        width = _WIDTH[kind]
        return m.write(ops[0], m.read(ops[1], width) & _UNSIGNED[width](mask), width, guard)

    if op == "setp":
        return _setp(m, ins, parts, guard)
    if op == "selp":
        width = _WIDTH[parts[-1]]
        choice = m.read(ops[3], 1)
        return m.write(
            ops[0], np.where(choice, m.read(ops[1], width), m.read(ops[2], width)), width, guard
        )
    if op == "mov":
        return _move(m, ins, parts, guard)
    if op == "ld":
        return _load(m, ins, parts, guard, params)
    if op == "st":
        return _store(m, ins, parts, guard)
    if op in ("bar", "membar", "fence"):
        return None
    if op == "shfl":  # every thread holds what this one does: the partner's value is its own
        m.cross_thread = True
        m.write(ops[0], m.read(ops[1], 32), 32, guard)
        return None
    if op == "ldmatrix":  # a fragment of other threads' shared-memory rows: cross-thread
        m.cross_thread = True
        for target in _vector(ops[0]):
            m.write(target, np.asarray(0, np.uint32), 32, guard)
        return None
    if op in ("and", "or", "xor", "not") and parts[-1] == "pred":
        values = [m.read(o, 1) for o in ops[1:]]
        result = {"and": lambda: values[0] & values[1], "or": lambda: values[0] | values[1],
                  "xor": lambda: values[0] ^ values[1], "not": lambda: ~values[0]}[op]()  # fmt: skip
        return m.write(ops[0], result, 1, guard)
    return _integer(m, ins, parts, guard)


def _convert(m: _Machine, ins, parts, guard):
    ops = ins.operands
    types = [p for p in parts[1:] if p in _WIDTH]
    if len(types) != 2:
        raise UnknownInstruction(ins.opcode)
    to, source = types
    if to in ("bf16x2", "f16x2") and source == "f32":  # a -> upper half, b -> lower half
        half = (
            (lambda v: _to_bf16(v))
            if to == "bf16x2"
            else (lambda v: np.asarray(v, np.float32).astype(np.float16).view(np.uint16))
        )
        high = half(_as_float(m.read(ops[1], 32), "f32")).astype(np.uint32)
        low = half(_as_float(m.read(ops[2], 32), "f32")).astype(np.uint32)
        return m.write(ops[0], (high << np.uint32(16)) | low, 32, guard)
    if to == "f32" and source in ("bf16", "f16"):
        return m.write(ops[0], _as_float(m.read(ops[1], 16), source).astype(np.float32), 32, guard)
    if source == "f32" and to in ("bf16", "f16"):
        value = _as_float(m.read(ops[1], 32), "f32")
        bits = _to_bf16(value) if to == "bf16" else value.astype(np.float16).view(np.uint16)
        return m.write(ops[0], bits, 16, guard)
    if to == "f32" and source == "f32":  # round to an integral value (cvt.rmi: floor, ...)
        modes = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
        mode = next((p for p in parts if p in modes), None)
        if mode is None:
            raise UnknownInstruction(ins.opcode)
        value = _as_float(m.read(ops[1], 32), "f32")
        value = _flush(value) if "ftz" in parts else value
        return m.write(ops[0], modes[mode](value).astype(np.float32), 32, guard)
    if source == "f32" and to in ("s32", "u32"):  # to an integer, saturating; nan gives 0
        modes = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
        mode = next((p for p in parts if p in modes), None)
        if mode is None:
            raise UnknownInstruction(ins.opcode)
        value = modes[mode](_as_float(m.read(ops[1], 32), "f32").astype(np.float64))
        low, high = (-(2**31), 2**31 - 1) if to == "s32" else (0, 2**32 - 1)
        value = np.where(np.isnan(value), 0, np.clip(value, low, high)).astype(np.int64)
        return m.write(ops[0], _bits(value, 64).astype(np.uint32), 32, guard)
    if to == "f32" and source in ("s32", "u32", "s64", "u64"):
        if "rn" not in parts:
            raise UnknownInstruction(ins.opcode)
        width = _WIDTH[source]
        integer = m.read(ops[1], width)
        integer = integer.view(_SIGNED[width]) if source[0] == "s" else integer
        exact = integer.astype(np.float64)  # 32-bit integers are exact; 64-bit: one more rounding
        if width == 64:
            raise UnknownInstruction(f"{ins.opcode}: 64-bit integers to float not implemented")
        return m.write(ops[0], round_f32(exact), 32, guard)
    if source[0] in "sub" and to[0] in "sub":  # integer widths: truncate or extend
        value = m.read(ops[1], _WIDTH[source])
        if source[0] == "s":
            value = value.view(_SIGNED[_WIDTH[source]]).astype(np.int64)
        return m.write(
            ops[0],
            _bits(np.asarray(value).astype(np.int64), 64).astype(_UNSIGNED[_WIDTH[to]]),
            _WIDTH[to],
            guard,
        )
    raise UnknownInstruction(ins.opcode)


def _setp(m: _Machine, ins, parts, guard):
    ops = ins.operands
    comparison, kind = parts[1], parts[-1]
    boolean = parts[2] if len(parts) > 3 and parts[2] in ("and", "or", "xor") else None
    if boolean:
        raise UnknownInstruction(f"{ins.opcode}: setp with a boolean combination")
    width = _WIDTH[kind]
    if kind in ("bf16x2", "f16x2"):
        half = kind[:-2]
        a, b = m.read(ops[1], 32), m.read(ops[2], 32)
        low = _compare(
            comparison,
            _as_float(a & np.uint32(0xFFFF), half),
            _as_float(b & np.uint32(0xFFFF), half),
        )
        high = _compare(
            comparison, _as_float(a >> np.uint32(16), half), _as_float(b >> np.uint32(16), half)
        )
        first, second = ops[0].split("|")
        m.write(first, low, 1, guard)
        return m.write(second, high, 1, guard)
    a, b = m.read(ops[1], width), m.read(ops[2], width)
    if kind in ("f32", "f64", "f16", "bf16"):
        a, b = _as_float(a, kind), _as_float(b, kind)
        if "ftz" in parts:
            a, b = _flush(a), _flush(b)
    elif kind[0] == "s":
        a, b = (
            a.view(_SIGNED[width]) if a.ndim else a.astype(_SIGNED[width]),
            b.astype(_UNSIGNED[width]).view(_SIGNED[width]) if b.ndim else b.astype(_SIGNED[width]),
        )
        a = np.asarray(a)
    return m.write(ops[0], _compare(comparison, a, b), 1, guard)


def _move(m: _Machine, ins, parts, guard):
    ops = ins.operands
    width = _WIDTH[parts[-1]]
    target, source = ops[0].strip(), ops[1].strip()
    if target.startswith("{"):  # unpack: the first register takes the low bits
        names = _vector(target)
        value = m.read(source, width).astype(np.uint64)
        size = width // len(names)
        for k, name in enumerate(names):
            part = (value >> np.uint64(size * k)) & np.uint64((1 << size) - 1)
            m.write(name, part.astype(_UNSIGNED[size]), size, guard)
        return None
    if source.startswith("{"):  # pack
        names = _vector(source)
        size = width // len(names)
        value = np.asarray(0, np.uint64)
        for k, name in enumerate(names):
            value = value | (m.read(name, size).astype(np.uint64) << np.uint64(size * k))
        return m.write(target, value.astype(_UNSIGNED[width]), width, guard)
    if width == 1:
        return m.write(target, m.read(source, 1), 1, guard)
    return m.write(target, m.read(source, width), width, guard)


def _load(m: _Machine, ins, parts, guard, params):
    ops = ins.operands
    kind = parts[-1]
    width = _WIDTH[kind]
    if "param" in parts:
        name = ops[1].strip()[1:-1].strip()
        index, _, pointer = m.params[name]
        if pointer:
            value = np.asarray((index + 1) * _POINTER_SPACING, np.uint64)
        else:
            if index not in m.scalars:
                raise KeyError(f"parameter {index} ({name}) needs a value in scalars")
            value = m.scalars[index]
            if isinstance(value, float):
                value = np.asarray(value, np.float32 if width == 32 else np.float64)
            else:
                value = np.asarray(value, np.int64)
        target_width = width
        if kind[0] == "s" and m.registers.get(ops[0]) is None and ops[0].startswith("%rd"):
            target_width = 64  # ld.param.s32 into a 64-bit register: sign-extended
        return m.write(
            ops[0],
            _bits(
                np.asarray(value).astype(np.int64) if value.dtype.kind in "iu" else value,
                target_width if value.dtype.kind in "iu" else width,
            ),
            target_width,
            guard,
        )
    vector = next((int(p[1:]) for p in parts if re.fullmatch(r"v[248]", p)), 1)
    targets = _vector(ops[0])
    if len(targets) != vector:
        raise UnknownInstruction(f"{ins.opcode}: {len(targets)} targets for a v{vector} load")
    address = _address(m, ops[1])
    if "shared" in parts:
        for k, target in enumerate(targets):
            key = address + k * width // 8
            if key not in m.shared:
                m.cross_thread = True
            m.write(target, m.shared.get(key, np.asarray(0, _UNSIGNED[width])), width, guard)
        return None
    if "global" not in parts:
        raise UnknownInstruction(ins.opcode)
    for k, target in enumerate(targets):
        m.write(target, m.load(address + k * width // 8, width), width, guard)
    return None


def _store(m: _Machine, ins, parts, guard):
    ops = ins.operands
    width = _WIDTH[parts[-1]]
    address = _address(m, ops[0])
    values = _vector(ops[1])
    if guard is not None:
        raise ValueError(f"a store whose predicate differs between inputs (line {ins.line})")
    for k, source in enumerate(values):
        value = m.read(source, width)
        if "shared" in parts:
            m.shared[address + k * width // 8] = value
        elif "global" in parts:
            m.store(address + k * width // 8, value, width)
        else:
            raise UnknownInstruction(ins.opcode)


def _integer(m: _Machine, ins, parts, guard):
    ops = ins.operands
    op, kind = parts[0], parts[-1]
    if kind not in _WIDTH or kind.startswith(("f", "bf")):
        raise UnknownInstruction(ins.opcode)
    width = _WIDTH[kind]
    signed = kind[0] == "s"
    mask = (1 << width) - 1

    def value(operand, w=width, as_signed=signed):
        v = m.read(operand, w).astype(np.uint64 if w == 64 else np.int64)
        if as_signed:
            v = _bits(v, w).view(_SIGNED[w]).astype(np.int64)
        return v

    def out(result, w=width):
        result = np.asarray(result)
        if result.dtype.kind == "i":
            result = (
                result.astype(np.int64).view(np.uint64)
                if result.ndim
                else np.asarray(int(result) & ((1 << 64) - 1), np.uint64)
            )
        m.write(
            ops[0],
            (result.astype(np.uint64) & np.uint64((1 << w) - 1)).astype(_UNSIGNED[w]),
            w,
            guard,
        )

    if op in ("add", "sub", "and", "or", "xor", "shl", "shr", "min", "max", "div", "rem"):
        if op in ("shl", "shr"):
            a, shift = value(ops[1]), m.read(ops[2], 32).astype(np.int64)
            shift = np.minimum(shift, width)
            if op == "shl":
                return out(_py_shift(a.astype(np.uint64), shift, left=True, width=width))
            if signed:
                return out(np.right_shift(a.astype(np.int64), np.minimum(shift, 63)))
            return out(
                np.right_shift(a.astype(np.uint64), shift.astype(np.uint64))
                if width == 64
                else np.right_shift(a, shift)
            )
        a, b = value(ops[1]), value(ops[2])
        if op == "add":
            return out(a + b)
        if op == "sub":
            return out(a - b)
        if op in ("and", "or", "xor"):
            a, b = m.read(ops[1], width), m.read(ops[2], width)
            return out({"and": a & b, "or": a | b, "xor": a ^ b}[op])
        if op in ("min", "max"):
            return out(np.minimum(a, b) if op == "min" else np.maximum(a, b))
        if op in ("div", "rem"):  # C semantics: the quotient truncates toward zero
            quotient = np.trunc(np.asarray(a, np.float64) / np.asarray(b, np.float64)).astype(
                np.int64
            )
            if np.any(np.abs(np.asarray(a)) >= 2**52):
                raise UnknownInstruction(f"{ins.opcode}: operands beyond 2^52")
            return out(quotient if op == "div" else a - quotient * b)
    if op == "not":
        return out(~m.read(ops[1], width))
    if op == "neg":
        return out(-value(ops[1]))
    if op == "mul" or op == "mad":
        mode = parts[1]
        a, b = value(ops[1]), value(ops[2])
        if mode == "wide":
            product = (
                a.astype(np.int64) * b.astype(np.int64)
                if signed
                else a.astype(np.uint64) * b.astype(np.uint64)
            )
            if op == "mad":
                product = product + value(ops[3], 2 * width)
            return out(product, 2 * width)
        if mode == "lo":
            product = a * b
            if op == "mad":
                product = product + value(ops[3])
            return out(product)
        if mode == "hi" and width == 32:
            product = (
                a.astype(np.int64) * b.astype(np.int64)
                if signed
                else a.astype(np.uint64) * b.astype(np.uint64)
            )
            return out(product >> (np.int64(32) if signed else np.uint64(32)))
        raise UnknownInstruction(ins.opcode)
    if op == "bfe" and width == 32:
        a = value(ops[1])
        start, length = m.read(ops[2], 32).astype(np.int64), m.read(ops[3], 32).astype(np.int64)
        if signed:
            raise UnknownInstruction(ins.opcode)
        field = (a.astype(np.uint64) >> start.astype(np.uint64)) & (
            (np.uint64(1) << length.astype(np.uint64)) - np.uint64(1)
        )
        return out(field)
    del mask
    raise UnknownInstruction(ins.opcode)


def _py_shift(a, shift, left, width):
    result = np.left_shift(a.astype(np.uint64), np.asarray(shift).astype(np.uint64))
    return np.where(np.asarray(shift) >= width, np.uint64(0), result)


# ---------------------------------------------------------------- the gate: the project's kernels


def fusable_pairs(ptx: str) -> int:
    """How many mul.f32 + add/sub.f32 pairs without rounding modifiers ptxas may fuse."""
    return len(_contractions(_parse(ptx)[2]))


def approximate_instructions(ptx: str) -> list[str]:
    """The opcodes with a documented error rather than a rounding (ex2.approx, div.full, ...)."""
    return sorted({i.opcode for i in _parse(ptx)[2]
                   if "approx" in i.opcode.split(".") or "full" in i.opcode.split(".")})  # fmt: skip


def run_all_ways(ptx: str, inputs, outputs, scalars) -> list[tuple[str, Result]]:
    """The runs the gate takes the worst of: approximate results exact and at either end of their
    bound (where the PTX has approximate instructions), each with and without ptxas's fusion
    of mul + add pairs (where it has such pairs)."""
    approx = (0, 1, -1) if approximate_instructions(ptx) else (0,)
    contract = (False, True) if fusable_pairs(ptx) else (False,)
    runs = []
    for a in approx:
        for c in contract:
            label = f"approx={a:+d}" + (", ptxas fuses mul+add" if c else "")
            runs.append((label, evaluate_ptx(ptx, inputs, outputs, scalars, approx=a, contract=c)))
    return runs


def _discover(
    ptx: str, kernel: str, itemsize: int, pointers, outputs, scalars
) -> dict[int, list[int]]:
    """{pointer parameter: the elements thread 0 loads from it, in order} (one-element inputs)."""
    seen: dict[int, list[int]] = {}

    def recorder(param, value):
        def source(element):
            seen.setdefault(param, [])
            if element not in seen[param]:
                seen[param].append(element)
            return value

        return source

    inputs = {p: recorder(p, np.asarray([v], dtype)) for p, (v, dtype) in pointers.items()}
    evaluate_ptx(ptx, inputs, outputs, scalars)
    return seen


def ulp32(y: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|y − reference| in fp32 ulp at the reference (the spacing of float32 there, subnormals
    included), as tests/oracles.py counts; 0 where both are the same inf or nan."""
    reference = np.asarray(reference, np.float64)
    y = np.asarray(y, np.float64)
    with np.errstate(all="ignore"):
        spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
        error = np.abs(y - reference) / spacing
    # beyond the largest float32 (and its half ulp) the correctly rounded result is ±inf
    overflow = np.abs(reference) >= 2.0**128 * (1 - 2.0**-25)
    same = (y == reference) | (np.isnan(y) & np.isnan(reference))
    same |= overflow & (y == np.copysign(np.inf, reference))
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


def half_ulp(y: np.ndarray, reference: np.ndarray, dtype: str) -> np.ndarray:
    """|y − reference| in ulp of the half type at the reference (subnormals included)."""
    mantissa_bits, min_exponent = {"fp16": (10, -14), "bf16": (7, -126)}[dtype]
    reference = np.asarray(reference, np.float64)
    with np.errstate(all="ignore"):
        exponent = np.floor(np.log2(np.maximum(np.abs(reference), 2.0**min_exponent)))
        error = np.abs(np.asarray(y, np.float64) - reference) / 2.0 ** (exponent - mantissa_bits)
    same = (y == reference) | (np.isnan(y) & np.isnan(reference))
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


@dataclasses.dataclass
class Finding:
    """One checked quantity of one variant: its worst error over the runs, where, and its bound."""

    variant: str
    quantity: str
    worst: float
    at: float
    bound: float
    run: str
    over: int  # points over the bound (in the worst run)
    points: int

    @property
    def ok(self) -> bool:
        return self.worst <= self.bound

    def line(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        return (f"{mark} {self.variant:32} {self.quantity:22} {self.worst:7.3f} (bound {self.bound:g})"
                f" at x = {self.at!r}, {self.over} of {self.points} over [{self.run}]")  # fmt: skip


def _worst(variant, quantity, runs, errors_of, x, bound) -> Finding:
    """The worst error over the runs: errors_of(result) -> an array of errors (bound units)."""
    best = None
    for label, result in runs:
        errors = errors_of(result)
        i = int(np.argmax(errors))
        finding = Finding(variant, quantity, float(errors[i]), float(x[i]), bound, label,
                          int((errors > bound).sum()), int(errors.size))  # fmt: skip
        if best is None or finding.worst > best.worst:
            best = finding
    return best


def _arguments(kernel: str, **values) -> dict[int, int | float]:
    """{parameter index: value} from argument names (tools/compile_kernels.py's ARGUMENTS: the
    kernel's runtime arguments in order, as the PTX numbers its parameters)."""
    names = list(_compile_tool().ARGUMENTS[kernel])
    return {names.index(name): value for name, value in values.items()}


def _index(kernel: str, name: str) -> int:
    return list(_compile_tool().ARGUMENTS[kernel]).index(name)


def _padded(parts: int, *arrays: np.ndarray) -> list[np.ndarray]:
    """The arrays repeated at their start up to a multiple of ``parts`` points, so that every
    element of a thread holds as many (the parameter kernels add elements up)."""
    extra = -len(arrays[0]) % parts
    return [np.concatenate([a, a[:extra]]) for a in arrays]


def _chunks(x: np.ndarray, elements: list[int]) -> dict[int, np.ndarray]:
    """The inputs split over the elements thread 0 holds: element k takes one contiguous part."""
    return dict(zip(elements, np.array_split(x, len(elements)), strict=True))


def _gather(result: Result, param: int, elements: list[int], dtype) -> np.ndarray:
    return np.concatenate([result.values(param, e, dtype) for e in elements])


def _half_storage(dtype: str):
    return {"fp32": np.float32, "fp16": np.float16, "bf16": "bf16"}[dtype]


def _to_storage(x32: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values (exactly representable in dtype) as the arrays evaluate_ptx loads."""
    if dtype == "bf16":
        return (np.asarray(x32, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.asarray(x32).astype(np.float16 if dtype == "fp16" else np.float32)


def check_pointwise(ptx: str, name: str, dtype: str, form: str, backward: bool, x32: np.ndarray,
                    value: np.ndarray, slope: np.ndarray) -> list[Finding]:  # fmt: skip
    """y = f(x) (or dx = 1·f'(x)) of the pointwise kernel against (value, slope) of x."""
    storage = _to_storage(x32, dtype)
    x, grad, out = (_index("pointwise", n) for n in ("x_ptr", "grad_ptr", "out_ptr"))
    pointers = {x: (storage[0], storage.dtype)} | (
        {grad: (storage[0], storage.dtype)} if backward else {}
    )
    scalars = _arguments("pointwise", n=1 << 20, beta=1.0, seed=0, offset=0)
    size = storage.dtype.itemsize
    elements = _discover(ptx, "pointwise", size, pointers, {out: size}, scalars)[x]
    storage, x32, value, slope = _padded(len(elements), storage, x32, value, slope)
    parts = _chunks(storage, elements)
    inputs = {x: parts.__getitem__}
    if backward:
        ones = {
            e: np.ones_like(p) if dtype != "bf16" else np.full_like(p, 0x3F80)
            for e, p in parts.items()
        }
        inputs[grad] = ones.__getitem__
    runs = run_all_ways(ptx, inputs, {out: size}, scalars)
    reference = slope if backward else value
    quantity = "slope" if backward else "value"
    if dtype == "fp32":
        bound = 2.0

        def errors(r):
            return ulp32(_gather(r, out, elements, np.float32), reference)
    else:
        bound = 1.0

        def errors(r):
            return half_ulp(_gather(r, out, elements, _half_storage(dtype)), reference, dtype)

    return [_worst(name, f"{form} {quantity}", runs, errors, x32, bound)]


def check_geglu(ptx: str, name: str, backward: bool, a32, b32, value_b, slope_b) -> list[Finding]:
    """GEGLU fp32: a·gelu(b) ≤ 2.5 ulp; backward (grad 1): gelu(b) ≤ 2, a·gelu'(b) ≤ 2.5."""
    half = 512
    x, grad, out = (_index("geglu", n) for n in ("x_ptr", "grad_ptr", "out_ptr"))
    pointers = {x: (np.float32(0), np.float32)} | (
        {grad: (np.float32(1), np.float32)} if backward else {}
    )
    names = _compile_tool().ARGUMENTS["geglu"]
    scalars = _arguments("geglu", half=half, **({"outer": 1} if "outer" in names else {}))
    seen = _discover(ptx, "geglu", 4, pointers, {out: 4}, scalars)[x]
    a_elements = [e for e in seen if e < half]
    b_elements = [e + half for e in a_elements]
    assert sorted(seen) == sorted(a_elements + b_elements), seen
    a32, b32, value_b, slope_b = _padded(len(a_elements), a32, b32, value_b, slope_b)
    a_parts, b_parts = _chunks(a32, a_elements), _chunks(b32, b_elements)
    x_parts = a_parts | b_parts
    inputs = {x: x_parts.__getitem__}
    if backward:
        inputs[grad] = lambda e: np.ones_like(a_parts[e])
    runs = run_all_ways(ptx, inputs, {out: 4}, scalars)
    a64 = a32.astype(np.float64)
    if not backward:
        return [_worst(name, "a·gelu(b)", runs,
                       lambda r: ulp32(_gather(r, out, a_elements, np.float32), a64 * value_b), b32, 2.5)]  # fmt: skip
    return [
        _worst(name, "da = gelu(b)", runs,
               lambda r: ulp32(_gather(r, out, a_elements, np.float32), value_b), b32, 2.0),
        _worst(name, "db = a·gelu'(b)", runs,
               lambda r: ulp32(_gather(r, out, b_elements, np.float32), a64 * slope_b), b32, 2.5),
    ]  # fmt: skip


def check_parametric(ptx: str, name: str, kernel: str, member: str, backward: bool,
                     x32: np.ndarray, oracle) -> list[Finding]:  # fmt: skip
    """bias-GELU (gelu of the fp32 sum x + b within 2 ulp) or generalized GELU ((6 + 3z²) ulp)
    through the rows or the columns kernel: thread 0 of program 0, its first loop step in bounds
    (the later steps masked), per-channel parameters."""
    if member == "bias_exact":
        p_values, q_values = np.float32([-1.5, 0.0, 0.25, 3.0]), np.float32([1.0] * 4)
    else:  # generalized: μ, σ
        p_values, q_values = np.float32([0.5, 0.0, -1.0, 2.0]), np.float32([1.5, 1.0, 1.9, 0.7])
    if kernel == "rows":  # one row of 512 (a program's block), channel 0
        scalars = _arguments(kernel, rows=1, row_length=512, channels=1, chunks=1, p_stride=1,
                             q_stride=1)  # fmt: skip
    else:  # 8 rows (a block of rows) of 64 channels
        scalars = _arguments(kernel, rows=8, channels=64, p_stride=1, q_stride=1)

    def channel(element):
        return 0 if kernel == "rows" else element % 64

    x, grad, out, p_ptr, q_ptr, partial = (
        _index(kernel, n) for n in ("x_ptr", "grad_ptr", "out_ptr", "p_ptr", "q_ptr", "partial_ptr")
    )
    pointers = {x: (np.float32(0), np.float32), p_ptr: (np.float32(0), np.float32),
                q_ptr: (np.float32(1), np.float32)} | ({grad: (np.float32(1), np.float32)} if backward else {})  # fmt: skip
    outputs = {out: 4, partial: 4}
    elements = _discover(ptx, kernel, 4, pointers, outputs, scalars)[x]
    (x32,) = _padded(len(elements), x32)
    parts = _chunks(x32, elements)
    inputs = {
        x: parts.__getitem__,
        p_ptr: lambda c: p_values[c % 4],
        q_ptr: lambda c: q_values[c % 4],
    }
    if backward:
        inputs[grad] = lambda e: np.ones_like(parts[e])
    runs = run_all_ways(ptx, inputs, outputs, scalars)
    p = np.concatenate([np.full(parts[e].size, p_values[channel(e) % 4]) for e in elements])
    q = np.concatenate([np.full(parts[e].size, q_values[channel(e) % 4]) for e in elements])
    x_order = np.concatenate([parts[e] for e in elements])
    quantity = "slope" if backward else "value"
    if member == "bias_exact":
        h = (x_order + p.astype(np.float32)).astype(np.float64)  # fl(x + b), as the kernel adds
        value, slope = oracle(h)
        reference = slope if backward else value
        return [_worst(name, f"gelu(x + b) {quantity}", runs,
                       lambda r: ulp32(_gather(r, out, elements, np.float32), reference), x_order, 2.0)]  # fmt: skip
    from scipy import special

    x64, mu, sigma = x_order.astype(np.float64), p.astype(np.float64), q.astype(np.float64)
    z = (x64 - mu) / sigma
    cdf, density = special.ndtr(z), np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    allowed = 6 + 3 * z * z  # test_generalized_gelu_fp32_bound: z rounded three times
    if not backward:
        return [_worst(name, "x·Φ(z) / (6 + 3z²)", runs,
                       lambda r: ulp32(_gather(r, out, elements, np.float32), x64 * cdf) / allowed,
                       x_order, 1.0)]  # fmt: skip
    terms = np.abs(cdf) + np.abs(x64 * density / sigma)
    limit = allowed * terms * 2.0**-24 + 16 * 2.0**-149

    def errors(r):
        return np.abs(_gather(r, out, elements, np.float32) - (cdf + x64 * density / sigma)) / limit

    return [_worst(name, "dx / its bound", runs, errors, x_order, 1.0)]


def check_elementwise(ptx: str, name: str, x32: np.ndarray, reference: np.ndarray,
                      quantity: str, bound: float = 2.0) -> Finding:  # fmt: skip
    """An fp32 elementwise kernel of any origin (inductor's, for the compiled route): the pointer
    parameters it loads are its inputs (x; a second one is the incoming gradient, given 1), the
    one it stores is its output, elements matched by index; every integer parameter (the numel)
    is 2^20. Errors in fp32 ulp of ``reference``."""
    _, params, _ = _parse(ptx)
    pointers = sorted(i for i, _, pointer in params.values() if pointer)
    scalars = {i: 1 << 20 for i, _, pointer in params.values() if not pointer}
    loaded: dict[int, list[int]] = {}

    def recorder(param):
        def source(element):
            if element not in loaded.setdefault(param, []):
                loaded[param].append(element)
            return np.float32([1.0])

        return source

    inputs = {p: recorder(p) for p in pointers}
    probe = evaluate_ptx(ptx, inputs, dict.fromkeys(pointers, 4), scalars)
    stored = [p for p in probe.stores]
    if len(stored) != 1 or not 1 <= len(loaded) <= 2:
        raise ValueError(
            f"{name}: loads {sorted(loaded)}, stores {stored}: not an elementwise kernel"
        )
    (out,) = stored
    inputs_order = sorted(loaded)
    elements = loaded[inputs_order[0]]
    (x32, reference) = _padded(len(elements), x32, reference)
    parts = _chunks(x32, elements)
    ones = {e: np.ones_like(v) for e, v in parts.items()}
    candidates = [inputs_order] if len(inputs_order) == 1 else [inputs_order, inputs_order[::-1]]
    # which loaded parameter is x and which the gradient: the wiring for which gelu'(0) = 1/2
    # and gelu'(10) = 1 (a probe of mathematical constants, not of the code's accuracy)
    wiring = candidates[0]
    if len(candidates) > 1:
        probe_x = {e: np.float32([0.0, 10.0]) for e in elements}
        for order in candidates:
            inputs = {order[0]: probe_x.__getitem__, order[1]: lambda e: np.float32([1.0, 1.0])}
            got = evaluate_ptx(ptx, inputs, {out: 4}, scalars).values(out, elements[0])
            if np.allclose(got, [0.5, 1.0]):
                wiring = order
    inputs = {wiring[0]: parts.__getitem__}
    if len(wiring) > 1:
        inputs[wiring[1]] = ones.__getitem__
    runs = run_all_ways(ptx, inputs, {out: 4}, scalars)
    return _worst(name, quantity, runs,
                  lambda r: ulp32(_gather(r, out, elements, np.float32), reference), x32, bound)  # fmt: skip


# the issue's worst points (x = −0.327: 2.24 ulp with the product's error counted twice)
ISSUE_POINTS = np.float32([-0.327, -0.32700002, -0.3269999, -0.7517915, -1.832145, -13.242505])


def fp32_set(sample: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, value, slope): the dense grid and the spot sets of tests/library/_fp32_gelu_sets.py
    (every ``sample``-th point of each when given; the issue's points always), float64 / mpmath
    oracles."""
    for path in (ROOT / "tests", ROOT / "tests" / "library"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    import _fp32_gelu_sets as sets
    from oracles import gelu_oracle, mpmath_oracle

    x_dense, value_dense, slope_dense = sets.dense_grid()
    if sample:
        x_spot = sets._spot_points()[::sample]
        value_spot, slope_spot = mpmath_oracle(x_spot.astype(np.float64), digits=50)
        x_dense, value_dense, slope_dense = (
            v[::sample] for v in (x_dense, value_dense, slope_dense)
        )
    else:
        x_spot, value_spot, slope_spot = sets.spot_sets()
    value_issue, slope_issue = mpmath_oracle(ISSUE_POINTS.astype(np.float64), digits=50)
    del gelu_oracle
    return (np.concatenate([ISSUE_POINTS, x_dense, x_spot]),
            np.concatenate([value_issue, value_dense, value_spot]),
            np.concatenate([slope_issue, slope_dense, slope_spot]))  # fmt: skip


def half_set(dtype: str, form: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every finite value of the half type (as float32), and its float64 oracle values."""
    from oracles import gelu_oracle

    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    x = (
        (bits.astype(np.uint32) << 16).view(np.float32)
        if dtype == "bf16"
        else bits.view(np.float16).astype(np.float32)
    )
    x = x[np.isfinite(x)]
    approximate = {"exact": "none", "tanh": "tanh", "sigmoid": "sigmoid"}[form]
    value, slope = gelu_oracle(x.astype(np.float64), approximate)
    return x, value, slope


# The accuracy-bearing variants the gate evaluates (names of tools/compile_kernels.py variants):
# the fp32 exact GELU in every kernel that uses it, and the half types' three forms.
FP32_VARIANTS = (
    "pointwise fp32 exact fwd", "pointwise fp32 exact bwd",
    "geglu fp32 exact fwd", "geglu fp32 exact bwd",
    "rows fp32 bias_exact fwd", "rows fp32 bias_exact bwd",
    "columns fp32 bias_exact fwd", "columns fp32 bias_exact bwd",
    "rows fp32 generalized fwd", "rows fp32 generalized bwd",
    "columns fp32 generalized fwd", "columns fp32 generalized bwd",
)  # fmt: skip
HALF_VARIANTS = tuple(
    f"pointwise {dtype} {form} {step}"
    for dtype in ("bf16", "fp16") for form in ("exact", "tanh", "sigmoid") for step in ("fwd", "bwd")
)  # fmt: skip
SM80_VARIANTS = ("pointwise fp32 exact fwd", "pointwise fp32 exact bwd")


@functools.cache
def _variants() -> dict[str, tuple]:
    return {v[0]: v for v in _compile_tool().variants()}


@functools.cache
def _compile_tool():
    sys.path.insert(0, str(ROOT / "tools"))
    import compile_kernels

    return compile_kernels


def compiled_ptx(name: str, arch: int = 90) -> str:
    """The PTX of a tools/compile_kernels.py variant for sm_<arch> (Triton's default options, the
    launch's constants; Triton caches the compiled kernel)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Triton 3.9 warns that its fp-fusion default will change
        return _compile_tool().compile_triton(_variants()[name], arch).asm["ptx"]


def check_variant(name: str, arch: int, sets: dict) -> list[Finding]:
    """Compile one variant for sm_<arch> and evaluate its PTX on the accuracy set of its kind."""
    _, kernel, dtype, config = _variants()[name]
    ptx = compiled_ptx(name, arch)
    label = f"{name} sm_{arch}"
    backward = config["BACKWARD"]
    if dtype != "fp32":
        form = name.split()[2]
        x, value, slope = sets[(dtype, form)]
        return check_pointwise(ptx, label, dtype, form, backward, x, value, slope)
    x, value, slope = sets["fp32"]
    if kernel == "pointwise":
        return check_pointwise(ptx, label, "fp32", "exact", backward, x, value, slope)
    if kernel == "geglu":
        a = np.random.default_rng(31).uniform(-4, 4, x.size).astype(np.float32)
        return check_geglu(ptx, label, backward, a, x, value, slope)
    from oracles import gelu_oracle

    member = name.split()[2]
    return check_parametric(ptx, label, kernel, member, backward, x, gelu_oracle)


def gate(variants=None, arch80=SM80_VARIANTS, sample: int | None = None) -> list[Finding]:
    """Every accuracy-bearing variant (sm_90) and ``arch80`` (sm_80) on the accuracy sets."""
    os.environ["TRITON_INTERPRET"] = "0"
    for path in (ROOT / "src", ROOT / "tests", ROOT / "tests" / "library"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    chosen = list(variants) if variants is not None else [*FP32_VARIANTS, *HALF_VARIANTS]
    sets: dict = {}
    if any(" fp32 " in n for n in [*chosen, *arch80]):
        sets["fp32"] = fp32_set(sample)
    for n in chosen:
        if " fp32 " not in n:
            dtype, form = n.split()[1:3]
            sets.setdefault((dtype, form), half_set(dtype, form))
    findings = []
    for arch, names in ((90, chosen), (80, list(arch80))):
        for n in names:
            findings += check_variant(n, arch, sets)
    return findings


def loaded_inputs(ptx: str) -> list[int]:
    """The pointer parameters a kernel loads from (one-element inputs, integer parameters 2^20)."""
    _, params, _ = _parse(ptx)
    pointers = sorted(i for i, _, pointer in params.values() if pointer)
    scalars = {i: 1 << 20 for i, _, pointer in params.values() if not pointer}
    loaded: set[int] = set()

    def recorder(param):
        def source(element):
            loaded.add(param)
            return np.float32([1.0])

        return source

    evaluate_ptx(ptx, {p: recorder(p) for p in pointers}, dict.fromkeys(pointers, 4), scalars)
    return sorted(loaded)


def route_gate(sample: int | None = None, arch: int = 90) -> list[Finding]:
    """The exact GELU's compiled CUDA route on fp32 (inductor's Triton kernels, through
    tools/inductor_kernels.py): the value within 2 ulp; the slope within 2 ulp where the kernel
    reads a gradient of its own (given 1). Where the generated backward reads one tensor for both
    the gradient and x (the route traced with grad = x), it computes x·gelu'(x): held to 2.5 ulp
    (gelu' to 2, and the product's rounding) where gelu'(x) is a normal number (below, the
    slope's own subnormal rounding, times |x|, is what a product shows)."""
    os.environ["TRITON_INTERPRET"] = "0"
    sys.path.insert(0, str(ROOT / "tools"))
    import inductor_kernels

    x, value, slope = fp32_set(sample)
    findings = []
    for backward in (False, True):
        for name, ptx in inductor_kernels.compiled_route_ptx("fp32", backward, arch):
            label = f"route fp32 {'bwd' if backward else 'fwd'} sm_{arch}"
            if not backward:
                findings.append(check_elementwise(ptx, label, x, value, "exact value"))
            elif len(loaded_inputs(ptx)) == 2:
                findings.append(check_elementwise(ptx, label, x, slope, "exact slope"))
            else:
                normal = np.abs(slope) >= 2.0**-126
                product = x[normal].astype(np.float64) * slope[normal]
                findings.append(
                    check_elementwise(ptx, label, x[normal], product, "x·gelu'(x), grad = x", 2.5)
                )
            findings[-1].variant = f"{label} {name[:40]}"
    return findings


def missing_compiler() -> str | None:
    """Why the gate cannot compile here (no Triton, no ptxas), or None."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    missing = [t for t in _compile_tool().missing_tools() if t == "ptxas"]
    return f"this Triton ships no {missing[0]}" if missing else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="the variants whose name contains this")
    parser.add_argument("--sample", type=int, default=None,
                        help="every N-th point of the fp32 sets (default: all)")  # fmt: skip
    parser.add_argument("--no-sm80", action="store_true", help="sm_90 only")
    parser.add_argument("--json", help="write the findings to this file")
    parser.add_argument(
        "--route",
        action="store_true",
        help="also the compiled route's kernels (tools/inductor_kernels.py)",
    )
    args = parser.parse_args()
    os.environ["TRITON_INTERPRET"] = "0"
    if reason := missing_compiler():
        print(f"{reason}: nothing to compile with")
        return 2
    names = [n for n in (*FP32_VARIANTS, *HALF_VARIANTS) if args.only in n]
    arch80 = () if args.no_sm80 else [n for n in SM80_VARIANTS if args.only in n]
    start = time.time()
    findings = gate(names, arch80, args.sample)
    if args.route:
        try:
            findings += route_gate(args.sample)
        except Exception as error:  # the route's generator is another tool: report, keep the rest
            what = f"{type(error).__name__}: {error}"[:300]
            findings.append(Finding("route fp32 (not generated)", what, math.inf, math.nan,
                                    2.0, "", 0, 0))  # fmt: skip
    for f in findings:
        print(f.line())
    print(f"{len(findings)} checks, {sum(not f.ok for f in findings)} over their bound, "
          f"{time.time() - start:.0f} s")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(f) for f in findings], indent=1))
    return 0 if all(f.ok for f in findings) else 1


if __name__ == "__main__":
    sys.exit(main())
