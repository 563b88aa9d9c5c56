"""A text corpus of many documents, split train / validation / test by document.

A contiguous 90 / 5 / 5 % cut of one long text (fortunes) puts the end of the training text and
the start of the validation text in the same document; a corpus of documents is split whole ones
instead, and a document's split is fixed by its path alone:

    bucket(d) = SHA-256(d's path relative to the corpus folder) mod 20
    split(d)  = validation if bucket 0, test if bucket 1, train otherwise  (≈ 90 / 5 / 5 %)

so a version of the corpus that adds or drops documents moves no other document between splits.
Each split is its documents in path order, each followed by one newline. Every document is read
as :func:`gelus.data.text.read_text_file` reads a text (``stat`` first, streamed, stopped at the
first byte that is not UTF-8 text); the corpus as a whole is held to ``MAX_TEXT_BYTES``.

A file name that is not UTF-8 is a document like the others (its path's raw bytes are hashed); a
symbolic link that leads outside the corpus folder is refused (:func:`corpus_files`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from gelus.data.dataset import Dataset
from gelus.data.errors import ChecksumError, DataError
from gelus.data.sources import DatasetSpec, DocumentCorpus, Location
from gelus.data.text import MAX_TEXT_BYTES, MIN_WINDOWS, VOCAB, ByteSplit, read_text_file

__all__ = ["BUCKETS", "corpus_digest", "corpus_files", "document_split", "load_documents"]

BUCKETS = 20  # a document in bucket 0 is validation, 1 test, 2..19 train
_SPLITS = ("train", "val", "test")
_SHORTEST_CONTEXT = 64  # each split must hold MIN_WINDOWS windows of at least this context


def document_split(relative: str) -> str:
    """ "train", "val" or "test" for the document at ``relative`` (a POSIX path in the corpus)."""
    bucket = int(hashlib.sha256(_name_bytes(relative)).hexdigest(), 16) % BUCKETS
    return {0: "val", 1: "test"}.get(bucket, "train")


def _name_bytes(relative: str) -> bytes:
    """A path's bytes as the filesystem holds them: its UTF-8 for a UTF-8 name, and the raw bytes
    of a name that is not UTF-8 (Python keeps them as surrogate escapes), which is then read
    like any other document rather than crashing the loader."""
    return relative.encode("utf-8", "surrogateescape")


def corpus_files(directory: Path, corpus: DocumentCorpus) -> list[tuple[str, Path]]:
    """(relative POSIX path, path) of each document under ``directory``, in path order.

    A symbolic link (to a document or a folder) is followed only where it stays inside the
    corpus folder: one that leads outside it is a DataError naming the link and its target, so
    that nothing outside the tree is read into the corpus (an ``rglob`` follows such links)."""
    suffix = corpus.suffix
    root = directory.resolve()
    found = []
    for path in directory.rglob(f"*{suffix}"):
        target = path.resolve()
        if target != root and root not in target.parents:
            raise DataError(
                f"{path}: a link to {target}, outside the corpus folder {root}; a corpus reads "
                "only its own files: remove the link, or copy the file into the folder"
            )
        if path.is_file():
            found.append((path.relative_to(directory).as_posix(), path))
    return sorted(found)


def corpus_digest(directory: Path, corpus: DocumentCorpus) -> str:
    """SHA-256 over the corpus's documents in path order: each one's relative path, a NUL, its
    SHA-256 and a newline; the identity of the corpus a run trained on."""
    lines = []
    for relative, path in corpus_files(directory, corpus):
        _, digest = read_text_file(path, keep=False, context=None)
        lines.append(f"{relative}\0{digest}\n")
    return hashlib.sha256(_name_bytes("".join(lines))).hexdigest()


def load_documents(
    location: Location,
    spec: DatasetSpec,
    *,
    validation: bool = True,
    verify: bool = True,
) -> Dataset:
    """A ``DatasetSpec`` loader: the folder of documents at ``location`` (``spec.documents``),
    split by document, each split checked to hold a model's windows. ``verify`` compares the
    corpus's :func:`corpus_digest` with the recorded one."""
    corpus = spec.documents
    parts: dict[str, list[bytes]] = {name: [] for name in _SPLITS}
    lines, left = [], MAX_TEXT_BYTES
    for relative, path in corpus_files(location.directory, corpus):
        data, digest = read_text_file(path, context=None, limit=left)
        parts[document_split(relative)] += [data, b"\n"]
        lines.append(f"{relative}\0{digest}\n")
        left -= len(data) + 1
    actual = hashlib.sha256(_name_bytes("".join(lines))).hexdigest()
    if verify and corpus.digest and actual != corpus.digest:
        raise ChecksumError(
            f"{location.directory}: its {len(lines):,} documents are not the corpus recorded for "
            f"{spec.name} (SHA-256 {actual[:12]}…, recorded {corpus.digest[:12]}…: another "
            f"version of {spec.apt_package or 'its source'}); train on it anyway with --no-verify "
            "(the runs record the corpus's SHA-256)"
        )
    splits = {name: bytearray().join(chunks) for name, chunks in parts.items()}
    for name, data in splits.items():
        if len(data) < MIN_WINDOWS * (_SHORTEST_CONTEXT + 1):
            raise DataError(
                f"{location.directory}: its {name} documents hold {len(data):,} bytes, too few "
                f"for a model's windows; a corpus of documents needs more of them"
            )
    train, val, test = (ByteSplit(torch.frombuffer(splits[n], dtype=torch.uint8)) for n in _SPLITS)
    if not validation:  # train on train + val
        train, val = ByteSplit(torch.cat([train.data, val.data])), None
    source = f"{location.directory} ({len(lines):,} documents, corpus sha256 {actual})"
    return Dataset(spec.name, train, val, test, VOCAB, source)
