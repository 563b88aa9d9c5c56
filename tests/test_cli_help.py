"""Every command's ``--help`` says what the command does: the whole argparse tree is walked."""

import argparse

import pytest

from gelus.cli import build_parser


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("gelus",)):
    """(path, parser) of every command under ``parser``, nested ones (``gelus bench kernels``) too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield (*path, name), subparser
                yield from _commands(subparser, (*path, name))


COMMANDS = dict(_commands(build_parser()))


def test_the_walk_finds_every_command_and_the_nested_ones():
    names = {" ".join(path) for path in COMMANDS}
    assert {
        "gelus run",
        "gelus data fetch",
        "gelus bench kernels",
        "gelus plot activations",
    } <= names
    assert len(names) >= 13


@pytest.mark.parametrize("path", list(COMMANDS), ids=" ".join)
def test_every_command_has_a_description_in_its_help(path, capsys):
    parser = COMMANDS[path]
    assert parser.description and len(parser.description.split()) >= 5, path
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert " ".join(parser.description.split()) in help_text
