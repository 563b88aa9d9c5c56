from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from _data_fixtures import (
    IDX_NAMES,
    cifar10_binary_members,
    files_under,
    http_server,
    sha256,
    write_mnist,
    write_tar,
)
from gelus.cli import main
from gelus.data import DATASETS, ChecksumError, DataError, RemoteFile, fetch, load
from gelus.data.catalog import DATASETS as CATALOG

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")


def local_mnist_spec(serve_dir: Path, base_url: str, corrupt: str | None = None, mirrors=("",)):
    """The MNIST spec with fixture checksums and mirrors on the local server.

    ``corrupt`` names a file whose recorded checksum is that of other bytes (the server then
    serves a file that does not match).
    """
    remote = []
    for name in IDX_NAMES:
        path = serve_dir / f"{name}.gz"
        checksum = sha256(path) if name != corrupt else "0" * 64
        urls = tuple(f"{base_url}{mirror}{name}.gz" for mirror in mirrors)
        remote.append(RemoteFile(f"{name}.gz", checksum, path.stat().st_size, urls))
    return replace(DATASETS["mnist"], remote=tuple(remote), system_dirs=())


@pytest.fixture
def served(tmp_path):
    serve_dir = tmp_path / "served"
    arrays = write_mnist(serve_dir, n_train=20, n_test=6)
    with http_server(serve_dir) as base_url:
        yield serve_dir, base_url, arrays


def test_fetch_downloads_verifies_and_load_reads(served, tmp_path):
    serve_dir, base_url, arrays = served
    spec = local_mnist_spec(serve_dir, base_url)
    root = tmp_path / "root"
    directory = fetch(spec, root, progress=False)
    assert directory == root / "mnist"
    assert files_under(root) == ["mnist", *sorted(f"mnist/{name}.gz" for name in IDX_NAMES)]
    for name in IDX_NAMES:
        assert sha256(directory / f"{name}.gz") == sha256(serve_dir / f"{name}.gz")
    data = load(spec, root, validation=False)
    np.testing.assert_array_equal(data.train.labels.numpy(), arrays["train-labels-idx1-ubyte"])


def test_a_dead_mirror_falls_through_to_the_next(served, tmp_path):
    serve_dir, base_url, _ = served
    spec = local_mnist_spec(serve_dir, base_url, mirrors=("missing/", ""))
    fetch(spec, tmp_path / "root", progress=False)
    assert len(files_under(tmp_path / "root" / "mnist")) == 4


def test_a_corrupted_download_is_rejected_and_leaves_nothing_behind(served, tmp_path):
    serve_dir, base_url, _ = served
    spec = local_mnist_spec(serve_dir, base_url, corrupt="train-images-idx3-ubyte")
    root = tmp_path / "root"
    with pytest.raises(
        ChecksumError, match=r"(?s)train-images-idx3-ubyte\.gz.*expected 0000.*rejected"
    ):
        fetch(spec, root, progress=False)
    assert not root.exists()  # the folders fetch made are gone, and no temporary file is left


def test_a_corrupted_file_after_good_ones_keeps_only_verified_files(served, tmp_path):
    serve_dir, base_url, _ = served
    spec = local_mnist_spec(serve_dir, base_url, corrupt="t10k-labels-idx1-ubyte")
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(ChecksumError):
        fetch(spec, root, progress=False)
    kept = files_under(root / "mnist")
    assert kept == sorted(f"{name}.gz" for name in IDX_NAMES[:3])  # verified, no partial file


def test_load_with_download_fetches_a_missing_dataset(served, tmp_path):
    serve_dir, base_url, arrays = served
    spec = local_mnist_spec(serve_dir, base_url)
    with pytest.raises(DataError, match="gelus data fetch mnist"):
        load(spec, tmp_path / "root")
    data = load(spec, tmp_path / "root", download=True, validation=False)
    np.testing.assert_array_equal(data.test.labels.numpy(), arrays["t10k-labels-idx1-ubyte"])


def test_fetch_replaces_a_corrupt_local_copy(served, tmp_path):
    serve_dir, base_url, _ = served
    spec = local_mnist_spec(serve_dir, base_url)
    directory = tmp_path / "root" / "mnist"
    directory.mkdir(parents=True)
    (directory / "train-labels-idx1-ubyte.gz").write_bytes(b"not the file")
    fetch(spec, tmp_path / "root", progress=False)
    assert sha256(directory / "train-labels-idx1-ubyte.gz") == sha256(
        serve_dir / "train-labels-idx1-ubyte.gz"
    )


def test_an_unreachable_server_is_one_data_error_naming_every_mirror(tmp_path):
    with http_server(tmp_path) as base_url:
        pass  # the server is shut down: its port now refuses connections
    remote = RemoteFile("x.gz", "0" * 64, None, (base_url + "x.gz",))
    spec = replace(DATASETS["mnist"], remote=(remote,), downloads=("x.gz",))
    with pytest.raises(DataError, match=r"(?s)could not download x\.gz.*127\.0\.0\.1") as error:
        fetch(spec, tmp_path / "root", progress=False)
    assert not isinstance(error.value, ChecksumError)
    assert not (tmp_path / "root").exists()


def test_cifar_tarball_over_http_is_fetched_then_extracted_on_load(tmp_path):
    serve_dir = tmp_path / "served"
    serve_dir.mkdir()
    members, arrays = cifar10_binary_members(per_batch=2, n_test=3)
    write_tar(serve_dir / "cifar-10-binary.tar.gz", members)
    with http_server(serve_dir) as base_url:
        archive = serve_dir / "cifar-10-binary.tar.gz"
        remote = RemoteFile(
            archive.name, sha256(archive), archive.stat().st_size, (base_url + archive.name,)
        )
        spec = replace(DATASETS["cifar10"], remote=(remote,))
        data = load(spec, tmp_path / "root", download=True, validation=False)
    np.testing.assert_array_equal(data.test.images.numpy(), arrays["test_x"])
    assert "cifar10/cifar-10-batches-bin/data_batch_5.bin" in files_under(tmp_path / "root")


def test_gelus_data_env_var_is_the_default_root(tmp_path, monkeypatch):
    write_mnist(tmp_path / "mnist", n_train=10, n_test=2)
    monkeypatch.setenv("GELUS_DATA", str(tmp_path))
    data = load(replace(DATASETS["mnist"], remote=()), validation=False)
    assert data.source == str(tmp_path / "mnist")


def test_cli_lists_every_dataset_with_status_and_steps(tmp_path, capsys):
    write_mnist(tmp_path / "mnist", n_train=10, n_test=2)  # random files: not the real MNIST
    assert main(["data", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in DATASETS:
        assert f"{name}: " in out
    mnist = out.split("mnist: ")[1]
    assert f"found in {tmp_path / 'mnist'}" in mnist and "CHECKSUM MISMATCH" in mnist
    assert f"gelus data fetch cifar10 --data-dir {tmp_path}" in out
    assert str(tmp_path / "cifar10") in out and "LDC" in out and "ark-tweet-nlp" in out


def test_cli_lists_the_installed_fashion_mnist_as_verified(tmp_path, capsys):
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(
            f"Fashion-MNIST is not installed in {FASHION_DIR} (apt-get install dataset-fashion-mnist)"
        )
    assert main(["data", "--data-dir", str(tmp_path)]) == 0
    fashion = capsys.readouterr().out.split("fashion-mnist: ")[1].split("cifar10:")[0]
    assert (
        f"found in {FASHION_DIR}, 30.9 MB" in fashion and "verified (SHA-256 of 4 files)" in fashion
    )


def test_cli_fetch_downloads_and_reports_errors(served, tmp_path, monkeypatch, capsys):
    serve_dir, base_url, _ = served
    monkeypatch.setitem(CATALOG, "mnist", local_mnist_spec(serve_dir, base_url))
    assert main(["data", "fetch", "mnist", "--data-dir", str(tmp_path / "root"), "--quiet"]) == 0
    assert "downloaded and verified" in capsys.readouterr().out
    assert main(["data", "fetch", "timit"]) == 2
    assert "cannot be downloaded" in capsys.readouterr().err
    assert main(["data", "fetch", "imagenet"]) == 2
    assert "valid names: mnist, fashion-mnist" in capsys.readouterr().err
