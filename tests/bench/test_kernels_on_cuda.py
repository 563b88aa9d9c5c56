"""`gelus bench kernels --device cuda` code path, run on CPU through Triton's interpreter.

Nothing here is about speed (the interpreter's times are meaningless): the rows, the ratios'
arithmetic, the ulp columns and the command line are checked on tiny sizes.
"""

import argparse
import math
from io import StringIO

import pytest
import torch

from _triton_support import ops, triton_marks
from gelus import cli
from gelus._triton import interpreting
from gelus.bench import kernels_cuda
from gelus.experiments.errors import SettingError

pytestmark = [
    *triton_marks,
    # CPU tensors reach compiled kernels only through the interpreter; on the GPU machine
    # tools/gpu_session.sh runs this file a second time with TRITON_INTERPRET=1.
    pytest.mark.skipif(
        not interpreting(),
        reason="runs the kernels on CPU tensors: needs TRITON_INTERPRET=1 (tests/conftest.py sets "
        "it without CUDA; tools/gpu_session.sh sets it for this file on the GPU machine)",
    ),
]


@pytest.fixture(scope="module")
def rows():
    return kernels_cuda.run([2**11], ("float32", "bfloat16"), rounds=1, device="cpu", log=print)


def test_every_member_measured_with_finite_ratios(rows):
    keys = {r.key for r in rows}
    assert keys == {"copy", "torch-gelu"} | {m.key for m in kernels_cuda.MEMBERS}
    assert len(rows) == 2 * 2 * (2 + len(kernels_cuda.MEMBERS))  # dtypes × input kinds
    for r in rows:
        assert r.seconds > 0 and math.isfinite(r.ratio) and r.ratio > 0
        assert math.isfinite(r.bandwidth) and r.bandwidth > 0


def test_ulp_columns_match_the_kernels_accuracy(rows):
    exact = [r for r in rows if r.key == "gelu"]
    for r in exact:
        assert r.value_ulp is not None and r.slope_ulp is not None
        bound = 0.52 if r.dtype == "float32" else 0.51  # bf16: rounded once from fp32
        assert r.value_ulp <= bound and r.slope_ulp <= bound + 0.5 * (r.dtype == "float32")
    tanh_uniform = [r for r in rows if r.key == "gelu-tanh" and r.inputs == "uniform"]
    assert any(r.value_ulp > 1 for r in tanh_uniform)  # the column can show an error


def test_table_text(rows):
    text = kernels_cuda.format_rows(rows)
    assert "2^11 elements, float32, inputs N(0, 1)" in text
    assert "2^11 elements, bfloat16, inputs uniform [−20, 20]" in text
    for member in kernels_cuda.MEMBERS:
        assert member.label in text


def test_main_prints_the_tables():
    args = argparse.Namespace(device="cpu", sizes="2^10", rounds=1, members="gelu,geglu")
    out = StringIO()
    assert kernels_cuda.main(args, out) == 0
    assert "interpreter" in out.getvalue() and "geglu" in out.getvalue()
    with pytest.raises(SettingError, match="unknown --members"):
        kernels_cuda.main(argparse.Namespace(**{**vars(args), "members": "nope"}), out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_cuda_flag_without_cuda_says_so():
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "kernels", "--device", "cuda"])
    with pytest.raises(SettingError, match="no CUDA device"):
        args.func(args)


def test_ops_loaded():
    assert ops is not None


def test_gpt2_step_runs_on_a_tiny_model(capsys):
    from gelus.bench import gpt2_step

    tiny = ["--device", "cpu", "--layers", "2", "--width", "32", "--heads", "2", "--vocab", "64",
            "--context", "16", "--batch", "2", "--steps", "1", "--warmup", "1", "--modes", "eager",
            "--activations", "torch-tanh,torch-exact,gelu,triton-exact"]  # fmt: skip
    assert gpt2_step.main(tiny) == 0
    table = capsys.readouterr().out
    for name in ("torch-tanh", "torch-exact", "gelu", "triton-exact"):
        assert f"| {name} |" in table
    assert "| torch-exact | " in table and "| 1.000 |" in table


def test_gpt2_triton_activation_matches_torch():
    from gelus.bench.gpt2_step import make_activation

    x = torch.randn(4, 33, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    y = make_activation("triton-exact")(x)
    reference = torch.nn.functional.gelu(x64)
    torch.testing.assert_close(y.double(), reference, rtol=1e-6, atol=1e-7)
    y.sum().backward()
    reference.sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-6, atol=1e-7)
