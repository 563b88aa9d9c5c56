"""The transformer tests' byte corpus, written where the harness reads it (``--data``'s layout).

Not a conftest.py: the library's tests import the one ``conftest`` module by name.
"""

from pathlib import Path

# non-ASCII on purpose: the byte-level model must see UTF-8's multi-byte sequences
CORPUS_TEXT = "It was the best of times, it was the worst of times; naïve café.\n" * 120


def write_corpus(root: Path) -> Path:
    """``root`` holding ``text/corpus.txt``, the corpus's 8,040 bytes of UTF-8; returns ``root``."""
    (root / "text").mkdir(parents=True, exist_ok=True)
    (root / "text" / "corpus.txt").write_text(CORPUS_TEXT, encoding="utf-8")
    return root
