"""Smaller behaviours where the library now does what torch (or Hugging Face) does, or pins where it
chooses to differ: half types of xIELU, forward-over-reverse dtypes, the registry's error for
None, geglu's dim error, channels_last (issue 21, point 4); and torch's own OpInfo tests (op_db)
of the functions gelus replaces, run on gelus's (at the end)."""

import functools
import math

import numpy as np
import pytest
import torch

import gelus
import gelus.functional as G
from oracles import exact, exact_slope, swish_slope, tanh_slope
from oracles import xielu as xielu_oracle


def every_finite(dtype, bound):
    """Every finite value of a 16-bit float type with |x| <= bound."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return bits[torch.isfinite(bits) & (bits.abs() <= bound)]


@pytest.mark.parametrize(
    ("dtype", "bound"),
    # fp16 overflows at 65504: α_p·x² + β·x stays below it for x <= 250
    [(torch.bfloat16, 1e3), (torch.float16, 250.0)],
    ids=str,
)
def test_xielu_half_types_are_computed_in_float32_and_rounded_once(dtype, bound):
    x = every_finite(dtype, bound)
    y = G.xielu(x)
    assert y.dtype == dtype
    expected = xielu_oracle(x.double().numpy())
    error = np.abs(y.double().numpy() - expected)
    # one rounding of the float32 result: within one unit in the last place (2^-8 relative for
    # bf16, 2^-11 for fp16; bf16 in bf16 arithmetic was off by up to 100 %)
    # (and one spacing of the subnormals near zero)
    ulp = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    tiny = 2 * ulp * torch.finfo(dtype).smallest_normal
    assert (error <= ulp * np.abs(expected) + tiny).all()


def test_xielu_module_keeps_torch_promotion_of_its_float32_parameters():
    module = gelus.XIELU()
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    assert module(x).dtype == torch.float32  # [1]-shaped float32 parameters promote, as in torch
    assert G.xielu(x).dtype == torch.bfloat16  # Python-float parameters do not


# ------------------------------------------------------------------------------ jvp of vjp

MEMBERS_0DIM = {
    "gelu": (G.gelu, exact_slope),
    "gelu-accurate": (lambda t: G.gelu(t, accurate=True), exact_slope),
    "gelu-tanh": (lambda t: G.gelu(t, "tanh"), tanh_slope),
    "gelu-sigmoid": (lambda t: G.gelu(t, "sigmoid"), swish_slope(1.702)),
    "silu": (G.silu, swish_slope(1.0)),
    "swish": (lambda t: G.swish(t, 0.5), swish_slope(0.5)),
    "swish-tensor-beta": (lambda t: G.swish(t, torch.tensor(0.5)), swish_slope(0.5)),
    "generalized_gelu": (lambda t: G.generalized_gelu(t, 0.0, 1.0), exact_slope),
    "generalized_gelu-tensor": (
        lambda t: G.generalized_gelu(t, torch.zeros(()), torch.ones(())),
        exact_slope,
    ),
    "bias_gelu": (lambda t: G.bias_gelu(t, torch.zeros(())), exact_slope),
    "bias_gelu-tanh": (lambda t: G.bias_gelu(t, torch.zeros(()), "tanh"), tanh_slope),
    "geglu": (lambda t: G.geglu(torch.stack([torch.ones_like(t), t])).squeeze(0), exact_slope),
}


@pytest.mark.parametrize("name", MEMBERS_0DIM)
def test_forward_over_reverse_keeps_float32_for_a_0dim_input(name):
    """jvp of vjp (op_db's test_jvpvjp): a float32 tangent, as torch's F.gelu gives, equal to
    the second derivative (central difference of the float64 slope oracle)."""
    member, slope = MEMBERS_0DIM[name]
    for value in (-1.3, 0.4, 2.2):
        x = torch.tensor(value)

        def gradient(t):
            y, pull = torch.func.vjp(member, t)
            return pull(torch.ones_like(y))[0]

        primal, tangent = torch.func.jvp(gradient, (x,), (torch.ones(()),))
        assert primal.dtype == tangent.dtype == torch.float32, name
        h = 1e-5
        second = (slope(np.float64(value) + h) - slope(np.float64(value) - h)) / (2 * h)
        assert tangent.item() == pytest.approx(second, rel=1e-4, abs=1e-6), name
        assert primal.item() == pytest.approx(slope(np.float64(value)), rel=1e-5), name


# ------------------------------------------------------------------------------ registry, dims


def test_get_activation_none_is_a_key_error_listing_the_names():
    """Hugging Face's get_activation(None) raises KeyError; its test_get_activation expects it."""
    with pytest.raises(KeyError, match=r"unknown activation None\. Valid names: .*gelu.*silu"):
        gelus.get_activation(None)
    with pytest.raises(ValueError):  # UnknownActivationError is both, as for an unknown name
        gelus.get_activation(None)


@pytest.mark.parametrize(("shape", "dim"), [((4, 6), 5), ((4, 6), -3), ((2, 2, 4), 3)])
def test_geglu_dim_out_of_range_is_torch_index_error(shape, dim):
    x = torch.randn(shape)
    with pytest.raises(IndexError) as ours:
        G.geglu(x, dim)
    with pytest.raises(IndexError) as theirs:
        torch.nn.functional.glu(x, dim)
    assert str(ours.value) == str(theirs.value)
    assert str(ours.value).startswith("Dimension out of range (expected to be in range of [")


# ------------------------------------------------------------------------------ channels_last

CHANNELS_LAST = torch.channels_last


def channels_last_input(channels=8):
    x = torch.randn(2, channels, 3, 5, generator=torch.Generator().manual_seed(0))
    return x.to(memory_format=CHANNELS_LAST).requires_grad_()


def test_stochastic_gelu_training_keeps_channels_last():
    x = channels_last_input()
    y = G.stochastic_gelu(x, True, torch.Generator().manual_seed(1))
    assert y.is_contiguous(memory_format=CHANNELS_LAST)
    (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert grad.is_contiguous(memory_format=CHANNELS_LAST)
    # still x·m with ∂/∂x = m, m in {0, 1}
    mask = grad.detach()
    assert set(mask.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(y.detach(), x.detach() * mask, rtol=0, atol=0)


def test_stochastic_gelu_mask_of_a_contiguous_input_is_unchanged():
    """The mask is drawn in x's memory order: for a contiguous x, as torch.rand draws it."""
    x = torch.randn(64, 32)
    y = G.stochastic_gelu(x, True, torch.Generator().manual_seed(5))
    uniform = torch.rand(x.shape, generator=torch.Generator().manual_seed(5))
    phi = 0.5 * torch.special.erfc(-x.double() / math.sqrt(2))
    expected = torch.where(uniform.double() < phi, x, 0.0)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dim", [1, -3])
def test_geglu_gradient_keeps_channels_last(dim):
    x = channels_last_input()
    y = G.geglu(x, dim)
    assert y.is_contiguous(memory_format=CHANNELS_LAST)
    grad_y = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
    (grad,) = torch.autograd.grad(y, x, grad_y)
    assert grad.is_contiguous(memory_format=CHANNELS_LAST)
    # the values: [grad·gelu(b), grad·a·gelu'(b)] against the float64 oracles
    a, b = x.detach().double().chunk(2, dim=dim)
    gelu_b = torch.from_numpy(exact(b.numpy()))
    slope_b = torch.from_numpy(exact_slope(b.numpy()))
    expected = torch.cat([grad_y.double() * gelu_b, grad_y.double() * a * slope_b], dim=dim)
    torch.testing.assert_close(grad.double(), expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ op_db parity
# torch's own OpInfo entries for the functions gelus replaces (op_db: nn.functional.gelu,
# nn.functional.silu and its complex variant), their sample, reference and error inputs run
# through gelus's function instead of torch's, checked as torch's test suites check an op
# (test_ops.py, test_ops_gradients.py, test_ops_fwd_gradients.py, functorch's test_ops.py and
# test_vmap.py; the test names below are theirs). A check that op_db marks unsupported for the
# op (forward AD of complex SiLU, in-place GELU) is skipped as torch skips it. Where gelus gives a
# value torch's reference does not, the check requires the documented reason: an infinite input,
# where torch and its reference give nan and gelus the function's limit (docs/LIBRARY.md).

OPINFOS = {  # (op_db name, variant) -> gelus's function in its place
    ("nn.functional.gelu", ""): G.gelu,
    ("nn.functional.silu", ""): G.silu,
    ("nn.functional.silu", "complex"): G.silu,
}


@functools.cache
def _opinfo(name, variant):
    pytest.importorskip("expecttest")  # torch.testing._internal imports it (the dev extra)
    from torch.testing._internal.common_methods_invocations import op_db

    (info,) = [op for op in op_db if (op.name, op.variant_test_name) == (name, variant)]
    return info


def _label(info):
    return " ".join(filter(None, (info.name, info.variant_test_name)))


def _dtypes(info):
    """The op's CPU dtypes: (the float64 or complex128 one, the float32 or complex64 one)."""
    complex_ = all(d.is_complex for d in info.supported_dtypes("cpu"))
    return (torch.complex128, torch.complex64) if complex_ else (torch.float64, torch.float32)


def _call(function, sample, x=None):
    return function(sample.input if x is None else x, *sample.args, **sample.kwargs)


def _check_numpy_ref(info, ours):
    """TestCommon.test_numpy_ref: reference inputs against op_db's numpy reference (float64 or
    complex128). Mismatches only at ±inf, where the reference and torch give nan, gelus the
    limit (x → +inf: +inf; x → −inf: 0)."""
    dtype = _dtypes(info)[0]
    checked = 0
    for sample in info.reference_inputs("cpu", dtype):
        actual = _call(ours, sample)
        expected = torch.as_tensor(
            info.ref(sample.input.numpy(), *sample.args, **sample.kwargs), dtype=dtype
        )
        x = sample.input
        differ = ~torch.isclose(actual, expected, rtol=1e-7, atol=1e-7, equal_nan=True)
        if differ.any():
            assert x[differ].isinf().all(), x[differ]  # only infinite inputs differ
            assert expected[differ].isnan().all()
            assert _call(info.op, sample)[differ].isnan().all()  # torch gives nan there too
            limit = torch.where(x[differ].real > 0, x[differ], 0)
            torch.testing.assert_close(actual[differ], limit.to(dtype))
        checked += x.numel()
    assert checked > 0


def _check_dtypes(info, ours):
    """TestCommon.test_dtypes: gelus computes exactly the dtypes op_db claims torch supports
    (the real variants among the real types; complex SiLU the complex ones)."""
    complex_ = _dtypes(info)[0].is_complex
    candidates = (
        [torch.complex64, torch.complex128]
        if complex_
        else [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.bool]
    )
    supported = set()
    for dtype in candidates:
        x = torch.ones(3, dtype=dtype)
        try:
            ours(x)
        except (TypeError, RuntimeError, NotImplementedError):
            continue
        supported.add(dtype)
    assert supported == set(info.supported_dtypes("cpu")) & set(candidates)


def _check_errors(info, ours):
    """TestCommon.test_errors: op_db's error inputs raise torch's error type and message."""
    if info.error_inputs_func is None:
        pytest.skip(f"op_db has no error inputs for {_label(info)}")
    for error in info.error_inputs("cpu"):
        with pytest.raises(error.error_type, match=error.error_regex):
            _call(ours, error.sample_input)


def _check_noncontiguous_samples(info, ours):
    """TestCommon.test_noncontiguous_samples: the same values and gradients for noncontiguous
    copies of the samples (to assert_close's tolerance, as torch's test: a strided loop may round
    differently), and equal to torch's op."""
    grad = info.supports_autograd  # complex SiLU: torch has no autograd for it
    for dtype in _dtypes(info):
        for sample in info.sample_inputs("cpu", dtype, requires_grad=grad):
            expected = _call(ours, sample)
            theirs = _call(info.op, sample)
            torch.testing.assert_close(expected, theirs)
            strided = sample.noncontiguous()
            actual = _call(ours, strided)
            torch.testing.assert_close(actual, expected)
            if grad and expected.numel():
                weights = torch.randn_like(expected)
                (g,) = torch.autograd.grad(expected, sample.input, weights)
                (g_strided,) = torch.autograd.grad(actual, strided.input, weights)
                torch.testing.assert_close(g_strided, g)


def _check_variant_consistency_eager(info, ours):
    """TestCommon.test_variant_consistency_eager: the in-place variant (SiLU's inplace=True)
    gives the out-of-place values, written into its input."""
    if info.inplace_variant is None:
        pytest.skip(f"op_db has no in-place variant of {_label(info)}")
    for sample in info.sample_inputs("cpu", _dtypes(info)[1]):
        expected = _call(ours, sample)
        x = sample.input.clone()
        result = ours(x, *sample.args, inplace=True, **sample.kwargs)
        assert result is x
        torch.testing.assert_close(x, expected, rtol=0, atol=0)


def _gradient_samples(info):
    if not info.supports_autograd:
        pytest.skip(f"op_db: torch has no autograd for {_label(info)}")
    dtype = _dtypes(info)[0]
    return [s for s in info.sample_inputs("cpu", dtype, requires_grad=True) if s.input.numel()]


def _check_fn_grad(info, ours):
    """TestBwdGradients.test_fn_grad: gradcheck in float64 / complex128."""
    for sample in _gradient_samples(info):
        assert torch.autograd.gradcheck(
            lambda x, s=sample: _call(ours, s, x), (sample.input,), fast_mode=True
        )


def _check_fn_gradgrad(info, ours):
    """TestBwdGradients.test_fn_gradgrad: gradgradcheck."""
    if not info.supports_gradgrad:
        pytest.skip(f"op_db: no double backward for {_label(info)}")
    for sample in _gradient_samples(info):
        f = functools.partial(lambda s, x: _call(ours, s, x), sample)
        assert torch.autograd.gradgradcheck(f, (sample.input,), fast_mode=True)


def _check_forward_mode_AD(info, ours):
    """TestFwdGradients.test_forward_mode_AD: gradcheck of forward-mode AD."""
    if not info.supports_forward_ad:
        pytest.skip(f"op_db: torch has no forward AD for {_label(info)}")
    for sample in _gradient_samples(info):
        f = functools.partial(lambda s, x: _call(ours, s, x), sample)
        assert torch.autograd.gradcheck(f, (sample.input,), check_forward_ad=True, fast_mode=True)


def _check_fn_fwgrad_bwgrad(info, ours):
    """TestFwdGradients.test_fn_fwgrad_bwgrad: forward over backward, gradgradcheck."""
    if not info.supports_fwgrad_bwgrad:
        pytest.skip(f"op_db: torch has no forward-over-backward for {_label(info)}")
    for sample in _gradient_samples(info):
        f = functools.partial(lambda s, x: _call(ours, s, x), sample)
        assert torch.autograd.gradgradcheck(
            f,
            (sample.input,),
            check_fwd_over_rev=True,
            check_rev_over_rev=False,
            check_undefined_grad=False,
            fast_mode=True,
        )


def _against_torch(info, transform):
    """``transform(function, sample)`` for gelus's function and torch's op, compared, on the
    float32 (complex64) samples, as functorch's tests compare a transform with a reference."""
    for sample in info.sample_inputs("cpu", _dtypes(info)[1], requires_grad=False):
        if not sample.input.numel():
            continue
        ours = transform(
            functools.partial(_call, OPINFOS[info.name, info.variant_test_name], sample), sample
        )
        theirs = transform(functools.partial(_call, info.op, sample), sample)
        torch.testing.assert_close(ours, theirs)


def _real_only(info):
    if not info.supports_autograd:  # complex SiLU
        pytest.skip(f"op_db: torch has no autograd for {_label(info)}")


def _check_vmap_exhaustive(info, ours):
    """functorch TestVmapOperatorsOpInfo.test_vmap_exhaustive: vmap over a batch of samples."""

    def batched(f, sample):
        x = torch.stack([sample.input, 2 * sample.input, -sample.input])
        return torch.func.vmap(lambda t: f(t))(x)

    _against_torch(info, lambda f, s: batched(lambda t: f(t), s))


def _check_vjp(info, ours):
    """functorch TestOperators.test_vjp."""
    _real_only(info)

    def vjp(f, sample):
        y, pull = torch.func.vjp(f, sample.input)
        return pull(torch.ones_like(y) * 0.7)[0]

    _against_torch(info, vjp)


def _check_vmapvjp(info, ours):
    """functorch TestOperators.test_vmapvjp: per-sample vector-Jacobian products."""
    _real_only(info)

    def vmapvjp(f, sample):
        xs = torch.stack(
            [sample.input, sample.input.flip(0) if sample.input.dim() else -sample.input]
        )
        cotangents = torch.stack(
            [torch.ones_like(sample.input), 0.5 * torch.ones_like(sample.input)]
        )
        return torch.func.vmap(lambda x, c: torch.func.vjp(f, x)[1](c)[0])(xs, cotangents)

    _against_torch(info, vmapvjp)


def _check_jvpvjp(info, ours):
    """functorch TestOperators.test_jvpvjp: forward over reverse."""
    _real_only(info)

    def jvpvjp(f, sample):
        def pullback(x):
            y, pull = torch.func.vjp(f, x)
            return pull(torch.ones_like(y))[0]

        return torch.func.jvp(pullback, (sample.input,), (torch.ones_like(sample.input),))[1]

    _against_torch(info, jvpvjp)


def _check_vjpvjp(info, ours):
    """functorch TestOperators.test_vjpvjp: reverse over reverse."""
    _real_only(info)

    def vjpvjp(f, sample):
        def pullback(x):
            y, pull = torch.func.vjp(f, x)
            return pull(torch.ones_like(y))[0]

        y, pull = torch.func.vjp(pullback, sample.input)
        return pull(torch.ones_like(y))[0]

    _against_torch(info, vjpvjp)


def _check_jvp(info, ours):
    """functorch TestOperators.test_jvp (forward-mode AD through torch.func)."""
    if not info.supports_forward_ad:
        pytest.skip(f"op_db: torch has no forward AD for {_label(info)}")
    _against_torch(info, lambda f, s: torch.func.jvp(f, (s.input,), (torch.ones_like(s.input),))[1])


def _check_normalize_operator_exhaustive(info, ours):
    """test_fx_experimental.py's test_normalize_operator_exhaustive, its FX half: each sample's
    call, symbolically traced, is one node that gives the call's values."""

    class Call(torch.nn.Module):
        def __init__(self, sample):
            super().__init__()
            self.args, self.kwargs = sample.args, sample.kwargs  # constants of the graph

        def forward(self, x):
            return ours(x, *self.args, **self.kwargs)

    for sample in info.sample_inputs("cpu", _dtypes(info)[1]):
        traced = torch.fx.symbolic_trace(Call(sample))
        assert [n.target for n in traced.graph.nodes if n.op == "call_function"] == [ours]
        torch.testing.assert_close(traced(sample.input), _call(ours, sample), rtol=0, atol=0)


OPDB_CHECKS = {
    name.removeprefix("_check_"): check
    for name, check in list(globals().items())
    if name.startswith("_check_")
}


@pytest.mark.parametrize("check", OPDB_CHECKS)
@pytest.mark.parametrize("op", OPINFOS, ids=lambda key: ".".join(filter(None, key)))
def test_op_db(op, check):
    info = _opinfo(*op)
    OPDB_CHECKS[check](info, OPINFOS[op])
