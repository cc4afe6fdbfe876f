"""``gdn help [COMMAND...]``: the same text as ``gdn COMMAND --help``, reachable the way git users expect."""

from __future__ import annotations

import argparse
import sys

from ._argparse import Parser, _suggest, subparsers_of
from ._output import EXIT_OK, EXIT_USAGE, CliError
from ._parser import build_parser


def cmd_help(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = build_parser()
    done: list[str] = []
    for word in args.words:
        children = dict(subparsers_of(parser))
        if word not in children:
            where = " ".join(["gdn", *done])
            close = _suggest(word, list(children))
            hint = f"did you mean 'gdn help {' '.join([*done, close])}'?" if close else None
            known = ", ".join(children) or "none"
            raise CliError(
                "E_INVALID_ARGUMENT",
                f"'{word}' is not a command of {where} (commands: {known})",
                exit_code=EXIT_USAGE,
                suggestion=hint or f"run '{where} --help' to list them",
            )
        parser = children[word]
        done.append(word)
    assert isinstance(parser, Parser | argparse.ArgumentParser)
    parser.print_help(sys.stdout)
    return EXIT_OK
