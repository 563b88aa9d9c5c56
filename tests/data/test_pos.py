import numpy as np
import pytest
import torch

from gelus.data import DATASETS, DataError, load
from gelus.data.pos import TAGS, read_embeddings, read_tagged_tweets

# Two tweets, in the ark-tweet-nlp layout: token<TAB>tag, blank line between tweets.
TRAIN = "ikr\t!\nsmh\tG\nhe\tO\n\n@Lola\t@\nlol\t!\n"  # no closing blank line on the last tweet
DEV = "Gotta\tV\ngo\tV\n\n"
TEST = "Hello\t!\n\n"
WORDS = ["</s>", "UUUNKKK", "ikr", "he", "lol", "go", "hello"]


def write_pos(directory, train=TRAIN, embeddings_words=WORDS, dimension=50, names=None):
    names = names or {"train": "oct27.train", "dev": "oct27.dev", "test": "oct27.test"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / names["train"]).write_text(train, encoding="utf-8")
    (directory / names["dev"]).write_text(DEV, encoding="utf-8")
    (directory / names["test"]).write_text(TEST, encoding="utf-8")
    vectors = {
        word: np.arange(dimension) + 100 * index for index, word in enumerate(embeddings_words)
    }
    lines = [word + "\t" + " ".join(f"{v:.1f}" for v in vector) for word, vector in vectors.items()]
    (directory / "embeddings-twitter.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return vectors


def test_the_tagset_has_the_25_tags_in_the_papers_order():
    assert len(TAGS) == 25 and len(set(TAGS)) == 25
    assert TAGS[:4] == ("N", "O", "S", "^") and TAGS[-2:] == (",", "G")


def test_windows_are_previous_current_next_with_padding_and_unknowns(tmp_path):
    vectors = write_pos(tmp_path / "twitter-pos")
    data = load("twitter-pos", tmp_path)
    assert (len(data.train), len(data.val), len(data.test)) == (5, 2, 1)
    assert data.num_classes == 25 and data.train.sample_shape == (150,)
    pad, unk = vectors["</s>"], vectors["UUUNKKK"]
    # tweet 1: ikr smh he -> windows (</s> ikr smh) (ikr smh he) (smh he </s>); smh is unknown
    # tweet 2: @Lola lol -> (</s> @Lola lol) (@Lola lol </s>); @Lola is unknown
    expected = [
        [pad, vectors["ikr"], unk],
        [vectors["ikr"], unk, vectors["he"]],
        [unk, vectors["he"], pad],
        [pad, unk, vectors["lol"]],
        [unk, vectors["lol"], pad],
    ]
    inputs = data.train.inputs(torch.arange(5))
    assert inputs.dtype == torch.float32 and inputs.shape == (5, 150)
    np.testing.assert_array_equal(inputs.numpy(), np.array(expected).reshape(5, 150))
    assert [TAGS[i] for i in data.train.labels] == ["!", "G", "O", "@", "!"]
    # case is kept: "Gotta", "Hello" are not in the lower-case vocabulary
    np.testing.assert_array_equal(data.test.inputs(torch.tensor([0])).numpy()[0, 50:100], unk)
    moved = data.to("cpu")
    assert moved.name == "twitter-pos" and torch.equal(
        moved.val.inputs(torch.arange(2)), data.val.inputs(torch.arange(2))
    )


def test_missing_padding_and_unknown_rows_are_zero_vectors(tmp_path):
    write_pos(tmp_path / "twitter-pos", embeddings_words=["ikr", "he"], dimension=4)
    data = load("twitter-pos", tmp_path, validation=False)
    assert len(data.train) == 7 and data.val is None  # dev tweets merged into training
    first = data.train.inputs(torch.tensor([0]))[0]
    np.testing.assert_array_equal(first[:4].numpy(), np.zeros(4))  # </s>
    np.testing.assert_array_equal(first[4:8].numpy(), np.arange(4))  # ikr


def test_the_papers_file_names_are_accepted(tmp_path):
    names = {"train": "tweets-train.txt", "dev": "tweets-dev.txt", "test": "tweets-devtest.txt"}
    write_pos(tmp_path / "twitter-pos", names=names)
    assert len(load("twitter-pos", tmp_path).train) == 5


@pytest.mark.parametrize(
    "line, match",
    [
        ("ikr ! ", "expected 'token<TAB>tag'"),
        ("ikr\t!\textra", "expected 'token<TAB>tag'"),
        ("\t!", "expected 'token<TAB>tag'"),
        ("ikr\tNN", "unknown tag 'NN'"),
    ],
)
def test_malformed_pos_lines_name_the_file_and_line(tmp_path, line, match):
    path = tmp_path / "oct27.train"
    path.write_text(f"ok\tN\n{line}\n", encoding="utf-8")
    with pytest.raises(DataError, match=match) as error:
        read_tagged_tweets(path)
    assert f"{path}:2" in str(error.value)


def test_bad_embedding_files(tmp_path):
    path = tmp_path / "embeddings-twitter.txt"
    path.write_text("a 1 2 3\nb 1 2\n", encoding="utf-8")
    with pytest.raises(
        DataError, match=r"embeddings-twitter\.txt:2: 2 numbers after the word, expected 3"
    ):
        read_embeddings(path)
    path.write_text("a 1 x\n", encoding="utf-8")
    with pytest.raises(DataError, match="expected a word then numbers"):
        read_embeddings(path)
    path.write_text(
        "2 3\na 1 2 3\nb 4 5 6\na 7 8 9\n", encoding="utf-8"
    )  # header skipped, first 'a' kept
    words, vectors = read_embeddings(path)
    assert words == ["a", "b"] and vectors.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_missing_pos_files_say_where_to_get_them(tmp_path):
    with pytest.raises(DataError, match="ark-tweet-nlp"):
        load("twitter-pos", tmp_path)
    assert DATASETS["twitter-pos"].downloads == ()
