"""Twitter part-of-speech tagging (Gimpel et al. 2011; Owoputi et al. 2013) as the paper used it.

Files (ark-tweet-nlp ``data/twpos-data-v0.3``): ``oct27.train`` (1,000 tweets, 14,619 tokens),
``oct27.dev`` (327 tweets, 4,823 tokens), ``oct27.test`` (500 tweets, 7,152 tokens) and, when
present, ``daily547.conll`` (547 tweets), each one ``token<TAB>tag`` per line with a blank line
between tweets; plus a word-embedding text file, one ``word v1 v2 ... vD`` per line.

Inputs follow the paper's code: a window of 3 words (previous, current, next); ``</s>`` pads both
edges of a tweet; a word without an embedding becomes the one unknown token ``UUUNKKK``; words are
looked up exactly as written (no lowercasing, as in the paper; a spec with ``lowercase=True``
lowercases tweets for embedding files built from lowercased text). A missing ``</s>`` or
``UUUNKKK`` row in the embedding file is added as a zero vector. Files larger than
``MAX_TEXT_BYTES`` are refused unread, and an embedding that is NaN or infinite (also once rounded
to float32) is refused.
"""

from pathlib import Path

import numpy as np
import torch

from gelus.data.dataset import Dataset, WindowSplit
from gelus.data.errors import DataError
from gelus.data.sources import DatasetSpec, Location

__all__ = [
    "MAX_TEXT_BYTES",
    "PAD_TOKEN",
    "TAGS",
    "TAG_DESCRIPTIONS",
    "UNKNOWN_TOKEN",
    "load_twitter_pos",
    "read_embeddings",
    "read_tagged_tweets",
    "tweet_windows",
]

# The paper's files are far smaller (embeddings of a few hundred thousand words at most).
MAX_TEXT_BYTES = 1 << 29
PAD_TOKEN = "</s>"
UNKNOWN_TOKEN = "UUUNKKK"

# The 25 tags of Gimpel et al. (2011), in the paper's code's numbering.
TAG_DESCRIPTIONS = {
    "N": "common noun",
    "O": "pronoun (personal/WH; not possessive)",
    "S": "nominal + possessive",
    "^": "proper noun",
    "Z": "proper noun + possessive",
    "L": "nominal + verbal (e.g. i'm)",
    "M": "proper noun + verbal",
    "V": "verb, including copula and auxiliaries",
    "A": "adjective",
    "R": "adverb",
    "!": "interjection",
    "D": "determiner",
    "P": "pre- or postposition, or subordinating conjunction",
    "&": "coordinating conjunction",
    "T": "verb particle",
    "X": "existential there, predeterminers",
    "Y": "X + verbal",
    "#": "hashtag",
    "@": "at-mention",
    "~": "discourse marker (RT, ':' in retweet constructions)",
    "U": "URL or email address",
    "E": "emoticon",
    "$": "numeral",
    ",": "punctuation",
    "G": "other: abbreviations, foreign words, possessive endings, symbols, garbage",
}
TAGS = tuple(TAG_DESCRIPTIONS)
_TAG_INDEX = {tag: index for index, tag in enumerate(TAGS)}


def read_tagged_tweets(path: str | Path) -> list[list[tuple[str, str]]]:
    """Tweets as lists of (token, tag) from a ``token<TAB>tag`` file with blank lines between tweets.

    Raises ``DataError`` naming the file and line for a line that is not exactly two tab-separated
    fields, an empty token, or a tag outside the 25-tag set.
    """
    path = Path(path)
    tweets, tweet = [], []
    text = _read_text(path, "token<TAB>tag lines")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if tweet:
                tweets.append(tweet)
                tweet = []
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0]:
            raise DataError(f"{path}:{number}: expected 'token<TAB>tag', got {line!r}")
        token, tag = fields[0], fields[1].strip()
        if tag not in _TAG_INDEX:
            raise DataError(f"{path}:{number}: unknown tag {tag!r}; the tags are {' '.join(TAGS)}")
        tweet.append((token, tag))
    if tweet:  # the last tweet may lack its closing blank line
        tweets.append(tweet)
    if not tweets:
        raise DataError(f"{path}: no tagged tokens found (expected token<TAB>tag lines)")
    return tweets


def read_embeddings(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Words and their vectors (float32 [V, D]) from a ``word v1 ... vD`` text file.

    A first line of two integers (a word2vec-style header) is skipped; a repeated word keeps its
    first vector. Raises ``DataError`` for a line whose vector length differs or is not numeric.
    """
    path = Path(path)
    words, vectors, seen = [], [], set()
    dimension = None
    lines = _read_text(path, "'word v1 ... vD' lines").splitlines()
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        if number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
            continue
        try:
            with np.errstate(over="ignore"):  # beyond float32 becomes inf, refused just below
                vector = np.array([float(value) for value in fields[1:]], dtype=np.float32)
        except ValueError:
            raise DataError(
                f"{path}:{number}: expected a word then numbers, got {line[:80]!r}"
            ) from None
        if not np.isfinite(vector).all():
            raise DataError(
                f"{path}:{number}: the vector of {fields[0][:40]!r} holds NaN or infinite values "
                "(or values beyond float32); expected finite numbers"
            )
        if dimension is None:
            dimension = len(vector)
        if len(vector) != dimension or dimension == 0:
            raise DataError(
                f"{path}:{number}: {len(vector)} numbers after the word, expected {dimension}"
            )
        if fields[0] not in seen:
            seen.add(fields[0])
            words.append(fields[0])
            vectors.append(vector)
    if not words:
        raise DataError(f"{path}: no embeddings found (expected 'word v1 ... vD' lines)")
    return words, np.stack(vectors)


def _read_text(path: Path, expected: str) -> str:
    """The UTF-8 text of ``path``, refused unread above ``MAX_TEXT_BYTES``."""
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise DataError(
                f"{path}: {size} bytes, more than the {MAX_TEXT_BYTES} a Twitter POS file may "
                f"take; expected {expected}"
            )
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found (expected {expected})") from None
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error})") from None
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror or error})") from None


def tweet_windows(
    tweets: list[list[tuple[str, str]]], vocabulary: dict[str, int], lowercase: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Word-index windows (int64 [N, 3]: previous, current, next) and tag indices (int64 [N]).

    ``</s>`` pads the tweet edges; a word not in ``vocabulary`` maps to ``UUUNKKK``.
    """
    pad, unknown = vocabulary[PAD_TOKEN], vocabulary[UNKNOWN_TOKEN]
    windows, tags = [], []
    for tweet in tweets:
        ids = [pad]
        for token, tag in tweet:
            ids.append(vocabulary.get(token.lower() if lowercase else token, unknown))
            tags.append(_TAG_INDEX[tag])
        ids.append(pad)
        windows.extend(ids[i - 1 : i + 2] for i in range(1, len(ids) - 1))
    return np.asarray(windows, dtype=np.int64).reshape(-1, 3), np.asarray(tags, dtype=np.int64)


def load_twitter_pos(
    location: Location, spec: DatasetSpec, *, validation: bool = True, verify: bool = True
) -> Dataset:
    """Twitter POS: train = oct27.train, val = oct27.dev, test = oct27.test, inputs [B, 3 * D].

    ``validation=False`` merges the dev tweets into training. ``verify`` is unused (no checksums
    are recorded: the files are not downloaded).
    """
    train_path, dev_path, test_path, embeddings_path = location.files
    words, vectors = read_embeddings(embeddings_path)
    for token in (PAD_TOKEN, UNKNOWN_TOKEN):
        if token not in words:
            words.append(token)
            vectors = np.concatenate([vectors, np.zeros((1, vectors.shape[1]), np.float32)])
    vocabulary = {word: index for index, word in enumerate(words)}
    table = torch.from_numpy(vectors)
    lowercase = spec.lowercase

    def split(*paths: Path) -> WindowSplit:
        tweets = [tweet for path in paths for tweet in read_tagged_tweets(path)]
        windows, tags = tweet_windows(tweets, vocabulary, lowercase)
        return WindowSplit(table, torch.from_numpy(windows), torch.from_numpy(tags))

    return Dataset(
        name=spec.name,
        train=split(train_path) if validation else split(train_path, dev_path),
        val=split(dev_path) if validation else None,
        test=split(test_path),
        num_classes=len(TAGS),
        source=str(location.directory),
        class_names=TAGS,
    )
