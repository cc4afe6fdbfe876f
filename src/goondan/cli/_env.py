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


def parse_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` pairs of one dotenv file (a bare ``KEY`` without ``=`` sets nothing)."""
    from dotenv import dotenv_values

    return {key: value for key, value in dotenv_values(path, encoding="utf-8").items() if value is not None}


def load_env(bundle_dir: Path, env_file: str | None) -> dict[str, str]:
    """Environment for a run: ``--env-file`` > ``.env.local`` > ``.env`` > ``os.environ``."""
    from ..errors import ConfigError

    env = dict(os.environ)
    for name in (".env", ".env.local"):
        candidate = bundle_dir / name
        if candidate.is_file():
            env.update(parse_env_file(candidate))
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
        env.update(parse_env_file(path))
    return env


def bundle_dir(path: str) -> Path:
    p = Path(path)
    return p.parent if p.suffix in (".yaml", ".yml") else p
