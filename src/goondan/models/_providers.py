"""The provider names ``Model.spec.provider`` accepts, and the extra that provides each.

Kept free of imports so that bundle validation can check provider names without loading any SDK.
"""

from __future__ import annotations

from collections.abc import Mapping

# provider name -> pip extra that installs its SDK (None: needs nothing beyond goondan itself)
PROVIDER_EXTRAS: dict[str, str | None] = {
    "python": None,
    "scripted": None,
    "anthropic": "anthropic",
    "openai": "openai",
    "google": "google",
    "local": "local",
}

KNOWN_PROVIDERS = frozenset(PROVIDER_EXTRAS)

# provider name -> the variables its SDK reads the API key from, first found wins
DEFAULT_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}


def default_api_key(provider: str, env: Mapping[str, str]) -> str | None:
    """The key of a Model without ``apiKey``: the provider's usual variable, read from ``env``.

    ``env`` is the run's environment with the bundle's ``.env`` files on top. The SDKs read only the
    process environment, so ``OPENAI_API_KEY`` written in ``.env`` (where ``gdn init`` tells users to
    put keys) reached no agent whose Model leaves ``apiKey`` out: the first turn failed with
    E_MODEL_AUTH. A blank value counts as unset."""
    for variable in DEFAULT_KEY_VARIABLES.get(provider, ()):
        value = env.get(variable)
        if value and value.strip():
            return value
    return None
