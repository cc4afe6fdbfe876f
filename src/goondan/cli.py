"""``gdn``: the command line (CONTRACT §9).

Imports are deferred into each command so that ``gdn --help`` loads nothing but argparse.
Exit codes: 0 ok, 1 internal/turn failure, 2 usage, 3 config, 4 validation, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_VALIDATION = 4
EXIT_INTERRUPTED = 130


class _Style:
    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.enabled = enabled and stream.isatty() and os.environ.get("NO_COLOR") is None

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text


def _print_error(exc: Any, *, json_mode: bool, color: bool, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    code = getattr(exc, "code", "INTERNAL_ERROR")
    message = getattr(exc, "message", None) or str(exc)
    suggestion = getattr(exc, "suggestion", None)
    help_url = getattr(exc, "help_url", None)
    if json_mode:
        import json

        payload: dict[str, Any] = {"code": code, "message": message}
        for key, value in (("suggestion", suggestion), ("helpUrl", help_url)):
            if value:
                payload[key] = value
        for attr in ("path", "file", "line", "column", "extension_name"):
            value = getattr(exc, attr, None)
            if value is not None:
                payload["extensionName" if attr == "extension_name" else attr] = value
        stream.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    style = _Style(stream, color)
    stream.write(f"{style(f'[{code}]', '1;31')} {message}\n")
    location = _location(exc)
    if location:
        stream.write(f"  at: {location}\n")
    if suggestion:
        stream.write(f"  suggestion: {suggestion}\n")
    if help_url:
        stream.write(f"  help: {help_url}\n")


def _location(item: Any) -> str | None:
    path = getattr(item, "path", None)
    file = getattr(item, "file", None)
    line = getattr(item, "line", None)
    column = getattr(item, "column", None)
    where = None
    if file:
        where = str(file)
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
    if path and where:
        return f"{path} ({where})"
    return path or where


# --- .env -----------------------------------------------------------------------------------


def _parse_env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def load_env(bundle_dir: Path, env_file: str | None) -> dict[str, str]:
    """Environment for a run: system < ``.env`` < ``.env.local`` < ``--env-file`` (digest §8)."""
    from .errors import GoondanError

    env = dict(os.environ)
    for name in (".env", ".env.local"):
        candidate = bundle_dir / name
        if candidate.is_file():
            env.update(_parse_env_file(candidate))
    if env_file:
        path = Path(env_file)
        if not path.is_file():
            raise GoondanError(
                "E_ENV_FILE_NOT_FOUND",
                f"--env-file {env_file} does not exist",
                suggestion="Pass an existing file, or drop --env-file to use .env/.env.local.",
            )
        env.update(_parse_env_file(path))
    return env


def _bundle_dir(path: str) -> Path:
    p = Path(path)
    return p.parent if p.suffix in (".yaml", ".yml") else p


# --- validate -------------------------------------------------------------------------------


def _issue_dict(issue: Any) -> dict[str, Any]:
    data: dict[str, Any] = issue.to_dict()
    return data


def cmd_validate(args: argparse.Namespace) -> int:
    import json

    from .bundle import validate_bundle

    bundle_dir = _bundle_dir(args.path)
    env = load_env(bundle_dir, getattr(args, "env_file", None)) if bundle_dir.is_dir() else dict(os.environ)
    report = validate_bundle(args.path, env=env, state_root=_state_root(args))
    errors = list(report.errors)
    warnings = list(report.warnings)
    if args.strict:
        from .errors import ConfigIssue

        for w in warnings:
            errors.append(
                ConfigIssue(
                    f"STRICT_{w.code}",
                    w.message,
                    path=w.path,
                    file=w.file,
                    line=w.line,
                    column=w.column,
                    suggestion=w.suggestion,
                )
            )
    valid = not errors
    out = sys.stdout
    fmt = "json" if args.json else args.format
    if fmt == "json":
        out.write(
            json.dumps(
                {
                    "valid": valid,
                    "errors": [_issue_dict(e) for e in errors],
                    "warnings": [_issue_dict(w) for w in warnings],
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
    elif fmt == "github":
        for level, items in (("error", errors), ("warning", warnings)):
            for item in items:
                attrs = []
                if item.file:
                    attrs.append(f"file={item.file}")
                if item.line:
                    attrs.append(f"line={item.line}")
                if item.column:
                    attrs.append(f"col={item.column}")
                prefix = f"::{level} {','.join(attrs)}" if attrs else f"::{level}"
                out.write(f"{prefix}::[{item.code}] {item.message}\n")
        out.write(f"Summary: errors={len(errors)}, warnings={len(warnings)}\n")
    else:
        style = _Style(out, not args.no_color)
        if not args.quiet:
            out.write(f"Validating {args.path}...\n")
        for title, items, color in (("Errors", errors, "31"), ("Warnings", warnings, "33")):
            if not items:
                continue
            out.write(f"{style(title + ':', '1;' + color)}\n")
            for item in items:
                out.write(f"  - {style('[' + item.code + ']', color)} {item.message}\n")
                location = _location(item)
                if location:
                    out.write(f"    at: {location}\n")
                if item.suggestion:
                    out.write(f"    suggestion: {item.suggestion}\n")
                out.write(f"    help: {item.help_url}\n")
        out.write(f"Summary: errors={len(errors)}, warnings={len(warnings)}\n")
        if valid and not args.quiet:
            out.write(style("Bundle is valid.", "32") + "\n")
    return EXIT_OK if valid else EXIT_VALIDATION


# --- run --------------------------------------------------------------------------------------


def _state_root(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "state_root", None)
    return Path(value) if value else None


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    if args.input is not None and args.input_file is not None:
        sys.stderr.write("[INVALID_ARGUMENT] use either --input or --input-file, not both\n")
        return EXIT_USAGE
    text: str | None = args.input
    if args.input_file is not None:
        try:
            text = Path(args.input_file).read_text(encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(f"[INVALID_ARGUMENT] cannot read --input-file: {exc}\n")
            return EXIT_USAGE
    bundle_dir = _bundle_dir(args.path)
    env = load_env(bundle_dir, args.env_file)
    return asyncio.run(_run_async(args, text, env))


async def _run_async(args: argparse.Namespace, text: str | None, env: Mapping[str, str]) -> int:
    import json

    from .bundle import load_bundle
    from .runtime import Runtime

    bundle = load_bundle(args.path, env=env, state_root=_state_root(args))
    async with Runtime(
        bundle, state_root=args.state_root, swarm=args.swarm, persist=not args.no_persist, env=env
    ) as rt:
        if text is not None:
            result = await rt.request(text, agent=args.agent, instance_key=args.instance_key)
            if args.json:
                sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")
            elif result.text is not None:
                sys.stdout.write(result.text + "\n")
            if result.finish_reason == "error":
                err = result.error or {}
                if not args.json:
                    _print_error(_ErrorView(err), json_mode=False, color=not args.no_color)
                return EXIT_INTERNAL
            return EXIT_OK
        return await _interactive(rt, args)


class _ErrorView:
    def __init__(self, err: Mapping[str, Any]) -> None:
        self.code = err.get("code") or "E_TURN_FAILED"
        self.message = err.get("message") or "turn failed"
        self.suggestion = err.get("suggestion")
        self.help_url = err.get("helpUrl")


async def _interactive(rt: Any, args: argparse.Namespace) -> int:
    """Read one request per line from stdin and print each reply (``/quit`` or EOF ends)."""
    import asyncio

    tty = sys.stdin.isatty()
    if tty:
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
        sys.stderr.write(
            f"Chatting with {args.agent or rt.entry_agent} (swarm {rt.swarm_name}). /quit to exit.\n"
        )
    loop = asyncio.get_running_loop()
    while True:
        try:
            line = await loop.run_in_executor(None, (lambda: input("> ")) if tty else sys.stdin.readline)
        except EOFError:
            return EXIT_OK
        if not tty and line == "":
            return EXIT_OK
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return EXIT_OK
        result = await rt.request(line, agent=args.agent, instance_key=args.instance_key)
        if result.finish_reason == "error":
            _print_error(_ErrorView(result.error or {}), json_mode=False, color=not args.no_color)
        elif result.text is not None:
            sys.stdout.write(result.text + "\n")
            sys.stdout.flush()


# --- parser ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-root", metavar="DIR", help="state directory (default: $GOONDAN_STATE_ROOT or ~/.goondan)"
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    common.add_argument("-q", "--quiet", action="store_true", help="only errors")
    common.add_argument("--no-color", action="store_true", help="disable colored output")

    parser = argparse.ArgumentParser(
        prog="gdn",
        description="Goondan: run declarative swarms of LLM agents.",
        parents=[common],
        epilog="Run 'gdn <command> --help' for a command's options. Docs: https://goondan.ai",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")

    v = sub.add_parser(
        "validate",
        parents=[common],
        help="check a bundle and report every problem",
        description="Validate a bundle (goondan.yaml and its resource files). Exit 0 when valid, 4 when not.",
    )
    v.add_argument("path", nargs="?", default=".", help="bundle directory or goondan.yaml (default: .)")
    v.add_argument("--format", choices=("text", "json", "github"), default="text", help="output format")
    v.add_argument("--strict", action="store_true", help="treat warnings as errors")
    v.add_argument("--env-file", metavar="FILE", help="extra environment file (after .env and .env.local)")
    v.set_defaults(func=cmd_validate)

    r = sub.add_parser(
        "run",
        parents=[common],
        help="run a swarm: one request with --input, else a stdin session",
        description="Run a swarm. With --input/--input-file, send one request to the agent and print the final "
        "text. Without them, read one request per line from stdin until EOF or /quit.",
    )
    r.add_argument("path", nargs="?", default=".", help="bundle directory or goondan.yaml (default: .)")
    r.add_argument("--swarm", "-s", metavar="NAME", help="swarm to run (default: 'default' or the only one)")
    r.add_argument("--input", metavar="TEXT", help="send TEXT as one request and print the reply")
    r.add_argument("--input-file", metavar="FILE", help="send the contents of FILE as one request")
    r.add_argument("--agent", metavar="NAME", help="agent to address (default: the swarm's entryAgent)")
    r.add_argument(
        "--instance-key", metavar="KEY", help="conversation key (default: the swarm's instanceKey)"
    )
    r.add_argument("--env-file", metavar="FILE", help="extra environment file (after .env and .env.local)")
    r.add_argument("--no-persist", action="store_true", help="keep the conversation in memory only")
    r.set_defaults(func=cmd_run)
    return parser


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
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    _configure_logging(args)
    try:
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        from .errors import ConfigError, GoondanError

        if isinstance(exc, ConfigError):
            _print_error(exc, json_mode=args.json, color=not args.no_color)
            extra = len(exc.errors) - 1
            if extra > 0 and not args.json:
                sys.stderr.write(f"  (+{extra} more problem(s): run `gdn validate` to see them all)\n")
            return EXIT_CONFIG
        if isinstance(exc, GoondanError):
            _print_error(exc, json_mode=args.json, color=not args.no_color)
            return EXIT_INTERNAL
        if args.verbose:
            import traceback

            traceback.print_exc()
        _print_error(
            _ErrorView(
                {
                    "code": "INTERNAL_ERROR",
                    "message": f"{type(exc).__name__}: {exc}",
                    "suggestion": "Re-run with -v for a traceback and report it.",
                }
            ),
            json_mode=args.json,
            color=not args.no_color,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
