"""The data a run trains on, loaded once per process: by the run's resolution, and by a worker
for every job it runs (a worker running several jobs reads the files once)."""

import functools

from gelus.experiments.plan import holds_out_validation

__all__ = ["load_data", "load_dataset"]


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
