"""A corpus of documents: split by document (a document's split fixed by its path alone), verified
by the digest of its documents, read as every text is (one clear error naming the bad file)."""

import hashlib
import os

import pytest
import torch

from gelus.data import DATASETS, DataError, find, load
from gelus.data.documents import BUCKETS, corpus_digest, document_split, load_documents
from gelus.data.errors import ChecksumError
from gelus.data.sources import DatasetSpec, DocumentCorpus

SENTENCE = "A driver registers its device; the kernel calls probe() with it.\n"


def _write_corpus(directory, count: int) -> dict[str, bytes]:
    """``count`` documents of different lengths under nested folders, plus a file to ignore."""
    documents = {}
    for i in range(count):
        relative = f"{'abc'[i % 3]}/doc-{i:03d}.rst.txt"
        documents[relative] = f"Document {i}\n{'=' * 12}\n\n{SENTENCE * (40 + i % 7)}".encode()
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_bytes(documents[relative])
    (directory / "index.rst.txt").write_bytes(b"Index\n=====\n\n" + SENTENCE.encode() * 50)
    documents["index.rst.txt"] = (directory / "index.rst.txt").read_bytes()
    (directory / "style.css").write_text("body { margin: 0 }")  # not a document
    return documents


def _spec(directory, digest: str = "") -> DatasetSpec:
    return DatasetSpec(
        name="docs", title="t", layouts=((("index.rst.txt",),),), loader=load_documents,
        system_dirs=(str(directory),), num_classes=256, documents=DocumentCorpus(".txt", digest),
    )  # fmt: skip


def _expected_split(relative: str) -> str:
    # the rule as docs/DATA.md states it, computed independently of the code
    bucket = int.from_bytes(hashlib.sha256(relative.encode()).digest(), "big") % 20
    return "val" if bucket == 0 else "test" if bucket == 1 else "train"


def test_each_split_is_its_whole_documents_in_path_order(tmp_path):
    documents = _write_corpus(tmp_path, 160)
    data = load(_spec(tmp_path), tmp_path / "elsewhere")
    for split in ("train", "val", "test"):
        names = sorted(r for r in documents if _expected_split(r) == split)
        expected = b"".join(documents[r] + b"\n" for r in names)
        assert bytes(getattr(data, split).data.tolist()) == expected, split
    sizes = [len(data.train), len(data.val), len(data.test)]
    assert sizes[0] > 10 * sizes[1] > 0 and sizes[2] > 0  # about 90 / 5 / 5 % of the documents


def test_a_documents_split_does_not_move_when_others_are_added():
    names = [f"guide/part-{i}.rst.txt" for i in range(2_000)]
    before = {name: document_split(name) for name in names}
    assert {document_split(name) for name in names} == {"train", "val", "test"}
    assert all(document_split(name) == before[name] for name in reversed(names))
    val = sum(split == "val" for split in before.values()) / len(names)
    assert abs(val - 1 / BUCKETS) < 0.02


def test_training_on_train_plus_val(tmp_path):
    _write_corpus(tmp_path, 80)
    data = load(_spec(tmp_path), tmp_path / "elsewhere")
    joined = load(_spec(tmp_path), tmp_path / "elsewhere", validation=False)
    assert joined.val is None
    assert torch.equal(joined.train.data, torch.cat([data.train.data, data.val.data]))


def test_another_version_of_the_corpus_is_refused_unless_asked(tmp_path):
    _write_corpus(tmp_path, 80)
    spec = _spec(tmp_path, corpus_digest(tmp_path, DocumentCorpus(".txt")))
    assert len(load(spec, tmp_path / "elsewhere").train) > 0
    (tmp_path / "b" / "doc-001.rst.txt").write_text("Edited.\n" * 100)  # a new version of one
    with pytest.raises(ChecksumError, match="--no-verify") as caught:
        load(spec, tmp_path / "elsewhere")
    assert str(tmp_path) in str(caught.value)
    assert len(load(spec, tmp_path / "elsewhere", verify=False).train) > 0


def test_a_bad_document_is_named(tmp_path):
    _write_corpus(tmp_path, 80)
    (tmp_path / "c" / "doc-002.rst.txt").write_bytes(b"text\x00binary")
    with pytest.raises(DataError, match=r"doc-002\.rst\.txt"):
        load(_spec(tmp_path), tmp_path / "elsewhere")


def test_a_corpus_too_small_for_its_splits_is_refused(tmp_path):
    (tmp_path / "index.rst.txt").write_text(SENTENCE)
    with pytest.raises(DataError, match="documents hold"):
        load(_spec(tmp_path), tmp_path / "elsewhere")


def test_the_larger_corpus_is_catalogued_with_its_package_and_sizes():
    spec = DATASETS["linux-docs"]
    assert spec.apt_package == "linux-doc-6.1" and spec.num_classes == 256
    assert len(spec.documents.digest) == 64
    assert sum(spec.split_sizes) >= 20_000_000  # the scale experiment's budget must not repeat it
    assert spec.split_sizes.val < 0.07 * sum(spec.split_sizes)
    installed = find(spec)
    if installed is not None:  # this machine has the package: its numbers are the catalog's
        data = load("linux-docs")
        assert (len(data.train), len(data.val), len(data.test)) == spec.split_sizes


def test_a_file_name_that_is_not_utf8_is_read_as_a_document(tmp_path):
    """Before: a UnicodeEncodeError from the loader. Its name's raw bytes fix its split; every
    other document keeps its split, its bytes and the corpus's digest of UTF-8 names."""
    documents = _write_corpus(tmp_path, 60)
    before = corpus_digest(tmp_path, _spec(tmp_path).documents)
    assert before == corpus_digest(tmp_path, _spec(tmp_path).documents)  # deterministic
    odd = os.fsencode(tmp_path) + b"/a/caf\xe9-latin1.rst.txt"  # Latin-1, not UTF-8
    with open(odd, "wb") as handle:
        handle.write(SENTENCE.encode() * 40)
    data = load(_spec(tmp_path), tmp_path / "elsewhere")
    after = corpus_digest(tmp_path, _spec(tmp_path).documents)
    assert after != before  # the new document is part of the corpus
    total = sum(len(d) + 1 for d in documents.values()) + len(SENTENCE) * 40 + 1
    assert len(data.train) + len(data.val) + len(data.test) == total


def _outside(tmp_path):
    corpus, outside = tmp_path / "corpus", tmp_path / "private"
    corpus.mkdir()
    outside.mkdir()
    _write_corpus(corpus, 60)
    (outside / "secret.rst.txt").write_text("password: hunter2\n" * 100)
    return corpus, outside


def test_a_link_leading_outside_the_corpus_is_refused_naming_it(tmp_path):
    """Before: a link to a file outside the tree was read into the corpus."""
    corpus, outside = _outside(tmp_path)
    (corpus / "a" / "leak.rst.txt").symlink_to(outside / "secret.rst.txt")
    with pytest.raises(DataError, match="outside the corpus folder") as raised:
        load(_spec(corpus), tmp_path / "elsewhere")
    assert str(outside / "secret.rst.txt") in str(raised.value)
    assert "remove the link" in str(raised.value)


def test_a_linked_folder_outside_the_corpus_is_never_read(tmp_path):
    """Refused where rglob follows the link into it; else not visited at all."""
    corpus, outside = _outside(tmp_path)
    (corpus / "b" / "more").symlink_to(outside)
    try:
        data = load(_spec(corpus), tmp_path / "elsewhere")
    except DataError as error:
        assert "outside the corpus folder" in str(error)
        return
    every = b"".join(bytes(s.data.tolist()) for s in (data.train, data.val, data.test))
    assert b"hunter2" not in every


def test_a_link_inside_the_corpus_is_read(tmp_path):
    documents = _write_corpus(tmp_path, 60)
    (tmp_path / "c" / "again.rst.txt").symlink_to(tmp_path / "index.rst.txt")
    data = load(_spec(tmp_path), tmp_path / "elsewhere")
    total = sum(len(d) + 1 for d in documents.values()) + len(documents["index.rst.txt"]) + 1
    assert len(data.train) + len(data.val) + len(data.test) == total
