"""`gelus report RUN_DIR` and `gelus reproduce`: from records to a readable report."""

import argparse
import sys
from pathlib import Path
from typing import Any

from gelus.experiments.cli import add_executor_arguments, make_executor

__all__ = ["missing_experiments", "register", "reproduce"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """``gelus report``, ``gelus export`` and ``gelus reproduce``."""
    _register_report(subparsers)
    _register_export(subparsers)
    _register_reproduce(subparsers)


def _register_report(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report",
        help="write the HTML and Markdown report of a run directory",
        description="Write the HTML and Markdown report of RUN_DIR's records: each experiment's "
        "result against the paper's, with paired tests, figures and the evidence behind them.",
    )
    report.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a directory holding records.sqlite"
    )
    report.add_argument(
        "--out", type=Path, default=None, help="output directory (default: RUN_DIR/report)"
    )
    report.add_argument(
        "--seed", type=int, default=0, help="seed of the bootstrap's random generator (default: 0)"
    )
    report.add_argument(
        "--select",
        choices=("protocol", "val-loss-last", "val-loss-best", "val-error-last", "val-error-best"),
        default="protocol",
        help="how the learning rate is chosen on validation: each preset's declared protocol "
        "(default), or one rule for every experiment (metric, at the last or the best epoch); "
        "every verdict is also checked under each rule and marked where they disagree",
    )
    report.set_defaults(func=_report)


def _register_export(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export",
        help="write a run directory's records as tidy CSV (or Parquet) tables",
        description="Write RUN's records as tidy tables, one row per observation (runs, "
        "records per epoch and metric, the report's verdicts), in CSV or Parquet.",
    )
    export.add_argument(
        "run_dir", type=Path, metavar="RUN", help="a directory holding records.sqlite"
    )
    export.add_argument("--format", choices=("csv", "parquet"), default="csv")
    export.add_argument(
        "--out", type=Path, default=None, help="output directory (default: RUN/export)"
    )
    export.set_defaults(func=_export)


def _register_reproduce(subparsers: argparse._SubParsersAction) -> None:
    repro = subparsers.add_parser(
        "reproduce",
        help="run every experiment whose data is present, then write the report",
        description="Run every experiment preset whose dataset is present (the runs already "
        "finished are kept), then write the report; --plan prices it without training.",
    )
    repro.add_argument(
        "--quick",
        action="store_true",
        help="fewer epochs and seeds (each preset's quick settings): minutes, not days",
    )
    repro.add_argument(
        "--out", type=Path, default=None, help="output directory (default: runs/quick or runs/full)"
    )
    repro.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the datasets are (default: gelus.data's search path)",
    )
    repro.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel worker processes (default: the engine's choice)",
    )
    repro.add_argument(
        "--plan",
        action="store_true",
        help="run nothing: price every preset by timed steps of its network on --device and print "
        "the wall time of the whole paper on 1 and on --plan-devices devices",
    )
    repro.add_argument(
        "--device",
        default="auto",
        help="where to train (and price): auto, cpu or cuda (default auto)",
    )
    repro.add_argument(
        "--plan-devices",
        default="1,4,8",
        metavar="N,N",
        help="device counts the plan prices (GPUs of a Ray cluster, or workers; default 1,4,8)",
    )
    repro.add_argument(
        "--experiments",
        nargs="+",
        metavar="NAME",
        default=None,
        help="only these presets (default: all, in the paper's order)",
    )
    add_executor_arguments(repro)
    repro.set_defaults(func=_reproduce, threads=1)


def _prepare_matplotlib() -> None:
    import matplotlib

    matplotlib.use("Agg")


def _data_status(preset: Any, data_dir: Path | None) -> Any:
    """Whether ``preset`` can run here: its dataset or its declared substitute is present."""
    from gelus.report.sources import dataset_status

    status = dataset_status(preset.dataset, data_dir)
    if not status.present and preset.substitute:
        status = status._replace(present=dataset_status(preset.substitute, data_dir).present)
    return status


def missing_experiments(recorded: set[str], data_dir: Path | None = None) -> list[Any]:
    """Presets with no records, each with its dataset and how to get it (or run it)."""
    from gelus.report.analysis import Missing
    from gelus.report.sources import presets

    missing = []
    for name, preset in presets().items():
        if name in recorded or not preset.in_reproduce:  # an opt-in preset is not missing
            continue
        status = _data_status(preset, data_dir)
        how = (
            f"the data is present; run `gelus run {name}`" if status.present else status.how_to_get
        )
        missing.append(Missing(name, status.name, how))
    return missing


def _load(run_dir: Path, command: str = "report") -> Any:
    """The records, runs and step timings of ``run_dir`` (``sources.Loaded``), saying on stderr
    which runs (or timings) were left out and why."""
    from gelus.report.sources import load

    loaded = load(run_dir)
    for line in loaded.skipped[:5]:
        print(f"gelus {command}: warning: {line}", file=sys.stderr)
    if len(loaded.skipped) > 5:
        print(
            f"gelus {command}: warning: {len(loaded.skipped) - 5} more left out",
            file=sys.stderr,
        )
    return loaded


def _report(args: argparse.Namespace) -> int:
    _prepare_matplotlib()
    import dataclasses

    from gelus.experiments.errors import CommandError
    from gelus.report.render import write_report
    from gelus.report.sources import presets
    from gelus.report.stats import HEADLINE

    records, runs, _, step_times = _load(args.run_dir)
    if not records:
        raise CommandError(
            f"{args.run_dir}/records.sqlite holds no records yet: let `gelus run` finish an epoch first"
        )
    missing = missing_experiments({r.experiment for r in records})
    out = args.out or args.run_dir / "report"
    html_path, md_path = write_report(
        records,
        runs,
        out,
        presets=presets(),
        missing=missing,
        source=str(args.run_dir),
        rule=None if args.select == "protocol" else args.select,
        step_times=step_times,
        aggregate=dataclasses.replace(HEADLINE, seed=args.seed),  # --seed: the bootstrap's
    )
    print(f"wrote {html_path}\nwrote {md_path}")
    return 0


def reproduce(
    out: Path,
    *,
    quick: bool,
    data_dir: Path | None = None,
    workers: int | None = None,
    executor=None,
    device: str = "auto",
    experiments: list[str] | None = None,
) -> tuple[Path, Path]:
    """Run every preset (or those named in ``experiments``) whose data is present into ``out``,
    then write ``out/report``.

    A preset whose data (and substitute) is missing is skipped and listed in the report with how
    to get its data. ``executor``: where the jobs run (None: local worker processes).
    """
    from gelus.experiments.cli import run_with_progress
    from gelus.experiments.errors import CommandError
    from gelus.experiments.run import RunOptions
    from gelus.report.analysis import Missing
    from gelus.report.render import write_report
    from gelus.report.sources import presets

    out.mkdir(parents=True, exist_ok=True)
    missing = []
    for name, preset in presets().items():
        if name not in (experiments or [n for n, p in presets().items() if p.in_reproduce]):
            continue
        status = _data_status(preset, data_dir)
        if not status.present:
            print(f"gelus reproduce: {name} skipped: no {status.name} data here")
            missing.append(Missing(name, status.name, status.how_to_get))
            continue
        # device "auto": CUDA for every engine where there is a GPU
        options = RunOptions(
            name, out, workers=workers, data_dir=data_dir, quick=quick, device=device
        )
        run_with_progress(options, executor)
    if not (out / "records.sqlite").is_file():
        names = ", ".join(m.experiment for m in missing) or "none"
        raise CommandError(
            f"no experiment could run (missing data for: {names}); "
            "see `gelus data --help` for where to put the files"
        )
    records, runs, _, step_times = _load(out, "reproduce")
    return write_report(
        records,
        runs,
        out / "report",
        presets=presets(),
        missing=missing,
        source=str(out),
        step_times=step_times,
    )


def plan(
    *, quick: bool, device: str, devices: tuple[int, ...], experiments: list[str] | None = None
) -> str:
    """The priced plan of ``gelus reproduce --plan`` (see :mod:`gelus.experiments.budget`)."""
    from gelus.experiments.budget import priced_plan, workloads
    from gelus.experiments.device import local_device
    from gelus.experiments.errors import CommandError
    from gelus.report.sources import presets

    chosen = presets()
    unknown = sorted(set(experiments or ()) - set(chosen))
    if unknown:
        raise CommandError(
            f"unknown experiment {unknown[0]!r}; valid experiments: {', '.join(chosen)}"
        )
    try:
        device = local_device(device)
    except ValueError as error:
        raise CommandError(str(error)) from None
    work = [
        work
        for name, preset in chosen.items()
        if name in (experiments or [n for n, p in chosen.items() if p.in_reproduce])
        for work in workloads(preset, quick, device)  # one per config of the preset's axes
    ]
    return priced_plan(work, device, devices, "whole paper", "gelus reproduce")


def _export(args: argparse.Namespace) -> int:
    from gelus.report.export import export

    loaded = _load(args.run_dir, "export")
    for path in export(args.run_dir, args.out or args.run_dir / "export", args.format, loaded):
        print(f"wrote {path}")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    _prepare_matplotlib()
    from gelus.experiments.errors import CommandError

    if args.plan:
        try:
            devices = tuple(int(n) for n in args.plan_devices.split(","))
        except ValueError:
            devices = ()
        if not devices or min(devices) < 1:
            raise CommandError(f"--plan-devices {args.plan_devices!r}: give counts like 1,4,8")
        print(
            plan(
                quick=args.quick, device=args.device, devices=devices, experiments=args.experiments
            )
        )
        return 0

    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers {args.workers}: give at least 1")
    out = args.out or Path("runs/quick" if args.quick else "runs/full")
    executor = make_executor(args)
    try:
        html_path, md_path = reproduce(
            out,
            quick=args.quick,
            data_dir=args.data_dir,
            workers=args.workers,
            executor=executor,
            device=args.device,
            experiments=args.experiments,
        )
    finally:
        if executor is not None:
            executor.shutdown()
    print(f"wrote {html_path}\nwrote {md_path}")
    return 0
