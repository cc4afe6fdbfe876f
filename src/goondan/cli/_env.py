"""Environment for a command: system < ``.env`` < ``.env.local`` < ``--env-file``, later wins."""

from __future__ import annotations

import os
from pathlib import Path


def parse_env_file(path: Path) -> dict[str, str]:
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
    """Environment for a run: system < ``.env`` < ``.env.local`` < ``--env-file``, later wins."""
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
