"""ValueSource resolution: literal values, environment variables and env-backed secrets.

The policy follows the spec, not upstream code: a *required* field whose variable is unset is a load
error; an *optional* one stays unset (``None``). An empty string is never substituted for a missing
variable, because a blank API key or token fails much later and far less clearly.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from goondan.errors import ConfigError

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


def secret_env_name(secret: str, key: str) -> str:
    """``GOONDAN_SECRET_<SECRET>_<KEY>``: upper-cased, every non-alphanumeric character ``_``."""
    return "GOONDAN_SECRET_{}_{}".format(_NON_ALNUM.sub("_", secret).upper(), _NON_ALNUM.sub("_", key).upper())


def value_source_problem(vs: Any) -> str | None:
    """Why ``vs`` is not a ValueSource, or None when it is well-formed."""
    if not isinstance(vs, Mapping):
        return "a ValueSource must be a mapping: {value} or {valueFrom: {env} | {secretRef}}"
    keys = set(vs)
    if keys - {"value", "valueFrom"}:
        bad = sorted(keys - {"value", "valueFrom"})[0]
        return f"unknown key {bad!r} in ValueSource (allowed: value, valueFrom)"
    if ("value" in vs) == ("valueFrom" in vs):
        return "a ValueSource needs exactly one of 'value' or 'valueFrom'"
    if "value" in vs:
        return None if isinstance(vs["value"], str) else "'value' must be a string (quote numbers)"
    source = vs["valueFrom"]
    if not isinstance(source, Mapping):
        return "'valueFrom' must be a mapping with 'env' or 'secretRef'"
    if set(source) - {"env", "secretRef"}:
        bad = sorted(set(source) - {"env", "secretRef"})[0]
        return f"unknown key {bad!r} in valueFrom (allowed: env, secretRef)"
    if ("env" in source) == ("secretRef" in source):
        return "'valueFrom' needs exactly one of 'env' or 'secretRef'"
    if "env" in source:
        env = source["env"]
        return None if isinstance(env, str) and env else "'valueFrom.env' must be a non-empty variable name"
    secret = source["secretRef"]
    if not isinstance(secret, Mapping) or set(secret) != {"ref", "key"}:
        return "'secretRef' must be {ref: 'Secret/<name>', key: <key>}"
    ref, key = secret["ref"], secret["key"]
    if not isinstance(ref, str) or not ref.startswith("Secret/") or len(ref.split("/")) != 2 or ref == "Secret/":
        return "'secretRef.ref' must look like 'Secret/<name>'"
    if not isinstance(key, str) or not key:
        return "'secretRef.key' must be a non-empty string"
    return None


def lookup_value_source(vs: Mapping[str, Any], env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Return ``(value, variable)``: the value (None when unset) and the env variable consulted."""
    if "value" in vs:
        return str(vs["value"]), None
    source = vs["valueFrom"]
    if "env" in source:
        name = str(source["env"])
    else:
        secret = source["secretRef"]
        name = secret_env_name(str(secret["ref"]).split("/", 1)[1], str(secret["key"]))
    return env.get(name), name


def resolve_value_source(
    vs: Mapping[str, Any] | None, env: Mapping[str, str], *, required: bool, path: str
) -> str | None:
    """Resolve a ValueSource; ``path`` (e.g. ``Connection/slack spec.secrets.token``) names it in errors.

    Raises ConfigError ``E_CONFIG_SCHEMA_INVALID`` for a malformed source and ``E_CONFIG_ENV_MISSING``
    when a required variable is unset. Optional unset values come back as None.
    """
    if vs is None:
        if required:
            raise ConfigError("E_CONFIG_SCHEMA_INVALID", f"{path}: a value is required", path=path)
        return None
    if hasattr(vs, "model_dump"):  # accept the parsed pydantic model as well as raw YAML data
        vs = vs.model_dump(by_alias=True, exclude_none=True)
    problem = value_source_problem(vs)
    if problem is not None:
        raise ConfigError("E_CONFIG_SCHEMA_INVALID", f"{path}: {problem}", path=path)
    value, variable = lookup_value_source(vs, env)
    if value is None and required:
        raise ConfigError(
            "E_CONFIG_ENV_MISSING",
            env_missing_message(variable or "?", path),
            path=path,
            suggestion=env_missing_suggestion(variable or "?", env),
        )
    return value


def env_missing_message(variable: str, where: str) -> str:
    return f"required environment variable {variable} is not set (needed by {where})"


def env_missing_suggestion(variable: str, env: Mapping[str, str] | None = None) -> str:
    """How to set ``variable``; first, a variable of ``env`` (the environment with the bundle's
    ``.env``) that is nearly its name, since a key put in ``.env`` under a slightly other name
    (``ANTHROPIC_APIKEY``, ``ANTROPIC_API_KEY`` in the YAML) looked like a key that vanished."""
    near = near_variable(variable, env) if env else None
    hint = (
        f"{near} is set, not {variable}: if it holds this value, make the two names match; otherwise " if near else ""
    )
    return hint + f"export {variable}=... before running, or put {variable}=... in the bundle's .env file"


def near_variable(variable: str, env: Mapping[str, str]) -> str | None:
    """A set, non-blank variable named like ``variable`` but for case, underscores or one or two
    letters (difflib ratio ≥ 0.85)."""

    def squash(name: str) -> str:
        return name.replace("_", "").replace("-", "").upper()

    names = [k for k, v in env.items() if k != variable and v and v.strip()]
    for name in names:
        if squash(name) == squash(variable):
            return name
    close = difflib.get_close_matches(variable, names, n=1, cutoff=0.85)
    return close[0] if close else None


class SecretValue(str):
    """A config value read from the environment: the string itself, but ``repr()`` hides it.

    Code uses it as the plain string it is (``str()``, f-strings, comparisons, JSON all give the
    value); only the representation Python prints for containers, ``%r`` log arguments and
    jsonschema's messages (``'...' is too short``) shows ``'***'``, so logging a config dict or
    failing a ``CONFIG_SCHEMA`` check does not write the secret anywhere.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


def is_config_value_source(value: Any) -> bool:
    """A config entry read from the environment: a mapping whose only key is ``valueFrom``."""
    return isinstance(value, Mapping) and set(value) == {"valueFrom"}


def resolve_config(config: Mapping[str, Any], env: Mapping[str, str], *, path: str) -> dict[str, Any]:
    """``config`` with each top-level ``{valueFrom: {env | secretRef}}`` replaced by the variable's value.

    This is how tools (``ctx.config``) and extensions (``register(api, config)``) receive secrets
    from ``.env`` files or the environment without writing them into ``goondan.yaml``. The value
    exists only in the running process: it is not part of any runtime event, message or state file.
    A variable that is unset is a load error (``E_CONFIG_ENV_MISSING``), never an empty string.
    """
    if not any(is_config_value_source(v) for v in config.values()):
        return dict(config)
    out = dict(config)
    for key, value in config.items():
        if is_config_value_source(value):
            out[key] = SecretValue(resolve_value_source(value, env, required=True, path=f"{path}.{key}") or "")
    return out
