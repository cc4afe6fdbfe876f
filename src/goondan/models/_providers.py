"""The provider names ``Model.spec.provider`` accepts, and the extra that provides each.

Kept free of imports so that bundle validation can check provider names without loading any SDK.
"""

from __future__ import annotations

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
