"""A text file named by its path: `gelus run transformer-lm --dataset PATH` trains on it, its
records name the file and its content, and a bad file is one clear error naming it."""

import hashlib
import json

import pytest

from gelus import cli
from gelus.data import ChecksumError, load
from gelus.data.text import SPLIT_FRACTIONS, is_text_path, text_file_dataset
from gelus.experiments import read_runs

TEXT = "It was the best of times, it was the worst of times; naïve café.\n" * 120
TINY = (
    "model.d_model=16", "model.layers=1", "model.heads=2", "model.context=16", "train.epochs=1",
    "train.steps_per_epoch=2", "train.seeds=1", "optim.lr=1e-3",
)  # fmt: skip


def _run(dataset: str, out, *extra: str) -> int:
    sets = [arg for key in TINY for arg in ("--set", key)]
    return cli.main(
        ["run", "transformer-lm", "--dataset", dataset, "--activations", "gelu", "--workers", "0",
         "--out", str(out), *sets, *extra]
    )  # fmt: skip


def test_paths_are_told_from_dataset_names():
    assert is_text_path("corpus.txt") and is_text_path("data/corpus") and is_text_path("./c")
    assert not is_text_path("fortunes") and not is_text_path("tiny-shakespeare")


def test_a_text_file_trains_by_its_path_and_its_runs_name_its_content(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text(TEXT, encoding="utf-8")
    assert _run("corpus.txt", tmp_path / "out") == 0
    (run,) = read_runs(tmp_path / "out")
    digest = hashlib.sha256(TEXT.encode()).hexdigest()
    name = f"text:{digest[:12]}:{tmp_path / 'corpus.txt'}"
    assert run.status == "done" and json.loads(run.config_json)["dataset"] == name
    metadata = json.loads(run.metadata_json)
    assert metadata["dataset"] == name and digest in metadata["dataset_source"]
    assert metadata["dataset_requested"] == "corpus.txt"

    (tmp_path / "other.txt").write_text(TEXT.upper(), encoding="utf-8")  # another text
    assert _run("./other.txt", tmp_path / "out") == 0
    hashes = {r.config_hash for r in read_runs(tmp_path / "out")}
    assert len(hashes) == 2  # two files, two run identities


def test_the_named_file_splits_90_5_5_and_must_keep_its_content(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    name, _ = text_file_dataset(path)
    data = load(name)
    n = len(TEXT.encode())
    assert (len(data.train), len(data.val)) == (int(n * SPLIT_FRACTIONS[0]), int(n * 0.05))
    assert len(data.train) + len(data.val) + len(data.test) == n
    path.write_text(TEXT + "one more line\n", encoding="utf-8")
    with pytest.raises(ChecksumError, match="content changed"):
        load(name)  # a worker never reads the new text under the old name


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"text\0" * 3000, "a NUL byte at offset 4"),
        (b"caf\xe9 " * 3000, "not UTF-8 text"),
        (b"short " * 300, "too short"),
    ],
)
def test_a_bad_file_is_one_error_naming_it_and_the_way_out(tmp_path, capsys, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    assert _run(str(path), tmp_path / "out") == 2
    error = capsys.readouterr().err
    assert error.count("gelus run: error:") == 1 and f"{path}: " in error and message in error
    assert "--dataset takes the path of a UTF-8 text file of 5,201 bytes or more" in error
    assert "Traceback" not in error and not (tmp_path / "out" / "records.sqlite").exists()


def test_a_missing_file_or_another_task_is_refused(tmp_path, capsys):
    assert _run(str(tmp_path / "missing.txt"), tmp_path / "out") == 2
    assert "missing.txt: no such file; give --dataset the path" in capsys.readouterr().err
    (tmp_path / "corpus.txt").write_text(TEXT, encoding="utf-8")
    args = ["run", "transformer-vit", "--dataset", str(tmp_path / "corpus.txt"), "--out",
            str(tmp_path / "out")]  # fmt: skip
    assert cli.main(args) == 2
    assert "a text file is a byte corpus, for the language model" in capsys.readouterr().err
