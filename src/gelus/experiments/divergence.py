"""One divergence rule for the whole harness: which runs diverged.

A run diverged when, at its last recorded epoch, a loss on a clean split (``train``, ``val``,
``test``; not the noisy ``test@noise=…`` ones) is not finite or is above :data:`FACTOR` (10) times
the loss of the trivial predictor, the one that ignores its input:

- a classifier predicting the uniform distribution: ln(classes) nats (classes from the dataset's
  spec, :mod:`gelus.data`), whatever the split;
- any other task (the autoencoder predicting the training set's mean sample): the value the
  engine records for the split as the metric ``trivial_loss`` (:data:`TRIVIAL_METRIC`).

Where no trivial loss is known only the non-finite part of the rule applies. :func:`mark_diverged`
replaces every measurement of a diverged run by NaN, so each aggregate, selection and curve
downstream treats the run alike: counted as diverged, never averaged, never setting an axis.
"""

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

__all__ = ["BOOKKEEPING_METRICS", "FACTOR", "TRIVIAL_METRIC", "diverged_runs", "mark_diverged"]

FACTOR = 10.0
TRIVIAL_METRIC = "trivial_loss"
CLEAN_SPLITS = ("train", "val", "test")
# what describes the run rather than its model: never judged, never replaced
BOOKKEEPING_METRICS = frozenset({"seconds", TRIVIAL_METRIC})


@cache
def _classes(dataset: str) -> int:
    from gelus.data import get_spec

    try:
        return get_spec(dataset).num_classes
    except ValueError:  # a dataset this gelus does not know: no trivial loss
        return 0


def _classifier_loss(config: Mapping[str, Any]) -> float | None:
    """ln(classes) for the flat config of a classifier (its engine's ``predicts_classes``), else
    None."""
    from gelus.experiments.config import plugins

    dataset = next((v for k, v in config.items() if k.rsplit(".", 1)[-1] == "dataset"), None)
    if not isinstance(dataset, str) or not any(p.predicts_classes(config) for p in plugins()):
        return None
    classes = _classes(dataset)
    return math.log(classes) if classes > 1 else None


def diverged_runs(
    records: Sequence[Any], configs: Mapping[str, Mapping[str, Any]] | None = None
) -> set[str]:
    """The run ids of ``records`` that diverged by the rule above.

    ``records`` have the fields of the records table; ``configs`` is ``{config_hash: flat
    config}`` (:func:`gelus.experiments.selection.run_configs`), which says the task and dataset.
    """
    configs = configs or {}
    last: dict[str, int] = {}
    trivial: dict[tuple[str, str], float] = {}
    for r in records:
        last[r.run_id] = max(last.get(r.run_id, r.epoch), r.epoch)
        if r.metric == TRIVIAL_METRIC and math.isfinite(r.value):
            trivial[(r.run_id, r.split)] = float(r.value)
    diverged = set()
    for r in records:
        if r.epoch != last[r.run_id] or r.metric != "loss" or r.split not in CLEAN_SPLITS:
            continue
        reference = trivial.get((r.run_id, r.split))
        if reference is None:
            reference = _classifier_loss(configs.get(r.config_hash, {}))
        if not math.isfinite(r.value) or (reference is not None and r.value > FACTOR * reference):
            diverged.add(r.run_id)
    return diverged


def mark_diverged(
    records: Sequence[Any], configs: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Any]:
    """``records`` with every measurement of a diverged run replaced by NaN (bookkeeping metrics
    such as ``seconds`` kept). Idempotent."""
    diverged = diverged_runs(records, configs)
    return [
        r._replace(value=math.nan)
        if r.run_id in diverged and r.metric not in BOOKKEEPING_METRICS
        else r
        for r in records
    ]
