"""The ONNX route (gelus/_operator.py): the dynamo exporter (opset 20) and onnxruntime.

Exact and tanh GELU export as the ONNX ``Gelu`` op plus the edge fix; the accurate path and the
generalized GELU (and Laplace) use an erfc-free Φ in float64, keeping the negative tail; the
TorchScript-based exporter raises an error that names the dynamo exporter.
"""

import io
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import special

import gelus

pytest.importorskip("onnx", reason="the ONNX tests need onnx (the dev extra installs it)")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript (dev extra)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported models (dev extra)")

pytestmark = pytest.mark.slow

SPECIALS = [math.inf, -math.inf, math.nan, -0.0, 3.4028234663852886e38, -3.4028234663852886e38]
X = torch.cat([torch.tensor([*SPECIALS, 1e20, -1e20]), torch.linspace(-13, 13, 56)]).reshape(4, 16)


def export_and_run(module, x):
    """The module exported by the dynamo exporter, run by onnxruntime: (outputs, op types)."""
    module = module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), dynamo=True, opset_version=20, verbose=False)
    model = program.model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return output, {node.op_type for node in model.graph.node}


def assert_agrees(output, expected, atol, rtol=0.0):
    """Equal infinities, nan where nan, and |onnx − eager| ≤ atol + rtol·|eager| elsewhere."""
    nan = np.isnan(expected)
    assert (np.isnan(output) == nan).all()
    infinite = np.isinf(expected)
    assert (output[infinite] == expected[infinite]).all()
    finite = ~nan & ~infinite
    error = np.abs(output[finite] - expected[finite])
    assert (error <= atol + rtol * np.abs(expected[finite])).all(), error.max()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_exact_and_tanh_gelu_export_as_the_onnx_gelu_op_within_1e6(approximate):
    module = gelus.GELU(approximate)
    output, ops = export_and_run(module, X)
    assert "Gelu" in ops and "Erf" not in ops and "Tanh" not in ops
    with torch.no_grad():
        expected = module(X).numpy()
    assert_agrees(output, expected, atol=1e-6)
    assert np.signbit(output.reshape(-1)[3])  # −0 -> −0


MODULES = [
    gelus.GELU("sigmoid"),
    gelus.QuickGELU(),
    gelus.SiLU(),
    gelus.Swish(1.5),
    gelus.Swish(-0.5),
    gelus.Swish(1.5, learnable=True),
    gelus.BiasGELU(16, approximate="tanh"),
    gelus.GEGLU(),
    gelus.ClampedSwiGLU(),
    gelus.ClippedGELU(),
    gelus.StochasticGELU(),  # eval: the exact GELU
    gelus.ReLU2(),
    gelus.SqrtSoftplus(),
    gelus.XIELU(),
    gelus.HardMish(),
]


@pytest.mark.parametrize("module", MODULES, ids=repr)
def test_every_module_exports_and_agrees_with_eager(module):
    output, _ = export_and_run(module, X)
    with torch.no_grad():
        expected = module.eval()(X).numpy()
    # GEGLU: a·gelu(b), where each side's exact GELU may be off by 1.2e-6 below −3, times |a|
    atol = 13 * 1.2e-6 if isinstance(module, gelus.GEGLU) else 1e-6
    if isinstance(module, gelus.ClampedSwiGLU):  # onnxruntime's σ is ~1e-6 off in absolute
        atol = 8 * 1e-6  # terms in its tail (x·σ(1.702x) → 0 there, not 0 at −10), times |u + 1| ≤ 8
    assert_agrees(output, expected, atol=atol, rtol=3e-7)


@pytest.mark.parametrize(
    "module",
    [
        gelus.GELU(accurate=True),
        gelus.GeneralizedGELU(16, mu=0.0, sigma=1.0),
        gelus.GeneralizedGELU(mu=0.3, sigma=0.7, learnable=False),
    ],
    ids=repr,
)
def test_accurate_and_generalized_gelu_keep_the_negative_tail_in_onnx(module):
    # ONNX has no erfc, and its 1 − Erf would return 0 for most of [−13, −3] (the exporter's
    # erfc decomposition did, before): the erfc-free Φ in float64 keeps the relative accuracy.
    x = torch.linspace(-13, -3, 400).reshape(25, 16)
    output, ops = export_and_run(module, x)
    assert "Erf" not in ops
    mu = getattr(module, "mu", torch.tensor(0.0)).detach().numpy()
    sigma = getattr(module, "sigma", torch.tensor(1.0)).detach().numpy()
    xd = x.double().numpy()
    truth = xd * special.ndtr((xd - mu) / sigma)
    normal = np.abs(truth) >= np.finfo(np.float32).tiny  # below, the fp32 result underflows
    assert normal.sum() > 200 and (output[normal] < 0).all()
    relative = np.abs(output[normal] / truth[normal] - 1)
    with torch.no_grad():
        eager = module(x).numpy()
    eager_relative = np.abs(eager[normal] / truth[normal] - 1)
    # fp32 rounding of the result (accurate: 0.5 ulp); generalized in eager rounds its argument
    assert relative.max() <= max(2.0 * eager_relative.max(), 2**-23)
    # and the edges
    edges, _ = export_and_run(module, X)
    with torch.no_grad():
        assert_agrees(edges, module(X).numpy(), atol=1e-6, rtol=3e-7)


def test_laplace_keeps_its_lower_tail_in_onnx():
    x = torch.linspace(-3, 3, 64).reshape(4, 16)
    output, ops = export_and_run(gelus.Laplace(), x)
    assert "Erf" not in ops
    truth = special.ndtr((x.double().numpy() - 0.707107) / 0.282095)
    np.testing.assert_allclose(output, truth, rtol=1e-5, atol=0)


def test_the_torchscript_exporter_raises_an_error_naming_the_dynamo_exporter():
    with pytest.raises(gelus._operator.LegacyOnnxExportError, match=r"dynamo=True"):
        torch.onnx.export(gelus.GELU(), (X,), io.BytesIO(), dynamo=False)
