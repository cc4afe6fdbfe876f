"""``gdn``: the command line (docs/architecture.md#command-line).

Each command lives in its own private module imported only when it runs, so ``gdn --help`` loads
nothing but argparse and ``gdn validate`` never imports the runtime, SDKs or servers.
Exit codes: 0 ok, 1 internal/turn failure, 2 usage, 3 config (also a tool, extension, python model
or connector that the runtime cannot load: ``_output.exit_code_for``), 4 validation, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._env import load_env
from ._output import (
    EXIT_CONFIG,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VALIDATION,
    CliError,
    ErrorView,
    print_error,
)
from ._parser import build_parser

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`gdn logs | head`)


def _configure_logging(args: argparse.Namespace) -> None:
    import logging

    level = logging.WARNING
    if getattr(args, "quiet", False):
        level = logging.ERROR
    elif getattr(args, "verbose", 0) >= 2:
        level = logging.DEBUG
    elif getattr(args, "verbose", 0) == 1:
        level = logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:  # bare `gdn`: what can I do here? (stdout, exit 0: it is an answer, not an error)
        parser.print_help(sys.stdout)
        return EXIT_OK
    args, extras = parser.parse_known_args(words)
    if extras:  # reported against the subcommand they were given to, with its usage and a did-you-mean
        from ._argparse import Parser, innermost

        culprit = innermost(parser, args)
        if isinstance(culprit, Parser):
            culprit.unknown_options(extras)
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "command", None):
        parser.print_help(sys.stdout)
        return EXIT_OK
    _configure_logging(args)
    json_mode = bool(getattr(args, "json", False))
    color = not getattr(args, "no_color", False)
    try:
        result: int = args.func(args)
        sys.stdout.flush()  # a closed pipe fails here, inside the handlers below, not at interpreter exit
        return result
    except KeyboardInterrupt:
        if not json_mode:
            sys.stderr.write("\ninterrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `gdn logs | head`: the reader stopped reading, nothing went wrong here. Exit as a Unix tool
        # killed by SIGPIPE does (128 + 13, as 130 is 128 + SIGINT), with stdout pointed at
        # /dev/null so that the interpreter's last flush does not fail again on the closed pipe.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except CliError as exc:
        print_error(exc, json_mode=json_mode, color=color, exit_code=exc.exit_code)
        return exc.exit_code
    except Exception as exc:
        from ..errors import ConfigError, GoondanError

        if isinstance(exc, ConfigError):
            print_error(exc, json_mode=json_mode, color=color, exit_code=EXIT_CONFIG)
            extra = len(exc.errors) - 1
            if extra > 0 and not json_mode:
                sys.stderr.write(f"  (+{extra} more problem(s): run `gdn validate` to see them all)\n")
            return EXIT_CONFIG
        if isinstance(exc, GoondanError):
            from ._output import exit_code_for

            code = exit_code_for(exc.code)  # a tool or extension that does not load is config (3)
            print_error(exc, json_mode=json_mode, color=color, exit_code=code)
            return code
        if getattr(args, "verbose", 0):
            import traceback

            traceback.print_exc()
        print_error(
            ErrorView(
                {
                    "code": "INTERNAL_ERROR",
                    "message": f"{type(exc).__name__}: {exc}",
                    "suggestion": "Re-run with -v for a traceback and report it.",
                }
            ),
            json_mode=json_mode,
            color=color,
            exit_code=EXIT_INTERNAL,
        )
        return EXIT_INTERNAL


__all__ = [
    "EXIT_CONFIG",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VALIDATION",
    "build_parser",
    "load_env",
    "main",
]
