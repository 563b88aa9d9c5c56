"""The data a run trains on, loaded once per process and checked.

:func:`resolve_data` is the run's resolution's step for its data: the dataset named by
:func:`gelus.experiments.data_source.resolve_dataset` announced, loaded (:func:`load_dataset`,
cached: a worker running its jobs in this process reads the files no second time; a worker
process loads them once for every job it runs, :func:`load_data`) split as the engine trains,
and checked to hold what the engine needs (a :class:`~gelus.experiments.errors.ConfigError`
naming the config key otherwise).
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from gelus.experiments.config import ConfigError, ExperimentConfig
from gelus.experiments.plan import holds_out_validation

__all__ = [
    "ResolvedData",
    "load_data",
    "load_dataset",
    "resolve_data",
]


@functools.lru_cache(maxsize=2)
def load_dataset(name: str, data_dir: str | None, *, validation: bool = True, verify: bool = True):
    """``gelus.data.load``, cached."""
    from gelus.data import load

    return load(name, data_dir, validation=validation, verify=verify)


def load_data(config, data_dir: str | None, verify: bool = True):
    """The dataset ``config`` names, split as its engine trains (:func:`load_dataset`)."""
    return load_dataset(
        config.dataset, data_dir, validation=holds_out_validation(config), verify=verify
    )


class ResolvedData(NamedTuple):
    """:func:`resolve_data`'s answer: the config naming the dataset used, the data, the samples one
    run trains on (the engine's ``train_size`` of its splits), and what every run records of them
    (its size and steps, the dataset asked for and used, where it was found, checksums checked)."""

    config: ExperimentConfig
    data: Any
    train_size: int
    metadata: dict[str, Any]


def resolve_data(
    preset: Any,
    config: ExperimentConfig,
    plugin: Any,
    found: tuple[str, str],
    data_dir: str | None = None,
    dataset: str | None = None,
    verify: bool = True,
    say: Callable[[str], None] | None = None,
) -> ResolvedData:
    """The data of ``preset``'s run at ``config`` (whose engine is ``plugin``): the dataset
    ``found`` (its name and where it is: :func:`~gelus.experiments.data_source.resolve_dataset`
    for ``dataset``, the one asked for, or None), announced to ``say`` before it is read (a
    stand-in named as one), loaded from ``data_dir`` split as the engine trains (``verify``: the
    files' checksums), and checked: a full batch (ConfigError naming ``train.batch_size``
    otherwise) and what the engine needs of them (``EnginePlugin.check_data``)."""
    used, source = found
    if say is not None:  # before the data are read: which dataset, a stand-in named as one
        asked_for = dataset or config.dataset
        stand_in = (
            ""
            if used in (asked_for, config.dataset) or used.startswith("text:")
            else f", standing in for {asked_for} (not installed)"
        )
        say(f"{preset.name}: loading {used} from {source}{stand_in}")
    config = dataclasses.replace(config, dataset=used)
    validation = plugin.holds_out_validation(config)
    data = load_dataset(used, data_dir, validation=validation, verify=verify)
    n_train = plugin.train_size(config, len(data.train), len(data.val or ()))  # val: or None
    if config.train.batch_size > n_train:
        raise ConfigError(
            f"{preset.name}: train.batch_size={config.train.batch_size} is larger than the "
            f"{n_train} training samples: no full batch, so no step per epoch; set "
            f"train.batch_size to {n_train} or less"
        )
    try:
        plugin.check_data(config, data)
    except ConfigError as error:
        raise ConfigError(f"{preset.name}: {error.template}", error.parameter) from None
    metadata = {
        "train_size": n_train,
        "steps": n_train // config.train.batch_size * config.train.epochs,
        "dataset": used,
        "dataset_requested": dataset or preset.dataset,
        "dataset_source": source,
        "checksums_verified": verify,
    }
    return ResolvedData(config, data, n_train, metadata)
