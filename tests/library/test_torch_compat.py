"""The library's private torch API lives in gelus._torch_compat alone, and does there, on the
running torch, what each function says (run per supported torch version: docs/ARCHITECTURE.md)."""

import re
from pathlib import Path

import pytest
import torch

import gelus
from gelus import _torch_compat as compat

LIBRARY = Path(gelus.__file__).parent
TOOLS = LIBRARY.parents[1] / "tools"
# A private torch name: torch._C, torch._dynamo, torch.utils._pytree, torch.ops.aten._foo (not
# torch.__version__); torch's private module imported bare (``from torch import _C``, ``_C.x``); a
# custom op's private fields (op._backend_fns); a private attribute named as a string.
PRIVATE = re.compile(
    r"\btorch(?:\.[A-Za-z]\w*)*\._[A-Za-z]"
    r"|\bfrom torch(?:\.\w+)* import _[A-Za-z]"
    r"|(?<![\w.])_C\."
    r"|\._(?:backend_fns|init_fn|disabled_kernel|abstract_fn|opoverload)\b"
    r"|hasattr\(torch\b[^)]*[\"']_[A-Za-z]"
)


def _scanned_files() -> list[Path]:
    """Every Python file of the package (the library, the harness, the bench) and of tools/,
    and the tools' shell scripts."""
    files = sorted(LIBRARY.rglob("*.py"))
    if TOOLS.is_dir():  # a source checkout (an installed package has no tools/)
        files += sorted(TOOLS.rglob("*.py")) + sorted(TOOLS.rglob("*.sh"))
    return files


def test_no_private_torch_api_outside_the_compat_module():
    # comments and docstrings included: what they name is what a reader will reach for
    found = [
        f"{path}:{number}: {line.strip()}"
        for path in _scanned_files()
        if path != LIBRARY / "_torch_compat.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "private torch API outside gelus/_torch_compat.py:\n" + "\n".join(found)


def test_the_scan_sees_the_library_the_harness_and_the_tools():
    names = {p.relative_to(LIBRARY.parent).as_posix() for p in LIBRARY.rglob("*.py")}
    assert set(LIBRARY.rglob("*.py")) <= set(_scanned_files())
    assert {"gelus/_operator.py", "gelus/_cuda.py", "gelus/_triton/ops.py"} <= names
    assert {"gelus/bench/device_timing.py", "gelus/bench/gpt2_step.py"} <= names
    assert {"gelus/experiments/engines/mlp/stacked.py"} <= names
    if TOOLS.is_dir():
        assert {TOOLS / "gpu_check.py", TOOLS / "inductor_kernels.py"} <= set(_scanned_files())
    private = [
        "torch._C._nn.gelu(x)",
        "import torch._dynamo",
        "from torch._inductor import config",
        "torch.utils._pytree.tree_map",
        "torch.ops.aten._fused_adam_.default",
        "from torch import _C",
        "_C._dispatch_key_for_device('cpu')",
        "op._backend_fns[None] = kernel",
        'hasattr(torch, "_fused_adam_")',
    ]
    public = [
        "torch.__version__",
        "torch.compiler.reset()",
        "torch.library.register_kernel(op, 'cuda', fn)",
        "self._groups = None",
        "gelus._cuda.CUDA_KERNELS",
        "torch.nn.functional.gelu(x)",
    ]
    assert [text for text in private if not PRIVATE.search(text)] == []
    assert [text for text in public if PRIVATE.search(text)] == []


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


def test_default_kernel_as_stands_in_and_is_undone():
    @torch.library.custom_op("gelus_compat_test::stand_in", mutates_args=())
    def stand_in(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    torch.library.register_kernel(stand_in, "cuda", lambda x: x + 1)
    x = torch.zeros(3)
    with compat.default_kernel_as(stand_in, "cuda"):
        assert torch.equal(stand_in(x), torch.ones(3))  # a CPU call runs the CUDA kernel
    assert torch.equal(stand_in(x), x)
    with pytest.raises(ValueError, match="no kernel registered for 'xpu'"):
        compat.default_kernel_as(stand_in, "xpu").__enter__()
    assert torch.equal(stand_in(x), x)


def test_compile_settings_and_counts():
    import torch._dynamo  # a test may reach in: the setting itself

    limit = torch._dynamo.config.recompile_limit
    with compat.compile_settings({"recompile_limit": limit + 7}):
        assert torch._dynamo.config.recompile_limit == limit + 7
    assert torch._dynamo.config.recompile_limit == limit
    with pytest.raises(AttributeError), compat.compile_settings({"no_such_setting": 1}):
        pass

    def broken(x):
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1

    graphs, breaks = compat.compile_counts()
    torch.compile(broken, backend="eager")(torch.ones(3))
    after = compat.compile_counts()
    assert after[0] - graphs == 2 and after[1] - breaks == 1  # two graphs either side of a break


def test_fused_adam_is_adams_update():
    if not compat.has_fused_adam():
        pytest.skip("this torch has no fused Adam kernel")
    generator = torch.Generator().manual_seed(0)
    p, g, m, v = (torch.randn(5, generator=generator, dtype=torch.float64) for _ in range(4))
    v = v.abs()
    lr, beta1, beta2, eps, t = 0.1, 0.9, 0.99, 1e-8, 3
    m_next = beta1 * m + (1 - beta1) * g  # Kingma & Ba, bias-corrected, written out
    v_next = beta2 * v + (1 - beta2) * g * g
    m_hat, v_hat = m_next / (1 - beta1**t), v_next / (1 - beta2**t)
    p_next = p - lr * m_hat / (v_hat.sqrt() + eps)
    params, exp_avg, exp_avg_sq = [p.clone()], [m.clone()], [v.clone()]
    compat.fused_adam_(params, [g], exp_avg, exp_avg_sq, [torch.tensor(float(t))],
                       lr=lr, beta1=beta1, beta2=beta2, eps=eps)  # fmt: skip
    torch.testing.assert_close(exp_avg[0], m_next, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(exp_avg_sq[0], v_next, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(params[0], p_next, rtol=1e-12, atol=1e-14)


@pytest.mark.skipif(torch.cuda.is_available(), reason="fakes a CUDA device in a CPU-only torch")
def test_inductor_fake_cuda_is_an_sm_90_device_and_is_undone():
    pytest.importorskip("triton")
    before = dict(vars(torch.cuda))
    with compat.inductor_fake_cuda(90):
        assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
        assert torch.cuda.get_device_properties(0).multi_processor_count == 132
    assert not torch.cuda.is_available()
    after = vars(torch.cuda)
    assert set(after) == set(before) and all(after[k] is v for k, v in before.items())
