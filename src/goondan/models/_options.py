"""``Model.spec.options`` understood by every network provider (anthropic, openai, google).

Options use the YAML spelling. Unknown keys are rejected so that a typo (``timeout: 30``) does not
silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ModelError

_NUMBER_FIELDS = {
    "timeoutSeconds": "timeout",
    "retryBaseDelaySeconds": "retry_base_delay",
    "retryMaxDelaySeconds": "retry_max_delay",
    "maxRetryAfterSeconds": "max_retry_after",
}


@dataclasses.dataclass(frozen=True, slots=True)
class NetworkOptions:
    timeout: float = 300.0  # per request; while streaming, the longest silence between two chunks
    max_retries: int = 3  # retries after the first attempt, on 408/409/429/5xx/connection errors/timeouts
    retry_base_delay: float = 0.5  # first backoff; doubles per retry, with jitter
    retry_max_delay: float = 20.0  # cap of one computed backoff
    max_retry_after: float = 60.0  # longest server-requested wait (retry-after) we honour
    stream: bool = True  # stream when someone listens to text deltas
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # provider-specific keys


def parse_network_options(
    provider: str, options: dict[str, Any], provider_keys: frozenset[str] = frozenset()
) -> NetworkOptions:
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in options.items():
        if key in _NUMBER_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise _bad(provider, key, "a number >= 0")
            values[_NUMBER_FIELDS[key]] = float(value)
        elif key == "maxRetries":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _bad(provider, key, "an integer >= 0")
            values["max_retries"] = value
        elif key == "stream":
            if not isinstance(value, bool):
                raise _bad(provider, key, "true or false")
            values["stream"] = value
        elif key in provider_keys:
            extra[key] = value
        else:
            known = sorted({*_NUMBER_FIELDS, "maxRetries", "stream", *provider_keys})
            raise ModelError(
                "E_MODEL_CONFIG",
                f"{provider} model: unknown option {key!r}",
                suggestion=option_hint(key, known) + f"Model.spec.options accepts: {', '.join(known)}.",
            )
    if values.get("timeout") == 0:
        raise _bad(provider, "timeoutSeconds", "a number > 0")
    return NetworkOptions(**values, extra=extra)


# options of the offline providers, left in place when a bundle switches to a real one (`gdn init`'s
# model says "for a real model, replace the spec with provider: anthropic ...")
_OFFLINE_OPTIONS = {
    "rules": "scripted",
    "entry": "python",
    "modelPath": "local",
    "contextSize": "local",
    "threads": "local",
    "toolChoice": "local",
    "maxToolCalls": "local",
}


def option_hint(key: str, known: list[str]) -> str:
    """The start of an unknown option's suggestion: the provider the option belongs to, or the
    accepted option it is a misspelling of (``timeout`` for ``timeoutSeconds``); else empty."""
    owner = _OFFLINE_OPTIONS.get(key)
    if owner is not None and key not in known:
        return (
            f"'{key}' is an option of provider: {owner}, left over from it? Remove it (and options: if "
            "nothing else is left) when you switch providers. "
        )
    import difflib

    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not near:
        lowered = [k for k in known if k.lower().startswith(key.lower())]
        near = lowered[:1]
    return f"did you mean '{near[0]}'? " if near else ""


def _bad(provider: str, key: str, expected: str) -> ModelError:
    return ModelError("E_MODEL_CONFIG", f"{provider} model: options.{key} must be {expected}")
