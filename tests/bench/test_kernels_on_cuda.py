"""`gelus bench kernels --device cuda` without a GPU: its rows, clocks, ratios and verdicts.

Nothing here is about speed. The bench's code paths run on CPU tensors sent through the library's
CUDA route, with the Triton launches stubbed (fast) or in Triton's interpreter (where a result is
read); the verdicts are checked on synthetic timings. The CUDA clocks (graph capture, events) run
only on a GPU.
"""

import argparse
import json
import math
from io import StringIO

import pytest
import torch

from _triton_support import triton_marks
from gelus import cli
from gelus._triton import interpreting
from gelus.bench import device_timing, kernels_cuda
from gelus.bench import kernels_cuda_report as report
from gelus.bench.cli import kernels_cuda_main
from gelus.bench.timing import verdict
from gelus.experiments.errors import SettingError

pytestmark = triton_marks

needs_interpreter = pytest.mark.skipif(
    not interpreting(),
    reason="runs the kernels on CPU tensors: needs TRITON_INTERPRET=1 (tests/conftest.py sets "
    "it without CUDA; tools/gpu_session.sh sets it for this file on the GPU machine)",
)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")

SIZE = 2**11


@pytest.fixture(scope="module")
def stubbed():
    """Every member at 2^11, fp32 and bf16, 3 rounds, the kernels' launches stubbed."""
    with device_timing.stubbed_launches():
        return kernels_cuda.run(
            [SIZE], ("float32", "bfloat16"), ("normal",), rounds=3, device="cpu", host_calls=2,
            min_seconds=0.0, log=lambda message: None,
        )  # fmt: skip


def test_every_member_is_timed_with_f_gelu_and_its_composition_in_each_round(stubbed):
    assert [(r.dtype, r.key) for r in stubbed] == [
        (dtype, m.key) for dtype in ("float32", "bfloat16") for m in kernels_cuda.MEMBERS
    ]
    for r in stubbed:
        member = next(m for m in kernels_cuda.MEMBERS if m.key == r.key)
        roles = {"member", "F.gelu"} | ({"torch"} if member.composition else set())
        assert set(r.rounds) == roles == set(r.host), r.key
        assert all(len(times) == 3 and min(times) > 0 for times in r.rounds.values())
        assert len(r.ratio("F.gelu")) == 3 and all(math.isfinite(v) for v in r.ratio("F.gelu"))
        assert r.ratio("F.gelu")[1] == r.rounds["member"][1] / r.rounds["F.gelu"][1]
        assert r.method == "wall" and r.copy_seconds > 0


def test_result_tables_name_every_row_and_its_composition(stubbed):
    text = report.format_results(stubbed)
    assert "2^11 elements, float32, inputs N(0, 1): F.gelu fwd+bwd" in text
    assert "2^11 elements, bfloat16, inputs N(0, 1)" in text
    for member in kernels_cuda.MEMBERS:
        assert member.label in text and member.composition_label in text
    assert "F.gelu(x + b), db" in text and "a·F.gelu(b)" in text and "x·σ(βx), dβ" in text


def test_compositions_compute_what_the_members_compute():
    # the bench's torch rows must be the same functions (value and every gradient), or their
    # ratios compare unlike things: float64 on the CPU route, stochastic GELU left out (random)
    case = kernels_cuda.Case.make(SIZE, torch.float64, "normal", "cpu")
    for member in kernels_cuda.MEMBERS:
        if member.composition is None or member.key == "stochastic":
            continue
        got = case.forward_backward(member.call, member.params)()
        want = case.forward_backward(member.composition, member.params)()
        assert len(got) == 1 + len(member.params)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=member.key)


@needs_interpreter
def test_ulp_columns_read_the_public_call_in_the_interpreter():
    with device_timing.cuda_route_on_cpu():
        x = kernels_cuda.Case.make(SIZE, torch.float32, "uniform", "cpu").x
        exact = kernels_cuda._errors(kernels_cuda.MEMBERS[0], x)
        tanh = kernels_cuda._errors(kernels_cuda.MEMBERS[1], x)
    assert max(exact) <= 2.0  # the kernels' bound (2 ulp), well inside what the column can show
    assert tanh[0] > 1  # the tanh form's error over [−20, 20]: the column shows an error


def _result(size, dtype, key, member, gelu, torch_rounds=None, host=1e-5):
    result = kernels_cuda.Result(size, dtype, "normal", key)
    result.rounds = {"member": member, "F.gelu": gelu}
    result.host = {"member": [host] * len(member), "F.gelu": [host] * len(member)}
    if torch_rounds is not None:
        result.rounds["torch"] = torch_rounds
    return result


def test_targets_take_each_rounds_paired_ratio_and_issue_30s_limits():
    # F.gelu drifts 4× across rounds; each row is a fixed multiple of it within a round, so the
    # paired ratios are exact where a ratio of medians would not be.
    drift = [1.0, 2.0, 4.0, 1.5, 3.0, 1.0, 2.5, 4.0]
    times = lambda factor: [d * factor for d in drift]  # noqa: E731
    results = [
        _result(2**28, "float32", "gelu", times(1.08), drift),  # Φ-based fp32: ≤ 1.10 at 2^28
        _result(2**28, "float32", "silu", times(1.08), drift),  # not Φ-based: ≤ 1.05
        _result(2**24, "bfloat16", "silu", times(1.08), drift),  # 2^24: ≤ 1.10
        _result(2**28, "bfloat16", "gelu", times(1.08), drift),  # bf16 at 2^28: ≤ 1.05
        _result(2**20, "float32", "bias-gelu", times(3.0), drift, times(4.0)),  # 0.75 ≤ 0.8
        _result(2**16, "float32", "bias-gelu", times(3.0), drift, times(4.0), host=3.5e-5),
        # GEGLU: half the rounds at 0.7, half at 0.9 of its composition: ≈
        _result(2**20, "float32", "geglu", times(0.7)[:4] + times(0.9)[4:], drift, drift),
    ]
    host = [{"key": "bias-gelu", "label": "bias_gelu (db)", "size": 2**16, "dtype": "float32",
             "launches": 2, "stubbed": [5e-5, 6e-5, 5.5e-5, 7e-5]}]  # fmt: skip
    rows = report.target_rows(results, host)
    found = {(r["target"], r["key"], r["dtype"], r["size"]): r for r in rows}
    member = "member ÷ F.gelu"
    assert found[member, "gelu", "float32", 2**28]["limit"] == 1.10
    assert found[member, "silu", "float32", 2**28]["limit"] == 1.05
    assert found[member, "silu", "bfloat16", 2**24]["limit"] == 1.10
    assert found[member, "gelu", "bfloat16", 2**28]["limit"] == 1.05
    assert found[member, "gelu", "float32", 2**28]["value"] == pytest.approx(1.08)
    marks = {key: verdict(row) for key, row in found.items()}
    assert marks[member, "gelu", "float32", 2**28] == "✓"
    assert marks[member, "silu", "float32", 2**28] == "✗"
    assert marks[member, "silu", "bfloat16", 2**24] == "✓"
    fused = found["fused ÷ the torch it replaces", "bias-gelu", "float32", 2**20]
    assert fused["limit"] == 0.8 and fused["value"] == pytest.approx(0.75) and verdict(fused) == "✓"
    assert ("fused ÷ the torch it replaces", "bias-gelu", "float32", 2**16) not in found
    geglu = found["fused ÷ the torch it replaces", "geglu", "float32", 2**20]
    assert verdict(geglu) == "≈" and geglu["q1"] < 0.8 < geglu["q3"]
    per_channel = found["per-channel member ÷ F.gelu", "bias-gelu", "float32", 2**16]
    assert per_channel["limit"] == 2.0 and verdict(per_channel) == "✗"
    assert per_channel["host_us"] == pytest.approx(35.0)
    assert (
        "per-channel member ÷ F.gelu",
        "geglu",
        "float32",
        2**20,
    ) not in found  # not per channel
    stubbed = found["host µs per fwd+bwd, Triton launches stubbed", "bias-gelu", "float32", 2**16]
    assert stubbed["limit"] == 40.0 and stubbed["value"] == pytest.approx(57.5)
    assert verdict(stubbed) == "✗"
    text = report.format_targets(rows)
    assert "≤0.80: 0.75 ✓ (0.75–0.75)" in text and "host 35 µs" in text
    assert "| 2^24" in text and "| 2^28" in text


def test_an_uncaptured_row_is_marked_with_why():
    rounds = [1e-5, 2e-5]
    captured = _result(2**16, "float32", "gelu", rounds, rounds)
    captured.method, captured.copy_seconds = "graph", 1e-5
    eager = _result(2**16, "float32", "silu", rounds, rounds, torch_rounds=rounds)
    eager.method, eager.copy_seconds = "events (RuntimeError: capture failed)", 1e-5
    text = report.format_results([captured, eager])
    assert "| silu " in text and " 15.0 † " in text and " 15.0 † " not in text.split("| silu")[0]
    assert "† silu: events (RuntimeError: capture failed)" in text


def test_host_rows_count_the_launches_and_time_the_library_alone():
    # no interpreter needed: the launches are stubbed, the CUDA route's Python runs on CPU tensors
    rows = kernels_cuda.host_rows("cpu", kernels_cuda.MEMBERS, size=SIZE, calls=3)
    assert [r["key"] for r in rows] == [m.key for m in kernels_cuda.MEMBERS]
    for row in rows:
        assert row["launches"] >= 2, row  # a forward and a backward kernel at least
        assert len(row["stubbed"]) == 3 and min(row["stubbed"]) > 0 and "launched" not in row
    table = report.format_host(rows)
    assert "bias_gelu (db)" in table and "n/a" in table


def test_the_device_clock_counts_every_call_a_replay_holds(monkeypatch):
    calls = []
    replay = device_timing.Replay(lambda: calls.append(1), repeat=4, method="wall")
    assert device_timing.replayable(replay.run, "cpu", 2**16).method == "wall"  # no graph on CPU
    wall = device_timing.time_calls
    monkeypatch.setattr(device_timing, "time_calls", lambda fn, n: wall(fn, n) * 0 + 1.2)
    assert device_timing.device_timer("cpu")(replay, 3) == pytest.approx(0.3)  # 1.2 s ÷ 4 calls
    assert len(calls) == 3
    monkeypatch.undo()
    host = device_timing.host_times(replay, 5, "cpu")
    assert len(calls) == 8 and len(host) == 5 and min(host) > 0


class _Kernel:
    """A stand-in for a Triton kernel: ``kernel[grid](*args, **options)`` records the launch."""

    __name__ = "stand_in_kernel"

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **options: self.calls.append((grid, args, options))


def test_stubbed_launches_skip_the_library_launch_and_name_it():
    from gelus import _triton

    kernel = _Kernel()
    with device_timing.stubbed_launches() as outer:
        _triton.launch(kernel, (4,), 1, BLOCK=8)
        with device_timing.stubbed_launches() as inner:
            _triton.launch(kernel, (4,), 2, BLOCK=8)
        _triton.launch(kernel, (2, 3), 3, BLOCK=8)
    assert outer == ["stand_in_kernel"] * 2 and inner == ["stand_in_kernel"]
    assert kernel.calls == []  # nothing launched inside the blocks
    _triton.launch(kernel, (4,), 1, BLOCK=8)  # and for real after them
    assert kernel.calls == [((4,), (1,), {"BLOCK": 8})]


def _bindings() -> dict[tuple[str, str], int]:
    """(module, name) -> id of the object bound, for every loaded gelus module and Triton's
    launcher classes: what a rebinding (monkeypatching) would change."""
    import sys

    import triton.runtime.jit as jit

    spaces = {name: vars(m) for name, m in list(sys.modules.items()) if name.startswith("gelus")}
    spaces["JITFunction"] = dict(vars(jit.JITFunction))
    return {(m, k): id(v) for m, space in spaces.items() for k, v in space.items()}


def test_the_bench_seams_rebind_nothing():
    # the bench's host time goes through seams the library owns: entering them changes the
    # state those seams keep, not what any module's names are bound to
    x = torch.randn(8, 16, requires_grad=True)
    before = _bindings()
    with device_timing.cuda_route_on_cpu(), device_timing.stubbed_launches() as launches:
        inside = _bindings()
        kernels_cuda.MEMBERS[0].call(x, {}).sum().backward()
    assert launches == ["pointwise_kernel"] * 2  # forward and backward, through the seam
    changed = sorted(key for key, value in before.items() if inside.get(key) != value)
    assert changed == []


def test_cuda_route_on_cpu_takes_the_kernels_and_is_undone():
    from gelus import _operator, _triton

    x = torch.randn(8, 16, requires_grad=True)
    bias = torch.zeros(16, requires_grad=True)
    with device_timing.cuda_route_on_cpu(), device_timing.stubbed_launches() as launches:
        assert _operator.kernel_device(x) == "cuda" and _triton.available(x)
        torch.autograd.grad(kernels_cuda.MEMBERS[7].call(x, {"bias": bias}), (x, bias),
                            torch.ones(8, 16))  # fmt: skip
        with pytest.raises(RuntimeError, match="already takes the cuda route"):
            device_timing.cuda_route_on_cpu().__enter__()
    # bias-GELU's forward, then its one-pass dx + db (channels fastest) and the sums' finish
    assert launches == ["columns_kernel", "columns_kernel", "finish_kernel"], launches
    with device_timing.stubbed_launches() as launches:
        kernels_cuda.MEMBERS[7].call(x, {"bias": bias}).sum().backward()
    assert launches == [] and not _triton.available(x)  # CPU routes again
    assert _operator.kernel_device(x) == "cpu"


def test_host_only_command_runs_without_a_gpu(tmp_path):
    path = tmp_path / "host.json"
    args = cli.build_parser().parse_args(
        ["bench", "kernels", "--host-only", "--sizes", "2^11", "--members",
         "gelu,bias-gelu", "--json", str(path)]
    )  # fmt: skip
    out = StringIO()
    assert args.func(args, out) == 0
    text = out.getvalue()
    assert "Host time of one forward + backward (2^11 elements" in text
    assert "host µs per fwd+bwd, Triton launches stubbed" in text and "bias_gelu (db)" in text
    payload = json.loads(path.read_text())
    assert payload["results"] == [] and [r["key"] for r in payload["host"]] == ["gelu", "bias-gelu"]
    assert [t["key"] for t in payload["targets"]] == ["bias-gelu"]


@needs_interpreter
def test_main_times_the_interpreted_kernels_on_cpu():
    args = argparse.Namespace(device="cpu", sizes="2^10", rounds=1, members="gelu,geglu",
                              inputs="normal", host_only=False, json=None, list=False)  # fmt: skip
    out = StringIO()
    assert kernels_cuda_main(args, out) == 0
    text = out.getvalue()
    assert "interpreter" in text and "geglu (n → n/2)" in text and "a·F.gelu(b)" in text
    with pytest.raises(SettingError, match="unknown --members"):
        kernels_cuda_main(argparse.Namespace(**{**vars(args), "members": "nope"}), out)
    with pytest.raises(SettingError, match="--inputs"):
        kernels_cuda_main(argparse.Namespace(**{**vars(args), "inputs": "cauchy"}), out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_cuda_flag_without_cuda_says_so():
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "kernels", "--device", "cuda"])
    with pytest.raises(SettingError, match="no CUDA device"):
        args.func(args)


@needs_cuda
def test_a_captured_forward_backward_replays_on_the_gpu():
    case = kernels_cuda.Case.make(2**16, torch.float32, "normal", "cuda")
    member = next(m for m in kernels_cuda.MEMBERS if m.key == "bias-gelu")
    fn = case.forward_backward(member.call, member.params)
    fn()
    replay = device_timing.replayable(fn, "cuda", case.size)
    assert replay.method == "graph" and replay.repeat == 16
    seconds = device_timing.device_timer("cuda")(replay, 3)
    assert 0 < seconds < 1
    host = device_timing.host_times(fn, 3, "cuda")
    assert len(host) == 3 and min(host) > 0
