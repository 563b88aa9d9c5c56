"""The byte unigram and bigram entropies of a text dataset's validation split, each model
estimated on the training split (add-½ and add-0.01 smoothing): what a byte-level LM that learned
only byte frequencies, or only the previous byte, would score, in bits per byte.

    python tools/ngram_entropy.py linux-docs
"""

import argparse

import numpy as np

from gelus.data.catalog import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="a byte-level text dataset (gelus data)")
    name = parser.parse_args().dataset
    data = load(name)
    train = np.asarray(data.train.data, dtype=np.int64)
    val = np.asarray(data.val.data, dtype=np.int64)
    unigram = np.bincount(train, minlength=256) + 0.5
    unigram /= unigram.sum()
    bigram = np.full((256, 256), 0.01)
    np.add.at(bigram, (train[:-1], train[1:]), 1.0)
    bigram /= bigram.sum(axis=1, keepdims=True)
    print(f"{name}: {len(train):,} training bytes, {len(val):,} validation bytes")
    print(f"unigram: {-np.log2(unigram[val]).mean():.3f} bits per byte")
    print(f"bigram:  {-np.log2(bigram[val[:-1], val[1:]]).mean():.3f} bits per byte")


if __name__ == "__main__":
    main()
