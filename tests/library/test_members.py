"""The one table of members (gelus._members) is complete and is what the project lists: every
public function, module class, registry name, ``torch.ops.gelus`` operator and CUDA kernel is a
member's, and every member's entries exist; a member's name is in at most six files of src/ and
tools/ (its own two, functional, modules, __init__ and the table)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import gelus
import oracles
from gelus import _cuda, _members, _patch, modules
from gelus import functional as G
from gelus.registry import ACTIVATIONS

ROOT = Path(__file__).resolve().parents[2]
TABLE = _members.MEMBERS
# tools/gpu_check.py's fp32_allowed: the bounds docs/NUMERICS.md states
BOUNDS = {"none", "accurate", "tanh", "sigmoid", "swish", "generalized", "exact-product"}


def test_names_are_unique_and_every_public_function_is_a_members():
    assert len({m.name for m in TABLE}) == len(TABLE)
    functions = {n for n in G.__all__ if callable(getattr(G, n))}
    assert {m.functional for m in TABLE if m.functional} == functions


def test_every_module_class_is_a_members_and_the_registry_builds_it():
    classes = {
        name
        for name in modules.__all__
        if isinstance(cls := getattr(modules, name), type)
        and issubclass(cls, nn.Module)
        and name != "GatedMember"  # the gated units' base, not a member
    }
    assert {c for m in TABLE for c in m.modules} == classes
    assert {c for m in TABLE for c in m.modules} <= set(gelus.__all__)
    ours = {n for n, f in ACTIVATIONS.items() if getattr(f, "__module__", "") == modules.__name__}
    assert ours == {m.name for m in TABLE}
    for m in TABLE:
        assert ACTIVATIONS[m.name] is getattr(modules, m.module), m.name


def _gelus_operators() -> set[str]:
    return {n for n in dir(torch.ops.gelus) if hasattr(getattr(torch.ops.gelus, n), "default")}


def test_every_operator_is_a_members_and_resolves():
    declared = [op for m in TABLE for op in m.operators]
    assert len(declared) == len(set(declared))
    assert set(declared) == _gelus_operators()
    for m in TABLE:
        for op in m.operators:
            assert callable(_members.operator(m, op)), (m.name, op)


def test_the_cuda_kernels_are_the_tables():
    expected = {}
    for m in TABLE:
        assert set(m.cuda) <= set(m.operators), m.name  # a kernel for an operator of its own
        for op, path in m.cuda.items():
            expected[_members.operator(m, op)] = _members.resolve(path)
    assert expected == _cuda.CUDA_KERNELS
    assert len(expected) == sum(len(m.cuda) for m in TABLE)


def test_members_with_cuda_kernels_are_gated_and_benched():
    """The instruction gate compiles every member's kernels; the bench times each."""
    keys = [b.key for m in TABLE for b in m.bench]
    assert len(keys) == len(set(keys))
    for m in TABLE:
        if m.cuda:
            assert m.launches or m.kernel, f"{m.name}: CUDA kernels the gate does not compile"
            assert m.bench, f"{m.name}: CUDA kernels the bench does not time"
        for launch in m.launches:
            assert launch.kernel in ("pointwise", "geglu", "rows", "columns"), m.name
            assert launch.sums and set(launch.dtypes) <= set(_members.DTYPES), m.name
        if m.kernel is not None:  # its own file, found without importing it (or Triton)
            assert importlib.util.find_spec(m.kernel.path) is not None, m.kernel.path
            assert set(m.kernel.arguments.values()) <= {"x", "acc", "i32", "i64", "fp32"}
            assert len(m.kernel.traffic) == 2


def test_bench_rows_call_their_member():
    from gelus.bench import kernels

    rows = {c.key: c for c in kernels.candidates() if c.kind == "member"}
    assert list(rows) == [b.key for m in TABLE for b in m.bench]
    x = torch.randn(4, 8)
    for m in TABLE:
        for b in m.bench:
            if not b.params:
                y = rows[b.key].function(x)
                assert y.shape[-1] == (4 if b.doubled_input else 8), b.key


def test_gated_members_halve_their_input():
    x = torch.randn(3, 8)
    for m in TABLE:
        shape = ACTIVATIONS[m.name](**({"num_features": 8} if m.name == "bias_gelu" else {}))(x)
        assert shape.shape == ((3, 4) if m.gated else (3, 8)), m.name


def test_patched_methods_are_the_tables():
    declared = {(p.module, p.cls) for m in TABLE for p in m.patched_methods}
    assert set(_patch._GATES) == declared
    for m in TABLE:
        for p in m.patched_methods:
            method, build = _patch._GATES[(p.module, p.cls)]
            owner = type("Owner", (), {a: 2.0 for a in p.arguments})()
            assert method == p.method and isinstance(build(owner), getattr(modules, m.module))


# the calls whose oracle is the member's at neutral arguments
NEUTRAL = {
    "bias_gelu": lambda x: G.bias_gelu(x, torch.zeros(x.shape[-1], dtype=x.dtype)),
    "stochastic_gelu": lambda x: G.stochastic_gelu(x, training=False),  # its expectation
}


@pytest.mark.parametrize("member", TABLE, ids=lambda m: m.name)
def test_oracle_and_bound_name_something_that_exists(member):
    """The named float64 oracle (tests/oracles.py) agrees with the member at its defaults."""
    assert member.bound is None or member.bound in BOUNDS, member.bound
    if member.oracle is None:
        assert member.functional is None, f"{member.name}: a function with no oracle"
        return
    oracle = getattr(oracles, member.oracle)
    function = NEUTRAL.get(member.name, getattr(G, member.functional))
    x = 3.0 * torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = oracle(x, dim=-1).numpy() if member.gated else oracle(x.numpy())
    np.testing.assert_allclose(function(x).numpy(), want, rtol=1e-12, atol=1e-14)


def _files_naming(*words: str) -> list[str]:
    found = []
    for top in ("src", "tools"):
        for path in sorted((ROOT / top).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if not path.is_file() or "__pycache__" in parts or any(".egg-info" in p for p in parts):
                continue
            if path.suffix not in (".py", ".sh", ".md", ".toml", ".json", ".txt", ".cfg"):
                continue
            text = path.read_text(errors="replace").lower()
            if any(word.lower() in text for word in words):
                found.append(path.relative_to(ROOT).as_posix())
    return found


def test_a_member_is_one_file_and_four_edits():
    """GPT-OSS's gate is named in its own file, its Triton kernel's file, and four edits:
    functional.py, modules.py, __init__.py and the table. Nothing else lists it."""
    assert _files_naming("clamped_swiglu", "ClampedSwiGLU") == [
        "src/gelus/__init__.py",
        "src/gelus/_clamped_swiglu.py",
        "src/gelus/_members.py",
        "src/gelus/_triton/_clamped_swiglu.py",
        "src/gelus/functional.py",
        "src/gelus/modules.py",
    ]
