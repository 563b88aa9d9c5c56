"""Which dataset a run trains on, and where it is: the one asked for (``--dataset``), else the
preset's, else its substitute, found in the data folders; or for the language model a UTF-8 text
file's path, named by its SHA-256 (``text:<sha256 prefix>:<absolute path>``). Every problem is a
:class:`~gelus.experiments.errors.SettingError` naming ``{dataset}`` and the way out. The data
are then loaded by :func:`gelus.experiments.datasets.resolve_data`.
"""

from pathlib import Path
from typing import Any

from gelus.experiments.config import ExperimentConfig
from gelus.experiments.errors import SettingError

__all__ = ["resolve_dataset", "resolve_text_file"]


def resolve_dataset(
    preset: Any, config: ExperimentConfig, plugin: Any, data_dir: str | None, dataset: str | None
) -> tuple[str, str]:
    """The dataset to use and the directory it was found in (under ``data_dir`` or the default
    folders): ``dataset`` if given, else the preset's dataset (``config.dataset``), else its
    substitute. Raises SettingError with the ways to get the files.

    A text file's path (``dataset`` or ``--set dataset=``) gives the config's engine ``plugin``,
    the language model's, that file (:func:`resolve_text_file`)."""
    from gelus.data import DATASETS, find, get_spec, how_to_get

    text_file = resolve_text_file(preset, config, plugin, dataset or config.dataset)
    if text_file is not None:
        return text_file
    if dataset is not None and dataset not in DATASETS:
        raise SettingError(
            "dataset",
            f"unknown dataset {dataset[:60]!r}; valid datasets: {', '.join(DATASETS)}, or for "
            "the language model a UTF-8 text file's path (ending in .txt or holding a /)",
        )
    candidates = (
        [dataset]
        if dataset
        else [config.dataset, *([preset.substitute] if preset.substitute else [])]
    )
    for name in candidates:
        location = find(get_spec(name), data_dir)
        if location is not None:
            return name, str(location.directory)
    spec = get_spec(candidates[0])
    tried = " or ".join(candidates)
    raise SettingError(
        "dataset",
        f"{preset.name}: no {tried} data found; to get them:\n{how_to_get(spec, data_dir)}",
    )


def resolve_text_file(
    preset: Any, config: ExperimentConfig, plugin: Any, path: str
) -> tuple[str, str] | None:
    """(``text:<sha256 prefix>:<absolute path>``, the path and its SHA-256) of the text file at
    ``path`` (or of the file a ``text:`` name names, which must still hold that text), checked
    against the model's context (``plugin.text_context``); None where ``path`` is a catalog name. Raises SettingError
    naming the file and the way out."""
    from gelus.data import DATASETS, DataError
    from gelus.data.text import (
        MAX_TEXT_BYTES,
        TEXT_FILE_PREFIX,
        is_text_path,
        min_text_file_bytes,
        text_file_dataset,
    )

    named = path.startswith(TEXT_FILE_PREFIX)
    if path in DATASETS or not (named or is_text_path(path)):
        return None
    context = plugin.text_context(config)
    if context is None:
        raise SettingError(
            "dataset",
            f"{preset.name}: a text file is a byte corpus, for the language model "
            "(transformer-lm); give {dataset} a dataset name (gelus data lists them)",
        )
    file = path.removeprefix(TEXT_FILE_PREFIX).partition(":")[2] if named else path
    if not Path(file).expanduser().exists():  # one that is there but not a file: refused below
        raise SettingError(
            "dataset", f"{file}: no such file; give {{dataset}} the path of a UTF-8 text file"
        )
    try:
        name, source = text_file_dataset(file, context)
    except DataError as error:
        raise SettingError(
            "dataset",
            f"{error}\n{{dataset}} takes the path of a UTF-8 text file of "
            f"{min_text_file_bytes(context):,} bytes or more (model.context={context}) and "
            f"{MAX_TEXT_BYTES:,} bytes at most",
        ) from None
    if named and name != path:
        raise SettingError(
            "dataset",
            f"{file}: its text is no longer that of {path} (now {name}); give {{dataset}} the "
            "file's path to train on the new text, or restore the old text to resume its runs",
        )
    return name, source
