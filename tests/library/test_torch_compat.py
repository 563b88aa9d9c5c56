"""The library's private torch API lives in gelus._torch_compat alone, and does there, on the
running torch, what each function says (run per supported torch version: docs/ARCHITECTURE.md)."""

import re
from pathlib import Path

import pytest
import torch

import gelus
from gelus import _torch_compat as compat

LIBRARY = Path(gelus.__file__).parent
PRIVATE = re.compile(r"\btorch\._(?!_)")  # torch._C, torch._dynamo …; not torch.__version__


def _library_files():
    return sorted(LIBRARY.glob("*.py")) + sorted((LIBRARY / "_triton").glob("*.py"))


def test_no_private_torch_api_outside_the_compat_module():
    found = [
        f"{path.relative_to(LIBRARY)}:{number}: {line.strip()}"
        for path in _library_files()
        if path.name != "_torch_compat.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "private torch API outside gelus/_torch_compat.py:\n" + "\n".join(found)


def test_the_scan_sees_the_library():
    names = {p.name for p in _library_files()}
    assert {"_operator.py", "_cuda.py", "_gelu.py", "ops.py"} <= names
    assert PRIVATE.search("torch._C._nn.gelu(x)") and not PRIVATE.search("torch.__version__")


# ---------------------------------------------------------------- each function on this torch


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0, None


def test_below_autograd_records_no_graph():
    x = torch.ones(3, requires_grad=True)
    with compat.below_autograd():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad


def test_functorch_active_only_inside_a_transform():
    seen = []

    def f(t):
        seen.append(compat.functorch_active())
        return t * 2

    assert not compat.functorch_active()
    torch.func.vmap(f)(torch.ones(2, 3))
    torch.func.grad(lambda t: f(t).sum())(torch.ones(3))
    assert seen == [True, True]


def test_dispatch_mode_active_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode  # a test may reach in

    assert not compat.dispatch_mode_active()
    with FakeTensorMode():
        assert compat.dispatch_mode_active()


def test_is_plain():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.ones(3)
    assert compat.is_plain(x) and compat.is_plain(torch.nn.Parameter(x))
    assert not compat.is_plain(FakeTensorMode().from_tensor(x))
    batched = []
    torch.func.vmap(lambda t: batched.append(compat.is_plain(t)) or t)(torch.ones(2, 3))
    assert batched == [False]


def test_function_apply_is_apply_without_binding():
    x = torch.ones(3, requires_grad=True)
    y = compat.function_apply(_Double, (x, 3.0))
    assert torch.equal(y, torch.full((3,), 3.0)) and y.grad_fn is not None
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_has_device_kernel():
    lib_name = "gelus_compat_test"

    @torch.library.custom_op(f"{lib_name}::plain", mutates_args=())
    def plain(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    assert not compat.has_device_kernel(plain, "cpu")
    assert not compat.has_device_kernel(plain, "cuda")
    torch.library.register_kernel(plain, "cuda", lambda x: x.clone() + 1)
    assert compat.has_device_kernel(plain, "cuda") and not compat.has_device_kernel(plain, "cpu")
    # an OpOverload answers through the dispatcher's table
    assert compat.has_device_kernel(torch.ops.aten.gelu.default, "cpu")
    # the registered kernel itself, callable without the dispatcher
    assert compat.registered_kernel(plain, "cpu") is None
    assert torch.equal(compat.registered_kernel(plain, "cuda")(torch.zeros(2)), torch.ones(2))
    assert compat.registered_kernel(torch.ops.aten.gelu.default, "cpu") is None


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_silu_into(approximate):
    x = torch.linspace(-5, 5, 101)
    out = torch.empty_like(x)
    assert compat.gelu_into(x, out, approximate) is out
    assert torch.equal(out, torch.nn.functional.gelu(x, approximate=approximate))
    assert compat.silu_into(x, out) is out and torch.equal(out, torch.nn.functional.silu(x))
