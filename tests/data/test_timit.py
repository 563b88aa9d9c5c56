import itertools

import numpy as np
import pytest
import torch

from gelus.data import DataError, load
from gelus.data.timit import context_windows, read_feature_file, write_feature_file


def utterances(rng, lengths):
    frames = sum(lengths)
    features = rng.normal(3.0, 2.0, (frames, 26)).astype(np.float32)
    labels = rng.integers(0, 39, frames)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return features, labels, offsets


def write_timit(directory, rng, lengths=((7, 3, 12), (4, 6), (5,))):
    directory.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, split_lengths in zip(("train", "val", "test"), lengths, strict=True):
        arrays = utterances(rng, split_lengths)
        np.savez(
            directory / f"timit_{split}.npz",
            features=arrays[0],
            labels=arrays[1],
            offsets=arrays[2],
        )
        splits[split] = arrays
    return splits


def naive_windows(offsets, context=5):
    """Per-frame loop: the frame and its neighbours, repeating the utterance's edge frames."""
    rows = []
    for start, end in itertools.pairwise(offsets):
        for frame in range(start, end):
            rows.append(
                [min(max(frame + shift, start), end - 1) for shift in range(-context, context + 1)]
            )
    return np.array(rows)


def test_context_windows_are_clamped_at_utterance_edges():
    offsets = np.array([0, 7, 8, 20])
    windows = context_windows(offsets)
    np.testing.assert_array_equal(windows, naive_windows(offsets))
    assert windows[7].tolist() == [7] * 11  # a one-frame utterance repeats itself
    assert windows[0].tolist() == [0] * 6 + [1, 2, 3, 4, 5]


def test_splits_are_standardised_once_with_training_statistics(tmp_path):
    splits = write_timit(tmp_path / "timit", np.random.default_rng(0))
    data = load("timit", tmp_path)
    assert data.num_classes == 39 and data.train.sample_shape == (286,)
    assert (len(data.train), len(data.val), len(data.test)) == (22, 10, 5)

    train_x = splits["train"][0].astype(np.float64)
    mean, std = train_x.mean(0), train_x.std(0)
    for name in ("train", "val", "test"):
        features, labels, offsets = splits[name]
        expected = ((features - mean) / std)[naive_windows(offsets)].reshape(len(features), 286)
        split = getattr(data, name)
        index = torch.arange(len(split))
        np.testing.assert_allclose(split.inputs(index).numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(split.labels.numpy(), labels)
    # standardised once: the training frames have mean 0 and standard deviation 1 per coefficient
    table = data.train.table.double()
    np.testing.assert_allclose(table.mean(0).numpy(), 0, atol=1e-5)
    np.testing.assert_allclose(table.std(0, unbiased=False).numpy(), 1, atol=1e-5)


def test_validation_false_merges_val_into_training(tmp_path):
    splits = write_timit(tmp_path / "timit", np.random.default_rng(1))
    data = load("timit", tmp_path, validation=False)
    assert data.val is None and len(data.train) == 32
    # the first val frame (train frame 22) starts a 4-frame utterance (frames 22..25)
    assert data.train.windows[22].tolist() == [22] * 6 + [23, 24, 25, 25, 25]
    merged = np.concatenate([splits["train"][0], splits["val"][0]]).astype(np.float64)
    expected = (merged[22] - merged.mean(0)) / merged.std(0)
    np.testing.assert_allclose(data.train.table[22].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_write_feature_file_round_trips(tmp_path):
    features, labels, offsets = utterances(np.random.default_rng(2), (3, 4))
    write_feature_file(tmp_path / "f.npz", features, labels, offsets)
    read = read_feature_file(tmp_path / "f.npz")
    for got, want in zip(read, (features, labels, offsets), strict=True):
        np.testing.assert_array_equal(got, want)
    assert read[0].dtype == np.float32 and read[1].dtype == np.int64 and read[2].dtype == np.int64


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda a: {**a, "offsets": np.array([0, 3, 2, 7])}, "inconsistent offsets"),
        (lambda a: {**a, "offsets": np.array([1, 3, 7])}, "inconsistent offsets"),
        (
            lambda a: {**a, "offsets": np.array([0, 3, 6])},
            r"offsets\[-1\] = number of frames \(7\)",
        ),
        (lambda a: {**a, "offsets": np.array([0, 3, 3, 7])}, "inconsistent offsets"),
        (lambda a: {**a, "labels": np.full(7, 39)}, r"labels span 39\.\.39, expected 0\.\.38"),
        (lambda a: {**a, "labels": np.zeros(6, np.int64)}, "labels of shape"),
        (lambda a: {**a, "features": np.zeros((7, 13), np.float32)}, r"expected \[F, 26\]"),
        (lambda a: {**a, "features": np.full((7, 26), np.nan, np.float32)}, "NaN"),
        (lambda a: {k: v for k, v in a.items() if k != "offsets"}, r"missing arrays \['offsets'\]"),
        (
            lambda a: {**a, "labels": np.zeros(7, np.float32)},
            "labels have dtype float32, expected int64",
        ),
        (
            lambda a: {**a, "labels": np.array([None] * 7)},
            "labels: an array of dtype object; expected numbers",
        ),  # object arrays need pickle: refused from the header, before their data is read
    ],
)
def test_bad_feature_files_name_the_file_and_the_expectation(tmp_path, change, match):
    features, labels, offsets = utterances(np.random.default_rng(3), (3, 4))
    path = tmp_path / "timit_train.npz"
    np.savez(path, **change({"features": features, "labels": labels, "offsets": offsets}))
    with pytest.raises(DataError, match=match) as error:
        read_feature_file(path)
    assert str(path) in str(error.value)


def test_a_truncated_feature_file_is_a_data_error(tmp_path):
    features, labels, offsets = utterances(np.random.default_rng(4), (3, 4))
    path = tmp_path / "timit_test.npz"
    write_feature_file(path, features, labels, offsets)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match=r"not a readable \.npz"):
        read_feature_file(path)


def test_missing_timit_explains_the_licence_and_the_format(tmp_path):
    with pytest.raises(DataError, match="LDC") as error:
        load("timit", tmp_path)
    assert "timit_train.npz" in str(error.value)
