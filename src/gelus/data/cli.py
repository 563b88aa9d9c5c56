"""``gelus data``: list every dataset (where found, size, verified) and ``gelus data fetch NAME``."""

__all__ = ["register"]


def register(subparsers) -> None:
    """Add the ``data`` subcommand (with its ``fetch`` action) to the ``gelus`` parser."""
    parser = subparsers.add_parser(
        "data",
        help="list the datasets (found where, verified) or fetch one",
        description="Without an action: list every dataset, where it was found, its size, whether "
        "its files match the recorded SHA-256, and how to get a missing one.",
    )
    parser.add_argument(
        "--data-dir",
        help="root holding NAME/ folders (default: $GELUS_DATA, else ~/.cache/gelus/data)",
    )
    parser.set_defaults(func=_list)
    actions = parser.add_subparsers(dest="data_action", metavar="ACTION")
    fetch = actions.add_parser(
        "fetch",
        help="download and verify a dataset into DATA_DIR/NAME",
        description="Download dataset NAME into DATA_DIR/NAME: each file is kept only once its "
        "SHA-256 matches the recorded one; a failure leaves nothing behind.",
    )
    fetch.add_argument("name", metavar="NAME", help="dataset name (see `gelus data`)")
    fetch.add_argument(
        "--data-dir",
        dest="fetch_data_dir",
        help="root to download into (default: as for `gelus data`)",
    )
    fetch.add_argument("--quiet", action="store_true", help="no progress bar")
    fetch.set_defaults(func=_fetch)


def _size(num_bytes: int) -> str:
    return f"{num_bytes / 1e6:.1f} MB"


def _found_bytes(spec, location) -> int:
    if spec.documents is None:
        return location.size
    from gelus.data.documents import corpus_files

    return sum(path.stat().st_size for _, path in corpus_files(location.directory, spec.documents))


def _corpus_verification(spec, location) -> str:
    from gelus.data.documents import corpus_digest

    digest = corpus_digest(location.directory, spec.documents)
    if not spec.documents.digest:
        return f"not verified (no SHA-256 recorded; this corpus's is {digest})"
    if digest != spec.documents.digest:
        return (
            f"CORPUS DIFFERS: SHA-256 {digest}, recorded {spec.documents.digest} (another version)"
        )
    return "verified (the SHA-256 of its documents, in path order)"


def _verification(spec, location) -> str:
    from gelus.data.errors import DataError
    from gelus.data.sources import verify_file

    if spec.documents is not None:
        return _corpus_verification(spec, location)
    paths = list(location.files)
    paths += [
        location.directory / remote.name
        for remote in spec.remote
        if (location.directory / remote.name).is_file()
        and location.directory / remote.name not in paths
    ]
    verified = []
    for path in paths:
        try:
            if verify_file(path, spec.remote_file(path.name)):
                verified.append(path.name)
        except DataError as error:
            return f"CHECKSUM MISMATCH: {error}"
    if not verified:
        return "not verified (no SHA-256 recorded for these files)"
    if len(verified) < len(paths):
        return f"verified: {', '.join(verified)} (no SHA-256 recorded for the other files)"
    return f"verified (SHA-256 of {len(verified)} file{'s' if len(verified) > 1 else ''})"


def _list(args) -> int:
    from gelus.data.catalog import DATASETS, how_to_get
    from gelus.data.sources import find, search_dirs

    for name, spec in DATASETS.items():
        location = find(spec, args.data_dir)
        print(f"{name}: {spec.title}")
        if location is None:
            searched = ", ".join(str(path) for path in search_dirs(spec, args.data_dir))
            print(f"  missing (searched {searched}); to get it:")
            print(how_to_get(spec, args.data_dir, indent="    "))
        else:
            print(f"  found in {location.directory}, {_size(_found_bytes(spec, location))}")
            print(f"  {_verification(spec, location)}")
    return 0


def _fetch(args) -> int:
    from gelus.data.catalog import get_spec
    from gelus.data.errors import DataError, FetchError
    from gelus.data.sources import fetch

    data_dir = args.fetch_data_dir or args.data_dir
    try:
        directory = fetch(get_spec(args.name), data_dir, progress=not args.quiet)
    except DataError as error:
        raise FetchError(str(error)) from None
    print(f"{args.name}: downloaded and verified into {directory}")
    return 0
