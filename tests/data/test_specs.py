"""What a ``DatasetSpec`` says of its data without loading them (sample shape, classes, split sizes)
against what its loader gives: on the real files where they are installed, and on small files in
the genuine formats otherwise."""

from dataclasses import replace

import numpy as np
import pytest

from _data_fixtures import IDX_NAMES, cifar10_binary_members, idx_bytes, write_mnist, write_tar
from gelus.data import DATASETS, DatasetSpec, SplitSizes, find, load
from gelus.data.cifar import CIFAR_VALIDATION_SIZE
from gelus.data.idx import MNIST_VALIDATION_SIZE
from gelus.data.pos import TAGS
from test_pos import write_pos
from test_timit import write_timit

# Split sizes that the user's files decide, with how far the real files may differ from the spec.
APPROXIMATE = {"timit": 0.1}  # frames, from the utterance counts at 10 ms per frame


def local(name: str) -> DatasetSpec:
    """The real spec without recorded checksums or system folders: it reads the test's files."""
    return replace(DATASETS[name], remote=(), system_dirs=())


def sizes_of(data) -> SplitSizes:
    return SplitSizes(len(data.train), 0 if data.val is None else len(data.val), len(data.test))


def assert_described(spec: DatasetSpec, data, sizes: bool = True, validation: bool = True):
    """The loaded ``data`` has the shape, classes (and split sizes) that ``spec`` states."""
    for split in (data.train, data.val, data.test):
        if split is not None:
            assert split.sample_shape == spec.sample_shape, spec.name
    assert data.num_classes == spec.num_classes
    assert data.class_names == spec.class_names
    if sizes:
        expected, actual = spec.sizes(validation), sizes_of(data)
        tolerance = APPROXIMATE.get(spec.name, 0)
        for field, want, got in zip(SplitSizes._fields, expected, actual, strict=True):
            assert abs(got - want) <= tolerance * want, f"{spec.name} {field}: {got} != {want}"


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_spec_states_its_shape_classes_and_split_sizes(name):
    spec = DATASETS[name]
    assert spec.sample_shape and all(n > 0 for n in spec.sample_shape)
    assert spec.num_classes > 0
    assert not spec.class_names or len(spec.class_names) == spec.num_classes
    train, val, test = spec.split_sizes
    assert train > 0 and val > 0 and test > 0
    assert spec.sizes(validation=True) == spec.split_sizes
    assert spec.sizes(validation=False) == SplitSizes(train + val, 0, test)


def test_the_recorded_numbers():
    sizes = {name: tuple(spec.split_sizes) for name, spec in DATASETS.items()}
    assert sizes == {
        "mnist": (55_000, 5_000, 10_000),
        "fashion-mnist": (55_000, 5_000, 10_000),
        "cifar10": (45_000, 5_000, 10_000),
        "cifar100": (45_000, 5_000, 10_000),
        "twitter-pos": (14_619, 4_823, 7_152),
        "timit": (1_124_800, 122_000, 57_900),
        "fortunes": (2_313_717, 128_539, 128_541),  # bytes
        "linux-docs": (21_662_968, 1_153_872, 1_344_234),  # bytes of whole documents
        "tiny-shakespeare": (1_003_854, 55_769, 55_771),
        "enwik8": (90_000_000, 5_000_000, 5_000_000),  # the standard split
        "text": (900_000, 50_000, 50_000),  # nominal, for planning
    }
    shapes = {name: spec.sample_shape for name, spec in DATASETS.items()}
    assert shapes == {
        "mnist": (1, 28, 28),
        "fashion-mnist": (1, 28, 28),
        "cifar10": (3, 32, 32),
        "cifar100": (3, 32, 32),
        "twitter-pos": (150,),
        "timit": (286,),
        "fortunes": (1,),
        "linux-docs": (1,),
        "tiny-shakespeare": (1,),
        "enwik8": (1,),
        "text": (1,),
    }
    classes = {name: spec.num_classes for name, spec in DATASETS.items()}
    assert classes == {
        "mnist": 10,
        "fashion-mnist": 10,
        "cifar10": 10,
        "cifar100": 100,
        "twitter-pos": 25,
        "timit": 39,
        "fortunes": 256,  # byte values
        "linux-docs": 256,
        "tiny-shakespeare": 256,
        "enwik8": 256,
        "text": 256,
    }


def test_a_spec_without_sizes_has_none_and_inconsistent_fields_are_refused():
    spec = DatasetSpec("toy", "toy", layouts=((("a",),),), loader=load)
    assert spec.split_sizes is None and spec.sizes(validation=False) is None
    assert (spec.num_classes, spec.class_names, spec.lowercase) == (0, (), False)
    with pytest.raises(ValueError, match="layout_kinds has 2 entries for 1 layouts"):
        replace(spec, layout_kinds=("binary", "python"))
    with pytest.raises(ValueError, match="2 class names for 3 classes"):
        replace(spec, num_classes=3, class_names=("a", "b"))


@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize("validation", [True, False])
def test_installed_datasets_match_their_spec(name, validation):
    spec = DATASETS[name]
    if find(spec) is None:
        pytest.skip(f"{name} is not installed here")
    assert_described(spec, load(spec, validation=validation, verify=False), validation=validation)


def test_full_size_mnist_files_match_the_spec(tmp_path):
    # uncompressed zeros: full-size IDX files are cheap to write and read (47 MB)
    for name, n in zip(IDX_NAMES, (60_000, 60_000, 10_000, 10_000), strict=True):
        shape = (n, 28, 28) if "images" in name else (n,)
        (tmp_path / "mnist").mkdir(exist_ok=True)
        (tmp_path / "mnist" / name).write_bytes(idx_bytes(np.zeros(shape, np.uint8)))
    for validation in (True, False):
        data = load(local("mnist"), tmp_path, validation=validation)
        assert_described(local("mnist"), data, validation=validation)


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_small_idx_files_have_the_specs_shape_and_classes(tmp_path, name):
    write_mnist(tmp_path / name, n_train=MNIST_VALIDATION_SIZE + 3, n_test=4)
    data = load(local(name), tmp_path)
    assert_described(local(name), data, sizes=False)
    assert len(data.val) == DATASETS[name].split_sizes.val


def test_small_cifar_files_have_the_specs_shape_classes_and_validation_size(tmp_path):
    members, _ = cifar10_binary_members(per_batch=1001, n_test=7)
    archive = tmp_path / "cifar10" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    write_tar(archive, members)
    data = load(local("cifar10"), tmp_path)
    assert_described(local("cifar10"), data, sizes=False)
    assert len(data.val) == CIFAR_VALIDATION_SIZE == DATASETS["cifar10"].split_sizes.val


def test_twitter_pos_files_of_the_oct27_token_counts_give_the_specs_sizes(tmp_path):
    spec = DATASETS["twitter-pos"]
    write_pos(tmp_path / "twitter-pos")  # 50-d embeddings, as the paper's
    directory = tmp_path / "twitter-pos"
    for suffix, tokens in zip(("train", "dev", "test"), spec.split_sizes, strict=True):
        tweets = [f"w{i}\t{TAGS[i % len(TAGS)]}\n" for i in range(tokens)]
        # tweets of 10 tokens, a blank line between them
        text = "".join(line + ("\n" if i % 10 == 9 else "") for i, line in enumerate(tweets))
        (directory / f"oct27.{suffix}").write_text(text, encoding="utf-8")
    for validation in (True, False):
        assert_described(spec, load(spec, tmp_path, validation=validation), validation=validation)


def test_small_timit_files_have_the_specs_shape_and_classes(tmp_path):
    write_timit(tmp_path / "timit", np.random.default_rng(0))
    assert_described(DATASETS["timit"], load("timit", tmp_path), sizes=False)
