"""The environment a command runs with (docs/handbook.md#environment-env-files-and-secrets).

Precedence, highest first: ``--env-file FILE`` > ``.env.local`` > ``.env`` > the process environment.
The files sit in the bundle directory; ``.env.local`` is the untracked per-machine override of a
shared ``.env``. Files are read with python-dotenv (quotes, ``export``, multi-line values and
``${VAR}`` expansion as everywhere else dotenv is used); nothing is written back to ``os.environ``:
the result is handed to the bundle loader, which resolves ``valueFrom: {env: ...}`` sources from it.
"""

from __future__ import annotations

import os
from pathlib import Path


def parse_env_file(path: Path, shown: str | None = None) -> dict[str, str]:
    """``KEY=value`` pairs of one dotenv file (a bare ``KEY`` without ``=`` sets nothing).

    A file that is not UTF-8 (saved as Latin-1 or UTF-16 by an editor) is a config error naming its
    line, ``shown`` being the name the message uses; it used to end the command as an internal error.
    """
    from dotenv import dotenv_values

    try:
        _refuse_unparsed(path, shown or str(path))  # before dotenv, which logs its own cryptic warning
        values = dotenv_values(path, encoding="utf-8")
    except UnicodeDecodeError:
        raise _not_utf8(path, shown or str(path)) from None
    return {key: value for key, value in values.items() if value is not None}


def _refuse_unparsed(path: Path, shown: str) -> None:
    """A line that is not ``KEY=value`` (``TOKEN: abc``, ``TOKEN abc``, an unclosed quote) is a config
    error at its line: dotenv logged "could not parse statement starting at line 1" and skipped it,
    and the bundle then said TOKEN "is not set ... put TOKEN=... in the bundle's .env file", which
    the user believed they had done."""
    import io
    import re

    from dotenv.parser import parse_stream

    from ..errors import ConfigError

    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError:  # pragma: no cover - dotenv just read it
        return
    bad = next((b for b in parse_stream(io.StringIO(text)) if b.error), None)
    if bad is None:
        return
    line = bad.original.string.splitlines()[0] if bad.original.string.strip() else bad.original.string
    match = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*[:\s]\s*(\S.*?)\s*$", line)
    example = f" ({match.group(1)}={match.group(2)})" if match and "=" not in line else ""
    raise ConfigError(
        "E_CONFIG_PARSE_ERROR",
        f"{shown}:{bad.original.line}: not a KEY=value line: {line.strip()!r}",
        file=shown,
        line=bad.original.line,
        column=1,
        suggestion=f"write it as KEY=value{example}; quote a value with spaces, # or a quote in it "
        '(KEY="a b"), or start the line with # to make it a comment',
    )


def _not_utf8(path: Path, shown: str) -> Exception:
    from ..errors import ConfigError

    line = column = None
    where = ""
    try:
        path.read_bytes().decode("utf-8")  # again, whole: the reader's offset is within its chunk
    except UnicodeDecodeError as exc:
        data = exc.object
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        where = f" (byte 0x{data[exc.start]:02x} at line {line}, column {column})"
    except OSError:  # pragma: no cover - it was just read
        pass
    return ConfigError(
        "E_CONFIG_PARSE_ERROR",
        f"{shown} is not valid UTF-8{where}",
        file=shown,
        line=line,
        column=column,
        suggestion=f"save {shown} as UTF-8 (from Latin-1: `iconv -f latin1 -t utf-8 {shown} > {shown}.new`, "
        "check it, then rename it over the original)",
    )


def load_env(bundle_dir: Path, env_file: str | None) -> dict[str, str]:
    """Environment for a run: ``--env-file`` > ``.env.local`` > ``.env`` > ``os.environ``."""
    from ..errors import ConfigError

    env = dict(os.environ)
    for name in (".env", ".env.local"):
        candidate = bundle_dir / name
        if candidate.is_file():
            env.update(parse_env_file(candidate, name))
    if env_file:
        path = Path(env_file)
        if not path.is_file():
            # a config error like a missing goondan.yaml: exit 3 from `gdn run`, 4 from `gdn validate`
            raise ConfigError(
                "E_ENV_FILE_NOT_FOUND",
                f"--env-file {env_file} does not exist",
                suggestion="Pass an existing file, or drop --env-file to use .env/.env.local.",
                file=env_file,
            )
        env.update(parse_env_file(path, env_file))
    return env


def bundle_dir(path: str) -> Path:
    p = Path(path)
    return p.parent if p.suffix in (".yaml", ".yml") else p
