"""``gelus list`` and ``gelus run``: the experiments from the command line."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gelus.experiments.plan import Job
    from gelus.experiments.presets import Preset
    from gelus.experiments.records import Record, RunInfo

__all__ = [
    "ProgressBars",
    "add_executor_arguments",
    "make_executor",
    "register",
    "run_with_progress",
    "summary_table",
]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``list`` and ``run`` subcommands."""
    list_parser = subparsers.add_parser(
        "list",
        help="list experiments, activations and datasets",
        description="List the experiment presets (with the dataset each needs), the registered "
        "activations, the aliases from other libraries, and where each dataset was found.",
    )
    list_parser.set_defaults(func=_list)
    _add_run_parser(subparsers)


_DATASET_HELP = (
    "dataset name instead of the preset's (e.g. fashion-mnist); transformer-lm also takes a UTF-8 "
    "text file's path (ending in .txt or holding a /)"
)


def _add_run_parser(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="run (or resume) one of the paper's experiments",
        description="Run one experiment preset; a second call resumes: finished runs are skipped, "
        "interrupted ones continue from their last checkpoint.",
        add_help=False,
    )
    run.add_argument(
        "-h", "--help", action=_PresetHelp, help="show this help (after a preset name: its keys)"
    )
    run.add_argument("experiment", help="preset name (see `gelus list`)")
    run.add_argument(
        "--activations",
        nargs="+",
        metavar="NAME",
        help="activations to compare (default: the preset's): registry names (gelus list), or your "
        "own as module:attribute (an nn.Module class, a factory or a tensor function importable "
        "from this directory), optionally label=module:attribute",
    )
    run.add_argument("--seeds", type=int, help="runs per activation, setting and lr")
    run.add_argument("--epochs", type=int, help="epochs per run")
    run.add_argument("--dataset", help=_DATASET_HELP)
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set optim.lr=1e-3 (repeatable; tuples "
        "comma-separated). Several values of one key are an axis: one config per value (per "
        "combination of axes), the lr chosen in each; comma-separated for a key of one value "
        "(--set model.init=gpt2,torch), ';'-separated for any key, so for a tuple key's axis "
        "(--set 'model.hidden=128,128;256,256'); see docs/HARNESS.md",
    )
    run.add_argument("--out", default=None, help="output directory (default: runs/EXPERIMENT)")
    run.add_argument(
        "--workers", type=int, help="worker processes (default: one per core; 0: this process)"
    )
    run.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    run.add_argument("--data-dir", help="directory holding NAME/ dataset folders")
    run.add_argument(
        "--quick", action="store_true", help="the preset's quick version (minutes on a laptop)"
    )
    run.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="device for both engines, the stacked MLPs and the CNNs (default auto: cuda when "
        "there is a GPU)",
    )
    run.add_argument(
        "--amp",
        choices=("bf16", "fp16"),
        help="autocast the CNN experiments to bfloat16 or float16 (fp16: CUDA only); "
        "the same as --set cnn.amp_dtype=...",
    )
    add_executor_arguments(run)
    _add_switches(run)
    run.set_defaults(func=_run)


def _add_switches(run: argparse.ArgumentParser) -> None:
    """--plan (price, train nothing), and --no-verify and --no-step-times: the checks and
    measurements a user may skip."""
    run.add_argument(
        "--plan",
        action="store_true",
        help="run nothing: price this sweep (every config, activation, lr and seed asked for; "
        "runs already in --out included) by timed steps of its network and print its wall time "
        "on 1 worker and on --workers",
    )
    run.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the dataset checksum check (own copies of the files)",
    )
    run.add_argument(
        "--no-step-times",
        action="store_true",
        help="transformer presets: skip timing each activation's step after the sweep (the "
        "report then has no time-per-step table and draws wall time from the sweep's epochs)",
    )


class _PresetHelp(argparse.Action):
    """``--help``; after a preset name (``gelus run mnist-noise --help``) also every ``--set`` key
    of that preset with its value."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.print_help()
        name = getattr(namespace, "experiment", None)
        if name is not None:
            print(preset_keys(name))
        parser.exit()


def preset_keys(name: str) -> str:
    """The ``--set`` keys of preset ``name`` with their values (and the ``--quick`` ones)."""
    from gelus.experiments.config import config_keys, config_to_dict, flat_config, stored_defaults
    from gelus.experiments.presets import PRESETS

    preset = PRESETS.get(name)
    if preset is None:
        return f"\nunknown experiment {name[:60]!r}; valid experiments: {', '.join(PRESETS)}"
    flat = stored_defaults(flat_config(config_to_dict(preset.config)))  # model.init=gpt2 too
    lines = [
        f"\n--set keys of {name} (KEY=VALUE; tuples comma-separated; several values: an axis), "
        "with the preset's values:"
    ]
    for key in config_keys(preset.config):
        value = flat[key]
        shown = ",".join(map(str, value)) if isinstance(value, list | tuple) else value
        lines.append(f"  {key:<28} {shown}")
    lines.append(f"--quick sets: {' '.join(preset.quick) or '(nothing)'}")
    if preset.axes:  # one config per point; a --set of one of their keys replaces the axis
        lines.append(f"axes (one config per point): {' '.join(preset.axes)}")
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    import gelus
    from gelus.experiments.activation_spec import STOCHASTIC_ACTIVATIONS
    from gelus.experiments.presets import PRESETS

    print("experiments:")
    for name, preset in PRESETS.items():
        substitute = f" (or {preset.substitute})" if preset.substitute else ""
        print(f"  {name:<22} {preset.title}  [data: {preset.dataset}{substitute}]")
    names = sorted(set(gelus.list_activations()) | set(STOCHASTIC_ACTIVATIONS))
    print("activations:\n  " + ", ".join(names))
    print("  or your own, as module:attribute or label=module:attribute (see docs/HARNESS.md)")
    print("aliases (names from other libraries):")
    for alias, (canonical, kwargs, source) in sorted(gelus.ALIASES.items()):
        arguments = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        print(f"  {alias:<18} {canonical}({arguments})  [{source}]")
    print("datasets:")
    from gelus.data import DATASETS, find

    for name, spec in DATASETS.items():
        location = find(spec)
        where = f"found in {location.directory}" if location else "not found (see `gelus data`)"
        print(f"  {name:<14} {where}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from gelus.experiments.run import RunOptions

    if args.plan:
        print(_priced_sweep(args))
        return 0
    options = RunOptions(
        args.experiment,
        args.out or f"runs/{args.experiment}",
        args.activations,
        args.seeds,
        args.epochs,
        _overrides(args),
        args.workers,
        args.data_dir,
        args.quick,
        args.dataset,
        not args.no_verify,
        args.device,
        args.threads,
        not args.no_step_times,
    )
    executor = make_executor(args)
    try:
        run_with_progress(options, executor)
    finally:
        if executor is not None:
            executor.shutdown()  # also when the run stopped before starting its jobs
    return 0


def _priced_sweep(args: argparse.Namespace) -> str:
    """``gelus run --plan``: the sweep the arguments ask for, one row per config of its axes,
    priced by :func:`gelus.experiments.budget.priced_plan` on one worker and on ``--workers``
    (default: one per core)."""
    import os

    from gelus.experiments.budget import priced_plan, workloads
    from gelus.experiments.device import local_device
    from gelus.experiments.errors import CommandError
    from gelus.experiments.run import RunOptions, find_preset, option_overrides

    preset = find_preset(args.experiment)
    flags = RunOptions(args.experiment, ".", args.activations, args.seeds, args.epochs)
    overrides = [*option_overrides(preset, flags), *_overrides(args)]
    try:
        device = local_device(args.device)
    except ValueError as error:
        raise CommandError(str(error)) from None
    workers = args.workers or os.cpu_count() or 1
    work = workloads(preset, args.quick, device, overrides)
    return priced_plan(work, device, tuple(dict.fromkeys((1, workers))), "whole sweep", "gelus run")


def _overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` overrides, with ``--amp`` as the one it stands for (the config key of the
    engines that autocast: ``EnginePlugin.amp_key``)."""
    from gelus.experiments.config import plugin_for
    from gelus.experiments.errors import CommandError
    from gelus.experiments.presets import PRESETS

    amp_keys = {name: plugin_for(p.config).amp_key for name, p in PRESETS.items()}
    if args.amp is None or args.experiment not in amp_keys:  # an unknown one: refused later
        return list(args.overrides)
    if amp_keys[args.experiment] is None:
        takers = ", ".join(name for name, key in amp_keys.items() if key)
        raise CommandError(f"--amp applies to the CNN experiments ({takers}) only")
    return [*args.overrides, f"{amp_keys[args.experiment]}={args.amp}"]


def run_with_progress(options, executor=None) -> Path:
    """Resolve, run and summarise one preset as ``gelus run`` does, with a progress bar per
    worker and the summary table at the end; returns the output folder.

    ``options`` is a :class:`~gelus.experiments.run.RunOptions`; ``executor`` as for
    :func:`~gelus.experiments.runner.run_experiment` (None: local worker processes).
    """
    from gelus.experiments.records import read_results, readable_results
    from gelus.experiments.run import resolve_runs
    from gelus.experiments.runner import execute_runs

    resolved = resolve_runs(options, executor, print)  # one per config: axes give several
    execute_runs(resolved, executor, ProgressBars.over, print)
    first = resolved[0]
    records, runs, skipped = readable_results(*read_results(first.out_dir))
    for line in skipped[:5]:  # a damaged row is left out of the summary, as the report does
        print(f"gelus run: warning: {line}", file=sys.stderr)
    if len(skipped) > 5:
        print(f"gelus run: warning: {len(skipped) - 5} more left out", file=sys.stderr)
    print(summary_table(records, runs, first.preset))
    return first.out_dir


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """--executor, --address and --max-retries (shared by `gelus run` and `gelus reproduce`)."""
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: worker processes on this machine; ray: one Ray task per job, on a local Ray "
        "runtime or a cluster (pip install 'gelus[ray]'; docs/CLUSTER.md)",
    )
    parser.add_argument(
        "--address",
        help="with --executor ray: the cluster to join ('auto': the one `ray start` set up "
        "here, or HOST:PORT); default: start a Ray runtime on this machine (--workers CPUs)",
    )
    parser.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="with --executor ray: new attempts of a job whose worker or node died (default 3)",
    )


def make_executor(args: argparse.Namespace):
    """The executor the flags of :func:`add_executor_arguments` ask for; None: the local one.

    Needs ``args.workers`` and ``args.threads``; a Ray executor must be ``shutdown()`` after use.
    """
    from gelus.experiments.errors import CommandError

    if args.executor != "ray":
        if args.address is not None:
            raise CommandError("--address needs --executor ray")
        return None
    from gelus.experiments.ray_executor import RayExecutor

    return RayExecutor(
        args.address, num_cpus=args.workers, threads=args.threads, max_retries=args.max_retries
    )


class ProgressBars:
    """An overall tqdm bar plus one per worker (job label, epochs, ETA); a callable ``report``."""

    def __init__(self, enabled: bool, total: int, title: str) -> None:
        self.enabled = enabled
        self.total = total
        self.title = title
        self.bars: dict[int, object] = {}
        self.positions: dict[int, int] = {}  # worker -> terminal line below the overall bar
        self.last: dict[tuple[int, str], int] = {}

    @classmethod
    def over(cls, jobs: Sequence["Job"], title: str) -> "ProgressBars":
        """The bars of ``jobs``: their epochs in all, under ``title``."""
        return cls(enabled=True, total=sum(job.epochs for job in jobs), title=title)

    def __enter__(self) -> "ProgressBars":
        if self.enabled:
            from tqdm import tqdm

            self.tqdm = tqdm
            self.overall = tqdm(
                total=self.total,
                desc=f"{self.title}, all jobs",
                unit="epoch",
                position=0,
                dynamic_ncols=True,
            )
        return self

    def __call__(self, worker: int, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar = self.bars.get(worker)
        if bar is None or bar.desc != label:
            if bar is not None:
                bar.close()
            position = self.positions.setdefault(worker, len(self.positions) + 1)
            bar = self.tqdm(
                total=total,
                initial=done,
                desc=label,
                position=position,
                leave=False,
                dynamic_ncols=True,
                unit="epoch",
            )
            self.bars[worker] = bar
            self.last.setdefault((worker, label), done)
            self.overall.update(done)  # resumed epochs count as done
            return
        step = done - self.last.get((worker, label), done)
        self.last[(worker, label)] = done
        if step > 0:
            bar.update(step)
            self.overall.update(step)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            for bar in self.bars.values():
                bar.close()
            self.overall.close()


def summary_table(records: Sequence["Record"], runs: Sequence["RunInfo"], preset: "Preset") -> str:
    """The preset's protocol applied to its records, as the report applies it: per config,
    activation and setting, the reported metric's median [min, max] over seeds at the chosen lr
    (``*``: chosen on validation), with how many runs diverged."""
    from gelus.experiments.config import stored_defaults
    from gelus.experiments.selection import run_configs, select, variant_order

    mine = [r for r in records if r.experiment == preset.name]
    configs = run_configs(r for r in runs if r.experiment == preset.name)
    # a key stored only when set (model.init=gpt2) labels its config by its default, not None
    configs = {h: stored_defaults(c) for h, c in configs.items()}
    selections = select(mine, preset.protocol, configs)
    if not selections:
        return f"{preset.name}: no finished epochs to summarise"
    headline = selections[0].metric
    shown = [s for s in selections if s.metric == headline and s.values]
    shown.sort(key=lambda s: variant_order(s.variant))  # sizes in order: d 48 before d 128
    width = max(24, *(len(s.variant) for s in shown)) if shown else 24
    lines = [
        f"{preset.name}: test {headline}, median [min, max] over seeds (* lr chosen on validation)",
        f"{'activation':<16} {'config':<{width}} {'setting':<10} {'lr':>8} {'n':>3}  {'median':>9}"
        "  spread",
    ]
    for s in shown:
        finite = sorted(s.finite)
        mark = "*" if s.lr_selected else " "
        if finite:
            median = f"{s.aggregate.point(finite):>9.4f}  [{finite[0]:.4f}, {finite[-1]:.4f}]"
        else:
            median = f"{'—':>9}"
        diverged = f", {s.diverged} diverged" if s.diverged else ""
        lines.append(
            f"{s.activation:<16} {s.variant or '-':<{width}} {s.setting or '-':<10} {s.lr:>8g}{mark}"
            f"{len(s.values):>3}  {median} (epoch {max(s.epochs.values())}{diverged})"
        )
    return "\n".join(lines)
