"""``python -m gelus.bench.gpt2_step`` on a tiny model: eager and compiled rows timed together,
compiled the same way, with their dynamo counts and the ≤ 1.01× verdicts. No timed assertions."""

import pytest
import torch

from gelus._triton import interpreting
from gelus.bench import gpt2_step
from gelus.bench.timing import verdict
from gelus.experiments.activation_spec import ActivationError

TINY = ["--device", "cpu", "--layers", "1", "--width", "32", "--heads", "2", "--vocab", "64",
        "--context", "16", "--batch", "2", "--warmup", "2"]  # fmt: skip


def _table(text: str) -> dict[tuple[str, str], list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 9 and cells[1] in ("eager", "compiled"):
            rows[cells[0], cells[1]] = cells[2:]
    return rows


def test_eager_and_compiled_rows_are_timed_together_and_compiled_alike(capsys):
    # aot_eager: dynamo and AOTAutograd without inductor's C++ compile, to keep the test fast
    argv = [*TINY, "--steps", "2", "--activations", "torch-exact,gelu",
            "--compile-backend", "aot_eager"]  # fmt: skip
    assert gpt2_step.main(argv) == 0
    out = capsys.readouterr().out
    assert "torch.compile({'mode': 'default', 'dynamic': False, 'backend': 'aot_eager'})" in out
    assert "over the forward + loss" in out
    rows = _table(out)
    assert set(rows) == {(a, m) for a in ("torch-exact", "gelu")
                         for m in ("eager", "compiled")}  # fmt: skip
    for (name, mode), cells in rows.items():
        ms, vs_gelu, compiled_vs_eager, seconds, graphs, breaks, recompiles = cells
        assert float(ms) > 0 and float(compiled_vs_eager) > 0
        if name == "torch-exact":
            assert vs_gelu == "1.000"
        if mode == "compiled":  # one graph per row (forward + loss), no break, none while timed
            assert float(seconds) > 0 and (graphs, breaks, recompiles) == ("1", "0", "0")
        else:
            assert (seconds, graphs) == ("—", "—")
    for target in ("gelu ÷ nn.GELU(), eager", "gelu ÷ nn.GELU(), compiled"):
        assert target in out
    assert "gelu_new ÷" not in out  # a target whose rows were not asked for is left out


def test_the_old_compiled_region_is_the_model_alone():
    config = gpt2_step.GPTConfig(layers=1, width=32, heads=2, vocab=64, context=16, batch=2)
    settings = gpt2_step.CompileSettings(scope="model", backend="aot_eager")
    rows, times = gpt2_step.measure(config, ["torch-exact"], ["compiled"], 1, 1, "cpu", settings,
                                    log=lambda message: None)  # fmt: skip
    assert [row.key for row in rows] == ["torch-exact/compiled"] and len(times[rows[0].key]) == 1
    assert rows[0].graphs == 1 and rows[0].graph_breaks == 0


def test_targets_read_paired_rounds_in_each_mode():
    drift = [1.0, 3.0, 2.0, 4.0]
    times = {
        "torch-exact/eager": drift,
        "gelu/eager": [1.005 * d for d in drift],  # met in every round
        "torch-exact/compiled": drift,
        "gelu/compiled": [f * d for f, d in zip([1.0, 1.02, 1.0, 1.02], drift, strict=True)],
        "gelu_new/compiled": [1.05 * d for d in drift],  # missed in every round
    }
    rows = {r["target"]: r for r in gpt2_step.target_rows(times, ["eager", "compiled"])}
    assert set(rows) == {"gelu ÷ nn.GELU(), eager", "gelu ÷ nn.GELU(), compiled",
                         "gelu_new ÷ nn.GELU(), compiled"}  # fmt: skip
    assert rows["gelu ÷ nn.GELU(), eager"]["value"] == pytest.approx(1.005)
    marks = {target: verdict(row) for target, row in rows.items()}
    assert marks == {"gelu ÷ nn.GELU(), eager": "✓", "gelu ÷ nn.GELU(), compiled": "≈",
                     "gelu_new ÷ nn.GELU(), compiled": "✗"}  # fmt: skip


@pytest.mark.parametrize("bad", [["--modes", "fast"], ["--warmup", "0"], ["--steps", "0"]])
def test_bad_options_are_refused(bad, capsys):
    with pytest.raises(SystemExit):
        gpt2_step.main([*TINY, *bad])
    assert bad[0] in capsys.readouterr().err


def test_the_bench_has_no_kernel_route_of_its_own():
    # its rows are torch's two baselines and the registry's public modules, nothing else
    assert gpt2_step.BENCH_ACTIVATIONS == ("torch-tanh", "torch-exact")
    with pytest.raises(ActivationError, match="unknown activation 'triton-exact'"):
        gpt2_step.activation_spec("triton-exact")


@pytest.mark.skipif(
    not interpreting(),
    reason="runs the kernels on CPU tensors: needs TRITON_INTERPRET=1 (tests/conftest.py sets it "
    "without CUDA)",
)
def test_the_gelu_row_takes_the_triton_kernels_on_the_cuda_route():
    # what the "gelu" row runs on a GPU: the public module on the library's CUDA route, here on
    # CPU tensors with the kernels interpreted; the value and gradient against float64 torch
    from gelus.bench.device_timing import cuda_route_on_cpu, stubbed_launches

    module = gpt2_step.make_activation("gelu")
    x = torch.randn(4, 33, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    with cuda_route_on_cpu():
        with stubbed_launches() as launches:
            torch.autograd.grad(module(x).sum(), x)
        y = module(x)
        (grad,) = torch.autograd.grad(y.sum(), x)
    assert launches == ["pointwise_kernel", "pointwise_kernel"]  # forward, backward: the kernels
    reference = torch.nn.functional.gelu(x64)
    torch.testing.assert_close(y.double(), reference, rtol=1e-6, atol=1e-7)
    (reference_grad,) = torch.autograd.grad(reference.sum(), x64)
    torch.testing.assert_close(grad.double(), reference_grad, rtol=1e-6, atol=1e-7)
