"""Every member is an operator (gelus/_operator.py): torch.func, forward-mode AD, gradcheck,
export, TorchScript tracing, the custom operators' registrations, and the device-kernel seam.

The table of members is tests/conftest.py; the compile and ONNX routes have their own files.
"""

import io

import pytest
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vmap

import gelus
from conftest import MEMBERS
from gelus import _gelu, _operator
from oracles import exact_slope

NAMES = list(MEMBERS)


def _finite_difference_jacobian(f, inputs, eps=1e-6):
    """d f(inputs) / d inputs[i] for each i, by float64 central differences: [out..., in...]."""
    out = f(*inputs)
    jacobians = []
    for i, t in enumerate(inputs):
        columns = []
        for j in range(t.numel()):
            step = torch.zeros_like(t).reshape(-1)
            step[j] = eps
            step = step.reshape(t.shape)
            plus = list(inputs)
            minus = list(inputs)
            plus[i], minus[i] = t + step, t - step
            columns.append((f(*plus) - f(*minus)) / (2 * eps))
        jacobians.append(torch.stack(columns, dim=-1).reshape(*out.shape, *t.shape))
    return tuple(jacobians)


@pytest.mark.parametrize("name", NAMES)
def test_torch_func_transforms_agree_with_finite_differences_and_eager(name):
    member = MEMBERS[name]
    f = member.function
    inputs = member.inputs()
    argnums = tuple(range(len(inputs)))
    weights = torch.linspace(0.5, 1.5, f(*inputs).numel(), dtype=torch.float64)

    def loss(*args):
        return (f(*args).reshape(-1) * weights).sum()

    # the eager gradient
    leaves = [t.clone().requires_grad_() for t in inputs]
    eager = torch.autograd.grad(loss(*leaves), leaves)
    for a, b in zip(grad(loss, argnums)(*inputs), eager, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)

    # Jacobians: reverse, forward, finite differences
    numeric = _finite_difference_jacobian(f, inputs)
    for jac in (jacrev(f, argnums)(*inputs), jacfwd(f, argnums)(*inputs)):
        for a, b in zip(jac, numeric, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)
    generator = torch.Generator().manual_seed(3)
    tangents = tuple(torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in inputs)
    _, tangent_out = jvp(f, inputs, tangents)
    expected = sum(
        (j.reshape(tangent_out.numel(), -1) @ t.reshape(-1)).reshape(tangent_out.shape)
        for j, t in zip(numeric, tangents, strict=True)
    )
    torch.testing.assert_close(tangent_out, expected, rtol=1e-6, atol=1e-8)

    # Hessian: forward-over-reverse against finite differences of the eager gradient
    def eager_grad(*args):
        leaves = [t.clone().requires_grad_() for t in args]
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss(*leaves), leaves)])

    blocks = hessian(loss, argnums)(*inputs)
    sizes = [t.numel() for t in inputs]
    h = torch.cat(
        [
            torch.cat([block.reshape(sizes[i], sizes[j]) for j, block in enumerate(row)], 1)
            for i, row in enumerate(blocks)
        ]
    )
    numeric_h = torch.cat(
        [j.reshape(h.shape[0], -1) for j in _finite_difference_jacobian(eager_grad, inputs)], 1
    )
    torch.testing.assert_close(h, numeric_h, rtol=1e-5, atol=1e-7)

    # vmap over a batch of x, and vmap(grad): per-sample values and gradients
    batch = torch.stack([inputs[0], 0.5 * inputs[0], -inputs[0]])
    in_dims = (0,) + (None,) * (len(inputs) - 1)
    per_sample = vmap(f, in_dims=in_dims)(batch, *inputs[1:])
    per_sample_grad = vmap(grad(loss), in_dims=in_dims)(batch, *inputs[1:])
    for k in range(3):
        torch.testing.assert_close(per_sample[k], f(batch[k], *inputs[1:]), rtol=1e-14, atol=1e-16)
        x = batch[k].clone().requires_grad_()
        (expected_grad,) = torch.autograd.grad(loss(x, *inputs[1:]), x)
        torch.testing.assert_close(per_sample_grad[k], expected_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", [n for n in NAMES if len(MEMBERS[n].inputs()) > 1])
def test_vmap_over_parameters(name):
    # the operators' vmap rules align a batched parameter against an unbatched input
    member = MEMBERS[name]
    x, *params = member.inputs()
    batched = [torch.stack([p, 1.5 * p]) for p in params]
    y = vmap(member.function, in_dims=(None,) + (0,) * len(params))(x, *batched)
    for k in range(2):
        torch.testing.assert_close(y[k], member.function(x, *[p[k] for p in batched]))


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_and_gradgradcheck_batched_and_forward_mode(name):
    inputs = tuple(t.requires_grad_() for t in MEMBERS[name].inputs())
    f = MEMBERS[name].function
    assert torch.autograd.gradcheck(
        f, inputs, check_batched_grad=True, check_forward_ad=True, check_batched_forward_grad=True
    )
    assert torch.autograd.gradgradcheck(
        f, inputs, check_batched_grad=True, check_fwd_over_rev=True, check_rev_over_rev=True
    )


def test_forward_mode_ad_with_dual_tensors():
    import torch.autograd.forward_ad as fwAD

    x = torch.linspace(-2.95, 3.05, 7, dtype=torch.float64)  # no kink of relu2, hard_mish
    tangent = torch.ones_like(x)
    for member in MEMBERS.values():
        with fwAD.dual_level():
            out = member.call(fwAD.make_dual(x, tangent))
            derivative = fwAD.unpack_dual(out).tangent
        expected = torch.from_numpy(member.slope(x.numpy()))
        torch.testing.assert_close(derivative, expected, rtol=1e-9, atol=1e-12, msg=member.name)


class _Net(torch.nn.Module):
    """Linear → member (its tensor parameters as nn.Parameters) → sum, in float32."""

    def __init__(self, name):
        super().__init__()
        member = MEMBERS[name]
        generator = torch.Generator().manual_seed(1)
        self.function = member.function
        self.linear = torch.nn.Linear(4, 4)
        params = member.params(torch.float32, generator)
        self.names = tuple(f"param{i}" for i in range(len(params)))
        for name, value in zip(self.names, params, strict=True):
            self.register_parameter(name, torch.nn.Parameter(value))

    def forward(self, x):
        return self.function(self.linear(x), *[getattr(self, name) for name in self.names])


def _step(model, x):
    """One training step's loss and gradients (input, then every parameter by name)."""
    model.zero_grad()
    x = x.clone().requires_grad_()
    loss = (model(x) ** 2).sum()
    loss.backward()
    return loss.detach(), x.grad, {k: p.grad for k, p in model.named_parameters()}


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
@pytest.mark.parametrize("name", NAMES)
def test_export_training_step_equals_eager(name, strict):
    torch.manual_seed(0)
    model = _Net(name)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    exported = torch.export.export(model, (x,), strict=strict)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    if MEMBERS[name].contract:  # the gelus operators themselves, not a decomposition
        assert any(t.startswith("gelus.") for t in targets), targets
    loss, x_grad, grads = _step(model, x)
    module = exported.module()
    exported_loss, exported_x_grad, exported_grads = _step(module, x)
    torch.testing.assert_close(exported_loss, loss, rtol=0, atol=0)
    torch.testing.assert_close(exported_x_grad, x_grad, rtol=0, atol=0)
    for key, value in grads.items():
        torch.testing.assert_close(exported_grads[key], value, rtol=0, atol=0, msg=key)


MODULES = [
    gelus.GELU(),
    gelus.GELU("tanh"),
    gelus.GELU(accurate=True),
    gelus.QuickGELU(),
    gelus.SiLU(),
    gelus.SiLU(inplace=True),
    gelus.Swish(1.5),
    gelus.Swish(learnable=True),
    gelus.GeneralizedGELU(8, mu=0.1, sigma=0.8),
    gelus.StochasticGELU().eval(),
    gelus.BiasGELU(8),
    gelus.GEGLU(),
    gelus.ClampedSwiGLU(),
    gelus.ClampedSwiGLU(limit=2.0, interleaved=False),
    gelus.ClippedGELU(),
    gelus.Laplace(),
    gelus.ReLU2(),
    gelus.SqrtSoftplus(),
    gelus.XIELU(),
    gelus.HardMish(),
]


@pytest.mark.parametrize("module", MODULES, ids=repr)
def test_trace_save_load_keeps_values_gradients_and_edges(module):
    x = torch.cat(
        [torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0]), torch.linspace(-5, 5, 12)]
    ).reshape(2, 8)
    traced = torch.jit.trace(module, (x.clone(),))
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer)
    # (torch's kernels may round the last bit differently for a strided and a contiguous input:
    # GEGLU's traced gate takes the fast path where eager, checking all of x, takes the clamp,
    # which differ by up to the default path's 1.2e-6 absolute error below −3)
    expected = module(x.clone())
    torch.testing.assert_close(loaded(x.clone()), expected, equal_nan=True, rtol=2e-7, atol=1.5e-6)
    assert torch.equal(loaded(x.clone()).signbit(), expected.signbit())
    if not module.inplace:
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        loaded(a).sum().backward()
        module(b).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, equal_nan=True, rtol=2e-7, atol=1.5e-6)


def test_trace_records_the_gelus_operators():
    traced = torch.jit.trace(gelus.GELU("tanh"), (torch.randn(4),))
    assert "gelus::gelu" in {node.kind() for node in traced.graph.nodes()}


@pytest.mark.parametrize("module", MODULES, ids=repr)
def test_script_raises_one_clear_error(module):
    with pytest.raises(gelus.TorchScriptUnsupportedError, match=r"torch\.compile or torch\.export"):
        torch.jit.script(module)
    with pytest.raises(gelus.TorchScriptUnsupportedError) as error:
        torch.jit.script(module)
    assert "trace" not in str(error.value)  # deprecated too (torch 2.15): not a way out


def _opcheck_samples(device="cpu"):
    """(operator, args) for torch.library.opcheck: every gelus operator, every GELU form it takes,
    parameters per channel, 0-dim and of x's whole shape (an operator whose gradients are
    summed to its inputs' shapes returns them unsummed there, where aliasing could hide: each
    output must be a tensor of its own)."""
    ops = torch.ops.gelus
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32, grad=True):
        t = torch.randn(*shape, dtype=dtype, generator=g).to(device)
        return t.requires_grad_(grad)

    def c(*shape, dtype=torch.float32):  # a constant: a gradient, or not differentiated
        return r(*shape, dtype=dtype, grad=False)

    def sigma(*shape, grad=False):
        return c(*shape).abs().add(0.5).requires_grad_(grad)

    samples = [
        (ops.gelu, (r(3, 4), "none", False)),
        (ops.gelu, (r(3, 4), "none", True)),
        (ops.gelu, (r(3, 4, dtype=torch.float64), "tanh", False)),
        (ops.gelu, (r(3, 4, dtype=torch.bfloat16), "sigmoid", False)),
        (ops.gelu_backward, (c(3, 4), c(3, 4), "tanh", False)),
        (ops.gelu_backward, (c(3, 4), c(3, 4), "none", True)),
        (ops.swish, (r(3, 4), 1.5)),
        (ops.swish_backward, (c(3, 4), c(3, 4), -0.5)),
        (ops.swish_tensor, (r(3, 4), r(4))),
        (ops.swish_tensor, (r(3, 4), r(3, 4))),
        (ops.swish_tensor_backward, (c(3, 4), c(3, 4), c(4))),
        (ops.swish_tensor_backward, (c(3, 4), c(3, 4), c(3, 4))),
        (ops.swish_tensor_backward, (c(2, 3, 4), c(3, 4), c(2, 1, 4))),
        (ops.bias_gelu, (r(3, 4), r(4), "none", False)),
        (ops.bias_gelu, (r(3, 4, dtype=torch.bfloat16), r(4), "tanh", False)),
        (ops.bias_gelu, (r(3, 4), r(3, 4), "sigmoid", False)),
        (ops.bias_gelu_backward, (c(3, 4), c(3, 4), c(4), "none", True)),
        (ops.bias_gelu_backward, (c(3, 4), c(3, 4), c(3, 4), "tanh", False)),
        (ops.bias_gelu_grads, (c(3, 4), c(3, 4), c(4), "tanh", False)),
        (ops.bias_gelu_grads, (c(2, 3, 4), c(3, 4), c(2, 1, 4), "none", True)),
        (ops.bias_gelu_grads, (c(3, 4), c(3, 4, dtype=torch.float64), c(3, 4), "none", False)),
        (ops.geglu, (r(3, 4), -1, "none", False)),
        (ops.geglu, (r(4, 3), 0, "tanh", False)),
        (ops.geglu, (r(2, 4), 1, "none", True)),
        (ops.geglu_backward, (c(3, 2), c(3, 4), -1, "sigmoid", False)),
        (ops.geglu_backward, (c(3, 2), c(3, 4), -1, "none", True)),
        (ops.swiglu, (r(3, 4), -1)),
        (ops.swiglu_backward, (c(3, 2), c(3, 4), -1)),
        (ops.reglu, (r(4, 3), 0)),
        (ops.reglu_backward, (c(2, 3), c(4, 3), 0)),
        (ops.clamped_swiglu, (r(3, 4).mul(5).detach().requires_grad_(), 1.702, 7.0, True, -1)),
        (ops.clamped_swiglu, (r(4, 3), 1.0, 0.5, False, 0)),
        (ops.clamped_swiglu, (r(2, 4, 3, dtype=torch.bfloat16), 1.702, 7.0, True, 1)),
        (ops.clamped_swiglu_backward, (c(3, 2), c(3, 4).mul(5), 1.702, 7.0, True, -1)),
        (ops.clamped_swiglu_backward, (c(2, 3), c(4, 3), 1.702, 0.5, False, 0)),
        (ops.generalized_gelu, (r(3, 4), r(4), sigma(4, grad=True))),
        (ops.generalized_gelu, (r(3, 4), r(3, 4), sigma(3, 4, grad=True))),
        (ops.generalized_gelu_backward, (c(3, 4), c(3, 4), c(4), sigma(4))),
        (ops.generalized_gelu_backward, (c(3, 4), c(3, 4), c(3, 4), sigma(3, 4))),
        (ops.generalized_gelu_backward, (c(3, 4), c(3, 4), c(()), sigma(()))),
        (ops.stochastic_gelu, (r(3, 4), torch.tensor([7]))),  # the seed: one int64 element
        (ops.stochastic_gelu_backward, (r(3, 4), c(3, 4), torch.tensor([7]))),
    ]
    # x and the bias of one shape, in every form: dx and dbias are both the unsummed gradient
    for approximate, accurate in [
        ("none", False),
        ("none", True),
        ("tanh", False),
        ("sigmoid", False),
    ]:
        samples.append((ops.bias_gelu_grads, (c(3, 4), c(3, 4), c(3, 4), approximate, accurate)))
    return samples


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="the CUDA kernels' registrations need a GPU"
        ),
    ),
]


def test_opcheck_samples_cover_every_registered_operator():
    registered = {
        name
        for name in dir(torch.ops.gelus)
        if hasattr(getattr(torch.ops.gelus, name), "overloads")
    }
    sampled = {op._qualified_op_name.split("::")[1] for op, _ in _opcheck_samples()}
    assert sampled == registered


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sample", range(len(_opcheck_samples())))
def test_opcheck_schema_fake_kernel_autograd_registration(sample, device):
    op, args = _opcheck_samples(device)[sample]
    result = torch.library.opcheck(op, args)
    assert all(value == "SUCCESS" for value in result.values()), result


def test_bias_gelu_grads_outputs_are_tensors_of_their_own_with_the_composed_values():
    """x.shape == bias.shape: dx and dbias have one value (grad·gelu'(x + b)) but two tensors,
    neither an input; the values against the float64 slope oracle."""
    g = torch.Generator().manual_seed(4)
    grad, x, bias = (torch.randn(3, 4, generator=g) for _ in range(3))
    grad_x, grad_bias = torch.ops.gelus.bias_gelu_grads(grad, x, bias, "none", False)
    pointers = {t.untyped_storage().data_ptr() for t in (grad, x, bias)}
    assert grad_x.untyped_storage().data_ptr() != grad_bias.untyped_storage().data_ptr()
    assert not {t.untyped_storage().data_ptr() for t in (grad_x, grad_bias)} & pointers
    h = (x + bias).double().numpy()
    expected = grad.double() * torch.from_numpy(exact_slope(h))
    torch.testing.assert_close(grad_x.double(), expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(grad_bias, grad_x, rtol=0, atol=0)


def test_operator_schemas_carry_no_internal_hint():
    """A device kernel implements the schema; the default kernels' hints stay out of it."""
    packets = {n: getattr(torch.ops.gelus, n) for n in dir(torch.ops.gelus)}
    packets = {n: p for n, p in packets.items() if hasattr(p, "overloads")}
    assert {"gelu", "stochastic_gelu", "generalized_gelu_backward"} <= set(packets)
    for packet in packets.values():
        for overload in packet.overloads():
            schema = getattr(packet, overload)._schema
            assert "tame" not in [a.name for a in schema.arguments], str(schema)


def test_a_registered_device_kernel_is_what_eager_forward_and_backward_call():
    # The seam for device kernels (docs/ARCHITECTURE.md): register_kernel(op, device, fn).
    calls = []

    def forward(x, approximate="none", accurate=False):  # the schema: no internal hint
        calls.append("forward")
        return _gelu.kernel_forward(x, approximate, accurate)

    def backward(grad, x, approximate="none", accurate=False):
        calls.append("backward")
        return _gelu.kernel_backward(grad, x, approximate, accurate)

    try:
        torch.library.register_kernel("gelus::gelu", "cpu", forward)
        torch.library.register_kernel("gelus::gelu_backward", "cpu", backward)
        x = torch.randn(8, requires_grad=True)
        gelus.functional.gelu(x, "tanh").sum().backward()
        gelus.functional.bias_gelu(x, torch.zeros(8)).sum()  # its own operator: not counted
    finally:
        torch.library.register_kernel("gelus::gelu", "cpu", _gelu.kernel_forward)
        torch.library.register_kernel("gelus::gelu_backward", "cpu", _gelu.kernel_backward)
    assert calls == ["forward", "backward"]


def test_keeping_an_operator_under_compile_is_one_choice_per_member(monkeypatch):
    monkeypatch.setattr(_operator, "OPERATORS_UNDER_COMPILE", {})
    _operator.keep_operator_under_compile("bias_gelu", "cpu")
    _operator.keep_operator_under_compile("bias_gelu", "xpu")
    assert dict(_operator.OPERATORS_UNDER_COMPILE) == {"bias_gelu": {"cpu", "xpu"}}
    with pytest.raises(ValueError, match="no operator gelus::bias-gelu"):
        _operator.keep_operator_under_compile("bias-gelu", "cpu")
    x = torch.zeros(2)
    assert _operator.route(x, "bias_gelu") == "eager"  # the choice concerns compiled graphs


@pytest.mark.slow
def test_compiled_graphs_call_the_operators_on_a_listed_device(monkeypatch):
    # A member that OPERATORS_UNDER_COMPILE lists for a device runs its operators inside the
    # compiled graph (its registered kernels), with no graph break and the same values and
    # gradients; the members not listed compile to their compositions.
    listed = ("gelu", "swish", "bias_gelu", "generalized_gelu", "geglu")
    monkeypatch.setattr(_operator, "OPERATORS_UNDER_COMPILE", {m: {"cpu"} for m in listed})
    torch._dynamo.reset()

    def f(x, bias, mu, sigma):
        return (
            gelus.functional.gelu(x, "tanh")
            + gelus.functional.silu(x)
            + gelus.functional.bias_gelu(x, bias)
            + gelus.functional.generalized_gelu(x, mu, sigma)
            + gelus.functional.geglu(torch.cat([x, x], -1))
        )

    g = torch.Generator().manual_seed(0)
    args = [torch.randn(4, 8, generator=g), torch.randn(8, generator=g)]
    args += [torch.randn(8, generator=g), torch.rand(8, generator=g) + 0.5]
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    results = []
    for fn in (f, compiled):
        leaves = [a.clone().requires_grad_() for a in args]
        y = fn(*leaves)
        y.sum().backward()
        results.append((y.detach(), *(t.grad for t in leaves)))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    torch._dynamo.reset()


def test_eager_calls_skip_the_dispatcher_and_the_import_of_torch_dynamo():
    # No device kernel registered: the eager route calls the default kernels directly, so plain
    # eager use never pays for torch._dynamo (a custom operator's first call imports it, ~2 s).
    import subprocess
    import sys

    code = (
        "import sys, torch, gelus\n"
        "x = torch.randn(8, requires_grad=True)\n"
        "for f in (gelus.GELU(), gelus.SiLU(), gelus.BiasGELU(8), gelus.GEGLU(),\n"
        "          gelus.GeneralizedGELU(8), gelus.Swish(learnable=True)):\n"
        "    f(torch.cat([x, x]) if isinstance(f, gelus.GEGLU) else x).sum().backward()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    import os
    from pathlib import Path

    src = str(Path(gelus.__file__).resolve().parents[1])  # this checkout's code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "False"
