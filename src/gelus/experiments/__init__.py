"""The paper's experiments: presets, the engines (:mod:`gelus.experiments.engines`), records.

>>> from gelus.experiments import PRESETS, run_experiment
>>> PRESETS["mnist-classification"].citation                                  # doctest: +SKIP
>>> run_experiment("mnist-classification", out_dir="runs/mnist", quick=True)  # doctest: +SKIP

Results are tidy records in ``out_dir/records.sqlite``; read them with
``gelus.experiments.records.read_records`` / ``read_runs``.
"""

from gelus.experiments import engines  # noqa: F401  (registers the built-in engines first)
from gelus.experiments.presets import PRESETS, Preset
from gelus.experiments.records import read_records, read_runs
from gelus.experiments.runner import run_experiment

__all__ = ["PRESETS", "Preset", "read_records", "read_runs", "run_experiment"]
