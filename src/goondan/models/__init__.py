"""Model providers. ``create_model_adapter`` imports a provider's module (and SDK) only when a
bundle actually uses it.

Real providers: ``anthropic``, ``openai`` (and any OpenAI-compatible server through ``endpoint``),
``google``; offline: ``local`` (SmolLM2 through llama.cpp), ``python`` and ``scripted``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ModelError
from ._base import ModelAdapter, ModelRequest, ModelResponse, ModelToolCall, normalize_usage
from ._errors import ProviderError
from ._providers import DEFAULT_KEY_VARIABLES, KNOWN_PROVIDERS, default_api_key


def check_model_options(provider: str, options: dict[str, Any] | None, root: Path | None = None) -> None:
    """Check ``Model.spec.options`` of a real or local provider without importing its SDK (for bundle
    validation). Raises :class:`ModelError` (``E_MODEL_CONFIG``) naming the bad option."""
    options = options or {}
    if provider == "openai":
        from ._openai import check_options as check_openai

        check_openai(options)
    elif provider == "anthropic":
        from ._anthropic import check_options as check_anthropic

        check_anthropic(options)
    elif provider == "google":
        from ._google import check_options as check_google

        check_google(options)
    elif provider == "local":
        from ._local import parse_local_options

        parse_local_options(options, root, locate=False)


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
    if provider == "openai":
        from ._openai import OpenAIModel

        return OpenAIModel(model, options, api_key, endpoint)
    if provider == "anthropic":
        from ._anthropic import AnthropicModel

        return AnthropicModel(model, options, api_key, endpoint)
    if provider == "google":
        from ._google import GoogleModel

        return GoogleModel(model, options, api_key, endpoint)
    if provider == "local":
        from ._local import LocalModel

        return LocalModel(model, options, root)
    raise ModelError(
        "E_MODEL_PROVIDER_UNKNOWN",
        f"unknown model provider {provider!r}",
        suggestion=f"Use one of: {', '.join(sorted(KNOWN_PROVIDERS))}.",
    )


__all__ = [
    "DEFAULT_KEY_VARIABLES",
    "KNOWN_PROVIDERS",
    "ModelAdapter",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "ProviderError",
    "check_model_options",
    "create_model_adapter",
    "default_api_key",
    "normalize_usage",
]
