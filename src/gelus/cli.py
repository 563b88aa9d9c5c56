"""The ``gelus`` command line: one subcommand per area, each defined next to the code it drives.

Each area module named in ``COMMANDS`` provides ``register(subparsers)`` which adds its parser and
sets ``func`` (called with the parsed namespace, returning an exit code). Area modules import their
heavy dependencies inside the handlers so that ``gelus --help`` stays fast.
"""

import argparse
import importlib
import sys

# subcommand -> module providing register(subparsers)
COMMANDS = {
    "list": "gelus.experiments.cli",
    "run": "gelus.experiments.cli",
    "data": "gelus.data.cli",
    "bench": "gelus.bench.cli",
    "plot": "gelus.plots.cli",
    "report": "gelus.report.cli",
    "reproduce": "gelus.report.cli",
}


class UserError(Exception):
    """Bad input from the user: printed as one line, exit status 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gelus", description="The GELU family for PyTorch and the GELU paper's experiments."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    registered = set()
    for module_name in dict.fromkeys(COMMANDS.values()):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name):
                continue  # area not built yet
            raise
        module.register(subparsers)
        registered.add(module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as error:
        print(f"gelus {args.command}: error: {error}", file=sys.stderr)
        return 2
