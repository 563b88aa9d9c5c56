"""``gelus bench``: ``kernels`` (activation speed and memory), ``training`` (training throughput)
and ``transformer`` (the transformer engine's step)."""

import argparse
import importlib
import json
import sys
import time
from dataclasses import asdict

from gelus.bench.timing import parse_sizes
from gelus.experiments.files import atomic_write

__all__ = ["check_json_path", "kernels_cuda_main", "kernels_main", "parse_sizes", "register"]

DEFAULT_SIZES = "2^16,2^20,2^24"
QUICK_SIZES = "2^16,2^20"


def register(subparsers) -> None:
    """Add ``gelus bench`` with its ``kernels`` and ``training`` subcommands."""
    bench = subparsers.add_parser(
        "bench",
        help="benchmarks: kernels, training, transformer",
        description="Time the activations alone (kernels), the paper's models in training "
        "(training), or the transformer engine's step (transformer).",
    )
    commands = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")

    kernels = commands.add_parser(
        "kernels",
        help="every activation vs torch's F.gelu and a copy, eager and compiled",
        description="Forward and forward+backward time of every member of the family as a ratio "
        "to torch's F.gelu (same mode) and to y.copy_(x), measured in one run with rounds "
        "interleaved across candidates (median of rounds), plus the bytes kept for backward.",
    )
    _kernels_arguments(kernels)
    kernels.set_defaults(func=kernels_main)

    training = commands.add_parser(
        "training",
        help="training throughput of the paper's models",
        description="The experiment engine's training time on the mnist-classification grid "
        "against the seed-004 loop and a batched matmul: s/model-epoch, speed-up, GFLOP/s.",
        epilog="The transformer presets' engine, against a plain loop and the bmm rate: "
        "gelus bench transformer.",
    )
    training.set_defaults(func=_training_main)
    importlib.import_module("gelus.bench.training").add_arguments(training)

    transformer = commands.add_parser(
        "transformer",
        help="the transformer engine's step vs a plain loop and the bmm rate, per activation",
        description="Time one training step of the transformer presets' engine per activation, "
        "against a plain PyTorch loop and the batched-matmul rate of the machine.",
    )
    transformer.set_defaults(func=_transformer_main)
    importlib.import_module("gelus.bench.transformer").add_arguments(transformer)


def _kernels_arguments(kernels: argparse.ArgumentParser) -> None:
    """The options of ``gelus bench kernels`` (CPU rows, and the CUDA bench's with ``--device``)."""
    kernels.add_argument(
        "--sizes",
        default=None,
        help=f"element counts, e.g. 2^16,2^20 or 65536 (default {DEFAULT_SIZES})",
    )
    kernels.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7)")
    kernels.add_argument(
        "--members", default=None, help="comma-separated rows to measure (default: all); see --list"
    )
    kernels.add_argument("--list", action="store_true", help="list the row names and exit")
    kernels.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    kernels.add_argument(
        "--compile-backend", default="inductor", help="torch.compile backend (default inductor)"
    )
    kernels.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    kernels.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: sizes {QUICK_SIZES}, 5 rounds, short rounds, no compile",
    )
    kernels.add_argument("--json", metavar="PATH", help="write the raw results as JSON")
    kernels.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu (default): the library's CPU routes; cuda: the public calls with autograd on "
        "the GPU against F.gelu and the torch each member replaces, device and host time apart, "
        "with issue 30's target verdicts (gelus.bench.kernels_cuda; --sizes (default "
        "2^16,2^20,2^24,2^28), --rounds (default 15), --members, --inputs, --json apply)",
    )
    kernels.add_argument(
        "--inputs",
        default=None,
        help="--device cuda: input distributions, normal and/or uniform (default normal,uniform)",
    )
    kernels.add_argument(
        "--host-only",
        action="store_true",
        help="only the host time of one forward + backward per member, with the Triton launches "
        "stubbed (and, on cuda, real): runs without a GPU, the CUDA route taken on CPU tensors",
    )


def _training_main(args: argparse.Namespace) -> int:
    check_json_path(getattr(args, "json", None))
    return importlib.import_module("gelus.bench.training").main(args)


def _transformer_main(args: argparse.Namespace) -> int:
    check_json_path(getattr(args, "json", None))
    return importlib.import_module("gelus.bench.transformer").main(args)


def check_json_path(path: str | None) -> None:
    """CommandError naming ``--json PATH`` when the results could not be written there: checked
    before a benchmark runs (minutes), not after it."""
    import os
    from pathlib import Path

    from gelus.experiments.errors import CommandError

    if path is None:
        return
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise CommandError(
            f"--json {path}: its folder {folder} {what}; create it or give another path"
        )
    if target.is_dir():
        raise CommandError(f"--json {path} is a folder; give a file name in it")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CommandError(f"--json {path}: its folder {folder} is not writable; give another path")


def _select(members: str | None, candidates):
    from gelus.experiments.errors import CommandError

    by_key = {c.key: c for c in candidates}
    if members is None:
        return candidates
    wanted = [m.strip() for m in members.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in by_key]
    if unknown or not wanted:
        raise CommandError(
            f"unknown --members {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(by_key)}"
        )
    # The copy and the F.gelu of each selected mode are the baselines every ratio needs.
    needed = {"copy", "torch-gelu"} | set(wanted) | {by_key[m].reference for m in wanted}
    return [c for c in candidates if c.key in needed]


def _log(message: str) -> None:
    """A progress line, on stderr (the tables go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def _write_json(path: str, payload: dict, **options) -> None:
    with atomic_write(path, "w") as handle:
        json.dump(payload, handle, indent=1, **options)


def _kernels_settings(args: argparse.Namespace, candidates) -> tuple[list[int], int, list, bool]:
    """(sizes, rounds, selected rows, compile) of ``gelus bench kernels`` on CPU, checked."""
    from gelus.experiments.errors import CommandError

    sizes = parse_sizes(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 7)
    if rounds < 1:
        raise CommandError(f"--rounds {rounds} must be at least 1 (medians want 5 or more)")
    if args.threads < 1:
        raise CommandError(f"--threads {args.threads} must be at least 1")
    return sizes, rounds, _select(args.members, candidates), not (args.no_compile or args.quick)


def kernels_main(args: argparse.Namespace, out=None) -> int:
    """Run ``gelus bench kernels`` with parsed ``args``; print the tables to ``out`` (stdout)."""
    import torch

    from gelus.bench import kernels

    out = out or sys.stdout
    check_json_path(getattr(args, "json", None))
    if args.device == "cuda" or args.host_only:
        return kernels_cuda_main(args, out)
    candidates = kernels.candidates()
    if args.list:
        for c in candidates:
            print(f"{c.key:20} {c.label} ({c.kind})", file=out)
        return 0
    sizes, rounds, selected, compile = _kernels_settings(args, candidates)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        environment = kernels.environment()
        start = time.perf_counter()
        _log(
            f"gelus bench kernels: {len(selected)} rows, sizes "
            f"{', '.join(kernels.size_name(s) for s in sizes)}, {rounds} rounds, "
            f"{'compiled and eager' if compile else 'eager only'}"
        )
        results = kernels.run(
            selected,
            sizes,
            rounds,
            compile=compile,
            backend=args.compile_backend,
            min_seconds=1e-3 if args.quick else 5e-3,
            log=_log,
        )
        elapsed = time.perf_counter() - start
    finally:
        torch.set_num_threads(previous_threads)
    report = kernels.Report(results, selected)
    _print_kernels(report, results, environment, rounds, elapsed, compile, out)
    if args.json:
        settings = {"sizes": sizes, "rounds": rounds, "compile": compile}
        settings |= {"backend": args.compile_backend, "elapsed_seconds": elapsed}
        payload = {
            "environment": environment,
            "settings": settings,
            "rows": [_row_record(c) for c in selected],
            "results": [asdict(r) for r in results],
            "targets": report.target_rows(),
        }
        _write_json(args.json, payload, default=repr)
    return 1 if any(r.error for r in results) else 0


def _print_kernels(report, results, environment, rounds, elapsed, compile, out) -> None:
    """The CPU bench's header line, tables and errors, to ``out``."""
    from gelus.bench import kernels

    print(
        f"fp32, {environment['threads']} thread(s), torch {environment['packages']['torch']}, "
        f"gelus {environment['code_version']}, {environment['date']}, "
        f"load average {environment['load_average_1min']:.1f} at start; "
        f"median of {rounds} interleaved rounds; {elapsed:.0f} s in all. "
        "`fwd` allocates its output (a fresh large tensor pays page faults); "
        "`fwd out=` writes into a preallocated one (n/a: the API has no out=); "
        "saved = bytes kept for backward ÷ the input's bytes.\n",
        file=out,
    )
    print(report.text(compile), file=out)
    for r in results:
        if r.error:
            mode = "compiled" if r.compiled else "eager"
            print(f"\nerror: {r.key} ({mode}, {kernels.size_name(r.size)}): {r.error}", file=out)


def _row_record(candidate) -> dict[str, object]:
    fields = ("key", "label", "reference", "kind", "params", "doubled_input", "backward", "compile")
    record = {name: getattr(candidate, name) for name in fields}
    return record | {"has_out": candidate.out_function is not None}


CUDA_SIZES = "2^16,2^20,2^24,2^28"
CUDA_ROUNDS = 15


def _cuda_members(text: str | None):
    from gelus.bench.kernels_cuda import MEMBERS
    from gelus.experiments.errors import CommandError

    if text is None:
        return list(MEMBERS)
    wanted = [m.strip() for m in text.split(",") if m.strip()]
    known = {m.key for m in MEMBERS}
    if not wanted or any(m not in known for m in wanted):
        raise CommandError(
            f"unknown --members in {text!r}; choose from {', '.join(m.key for m in MEMBERS)}"
        )
    return [m for m in MEMBERS if m.key in wanted]


def _cuda_inputs(text: str | None) -> tuple[str, ...]:
    from gelus.experiments.errors import CommandError

    kinds = tuple(k.strip() for k in (text or "normal,uniform").split(",") if k.strip())
    if not kinds or any(k not in ("normal", "uniform") for k in kinds):
        raise CommandError(f"--inputs {text!r}: choose normal, uniform or normal,uniform")
    return kinds


def _check_cuda_device(device: str, host_only: bool) -> None:
    import torch

    from gelus._triton import available, interpreting
    from gelus.experiments.errors import CommandError

    if device == "cuda" and not torch.cuda.is_available():
        raise CommandError("--device cuda: no CUDA device is visible to torch; use --device cpu")
    if device == "cuda" and not available(torch.empty(0, device=device)):
        raise CommandError("the Triton kernels cannot run on cuda: install triton")
    if device == "cpu" and not (host_only or interpreting()):
        raise CommandError(
            "on CPU the CUDA route's kernels run only in Triton's interpreter "
            "(TRITON_INTERPRET=1); --host-only needs no interpreter (the launches are stubbed)"
        )


def _print_cuda_header(device: str, host_only: bool, rounds: int, out) -> str:
    """Print the CUDA bench's opening line to ``out``; returns where it runs (:func:`_where`)."""
    import torch
    import triton  # (after _check_cuda_device, which says how to install it)

    where = _where(device, host_only)
    what = "host time only" if host_only else f"{rounds} paired rounds"
    print(
        f"gelus bench kernels --device {device}{' --host-only' if host_only else ''}: {where}; "
        f"torch {torch.__version__}, triton {triton.__version__}; public calls with autograd, "
        f"forward + backward; {what}\n",
        file=out,
    )
    return where


def _where(device: str, host_only: bool) -> str:
    """What the CUDA bench's times are of: the GPU's name, or the CPU proxy it runs on."""
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name()
    if host_only:
        return (
            "CPU, the CUDA route on CPU tensors with the Triton launches stubbed: a proxy of "
            "the host time on CUDA"
        )
    return "CPU, the CUDA route in Triton's interpreter: the times say nothing about speed"


def kernels_cuda_main(args: argparse.Namespace, out) -> int:
    """``gelus bench kernels --device cuda [--host-only]`` (:mod:`gelus.bench.kernels_cuda`):
    print the tables and the target verdicts to ``out``."""
    import torch

    from gelus.bench import kernels_cuda_report as report
    from gelus.bench.kernels_cuda import host_rows, run, size_label
    from gelus.experiments.errors import CommandError

    device, host_only = args.device, getattr(args, "host_only", False)
    members = _cuda_members(args.members)
    if getattr(args, "list", False):
        for m in members:
            against = "F.gelu" + (f" and {m.composition_label}" if m.composition else "")
            print(f"{m.key:14} {m.label} (vs {against})", file=out)
        return 0
    _check_cuda_device(device, host_only)
    sizes = parse_sizes(args.sizes or CUDA_SIZES)
    rounds = args.rounds if args.rounds is not None else CUDA_ROUNDS
    if rounds < 1:
        raise CommandError(f"--rounds {rounds} must be at least 1 (medians want 5 or more)")
    inputs = _cuda_inputs(getattr(args, "inputs", None))
    where = _print_cuda_header(device, host_only, rounds, out)
    results = []
    if not host_only:
        # in the interpreter (CPU) a call takes ~0.1 s and its time means nothing: few host calls
        host_calls = 30 if device == "cuda" else 2
        results = run(
            sizes,
            inputs=inputs,
            members=members,
            rounds=rounds,
            device=device,
            host_calls=host_calls,
            log=_log,
        )
        print(report.format_results(results), file=out)
    host = host_rows(device, members, size=min(sizes))
    print(
        f"\n### Host time of one forward + backward ({size_label(min(sizes))} elements, "
        "float32; median of 200 calls)\n",
        file=out,
    )
    print(report.format_host(host), file=out)
    targets = report.target_rows(results, host)
    print("\n### Targets (issue 30), device time unless said\n", file=out)
    print(report.format_targets(targets), file=out)
    if getattr(args, "json", None):
        payload = {
            "device": where,
            "torch": torch.__version__,
            "rounds": rounds,
            "results": [asdict(r) for r in results],
            "host": host,
            "targets": targets,
        }
        _write_json(args.json, payload)
    return 0
