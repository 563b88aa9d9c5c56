"""tools/gpu_check.py, the device check, run on the CPU: its parts, their JSON and logs, the time
limits and the budget, and that its accuracy parts catch a wrong member.

One subprocess run covers every part at ``--quick`` sizes on a few member variants, with two test
hooks on: ``--inject-wrong bias-gelu-none`` (that member made 16 ulp wrong, value and gradient)
and ``--inject-hang cuda_graphs`` (a part that hangs; on CPU it would only be skipped). The
budget logic is checked on its own with a fake clock. Nothing here times anything: the timing
parts' figures are read for their form, not their values.
"""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gelus._triton import interpreting

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gpu_check.py"
WRONG = "bias-gelu-none"
ONLY = ("gelu-none,gelu-tanh,gelu-accurate,bias-gelu-none,geglu-none,generalized,swish-tensor,"
        "stochastic-train,reglu,laplace")  # fmt: skip
HANG_LIMIT_S = 2.0


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gpu_check = _load()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(exit code, the JSON, the output folder) of one quick CPU run with both test hooks."""
    out = tmp_path_factory.mktemp("gpu-check")
    command = [sys.executable, str(TOOL), "--device", "cpu", "--quick", "--out", str(out),
               "--only", ONLY, "--compile-backend", "eager", "--inject-wrong", WRONG,
               "--inject-hang", "cuda_graphs", "--part-limit", f"cuda_graphs={HANG_LIMIT_S}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("TRITON_INTERPRET", None)  # the tool sets it for the parts that need it
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert (out / gpu_check.RESULT_FILE).exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads((out / gpu_check.RESULT_FILE).read_text()), out


def _part(report: dict, name: str) -> dict:
    return next(p for p in report["parts"] if p["name"] == name)


def test_every_part_runs_in_order_with_its_log(run):
    code, report, out = run
    assert code == 1 and report["status"] == "failed"  # the injected member fails
    assert [p["name"] for p in report["parts"]] == [p.name for p in gpu_check.PARTS]
    assert report["machine"]["torch"] == torch.__version__ and report["machine"]["device"] == "cpu"
    assert report["settings"]["quick"] and report["settings"]["inject_wrong"] == [WRONG]
    for part in report["parts"]:
        assert part["status"] in ("passed", "failed", "measured", "skipped", "timeout")
        assert 0 < part["wall_s"] <= part["limit_s"] + 5, part["name"]
        log = out / part["log"]
        assert log.read_text().startswith("$ "), part["name"]  # the command, then its output
        if part["name"] != "cuda_graphs":
            assert part["checks"], part["name"]
        for check in part["checks"]:
            assert {"name", "passed", "detail"} <= set(check)
    assert (out / "gpu-check.log").read_text().count("== ") >= 2 * len(gpu_check.PARTS)


def test_the_wrong_member_fails_every_part_that_computes_it(run):
    _, report, _ = run
    for name in ("accuracy", "parameter_gradients", "launch_limits", "compiled"):
        part = _part(report, name)
        assert part["status"] == "failed", name
        failed = [c for c in part["checks"] if c["passed"] is False]
        assert any("bias-gelu" in c["name"] for c in failed), name
        for check in failed:
            if "bias-gelu" in check["name"]:
                continue
            # any other miss is a near miss of a CPU table cell (a cell is the maximum on the
            # table's grid; a random sample can land just past it), never a wrong result
            worst = max(e["worst"] for e in check["errors"].values() if e["worst"] is not None)
            assert worst <= 1.10, check
    # every check of the other members' accuracy ran against a bound or was measured
    accuracy = _part(report, "accuracy")["checks"]
    judged = [c for c in accuracy if WRONG not in c["name"] and c["passed"] is not None]
    assert sum(c["passed"] for c in judged) >= len(judged) - 2  # at most two near misses
    laplace = [c for c in accuracy if c["name"].startswith("laplace")]
    assert laplace and all(c["passed"] is None for c in laplace)  # no stated bound: measured


def test_accuracy_computes_real_errors(run):
    _, report, _ = run
    checks = {c["name"]: c for c in _part(report, "accuracy")["checks"]}
    exact = checks["gelu-accurate float32 rows"]["errors"]
    assert 0 < exact["value"]["max_ulp"] <= 0.5 and exact["value"]["worst"] <= 1  # float64, rounded
    half = checks["gelu-accurate bfloat16 rows"]["errors"]
    assert all(0 < e["max_ulp"] <= 1 for e in half.values())  # fp32 math, rounded once
    geglu = checks["geglu-none bfloat16 channels_last"]["errors"]
    assert set(geglu) == {"value", "grad_a", "grad_b"}
    assert all(e["max_ulp"] > 0 and e["worst"] <= 1 for e in geglu.values())
    assert checks["stochastic-train float32 rows"]["passed"] is True
    names = set(checks)
    for layout in ("rows", "odd", "strided", "nchw", "channels_last", "rows 2^14"):
        assert f"generalized float32 {layout}" in names
    assert {"generalized bfloat16 rows", "generalized float16 channels_last"} <= names


def test_an_overrunning_part_is_cut_and_recorded_and_the_next_part_runs(run):
    _, report, _ = run
    hung = _part(report, "cuda_graphs")
    assert hung["status"] == "timeout" and "time limit" in hung["error"]
    assert [c["name"] for c in hung["checks"]] == ["before the hang"]  # what it had finished
    assert HANG_LIMIT_S <= hung["wall_s"] < HANG_LIMIT_S + 5
    after = _part(report, "launch_limits")
    assert after["checks"] and after["status"] in ("passed", "failed")


def test_parameter_gradients_run_the_kernels_and_rerun_bit_equal(run):
    _, report, _ = run
    checks = _part(report, "parameter_gradients")["checks"]
    assert {c["name"].split()[0] for c in checks} == {"bias-gelu-none", "swish-tensor",
                                                      "generalized"}  # fmt: skip
    assert all(c["bit_equal"] for c in checks)
    for check in checks:
        if WRONG not in check["name"]:
            assert check["passed"] is True, check
    log = (run[2] / "logs" / "parameter_gradients.log").read_text()
    assert "Traceback" not in log


def test_timing_compiled_and_gpt2_parts_record_figures_not_verdicts_on_cpu(run):
    _, report, _ = run
    timing = _part(report, "timing")
    assert timing["status"] == "measured"  # CPU times are not judged
    targets = {c["name"].split(":")[0] for c in timing["checks"]}
    assert targets == {"member ÷ F.gelu", "fused ÷ the torch it replaces"}
    assert all(c["ratio"] > 0 and c["verdict"] in "✓✗≈" for c in timing["checks"])
    compiled = [c for c in _part(report, "compiled")["checks"] if "÷" in c["name"]]
    assert compiled and all(c["passed"] is None and c["ratio"] > 0 for c in compiled)
    gpt2 = _part(report, "gpt2_step")["checks"]
    steps = {c["name"] for c in gpt2 if c["name"].startswith("step ")}
    assert steps == {f"step {a}/{m}" for a in ("torch-exact", "gelu") for m in ("eager", "compiled")}
    assert {"gelu ÷ nn.GELU(), eager", "gelu ÷ nn.GELU(), compiled"} <= {c["name"] for c in gpt2}


def test_cuda_graphs_part_says_it_needs_cuda_on_cpu():
    recorder = gpu_check.Recorder(None, None, log=lambda message: None)
    gpu_check.part_cuda_graphs(gpu_check.Config("cpu", quick=True), recorder)
    assert recorder.checks == [{"name": "every member", "passed": None, "detail": "needs CUDA",
                                "skipped": True}]  # fmt: skip
    assert gpu_check.part_status(recorder.checks) == "skipped"


def test_a_wrong_member_fails_in_process_and_the_right_one_passes():
    config = gpu_check.Config("cpu", quick=True, only=("gelu-accurate", "geglu-none"))
    for inject, expected in (((), True), (("geglu-none",), False)):
        recorder = gpu_check.Recorder(None, None, log=lambda message: None)
        config = gpu_check.Config("cpu", True, only=config.only, inject_wrong=inject)
        gpu_check.part_accuracy(config, recorder)
        geglu = [c["passed"] for c in recorder.checks if c["name"].startswith("geglu-none")]
        assert geglu and all(p is expected for p in geglu)
        exact = [c["passed"] for c in recorder.checks if c["name"].startswith("gelu-accurate")]
        assert exact and all(exact)


@pytest.mark.skipif(not interpreting(), reason="the kernels on CPU tensors need TRITON_INTERPRET=1 "
                    "(tests/conftest.py sets it without CUDA)")
def test_the_kernels_interpreted_are_held_to_the_kernels_bounds():
    # --interpret: CPU tensors through the CUDA route; exact GELU fp32 within 2 ulp, a half type
    # within one ulp of its own; 16 ulp off fails
    for inject, expected in (((), True), (("gelu-none",), False)):
        recorder = gpu_check.Recorder(None, None, log=lambda message: None)
        config = gpu_check.Config("cpu", True, only=("gelu-none",), inject_wrong=inject,
                                  interpret=True)  # fmt: skip
        gpu_check.part_accuracy(config, recorder)
        assert len(recorder.checks) == 10  # 5 layouts fp32, 2 each half type, 2^14 fp32
        assert all(c["passed"] is expected for c in recorder.checks), recorder.checks
        if expected:
            fp32 = recorder.checks[0]["errors"]
            assert 0 < fp32["value"]["max_ulp"] <= gpu_check.EXACT_ULP


# ---------------------------------------------------------------- the budget


def _parts(*limits):
    return [gpu_check.Part(f"p{i}", f"part {i}", limit, limit) for i, limit in enumerate(limits)]


class _Clock:
    """A fake clock that each run advances by the seconds the part "takes"."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _schedule(parts, budget, takes, **kwargs):
    clock, given = _Clock(), {}

    def run(part, limit):
        given[part.name] = limit
        seconds = takes.get(part.name, 1.0)
        if seconds == "raise":
            raise RuntimeError("the runner broke")
        clock.now += min(seconds, limit)
        return {"status": "timeout" if seconds > limit else "passed", "checks": []}

    records = gpu_check.schedule(parts, budget, run, clock=clock, log=lambda m: None, **kwargs)
    return records, given


def test_each_part_gets_its_limit_cut_to_what_is_left_of_the_budget():
    records, given = _schedule(_parts(10, 10, 10), 25, {"p0": 10, "p1": 30, "p2": 3})
    assert given == {"p0": 10, "p1": 10, "p2": 5}  # p1 overran and was cut at its own limit
    assert [r["status"] for r in records] == ["passed", "timeout", "passed"]
    assert [r["limit_s"] for r in records] == [10, 10, 5]


def test_a_part_with_too_little_budget_left_is_skipped_with_the_reason():
    records, given = _schedule(_parts(10, 10, 10), 22, {"p0": 10, "p1": 10})
    assert "p2" not in given
    assert records[2]["status"] == "skipped" and "budget exhausted" in records[2]["reason"]


def test_a_failing_runner_is_recorded_and_the_next_part_runs():
    records, _ = _schedule(_parts(10, 10), 100, {"p0": "raise"})
    assert records[0]["status"] == "error" and "the runner broke" in records[0]["error"]
    assert records[1]["status"] == "passed"


def test_the_records_so_far_are_handed_over_after_each_part():
    seen = []
    _schedule(_parts(10, 10, 10), 22, {"p0": 10, "p1": 10},
              after=lambda records: seen.append([r["status"] for r in records]))  # fmt: skip
    assert seen == [["passed"], ["passed", "passed"]]  # the skipped part runs nothing


def test_part_limits_can_be_overridden():
    _, given = _schedule(_parts(10, 10), 100, {}, limits={"p1": 3.0})
    assert given == {"p0": 10, "p1": 3.0}


def test_the_device_budget_fits_one_eight_minute_call():
    assert gpu_check.BUDGET_S <= 8 * 60 - 30  # the machine's start and the JSON around it
    assert min(p.limit_s for p in gpu_check.PARTS) > gpu_check.MIN_PART_S


# ---------------------------------------------------------------- the members and the bounds


def test_every_public_member_has_variants_with_oracles():
    from gelus import functional as G

    variants = gpu_check.variants()
    public = {n for n in G.__all__ if callable(getattr(G, n))}
    assert {v.function for v in variants} == public
    assert [v.name for v in variants if v.oracle is None] == ["stochastic-train"]
    forms = {v.form for v in variants if v.function == "gelu"}
    assert forms == set(G.APPROXIMATIONS)


def test_the_bounds_are_the_ones_the_tests_assert():
    from _fp32_gelu_sets import EXACT_ULP

    assert gpu_check.EXACT_ULP == EXACT_ULP
    source = (ROOT / "tests" / "library" / "test_triton_kernels.py").read_text()
    table = ast.literal_eval(re.search(r"^FORM_BOUNDS = (\{.*\})$", source, re.M)[1])
    assert table == gpu_check.FORM_BOUNDS
    cuda = ast.literal_eval(re.search(r'FORM_BOUNDS\["sigmoid"\] = (\(.*\))', source)[1])
    assert table | {"sigmoid": cuda} == gpu_check.FORM_BOUNDS_CUDA
    assert f"<= {gpu_check.GEGLU_ULP}" in source
    assert f"{gpu_check.SWISH_RTOL_EPS} * info.eps" in source
