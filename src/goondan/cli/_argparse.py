"""argparse as people expect it from a modern CLI: did-you-mean, the subcommand's own usage on errors,
defaults and examples in every ``--help``.

Everything here is plain argparse (stdlib only), so ``gdn --help`` still imports nothing else. The
examples live in one table (:data:`EXAMPLES`) keyed by command path, so a subcommand another module
registers (``gdn studio``, ``gdn eval``) gets its examples section without touching its code; a
command missing from the table still gets one line, its bare invocation.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from ._output import EXIT_USAGE

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "gdn init my-swarm && cd my-swarm",
        "gdn validate",
        "gdn run --input 'hello'",
        "gdn help run",
    ),
    "init": (
        "gdn init my-swarm",
        "gdn init -t multi-agent team --git",
        "gdn init -t package acme-tools      # a Goondan package to publish on PyPI",
    ),
    "validate": (
        "gdn validate",
        "gdn validate path/to/bundle --format json",
        "gdn validate --fix --yes           # apply mechanical fixes after showing the diff",
    ),
    "run": (
        "gdn run --input 'summarize README.md'",
        "gdn run --input-file question.txt --json",
        "gdn run -s support --instance-key user-42",
        "gdn run                            # chat, or serve the swarm's connectors",
    ),
    "restart": ("gdn restart", "gdn restart --agent worker --fresh"),
    "instance": ("gdn instance list", "gdn instance delete user-42 --yes"),
    "instance list": ("gdn instance list", "gdn instance list -A --all"),
    "instance delete": ("gdn instance delete user-42", "gdn instance delete user-42 --agent worker --yes"),
    "instance restart": ("gdn instance restart my-swarm", "gdn instance restart my-swarm --fresh"),
    "approvals": (
        "gdn approvals list",
        "gdn approvals approve appr_1a2b3c",
        "gdn approvals deny appr_1a2b3c --note 'no'",
    ),
    "approvals list": ("gdn approvals list", "gdn approvals list --agent worker --json"),
    "approvals approve": (
        "gdn approvals approve appr_1a2b3c",
        'gdn approvals approve appr_1a2b3c --args \'{"path": "a"}\'',
    ),
    "approvals deny": ("gdn approvals deny appr_1a2b3c --note 'use the staging database'",),
    "logs": ("gdn logs", "gdn logs -a worker -l 50", "gdn logs --trace 3f2a9c1b --json", "gdn logs -f"),
    "doctor": ("gdn doctor", "gdn doctor path/to/bundle --json"),
    "schema": ("gdn schema -o goondan.schema.json", "gdn schema --kind Agent"),
    "help": ("gdn help", "gdn help run", "gdn help instance list"),
    "completion": (
        "gdn completion bash > ~/.local/share/bash-completion/completions/gdn",
        'gdn completion zsh > "${fpath[1]}/_gdn"',
        "gdn completion fish > ~/.config/fish/completions/gdn.fish",
    ),
    "package": ("gdn package add 'acme-tools>=1.2'", "gdn package install", "gdn package build"),
    "package add": (
        "gdn package add acme-tools",
        "gdn package add 'acme-tools>=1.2,<2'",
        "gdn package add acme-tools --no-index --find-links ./wheels",
    ),
    "package install": ("gdn package install", "gdn package install --no-index --find-links ./wheels"),
    "package lock": ("gdn package lock",),
    "package build": ("gdn package build", "gdn package build --outdir dist && twine upload dist/*"),
}


def cache_translations() -> None:
    """Memoize argparse's message lookups for this process.

    argparse translates its texts ("options", "usage: ", ...) through gettext for every parser it
    builds, about 80 lookups for gdn's tree, and gettext searches the locale directories on disk each
    time a language has no catalog: on a busy machine that was most of ``gdn --help`` (measured
    ~25 ms warm, several times that under load, against ~3 ms cached). The lookups are pure functions
    of the text, so the cache returns the same (possibly translated) strings.
    """
    translate = getattr(argparse, "_", None)
    if translate is not None and not hasattr(translate, "cache_info"):
        argparse._ = functools.lru_cache(maxsize=256)(translate)  # type: ignore[attr-defined]


def _suggest(word: str, choices: Sequence[str]) -> str | None:
    import difflib  # only on the error path

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs keep their line breaks; every option shows its default.

    ``ArgumentDefaultsHelpFormatter`` would append ``(default: None)`` and ``(default: False)`` and
    repeat defaults a help text already explains, so only real values are shown and only once.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default in (None, False, argparse.SUPPRESS)
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
            or not (action.option_strings or action.nargs in ("?", "*"))
        ):
            return action.help
        return f"{text} (default: {default})" if text else f"(default: {default})"


# options named as the Python API names them (Runtime(isolation=...)) -> the command line's name
_OPTION_RENAMES = {"--isolation": "--executor"}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors name the subcommand's usage and suggest the closest spelling.

    A subcommand with a required positional followed by an optional one (``gdn instance delete KEY
    [PATH]``) accepts its options anywhere: plain argparse consumes the positionals in one go, so
    ``KEY -y PATH`` left PATH over as an "unrecognized argument". Such a leaf parser parses
    intermixed (options first, then the positionals left), as a user expects of any CLI.
    """

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self._intermixing and self._positionals_split():
            self._intermixing = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False
        return super().parse_known_args(args, namespace)

    def _positionals_split(self) -> bool:
        """More than one positional and no subcommands: where options between them go astray."""
        positionals = [a for a in self._actions if not a.option_strings]
        return len(positionals) > 1 and not any(
            isinstance(a, argparse._SubParsersAction) or a.nargs in (argparse.PARSER, argparse.REMAINDER)
            for a in positionals
        )

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        hint = ""
        marker = "invalid choice: "
        if marker in message:
            wrong = message.split(marker, 1)[1].split("'")[1] if "'" in message else ""
            choices = [c for a in self._actions if a.choices for c in a.choices]
            close = _suggest(wrong, [str(c) for c in choices])
            if close:
                hint = f"\n  did you mean '{close}'?"
        sys.stderr.write(f"{self.prog}: error: {message}{hint}\n")
        sys.stderr.write(f"  run '{self.prog} --help' for its options and examples\n")
        sys.exit(EXIT_USAGE)

    def unknown_options(self, extras: Sequence[str]) -> NoReturn:
        """Arguments no parser took: report them against this (the innermost) subcommand."""
        options = [o for a in self._actions for o in a.option_strings]
        hints = []
        values: set[int] = set()  # positions of words that are the value of an unknown option
        for i, word in enumerate(extras):
            if word.startswith("-"):
                name = word.split("=", 1)[0]
                close = _OPTION_RENAMES.get(name) if _OPTION_RENAMES.get(name) in options else None
                close = close or _suggest(name, options)
                if close:
                    hints.append(f"\n  did you mean '{close}' instead of '{name}'?")
                if "=" not in word and i + 1 < len(extras) and not extras[i + 1].startswith("-"):
                    values.add(i + 1)
        words = [w for i, w in enumerate(extras) if not w.startswith("-") and i not in values]
        if words and "--input" in options:  # `gdn run my-bot hello` / `gdn run my-bot -i hello`
            import shlex

            hints.append(f"\n  to send text, use --input {shlex.quote(' '.join(words))}")
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: unrecognized arguments: {' '.join(extras)}{''.join(hints)}\n")
        sys.stderr.write(f"  run '{self.prog} --help' for its options and examples\n")
        sys.exit(EXIT_USAGE)


def examples_epilog(path: str, extra: str | None = None) -> str:
    lines = EXAMPLES.get(path) or (f"gdn {path}".rstrip(),)
    text = "examples:\n" + "\n".join(f"  {line}" for line in lines)
    return f"{text}\n\n{extra}" if extra else text


def subparsers_of(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of each direct subcommand, in the order they were added (aliases skipped)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, sub


def walk(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the tree with its command path (``""``, ``"run"``, ``"instance list"``, ...)."""
    yield path, parser
    for name, sub in subparsers_of(parser):
        yield from walk(sub, f"{path} {name}".strip())


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every parser of the tree the shared formatter and an examples section.

    Run once after all commands are registered, so commands added by other modules (a one-line
    registration call in ``build_parser``) get the same treatment as ours.
    """
    for path, p in walk(parser):
        p.formatter_class = HelpFormatter
        if "examples:" not in (p.epilog or ""):
            p.epilog = examples_epilog(path, p.epilog)
    return parser


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The deepest subcommand parser the parsed ``args`` went through (for error reports)."""
    current = parser
    while True:
        chosen = None
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(args, action.dest, None) if action.dest != argparse.SUPPRESS else None
                if isinstance(name, str) and name in action.choices:
                    chosen = action.choices[name]
        if chosen is None:
            return current
        current = chosen


class VersionAction(argparse.Action):
    """``-V/--version``: the version is read from the installed metadata only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> NoReturn:
        sys.stdout.write(version_line() + "\n")
        sys.exit(0)


def version_line() -> str:
    from importlib import metadata

    from .._dist import DIST_NAME

    try:
        version = metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        from .. import __version__ as version
    python = ".".join(map(str, sys.version_info[:3]))
    return f"gdn {version} ({DIST_NAME}, Python {python})"
