"""``run_experiment``: resolve a run, plan it, execute its jobs, time its steps.

The run is resolved once (:func:`gelus.experiments.run.resolve_runs`, where every setting is
checked); the jobs come from the one planner (:mod:`.plan`) and run on an executor (:mod:`.sweep`,
:mod:`.ray_executor`) through the driver (:mod:`.driver`). What a terminal shows (progress bars,
the summary table) is the command line's (:mod:`gelus.experiments.cli`), handed in as ``bars``.
"""

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from gelus.experiments.activation_spec import activation_texts
from gelus.experiments.guard import user_code_failure
from gelus.experiments.plan import Job, describe_plan, plan_run, step_time_jobs
from gelus.experiments.run import Run, RunOptions, resolve_runs
from gelus.experiments.step_times import STEPS, time_steps
from gelus.experiments.sweep import Executor, LocalExecutor, WorkerReport

__all__ = ["Bars", "execute", "execute_runs", "run_experiment"]

# (jobs, title) -> a context whose value reports each worker's progress: the command line's bars
Bars = Callable[[Sequence[Job], str], AbstractContextManager[WorkerReport]]


def run_experiment(
    name: str,
    *,
    out_dir: str | os.PathLike,
    activations: Sequence[Any] | Mapping[str, Any] | None = None,
    executor: Executor | None = None,
    **options: Any,
) -> Path:
    """Run (or resume) the preset ``name`` into ``out_dir/records.sqlite``; returns ``out_dir``.

    Runs already done are skipped; interrupted ones resume from their checkpoints. The options
    are :class:`~gelus.experiments.run.RunOptions`' (``seeds``, ``epochs``, ``overrides``,
    ``workers``, ``data_dir``, ``quick``, ``dataset``, ``verify``, ``device``, ``threads``,
    ``step_times``): ``workers`` processes (default: one per available core, on CUDA
    ``WORKERS_PER_GPU`` per GPU; 0 = in this process) with ``threads`` torch threads each, or
    ``executor`` (e.g. ``RayExecutor``; ``workers`` then defaults to its own). ``device``: "auto",
    "cpu" or "cuda", for every engine.

    ``activations`` (default: the preset's): registry names, ``[label=]module:attribute``
    strings, or ``{label: class | factory | function}`` of importable objects; a user
    activation's source is hashed into the runs' metadata, and runs of edited code are refused
    beside the old records. With ``step_times``, a transformer sweep then times each
    activation's step (:mod:`gelus.experiments.step_times`). Nothing is shown: ``gelus run``
    adds the progress bars and the summary table.
    """
    options = RunOptions(name, out_dir, activation_texts(activations), **options)
    runs = resolve_runs(options, executor)
    execute_runs(runs, executor)
    return runs[0].out_dir


def execute(
    run: Run,
    executor: Executor | None = None,
    bars: Bars | None = None,
    say: Callable[[str], None] | None = None,
) -> None:
    """Plan ``run``'s jobs not done yet, run them on ``executor`` (default: local worker
    processes) reporting to ``bars``, then time its steps where its engine's are (``say``
    announces the timing)."""
    execute_runs((run,), executor, bars, say)


def execute_runs(
    runs: Sequence[Run],
    executor: Executor | None = None,
    bars: Bars | None = None,
    say: Callable[[str], None] | None = None,
) -> None:
    """:func:`execute` for the runs of one command's configs (:func:`resolve_runs`): their jobs
    in one pass of the executor (the first run's workers and threads), then each config's steps
    timed where its engine's are (user code failing there is named as the activation's)."""
    planned = {id(run): plan_run(run) for run in runs}
    lines = [describe_plan(run, planned[id(run)]) for run in runs]
    timing = {id(run): step_time_jobs(run, STEPS) for run in runs if run.step_times}
    for line in lines if say is not None else ():
        say(line)
    jobs = [job for run in runs for job in planned[id(run)]]
    first = runs[0]
    with (bars or _no_bars)(jobs, first.name) as report:
        (executor or LocalExecutor(first.workers, first.threads)).run(jobs, report)
    for run in (run for run in runs if run.step_times):
        try:
            time_steps(run, timing[id(run)], say)
        except (Exception, SystemExit) as error:  # user code runs here too: name it
            failure = user_code_failure(error, run.activations, f"the step timing of {run.name}")
            if failure is None:
                raise
            raise failure from error


@contextlib.contextmanager
def _no_bars(jobs: Sequence[Job], title: str):
    yield lambda worker, label, done, total: None
