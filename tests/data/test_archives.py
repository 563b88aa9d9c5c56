"""Hostile tar archives: nothing lands outside the data folder, no bomb, no hang, clear errors.

The archives are built member by member with ``tarfile`` (as an attacker would), checksum skipped
as with ``--no-verify``; ``tarfile``'s own ``"data"`` filter is not what stops them.
"""

import contextlib
import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _data_fixtures import cifar10_binary_members, files_under, write_tar
from gelus.data import DATASETS, DataError, UnsafeArchiveError, fetch, load
from gelus.data import archive as archive_module
from gelus.data.archive import extract_archive

EXPECTED = tuple(cifar10_binary_members(per_batch=2, n_test=2)[0])
SRC = Path(__file__).resolve().parents[2] / "src"


def _spec():
    return replace(DATASETS["cifar10"], remote=())  # no checksum: as with --no-verify


def _info(name, kind=tarfile.REGTYPE, size=0, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, linkname
    return info


def _write(path: Path, infos_and_data, fmt=tarfile.GNU_FORMAT) -> None:
    with tarfile.open(path, "w:gz", format=fmt) as tar:
        for info, data in infos_and_data:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _good_members():
    members, _ = cifar10_binary_members(per_batch=2, n_test=2)
    return [(_info(name, size=len(data)), data) for name, data in members.items()]


def _chain_members():
    """CVE-2025-4517's shape: a symlink chain whose resolved length passes PATH_MAX, then a link
    through it to '/', then a file written through that link."""
    step = "d" * 247
    members, path = [], ""
    for _ in range(16):
        members.append((_info(path + step, tarfile.DIRTYPE), None))
        members.append((_info(path + "l", tarfile.SYMTYPE, linkname=step), None))
        path += "l/"
    members.append(
        (_info(path + "x" * 50, tarfile.SYMTYPE, linkname="../" * 64), None)
    )  # past / is /
    members.append((_info("escape", tarfile.SYMTYPE, linkname=path + "x" * 50), None))
    members.append((_info("escape/tmp/gelus-escaped", size=1), b"x"))
    return members


HOSTILE = {
    "parent": [(_info("../escaped.bin", size=1), b"x")],
    "inner parent": [(_info("cifar-10-batches-bin/../../escaped.bin", size=1), b"x")],
    "absolute": [(_info("/tmp/gelus-absolute.bin", size=1), b"x")],
    "symlink": [(_info("cifar-10-batches-bin/link", tarfile.SYMTYPE, linkname="/"), None)],
    "relative symlink": [
        (_info("cifar-10-batches-bin/data_batch_1.bin", tarfile.SYMTYPE, linkname="x"), None)
    ],
    "hard link": [
        (_info("cifar-10-batches-bin/hard", tarfile.LNKTYPE, linkname="/etc/passwd"), None)
    ],
    "inner hard link": [
        (
            _info("cifar-10-batches-bin/hard", tarfile.LNKTYPE, linkname="cifar-10-batches-bin/x"),
            None,
        )
    ],
    "character device": [(_info("cifar-10-batches-bin/null", tarfile.CHRTYPE), None)],
    "block device": [(_info("cifar-10-batches-bin/sda", tarfile.BLKTYPE), None)],
    "fifo": [(_info("cifar-10-batches-bin/fifo", tarfile.FIFOTYPE), None)],
    "long symlink chain": _chain_members(),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_only_regular_files_and_folders_are_extracted(tmp_path, kind):
    outside = tmp_path / "outside"
    directory = outside / "root" / "cifar10"
    directory.mkdir(parents=True)
    archive = directory / "cifar-10-binary.tar.gz"
    _write(archive, _good_members()[:1] + HOSTILE[kind] + _good_members()[1:])
    with pytest.raises(
        UnsafeArchiveError, match=r"cifar-10-binary\.tar\.gz: member .* not allowed"
    ):
        load(_spec(), outside / "root")
    # nothing written anywhere: not outside, not in the folder, no staging left behind
    assert files_under(outside) == ["root", "root/cifar10", "root/cifar10/cifar-10-binary.tar.gz"]
    assert not Path("/tmp/gelus-escaped").exists() and not Path("/tmp/gelus-absolute.bin").exists()


def test_the_long_chain_would_escape_through_tarfiles_own_extraction(tmp_path):
    """The chain is a real attack: tarfile without a filter follows it out of the folder."""
    archive = tmp_path / "chain.tar.gz"
    _write(archive, _chain_members()[:-1])  # the links only: no file is written through them
    target = tmp_path / "plain"
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "fully_trusted_filter"):  # Python >= 3.11.4 (3.14 defaults to "data")
            tar.extractall(target, filter="fully_trusted")
        else:
            tar.extractall(target)
    assert os.path.realpath(target / "escape") == "/"


def test_a_member_larger_than_the_cap_is_refused_before_it_is_written(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "a.tar.gz"
    _write(archive, [(_info("big.bin", size=5000), bytes(5000))])
    with pytest.raises(DataError, match=r"big\.bin.*5000 bytes.*exceeds the caps"):
        extract_archive(archive, directory, max_member_bytes=4096)
    assert files_under(directory) == ["a.tar.gz"]


def test_members_over_the_total_cap_are_refused(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "a.tar.gz"
    _write(archive, [(_info(f"{i}.bin", size=3000), bytes(3000)) for i in range(4)])
    with pytest.raises(DataError, match=r"2\.bin.*exceeds the caps"):
        extract_archive(archive, directory, max_member_bytes=4096, max_total_bytes=8000)
    assert files_under(directory) == ["a.tar.gz"]


def test_a_header_claiming_gigabytes_is_refused_without_reading_them(tmp_path):
    """A GNU long-name header of 64 MiB (compressing to 64 KiB) would be read whole into memory
    by tarfile; the capped decompressed stream stops it after the caps' worth of bytes."""
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "bomb.tar.gz"
    name_size = 64 * 2**20
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, name_size
    with gzip.open(archive, "wb", compresslevel=9) as stream:
        stream.write(header.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(name_size // 2**20):
            stream.write(b"a" * 2**20)
    assert archive.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=r"bomb\.tar\.gz: the archive decompresses to more"):
            extract_archive(archive, directory, max_member_bytes=2**20, max_total_bytes=2**20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # the caps plus slack, not the 64 MiB the header asked for


def test_too_many_members_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(archive_module, "MAX_MEMBERS", 5)
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "a.tar.gz"
    _write(archive, [(_info(f"{i}", size=0), b"") for i in range(6)])
    with pytest.raises(DataError, match="more than 5 members"):
        extract_archive(archive, directory)


def test_a_name_given_twice_is_refused(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "a.tar.gz"
    _write(archive, [(_info("x", size=1), b"1"), (_info("x", size=1), b"2")])
    with pytest.raises(DataError, match="appears twice"):
        extract_archive(archive, directory)
    assert files_under(directory) == ["a.tar.gz"]


def test_extraction_is_staged_in_the_data_folder_and_renamed_into_place(tmp_path, monkeypatch):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    _write(archive, _good_members())
    seen = []
    real_replace = os.replace

    def replace_spy(source, destination):
        seen.append((Path(source), Path(destination), files_under(directory)))
        real_replace(source, destination)

    monkeypatch.setattr(archive_module.os, "replace", replace_spy)
    extract_archive(archive, directory, EXPECTED)
    ((source, destination, before),) = seen
    assert source.parent.parent == directory and source.parent.name.startswith(".cifar-10-binary")
    assert destination == directory / "cifar-10-batches-bin"
    assert "cifar-10-batches-bin" not in before  # nothing in place until the rename
    assert all(f"{source.parent.name}/{name}" in before for name in EXPECTED)
    assert files_under(directory) == sorted(
        ["cifar-10-binary.tar.gz", "cifar-10-batches-bin", *EXPECTED]
    )


def test_leftovers_of_a_killed_extraction_are_removed_by_the_next_load(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    write_tar(archive, dict(cifar10_binary_members(per_batch=1001, n_test=2)[0]))
    # what kill -9 leaves: a half-written staging folder
    leftover = directory / ".cifar-10-binary.tar.gz.k1ll3d.extract"
    (leftover / "cifar-10-batches-bin").mkdir(parents=True)
    (leftover / "cifar-10-batches-bin" / "data_batch_1.bin").write_bytes(b"half")
    other = directory / ".someone-elses.extract"  # another archive's: not touched
    other.mkdir()
    data = load(_spec(), tmp_path)
    assert len(data.test) == 2
    assert not leftover.exists() and other.exists()
    assert not [p for p in directory.iterdir() if p.name.startswith(".cifar-10-binary")]


def test_a_real_kill_9_mid_extraction_leaves_nothing_the_next_load_keeps(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    write_tar(archive, dict(cifar10_binary_members(per_batch=1001, n_test=2)[0]))
    script = textwrap.dedent(
        f"""
        import os, signal
        from gelus.data import archive
        real = archive.os.replace
        def die(*args):  # killed after every member was staged, before the rename
            os.kill(os.getpid(), signal.SIGKILL)
        archive.os.replace = die
        archive.extract_archive(archive.Path({str(archive)!r}), archive.Path({str(directory)!r}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", script], env=env, timeout=120)
    assert result.returncode == -9
    assert [p for p in directory.iterdir() if p.name.endswith(".extract")]  # the leftover
    load(_spec(), tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == [
        "cifar-10-batches-bin",
        "cifar-10-binary.tar.gz",
    ]


def test_the_lock_is_the_data_folder_not_a_file_others_can_create(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    _write(archive, _good_members())
    before = set(os.listdir(tempfile.gettempdir()))
    with archive_module.directory_lock(directory):
        worker = threading.Thread(target=extract_archive, args=(archive, directory, EXPECTED))
        worker.start()
        time.sleep(0.3)
        assert worker.is_alive(), "extraction did not wait for the folder's lock"
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert (directory / EXPECTED[0]).is_file()
    assert sorted(os.listdir(directory)) == ["cifar-10-batches-bin", "cifar-10-binary.tar.gz"]
    assert not [n for n in set(os.listdir(tempfile.gettempdir())) - before if "extract" in n]


def _unprivileged() -> list[str]:
    """A command prefix under which root, too, obeys file permissions."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "root needs util-linux's setpriv to test a read-only folder"
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def test_a_tarball_in_a_read_only_folder_is_one_clear_error(tmp_path):
    directory = tmp_path / "cifar10"
    directory.mkdir()
    archive = directory / "cifar-10-binary.tar.gz"
    write_tar(archive, dict(cifar10_binary_members(per_batch=2, n_test=2)[0]))
    script = textwrap.dedent(
        f"""
        from dataclasses import replace
        from gelus.data import DATASETS, DataError, load
        try:
            load(replace(DATASETS["cifar10"], remote=()), {str(tmp_path)!r})
        except DataError as error:
            print("DataError:", error)
        """
    )
    directory.chmod(0o555)
    try:
        result = subprocess.run(
            [*_unprivileged(), sys.executable, "-c", script],
            env={**os.environ, "PYTHONPATH": str(SRC)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        directory.chmod(0o755)
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert f"DataError: {archive}: cannot extract into {directory}" in result.stdout
    assert "--data-dir" in result.stdout and "tar -xf cifar-10-binary.tar.gz" in result.stdout
    assert sorted(os.listdir(directory)) == ["cifar-10-binary.tar.gz"]


VALID_TAR = io.BytesIO()
with tarfile.open(fileobj=VALID_TAR, mode="w:gz") as _tar:
    for _name, _data in (("a/x.bin", b"x" * 700), ("a/y.bin", b"yz" * 300), ("b", b"")):
        _tar.addfile(_info(_name, size=len(_data)), io.BytesIO(_data))
VALID_TAR = VALID_TAR.getvalue()
RAW_TAR = gzip.decompress(VALID_TAR)


@settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.tuples(st.integers(0, len(RAW_TAR) - 1), st.integers(0, 255)).map(
            lambda change: gzip.compress(
                RAW_TAR[: change[0]] + bytes([change[1]]) + RAW_TAR[change[0] + 1 :]
            )
        ),
        st.integers(0, len(VALID_TAR)).map(lambda n: VALID_TAR[:n]),
    )
)
def test_fuzz_archives_extract_inside_the_folder_or_raise_a_data_error(tmp_path, data):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    directory = root / "data"
    directory.mkdir()
    archive = directory / "fuzz.tar.gz"
    archive.write_bytes(data)
    with contextlib.suppress(DataError):
        extract_archive(archive, directory, max_member_bytes=4096, max_total_bytes=8192)
    for path in root.rglob("*"):
        assert not path.is_symlink() and (path.is_file() or path.is_dir())
        assert path.is_dir() or path.stat().st_size <= 4096 or path == archive
    assert not [p for p in directory.iterdir() if p.name.endswith(".extract")]
    assert {p.name for p in root.iterdir()} == {"data"}


def test_a_fetch_into_a_folder_that_cannot_be_created_is_one_clear_error():
    root = Path("/sys/kernel/gelus-data")  # sysfs: not even root creates folders there
    if not root.parent.is_dir():
        pytest.skip("needs Linux sysfs")
    with pytest.raises(DataError, match=r"cannot create /sys/kernel/gelus-data/mnist .*--data-dir"):
        fetch(DATASETS["mnist"], root, progress=False)
