"""Model providers. ``create_model_adapter`` imports a provider's module (and SDK) only when a
bundle actually uses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ModelError
from ._base import ModelAdapter, ModelRequest, ModelResponse, ModelToolCall, normalize_usage
from ._providers import KNOWN_PROVIDERS, PROVIDER_EXTRAS


def create_model_adapter(
    provider: str,
    *,
    model: str,
    options: dict[str, Any] | None = None,
    root: Path | None = None,
    api_key: str | None = None,
    endpoint: str | None = None,
) -> ModelAdapter:
    options = options or {}
    if provider == "python":
        entry = options.get("entry")
        if not isinstance(entry, str) or root is None:
            raise ModelError("E_MODEL_CONFIG", "python provider needs options.entry")
        from ._python import PythonModel

        return PythonModel((root / entry).resolve(), model)
    if provider == "scripted":
        rules = options.get("rules")
        if not isinstance(rules, list):
            raise ModelError("E_MODEL_CONFIG", "scripted provider needs options.rules (a list)")
        from ._scripted import ScriptedModel

        return ScriptedModel(rules, model)
    if provider in KNOWN_PROVIDERS:
        extra = PROVIDER_EXTRAS[provider]
        raise ModelError(
            "E_MODEL_PROVIDER_UNAVAILABLE",
            f"the '{provider}' provider is not available in this build of goondan",
            suggestion=f"Install it with `pip install 'goondan[{extra}]'` once that extra is released, or use "
            "the 'python' or 'scripted' provider.",
        )
    raise ModelError(
        "E_MODEL_PROVIDER_UNKNOWN",
        f"unknown model provider {provider!r}",
        suggestion=f"Use one of: {', '.join(sorted(KNOWN_PROVIDERS))}.",
    )


__all__ = [
    "KNOWN_PROVIDERS",
    "ModelAdapter",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "create_model_adapter",
    "normalize_usage",
]
