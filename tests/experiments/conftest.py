"""Fixtures the transformer tests share: a small byte corpus written where the harness reads it."""

import pytest

from gelus.data.text import load_text_file

# non-ASCII on purpose: the byte-level model must see UTF-8's multi-byte sequences
CORPUS_TEXT = "It was the best of times, it was the worst of times; naïve café.\n" * 120


@pytest.fixture(scope="module")
def corpus_text() -> str:
    """The corpus's text (8,520 bytes in UTF-8)."""
    return CORPUS_TEXT


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, corpus_text):
    """A data root holding ``text/corpus.txt``, the layout ``--data`` expects."""
    root = tmp_path_factory.mktemp("data")
    (root / "text").mkdir()
    (root / "text" / "corpus.txt").write_text(corpus_text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def data(corpus):
    """The corpus loaded as the harness loads it."""
    return load_text_file(corpus / "text" / "corpus.txt")
