"""The datasets of the GELU paper: files, recorded checksums, mirrors, and ``load``.

Checksums are the SHA-256 of the files as distributed, as recorded by tensorflow_datasets
(``url_checksums/{mnist,fashion_mnist,cifar10,cifar100}.txt``) and Keras (the CIFAR python
tarballs). Fashion-MNIST's ``content_sha256`` values were computed from Debian's
``dataset-fashion-mnist`` files, whose deflate streams are byte-identical to the canonical ``.gz``
files: restoring the canonical gzip header (file name, mtime 2017-08-31) reproduces the recorded
SHA-256 of all four files.
"""

import os
from dataclasses import replace

from gelus.data.cifar import CIFAR10_CLASSES, CIFAR_VALIDATION_SIZE, load_cifar
from gelus.data.dataset import Dataset
from gelus.data.documents import load_documents
from gelus.data.errors import DataError, DatasetNotFoundError
from gelus.data.idx import MNIST_VALIDATION_SIZE, load_mnist_like
from gelus.data.pos import TAGS, load_twitter_pos
from gelus.data.sources import (
    DatasetSpec,
    DocumentCorpus,
    RemoteFile,
    SplitSizes,
    data_root,
    fetch,
    find,
    search_dirs,
)
from gelus.data.text import (
    ENWIK8_BYTES,
    SPLIT_FRACTIONS,
    TEXT_FILE_PREFIX,
    VOCAB,
    load_enwik8,
    load_named_text_file,
    load_text,
)
from gelus.data.timit import CONTEXT, NUM_COEFFICIENTS, NUM_PHONES, load_timit

__all__ = ["DATASETS", "get_spec", "how_to_get", "load"]

_IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
_FASHION_MIRRORS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
)
_FASHION_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip
_TORONTO = "https://www.cs.toronto.edu/~kriz/"
_POS_DATA = "https://github.com/brendano/ark-tweet-nlp/tree/master/data/twpos-data-v0.3"


def _idx_remote(mirrors: tuple[str, ...], records: dict[str, tuple]) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(f"{name}.gz", sha256, size, tuple(m + f"{name}.gz" for m in mirrors), content)
        for name, (sha256, size, content) in records.items()
    )


_MNIST = DatasetSpec(
    name="mnist",
    title="MNIST handwritten digits (LeCun et al. 1998), IDX files",
    layouts=(tuple((f"{name}.gz", name) for name in _IDX_FILES),),
    loader=load_mnist_like,
    remote=_idx_remote(
        _MNIST_MIRRORS,
        {
            "train-images-idx3-ubyte": (
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                9912422,
                None,
            ),
            "train-labels-idx1-ubyte": (
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                28881,
                None,
            ),
            "t10k-images-idx3-ubyte": (
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                1648877,
                None,
            ),
            "t10k-labels-idx1-ubyte": (
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                4542,
                None,
            ),
        },
    ),
    downloads=tuple(f"{name}.gz" for name in _IDX_FILES),
    citation="LeCun, Bottou, Bengio, Haffner (1998)",
    sample_shape=(1, 28, 28),
    num_classes=10,
    # 60,000 training images, the last 5,000 held out; 10,000 test images
    split_sizes=SplitSizes(60_000 - MNIST_VALIDATION_SIZE, MNIST_VALIDATION_SIZE, 10_000),
    class_names=tuple(str(digit) for digit in range(10)),
)

_FASHION_MNIST = replace(
    _MNIST,
    name="fashion-mnist",
    title="Fashion-MNIST (Xiao, Rasul, Vollgraf 2017), IDX files",
    remote=_idx_remote(
        _FASHION_MIRRORS,
        {
            "train-images-idx3-ubyte": (
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                26421880,
                "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
            ),
            "train-labels-idx1-ubyte": (
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                29515,
                "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
            ),
            "t10k-images-idx3-ubyte": (
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                4422102,
                "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
            ),
            "t10k-labels-idx1-ubyte": (
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
                5148,
                "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
            ),
        },
    ),
    system_dirs=("/usr/share/datasets/fashion-mnist",),
    apt_package="dataset-fashion-mnist",
    instructions="",
    citation="Xiao, Rasul, Vollgraf (2017), arXiv:1708.07747",
    class_names=_FASHION_CLASSES,  # the shape, classes and split sizes are MNIST's
)


def _cifar(
    name,
    title,
    num_classes,
    binary_dir,
    binary_files,
    python_dir,
    python_files,
    tarballs,
    class_names,
):
    (binary_tar, binary_sha, binary_size), (python_tar, python_sha, python_size) = tarballs
    layouts = (
        tuple((f"{binary_dir}/{f}",) for f in binary_files),
        ((binary_tar,),),
        tuple((f"{python_dir}/{f}",) for f in python_files),
        ((python_tar,),),
    )
    return DatasetSpec(
        name=name,
        title=title,
        layouts=layouts,
        loader=load_cifar,
        remote=(
            RemoteFile(binary_tar, binary_sha, binary_size, (_TORONTO + binary_tar,)),
            RemoteFile(python_tar, python_sha, python_size, (_TORONTO + python_tar,)),
        ),
        downloads=(binary_tar,),
        citation="Krizhevsky (2009), Learning Multiple Layers of Features from Tiny Images",
        sample_shape=(3, 32, 32),
        num_classes=num_classes,
        # 50,000 training images, the last 5,000 held out; 10,000 test images
        split_sizes=SplitSizes(50_000 - CIFAR_VALIDATION_SIZE, CIFAR_VALIDATION_SIZE, 10_000),
        class_names=class_names,
        layout_kinds=("binary", "archive", "python", "archive"),
        extracted_layout=(None, 0, None, 2),  # each tarball extracts into the layout before it
    )


_CIFAR10 = _cifar(
    "cifar10",
    "CIFAR-10, binary version (python version read with a restricted unpickler)",
    10,
    "cifar-10-batches-bin",
    (*(f"data_batch_{i}.bin" for i in range(1, 6)), "test_batch.bin"),
    "cifar-10-batches-py",
    (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"),
    (
        (
            "cifar-10-binary.tar.gz",
            "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
            170052171,
        ),
        (
            "cifar-10-python.tar.gz",
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
            170498071,
        ),
    ),
    CIFAR10_CLASSES,
)
_CIFAR100 = _cifar(
    "cifar100",
    "CIFAR-100 (fine labels), binary version (python version read with a restricted unpickler)",
    100,
    "cifar-100-binary",
    ("train.bin", "test.bin"),
    "cifar-100-python",
    ("train", "test"),
    (
        (
            "cifar-100-binary.tar.gz",
            "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
            168513733,
        ),
        (
            "cifar-100-python.tar.gz",
            "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
            169001437,
        ),
    ),
    (),
)

_TWITTER_POS = DatasetSpec(
    name="twitter-pos",
    title="Twitter POS (Gimpel et al. 2011; Owoputi et al. 2013) with 50-d word embeddings",
    layouts=(
        (
            ("oct27.train", "oct27.splits/oct27.train", "tweets-train.txt"),
            ("oct27.dev", "oct27.splits/oct27.dev", "tweets-dev.txt"),
            ("oct27.test", "oct27.splits/oct27.test", "tweets-devtest.txt"),
            ("embeddings-twitter.txt", "embeddings.txt"),
        ),
    ),
    loader=load_twitter_pos,
    instructions=(
        f"no download: get oct27.train, oct27.dev and oct27.test from {_POS_DATA} "
        "(folder oct27.splits), and a word-embedding text file (one 'word v1 ... v50' per line, "
        "holding '</s>' and 'UUUNKKK' like the paper's embeddings-twitter.txt) saved as "
        "embeddings-twitter.txt"
    ),
    citation="Gimpel et al. (2011), ACL; Owoputi et al. (2013), NAACL",
    # a window of 3 words, each a 50-d embedding as in the paper's embeddings-twitter.txt (an
    # embedding file of another dimension D gives samples of 3 * D)
    sample_shape=(3 * 50,),
    num_classes=len(TAGS),
    # tokens of ark-tweet-nlp's twpos-data-v0.3 oct27.train / .dev / .test (1,000 / 327 / 500
    # tweets), counted in those files
    split_sizes=SplitSizes(14_619, 4_823, 7_152),
    class_names=TAGS,
    lowercase=False,
)

_TIMIT = DatasetSpec(
    name="timit",
    title="TIMIT frames (26 MFCC features, 39 phone classes), user-made feature files",
    layouts=((("timit_train.npz",), ("timit_val.npz",), ("timit_test.npz",)),),
    loader=load_timit,
    instructions=(
        "no download (the corpus is licensed by the LDC, LDC93S1): compute per-frame features "
        "and write timit_train.npz, timit_val.npz, timit_test.npz in the format of docs/DATA.md "
        "(gelus.data.timit.write_feature_file)"
    ),
    citation="Garofolo et al. (1993), LDC93S1",
    sample_shape=((2 * CONTEXT + 1) * NUM_COEFFICIENTS,),  # 11 frames of 26 features
    num_classes=NUM_PHONES,
    # frames, approximate (the user's feature files decide): the 3,696 training utterances, the
    # 400-utterance dev set and the 192-utterance core test set at 10 ms per frame
    split_sizes=SplitSizes(1_124_800, 122_000, 57_900),
)

# Debian's fortunes 1:1.99.1-7.3 (/usr/share/games/fortunes): every English fortune file but
# ascii-art (pictures), in name order; name -> (SHA-256, bytes) of the file as installed
_FORTUNES_FILES = {
    "art": ("600b8197bc994fd4fcbb623aa5e700629540af44f044d4907886bd1031f160ce", 85327),
    "computers": ("a86be224d9f733b88eeaf8a46ea0427e05cc69c69edcf5f6db47ddf561ca37fd", 237981),
    "cookie": ("5dc97eee96dcc5287c373be629482730d45f77b59da1287933c9c5f482a055eb", 245093),
    "debian": ("491dd04bf909b64152bcb554b9bc88df0ca50c0dc676d74d10742bf38aaa50de", 15615),
    "definitions": ("57be4744c353d931fa2ca95f50215d4b67539f5a527ae628a6441fb4a1258caa", 180268),
    "disclaimer": ("c085d66ea68686d5e28852cef77c3eeb3640895c5647b148deeaaada2c07fa7b", 10749),
    "drugs": ("a5a59ee8b0e1fd3085a38dfa29149fe9a2c8d7f256b74aea71aa2cc08a9990c1", 40931),
    "education": ("ba13321d6d6beb7a6e65296a47450bfc87b24a319fff2e94762011b59a31aa35", 39280),
    "ethnic": ("61695cb9b60dbee91755027da1fa4f850f4c6386ff38197a48e4ff1696385e19", 34364),
    "food": ("78077a65b9288df71e7b2a8e8258cd3b1005d1282f7c7e57ad53927f374df45d", 34377),
    "fortunes": ("8819e6b83bacd6b7e8a4a2483f41e126b3b4b3ef8cd2aca907a53b163f082fd5", 24516),
    "goedel": ("9d447862c803f22cdf7bb26cb70cca1a7f8a2a7992f2793ddcb43cfcf3302ab0", 7391),
    "humorists": ("ffdf67e1f4049133bf904b769c364de45e5ae0abfb3ea7c9afb54b87b89acfc4", 42446),
    "kids": ("82e51834990afd36f2ea2f25864b368e2f44f9c761aba034035b26061de6d5be", 28587),
    "knghtbrd": ("c25e8373b38a6f159a7b1d336f363d5c962224a6ddcc86279dec47aad3c869b3", 87971),
    "law": ("f04141f94e788b7899e0adb0490d182ce711f8fdbb8252343a5257e717e9279d", 56657),
    "linux": ("85b0e5eadf7adeea77da4e1fbd456c962ce3bd1dabbd053098ecf37de9169cf3", 58496),
    "linuxcookie": ("4f75959924ae5bb1955c30a5c985e641ec17cd5ebb7453d839f94b1988331202", 19466),
    "literature": ("22eab7d53ce994d0466901bb0d799ae3289603e17dc0bdb7f16666931155c5a5", 53589),
    "love": ("4d4fb7c540e5500e44643524dae41dd7d2b21b80be184253fd9f8541f6029fc5", 20423),
    "magic": ("b9553a1d84d966db55a24a779206cc4565bf3686c9ecbc31215f654129e3166e", 9816),
    "medicine": ("18b8c7b098e649024159c9d9f3e37a0832bbd2d5cf3e2317b313134761afd487", 19193),
    "men-women": ("8fc4eb68a8d16826372d9bfdc910c8ab917b8aa59e2aac533f3ec2b49a1314ba", 101843),
    "miscellaneous": ("e3d81fd016f9f84a70ecb9aa197c4911aca01a8034e49345b81093f6751bba9c", 48174),
    "news": ("4b8eebae510353d6f628dfdaf52bf8cbdafb891a122b146421c805b74f389617", 11322),
    "paradoxum": ("85228975016fe975065eaf0baf55980d32d26f9e2fa99f69da4696d11ac02036", 6383),
    "people": ("2afb4b9f577be114d2dca279bc5590ee8415e1405295d7d7626c888d82f338e8", 153878),
    "perl": ("b19145eadf97c31add2e0a199d93ffa0eb92e00275c2724b7ad6b4e412113536", 40182),
    "pets": ("084472564bc55df566733a224f8a737d78717132ec43628be0c2af466ac41ecc", 7225),
    "platitudes": ("88448274efec3d2c0908cc11525c9b065b95a32c232a2c58c67a87dd88545ee5", 35626),
    "politics": ("b56ca45a046edd5c459090a5c6b335332661b436e814b41ac87bb58065ad6131", 114921),
    "pratchett": ("48410754f1b2091f418ac27421d2764628b23c91427b12809031cf2b39be5b0e", 401),
    "riddles": ("bcaaab907b156a18a8943f0768828b4f1a18d382497d0e2ef012fe6aaa27becc", 20294),
    "science": ("7ab350b142ee6c70c1d8517c5a1b3790c09b190a62859427cad98e6e35a19fcc", 129991),
    "songs-poems": ("eb714d297b468da91b6ca32baefb000279a3e3740b09f8a87db24fe58e010b1a", 233975),
    "sports": ("b71dd524d7bca888ec1014fb849a8a15cf58017c59127e572d393ef7632c35c8", 37317),
    "startrek": ("7b2e4c235b99452b2de4c47d67aae0faac2ea508a2d644609e4ef5db7653c39c", 30216),
    "tao": ("4adddc35a122bb233a16c076abc0be0326ea3a68594146a6baee3b5f6489e12b", 37143),
    "translate-me": ("a183879cf46ee4a6176f6b9f0f31adb6abfc6333b64f8fbebeba57017c81e12e", 1787),
    "wisdom": ("9b0bd6b9331a68c9172219784a411c417c055ed69734edc7b4406795b87d4e94", 61623),
    "work": ("ad8a0e104160e2c4782fa86e143cd60ffab2872985d4293ffd0af6df19dbfa28", 106982),
    "zippy": ("b996a112c99a2d61782e1a9a1f3c5445122f18ac312485f2c78279e82ca33932", 38978),
}


def _text_sizes(total: int) -> SplitSizes:
    """Bytes in the train / val / test splits of a corpus of ``total`` bytes (``load_text``)."""
    train = int(total * SPLIT_FRACTIONS[0])
    val = int(total * SPLIT_FRACTIONS[1])
    return SplitSizes(train, val, total - train - val)


_FORTUNES = DatasetSpec(
    name="fortunes",
    title="English fortune cookies (Debian's fortunes), 2.57 MB of UTF-8 text, byte-level",
    layouts=(tuple((name,) for name in _FORTUNES_FILES),),
    loader=load_text,
    remote=tuple(RemoteFile(name, sha, size) for name, (sha, size) in _FORTUNES_FILES.items()),
    system_dirs=("/usr/share/games/fortunes",),
    apt_package="fortunes",
    citation="the fortune-mod collections, packaged by Debian (fortunes)",
    sample_shape=(1,),  # a sample is one byte: split sizes count bytes
    num_classes=VOCAB,  # a byte-level model predicts one of 256 byte values
    # bytes, contiguous 90 / 5 / 5 %
    split_sizes=_text_sizes(sum(size for _, size in _FORTUNES_FILES.values())),
)

_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
# no checksum is published for either: "" pins each by the SHA-256 of its first download
_TINY_SHAKESPEARE = DatasetSpec(
    name="tiny-shakespeare",
    title="tiny-shakespeare (Karpathy's char-rnn), 1.1 MB of UTF-8 text, byte-level",
    layouts=((("input.txt",),),),
    loader=load_text,
    remote=(RemoteFile("input.txt", "", 1_115_394, (_SHAKESPEARE_URL,)),),
    downloads=("input.txt",),
    citation="Karpathy (2015), char-rnn",
    sample_shape=(1,),
    num_classes=VOCAB,
    split_sizes=_text_sizes(1_115_394),
)

_ENWIK8 = DatasetSpec(
    name="enwik8",
    title="enwik8 (Hutter Prize), the first 10^8 bytes of English Wikipedia, byte-level",
    layouts=((("enwik8",),), (("enwik8.zip",),)),
    loader=load_enwik8,
    remote=(RemoteFile("enwik8.zip", "", 36_445_475, ("http://mattmahoney.net/dc/enwik8.zip",)),),
    downloads=("enwik8.zip",),
    citation="Hutter (2006), the Hutter Prize; Mahoney, Large Text Compression Benchmark",
    sample_shape=(1,),
    num_classes=VOCAB,
    split_sizes=_text_sizes(ENWIK8_BYTES),  # 90 / 5 / 5 M bytes, the standard split
)

# Debian's linux-doc-6.1 6.1.192-2: the reStructuredText sources of the kernel's documentation as
# its HTML build ships them (html/_sources/**/*.txt), 3,183 documents, and their corpus_digest
_LINUX_DOCS = DatasetSpec(
    name="linux-docs",
    title="the Linux kernel's documentation (Debian's linux-doc-6.1), 3,183 reStructuredText "
    "documents, 24.2 MB of UTF-8 text, byte-level, split by document",
    layouts=((("index.rst.txt",),),),  # the root document marks the folder
    loader=load_documents,
    documents=DocumentCorpus(
        ".txt", "50ccb7e69e3413e5f021b6c8cfdd092133ab12918b43be713c7792485d82ff75"
    ),
    system_dirs=("/usr/share/doc/linux-doc-6.1/html/_sources",),
    apt_package="linux-doc-6.1",
    citation="the Linux kernel documentation (GPL-2.0; some documents under the licence their "
    "SPDX line names), packaged by Debian (linux-doc-6.1)",
    sample_shape=(1,),
    num_classes=VOCAB,
    split_sizes=SplitSizes(21_662_968, 1_153_872, 1_344_234),  # bytes, whole documents per split
)

_TEXT = DatasetSpec(
    name="text",
    title="any UTF-8 text file of yours (corpus.txt), byte-level",
    layouts=((("corpus.txt",),),),
    loader=load_text,
    instructions="no download: save any UTF-8 text file (at least tens of kB) as corpus.txt, or "
    "name the file by its path: gelus run transformer-lm --dataset path/to/file.txt",
    sample_shape=(1,),
    num_classes=VOCAB,
    split_sizes=_text_sizes(1_000_000),  # for planning only: the user's file decides
)

_ALL = (
    _MNIST, _FASHION_MNIST, _CIFAR10, _CIFAR100, _TWITTER_POS, _TIMIT,
    _FORTUNES, _LINUX_DOCS, _TINY_SHAKESPEARE, _ENWIK8, _TEXT,
)  # fmt: skip
DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in _ALL}


def get_spec(name: str) -> DatasetSpec:
    """The ``DatasetSpec`` called ``name``; an unknown name raises ``DataError`` listing the names."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}") from None


def how_to_get(
    spec: DatasetSpec, data_dir: str | os.PathLike | None = None, indent: str = "  "
) -> str:
    """The exact steps to obtain ``spec``'s files, for messages and ``gelus data``."""
    target = data_root(data_dir) / spec.name
    steps = []
    if spec.apt_package:
        steps.append(
            f"sudo apt-get install {spec.apt_package}  (installs {', '.join(spec.system_dirs)})"
        )
    if spec.downloads:
        urls = [spec.remote_file(name).urls[0] for name in spec.downloads]
        steps.append(
            f"gelus data fetch {spec.name}"
            + (f" --data-dir {data_dir}" if data_dir else "")
            + f"  (downloads {', '.join(urls)} into {target})"
        )
    if spec.instructions:
        steps.append(spec.instructions)
    wanted = ", ".join(alternatives[0] for alternatives in spec.layouts[0])
    steps.append(f"or put {wanted} into {target}")
    return "\n".join(f"{indent}- {step}" for step in steps)


def load(
    name: str | DatasetSpec,
    data_dir: str | os.PathLike | None = None,
    download: bool = False,
    *,
    validation: bool = True,
    verify: bool = True,
) -> Dataset:
    """Load a dataset by name (``DATASETS``) or from a ``DatasetSpec``.

    Looks in ``<data_dir or $GELUS_DATA or ~/.cache/gelus/data>/NAME/``, then the dataset's system
    locations, then downloads when ``download`` is set. ``validation=True`` holds out the paper's
    validation split (``val``); ``False`` trains on it too and sets ``val`` to None. ``verify``
    checks files against their recorded SHA-256 (``ChecksumError`` on a mismatch).
    Raises ``DatasetNotFoundError`` with the steps to get the files when none are found.

    A ``text:<sha256 prefix>:<path>`` name (``gelus.data.text.text_file_dataset``) is that text
    file, checked against its SHA-256 prefix whatever ``verify`` says: the prefix is its identity.
    """
    if isinstance(name, str) and name.startswith(TEXT_FILE_PREFIX):
        return load_named_text_file(name, validation=validation)
    spec = name if isinstance(name, DatasetSpec) else get_spec(name)
    location = find(spec, data_dir)
    if location is None and download and spec.downloads:
        fetch(spec, data_dir)
        location = find(spec, data_dir)
    if location is None:
        searched = ", ".join(str(path) for path in search_dirs(spec, data_dir))
        raise DatasetNotFoundError(
            f"{spec.name}: no files found (searched {searched}); to get them:\n{how_to_get(spec, data_dir)}"
        )
    return spec.loader(location, spec, validation=validation, verify=verify)
