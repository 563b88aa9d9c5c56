"""The device check: everything gelus must show on a GPU, in one call of at most 8 minutes.

    PYTHONPATH=src python3 tools/gpu_check.py --out $OUT                 # on an H100 / H200
    PYTHONPATH=src python3 tools/gpu_check.py --device cpu --quick --out /tmp/check   # anywhere

Writes ``$OUT/gpu-check.json`` (the machine, the settings, every part's status, time and checks)
and ``$OUT/logs/<part>.log`` (each part's own output). Parts, in order of importance
(docs/gpu/README.md says what each checks and which targets it judges):

1. ``accuracy``: every member of ``gelus.functional`` (each form and parameter kind) against a
   float64 oracle computed on the device, value and gradient, fp32 / bf16 / fp16, contiguous,
   odd, strided and channels_last inputs, up to 2^27 elements: the worst error against the
   documented bound (:data:`FP32_BOUNDS`, the bounds the tests assert).
2. ``parameter_gradients``: the one-pass parameter gradients (bias-GELU's db, Swish's dβ,
   generalized GELU's dμ, dσ) against float64 sums, and two runs bit-equal.
3. ``cuda_graphs``: every member's forward + backward captured in a CUDA graph; replay = eager.
4. ``launch_limits``: the shapes at CUDA's launch limits (a 2^26-element 1-D GEGLU input,
   bias-GELU on (4, 2^24), more than 2^31 elements, parameter views with large strides), checked
   against the oracle on a sample.
5. ``timing``: forward + backward of every member against ``F.gelu`` and the torch composition
   it replaces, at 2^24 and 2^28, fp32 and bf16 (``gelus.bench.kernels_cuda``'s clocks).
6. ``compiled``: the members under ``torch.compile``: accuracy, and time against ``F.gelu``.
7. ``gpt2_step``: the GPT-2-small training step, eager and compiled, ``nn.GELU()`` against gelus's
   (``gelus.bench.gpt2_step``).

Each part runs in its own process (a CUDA fault such as a failed launch leaves a context unusable:
it must not take the next part with it) under a time limit; a part that overruns is killed and
recorded as ``timeout`` with the checks it had finished (a part writes its JSON after every
check), and the next part runs. The total budget (``--budget``) caps the sum: a part starts only
with at least ``MIN_PART_S`` left and gets at most what is left. Within its limit a part also
stops starting new items near its own deadline (``soft deadline``), so a slow machine loses the
last items of a part, not the whole part.

``--device cpu --quick`` runs every part at small sizes on the CPU (the library's CPU routes held
to docs/NUMERICS.md's table, the parameter gradients on the kernels in Triton's interpreter,
``torch.compile`` with the ``aot_eager`` backend, a tiny GPT-2; the CUDA-graph part is skipped,
"needs CUDA"): tests/bench/test_gpu_check.py runs it. ``--interpret`` sends the accuracy and
launch-limit parts through the kernels in the interpreter too, held to the kernels' bounds. ``--inject-wrong MEMBER`` and
``--inject-hang PART`` are that test's hooks: a member made wrong by 16 ulp, a part that hangs.
"""

import argparse
import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT_FILE = "gpu-check.json"
MIN_PART_S = 5.0  # a part is not started with less than this left of the budget


# ============================================================================ the parts


@dataclass(frozen=True)
class Part:
    """One part of the check: its name, what it shows, its time limits (seconds, on a GPU and
    with ``--quick``)."""

    name: str
    title: str
    limit_s: float
    quick_limit_s: float


PARTS = (
    Part("accuracy", "every member against a float64 oracle on the device", 110, 60),
    Part("parameter_gradients", "one-pass parameter gradients: float64 sums, bit-equal reruns",
         25, 30),
    Part("cuda_graphs", "CUDA-graph capture of every member, replay = eager", 35, 30),
    Part("launch_limits", "the shapes at CUDA's launch limits, against the oracle", 40, 30),
    Part("timing", "forward + backward against F.gelu and the compositions", 70, 40),
    Part("compiled", "the members under torch.compile: accuracy and time", 80, 60),
    Part("gpt2_step", "the GPT-2-small step, eager and compiled, plain against gelus", 90, 60),
)  # fmt: skip
BUDGET_S = 450.0  # 7.5 minutes of parts: one 8-minute call with the machine's start around it
QUICK_BUDGET_S = 300.0


def part_named(name: str) -> Part:
    for part in PARTS:
        if part.name == name:
            return part
    raise ValueError(f"unknown part {name!r}; choose from {', '.join(p.name for p in PARTS)}")


def schedule(
    parts: list[Part],
    budget_s: float,
    run: Callable[[Part, float], dict],
    clock: Callable[[], float] = time.monotonic,
    limits: dict[str, float] | None = None,
    quick: bool = False,
    log: Callable[[str], None] = print,
    after: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """Run ``parts`` in order, each with ``run(part, limit_s)``: limit = the part's own limit (or
    ``limits[name]``), cut to what is left of ``budget_s``; a part with less than ``MIN_PART_S``
    left is skipped. Returns one record per part (``run``'s dict with the name, limit and wall
    time added); a ``run`` that raises is recorded as an error and the next part runs. ``after``
    sees the records so far after each part (the caller writes them: a run cut short from
    outside still leaves them)."""
    start = clock()
    records = []
    for part in parts:
        own = (limits or {}).get(part.name, part.quick_limit_s if quick else part.limit_s)
        left = budget_s - (clock() - start)
        base = {"name": part.name, "title": part.title}
        if left < min(MIN_PART_S, own):
            records.append(base | {"status": "skipped", "limit_s": 0.0, "wall_s": 0.0,
                                   "reason": f"budget exhausted ({left:.0f} s of {budget_s:.0f} "
                                             f"s left)", "checks": []})  # fmt: skip
            log(f"== {part.name}: skipped, budget exhausted")
            continue
        limit = min(own, left)
        log(f"== {part.name}: {part.title} (limit {limit:.0f} s)")
        began = clock()
        try:
            record = run(part, limit)
        except Exception as error:  # the runner itself failed: record it, go on
            record = {"status": "error", "error": _describe(error), "checks": []}
        record = base | {"limit_s": round(limit, 1)} | record
        record["wall_s"] = round(clock() - began, 2)
        records.append(record)
        log(f"== {part.name}: {record['status']} in {record['wall_s']:.1f} s")
        if after is not None:
            after(records)
    return records


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".strip()[:2000]


def part_status(checks: list[dict]) -> str:
    """``failed`` if any check failed, ``passed`` if any passed, else ``measured`` (checks
    that record figures without a stated bound or target) or ``skipped``."""
    verdicts = [c.get("passed") for c in checks]
    if any(v is False for v in verdicts):
        return "failed"
    if any(v is True for v in verdicts):
        return "passed"
    if checks and all(c.get("skipped") for c in checks):
        return "skipped"
    return "measured"


# ============================================================================ the parent


def run_in_subprocess(part: Part, limit_s: float, args: argparse.Namespace, out: Path) -> dict:
    """Run one part in a fresh process (``--run-part``), its output to ``logs/<part>.log``;
    killed at ``limit_s``. The part's JSON (written after each of its checks) is read back in
    every case, so a killed part keeps the checks it finished."""
    result = out / "parts" / f"{part.name}.json"
    log = out / "logs" / f"{part.name}.log"
    result.unlink(missing_ok=True)
    soft = max(1.0, limit_s - max(3.0, 0.1 * limit_s))  # stop starting items before the kill
    command = [sys.executable, str(Path(__file__).resolve()), "--run-part", part.name,
               "--result", str(result), "--soft-deadline-s", f"{soft:.1f}",
               *_child_options(args)]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    interpreted_here = INTERPRETED_PARTS + (("accuracy", "launch_limits") if args.interpret else ())
    if args.device != "cuda" and part.name in interpreted_here:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    with log.open("w") as stream:
        stream.write(f"$ {' '.join(command)}\n")
        stream.flush()
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True,  # its own process group: killed with its children
        )  # fmt: skip
        try:
            code = process.wait(timeout=limit_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            code = process.wait()
            timed_out = True
    record = {"checks": [], "log": str(log.relative_to(out))}
    if result.exists():
        with contextlib.suppress(json.JSONDecodeError):
            record |= json.loads(result.read_text())
    if timed_out:
        record["status"] = "timeout"
        record["error"] = (
            f"killed at its time limit ({limit_s:.0f} s) with {len(record['checks'])} checks "
            "done; the next part ran"
        )
    elif code != 0 and record.get("status") in (None, "running"):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        record["status"] = "error"
        record["error"] = f"exit code {code}: " + "\n".join(tail)
    return record


def _child_options(args: argparse.Namespace) -> list[str]:
    options = ["--device", args.device, "--compile-backend", args.compile_backend]
    if args.quick:
        options.append("--quick")
    if args.interpret:
        options.append("--interpret")
    for name in args.inject_wrong:
        options += ["--inject-wrong", name]
    if args.only:
        options += ["--only", args.only]
    for name in args.inject_hang:
        options += ["--inject-hang", name]
    return options


def machine_info(device: str) -> dict:
    """What the figures depend on: the GPU (nvidia-smi), torch, Triton, Python, the commit."""
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "cpus": os.cpu_count(), "device": device}  # fmt: skip
    with contextlib.suppress(ImportError):
        import triton

        info["triton"] = triton.__version__
    if device == "cuda" and torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        info |= {"gpu": properties.name, "gpu_memory_gib": round(properties.total_memory / 2**30),
                 "capability": f"{properties.major}.{properties.minor}",
                 "cuda": torch.version.cuda}  # fmt: skip
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
        if smi.returncode == 0:
            info["nvidia_smi"] = smi.stdout.strip()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT, timeout=20)  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT, timeout=20)  # fmt: skip
        if head.returncode == 0:
            info["commit"] = head.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")
    return info


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.run_part:
        return child_main(args)
    args = _defaults(args)
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "parts").mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in args.parts.split(",") if n.strip()] if args.parts else None
    parts = [part_named(n) for n in names] if names else list(PARTS)
    limits = dict(_limit(text) for text in args.part_limit)
    budget = args.budget or (QUICK_BUDGET_S if args.quick else BUDGET_S)
    report = {
        "machine": machine_info(args.device),
        "settings": {"device": args.device, "quick": args.quick, "budget_s": budget,
                     "parts": [p.name for p in parts], "part_limits": limits,
                     "compile_backend": args.compile_backend,
                     "only": args.only, "interpret": args.interpret,
                     "inject_wrong": args.inject_wrong,
                     "inject_hang": args.inject_hang},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    print(json.dumps(report["machine"], indent=1), flush=True)
    began = time.monotonic()
    with (out / "gpu-check.log").open("w") as stream:

        def log(message: str) -> None:
            print(message, flush=True)
            stream.write(message + "\n")
            stream.flush()

        def write(records: list[dict]) -> None:  # after each part: the JSON so far
            partial = report | {"parts": records, "status": "running",
                                "wall_s": round(time.monotonic() - began, 1)}  # fmt: skip
            (out / RESULT_FILE).write_text(json.dumps(partial, indent=1, default=str) + "\n")

        report["parts"] = schedule(
            parts, budget, lambda part, limit: run_in_subprocess(part, limit, args, out),
            limits=limits, quick=args.quick, log=log, after=write,
        )  # fmt: skip
    report["wall_s"] = round(time.monotonic() - began, 1)
    statuses = [p["status"] for p in report["parts"]]
    report["status"] = "passed" if all(s in ("passed", "measured", "skipped") for s in statuses) else "failed"
    (out / RESULT_FILE).write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(summary(report), flush=True)
    return 0 if report["status"] == "passed" else 1


def summary(report: dict) -> str:
    """One line per part, then the failed checks (at most 10 per part)."""
    lines = [f"device check: {report['status']} in {report['wall_s']:.0f} s"]
    for part in report["parts"]:
        checks = part.get("checks", [])
        failed = [c for c in checks if c.get("passed") is False]
        lines.append(f"  {part['name']:<20} {part['status']:<8} {part.get('wall_s', 0):6.1f} s  "
                     f"{len(checks)} checks, {len(failed)} failed"
                     + (f"  ({_why(part)})"[:300]
                        if part["status"] in ("skipped", "timeout", "error") else ""))  # fmt: skip
        for check in failed[:10]:
            lines.append(f"      ✗ {check['name']}: {check.get('detail', '')}")
    return "\n".join(lines)


def _why(part: dict) -> str:
    """Why a part did not pass or fail: its reason, its error, or its skipped check's detail."""
    details = [c.get("detail", "") for c in part.get("checks", []) if c.get("skipped")]
    return part.get("reason") or part.get("error") or "; ".join(details)


def _limit(text: str) -> tuple[str, float]:
    name, _, seconds = text.partition("=")
    part_named(name)
    return name, float(seconds)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check", help="folder of the JSON and the logs")
    parser.add_argument("--device", default=None, help="cuda (default where available) or cpu")
    parser.add_argument("--quick", action="store_true", help="every part at small sizes")
    parser.add_argument("--parts", default="", help="comma-separated parts (default: all)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"total seconds for the parts (default {BUDGET_S:.0f}, "
                             f"{QUICK_BUDGET_S:.0f} with --quick)")  # fmt: skip
    parser.add_argument("--part-limit", action="append", default=[], metavar="PART=SECONDS",
                        help="override one part's time limit")  # fmt: skip
    parser.add_argument("--compile-backend", default=None,
                        help="torch.compile backend (default inductor on CUDA, aot_eager on CPU)")
    parser.add_argument("--interpret", action="store_true",
                        help="on CPU: the accuracy and launch-limit parts through the CUDA "
                             "kernels in Triton's interpreter, held to the kernels' bounds")
    parser.add_argument("--only", default="", metavar="VARIANTS",
                        help="comma-separated member variants (gelu-none, bias-gelu-tanh, ...)")
    parser.add_argument("--inject-wrong", action="append", default=[], metavar="VARIANT",
                        help="test hook: make this member variant 16 ulp wrong")
    parser.add_argument("--inject-hang", action="append", default=[], metavar="PART",
                        help="test hook: this part hangs after its first check")
    parser.add_argument("--run-part", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--soft-deadline-s", type=float, default=None, help=argparse.SUPPRESS)
    return parser


def _defaults(args: argparse.Namespace) -> argparse.Namespace:
    import torch

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.compile_backend is None:
        # inductor on CPU compiles C++: minutes; aot_eager runs the same graphs without it
        args.compile_backend = "inductor" if args.device == "cuda" else "aot_eager"
    return args


# ============================================================================ the child


class Recorder:
    """A part's results, written to ``path`` after every check (so a killed part keeps them),
    and its soft deadline."""

    def __init__(self, path: str | None, soft_deadline_s: float | None, log=print) -> None:
        self.path = Path(path) if path else None
        self.checks: list[dict] = []
        self.notes: dict[str, object] = {}
        self.deadline = time.monotonic() + soft_deadline_s if soft_deadline_s else math.inf
        self.log = log
        self.left_out = 0
        self.write("running")

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def out_of_time(self) -> bool:
        """True once the soft deadline has passed (the item is then counted as left out)."""
        if time.monotonic() < self.deadline:
            return False
        self.left_out += 1
        return True

    def add(self, name: str, passed: bool | None, detail: str = "", **figures) -> dict:
        check = _strict({"name": name, "passed": passed, "detail": detail} | figures)
        self.checks.append(check)
        mark = {True: "✓", False: "✗", None: "·"}[passed]
        self.log(f"{mark} {name} {detail}".rstrip())
        self.write("running")
        return check

    def skip(self, name: str, reason: str) -> None:
        self.add(name, None, reason, skipped=True)

    def write(self, status: str, error: str | None = None) -> None:
        if self.path is None:
            return
        record = {"status": status, "checks": self.checks, "notes": self.notes}
        if self.left_out:
            record["left_out"] = f"{self.left_out} items not started: the part's soft deadline"
        if error:
            record["error"] = error
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, default=_jsonable) + "\n")
        os.replace(temporary, self.path)

    def finish(self) -> None:
        self.write(part_status(self.checks))


def _jsonable(value: object) -> object:
    return str(value)


def _strict(value: object) -> object:
    """``value`` with its non-finite floats as strings ("inf", "nan"): strict JSON has no
    Infinity or NaN, and an error of inf (a finite result where the truth is infinite) is news."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def child_main(args: argparse.Namespace) -> int:
    """Run one part in this process (the parent's ``--run-part``)."""
    recorder = Recorder(args.result, args.soft_deadline_s)
    if args.run_part in args.inject_hang:  # the test hook, before the seconds of importing torch
        recorder.add("before the hang", True, "a check the part finished before it hung")
        time.sleep(10**6)
    args = _defaults(args)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device")
    only = tuple(n.strip() for n in (args.only or "").split(",") if n.strip())
    config = Config(args.device, args.quick, args.compile_backend, tuple(args.inject_wrong), only,
                    args.interpret)
    function = PART_FUNCTIONS[args.run_part]
    try:
        function(config, recorder)
    except Exception as error:
        traceback.print_exc()
        recorder.write("error", _describe(error))
        return 1
    recorder.finish()
    return 0


@dataclass(frozen=True)
class Config:
    """What every part needs to know."""

    device: str
    quick: bool = False
    compile_backend: str = "inductor"
    inject_wrong: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # the member variants to check (empty: all)
    interpret: bool = False  # on CPU: the accuracy parts through the kernels, interpreted

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"


# ============================================================================ members and oracles
# The members come from gelus.functional (every public function, every form of APPROXIMATIONS);
# the oracles are float64 torch compositions written here from the definitions, sharing no code
# with the library, and differentiated by autograd in float64.

SQRT_HALF = math.sqrt(0.5)
TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
FORM_SCALE = {"sigmoid": 1.702}


def _cdf64(z):
    import torch

    return 0.5 * torch.special.erfc(-z * SQRT_HALF)


def gelu64(h, approximate: str):
    """GELU of a float64 tensor in the given form (the tanh form as x·σ(2u), u its argument)."""
    import torch

    if approximate == "none":
        return h * _cdf64(h)
    if approximate == "tanh":
        return h * torch.sigmoid(TANH_A * (h + 0.044715 * h * h * h))
    return h * torch.sigmoid(1.702 * h)


@dataclass(frozen=True)
class Variant:
    """One way to call a member: ``call(x, params)`` and its float64 ``oracle(x, params, dtype)``
    (``dtype``: the input's, for the float32 intermediates the documented bound is stated
    against), the per-channel parameters it takes, and its bound's name (None: measured only)."""

    name: str
    function: str  # the gelus.functional name
    call: Callable
    oracle: Callable | None
    params: tuple[str, ...] = ()
    bound: str | None = None
    gated: bool = False  # the input is [a, b] halves on the split dim
    form: str = "none"  # the GELU form (bounds of the tanh and sigmoid forms)
    kernel: bool = True  # has a Triton kernel on CUDA (gelus._cuda)
    stochastic: bool = False


def _rounded_sum(x, b, dtype, p=None):
    """x + b as the route forms it, differentiable in float64 (the rounding is a detached
    correction, so the slope is not rounded with it): the kernels add in float32 (or float64),
    the compositions (CPU, compiled) in the input's dtype (``p["_sum_dtype"]``)."""
    import torch

    compute = (p or {}).get("_sum_dtype") or (torch.float64 if dtype == torch.float64 else torch.float32)
    exact = x + b
    return exact + ((x.to(compute) + b.to(compute)).double() - exact).detach()


def _halves(x, dim):
    return x.chunk(2, dim=dim)


def variants() -> list[Variant]:
    """Every variant of every member of ``gelus._members`` that has a function: the ones written
    here, else the member's own (:func:`member_variants`); a member with neither, and a public
    function of ``gelus.functional`` that is no member's, gets a variant without an oracle, which
    the accuracy part fails."""
    import torch
    from torch.nn import functional as F

    from gelus import _members
    from gelus import functional as G

    forms = tuple(G.APPROXIMATIONS)
    table: dict[str, list[Variant]] = {
        "gelu": [
            *(Variant(f"gelu-{form}", "gelu", _bind(G.gelu, approximate=form),
                      lambda x, p, d, form=form: gelu64(x, form), bound=form, form=form)
              for form in forms),
            Variant("gelu-accurate", "gelu", _bind(G.gelu, accurate=True),
                    lambda x, p, d: gelu64(x, "none"), bound="accurate"),
        ],
        "silu": [Variant("silu", "silu", lambda x, p: G.silu(x),
                         lambda x, p, d: x * torch.sigmoid(x), bound="swish")],
        "swish": [
            Variant("swish-1.5", "swish", lambda x, p: G.swish(x, 1.5),
                    lambda x, p, d: x * torch.sigmoid(1.5 * x), bound="swish"),
            Variant("swish-tensor", "swish", lambda x, p: G.swish(x, p["beta"]),
                    lambda x, p, d: x * torch.sigmoid(p["beta"] * x), params=("beta",),
                    bound="swish"),
        ],
        "generalized_gelu": [
            Variant("generalized", "generalized_gelu",
                    lambda x, p: G.generalized_gelu(x, p["mu"], p["sigma"]),
                    lambda x, p, d: x * _cdf64((x - p["mu"]) / p["sigma"]),
                    params=("mu", "sigma"), bound="generalized"),
        ],
        "stochastic_gelu": [
            Variant("stochastic-eval", "stochastic_gelu",
                    lambda x, p: G.stochastic_gelu(x, training=False),
                    lambda x, p, d: gelu64(x, "none"), bound="none"),
            Variant("stochastic-train", "stochastic_gelu",
                    lambda x, p: G.stochastic_gelu(x, training=True), None, stochastic=True),
        ],
        "bias_gelu": [
            Variant(f"bias-gelu-{form}", "bias_gelu",
                    lambda x, p, form=form: G.bias_gelu(x, p["bias"], form),
                    lambda x, p, d, form=form: gelu64(_rounded_sum(x, p["bias"], d, p), form),
                    params=("bias",), bound=form, form=form)
            for form in forms
        ],
        "geglu": [
            Variant(f"geglu-{form}", "geglu", lambda x, p, form=form: G.geglu(x, p["dim"], form),
                    lambda x, p, d, form=form: _gate(x, p["dim"], lambda b: gelu64(b, form)),
                    bound=form, gated=True, form=form)
            for form in forms
        ],
        "swiglu": [Variant("swiglu", "swiglu", lambda x, p: G.swiglu(x, p["dim"]),
                           lambda x, p, d: _gate(x, p["dim"], lambda b: b * torch.sigmoid(b)),
                           bound="swish", gated=True, kernel=False)],
        "reglu": [Variant("reglu", "reglu", lambda x, p: G.reglu(x, p["dim"]),
                          lambda x, p, d: _gate(x, p["dim"], F.relu), bound="exact-product",
                          gated=True, kernel=False)],
        # names from other libraries: their sources' definitions; no stated bound (measured)
        "laplace": [Variant("laplace", "laplace", lambda x, p: G.laplace(x),
                            lambda x, p, d: _cdf64((x - 0.707107) / 0.282095), kernel=False)],
        "relu2": [Variant("relu2", "relu2", lambda x, p: G.relu2(x),
                          lambda x, p, d: F.relu(x) ** 2, kernel=False)],
        "sqrtsoftplus": [Variant("sqrtsoftplus", "sqrtsoftplus", lambda x, p: G.sqrtsoftplus(x),
                                 lambda x, p, d: torch.sqrt(torch.logaddexp(x, 0 * x)),
                                 kernel=False)],
        "xielu": [Variant("xielu", "xielu", lambda x, p: G.xielu(x), _xielu64, kernel=False)],
        "hard_mish": [Variant("hard_mish", "hard_mish", lambda x, p: G.hard_mish(x),
                              lambda x, p, d: 0.5 * x * (x + 2).clamp(0, 2), kernel=False)],
    }  # fmt: skip
    found = []
    members = [m.functional for m in _members.MEMBERS if m.functional]
    for name in [*members, *(n for n in G.__all__ if n not in members)]:
        function = getattr(G, name)
        if not callable(function):
            continue  # APPROXIMATIONS
        found += (table.get(name) or member_variants(name)
                  or [Variant(name, name, lambda x, p, f=function: f(x), None)])  # fmt: skip
    return found


def member_variants(name: str) -> list[Variant]:
    """The variants a member's record declares (``gelus._members``: ``checks``), each against
    the record's oracle of tests/oracles.py (float64 torch ops, differentiable), called with the
    variant's arguments (and a gated member's ``dim``)."""
    from gelus import _members
    from gelus import functional as G

    member = next((m for m in _members.MEMBERS if m.functional == name), None)
    if member is None or not member.checks or member.oracle is None:
        return []
    if str(ROOT / "tests") not in sys.path:
        sys.path.append(str(ROOT / "tests"))
    oracle = getattr(__import__("oracles"), member.oracle)
    function = getattr(G, name)

    def arguments(check, p):
        return {**check.kwargs, **({"dim": p["dim"]} if member.gated else {})}

    return [
        Variant(f"{name.replace('_', '-')}-{check.suffix}", name,
                lambda x, p, c=check: function(x, **arguments(c, p)),
                lambda x, p, d, c=check: oracle(x, **arguments(c, p)),
                bound=member.bound, gated=member.gated, kernel=bool(member.cuda))
        for check in member.checks
    ]  # fmt: skip


def _bind(function, **kwargs):
    return lambda x, p: function(x, **kwargs)


def _gate(x, dim, activation):
    a, b = _halves(x, dim)
    return a * activation(b)


def _xielu64(x, p, d):
    import torch

    alpha_p, alpha_n, beta, eps = 0.8, 0.8, 0.5, -1e-6  # HF XIELU's defaults
    return torch.where(x > 0, alpha_p * x * x + beta * x,
                       (torch.expm1(torch.clamp(x, max=eps)) - x) * alpha_n + beta * x)  # fmt: skip


def selected_variants(config: Config) -> list[Variant]:
    """The variants, with ``--inject-wrong``'s made 16 ulp wrong (value and gradient)."""
    chosen = variants()
    for name in (*config.inject_wrong, *config.only):
        if name not in {v.name for v in chosen}:
            raise ValueError(f"no member variant {name!r}: {', '.join(v.name for v in chosen)}")
    if config.only:
        chosen = [v for v in chosen if v.name in config.only]
    return [_wrong(v) if v.name in config.inject_wrong else v for v in chosen]


def _wrong(variant: Variant) -> Variant:
    import dataclasses

    import torch

    def call(x, p):
        y = variant.call(x, p)
        return y * (1 + 16 * torch.finfo(y.dtype).eps)

    return dataclasses.replace(variant, call=call)


# ---------------------------------------------------------------------------- bounds
# Allowed absolute error per element, from the float64 reference and the context; stated in
# docs/CUDA.md and asserted by the tests named with each (tests/bench/test_gpu_check.py pins these
# numbers to the tests' own constants).

EXACT_ULP = 2.0  # exact GELU fp32, value and slope (tests/library/_fp32_gelu_sets.py EXACT_ULP)
GEGLU_ULP = 2.5  # GEGLU's products (tests/library/test_triton_kernels.py)
# (value ulp for x ≥ −10 / −20, value ulp for x ≥ −3, slope absolute): FORM_BOUNDS of
# tests/library/test_triton_kernels.py, the sigmoid form's as measured on an H200 for CUDA
FORM_BOUNDS = {"tanh": (210.0, 16.0, 2.3e-7), "sigmoid": (41.0, 9.0, 2.1e-7)}
FORM_BOUNDS_CUDA = {"tanh": (210.0, 16.0, 2.3e-7), "sigmoid": (50.0, 11.0, 2.1e-7)}
FORM_FLOOR = {"tanh": -10.0, "sigmoid": -20.0}  # below: no bound (fp32 σ of the tanh form underflows)
SWISH_RTOL_EPS = 32  # test_swish_edges_and_values: rtol 32·eps for fp32, atol = rtol for the slope


@dataclass
class Context:
    """What a bound looks at, per element: the float64 reference, the spacing of the result's
    dtype there, the member's argument h (x, fl(x + b), the gate b, or z = (x − μ)/σ), and for
    a gated gradient the factor |a| that multiplies the gate's slope."""

    reference: object
    spacing: object
    h: object
    factor: object = 1.0
    terms: object = None  # generalized GELU's |Φ| + |x·φ/σ|, the scale of its slope's error
    composed: bool = False  # a composition of torch ops (CPU, compiled), not a kernel


def spacing_of(reference, dtype):
    """The spacing of ``dtype`` numbers at each float64 reference (subnormals included)."""
    import torch

    info = torch.finfo(dtype)
    mantissa = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10, torch.float64: 52}[dtype]
    magnitude = reference.abs().clamp(min=info.tiny)
    return torch.exp2(torch.floor(torch.log2(magnitude)) - mantissa)


def fp32_allowed(bound: str, what: str, c: Context, route: str):
    """The fp32 bound's allowed absolute error for ``what``: "value" or "grad" of a member of x
    alone, or of a gated member a·g(b): "gated_value", "grad_a" (= g(b)), "grad_b" (= a·g'(b));
    inf where the bound states nothing (the tanh form below −10)."""
    import torch

    if route in ("cpu", "cpu-compiled") and cpu_table() is not None:
        rows = CPU_ROWS if route == "cpu" else CPU_ROWS_COMPILED
        if bound in rows:
            return cpu_allowed(cpu_table()[rows[bound]], bound, what, c)
        if route == "cpu-compiled" and bound != "swish":
            return None  # no documented bound for this member compiled on the CPU: measured
    inf = torch.full_like(c.reference, math.inf)
    if bound in ("none", "accurate"):  # exact GELU: 2 ulp; GEGLU's products 2.5 ulp
        return (GEGLU_ULP if what in ("gated_value", "grad_b") else EXACT_ULP) * c.spacing
    if bound in ("tanh", "sigmoid"):
        table = FORM_BOUNDS_CUDA if route == "cuda" else FORM_BOUNDS
        everywhere, upper, slope_abs = table[bound]
        if what in ("value", "grad_a", "gated_value"):  # a product adds its rounding: 1 ulp
            allowed = torch.where(c.h >= -3, upper, everywhere) * gate_spacing(c, what)
            allowed = allowed + (c.spacing if what == "gated_value" else 0.0)
        else:  # the slope's bound is absolute (it cancels near its root), times |a| for a gate
            allowed = slope_abs * c.factor + (c.spacing if what == "grad_b" else 0.0)
        return torch.where(c.h >= FORM_FLOOR[bound], allowed, inf)
    if bound == "swish":  # test_swish_edges_and_values: rtol 32·eps, the slope's atol = rtol
        rtol = SWISH_RTOL_EPS * torch.finfo(torch.float32).eps
        if what in ("value", "grad_a"):
            return rtol * c.reference.abs() + torch.finfo(torch.float32).tiny
        if what == "gated_value":
            return rtol * c.reference.abs() + c.spacing
        return rtol * (c.factor + c.reference.abs()) + (c.spacing if what == "grad_b" else 0.0)
    if bound == "generalized":  # test_generalized_gelu_fp32_bound: (6 + 3z²) ulp, z rounded 3×
        allowed = 6 + 3 * c.h * c.h
        if what == "value":
            return allowed * c.spacing
        return allowed * c.terms * 2.0**-24 + 16 * 2.0**-149
    if bound == "exact-product":  # a·relu(b): exact, or one product rounded once
        return 0.5 * c.spacing
    raise ValueError(f"unknown bound {bound!r}")


# The CPU routes are not the kernels: their fp32 bounds are docs/NUMERICS.md's accuracy table,
# which tests/library/test_accuracy.py asserts and tests/library/_accuracy_table.py reads (a
# checkout's tests; on the GPU machine the kernels' bounds above apply instead).
CPU_ROWS = {"none": "exact (default), eager / compiled", "accurate": "exact, `accurate=True`, eager",
            "tanh": "tanh form", "sigmoid": "sigmoid form (β = 1.702)",
            "generalized": "generalized (μ = 0, σ = 1), eager"}  # fmt: skip
CPU_ROWS_COMPILED = {"none": "exact (default), eager / compiled",
                     "accurate": "same, compiled (fp32 algorithm)"}
CPU_REGIONS = (-3.0, 3.0)  # the table's columns: x < −3, [−3, 3), [3, 20] (and above)


def cpu_table() -> dict | None:
    """docs/NUMERICS.md's table through the tests' own reader, or None outside a checkout."""
    global _CPU_TABLE
    if _CPU_TABLE is None:
        try:
            for folder in ("tests", "tests/library"):
                if str(ROOT / folder) not in sys.path:
                    sys.path.append(str(ROOT / folder))
            import _accuracy_table

            _CPU_TABLE = _accuracy_table.documented()
        except Exception as error:  # no tests folder, numpy or scipy: the kernels' bounds
            print(f"CPU bounds unavailable ({_describe(error)}); using the kernels' bounds")
            _CPU_TABLE = {}
    return _CPU_TABLE or None


_CPU_TABLE: dict | None = None


def cpu_allowed(cells: dict, bound: str, what: str, c: Context):
    """The CPU route's allowed error from its row of the table: the value's cell (ulp of the
    result, not counted where the result is subnormal or, for the tanh form, below x = −10; or
    absolute), the gradient's absolute cell (times |a| for a gate's slope); a gated product
    adds its own rounding (one ulp)."""
    import torch

    low, mid, high = cells.values()  # x < −3, [−3, 3), [3, 20]
    region = [c.h < CPU_REGIONS[0], (c.h >= CPU_REGIONS[0]) & (c.h < CPU_REGIONS[1]),
              c.h >= CPU_REGIONS[1]]  # fmt: skip
    allowed = torch.full_like(c.reference, math.inf)
    for inside, (value, unit, gradient) in zip(region, (low, mid, high), strict=True):
        if what in ("value", "grad_a", "gated_value"):
            absolute = value * (c.factor if what == "gated_value" else 1.0)
            cell = value * gate_spacing(c, what) if unit == "ulp" else torch.full_like(c.spacing, 1.0) * absolute
            if unit == "ulp":
                counted = c.reference.abs() >= torch.finfo(torch.float32).tiny
                if bound == "tanh":
                    counted &= c.h >= FORM_FLOOR["tanh"]
                cell = torch.where(counted, cell, math.inf)
            cell = cell + (c.spacing if what == "gated_value" else 0.0)
        else:
            cell = gradient * c.factor + (c.spacing if what == "grad_b" else 0.0)
            cell = torch.full_like(c.spacing, 1.0) * cell
        allowed = torch.where(inside, cell, allowed)
    if bound == "generalized":  # the row is μ = 0, σ = 1: z = (x − μ)/σ rounded adds ~2z² ulp
        extra = 2 * c.h * c.h
        allowed = allowed + (extra * c.spacing if what == "value" else extra * c.terms * 2.0**-24)
    return allowed


def gate_spacing(c: Context, what: str):
    """The spacing a relative bound of g(b) is counted in: g(b)'s own spacing times |a| for a
    gated value a·g(b) (its binade may differ from the product's), else the result's."""
    if what != "gated_value":
        return c.spacing
    gate = c.reference.abs() / c.factor.clamp(min=1e-300)
    return c.factor * spacing_of(gate, torch_float32())


def torch_float32():
    import torch

    return torch.float32


def allowed_error(bound: str | None, what: str, c: Context, dtype, route: str):
    """The allowed absolute error in ``dtype``: fp32's bound; for a half type (fp32 math rounded
    once) one ulp of its own on top of fp32's error; None where the variant states no bound."""
    import torch

    if bound is None:
        return None
    if dtype == torch.float32:
        return fp32_allowed(bound, what, c, route)
    fp32 = Context(c.reference, spacing_of(c.reference, torch.float32), c.h, c.factor, c.terms)
    fp32_error = fp32_allowed(bound, what, fp32, route)
    if fp32_error is None:
        return None
    allowed = c.spacing + fp32_error
    if c.composed and what == "gated_value":
        # a composition rounds g(b) to the half type before a·g(b): |a| times g(b)'s rounding
        # (a subnormal g(b) in fp16 loses most of its digits there)
        gate = c.reference.abs() / c.factor.clamp(min=1e-300)
        allowed = allowed + c.factor * spacing_of(gate, dtype)
    return allowed


# ---------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Layout:
    """An input shape and memory layout, with where per-channel parameters run."""

    name: str
    shape: tuple[int, ...]
    kind: str = "rows"  # rows: contiguous; strided: every other column; channels_last: NHWC
    channel_dim: int = -1  # the parameters' dim (and the gated members' split dim)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def layouts(config: Config) -> list[Layout]:
    """Contiguous rows at 2^20 (2^12 quick), an odd size, every other column of a wider tensor,
    NCHW and channels_last; a 2^27-element case is :func:`big_layout`."""
    if config.quick:
        return [Layout("rows", (4, 1024)), Layout("odd", (3, 1001)),
                Layout("strided", (4, 512), "strided"),
                Layout("nchw", (2, 8, 5, 7), "rows", 1),
                Layout("channels_last", (2, 8, 5, 7), "channels_last", 1)]  # fmt: skip
    return [Layout("rows", (1024, 1024)), Layout("odd", (1021, 1001)),
            Layout("strided", (2048, 512), "strided"),
            Layout("nchw", (8, 64, 45, 45), "rows", 1),
            Layout("channels_last", (8, 64, 45, 45), "channels_last", 1)]  # fmt: skip


def big_layout(config: Config) -> Layout:
    return Layout("rows 2^27" if not config.quick else "rows 2^14",
                  (2**17, 1024) if not config.quick else (16, 1024))  # fmt: skip


def make_x(layout: Layout, dtype, device: str, seed: int = 0):
    """A leaf of ``layout``: half the elements uniform on [−20, 20] (both tails), half 3·N(0, 1)."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    shape = list(layout.shape)
    if layout.kind == "strided":
        shape[-1] *= 2
    n = math.prod(shape)
    values = torch.empty(n, device=device)
    half = n // 2
    values[:half].uniform_(-20, 20, generator=generator)
    values[half:].normal_(0, 3, generator=generator)
    values = values[torch.randperm(n, device=device, generator=generator)].view(shape).to(dtype)
    if layout.kind == "strided":
        values = values[..., ::2]
    elif layout.kind == "channels_last":
        values = values.contiguous(memory_format=torch.channels_last)
    return values.requires_grad_()


def make_params(names: tuple[str, ...], layout: Layout, dtype, device: str, seed: int = 1):
    """Per-channel leaves along the layout's channel dim, in x's dtype (as the kernels take
    them): bias 0.5·N(0, 1), β in [0.5, 1.5], μ 0.4·N(0, 1), σ in [0.5, 1.5]."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    channels = layout.shape[layout.channel_dim]
    shape = (channels,) + (1,) * (len(layout.shape) - 1 - layout.channel_dim % len(layout.shape))
    draw = {"bias": lambda: 0.5 * torch.randn(shape, device=device, generator=generator),
            "beta": lambda: 0.5 + torch.rand(shape, device=device, generator=generator),
            "mu": lambda: 0.4 * torch.randn(shape, device=device, generator=generator),
            "sigma": lambda: 0.5 + torch.rand(shape, device=device, generator=generator)}  # fmt: skip
    return {name: draw[name]().to(dtype).requires_grad_() for name in names}


# ---------------------------------------------------------------------------- one comparison


def compare(variant: Variant, x, params: dict, device: str, compiled: bool = False) -> dict:
    """The variant's value and input gradient (upstream gradient 1) against the float64 oracle:
    ``{what: {"max_ulp", "worst", "bad", "at"}}`` for "value" and "grad" ("grad_a", "grad_b"
    for a gated member's halves); ``worst`` is the largest error ÷ allowed (≤ 1 passes; None
    without a stated bound), ``at`` the member's argument where it is worst. ``device``: "cuda",
    "cpu", or "kernels" (CPU tensors through the kernels in Triton's interpreter: the kernels'
    bounds); ``compiled``: the outputs came from torch.compile (a composition of torch ops)."""
    import torch

    dtype = x.dtype
    y = variant.call(x, params)
    (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    x64 = x.detach().double().requires_grad_()
    p64 = {k: (v.detach().double() if isinstance(v, torch.Tensor) else v)
           for k, v in params.items()}  # fmt: skip
    # the kernels' bounds where kernels ran (on CUDA, or interpreted), else the CPU table's
    route = device if device in ("cuda", "kernels") else ("cpu-compiled" if compiled else "cpu")
    if compiled:  # a composition: x + b in x's dtype (the CPU kernels add in fp32, as CUDA's)
        p64["_sum_dtype"] = dtype
    y64 = variant.oracle(x64, p64, dtype)
    (dx64,) = torch.autograd.grad(y64, x64, torch.ones_like(y64))
    x64, y64 = x64.detach(), y64.detach()
    h, terms = _argument(variant, x64, p64, dtype)
    if variant.gated:
        dim = params["dim"]
        a, b = _halves(x64, dim)
        outputs = [("value", "gated_value", y, y64, b, a.abs(), None)]
        outputs += [(what, kind, got, want, b, factor, None)
                    for what, kind, got, want, factor in zip(
                        ("grad_a", "grad_b"), ("grad_a", "grad_b"), _halves(dx, dim),
                        _halves(dx64, dim), (1.0, a.abs()), strict=True)]  # fmt: skip
    else:
        outputs = [("value", "value", y, y64, h, 1.0, None), ("grad", "grad", dx, dx64, h, 1.0, terms)]
    results = {}
    for what, kind, got, reference, argument, factor, scale in outputs:
        spacing = spacing_of(reference, dtype)
        context = Context(reference, spacing, argument, factor, scale, "_sum_dtype" in p64)
        allowed = allowed_error(variant.bound, kind, context, dtype, route)
        results[what] = _errors(got.detach(), reference, spacing, allowed, argument)
    return results


def _argument(variant: Variant, x64, p64: dict, dtype):
    """The member's argument h per element of x (for the bounds' regions), and generalized
    GELU's slope scale |Φ| + |x·φ/σ|."""
    import torch

    if "bias" in variant.params:
        return _rounded_sum(x64, p64["bias"], dtype, p64).detach(), None
    if variant.bound == "generalized":
        z = (x64 - p64["mu"]) / p64["sigma"]
        density = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        return z, _cdf64(z).abs() + (x64 * density / p64["sigma"]).abs()
    return x64, None


def _errors(got, reference, spacing, allowed, argument) -> dict:
    """Largest error in ulp of got's dtype (finite references), and its worst ratio to the
    allowed error, with the member's argument there."""
    import torch

    got = got.double()
    finite = reference.isfinite()
    # a non-finite reference must be met exactly (inf = inf; nan is left to the contract tests)
    error = torch.where(finite, (got - reference).abs(),
                        torch.where((got == reference) | reference.isnan(), 0.0, math.inf))  # fmt: skip
    ulp = (error / spacing)[finite]
    record = {"max_ulp": float(ulp.max()) if ulp.numel() else 0.0, "worst": None}
    if allowed is not None:
        ratio = torch.where(allowed.isinf() & error.isfinite(), 0.0, error / allowed)
        flat = ratio.reshape(-1)
        index = int(flat.argmax())
        record |= {"worst": float(flat[index]), "bad": int((flat > 1).sum()),
                   "at": float(argument.expand_as(ratio).reshape(-1)[index])}  # fmt: skip
    return record


# ============================================================================ part 1: accuracy


def part_accuracy(config: Config, recorder: Recorder) -> None:
    """Every variant × dtype × layout against its float64 oracle, fp32 first, then the half
    types, then 2^27 fp32 elements for the members with a kernel (the soft deadline cuts from
    the end)."""
    with interpreted(config):
        _accuracy(config, recorder)


def _accuracy(config: Config, recorder: Recorder) -> None:
    import torch

    chosen = selected_variants(config)
    chosen.sort(key=lambda v: not v.kernel)  # the kernels first: the GPU's own code
    recorder.notes["variants"] = [v.name for v in chosen]
    recorder.notes["bounds"] = {"EXACT_ULP": EXACT_ULP, "GEGLU_ULP": GEGLU_ULP,
                                "FORM_BOUNDS": FORM_BOUNDS_CUDA if config.cuda else FORM_BOUNDS,
                                "SWISH_RTOL_EPS": SWISH_RTOL_EPS}  # fmt: skip
    for variant in chosen:
        if variant.oracle is None and not variant.stochastic:
            recorder.add(variant.name, False,
                         "a public member without an oracle in tools/gpu_check.py: add it")
    chosen = [v for v in chosen if v.oracle is not None or v.stochastic]
    cases = [(layout, dtype, chosen)
             for dtype in (torch.float32, torch.bfloat16, torch.float16)
             for layout in layouts(config)
             # quick: the half types on two layouts (the layouts' code paths are dtype-blind)
             if dtype == torch.float32 or not config.quick or layout.name in ("rows", "channels_last")]  # fmt: skip
    cases.append((big_layout(config), torch.float32, [v for v in chosen if v.kernel]))
    for layout, dtype, members in cases:
        for variant in members:
            if recorder.out_of_time():
                continue
            name = f"{variant.name} {str(dtype)[6:]} {layout.name}"
            try:
                if variant.stochastic:
                    _check_stochastic(variant, layout, dtype, config, recorder, name)
                else:
                    results = _accuracy_case(variant, layout, dtype, config.device, judge(config))
                    _record_accuracy(recorder, name, variant, results)
            except torch.cuda.OutOfMemoryError as error:
                recorder.skip(name, f"out of memory: {str(error)[:120]}")
            if config.cuda and layout.numel > 2**24:
                torch.cuda.empty_cache()


def _accuracy_case(variant: Variant, layout: Layout, dtype, device: str, judge: str) -> dict:
    if variant.gated and layout.shape[layout.channel_dim] % 2:  # halves need an even split dim
        shape = list(layout.shape)
        shape[layout.channel_dim] += 1
        layout = Layout(layout.name, tuple(shape), layout.kind, layout.channel_dim)
    x = make_x(layout, dtype, device)
    params = make_params(variant.params, layout, dtype, device)
    if variant.gated:
        params["dim"] = layout.channel_dim
    return compare(variant, x, params, judge)


def _record_accuracy(recorder: Recorder, name: str, variant: Variant, results: dict) -> None:
    worst = [r["worst"] for r in results.values()]
    passed = None if None in worst else max(worst) <= 1.0
    parts = []
    for what, r in results.items():
        text = f"{what} {r['max_ulp']:.3g} ulp"
        if r["worst"] is not None and r["worst"] > 1:
            text += f" ({r['worst']:.3g}× bound at h={r['at']:.7g}, {r['bad']} over)"
        parts.append(text)
    detail = ", ".join(parts) + (" (no stated bound: measured)" if passed is None else "")
    recorder.add(name, passed, detail, bound=variant.bound, errors=results)


def _check_stochastic(variant, layout, dtype, config, recorder, name) -> None:
    """Training-mode stochastic GELU: every output is x or 0, the slope is 1 where x was kept
    and 0 where dropped, and the kept count is Σ Φ(x) within 5 standard deviations (x ≠ 0)."""
    import torch

    x = make_x(layout, dtype, config.device)
    y = variant.call(x, {})
    (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    x, y = x.detach(), y.detach()
    nonzero = x != 0
    kept = (y == x) & nonzero
    valid = bool(((y == x) | (y == 0)).all()) and bool(((dx == 1) == kept)[nonzero].all())
    probability = _cdf64(x.double())[nonzero]
    expected = float(probability.sum())
    deviation = math.sqrt(float((probability * (1 - probability)).sum())) + 1e-12
    z = (float(kept.sum()) - expected) / deviation
    recorder.add(name, valid and abs(z) <= 5, f"outputs x or 0, slope = mask: {valid}; kept "
                 f"count {z:+.2f} σ from Σ Φ(x)", z_score=z)  # fmt: skip


# ============================================================================ part 2: gradients


PARAMETER_MEMBERS = ("bias-gelu-none", "swish-tensor", "generalized")


def part_parameter_gradients(config: Config, recorder: Recorder) -> None:
    """dβ, db, dμ, dσ against float64 sums of the per-element terms, within the sums' rounding
    (2^-20 of Σ|terms|, half an ulp of the dtype, generalized GELU's z error), and bit-equal
    over two runs (no atomics: a fixed order of partial sums)."""
    import torch

    by_name = {v.name: v for v in selected_variants(config)}
    shapes = ([Layout("columns", (4, 64)),
               Layout("channels_last", (2, 8, 4, 4), "channels_last", 1)] if config.quick else
              [Layout("columns", (4096, 1024)), Layout("rows", (64, 256, 16, 16), "rows", 1),
               Layout("channels_last", (64, 256, 16, 16), "channels_last", 1),
               Layout("columns 2^26", (2**16, 1024))])  # fmt: skip
    with kernel_route(config):
        for name in PARAMETER_MEMBERS:
            if name not in by_name:
                continue
            variant = by_name[name]
            for layout in shapes:
                for dtype in (torch.float32, torch.bfloat16):
                    if recorder.out_of_time():
                        continue
                    _gradient_case(variant, layout, dtype, config, recorder)


# Off CUDA these parts run the kernels in Triton's interpreter (the parent sets TRITON_INTERPRET=1
# for them): the one-pass reductions exist only in the kernels, the CPU route sums in torch.
INTERPRETED_PARTS = ("parameter_gradients",)


def interpreted(config: Config):
    """:func:`kernel_route` where ``--interpret`` asks for it, else nothing."""
    return kernel_route(config) if config.interpret and not config.cuda else contextlib.nullcontext()


def judge(config: Config) -> str:
    """Whose bounds compare() applies: the kernels' when they run (CUDA, or interpreted)."""
    return "kernels" if config.interpret and not config.cuda else config.device


@contextlib.contextmanager
def kernel_route(config: Config):
    """On CPU: CPU tensors take the library's CUDA route, its kernels interpreted
    (:func:`gelus.bench.device_timing.cuda_route_on_cpu`); on CUDA: nothing to do."""
    if config.cuda:
        yield
        return
    import torch

    from gelus._triton import interpreting
    from gelus.bench.device_timing import cuda_route_on_cpu

    if not interpreting():
        raise RuntimeError("the kernels on CPU need TRITON_INTERPRET=1 before triton is imported")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the interpreter's numpy calls are small: threads only wait
    try:
        with cuda_route_on_cpu():
            yield
    finally:
        torch.set_num_threads(threads)


def _gradient_case(variant, layout, dtype, config, recorder) -> None:
    import torch

    device = config.device
    x = make_x(layout, dtype, device)
    params = make_params(variant.params, layout, dtype, device)
    grad = make_x(layout, dtype, device, seed=5).detach() / 3
    leaves = [x, *params.values()]
    runs = [torch.autograd.grad(variant.call(x, params), leaves, grad) for _ in range(2)]
    equal = all(torch.equal(a, b) for a, b in zip(*runs, strict=True))
    # the float64 terms: the oracle's gradient for a per-element copy of each parameter
    x64 = x.detach().double()
    full = {k: v.detach().double().expand(x.shape).clone().requires_grad_()
            for k, v in params.items()}  # fmt: skip
    terms = torch.autograd.grad(variant.oracle(x64, full, dtype), list(full.values()),
                                grad.double())  # fmt: skip
    term_error = 0.0
    if variant.bound == "generalized":  # z = (x − μ)·(1/σ) rounded 3× before φ(z) sees it
        z = (x64 - full["mu"].detach()) / full["sigma"].detach()
        term_error = (6 + 3 * z * z) * 2.0**-24
    figures, passed = {}, equal
    for (name, p), got, term in zip(params.items(), runs[0][1:], terms, strict=True):
        want = term.sum_to_size(p.shape)
        # the bound of test_triton_parameter_gradients._check_sums: the fp32 accumulation
        # (2^-20 of Σ|terms|), the final rounding to the dtype, the terms' own error
        bound = (2.0**-20 * term.abs().sum_to_size(p.shape) + torch.finfo(dtype).eps / 2 * want.abs()
                 + (term.abs() * term_error).sum_to_size(p.shape) + 1e-30)  # fmt: skip
        error = (got.double() - want).abs()
        figures[name] = {"worst": float((error / bound).max()),
                         "relative": float((error / want.abs().clamp(min=1e-30)).max())}  # fmt: skip
        passed = passed and figures[name]["worst"] <= 1.0 and bool(got.abs().sum() > 0)
    detail = ", ".join(f"d{k} {v['worst']:.3g}× bound" for k, v in figures.items())
    recorder.add(f"{variant.name} {str(dtype)[6:]} {layout.name}", passed,
                 f"{detail}; two runs bit-equal: {equal}", gradients=figures, bit_equal=equal)


# ============================================================================ part 3: CUDA graphs


def part_cuda_graphs(config: Config, recorder: Recorder) -> None:
    """Each variant's forward + backward captured into a CUDA graph; the replay equals the eager
    call bit for bit (stochastic GELU: the replay reuses its captured seed, so two replays are
    equal and its outputs are x or 0)."""
    import torch

    if not config.cuda:
        recorder.skip("every member", "needs CUDA")
        return
    layout = Layout("rows", (64, 1024)) if config.quick else Layout("rows", (1024, 1024))
    for variant in selected_variants(config):
        for dtype in (torch.float32, torch.bfloat16):
            if recorder.out_of_time():
                continue
            name = f"{variant.name} {str(dtype)[6:]}"
            try:
                _graph_case(variant, layout, dtype, recorder, name)
            except Exception as error:
                recorder.add(name, False, f"capture or replay failed: {_describe(error)[:300]}")
                torch.cuda.synchronize()


def _graph_case(variant, layout, dtype, recorder, name) -> None:
    import torch

    x = make_x(layout, dtype, "cuda")
    params = make_params(variant.params, layout, dtype, "cuda")
    call_params = dict(params, dim=-1) if variant.gated else params
    leaves = [x, *params.values()]

    def step():
        y = variant.call(x, call_params)
        return (y, *torch.autograd.grad(y, leaves, torch.ones_like(y)))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    graph.replay()
    torch.cuda.synchronize()
    replayed = [t.clone() for t in static]
    if variant.stochastic:
        graph.replay()
        torch.cuda.synchronize()
        again = all(torch.equal(a, b) for a, b in zip(replayed, static, strict=True))
        valid = bool(((replayed[0] == x.detach()) | (replayed[0] == 0)).all())
        recorder.add(name, again and valid, f"two replays equal: {again}; outputs x or 0: {valid}")
        return
    eager = step()
    equal = [torch.equal(a, b) for a, b in zip(replayed, eager, strict=True)]
    recorder.add(name, all(equal), f"replay = eager (value, gradients): {equal}")


# ============================================================================ part 4: launch limits


def part_launch_limits(config: Config, recorder: Recorder) -> None:
    """The shapes at CUDA's launch limits (grid y ≤ 65,535, int32 offsets), forward + backward,
    compared with the oracle on a sample of elements (the first, the last, a random set)."""
    import torch

    by_name = {v.name: v for v in selected_variants(config)}
    device = config.device
    quick = config.quick
    cases = [
        # GEGLU's grid was (outer, cdiv(half, BLOCK)): 2^26 1-D fp32 needs 65,536 blocks on y
        ("geglu 1-D 2^26 fp32", by_name.get("geglu-none"), (2**26 if not quick else 2**12,),
         torch.float32, {}),
        # the columns kernel past 4,194,240 channels: bias-GELU on (4, 2^24)
        ("bias-gelu (4, 2^24) fp32", by_name.get("bias-gelu-none"),
         (4, 2**24 if not quick else 2**10), torch.float32, {}),
        ("generalized (4, 2^24) bf16", by_name.get("generalized"),
         (4, 2**24 if not quick else 2**10), torch.bfloat16, {}),
        # more than 2^31 elements: int64 offsets
        ("gelu 2^31 + 2^20 bf16", by_name.get("gelu-none"),
         (2**31 + 2**20 if not quick else 2**12 + 3,), torch.bfloat16, {"huge": True}),
        # parameter views whose stride × channels reaches 2^31
        ("bias-gelu, bias stride 2^21 + 1", by_name.get("bias-gelu-none"),
         (64, 1024), torch.float32, {"stride": 2**21 + 1 if not quick else 17}),
        ("generalized, μ σ stride 2^21 + 1", by_name.get("generalized"),
         (64, 1024), torch.float32, {"stride": 2**21 + 1 if not quick else 17}),
        ("swish β stride 2^21 + 1", by_name.get("swish-tensor"),
         (64, 1024), torch.bfloat16, {"stride": 2**21 + 1 if not quick else 17}),
    ]  # fmt: skip
    for name, variant, shape, dtype, options in cases:
        if variant is None or recorder.out_of_time():
            continue  # a member left out by --only, or the soft deadline
        need = _bytes_needed(shape, dtype, options)
        if config.cuda:
            free, _ = torch.cuda.mem_get_info()
            if need > 0.9 * free:
                recorder.skip(name, f"needs ~{need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free")
                continue
        try:
            with interpreted(config):
                _limit_case(variant, shape, dtype, options, device, judge(config), recorder, name)
        except torch.cuda.OutOfMemoryError as error:
            recorder.skip(name, f"out of memory: {str(error)[:120]}")
        except Exception as error:
            recorder.add(name, False, f"failed: {_describe(error)[:400]}")
            if config.cuda:
                torch.cuda.synchronize()
        if config.cuda:
            torch.cuda.empty_cache()


def _bytes_needed(shape, dtype, options) -> int:
    n = math.prod(shape)
    size = {"torch.float32": 4}.get(str(dtype), 2)
    stride_bytes = options.get("stride", 0) * shape[-1] * size * 2
    return 5 * n * size + stride_bytes  # x, y, dy, dx and the float32 input noise


def _limit_case(variant, shape, dtype, options, device, bounds, recorder, name) -> None:
    """Forward + backward at ``shape`` (every parameter a per-channel vector along the last dim,
    a view of every stride-th element of a long buffer with ``options["stride"]``); value and
    input gradient against the oracle on the first and last 4096 outputs and 4096 random ones."""
    import torch

    generator = torch.Generator(device=device).manual_seed(3)
    x = (torch.randn(shape, device=device, generator=generator) * 3).to(dtype).requires_grad_()
    params = {}
    stride = options.get("stride")
    channels = shape[-1]
    for pname in variant.params:
        center = {"bias": 0.3, "beta": 1.2, "mu": 0.2, "sigma": 1.3}[pname]
        values = (center + 0.1 * torch.randn(channels, device=device, generator=generator)).to(dtype)
        if stride:
            base = torch.zeros(channels * stride, device=device, dtype=dtype)
            base[::stride] = values
            params[pname] = base[::stride].detach().requires_grad_()
        else:
            params[pname] = values.requires_grad_()
    call_params = dict(params, dim=-1) if variant.gated else params
    y = variant.call(x, call_params)
    got = torch.autograd.grad(y, [x, *params.values()], torch.ones_like(y))
    n = y.numel()
    picks = torch.cat([torch.arange(min(4096, n), device=device),
                       torch.arange(max(0, n - 4096), n, device=device),
                       torch.randint(n, (4096,), device=device, generator=generator)])  # fmt: skip
    flat_x, flat_dx = x.detach().reshape(-1), got[0].reshape(-1)
    if variant.gated:  # 1-D: output i is a[i]·g(b[i]), a = x[:n], b = x[n:]
        sample = torch.cat([flat_x[picks], flat_x[n + picks]]).double().requires_grad_()
        p64 = {"dim": 0}
        got_y, got_dx = y.detach()[picks], torch.cat([flat_dx[picks], flat_dx[n + picks]])
    else:
        sample = flat_x[picks].double().requires_grad_()
        channel = picks % channels
        p64 = {k: v.detach().double()[channel] for k, v in params.items()}
        got_y, got_dx = y.detach().reshape(-1)[picks], flat_dx[picks]
    sampled = _with_call(variant, lambda x_, p_: _precomputed(got_y, got_dx)(x_))
    results = compare(sampled, sample.detach().to(dtype).requires_grad_(), p64, bounds)
    finite = all(bool(g.isfinite().all()) for g in got[1:])
    worst = max(r["worst"] for r in results.values())
    detail = ", ".join(f"{what} {r['max_ulp']:.3g} ulp ({r['worst']:.2f}× bound)"
                       for what, r in results.items())  # fmt: skip
    recorder.add(name, worst <= 1.0 and finite, f"{detail} on {picks.numel()} sampled outputs; "
                 f"parameter gradients finite: {finite}", errors=results, elements=x.numel())  # fmt: skip


# ============================================================================ part 5: timing


def part_timing(config: Config, recorder: Recorder) -> None:
    """``gelus.bench.kernels_cuda.run`` at 2^24 and 2^28 (2^10 and 2^12 quick), fp32 and bf16:
    every member's forward + backward against F.gelu and the composition it replaces, paired
    rounds on the device clock; the targets judged as the bench's report judges them."""
    from gelus.bench import device_timing, kernels_cuda

    sizes = (2**10, 2**12) if config.quick else (2**24, 2**28)
    rounds = 2 if config.quick else 7
    def stubbed():
        return device_timing.stubbed_launches() if not config.cuda else contextlib.nullcontext()

    recorder.notes["sizes"] = list(sizes)
    recorder.notes["clock"] = ("CUDA graphs between CUDA events" if config.cuda else
                               "CPU wall clock, the CUDA route with its Triton launches stubbed: "
                               "the code paths, not a speed")  # fmt: skip
    for dtype in ("float32", "bfloat16"):
        for size in sizes:
            if recorder.out_of_time():
                continue
            with stubbed():
                results = kernels_cuda.run([size], (dtype,), ("normal",), rounds=rounds,
                                           device=config.device, host_calls=1 if config.quick else 3,
                                           min_seconds=0.0 if config.quick else 2e-3,
                                           log=recorder.log)  # fmt: skip
            for row in timing_targets(results, large=sizes[-1]):
                _record_target(recorder, row, judged=config.cuda)


def timing_targets(results, large: int) -> list[dict]:
    """Issue 30's targets, kept by issue 41: every member ≤ 1.05× F.gelu at the large size and
    ≤ 1.10× below it (the Φ-based members in fp32 ≤ 1.10× at both); the fused members
    (bias-GELU, GEGLU, generalized GELU, tensor-β Swish) ≤ 0.8× the torch composition they
    replace. Rows as :func:`gelus.bench.kernels_cuda_report.target_rows` makes them."""
    from gelus.bench.kernels_cuda import MEMBERS
    from gelus.bench.kernels_cuda_report import _ratio_target

    by_key = {m.key: m for m in MEMBERS}
    rows = []
    for result in results:
        member = by_key[result.key]
        wide = result.size != large or (member.phi and result.dtype == "float32")
        rows.append(_ratio_target("member ÷ F.gelu", result, "F.gelu", 1.10 if wide else 1.05))
        if member.per_channel or member.key == "geglu":
            rows.append(_ratio_target("fused ÷ the torch it replaces", result, "torch", 0.8))
    return rows


def _record_target(recorder: Recorder, row: dict, judged: bool) -> None:
    from gelus.bench.timing import verdict

    mark = verdict(row)
    passed = {"✓": True, "✗": False}.get(mark) if judged else None
    name = f"{row['target']}: {row['key']} {row['dtype']} {row['size']}"
    value = row.get("value")
    recorder.add(name, passed, f"{value:.3f} ≤ {row['limit']} {mark} (middle half "
                 f"{row.get('q1', value):.3f}–{row.get('q3', value):.3f})" if value else "no rounds",
                 ratio=value, limit=row["limit"], verdict=mark, rounds=row.get("rounds"))  # fmt: skip


# ============================================================================ part 6: compiled


def part_compiled(config: Config, recorder: Recorder) -> None:
    """The members under ``torch.compile`` (the compiled route: each pointwise member's
    composition, fused by inductor on CUDA): all members' forwards in one compiled function per
    dtype (one forward and one backward graph), value and input gradient against the float64
    oracle with the eager bounds; then each kernel member's compiled forward + backward timed
    against compiled and eager F.gelu."""
    import torch

    chosen = [v for v in selected_variants(config) if v.oracle is not None]
    layout = Layout("rows", (4, 1024)) if config.quick else Layout("rows", (4096, 1024))
    # fp32's accuracy and time first, then bf16's, then fp16's accuracy (the deadline cuts last)
    steps = [(_compiled_accuracy, torch.float32), (_compiled_timing, torch.float32)]
    if not config.quick:
        steps += [(_compiled_accuracy, torch.bfloat16), (_compiled_timing, torch.bfloat16),
                  (_compiled_accuracy, torch.float16)]  # fmt: skip
    for step, dtype in steps:
        if recorder.out_of_time():
            continue
        if step is _compiled_accuracy:
            _compiled_accuracy(chosen, layout, dtype, config, recorder)
        else:
            _compiled_timing(config, recorder, dtype)


def _compiled_accuracy(chosen, layout, dtype, config, recorder) -> None:
    import torch

    torch.compiler.reset()
    inputs = {v.name: _compiled_input(v, layout, dtype, config.device) for v in chosen}

    def forward_all(inputs):
        return {v.name: v.call(*inputs[v.name]) for v in chosen}

    compiled = torch.compile(forward_all, backend=config.compile_backend, dynamic=False)
    label = str(dtype).removeprefix("torch.")
    start = time.perf_counter()
    try:
        outputs = compiled(inputs)
        names = list(outputs)
        grads = torch.autograd.grad([outputs[n] for n in names], [inputs[n][0] for n in names],
                                    [torch.ones_like(outputs[n]) for n in names])  # fmt: skip
    except Exception as error:
        recorder.add(f"compiled {label}", False, f"failed: {_describe(error)[:400]}")
        return
    seconds = time.perf_counter() - start
    recorder.add(f"compiled {label}", None, f"{len(chosen)} members, forward and backward "
                 f"compiled in {seconds:.1f} s", compile_s=seconds)  # fmt: skip
    for variant, dx in zip(chosen, grads, strict=True):
        x, params = inputs[variant.name]
        y = outputs[variant.name].detach()
        replay = _precomputed(y, dx)
        results = compare(_with_call(variant, lambda x_, p_, replay=replay: replay(x_)), x,
                          params, config.device, compiled=True)  # fmt: skip
        _record_accuracy(recorder, f"compiled {variant.name} {label}", variant, results)


def _with_call(variant: Variant, call) -> Variant:
    import dataclasses

    return dataclasses.replace(variant, call=call)


def _precomputed(y, dx):
    """x -> y with backward dx (for upstream gradient 1): compare() judging outputs that a
    compiled function computed."""
    import torch

    class Precomputed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return y.clone()

        @staticmethod
        def backward(ctx, grad):
            return dx

    return Precomputed.apply


def _compiled_input(variant, layout, dtype, device):
    if variant.gated and layout.shape[-1] % 2:
        layout = Layout(layout.name, (*layout.shape[:-1], layout.shape[-1] + 1))
    x = make_x(layout, dtype, device)
    params = make_params(variant.params, layout, dtype, device)
    if variant.gated:
        params["dim"] = -1
    return x, params


def _compiled_timing(config: Config, recorder: Recorder, dtype) -> None:
    """Compiled member fwd+bwd ÷ compiled F.gelu and ÷ eager F.gelu (paired rounds, device
    clock; ≤ 1.10×, issue 30's compiled targets), at 2^24 (2^12 quick), in kernels_cuda's order
    of members (the soft deadline cuts the tail)."""
    import torch
    import torch.nn.functional as F

    from gelus.bench import device_timing, kernels_cuda
    from gelus.bench.timing import interleaved_rounds, paired_ratios, spread, verdict

    size = 2**12 if config.quick else 2**24
    members = kernels_cuda.MEMBERS[:2] if config.quick else kernels_cuda.MEMBERS
    rounds, min_seconds = (2, 0.0) if config.quick else (7, 2e-3)
    torch.compiler.reset()
    case = kernels_cuda.Case.make(size, dtype, "normal", config.device)
    gelu_compiled = torch.compile(lambda x, p: F.gelu(x), backend=config.compile_backend,
                                  dynamic=False)  # fmt: skip
    baselines = {"F.gelu": case.forward_backward(lambda x, p: F.gelu(x), ()),
                 "F.gelu compiled": case.forward_backward(gelu_compiled, ())}  # fmt: skip
    for member in members:
        if recorder.out_of_time():
            continue
        compiled = torch.compile(member.call, backend=config.compile_backend, dynamic=False)
        calls = dict(baselines, member=case.forward_backward(compiled, member.params))
        replays = {}
        for role, fn in calls.items():
            fn()  # compiles, outside the timing
            replays[role] = device_timing.replayable(fn, config.device, size)
        times = interleaved_rounds(replays, rounds, min_seconds,
                                   timer=device_timing.device_timer(config.device))  # fmt: skip
        for against in ("F.gelu compiled", "F.gelu"):
            row = {"limit": 1.10, "value": None} | spread(
                paired_ratios(times["member"], times[against]))  # fmt: skip
            mark = verdict(row)
            passed = {"✓": True, "✗": False}.get(mark) if config.cuda else None
            recorder.add(f"compiled {member.key} {str(dtype)[6:]} ÷ {against}", passed,
                         f"{row['value']:.3f} ≤ 1.10 {mark}", ratio=row["value"], limit=1.10,
                         verdict=mark, method=replays["member"].method)  # fmt: skip


# ============================================================================ part 7: GPT-2 step


def part_gpt2_step(config: Config, recorder: Recorder) -> None:
    """``gelus.bench.gpt2_step.measure``: nn.GELU() (plain) against gelus's GELU (what
    ``gelus.patch`` puts in), eager and compiled, interleaved rounds; ≤ 1.01× in each mode."""
    from gelus.bench import gpt2_step
    from gelus.bench.timing import median, verdict

    if config.quick:
        model = gpt2_step.GPTConfig(layers=1, width=32, heads=2, vocab=64, context=16, batch=2)
        steps, warmup = 2, 1
    else:
        model, steps, warmup = gpt2_step.GPTConfig(), 10, 2
    settings = gpt2_step.CompileSettings(backend=config.compile_backend)
    recorder.notes["model"] = str(model)
    # eager first, recorded before the compiled rows compile (minutes of inductor on GPT-2):
    # each mode's target pairs rows of that mode only, so nothing is lost by measuring apart
    for mode in ("eager", "compiled"):
        if recorder.out_of_time():
            continue
        rows, times = gpt2_step.measure(model, ["torch-exact", "gelu"], [mode], steps, warmup,
                                        config.device, settings, log=recorder.log)  # fmt: skip
        recorder.log(gpt2_step.report(rows, times, [mode]))
        for row in rows:
            recorder.add(f"step {row.key}", None, f"{1e3 * median(times[row.key]):.2f} ms",
                         compile_s=row.compile_seconds, graphs=row.graphs,
                         graph_breaks=row.graph_breaks, rounds=times[row.key])  # fmt: skip
        for target in gpt2_step.target_rows(times, [mode]):
            mark = verdict(target)
            passed = {"✓": True, "✗": False}.get(mark) if config.cuda else None
            recorder.add(target["target"], passed, f"{target['value']:.3f} ≤ {target['limit']} "
                         f"{mark}", ratio=target["value"], verdict=mark)  # fmt: skip


PART_FUNCTIONS = {
    "accuracy": part_accuracy,
    "parameter_gradients": part_parameter_gradients,
    "cuda_graphs": part_cuda_graphs,
    "launch_limits": part_launch_limits,
    "timing": part_timing,
    "compiled": part_compiled,
    "gpt2_step": part_gpt2_step,
}


if __name__ == "__main__":
    sys.exit(main())
